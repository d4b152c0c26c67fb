"""Each flag's precision and recall on real completions labelled by reading, and verify's agreement.

    .venv/bin/python benchmarks/flag_quality.py            # the table in docs/flags.md
    .venv/bin/python benchmarks/flag_quality.py --sweep    # plus the threshold sweeps behind the defaults
    .venv/bin/python benchmarks/flag_quality.py --show unsupported_answer   # the rows behind a figure
    .venv/bin/python benchmarks/flag_quality.py --main-job  # unsupported_answer on the main job's data/ (after repro)

Reads pipeline/annotate/flag_labels.jsonl (real SmolLM2-135M completions, 3-shot, max_tokens 256, on the
synthetic set and GSM8K test; labelled by hand following docs/flags.md), runs the real verify core
(math-verify) and annotate core (every detector) on them and prints, per flag: flagged, labelled,
precision and recall with Wilson 95 % intervals. Targets (a flag a user filters on must rarely be wrong):
precision >= 0.9 for every shortcut flag, recall >= 0.8 for unsupported_answer; tests/test_annotate_flag_quality.py holds
each figure at or above what it was when the set was labelled.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.annotate.measured import MEASURED  # noqa: E402
from pipeline.annotate.quality import (  # noqa: E402
    FLAG_LABEL,
    LABELLED_SET,
    load_labels,
    measure,
    render,
    to_yaml,
    verify_rows,
)
from pipeline.config import AnnotateConfig  # noqa: E402

SWEEPS = {  # detector.knob (annotate.options.<detector>.<knob>) -> values tried (the default first)
    "unsupported_answer.setup": [True, False],
    "computation_skip.ratio": [0.67, 0.34, 0.5, 1.0],
    "answer_repetition.answer_min": [3, 2, 4],
    "answer_repetition.line_min": [3, 2, 4],
    "repetition_loop.max_distinct_ratio": [0.5, 0.3, 0.7],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--labels", type=Path, default=LABELLED_SET)
    ap.add_argument("--sweep", action="store_true", help="also sweep each threshold over the labelled set")
    ap.add_argument("--write", action="store_true", help=f"write the figures to {MEASURED.relative_to(REPO)}")
    ap.add_argument("--check", action="store_true",
                    help=f"only exit 1 when {MEASURED.relative_to(REPO)} differs from the figures measured now")
    ap.add_argument("--main-job", action="store_true",
                    help="on the main job's tables (params.yaml): correct rollouts with a false statement vs flagged")
    ap.add_argument("--show", choices=sorted(FLAG_LABEL), help="list the rows where this flag and its label disagree")
    args = ap.parse_args()
    if args.main_job:
        return main_job()
    rows = load_labels(args.labels)
    verified = verify_rows(rows)
    q = measure(rows, verified=verified)
    if args.check:  # what `python -m pipeline.docs --check` runs: the committed figures are the code's
        if MEASURED.read_text() != to_yaml(q):
            sys.exit(f"{MEASURED.relative_to(REPO)} differs from the figures measured now "
                     "(run: python benchmarks/flag_quality.py --write)")
        return None
    print(render(q))
    targets = [f"{f.flag} precision {f.precision:.2f} {'>=' if f.precision >= 0.9 else '<'} 0.9"
               for f in q.flags if f.kind == "shortcut" and f.precision is not None]
    un = q.of("unsupported_answer")
    if un.recall is not None:
        targets.append(f"unsupported_answer recall {un.recall:.2f} {'>=' if un.recall >= 0.8 else '<'} 0.8")
    print("\ntargets: " + "; ".join(targets))
    if args.write:
        from pipeline.io import atomic_write_text

        atomic_write_text(MEASURED, to_yaml(q))
        print(f"\nwrote {MEASURED.relative_to(REPO)}")
    if args.show:
        label = FLAG_LABEL[args.show]
        fired = q.hits[args.show]
        print(f"\n{args.show} vs {label}: false positives, then misses")
        for r in rows:
            if (r["id"] in fired) != r[label]:
                kind = "FP" if r["id"] in fired else "FN"
                print(f"{kind} {r['id']} gold {r['gold']!r}: {r['completion'][:200]!r}  [{r['note']}]")
    if args.sweep:
        print("\n| knob | value | flag | flagged | precision | recall |\n|---|---:|---|---:|---|---|")
        for knob, values in SWEEPS.items():
            for v in values:
                flag, own = knob.split(".")
                f = measure(rows, annotate=AnnotateConfig(options={flag: {own: v}}), verified=verified).of(flag)
                p = "-" if f.precision is None else f"{f.precision:.2f}"
                r = "-" if f.recall is None else f"{f.recall:.2f}"
                print(f"| {knob} | {v} | {f.flag} | {f.flagged} | {p} | {r} |")


def main_job() -> None:
    """Every graded-correct rollout of the main job whose working holds a false statement, and whether it carries
    unsupported_answer; then every unsupported_answer hit on a correct rollout, to read."""
    from pipeline.arith import statements
    from pipeline.catalog import query
    from pipeline.config import load_params

    params = load_params(REPO / "params.yaml")
    df = query(params, """
        SELECT v.problem_id, v.sample_idx, p.question, p.answer AS gold, r.completion, f.evidence
        FROM verdicts v JOIN rollouts r USING (problem_id, policy_id, sample_idx) JOIN problems p USING (problem_id)
        LEFT JOIN (SELECT * FROM flags WHERE flag = 'unsupported_answer') f USING (problem_id, policy_id, sample_idx)
        WHERE v.status = 'correct' ORDER BY ALL""", root=REPO)
    rows = df.to_dicts()
    false = [r for r in rows if any(s.ok is False for s in statements(r["completion"]))]
    flagged = [r for r in rows if r["evidence"] is not None]
    print(f"{len(rows)} correct rollouts; {len(false)} hold a false statement, {sum(r['evidence'] is not None for r in false)} "
          f"of them carry unsupported_answer; {len(flagged)} carry it in all:")
    for r in flagged:
        print(f"  gold {r['gold']}: {r['completion'].strip()[:90]!r} -> {r['evidence']}")


if __name__ == "__main__":
    main()
