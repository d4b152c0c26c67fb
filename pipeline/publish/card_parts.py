"""What every part of the dataset card shares: how the folder was built (:class:`BuildInfo`), the card's inputs
(:class:`CardSpec`), sizes and types as the card names them, and the one way a value is written into it (escaped: a
value from params.yaml or the tables can never add a line, a header key, HTML or markdown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.publish.core import DEFAULT_CONFIG, REFORMULATED_CONFIG, Dataset

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


# Every value the card takes from params.yaml or the tables goes through one of these: a line break, a carriage
# return or any other control character would end a table row or the card's line (shown escaped instead), a
# backtick would end a code span, and HTML or markdown outside a code span would render.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


_MARKDOWN = re.compile(r"([\\`*\[\]<>&])")  # what can start emphasis, a link, HTML or an entity


def visible(value: object) -> str:
    """``value`` as one line: each control character as its escape (``\\r``, ``\\u0000``)."""
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\u{ord(m.group()):04x}"), str(value))


def md_code(value: object) -> str:
    """``value`` as an inline code span that shows it literally: the fence is longer than any run of backticks
    in it (CommonMark), so no value can close it, and HTML inside a code span is text."""
    text = visible(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_text(value: object) -> str:
    """``value`` as plain text: markdown and HTML characters backslash-escaped, so it renders as written."""
    return _MARKDOWN.sub(r"\\\1", visible(value))


def md_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if v is None else visible(v).replace("|", "\\|") for v in r) + " |" for r in rows]
    return "\n".join(lines)


def size_text(n: int) -> str:
    """Bytes as a reader wants them: ``820 B``, ``24 kB``, ``1.3 MB``, ``2.1 GB`` (never ``0.0 MB``)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{n} B"


EMPTY_CONFIG = " (empty, so not declared: 🤗 datasets cannot load a config without rows)"


def config_what(config: str) -> str:
    if config == DEFAULT_CONFIG:
        return "every kept item (primary policy measured it, band kept)"
    if config == REFORMULATED_CONFIG:
        return "rewritten (easier, backward) forms of too-hard items, re-measured; `parent_id` / `method` say from what"
    return f"kept items whose primary band is `{config}`"


def sample_counts(dataset: Dataset) -> set[int]:
    found: set[int] = set()
    for rows in dataset.configs[DEFAULT_CONFIG].values():
        found.update(pc.unique(rows.column("n")).to_pylist())
    return found or {0}
