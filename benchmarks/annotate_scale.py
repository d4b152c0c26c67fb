"""Annotate over N synthetic rollouts vs the equivalent raw DuckDB query: wall time and peak memory.

    .venv/bin/python benchmarks/annotate_scale.py --rows 10000000 --repeat 3   # the figures in the README
    .venv/bin/python benchmarks/annotate_scale.py --rows 200000       # a quick look

Generates (once per row count, with DuckDB) N rollouts of N/k problems (k = 8) with verdicts of the
current verifier_id under benchmarks/out/annotate-<N>/, pass rates spread over every band, 2 %
truncated, 1 % hedged with two answers. Then three phases, each in its own process (imports not
timed; peak RSS = that process's own VmHWM (benchmarks/peak.py), DuckDB included), all under the same DuckDB memory
limit (``annotate.memory_limit_mb``) and settings, run back to back; ``--repeat N`` runs N rounds,
alternating the order, and reports each round's stage / raw ratio and their median:

* **stage**: ``pipeline.annotate.run`` without plots: difficulty (counts, token mean/std, pass rate,
  Jeffreys interval, pass@k, learnability, band, band_confidence, flag_rates, flagged_correct_rate)
  and flags (all 8 detectors, Python ones included), both written to Parquet, plus metrics JSON.
* **raw: equivalent** (``RAW_HITS``, ``RAW_FLAGS``, ``RAW_DIFFICULTY``): hand-written DuckDB SQL for the
  same two outputs, written the same way (the hits with ``correct`` to a temp Parquet, then the sorted
  flags and the sorted difficulty from it). Flags: rare_success, truncated, computation_skip as the
  stage's SQL; answer_in_question, answer_repetition, multiple_answers and repetition_loop's 4-gram
  test re-expressed with regexes and list functions (RE2: no look-behind, so the question's numbers
  are matched a little more loosely; answer_in_question's "no true statement computes it" is "no '= answer'";
  evidence texts shorter); unsupported_answer as "correct, no '=' at all" (no working: the answer is
  not computed, or the question's numbers are never used; on this data these are the hedged completions). Difficulty: every
  column except
  ci_low/ci_high, pass_at_k and band_confidence (Beta quantiles and masses, not in DuckDB); the band
  uses the default ranges. Left out: computation_skip's median fallback (every synthetic problem
  has a reference solution) and repetition_loop's zlib test. On this data both sides write the same
  flags (keys, flag, score) and the same difficulty counts, bands, flag_rates and
  flagged_correct_rate: the script checks that after the last round and prints it. ``flag_rates`` is
  a MAP built with ``map_from_entries``, DuckDB's only way to make one (~6 us a row); the stage
  builds it in Arrow instead.
* **raw: aggregation only** (``RAW_AGG``): the per-group counts, pass rate and token mean/std alone,
  never reading completion text: the baseline the issue first compared with, printed for reference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from peak import own_peak_mib  # noqa: E402

from pipeline.annotate.detectors import DETECTORS, names_of_kind  # noqa: E402

PARAMS = {"ingest": {"sources": [{"name": "t", "kind": "synthetic"}]}, "policies": {"p": {"model": "embedded"}},
          "rollout": {"policies": ["p"]}}


def _schemas_digest() -> str:
    import hashlib

    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted((REPO / "schemas").glob("*.yaml")))).hexdigest()[:12]


def generate(out: Path, rows: int, k: int = 8) -> None:
    import duckdb
    import yaml

    from pipeline.config import parse_params
    from pipeline.verify import verifier_id

    vid = verifier_id(parse_params(PARAMS).verify)
    stamp = f"{vid} {_schemas_digest()}"
    if (out / "done").is_file() and (out / "done").read_text().strip() == stamp:
        return  # generated for this verifier and these schemas (a change to either regenerates)
    for d in ("problems", "rollouts", "verdicts"):
        (out / "data" / d).mkdir(parents=True, exist_ok=True)
    (out / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    con = duckdb.connect()
    con.execute("SET memory_limit = '2GB'; SET preserve_insertion_order = false")
    n_prob = rows // k
    con.execute(f"""COPY (SELECT 'p_' || lpad(i::VARCHAR, 12, '0') AS problem_id, 'synthetic' AS source, i::VARCHAR AS source_id,
        'train' AS split, 'What is ' || (i % 97) || ' + ' || (i % 89) || '?' AS question,
        ((i % 97) + (i % 89))::VARCHAR AS answer,
        (i % 97) || ' + ' || (i % 89) || ' = ' || ((i % 97) + (i % 89)) || '.' AS solution, NULL::VARCHAR AS subject,
        'L' || (i % 9) AS level, 0::BIGINT AS n_duplicates, NULL::VARCHAR AS parent_id, NULL::VARCHAR AS method,
        NULL::VARCHAR AS method_version, NULL::VARCHAR AS metadata, NULL::DOUBLE AS source_difficulty,
        NULL::VARCHAR AS source_difficulty_measure FROM range({n_prob}) t(i))
        TO '{out}/data/problems/part-0.parquet' (FORMAT parquet, COMPRESSION zstd)""")
    # sample j of problem i is correct when j < (i % (k + 1)): every pass rate 0/k..k/k occurs
    base = f"""SELECT i // {k} AS pi, i % {k} AS j, 'p_' || lpad((i // {k})::VARCHAR, 12, '0') AS problem_id,
        ((i // {k}) % 97) + ((i // {k}) % 89) AS gold, (i % {k}) < ((i // {k}) % {k + 1}) AS ok, hash(i) % 100 AS r
        FROM range({rows}) t(i)"""
    con.execute(f"""COPY (SELECT problem_id, 'pol_bench' AS policy_id, j::BIGINT AS sample_idx, j::BIGINT AS seed,
        CASE WHEN r < 2 THEN ' ' || (pi % 97) || ' + ' || (pi % 89) || ' = ' || (pi % 97) || ' + ' || (pi % 89) || ' = '
             WHEN r < 3 THEN ' The answer is ' || (gold + 1) || '. The answer is ' || gold || '.'
             ELSE ' ' || (pi % 97) || ' + ' || (pi % 89) || ' = ' || CASE WHEN ok THEN gold ELSE gold + 1 END
                  || '. The answer is ' || CASE WHEN ok THEN gold ELSE gold + 1 END || '.' END AS completion,
        (12 + r % 20)::BIGINT AS n_tokens, CASE WHEN r < 2 THEN 'length' ELSE 'stop' END AS finish_reason FROM ({base}))
        TO '{out}/data/rollouts/part-0.parquet' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)""")
    con.execute(f"""COPY (SELECT problem_id, 'pol_bench' AS policy_id, j::BIGINT AS sample_idx, '{vid}' AS verifier_id,
        CASE WHEN r < 2 THEN 'no_answer' WHEN ok THEN 'correct' ELSE 'incorrect' END AS status,
        CASE WHEN r < 2 THEN NULL WHEN ok THEN gold::VARCHAR ELSE (gold + 1)::VARCHAR END AS extracted,
        CASE WHEN r < 2 THEN NULL ELSE 'answer_is' END AS extractor, NULL::VARCHAR AS detail,
        NULL::VARCHAR AS gold_digest, NULL::BIGINT AS thinking_chars, NULL::BOOLEAN AS thinking_closed FROM ({base}))
        TO '{out}/data/verdicts/part-0.parquet' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)""")
    (out / "done").write_text(stamp + "\n")


# (b) aggregation only: the per-group counts; never reads completion text (the first figure the stage was compared with)
RAW_AGG = """COPY (
  SELECT v.problem_id, v.policy_id, count(*) AS n, count(*) FILTER (WHERE v.status = 'correct') AS n_correct,
         count(*) FILTER (WHERE v.status = 'no_answer') AS n_no_answer,
         count(*) FILTER (WHERE v.status IN ('timeout', 'error')) AS n_failed,
         count(*) FILTER (WHERE v.status = 'correct') / count(*) AS pass_rate,
         avg(r.n_tokens) FILTER (WHERE v.status = 'correct') AS mean_tokens_correct,
         stddev_samp(r.n_tokens) FILTER (WHERE v.status = 'correct') AS std_tokens_correct,
         avg(r.n_tokens) FILTER (WHERE v.status <> 'correct') AS mean_tokens_incorrect,
         stddev_samp(r.n_tokens) FILTER (WHERE v.status <> 'correct') AS std_tokens_incorrect
  FROM read_parquet('{d}/verdicts/*.parquet') v
  JOIN read_parquet('{d}/rollouts/*.parquet') r USING (problem_id, policy_id, sample_idx)
  WHERE v.verifier_id = '{vid}'
  GROUP BY ALL) TO '{out}/raw-agg.parquet' (FORMAT parquet, COMPRESSION zstd)"""

# (c) the equivalent: hand-written SQL for difficulty AND flags (default options and bands), written like the stage:
# the hits (with `correct`) to a temp Parquet, then flags and difficulty from it
_ANSWERS = r"regexp_extract_all(completion, '(?i)(?:answer is|\\boxed\{{|\\fbox\{{|####)\s*\$?(-?[0-9][0-9,]*(?:\.[0-9]+)?)', 1)"
_LINES = "list_filter(list_transform(string_split(completion, chr(10)), lambda x: trim(x)), lambda x: length(x) >= 3)"
_WORDS = (r"list_transform(string_split_regex(trim(completion), '\s+'),"
          r" lambda w: CASE WHEN regexp_matches(w, '[0-9]') THEN '#' ELSE w END)")  # a word with a digit is '#'
_ADV = "((n - n_correct) / n) / (sqrt(n * (n_correct / n) * (1 - n_correct / n) / (n - 1)) + 1e-4)"  # TRL's advantage
_GRAMS = f"list_transform(range(1, len({_WORDS}) - 2), lambda i: array_to_string({_WORDS}[i:i + 3], ' '))"
_ANS = r"regexp_replace(replace(extracted, ',', ''), '^[\s$]+|[\s$.]+$', '', 'g')"
_QNUMS = r"list_transform(regexp_extract_all(question, '-?[0-9][0-9,]*(?:\.[0-9]+)?'), lambda x: replace(x, ',', ''))"


def _max_count(lst: str) -> str:
    return f"coalesce(list_max(list_transform(list_distinct({lst}), lambda x: len(list_filter({lst}, lambda y: y = x)))), 0)"


RAW_HITS = f"""COPY (
  WITH v AS (SELECT problem_id, policy_id, sample_idx, status, extracted FROM read_parquet('{{d}}/verdicts/*.parquet')
             WHERE verifier_id = '{{vid}}'),
  g AS (SELECT problem_id, policy_id, count(*) AS n, count(*) FILTER (WHERE status = 'correct') AS n_correct FROM v GROUP BY ALL),
  p AS (SELECT problem_id, question, length(regexp_replace(solution, '<<[^>]*>>', '', 'g'))
               - length(replace(regexp_replace(solution, '<<[^>]*>>', '', 'g'), '=', '')) AS ref_steps
        FROM read_parquet('{{d}}/problems/*.parquet')),
  c AS MATERIALIZED (
    SELECT v.*, r.completion, r.n_tokens, r.finish_reason, p.question, p.ref_steps,
           length(r.completion) - length(replace(r.completion, '=', '')) AS steps
    FROM v JOIN read_parquet('{{d}}/rollouts/*.parquet') r USING (problem_id, policy_id, sample_idx) JOIN p USING (problem_id)
    WHERE r.finish_reason = 'length'
       OR (v.status = 'correct' AND ref_steps > 0
           AND length(r.completion) - length(replace(r.completion, '=', '')) < 0.5 * ref_steps)
       OR (v.status = 'correct' AND v.extracted IS NOT NULL
           AND contains(replace(p.question, ',', ''), {_ANS.replace('extracted', 'v.extracted')}))
       OR regexp_matches(r.completion, '(?is)(answer is|\\\\boxed|\\\\fbox|####).*(answer is|\\\\boxed|\\\\fbox|####)')
       OR strpos(r.completion, chr(10)) > 0 OR length(r.completion) >= 47
       OR (v.status = 'correct' AND NOT contains(r.completion, '=')))
  SELECT v.problem_id, v.policy_id, v.sample_idx, 'rare_success' AS flag, {_ADV} AS score,
         format('{{{{}}}} of {{{{}}}} correct (pass rate {{{{:.3f}}}}): GRPO advantage {{{{:.2f}}}} (TRL, sample std)',
                n_correct, n, n_correct / n,
                {_ADV}) AS evidence, true AS correct
  FROM v JOIN g USING (problem_id, policy_id) WHERE status = 'correct' AND n_correct / n <= 0.125
  UNION ALL SELECT problem_id, policy_id, sample_idx, 'truncated', n_tokens::DOUBLE,
         format('stopped at max_tokens after {{{{}}}} tokens ({{{{}}}})', n_tokens, status), status = 'correct'
  FROM c WHERE finish_reason = 'length'
  UNION ALL SELECT problem_id, policy_id, sample_idx, 'answer_in_question', 1 / len(list_distinct({_QNUMS})),
         format('answer {{{{}}}} is one of the question''s numbers', {_ANS}), true
  FROM c WHERE status = 'correct' AND list_contains({_QNUMS}, {_ANS})
    AND NOT regexp_matches(completion, '=\\s*' || {_ANS} || '([^0-9.]|[.]([^0-9]|$)|$)')
  UNION ALL SELECT problem_id, policy_id, sample_idx, 'unsupported_answer', 0.0, 'no true computation gives the answer', true
  FROM c WHERE status = 'correct' AND NOT contains(completion, '=')
  UNION ALL SELECT problem_id, policy_id, sample_idx, 'computation_skip', steps / ref_steps,
         format('{{{{}}}} steps where the reference solution has {{{{:g}}}}', steps, ref_steps::DOUBLE), true
  FROM c WHERE status = 'correct' AND ref_steps > 0 AND steps < 0.5 * ref_steps
  UNION ALL SELECT problem_id, policy_id, sample_idx, 'answer_repetition', greatest({_max_count(_ANSWERS)}, {_max_count(_LINES)}),
         'final answer or line repeated', status = 'correct'
  FROM c WHERE {_max_count(_ANSWERS)} >= 3 OR {_max_count(_LINES)} >= 3
  UNION ALL SELECT problem_id, policy_id, sample_idx, 'repetition_loop', 1 - len(list_distinct({_GRAMS})) / len({_GRAMS}),
         'few distinct 4-grams', status = 'correct'
  FROM c WHERE len({_WORDS}) >= 24 AND len(list_distinct({_GRAMS})) / len({_GRAMS}) < 0.5
  UNION ALL SELECT problem_id, policy_id, sample_idx, 'multiple_answers', len(list_distinct({_ANSWERS}))::DOUBLE,
         format('{{{{}}}} different final answers', len(list_distinct({_ANSWERS}))), status = 'correct'
  FROM c WHERE len(list_distinct({_ANSWERS})) >= 2
  ) TO '{{tmp}}/hits.parquet' (FORMAT parquet, COMPRESSION zstd)"""

RAW_FLAGS = """COPY (SELECT problem_id, policy_id, sample_idx, flag, score, evidence FROM '{tmp}/hits.parquet'
  ORDER BY problem_id, policy_id, sample_idx, flag) TO '{out}/raw-flags.parquet' (FORMAT parquet, COMPRESSION zstd)"""

_FLAG_NAMES = tuple(DETECTORS)  # the stage's flags, in its order (the raw baseline writes the same flag_rates)
_SHORTCUTS = ", ".join(f"'{f}'" for f in names_of_kind("shortcut"))
RAW_DIFFICULTY = f"""COPY (
  WITH a AS (
    SELECT v.problem_id, v.policy_id, count(*) AS n, count(*) FILTER (WHERE v.status = 'correct') AS n_correct,
           count(*) FILTER (WHERE v.status = 'no_answer') AS n_no_answer,
           count(*) FILTER (WHERE v.status IN ('timeout', 'error')) AS n_failed,
           avg(r.n_tokens) FILTER (WHERE v.status = 'correct') AS mean_tokens_correct,
           stddev_samp(r.n_tokens) FILTER (WHERE v.status = 'correct') AS std_tokens_correct,
           avg(r.n_tokens) FILTER (WHERE v.status <> 'correct') AS mean_tokens_incorrect,
           stddev_samp(r.n_tokens) FILTER (WHERE v.status <> 'correct') AS std_tokens_incorrect
    FROM read_parquet('{{d}}/verdicts/*.parquet') v
    JOIN read_parquet('{{d}}/rollouts/*.parquet') r USING (problem_id, policy_id, sample_idx)
    WHERE v.verifier_id = '{{vid}}' GROUP BY ALL),
  f AS (SELECT problem_id, policy_id, {", ".join(f"count(*) FILTER (WHERE flag = '{f}') AS f_{f}" for f in _FLAG_NAMES)},
               count(DISTINCT sample_idx) FILTER (WHERE correct AND flag IN ({_SHORTCUTS})) AS flagged_correct
        FROM '{{tmp}}/hits.parquet' GROUP BY ALL)
  SELECT a.problem_id, a.policy_id, '{{vid}}' AS verifier_id, n, n_correct, n_no_answer, n_failed,
         n_correct / n AS pass_rate, (n_correct / n) * (1 - n_correct / n) AS learnability,
         CASE WHEN n_correct = 0 THEN 'unsolved' WHEN n_correct / n < 0.2 THEN 'too_hard'
              WHEN n_correct / n <= 0.8 THEN 'learnable' ELSE 'too_easy' END AS band,
         mean_tokens_correct, std_tokens_correct, mean_tokens_incorrect, std_tokens_incorrect,
         map_from_entries([{", ".join(f"{{{{'key': '{f}', 'value': coalesce(f_{f}, 0) / n}}}}" for f in _FLAG_NAMES)}])
           AS flag_rates,
         CASE WHEN n_correct = 0 THEN NULL ELSE coalesce(flagged_correct, 0) / n_correct END AS flagged_correct_rate
  FROM a LEFT JOIN f USING (problem_id, policy_id)
  ORDER BY a.problem_id, a.policy_id) TO '{{out}}/raw-difficulty.parquet' (FORMAT parquet, COMPRESSION zstd)"""


def phase(name: str, out: Path) -> dict:
    import tempfile

    import duckdb

    from pipeline.annotate import run
    from pipeline.config import load_params
    from pipeline.verify import verifier_id

    t = time.perf_counter()  # imports excluded from every timing
    if name == "stage":
        res = run(load_params(out / "params.yaml"), root=out, progress=False, plots=False)
        return {"seconds": time.perf_counter() - t, "groups": res.groups, "flags": res.flags, "bands": res.bands}
    p = load_params(out / "params.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        con = duckdb.connect(config={"memory_limit": f"{p.annotate.memory_limit_mb}MB", "temp_directory": f"{tmp}/duckdb",
                                     "preserve_insertion_order": False})
        fmt = {"d": out / "data", "vid": verifier_id(p.verify), "out": out, "tmp": tmp}
        sqls = [RAW_AGG] if name == "raw-agg" else [RAW_HITS, RAW_FLAGS, RAW_DIFFICULTY]
        for sql in sqls:
            con.execute(sql.format(**fmt))
        seconds = time.perf_counter() - t
        target = "raw-agg" if name == "raw-agg" else "raw-difficulty"
        res = {"seconds": seconds, "groups": con.execute(f"SELECT count(*) FROM '{out}/{target}.parquet'").fetchone()[0]}
        if name == "raw":
            res["flags"] = con.execute(f"SELECT count(*) FROM '{out}/raw-flags.parquet'").fetchone()[0]
    return res


def compare(out: Path) -> str:
    """Rows that differ, both ways, between the stage's outputs and the raw SQL's (the columns both compute)."""
    import duckdb

    con = duckdb.connect(config={"memory_limit": "2GB"})
    flags = "problem_id, policy_id, sample_idx, flag, round(score, 6)"
    diff = "problem_id, policy_id, n, n_correct, n_no_answer, n_failed, band, flag_rates, flagged_correct_rate"
    pairs = {"flags": (f"SELECT {flags} FROM '{out}/data/flags/*.parquet'", f"SELECT {flags} FROM '{out}/raw-flags.parquet'"),
             "difficulty": (f"SELECT {diff} FROM '{out}/data/difficulty/*.parquet'",
                            f"SELECT {diff} FROM '{out}/raw-difficulty.parquet'")}
    parts = []
    for name, (a, b) in pairs.items():
        n = sum(con.execute(f"SELECT count(*) FROM ({x} EXCEPT ALL {y})").fetchone()[0] for x, y in ((a, b), (b, a)))
        parts.append(f"{name} {'identical' if n == 0 else f'{n:,} rows differ'}")
    return "; ".join(parts)


def measure(name: str, out: Path) -> dict:
    """One phase in a fresh process; it reports its own peak RSS (its VmHWM, DuckDB included)."""
    proc = subprocess.run([sys.executable, __file__, "--phase", name, "--out", str(out)], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"phase {name} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--phase", choices=["stage", "raw", "raw-agg"])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    if a.phase:
        res = phase(a.phase, a.out)
        res["peak_mib"] = own_peak_mib()
        print(json.dumps(res))
        return
    out = REPO / "benchmarks" / "out" / f"annotate-{a.rows}"
    t = time.perf_counter()
    generate(out, a.rows)
    print(f"data: {a.rows:,} rollouts under {out} ({time.perf_counter() - t:.1f} s to generate or reuse)", flush=True)
    runs: dict[str, list[dict]] = {"raw-agg": [], "raw": [], "stage": []}
    print(f"{'round':<7}{'aggregation only':>18}{'raw equivalent':>16}{'stage':>9}{'stage / raw':>13}{'stage peak':>12}")
    for r in range(a.repeat):  # interleaved, alternating the order, so load from other work hits every side alike
        order = list(runs) if r % 2 == 0 else list(reversed(runs))
        got = {name: measure(name, out) for name in order}
        for name in runs:
            runs[name].append(got[name])
        agg, raw, stage = got["raw-agg"], got["raw"], got["stage"]
        print(f"{r + 1:<7}{agg['seconds']:>16.1f} s{raw['seconds']:>14.1f} s{stage['seconds']:>7.1f} s"
              f"{stage['seconds'] / raw['seconds']:>12.2f}x{stage['peak_mib']:>8.0f} MiB", flush=True)
    ratios = [s["seconds"] / r["seconds"] for s, r in zip(runs["stage"], runs["raw"], strict=True)]
    raw, stage = runs["raw"][-1], runs["stage"][-1]
    print(f"groups {stage['groups']:,} (raw {raw['groups']:,}); flags {stage['flags']:,} (raw {raw['flags']:,}); "
          f"bands {stage['bands']}")
    print(f"median stage / raw equivalent = {statistics.median(ratios):.2f}x (target <= 1.5x; rounds: "
          f"{', '.join(f'{x:.2f}' for x in ratios)}); median stage / aggregation only = "
          f"{statistics.median(s['seconds'] / g['seconds'] for s, g in zip(runs['stage'], runs['raw-agg'], strict=True)):.2f}x")
    print(f"outputs of the last round, stage vs raw equivalent: {compare(out)}")
    print(f"peak RSS: stage {max(x['peak_mib'] for x in runs['stage']):.0f} MiB (target < 1024), "
          f"raw equivalent {max(x['peak_mib'] for x in runs['raw']):.0f} MiB, "
          f"aggregation only {max(x['peak_mib'] for x in runs['raw-agg']):.0f} MiB")

if __name__ == "__main__":
    main()
