"""The dataset card (README.md with a YAML header) and its pass-rate histogram. Pure: text and bytes out.

The header declares every config with its data files, the licenses of the items (derived from
the sources, see :mod:`pipeline.publish`), tags and the size category; the body records the
primary policy, the verifier, the counts per band, how the folder was built, how to load it
and the columns.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.bands import BANDS, COLOURS, LEARNABLE
from pipeline.publish import rollouts as ro
from pipeline.publish.card_parts import (
    HISTOGRAM,
    PLACEHOLDER_REPO,
    BuildInfo,
    CardSpec,
    licenses_of,
    md_code,
    md_table,
    md_text,
    size_category,
    size_text,
)
from pipeline.publish.card_sections import body
from pipeline.publish.core import DEFAULT_CONFIG, REFORMULATED_CONFIG, Dataset


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


def render(dataset: Dataset, *, files: dict[str, dict[str, str]], exports: dict[str, list[str]], spec: CardSpec,
           build: BuildInfo, private: bool, rollouts: ro.RolloutsSummary | None = None) -> str:
    """The whole README.md: YAML header (huggingface_hub's DatasetCardData), then the body, section by section."""
    from huggingface_hub import DatasetCard, DatasetCardData

    header = DatasetCardData(**metadata(dataset, files=files, spec=spec)).to_yaml()
    lines = body(dataset, files=files, exports=exports, spec=spec, build=build, private=private, rollouts=rollouts)
    return str(DatasetCard(f"---\n{header}\n---\n\n" + "\n".join(lines)))


__all__ = ["HISTOGRAM", "PLACEHOLDER_REPO", "BuildInfo", "CardSpec", "histogram_png", "md_code", "md_table", "md_text",
           "metadata", "render", "size_text"]
