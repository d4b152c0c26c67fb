"""The report stage's shell: the tables in (through the catalog's views), the folder ``paths.report`` out, whole.

The site is written into a staging folder beside the target and swapped in at once (pipeline.io.swap_dirs),
so a browser never opens half a report. The target is replaced only when passband can prove it wrote it
(pipeline/ownership.py: absent, empty, or holding the ``report.json`` this stage writes); a folder of anything
else, a link, or a path containing the project or another configured path is refused with one line.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.catalog import rollout_files
from pipeline.config import Params
from pipeline.io import follow_umask, swap_dirs
from pipeline.ownership import check_target, remove_tree, report_proof
from pipeline.report import items, queries, site


@dataclass
class ReportResult:
    folder: Path
    info: dict
    summary: queries.Summary


def build(con, folder: Path, *, max_rollouts: int, items_per_file: int, index_rows_per_file: int,
          listed: int, files: list[str], spill: Path, rungs: dict[str, dict] | None = None) -> ReportResult:
    """The pure core: the views of ``con`` and the rollouts shards ``files`` in, every file of the report under
    ``folder`` out; ``spill`` holds the shown text's buckets meanwhile; ``rungs``: the reformulation ladder's
    counts per method (the reformulate stage's metrics)."""
    s = queries.summary(con, listed=listed, rungs=rungs)
    records = items.records(con, max_rollouts=max_rollouts, files=files, spill=spill)
    w = site.write_site(folder, s, records, max_rollouts=max_rollouts,
                        items_per_file=items_per_file, index_rows_per_file=index_rows_per_file)
    return ReportResult(folder=folder, info=site.write_info(folder, w, max_rollouts=max_rollouts), summary=s)


def ladder_counts(path: Path) -> dict[str, dict]:
    """Per method, the rungs the reformulate stage measured and kept (its metrics file; none before it ran)."""
    try:
        methods = json.loads(path.read_text(encoding="utf-8")).get("methods", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return {m: {"rungs_measured": st.get("rungs_measured"), "kept_per_rung": st.get("kept_per_rung") or {}}
            for m, st in methods.items() if isinstance(st, dict)}


def run(params: Params, *, root: Path = Path(".")) -> ReportResult:
    """Read every set's tables, write ``paths.report`` (staged, then swapped in)."""
    root = Path(root).resolve()
    target = root / params.paths.report
    others = [root / v for k, v in params.paths.configured().items() if k != "report"]

    def check() -> None:
        check_target(target, owned=report_proof, what="the report folder", key="report", root=root, others=others)

    check()  # before any work: a folder passband did not write is refused, untouched
    target.parent.mkdir(parents=True, exist_ok=True)
    for kind in ("new", "old"):  # a killed run's staging or old folder
        for half in target.parent.glob(f".{target.name}.{kind}.*"):
            remove_tree(half)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.new."))
    follow_umask(staging, directory=True)  # mkdtemp makes it owner-only
    cfg = params.report
    try:
        with tempfile.TemporaryDirectory(prefix="passband-report-spill-") as spill:
            con = queries.open_tables(params, root=root, temp_dir=Path(spill))
            try:
                result = build(con, staging, max_rollouts=cfg.max_rollouts_per_item, items_per_file=cfg.items_per_file,
                               index_rows_per_file=cfg.index_rows_per_file, listed=cfg.listed,
                               files=rollout_files(params, root=root), spill=Path(spill),
                               rungs=ladder_counts(root / params.paths.metrics / "reformulate.json"))
            finally:
                con.close()
        check()  # again, just before the swap: the folder may have changed while this one was written
        old = swap_dirs(staging, target)
        if old is not None:
            remove_tree(old)
    except BaseException:
        remove_tree(staging)
        raise
    result.folder = target
    return result
