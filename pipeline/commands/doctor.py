"""``passband doctor``: check every table and artefact, and with ``--repair`` move the damaged ones aside.

Checks, per table set (main, reformulated) and table:

- every shard reads in full and holds the declared columns of *this* table (a truncated or
  zero-byte shard, a shard copied in from another table, a shard with the wrong columns);
- keys are unique across the table's shards;
- verdicts without a rollout, rollouts without a problem (notes: the rollout and verdict
  caches persist across problem selections, and ``--repair`` can leave them for a while);
- temp files of writes that never finished (a killed run, a full disk), anywhere under the
  output folders; the catalog file opens.

``--repair`` never deletes: it moves every damaged shard, every shard holding duplicate keys
but the first, stale temp files and a damaged catalog into ``.passband/quarantine/<UTC time>/``
(same relative paths), holding every stage's lock meanwhile. It moves only what lies inside the
project: a table folder that is a symbolic link leading outside is reported (``OUTSIDE``), and
nothing found through it is moved; each move is checked afterwards (the source gone, the copy
there), and "moved N paths" counts only the moves that happened. The keyed stages (rollout,
verify) then regenerate exactly the missing keys, with the same seeds and therefore the same
text, and the other stages rewrite their outputs whole: ``dvc repro`` brings every table back.

    $ passband doctor
    DAMAGED  data/rollouts/pol_613c661302d94ec6-1c60a401cdef.parquet: damaged shard of table rollouts (...)
    ...
    1 problem: run `passband doctor --repair`, then `dvc repro`
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import click
import pyarrow as pa

from pipeline.cli_options import with_params
from pipeline.config import Params
from pipeline.errors import PassbandError
from pipeline.io import REPAIR_HINT, read_shard, shard_paths, temp_paths
from pipeline.locks import hold_all
from pipeline.schema import schema
from pipeline.tablesets import SET_TABLES, SETS, table_set

QUARANTINE = ".passband/quarantine"


@dataclass(frozen=True)
class Finding:
    level: str  # "damaged" / "stale" (moved aside by --repair), "outside" (a link out of the project: never moved),
    #             "note" (reported only)
    path: Path | None
    message: str

    def line(self, root: Path) -> str:
        where = f"{_rel(self.path, root)}: " if self.path is not None else ""
        return f"{self.level.upper():8} {where}{self.message}"


@dataclass
class Report:
    root: Path
    findings: list[Finding] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # one line per table: shards and rows
    moved: list[tuple[Path, Path]] = field(default_factory=list)
    not_moved: list[tuple[Path, str]] = field(default_factory=list)  # (path, why) for --repair's refusals and failures

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.level != "note"]

    def add(self, level: str, path: Path | None, message: str) -> None:
        self.findings.append(Finding(level, path, message))


def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return _lexical(path, root) or str(path)


def _lexical(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` by its name alone (links not followed), or None outside it."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        try:
            return str(Path(path).absolute().relative_to(Path(root).absolute()))
        except ValueError:
            return None


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path``, every link followed, lies inside the project."""
    resolved, top = Path(path).resolve(), Path(root).resolve()
    return resolved == top or top in resolved.parents


def _outside_link(report: Report, directory: Path, label: str) -> None:
    if directory.is_symlink() and not _inside(directory, report.root):
        report.add("outside", directory, f"{label} leads outside the project (to {directory.resolve()}): doctor checks "
                                         "it but moves nothing out of it; point params.yaml at a folder inside the "
                                         "project, or move or repair its files yourself")


def _keys(table: pa.Table, cols: list[str]) -> list[tuple]:
    return list(zip(*(table.column(c).to_pylist() for c in cols), strict=True)) if table.num_rows else []


def _check_table(report: Report, directory: Path, name: str, label: str) -> pa.Table | None:
    """Read every shard of one table; record damage and duplicate keys; the readable rows' keys."""
    key = list(schema(name).key)
    parts: list[tuple[Path, pa.Table]] = []
    for path in shard_paths(directory):
        try:
            parts.append((path, read_shard(path, name=name, columns=key)))
        except PassbandError as exc:
            report.add("damaged", path, str(exc).split(": ", 1)[-1].replace(f"; {REPAIR_HINT}", ""))
    for tmp in temp_paths(directory):
        report.add("stale", tmp, "temp file of a write that never finished (invisible to readers)")
    seen: dict[tuple, Path] = {}
    dup_shards: Counter[Path] = Counter()
    for path, t in parts:
        for k in _keys(t, key):
            if k in seen:
                dup_shards[path] += 1
            else:
                seen[k] = path
    for path, n in sorted(dup_shards.items()):
        report.add("damaged", path, f"{n} rows of table {name} repeat keys {tuple(key)} already in an earlier shard")
    rows = sum(t.num_rows for _, t in parts)
    report.checked.append(f"{label:28} {len(parts)} shards, {rows} rows")
    good = [t for p, t in parts if p not in dup_shards]
    return pa.concat_tables(good) if good else None


def _orphans(report: Report, child: pa.Table | None, parent: pa.Table | None, cols: list[str], what: str,
             directory: Path, *, advice: str) -> None:
    if child is None or child.num_rows == 0:
        return
    have = set(_keys(parent, cols)) if parent is not None else set()
    n = sum(1 for k in set(_keys(child.select(cols), cols)) if k not in have)
    if n:
        report.add("note", directory, f"{n} {what} ({advice})")


def _check_catalog(report: Report, path: Path) -> None:
    if not path.exists():
        report.add("note", path, "catalog file missing: `passband catalog` rebuilds it; "
                                 "`passband sql` does not need it")
        return
    import duckdb

    try:
        duckdb.connect(str(path), read_only=True).close()
    except duckdb.Error as exc:
        report.add("damaged", path, f"catalog does not open ({str(exc).splitlines()[0]}); "
                                    "`passband catalog` rebuilds it")


def _stale_elsewhere(report: Report, params: Params, root: Path) -> None:
    """Temp files and half-swapped folders outside the table folders (metrics, plots, catalog, published, models)."""
    p = params.paths
    folders = {root / p.metrics, root / p.plots, (root / p.catalog).parent, root / p.reformulated / "generations"}
    for folder in sorted(folders):
        for tmp in temp_paths(folder):
            report.add("stale", tmp, "temp file of a write that never finished")
    for target in (root / p.published, root / p.models / "smollm2-135m-instruct"):
        if target.parent.is_dir():
            for half in sorted(target.parent.glob(f".{target.name}.*")):
                report.add("stale", half, f"leftover of an interrupted rebuild of {_rel(target, root)}")


def check(params: Params, *, root: Path) -> Report:
    """Every check; nothing is changed."""
    root = Path(root)
    report = Report(root=root)
    for set_name in SETS:
        ts = table_set(params, set_name)
        keys: dict[str, pa.Table | None] = {}
        for name in SET_TABLES:
            directory = ts.dir(name, root)
            if not directory.exists():
                continue
            _outside_link(report, directory, f"the folder of table {name} ({set_name})")
            keys[name] = _check_table(report, directory, name, f"{name} ({set_name})")
        _orphans(report, keys.get("verdicts"), keys.get("rollouts"), list(schema("rollouts").key),
                 "verdicts without a rollout", ts.dir("verdicts", root),
                 advice="`dvc repro` regenerates what is missing upstream")
        # a cache of an earlier selection (a narrowed source): verify and annotate skip them, a wider one reuses them
        _orphans(report, keys.get("rollouts"), keys.get("problems"), ["problem_id"],
                 "problems with rollouts but no longer in problems", ts.dir("rollouts", root),
                 advice="kept for a wider selection; verify and annotate skip them: nothing to do")
    _stale_elsewhere(report, params, root)
    _check_catalog(report, root / params.paths.catalog)
    return report


def move_aside(report: Report) -> Path | None:
    """Move every damaged or stale path of ``report`` inside the project into a fresh quarantine folder.

    A path that lies outside the project once links are followed is not moved (``report.not_moved``);
    each move is checked (the source gone, the copy in quarantine) before it counts in ``report.moved``.
    The quarantine folder, or None when there was nothing to move.
    """
    links = [f.path for f in report.findings if f.level == "outside" and f.path is not None]
    targets = []
    for path in sorted({f.path for f in report.problems if f.path is not None and f.level != "outside"}):
        if not path.exists() and not path.is_symlink():
            continue
        if _lexical(path, report.root) is None or any(link in path.parents for link in links):
            report.not_moved.append((path, f"it lies outside the project (at {path.resolve()})"))
        else:
            targets.append(path)
    if not targets:
        return None
    dest_root = report.root / QUARANTINE / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    n = 0
    while dest_root.exists():
        n += 1
        dest_root = dest_root.with_name(f"{dest_root.name.split('-')[0]}-{n}")
    for path in targets:
        dest = dest_root / (_lexical(path, report.root) or path.name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.move(str(path), str(dest))
        except OSError as exc:
            report.not_moved.append((path, f"the move failed ({exc.strerror or exc})"))
            continue
        if (path.exists() or path.is_symlink()) or not (dest.exists() or dest.is_symlink()):
            report.not_moved.append((path, "it is still in place after the move"))
            continue
        report.moved.append((path, dest))
    return dest_root if report.moved else None


@click.command()
@with_params
@click.option("--repair", is_flag=True, help="Move damaged shards, duplicate-key shards and stale temp files "
                                             "into .passband/quarantine/ (nothing is deleted).")
@click.option("--verbose", "-v", is_flag=True, help="Also list every table checked, with its shards and rows.")
def doctor(*, params, root, repair: bool, verbose: bool) -> None:
    """Check every table (readability, schema, unique keys, orphans) and stale temp files.

    \b
    passband doctor            # report; exit 1 if something needs repair
    passband doctor --repair   # move what is damaged aside, then run `dvc repro`
    """
    with hold_all(root) if repair else contextlib.nullcontext():
        report = check(params, root=root)
        if verbose:
            for line in report.checked:
                click.echo(f"ok       {line}")
        for f in report.findings:
            click.echo(f.line(root))
        problems = report.problems
        if not problems:
            click.echo(f"doctor: {len(report.checked)} tables checked, nothing to repair")
            return
        if not repair:
            n, fixable = len(problems), any(f.level != "outside" for f in problems)
            raise PassbandError(f"{n} problem{'s' if n != 1 else ''} found: " + (
                "run `passband doctor --repair`, then `dvc repro`" if fixable
                else "doctor does not repair what lies outside the project: fix the OUTSIDE paths yourself"))
        dest = move_aside(report)
    for path, why in report.not_moved:
        click.echo(f"{'NOT MOVED':8} {_rel(path, root)}: {why}")
    click.echo(f"doctor: moved {len(report.moved)} path{'s' if len(report.moved) != 1 else ''} to "
               f"{_rel(dest, root) if dest else '(nothing)'}; now run `dvc repro` to regenerate their rows")
    left = len(report.not_moved) + sum(1 for f in problems if f.level == "outside")
    if left:
        raise PassbandError(f"{left} problem{'s' if left != 1 else ''} left in place (NOT MOVED / OUTSIDE above): "
                            "doctor moves nothing outside the project; fix those paths yourself, then re-run")

