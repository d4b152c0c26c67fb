"""The dataset card (README.md with a YAML header) and its pass-rate histogram. Pure: text and bytes out.

The header declares every config with its data files, the licenses of the items (derived from
the sources, see :mod:`pipeline.publish`), tags and the size category; the body records the
primary policy, the verifier, the counts per band, how the folder was built, how to load it
and the columns.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.annotate.detectors import DETECTORS
from pipeline.annotate.measured import measured as measured_flags
from pipeline.bands import BANDS, COLOURS, LEARNABLE, TOO_EASY, TOO_HARD, UNSOLVED, describe_ranges
from pipeline.publish import rollouts as ro
from pipeline.publish.core import COLUMNS, DEFAULT_CONFIG, REFORMULATED_CONFIG, Dataset

HISTOGRAM = "pass_rate_histogram.png"
PLACEHOLDER_REPO = "ORG/NAME"


@dataclass(frozen=True)
class BuildInfo:
    """How the folder was built: recorded in the card, build.json and the push's commit message."""

    passband_version: str
    git_commit: str | None
    git_dirty: bool
    dvc_lock_digest: str | None

    def as_dict(self) -> dict:
        return {"passband_version": self.passband_version, "git_commit": self.git_commit,
                "git_dirty": self.git_dirty, "dvc_lock_digest": self.dvc_lock_digest}


@dataclass(frozen=True)
class CardSpec:
    repo_id: str | None
    pretty_name: str
    tags: tuple[str, ...]
    learnable_min: float
    learnable_max: float
    unsolved_max: float
    prompt_template: str  # the template the `prompt` column is rendered with (name v version)
    source_licenses: tuple[tuple[str, str, str, int, str | None], ...]  # (source, kind, license, items, license file)


def size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def type_name(t: pa.DataType, *, depth: int = 0) -> str:
    """A short type name for the card: ``list<{role: string, content: string}>``; deeper structs by field name."""
    if pa.types.is_list(t):
        return f"list<{type_name(t.value_type, depth=depth)}>"
    if pa.types.is_struct(t):
        if depth > 0:
            return "{" + ", ".join(f.name for f in t) + "}"
        return "{" + ", ".join(f"{f.name}: {type_name(f.type, depth=depth + 1)}" for f in t) + "}"
    return {"double": "float64"}.get(str(t), str(t))


def licenses_of(dataset: Dataset) -> list[str]:
    found = set()
    for splits in dataset.configs.values():
        for rows in splits.values():
            found.update(pc.unique(rows.column("license")).to_pylist())
    return sorted(found)


def metadata(dataset: Dataset, *, files: dict[str, dict[str, str]], spec: CardSpec) -> dict:
    """The YAML header: configs with their data files (config -> split -> path glob), license, tags."""
    licenses = licenses_of(dataset) or ["unknown"]
    total = dataset.rows(DEFAULT_CONFIG) + dataset.rows(REFORMULATED_CONFIG)
    configs = []
    for name, splits in files.items():
        entry: dict = {"config_name": name, "data_files": [{"split": s, "path": p} for s, p in splits.items()]}
        if name == DEFAULT_CONFIG:
            entry["default"] = True
        configs.append(entry)
    return {
        "license": licenses[0] if len(licenses) == 1 else licenses,
        "pretty_name": spec.pretty_name,
        "language": ["en"],
        "task_categories": ["text-generation"],
        "size_categories": [size_category(total)],
        "tags": list(spec.tags),
        "configs": configs,
    }


def histogram_png(dataset: Dataset, *, spec: CardSpec) -> bytes:
    """Pass rates of the kept items under the primary policy, stacked by band (matplotlib Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    parts = [rows.select(["pass_rate", "band", "n"]) for rows in dataset.configs[DEFAULT_CONFIG].values()]
    kept = pa.concat_tables(parts) if parts else pa.table({"pass_rate": [], "band": [], "n": []})
    ns = set(pc.unique(kept.column("n")).to_pylist())
    if len(ns) == 1:  # pass rates are multiples of 1/n: one bar per possible value
        n = ns.pop()
        bins = [(i - 0.5) / n for i in range(n + 2)]
    else:
        bins = [i / 20 for i in range(21)]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    data = [pc.filter(kept.column("pass_rate"), pc.equal(kept.column("band"), b)).to_numpy() for b in BANDS]
    ax.hist(data, bins=bins, stacked=True, label=list(BANDS), color=[COLOURS[b] for b in BANDS], edgecolor="white")
    for edge in (spec.learnable_min, spec.learnable_max):
        ax.axvline(edge, color="black", linestyle="--", linewidth=0.8)
    ax.set_xlabel(f"pass rate under {dataset.primary['name']}")
    ax.set_ylabel("problems")
    ax.set_title(f"{kept.num_rows} problems; dashed: {LEARNABLE} band [{spec.learnable_min}, {spec.learnable_max}]")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


# Every value the card takes from params.yaml or the tables goes through one of these: a line break, a carriage
# return or any other control character would end a table row or the card's line (shown escaped instead), a
# backtick would end a code span, and HTML or markdown outside a code span would render.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_MARKDOWN = re.compile(r"([\\`*\[\]<>&])")  # what can start emphasis, a link, HTML or an entity


def _visible(value: object) -> str:
    """``value`` as one line: each control character as its escape (``\\r``, ``\\u0000``)."""
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\u{ord(m.group()):04x}"), str(value))


def _code(value: object) -> str:
    """``value`` as an inline code span that shows it literally: the fence is longer than any run of backticks
    in it (CommonMark), so no value can close it, and HTML inside a code span is text."""
    text = _visible(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _text(value: object) -> str:
    """``value`` as plain text: markdown and HTML characters backslash-escaped, so it renders as written."""
    return _MARKDOWN.sub(r"\\\1", _visible(value))


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if v is None else _visible(v).replace("|", "\\|") for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _policy_section(dataset: Dataset) -> str:
    p = dataset.primary
    sampling = {k: p[k] for k in ("temperature", "top_p", "top_k", "max_tokens", "stop")}
    rows = [
        ["name", _code(p["name"])], ["policy_id", _code(p["policy_id"])], ["model", _code(p["model"])],
        ["revision", _code(p["revision"])], ["engine", _text(p["engine"])], ["dtype", _text(p["dtype"])],
        ["sampling", _code(json.dumps(sampling))],
        ["prompt template", f"{_code(p['prompt_template'])} version {p['prompt_version']} "
                            f"(digest {_code(p['prompt_digest'])})"],
        ["chat template", "yes" if p["chat"] else "no (raw completion text)"],
        ["system prompt", _code(p["system_prompt"]) if p["system_prompt"] else "none"],
        ["verifier_id", ", ".join(_code(v) for v in dataset.verifier_ids) or "none"],
    ]
    dump = json.loads(p.get("identity") or "{}").get("dump")
    if dump:  # an imported policy: what was read, and that the snapshot above is declared, not proven
        rows.append(["completions", f"imported from a dump, not generated by passband: layout {_code(dump['layout'])}, "
                                    f"matched by {_text(dump['match'])}, file sha256 {_code(dump['sha256'])}; the "
                                    "model, revision, sampling and prompt above are as declared (a dump cannot prove "
                                    "them)"])
    return _table(["", ""], rows)


def _drift_section(dataset: Dataset, others: list[dict]) -> list[str]:
    """Per other policy, the band transition matrix from the primary policy (rows) to it (columns), over the
    default config's items both measured (``passband drift`` computes the same with credible changes)."""
    p = dataset.primary
    out = []
    for q in others:
        matrix = {f: dict.fromkeys(BANDS, 0) for f in BANDS}
        for rows in dataset.configs[DEFAULT_CONFIG].values():
            for r in rows.pylist(["difficulty"]):
                by_id = {d["policy_id"]: d["band"] for d in r["difficulty"]}
                if p["policy_id"] in by_id and q["policy_id"] in by_id:
                    matrix[by_id[p["policy_id"]]][by_id[q["policy_id"]]] += 1
        out += [f"Band transitions {_code(p['name'])} (rows) -> {_code(q['name'])} (columns):", "",
                _table(["", *BANDS], [[f"`{f}`", *(matrix[f][t] for t in BANDS)] for f in BANDS]), ""]
    return out


def _counts_section(dataset: Dataset) -> str:
    counts = dataset.band_counts(DEFAULT_CONFIG)
    reform = dataset.band_counts(REFORMULATED_CONFIG)
    splits = sorted(counts)
    header = ["band", *[f"{s}" for s in splits], "reformulated"]
    rows = []
    for b in BANDS:
        rows.append([f"`{b}`", *[counts[s].get(b, 0) for s in splits], sum(c.get(b, 0) for c in reform.values())])
    rows.append(["**all kept**", *[sum(counts[s].values()) for s in splits], sum(sum(c.values()) for c in reform.values())])
    return _table(header, rows)


SOURCE_BINS = 4  # source difficulty is binned in quartiles of its values (per source and measure)


def source_difficulty_rows(dataset: Dataset) -> list[dict]:
    """Per source and measure of the main items with a source difficulty: the count, the Spearman rank correlation
    of the source's difficulty with the primary policy's pass rate (ties get their mean rank; None when either
    side is constant) and the primary policy's bands per quartile of the source's difficulty."""
    import duckdb

    tables = [t.select(["source", "source_difficulty", "source_difficulty_measure", "pass_rate", "band"])
              for t in dataset.configs[DEFAULT_CONFIG].values()]
    if not tables:
        return []
    items = pa.concat_tables(tables)
    items = items.filter(pc.is_valid(items["source_difficulty"]))
    if not items.num_rows:
        return []
    con = duckdb.connect()
    con.register("items", items)
    ranked = ("SELECT *, ntile($bins) OVER (PARTITION BY source, source_difficulty_measure ORDER BY source_difficulty) "
              "AS bin, rank() OVER (PARTITION BY source, source_difficulty_measure ORDER BY source_difficulty) + "
              "(count(*) OVER (PARTITION BY source, source_difficulty_measure, source_difficulty) - 1) / 2.0 AS rs, "
              "rank() OVER (PARTITION BY source, source_difficulty_measure ORDER BY pass_rate) + "
              "(count(*) OVER (PARTITION BY source, source_difficulty_measure, pass_rate) - 1) / 2.0 AS ro FROM items")
    out = []
    for source, measure, n, rho in con.execute(
            f"SELECT source, source_difficulty_measure, count(*), corr(rs, ro) FROM ({ranked}) "
            "GROUP BY ALL ORDER BY source, source_difficulty_measure", {"bins": SOURCE_BINS}).fetchall():
        bins = con.execute(
            f"SELECT bin, min(source_difficulty), max(source_difficulty), band, count(*) FROM ({ranked}) "
            "WHERE source = $s AND source_difficulty_measure IS NOT DISTINCT FROM $m GROUP BY bin, band ORDER BY bin",
            {"bins": SOURCE_BINS, "s": source, "m": measure}).fetchall()
        per_bin: dict[int, dict] = {}
        for b, lo, hi, band, count in bins:
            row = per_bin.setdefault(b, {"low": lo, "high": hi, "bands": {}})
            row["low"], row["high"] = min(row["low"], lo), max(row["high"], hi)
            row["bands"][band] = count
        out.append({"source": source, "measure": measure, "items": n,
                    "spearman": None if rho is None or rho != rho else round(rho, 3),
                    "bins": [per_bin[b] for b in sorted(per_bin)]})
    con.close()
    return out


def _source_difficulty_section(dataset: Dataset) -> list[str]:
    """The source's own difficulty beside ours (only when some published item has one)."""
    rows = source_difficulty_rows(dataset)
    if not rows:
        return []
    out = ["## Source difficulty beside ours", "",
           "Some sources ship their own difficulty for each item (`source_difficulty`, what it measures in",
           "`source_difficulty_measure`). Items per band under the primary policy, by quartile of the source's value,",
           "and the Spearman rank correlation of the source's value with our pass rate (a solve rate should correlate",
           "positively, a difficulty rating negatively; near 0: the source's difficulty says little about this policy's):",
           ""]
    for r in rows:
        rho = "n/a (one side constant)" if r["spearman"] is None else r["spearman"]
        out += [f"{_code(r['source'])}: {_text(r['measure'])}; {r['items']} items, Spearman ρ = {rho}", "",
                _table(["source difficulty", *[f"`{b}`" for b in BANDS]],
                       [[f"{b['low']:g} to {b['high']:g}", *[b["bands"].get(band, 0) for band in BANDS]]
                        for b in r["bins"]]), ""]
    return out


def _flags_section(dataset: Dataset) -> str:
    """Each flag's mean rate over the published items next to its precision and recall on labelled completions."""
    rates: dict[str, list] = {}  # flag -> [sum of its rates, items]
    for rows in dataset.configs[DEFAULT_CONFIG].values():
        for r in rows.pylist(["flag_rates"]):
            for e in r["flag_rates"]:
                total = rates.setdefault(e["flag"], [0, 0])
                total[0] += e["rate"]
                total[1] += 1
    figures = measured_flags()

    def fmt(x) -> str:
        return "—" if x is None else f"{x:.2f}"

    rows = [[f"`{name}`", d.kind, f"{rates[name][0] / rates[name][1]:.4f}" if name in rates else "—",
             fmt(figures.get(name, {}).get("precision")), fmt(figures.get(name, {}).get("recall"))]
            for name, d in DETECTORS.items()]
    return _table(["flag", "kind", "mean rate", "precision", "recall"], rows)


def _reformulation_section(dataset: Dataset) -> str:
    """Per method: hard parents tried and those whose reformulation is published (re-measured in the kept bands)."""
    if not dataset.reformulation:
        return "No reformulations (the reformulation loop has not run)."
    rows = [[f"`{m}`", c["parents_tried"], c["parents_with_learnable_child"],
             f"{100 * c['parents_with_learnable_child'] / c['parents_tried']:.0f} %" if c["parents_tried"] else "n/a"]
            for m, c in dataset.reformulation.items()]
    return ("Hard parents (too hard for the primary policy) that got a reformulation re-measured in the published "
            "bands, per method (`(any)`: by some method). Each `reformulated` row names its `parent_id`, `method`, "
            "`rung` and `writer`, and carries its own measured band.\n\n"
            + _table(["method", "hard parents tried", "with a published child", "share"], rows))


def _loading_section(dataset: Dataset, *, repo: str, files: dict[str, dict[str, str]], exports: list[str],
                     private: bool) -> str:
    cfg = LEARNABLE if LEARNABLE in files else DEFAULT_CONFIG
    exports = [c for c in exports if c in files]
    ex = cfg if cfg in exports else (exports[0] if exports else None)
    out = [
        "### 🤗 datasets",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        f'ds = load_dataset("{repo}", "{cfg}")  # splits: {", ".join(files[cfg])}',
        'row = ds["train"][0]',
        'row["prompt"], row["answer"], row["pass_rate"], row["band"]',
        "# every policy's numbers for the item",
        '[(d["policy"], d["pass_rate"], d["band"]) for d in row["difficulty"]]',
        "```",
        "",
    ]
    if ex is None:
        out += ["No trainer exports were built (publish.exports is empty).", ""]
    else:
        val = "test" if "test" in files.get(ex, {}) else "train"
        out += [
            "### TRL (GRPO)",
            "",
            "`answer` holds the gold that passband's reward (`pipeline.rewards.accuracy_reward`, the verifier the bands",
            "came from; `pip install passband`) reads, `solution` the gold in `$...$` that `trl.rewards.accuracy_reward`",
            "reads; GRPOTrainer passes every extra column (pass_rate, band, ...) to reward functions as keyword arguments.",
            "",
            "```python",
            "from datasets import load_dataset",
            "from trl import GRPOConfig, GRPOTrainer",
            "from pipeline.rewards import accuracy_reward",
            "",
            f'train = load_dataset("{repo}", data_files="exports/trl/{ex}/train.parquet", split="train")',
            'trainer = GRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=accuracy_reward,',
            '                      args=GRPOConfig(output_dir="grpo-out"), train_dataset=train)',
            "trainer.train()",
            "```",
            "",
            "### verl",
            "",
            "The fields of verl's *Prepare Data for Post-Training*: `data_source` (`passband/<source>`), `prompt`,",
            "`ability`, `reward_model` `{style: rule, ground_truth}` and `extra_info` (split, index, difficulty fields).",
            "verl's built-in scorer does not know `passband/*` sources: use the shipped reward (passband's verifier).",
            "",
            "```bash",
            f"hf download {repo} --repo-type dataset --local-dir passband-data",
            "python -m verl.trainer.main_ppo algorithm.adv_estimator=grpo \\",
            f"  data.train_files=passband-data/exports/verl/{ex}/train.parquet \\",
            f"  data.val_files=passband-data/exports/verl/{ex}/{val}.parquet \\",
            "  custom_reward_function.path=passband-data/exports/verl/reward.py \\",
            "  custom_reward_function.name=compute_score  # plus your model and trainer settings",
            "```",
            "",
            "### OpenRLHF",
            "",
            "```bash",
            "python -m openrlhf.cli.train_ppo_ray \\",
            f"  --prompt_data passband-data/exports/openrlhf/{ex}/train.jsonl \\",
            "  --input_key input --label_key label --apply_chat_template \\",
            "  --remote_rm_url passband-data/exports/openrlhf/reward_func.py  # passband's verifier; labels are the golds",
            "```",
            "",
        ]
    out += [
        "### DuckDB",
        "",
        "```sql",
        *(["-- private repo: CREATE SECRET hf (TYPE HUGGINGFACE, PROVIDER credential_chain);"] if private else []),
        "SELECT band, count(*) AS n, round(avg(pass_rate), 3) AS mean_pass_rate",
        f"FROM 'hf://datasets/{repo}/data/{DEFAULT_CONFIG}/*.parquet'",
        "GROUP BY band ORDER BY n DESC;",
        "```",
    ]
    return "\n".join(out)


def render(dataset: Dataset, *, files: dict[str, dict[str, str]], exports: dict[str, list[str]], spec: CardSpec,
           build: BuildInfo, private: bool, rollouts: ro.RolloutsSummary | None = None) -> str:
    """The whole README.md: YAML header (huggingface_hub's DatasetCardData), then the body, section by section."""
    from huggingface_hub import DatasetCard, DatasetCardData

    repo = spec.repo_id or PLACEHOLDER_REPO
    header = DatasetCardData(**metadata(dataset, files=files, spec=spec)).to_yaml()
    body = [
        *_intro(dataset, spec=spec),
        *_configs(dataset, files=files, rollouts=rollouts),
        *_reformulations(dataset),
        *_policy(dataset, spec=spec),
        *_bands(dataset, spec=spec),
        *_source_difficulty_section(dataset),
        *_flags(dataset),
        *_suspect_golds(dataset),
        *_loading(dataset, repo=repo, files=files, exports=exports, private=private),
        *_trainer_exports(exports),
        *_rollouts(rollouts, repo=repo),
        *_columns(),
        *_licenses(spec),
        *_built(build),
    ]
    return str(DatasetCard(f"---\n{header}\n---\n\n" + "\n".join(body)))


# The card's sections, in order: each gives its lines, ending with the blank line that separates it from the next.


def _intro(dataset: Dataset, *, spec: CardSpec) -> list[str]:
    p = dataset.primary
    return [
        f"# {_text(spec.pretty_name)}",
        "",
        "Math problems annotated with **model-relative difficulty**: the pass rate of one policy snapshot",
        f"({_code(p['name'])}) measured from {'/'.join(str(n) for n in sorted(_ns(dataset)))} sampled rollouts per problem,",
        "verified with math-verify, with a 95 % interval, a band and the band's posterior confidence. Built with",
        "passband (`passband publish`). Difficulty is a property of the policy, not of the problem: re-measure",
        "for another checkpoint before you rely on the bands.",
        "",
    ]


def _configs(dataset: Dataset, *, files: dict[str, dict[str, str]],
             rollouts: ro.RolloutsSummary | None = None) -> list[str]:
    rows = [[f"`{c}`", dataset.rows(c), _what(c) + ("" if c in files else _EMPTY)] for c in dataset.configs]
    if rollouts is not None:
        rows.append([f"`{ro.CONFIG}`", rollouts.total_rows,
                     "the completions behind the pass rates, one row per item and policy (see Rollouts below)"
                     + ("" if rollouts.total_rows else _EMPTY)])
    return [
        "## Configs",
        "",
        _table(["config", "rows", "what"], rows),
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
    return ["## Reformulations", "", _reformulation_section(dataset), ""]


def _policy(dataset: Dataset, *, spec: CardSpec) -> list[str]:
    p = dataset.primary
    others = [q for q in dataset.policies if q["policy_id"] != p["policy_id"]]
    return [
        "## Policy",
        "",
        _policy_section(dataset),
        "",
        f"The `prompt` column is rendered for training with the {_code(spec.prompt_template)} template; the pass rates were",
        "measured with the policy's own template above.",
        "",
        *(["Other policies measured on these items (their numbers are in the `difficulty` column):", "",
           _table(["name", "policy_id", "model", "revision", "prompt"],
                  [[_code(q["name"]), _code(q["policy_id"]), _code(q["model"]), _code(q["revision"]),
                    _code(f"{q['prompt_template']} v{q['prompt_version']}")] for q in others]), "",
           *_drift_section(dataset, others)] if others else []),
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
        _counts_section(dataset),
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
        _flags_section(dataset),
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
    shown = [[_code(r['problem_id']), _code(r['answer']), r['pass_rate'], round(r['gold_suspicion'], 3)] for r in top]
    return [
        "## Suspect answer keys",
        "",
        f"{suspect} of {items} items are `gold_suspect`: more of the rollouts agree on one answer that is not the gold",
        "than reach the gold, and `gold_suspicion`, the probability that the key is wrong given every policy's",
        "rollouts (a model fitted to this run's own answers, with a prior of a few per cent of wrong keys), is at or",
        f"above its threshold. The score expects {expected:.1f} wrong keys in these {items} items and "
        f"{expected_suspect:.1f} among the flagged ones"
        + (f" ({expected_suspect / expected:.0%} of them)." if expected > 0 else "."),
        "Where the policies are weak or sampled once, agreement on a wrong answer is common and proves little,",
        "so few items can be flagged: the expected wrong keys are then spread thinly over items the rollouts",
        "cannot single out. To drop the flagged items: `ds.filter(lambda r: not r[\"gold_suspect\"])`.",
        "",
        *([_table(["problem_id", "gold", "pass_rate", "gold_suspicion"], shown), ""] if shown else []),
    ]


def _loading(dataset: Dataset, *, repo: str, files: dict[str, dict[str, str]], exports: dict[str, list[str]],
             private: bool) -> list[str]:
    return ["## How to load", "",
            _loading_section(dataset, repo=repo, files=files, exports=exports.get("verl", []), private=private), ""]


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
        _table(["column", "type", "description"], [[f"`{n}`", f"`{type_name(t)}`", d] for n, t, _, d in ro.COLUMNS]),
        "",
    ]


def size_text(n: int) -> str:
    """Bytes as a reader wants them: ``820 B``, ``24 kB``, ``1.3 MB``, ``2.1 GB`` (never ``0.0 MB``)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{n} B"


def _columns() -> list[str]:
    return ["## Columns", "",
            _table(["column", "type", "description"], [[f"`{n}`", f"`{type_name(t)}`", d] for n, t, _, d in COLUMNS]),
            ""]


def _licenses(spec: CardSpec) -> list[str]:
    licenses = [[_code(s), _text(k), _code(lic), n, f"[{_text(f)}]({f})" if f else "—"]
                for s, k, lic, n, f in spec.source_licenses]
    return [
        "## Sources and licenses",
        "",
        "Each item carries its source's license (a reformulation carries its parent's: it is a derivative work).",
        "Synthetic items are generated by passband itself and released under passband's license.",
        "",
        _table(["source", "kind", "license", "items", "license text"], licenses),
        "",
    ]


def _built(build: BuildInfo) -> list[str]:
    return [
        "## How it was built",
        "",
        _table(["", ""], _build_rows(build)),
        "",
        "The dvc.lock digest is the sha256 of the canonical JSON of the lock entries of the stages upstream of `publish`:",
        "the exact inputs, parameters and outputs of the tables this folder was built from.",
        "",
    ]


_EMPTY = " (empty, so not declared: 🤗 datasets cannot load a config without rows)"


def _what(config: str) -> str:
    if config == DEFAULT_CONFIG:
        return "every kept item (primary policy measured it, band kept)"
    if config == REFORMULATED_CONFIG:
        return "rewritten (easier, backward) forms of too-hard items, re-measured; `parent_id` / `method` say from what"
    return f"kept items whose primary band is `{config}`"


def _build_rows(build: BuildInfo) -> list[list[str]]:
    dirty = " (with uncommitted code changes)" if build.git_dirty else ""
    lock = f"`sha256:{build.dvc_lock_digest}`" if build.dvc_lock_digest else "none (not built by dvc repro)"
    return [["passband version", f"`{build.passband_version}`"],
            ["git commit", f"`{build.git_commit or 'unknown'}`{dirty}"],
            ["dvc.lock digest", lock]]


def _ns(dataset: Dataset) -> set[int]:
    found: set[int] = set()
    for rows in dataset.configs[DEFAULT_CONFIG].values():
        found.update(pc.unique(rows.column("n")).to_pylist())
    return found or {0}
