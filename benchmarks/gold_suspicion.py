"""Is ``gold_suspicion`` a calibrated probability that the key is wrong? Inject wrong keys, re-verify, and count.

    python benchmarks/gold_suspicion.py --root /path/to/run      # a run's problems, rollouts and policies
    python benchmarks/gold_suspicion.py                           # the committed real completions (tests/data)

The run's tables (``paths.*`` of ROOT/params.yaml) are copied into a temp folder and verified twice: with the
true keys, and with every integer key moved by one, up or down (a nearby wrong value). Then ``--draws`` times
(200), ``--rate`` (3 %) of the integer-keyed problems get the wrong key: their verdicts are taken from the second
run, every other problem's from the first, and the annotate stage's own scoring (pipeline/annotate/gold_suspicion.py:
:func:`prepare`, its model fitted anew on the mixed verdicts each draw, as a run would) scores every problem.

Printed, over every problem the score covers (the population a user sees, not the ones a policy solves):
precision over everything flagged (``gold_suspect``) and recall of the changed keys; the expected number of wrong
keys the model reports (the sum of its posteriors) beside the true number; a reliability table in 10 bins of the
score (problems, mean score, share of changed keys) and its expected calibration error; the fitted model.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

from pipeline import verify  # noqa: E402
from pipeline.annotate import gold_suspicion  # noqa: E402
from pipeline.annotate.working import KINDS  # noqa: E402
from pipeline.config import load_params  # noqa: E402
from pipeline.io import read_table, write_table  # noqa: E402
from pipeline.schema import schema  # noqa: E402

_INTEGER = re.compile(r"-?\d+")
BINS = 10


def nearby_wrong(gold: str, rng: random.Random) -> str | None:
    """An integer gold moved by one, up or down; None for any other gold (not eligible)."""
    g = gold.strip()
    return str(int(g) + rng.choice((-1, 1))) if _INTEGER.fullmatch(g) else None


@dataclass
class Figures:
    problems: int = 0  # scored, per draw
    eligible: int = 0
    changed_per_draw: int = 0
    draws: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    expected: float = 0.0  # sum over draws of the model's expected wrong keys
    bins: list[list[float]] = field(default_factory=lambda: [[0, 0.0, 0] for _ in range(BINS)])  # n, sum score, changed
    models: list[gold_suspicion.GoldModel] = field(default_factory=list)
    # (c, m, v) pooled counts of the changed keys the score missed and of the right keys it flagged (--signatures)
    missed: Counter = field(default_factory=Counter)
    false: Counter = field(default_factory=Counter)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def ece(self) -> float:
        n = sum(b[0] for b in self.bins)
        return sum(abs(b[1] / b[0] - b[2] / b[0]) * b[0] / n for b in self.bins if b[0]) if n else float("nan")


def _verdicts(root: Path, params) -> pa.Table:
    verify.run(params, root=root, progress=False)
    return read_table(root / params.paths.verdicts, name="verdicts").select(
        ["problem_id", "policy_id", "sample_idx", "verifier_id", "status", "extracted", "thinking_chars"])


def measure(problems: pa.Table, rollouts: pa.Table, policies: pa.Table, *, workdir: Path, rate: float = 0.03,
            draws: int = 200, threshold: float | None = None, prior: float | None = None, seed: int = 0,
            signatures: bool = False, pooled: bool = False, review_precision: float | None = None,
            working: bool = True) -> Figures:
    """The figures of injecting ``rate`` wrong keys into the tables given (verified in ``workdir``)."""
    params_doc = {"ingest": {"sources": [{"name": "synthetic", "kind": "synthetic"}]},
                  "policies": {"p": {"model": "embedded"}}, "rollout": {"policies": ["p"]},
                  "verify": {"workers": 2, "timeout_s": 2.0}}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params_doc))
    params = load_params(workdir / "params.yaml")
    threshold = params.annotate.gold_suspicion_threshold if threshold is None else threshold
    review_precision = params.annotate.gold_review_precision if review_precision is None else review_precision
    prior = params.annotate.gold_error_prior if prior is None else prior
    for name, table in (("problems", problems), ("rollouts", rollouts), ("policies", policies)):
        write_table(schema(name).validate(table), workdir / getattr(params.paths, name) / "part-0.parquet", name=name)
    clean = _verdicts(workdir, params)

    rng = random.Random(seed)
    golds = {r["problem_id"]: r["answer"] for r in problems.to_pylist()}
    changed = {pid: w for pid in sorted(golds) if (w := nearby_wrong(golds[pid], rng)) is not None}
    injected = problems.set_column(problems.schema.get_field_index("answer"), "answer",
                                   pa.array([changed.get(p, golds[p]) for p in problems.column("problem_id").to_pylist()]))
    write_table(schema("problems").validate(injected), workdir / params.paths.problems / "part-0.parquet", name="problems")
    dirty = _verdicts(workdir, params)

    con = duckdb.connect()
    con.register("problems", problems)
    con.register("clean_arrow", clean)
    con.register("dirty_arrow", dirty)
    vid = con.execute("SELECT any_value(verifier_id) FROM clean_arrow").fetchone()[0]
    con.execute("CREATE TABLE clean AS SELECT * FROM clean_arrow WHERE verifier_id = ?", [vid])
    con.execute("CREATE TABLE dirty AS SELECT * FROM dirty_arrow WHERE verifier_id = ?", [vid])
    if working:  # each rollout's working read once per verification (the read rows of any draw are among them)
        con.register("rollouts", rollouts)
        for name in ("clean", "dirty"):
            con.execute(f"CREATE TABLE {name}_work AS SELECT * FROM "
                        f"{gold_suspicion.read_working(con, samples=f'(SELECT * FROM {name})', rollouts='rollouts')}")
            con.execute("DROP TABLE _working")
    scored = {r[0] for r in con.execute("SELECT DISTINCT problem_id FROM clean WHERE status IN ('correct', 'incorrect')")
              .fetchall()}
    eligible = sorted(p for p in changed if p in scored)
    f = Figures(problems=len(scored), eligible=len(eligible), draws=draws,
                changed_per_draw=max(1, round(rate * len(scored))) if eligible else 0)
    for _ in range(draws if eligible else 0):
        drawn = set(rng.sample(eligible, min(f.changed_per_draw, len(eligible))))
        con.execute("CREATE OR REPLACE TEMP TABLE drawn (problem_id VARCHAR)")
        con.executemany("INSERT INTO drawn VALUES (?)", [(p,) for p in sorted(drawn)])
        con.execute("""CREATE OR REPLACE TEMP VIEW _v AS
            SELECT * FROM clean WHERE problem_id NOT IN (SELECT problem_id FROM drawn)
            UNION ALL SELECT * FROM dirty WHERE problem_id IN (SELECT problem_id FROM drawn)""")
        con.execute("""CREATE OR REPLACE TEMP VIEW _w AS
            SELECT * FROM clean_work WHERE problem_id NOT IN (SELECT problem_id FROM drawn)
            UNION ALL SELECT * FROM dirty_work WHERE problem_id IN (SELECT problem_id FROM drawn)""" if working else
                    "CREATE OR REPLACE TEMP VIEW _w AS SELECT 1")
        f.models.append(gold_suspicion.prepare(con, samples="_v", threshold=threshold, prior=prior,
                                               strata=None if pooled else f"({gold_suspicion.strata_sql('problems')})",
                                               review_precision=review_precision, working="_w" if working else None))
        sig = _signatures(con, "_w" if working else None) if signatures else {}
        for pid, score, suspect in con.execute("""SELECT problem_id, any_value(gold_suspicion), bool_or(gold_suspect)
                                                  FROM _modal WHERE gold_suspicion IS NOT NULL GROUP BY 1""").fetchall():
            wrong = pid in drawn
            f.tp += suspect and wrong
            f.fp += suspect and not wrong
            f.fn += wrong and not suspect
            if signatures and wrong != suspect:
                (f.missed if wrong else f.false)[sig[pid]] += 1
            f.expected += score
            b = f.bins[min(BINS - 1, int(score * BINS))]
            b[0] += 1
            b[1] += score
            b[2] += wrong
    return f


def _signatures(con: duckdb.DuckDBPyConnection, working: str | None) -> dict[str, tuple]:
    """Per problem of ``_v``: (c, m, v) pooled as the score pools them (on the gold, on the biggest wrong class, valid),
    and with ``working`` the biggest wrong class's working kind."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _cls AS {gold_suspicion.classes_sql('_v')}")
    kinds = (f"SELECT problem_id, answer_class, kind FROM ({gold_suspicion.class_kinds_sql('_v', working)})" if working
             else "SELECT NULL::VARCHAR AS problem_id, NULL::VARCHAR AS answer_class, NULL::VARCHAR AS kind WHERE false")
    rows = con.execute(f"""WITH pc AS (SELECT problem_id, answer_class, sum(n_class) AS n FROM _cls GROUP BY ALL),
        top AS (SELECT problem_id, answer_class FROM (SELECT *, row_number() OVER (PARTITION BY problem_id
                ORDER BY n DESC, answer_class) AS rank FROM pc WHERE answer_class IS NOT NULL) WHERE rank = 1),
        tk AS (SELECT top.problem_id, k.kind FROM top JOIN ({kinds}) k USING (problem_id, answer_class))
        SELECT problem_id, coalesce(sum(n) FILTER (WHERE answer_class IS NULL), 0)::BIGINT,
               coalesce(max(n) FILTER (WHERE answer_class IS NOT NULL), 0)::BIGINT, sum(n)::BIGINT,
               any_value(tk.kind)
        FROM pc LEFT JOIN tk USING (problem_id) GROUP BY 1""").fetchall()
    return {pid: (c, m, v) if working is None else (c, m, v, kind) for pid, c, m, v, kind in rows}


def _tables_of(root: Path) -> tuple[pa.Table, pa.Table, pa.Table]:
    params = load_params(root / "params.yaml")
    return tuple(read_table(root / getattr(params.paths, name), name=name)  # type: ignore[return-value]
                 for name in ("problems", "rollouts", "policies"))


def _embedded_tables(tmp: Path) -> tuple[pa.Table, pa.Table, pa.Table]:
    import embedded_set

    tmp.mkdir(parents=True)
    embedded_set.build(tmp)
    return _tables_of(tmp)


def report(f: Figures, *, rate: float) -> str:
    m = f.models[-1] if f.models else None
    lines = [f"{f.problems} problems scored, {f.eligible} with an integer key; {f.draws} draws of "
             f"{f.changed_per_draw} wrong keys ({rate:.0%} of the scored problems)",
             f"flagged: precision {f.precision:.3f} over everything flagged, recall {f.recall:.3f} "
             f"(TP {f.tp}, FP {f.fp}, FN {f.fn}; {(f.tp + f.fp) / max(1, f.draws):.2f} flagged a draw)",
             f"expected wrong keys (sum of the scores) {f.expected / max(1, f.draws):.2f} a draw, "
             f"true {f.changed_per_draw}",
             "| score bin | problems | mean score | share changed |", "|---|---|---|---|"]
    for i, (n, s, w) in enumerate(f.bins):
        if n:
            lines.append(f"| {i / BINS:.1f}–{(i + 1) / BINS:.1f} | {n:,} | {s / n:.3f} | {w / n:.3f} |")
    lines.append(f"expected calibration error {f.ece:.4f}")
    for what, counts in (("changed keys missed", f.missed), ("right keys flagged", f.false)):
        if counts:
            top = ", ".join(f"{'/'.join(map(str, sig))} x{n}" for sig, n in counts.most_common(12))
            lines.append(f"{what}, by (on the gold / on the biggest wrong answer / valid[ / its working]): {top}")
    if m is not None:
        lines.append(f"model (last draw): pass rate Beta({m.alpha:.3g}, {m.beta:.3g}) on {m.fitted_pass_rate} problems; "
                     f"wrong answers on one: 1 with {m.same:.3g}, else Beta({m.a:.3g}, {m.b:.3g}) on "
                     f"{m.fitted_agreement}; prior {m.prior}")
        if m.working_right:
            shares = ", ".join(f"{k} {r:.2f} / {w:.2f}" for k, r, w in zip(KINDS, m.working_right, m.working_wrong,
                                                                           strict=True))
            lines.append(f"  working, right / wrong classes ({m.fitted_working[0]} / {m.fitted_working[1]}): {shares}")
        for stratum, a, b, n in m.strata:
            lines.append(f"  stratum {stratum}: pass rate Beta({a:.3g}, {b:.3g}) on {n} problems")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, help="a run's folder (its params.yaml names the tables); default: the "
                                              "committed real completions of the embedded model")
    ap.add_argument("--threshold", type=float, help="default: annotate.gold_suspicion_threshold's default")
    ap.add_argument("--prior", type=float, help="default: annotate.gold_error_prior's default")
    ap.add_argument("--rate", type=float, default=0.03)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--signatures", action="store_true",
                    help="also print the pooled counts (c/m/v) of the missed changed keys and the flagged right ones")
    ap.add_argument("--pooled", action="store_true",
                    help="one pass-rate Beta for every problem (no strata by source and level), for comparison")
    ap.add_argument("--review-precision", type=float,
                    help="flag down the ranking at this expected precision (annotate.gold_review_precision); "
                         "default: annotate.gold_review_precision's default (null: the threshold rule alone)")
    ap.add_argument("--no-working", action="store_true",
                    help="leave the working out of the score (the model before it), for comparison")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tables = _tables_of(args.root) if args.root else _embedded_tables(Path(tmp) / "embedded")
        work = Path(tmp) / "work"
        work.mkdir()
        f = measure(*tables, workdir=work, threshold=args.threshold, prior=args.prior, rate=args.rate,
                    draws=args.draws, seed=args.seed, signatures=args.signatures, pooled=args.pooled,
                    review_precision=args.review_precision, working=not args.no_working)
    print(report(f, rate=args.rate))


if __name__ == "__main__":
    main()
