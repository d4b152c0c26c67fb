"""Run by tests/test_train_loaders.py with verl's own Python (PASSBAND_VERL_PYTHON): verl's RLHFDataset and
custom-reward loader on a passband export. Prints one JSON line of what it saw.

    python tests/support/verl_loader_check.py <published folder> <embedded model dir>
"""

import json
import sys

from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.rl_dataset import RLHFDataset


def main() -> None:
    folder, model_dir, cache = sys.argv[1], sys.argv[2], sys.argv[3]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": True,
                               "truncation": "error", "cache_dir": cache})
    ds = RLHFDataset(f"{folder}/exports/verl/learnable/train.parquet", tokenizer, config)
    item = ds[0]
    reward_config = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": f"{folder}/exports/verl/reward.py", "name": "compute_score"}}})
    score = get_custom_reward_fn(reward_config)
    gold = item["reward_model"]["ground_truth"]
    print(json.dumps({
        "len": len(ds), "raw_prompt": list(item["raw_prompt"]), "data_source": item["data_source"],
        "ground_truth": gold, "problem_id": item["extra_info"]["problem_id"],
        "right": score(data_source=item["data_source"], solution_str=f"The answer is {gold}.", ground_truth=gold,
                       extra_info=item["extra_info"]),
        "wrong": score(data_source=item["data_source"], solution_str="The answer is 1234567.", ground_truth=gold,
                       extra_info=item["extra_info"]),
    }, default=str))


if __name__ == "__main__":  # the verifier's worker pool starts from a forkserver
    main()
