"""The dataset card's body, section by section, in order: each section gives its lines, ending with the blank line
that separates it from the next. Pure: tables in, text out.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.bands import LEARNABLE, TOO_EASY, TOO_HARD, UNSOLVED, describe_ranges
from pipeline.publish import rollouts as ro
from pipeline.publish.card_parts import (
    EMPTY_CONFIG,
    HISTOGRAM,
    PLACEHOLDER_REPO,
    BuildInfo,
    CardSpec,
    config_what,
    md_code,
    md_table,
    md_text,
    sample_counts,
    size_text,
    type_name,
)
from pipeline.publish.card_tables import (
    counts_table,
    drift_lines,
    flags_table,
    loading_text,
    policy_table,
    reformulation_table,
    source_difficulty_lines,
)
from pipeline.publish.core import COLUMNS, DEFAULT_CONFIG, Dataset


def _intro(dataset: Dataset, *, spec: CardSpec) -> list[str]:
    p = dataset.primary
    ks = "/".join(str(n) for n in sorted(sample_counts(dataset)))
    return [
        f"# {md_text(spec.pretty_name)}",
        "",
        "Math problems annotated with **model-relative difficulty**: the pass rate of one policy snapshot",
        f"({md_code(p['name'])}) measured from {ks} sampled rollouts per problem,",
        "verified with math-verify, with a 95 % interval, a band and the band's posterior confidence. Built with",
        "passband (`passband publish`). Difficulty is a property of the policy, not of the problem: re-measure",
        "for another checkpoint before you rely on the bands.",
        "",
    ]


def _configs(dataset: Dataset, *, files: dict[str, dict[str, str]],
             rollouts: ro.RolloutsSummary | None = None) -> list[str]:
    rows = [[f"`{c}`", dataset.rows(c), config_what(c) + ("" if c in files else EMPTY_CONFIG)] for c in dataset.configs]
    if rollouts is not None:
        rows.append([f"`{ro.CONFIG}`", rollouts.total_rows,
                     "the completions behind the pass rates, one row per item and policy (see Rollouts below)"
                     + ("" if rollouts.total_rows else EMPTY_CONFIG)])
    return [
        "## Configs",
        "",
        md_table(["config", "rows", "what"], rows),
        "",
        "Splits follow the sources' own splits (`train`, `test`), so test items never land in a train split.",
        f"Not published: {dataset.unmeasured} problems and {dataset.unmeasured_reformulated} reformulations the primary "
        "policy has no measurement for"
        + (", and measured items in bands left out by publish.bands: "
           + ", ".join(f"{b} {n}" for b, n in sorted(dataset.dropped_bands.items())) if dataset.dropped_bands else "")
        + ".",
        "",
    ]


def _reformulations(dataset: Dataset) -> list[str]:
    return ["## Reformulations", "", reformulation_table(dataset), ""]


def _policy(dataset: Dataset, *, spec: CardSpec) -> list[str]:
    p = dataset.primary
    others = [q for q in dataset.policies if q["policy_id"] != p["policy_id"]]
    return [
        "## Policy",
        "",
        policy_table(dataset),
        "",
        f"The `prompt` column is rendered for training with the {md_code(spec.prompt_template)} template; the pass rates were",
        "measured with the policy's own template above.",
        "",
        *(["Other policies measured on these items (their numbers are in the `difficulty` column):", "",
           md_table(["name", "policy_id", "model", "revision", "prompt"],
                  [[md_code(q["name"]), md_code(q["policy_id"]), md_code(q["model"]), md_code(q["revision"]),
                    md_code(f"{q['prompt_template']} v{q['prompt_version']}")] for q in others]), "",
           *drift_lines(dataset, others)] if others else []),
    ]


def _bands(dataset: Dataset, *, spec: CardSpec) -> list[str]:
    return [
        "## Bands",
        "",
        f"An item's band is that of its observed pass rate: `{UNSOLVED}` no correct rollout; `{TOO_HARD}` below "
        f"{spec.learnable_min}; `{LEARNABLE}` {spec.learnable_min} to {spec.learnable_max}; `{TOO_EASY}` above "
        f"{spec.learnable_max}.",
        "`band_confidence` is the posterior probability (Jeffreys prior) that the *true* pass rate lies in the band's range:",
        f"{describe_ranges(spec)}.",
        "Items per band under the primary policy:",
        "",
        counts_table(dataset),
        "",
        f"![pass-rate histogram]({HISTOGRAM})",
        "",
    ]


def _flags(dataset: Dataset) -> list[str]:
    return [
        "## Shortcut flags",
        "",
        "Per rollout, passband flags successes that may not come from solving (`shortcut`), the rare successes GRPO",
        "amplifies (`risk`) and degenerate text (`degeneracy`); `flag_rates` holds each item's rates. Mean rate over",
        "the items here, next to each flag's precision and recall measured on labelled real completions of the",
        "embedded model (passband's docs/flags.md):",
        "",
        flags_table(dataset),
        "",
        "`unsupported_answer` marks a success GRPO would reward although its working is wrong: a false step",
        "(`21 - 15 = 3`), no true computation that gives the answer, or working that never uses some number of the",
        "question (`19 + 20 = 39` where 4 bags of 10 are needed too). Training on it teaches the policy that the",
        "working does not matter; drop or down-weight items whose correct rollouts carry it.",
        "",
    ]


SUSPECTS_SHOWN = 10


def _suspect_golds(dataset: Dataset) -> list[str]:
    """The items whose answer key the primary policy's rollouts doubt (``gold_suspect``), and how to drop them."""
    cols = ["problem_id", "answer", "pass_rate", "gold_suspicion", "gold_suspect"]
    items = suspect = 0
    expected = expected_suspect = 0.0  # the wrong keys the score expects: in the set, among the flagged items
    top: list[dict] = []  # the most suspect so far, at most SUSPECTS_SHOWN

    def order(r: dict) -> tuple:
        return -r["gold_suspicion"], r["problem_id"]

    for rows in dataset.configs[DEFAULT_CONFIG].values():
        items += rows.num_rows
        for batch in rows.batches(cols):
            table = pa.Table.from_batches([batch])
            expected += pc.sum(table.column("gold_suspicion")).as_py() or 0.0
            hits = table.filter(pc.field("gold_suspect")).to_pylist()
            suspect += len(hits)
            expected_suspect += sum(r["gold_suspicion"] for r in hits)
            top = sorted(top + hits, key=order)[:SUSPECTS_SHOWN]
    shown = [[md_code(r['problem_id']), md_code(r['answer']), r['pass_rate'], round(r['gold_suspicion'], 3)] for r in top]
    return [
        "## Suspect answer keys",
        "",
        f"{suspect} of {items} items are `gold_suspect`: more of the rollouts agree on one answer that is not the gold",
        "than reach the gold, and `gold_suspicion`, the probability that the key is wrong given every policy's",
        "rollouts (a model fitted to this run's own answers, with a prior of a few per cent of wrong keys), is at or",
        "above its threshold (or, where passband's `annotate.gold_review_precision` is set, ranks where the flagged",
        f"items' mean score still reaches that share). The score expects {expected:.1f} wrong keys in these {items} items and "
        f"{expected_suspect:.1f} among the flagged ones"
        + (f" ({expected_suspect / expected:.0%} of them)." if expected > 0 else "."),
        "Where the policies are weak or sampled once, agreement on a wrong answer is common and proves little,",
        "so few items can be flagged: the expected wrong keys are then spread thinly over items the rollouts",
        "cannot single out. To drop the flagged items: `ds.filter(lambda r: not r[\"gold_suspect\"])`.",
        "",
        *([md_table(["problem_id", "gold", "pass_rate", "gold_suspicion"], shown), ""] if shown else []),
    ]


def _loading(dataset: Dataset, *, repo: str, files: dict[str, dict[str, str]], exports: dict[str, list[str]],
             private: bool) -> list[str]:
    return ["## How to load", "",
            loading_text(dataset, repo=repo, files=files, exports=exports.get("verl", []), private=private), ""]


def _trainer_exports(exports: dict[str, list[str]]) -> list[str]:
    return [
        "## Trainer exports",
        "",
        "Under `exports/`, per format, one folder per config with one file per split:",
        "",
        *(f"- `{fmt}`: " + ", ".join(f"`{c}`" for c in cfgs) for fmt, cfgs in exports.items()),
        "",
    ]


def _rollouts(summary: ro.RolloutsSummary | None, *, repo: str) -> list[str]:
    head = ["## Rollouts (completions for SFT)", ""]
    if summary is None:
        return [*head, "Not built: `publish.rollouts` is off.", ""]
    if not summary.total_rows:
        return [*head, "Not built: no rollouts were found for the published items.", ""]
    split = next(iter(summary.files))
    return [
        *head,
        f"The `{ro.CONFIG}` config holds the completions behind the pass rates: one row per item and policy, with",
        f"the first {summary.max_per_item} (at most, `publish.max_rollouts_per_item`) of the rollouts its pass rate counts,",
        "each with its verdict, extracted answer, the flags that fired on it and its finish reason. Columns shared",
        "with OpenR1-Math-220k (`problem`, `solution`, `answer`, `source`, `generations`, `correctness_math_verify`,",
        "`correctness_count`, `finish_reasons`) mean the same there; `problem_id` keys the item in every config.",
        "",
        f"Size: {summary.total_rows} rows (" + ", ".join(f"{s} {n}" for s, n in summary.rows.items())
        + f"), {summary.generations} generations, {summary.correct} correct of which {summary.correct_unflagged}",
        f"unflagged; {size_text(summary.bytes)} of Parquet. Rows whose item has more counted rollouts than the bound "
        f"keeps: {summary.truncated_rows}.",
        "",
        "Correct generations no flag fired on, for supervised fine-tuning (rejection sampling), in TRL's",
        "prompt-completion format; the rare successes of hard items are kept (`rare_success` is a risk for GRPO,",
        "not a fault of the text). `messages` already holds each row's first such generation as a conversation",
        "(TRL's `SFTTrainer` takes either), and `prompt` the text the policy was given.",
        "",
        "```python",
        "from datasets import Dataset, load_dataset",
        "",
        f'rollouts = load_dataset("{repo}", "{ro.CONFIG}", split="{split}")',
        "",
        "def clean(row):",
        '    return [g for g, ok, f in zip(row["generations"], row["correctness_math_verify"], row["flags"])',
        '            if ok and not set(f) - {"rare_success"}]',
        "",
        'sft = Dataset.from_list([{"prompt": row["problem"], "completion": g} for row in rollouts for g in clean(row)])',
        "```",
        "",
        md_table(["column", "type", "description"], [[f"`{n}`", f"`{type_name(t)}`", d] for n, t, _, d in ro.COLUMNS]),
        "",
    ]


def _columns() -> list[str]:
    return ["## Columns", "",
            md_table(["column", "type", "description"], [[f"`{n}`", f"`{type_name(t)}`", d] for n, t, _, d in COLUMNS]),
            ""]


def _licenses(spec: CardSpec) -> list[str]:
    licenses = [[md_code(s), md_text(k), md_code(lic), n, f"[{md_text(f)}]({f})" if f else "—"]
                for s, k, lic, n, f in spec.source_licenses]
    return [
        "## Sources and licenses",
        "",
        "Each item carries its source's license (a reformulation carries its parent's: it is a derivative work).",
        "Synthetic items are generated by passband itself and released under passband's license.",
        "",
        md_table(["source", "kind", "license", "items", "license text"], licenses),
        "",
    ]


def _built(build: BuildInfo) -> list[str]:
    return [
        "## How it was built",
        "",
        md_table(["", ""], _build_rows(build)),
        "",
        "The dvc.lock digest is the sha256 of the canonical JSON of the lock entries of the stages upstream of `publish`:",
        "the exact inputs, parameters and outputs of the tables this folder was built from.",
        "",
    ]


def _build_rows(build: BuildInfo) -> list[list[str]]:
    dirty = " (with uncommitted code changes)" if build.git_dirty else ""
    lock = f"`sha256:{build.dvc_lock_digest}`" if build.dvc_lock_digest else "none (not built by dvc repro)"
    return [["passband version", f"`{build.passband_version}`"],
            ["git commit", f"`{build.git_commit or 'unknown'}`{dirty}"],
            ["dvc.lock digest", lock]]


def body(dataset: Dataset, *, files: dict[str, dict[str, str]], exports: dict[str, list[str]], spec: CardSpec,
         build: BuildInfo, private: bool, rollouts: ro.RolloutsSummary | None = None) -> list[str]:
    """The card's body: every section's lines, in order."""
    repo = spec.repo_id or PLACEHOLDER_REPO
    return [
        *_intro(dataset, spec=spec),
        *_configs(dataset, files=files, rollouts=rollouts),
        *_reformulations(dataset),
        *_policy(dataset, spec=spec),
        *_bands(dataset, spec=spec),
        *source_difficulty_lines(dataset),
        *_flags(dataset),
        *_suspect_golds(dataset),
        *_loading(dataset, repo=repo, files=files, exports=exports, private=private),
        *_trainer_exports(exports),
        *_rollouts(rollouts, repo=repo),
        *_columns(),
        *_licenses(spec),
        *_built(build),
    ]
