"""Answer-key suspicion: the score, the modal answer per (problem, policy), and the injected-wrong-gold measurement
(benchmarks/gold_suspicion.py) on a small case of fake-engine rollouts."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pytest

from pipeline.annotate.core import annotate_tables
from pipeline.annotate.gold_suspicion import MIN_FIT, MIN_STRATUM, REVIEW_FLOOR, GoldModel, fit, posterior, prepare
from pipeline.annotate.working import KINDS
from pipeline.config import AnnotateConfig
from pipeline.engines import Prompt
from pipeline.engines.fake import fake_completion
from pipeline.keys import problem_id
from pipeline.schema import schema

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

STRONG = GoldModel(prior=0.03, alpha=4.0, beta=1.0, a=1.0, b=3.0)  # solves most items; wrong answers scatter
WEAK = GoldModel(prior=0.03, alpha=0.3, beta=0.5, a=1.0, b=3.0)  # fails most items


def test_the_posterior_weighs_agreement_against_what_the_policy_usually_does() -> None:
    assert posterior(STRONG, 0, 8, 8) > 0.9  # a strong policy, 8 of 8 on one other answer: the key is likely wrong
    assert posterior(WEAK, 0, 8, 8) < posterior(STRONG, 0, 8, 8)  # a weak one failing is no surprise
    assert posterior(STRONG, 0, 8, 8) > posterior(STRONG, 0, 6, 8) > posterior(STRONG, 0, 4, 8)
    assert posterior(STRONG, 4, 4, 8) < 0.01  # a tie: the key is reached as often as the other answer
    assert posterior(STRONG, 8, 0, 8) == 0.0  # no wrong rollout
    assert posterior(STRONG, 0, 1, 1) < 0.5  # one rollout cannot flag
    assert posterior(STRONG, 0, 12, 16) > posterior(STRONG, 0, 6, 8)  # a second policy agreeing: more evidence
    assert posterior(STRONG, 2, 12, 16) < posterior(STRONG, 0, 12, 16)  # rollouts that reach the key: less
    # a policy that repeats one wrong answer where it fails explains agreement: lower
    assert posterior(GoldModel(**{**STRONG.__dict__, "same": 0.5}), 0, 8, 8) < posterior(STRONG, 0, 8, 8)
    # the prior moves it: the odds scale with the prior odds
    low, high = (posterior(GoldModel(**{**STRONG.__dict__, "prior": p}), 0, 8, 8) for p in (0.01, 0.1))
    assert low < posterior(STRONG, 0, 8, 8) < high
    with pytest.raises(ValueError, match="v=8"):
        posterior(STRONG, 5, 4, 8)


def _tables(rows: list[tuple[str, str, int, str, str | None]]):
    """(question, policy, sample, status, extracted) rows -> verdicts, rollouts, problems."""
    verdicts = [{"problem_id": problem_id(q), "policy_id": pol, "sample_idx": i, "verifier_id": "v", "status": st,
                 "extracted": ex} for q, pol, i, st, ex in rows]
    rollouts = [{"problem_id": problem_id(q), "policy_id": pol, "sample_idx": i, "seed": i, "completion": f"{ex}",
                 "n_tokens": 5, "finish_reason": "stop"} for q, pol, i, _, ex in rows]
    problems = [{"problem_id": problem_id(q), "source": "t", "source_id": q, "question": q, "answer": "1",
                 "n_duplicates": 0} for q in {r[0] for r in rows}]
    return (schema("verdicts").from_rows(verdicts), schema("rollouts").from_rows(rollouts),
            schema("problems").from_rows(problems))


def test_modal_answer_share_and_pooled_score() -> None:
    rows = []
    # A agrees on 6 (written two ways), B on 6 too; both policies' rows carry the one pooled score
    rows += [("q1", "A", i, "incorrect", ["6", "6.0 ", "6", "$6$"][i % 4]) for i in range(6)]
    rows += [("q1", "A", 6 + i, "correct", "5") for i in range(2)]
    rows += [("q1", "B", i, "incorrect", "6") for i in range(6)] + [("q1", "B", 6, "no_answer", None)]
    # an item the policy solves: the gold's class is the mode, whatever the wrong answers are
    rows += [("q2", "A", i, "correct", ["4", "4.0"][i % 2]) for i in range(5)]
    rows += [("q2", "A", 5 + i, "incorrect", str(7 + i)) for i in range(3)]
    # a tie goes to the gold, and never flags
    rows += [("q3", "A", i, "correct" if i < 2 else "incorrect", "9" if i < 2 else "8") for i in range(4)]
    # no format-valid rollout: no modal answer, no score
    rows += [("q4", "A", i, "no_answer", None) for i in range(3)]
    # every rollout on one wrong answer
    rows += [("q5", "A", i, "incorrect", "1") for i in range(8)]
    difficulty, _ = annotate_tables(*_tables(rows), config=AnnotateConfig(), verifier_id="v")
    got = {(r["problem_id"], r["policy_id"]): r for r in difficulty.to_pylist()}
    uniform = GoldModel(prior=AnnotateConfig().gold_error_prior)  # fewer than MIN_FIT problems: Beta(1, 1) each
    q1a, q1b = got[(problem_id("q1"), "A")], got[(problem_id("q1"), "B")]
    assert (q1a["modal_answer"], q1a["modal_share"], q1a["modal_is_gold"]) == ("6", 0.75, False)
    assert (q1b["modal_answer"], q1b["modal_share"]) == ("6", 1.0)
    # SQL and Python agree: pooled over A and B, 2 on the gold, 12 on "6", 14 format-valid
    assert q1a["gold_suspicion"] == q1b["gold_suspicion"] == pytest.approx(posterior(uniform, 2, 12, 14), rel=1e-9)
    q2 = got[(problem_id("q2"), "A")]
    assert (q2["modal_is_gold"], q2["modal_share"], q2["gold_suspect"]) == (True, 0.625, False)
    assert q2["gold_suspicion"] == pytest.approx(posterior(uniform, 5, 1, 8), rel=1e-9)
    q3 = got[(problem_id("q3"), "A")]
    assert q3["modal_is_gold"] and q3["modal_answer"] == "9" and q3["gold_suspect"] is False
    q4 = got[(problem_id("q4"), "A")]
    assert (q4["modal_answer"], q4["modal_share"], q4["gold_suspicion"], q4["gold_suspect"]) == (None, None, None, None)
    q5 = got[(problem_id("q5"), "A")]
    assert q5["gold_suspicion"] == pytest.approx(posterior(uniform, 0, 8, 8), rel=1e-9)


@pytest.mark.parametrize(("forms", "same"), [
    # real forms of one wrong answer from four reasoning models on GSM8K (thinking-llms-interp): a unit is no class
    (["135\\, \\text{kWh}", "135", "135 \\text{ kWh}", "$135$"], True),
    (["\\$42,\\!000", "42,\\!000", "42000 \\text{ dollars}"], True),
    (["25\\%", "25", "25 \\%"], True),
    (["30^\\circ", "30", "30^{\\circ}", "30°"], True),
    (["2x", "2"], False),  # a symbol after a number is math, not a unit
    (["5 \\text{cm}^2", "5"], False),  # a unit with a power is left whole
    (["12", "12.5 \\text{ m}"], False),
])
def test_a_unit_is_no_part_of_an_answers_class(forms, same) -> None:
    from pipeline.annotate.gold_suspicion import NORMALISED_SQL

    classes = {duckdb.execute(f"SELECT {NORMALISED_SQL.format(x='x')} FROM (SELECT ? AS x)", [f]).fetchone()[0]
               for f in forms}
    assert (len(classes) == 1) == same, classes


def test_the_model_is_fitted_to_the_run() -> None:
    """Many items of a weak policy that repeats one wrong answer: the fit learns it, and such agreement flags none."""
    rows = []
    for j in range(3 * MIN_FIT):
        q = f"q{j}"
        if j % 3 == 0:  # solved now and then
            rows += [(q, "A", i, "correct" if i < 3 else "incorrect", "1" if i < 3 else str(i)) for i in range(8)]
        else:  # failed, the same wrong answer every time
            rows += [(q, "A", i, "incorrect", "7") for i in range(8)]
    difficulty, _ = annotate_tables(*_tables(rows), config=AnnotateConfig(), verifier_id="v")
    scores = [r["gold_suspicion"] for r in difficulty.to_pylist()]
    assert not any(r["gold_suspect"] for r in difficulty.to_pylist())
    assert max(scores) < 0.2  # agreement is what this policy does when it fails: little evidence


def test_the_pass_rate_prior_is_each_levels_own() -> None:
    """An easy level the policy solves and a hard one it fails: the same 0 of 8 is evidence on the easy level and
    ordinary on the hard one; a level too small to fit, and a problem without one, take the pooled Beta."""
    rows, levels = [], {}
    for j in range(4 * MIN_FIT):  # 40 problems a level: each level's own data outweighs the pooled prior
        q, easy = f"q{j}", j % 2 == 0
        levels[q] = "Level 1" if easy else "Level 5"
        solved = 8 if easy else (1 if j % 4 == 1 else 0)  # easy: always; hard: now and then, wrong answers scatter
        rows += [(q, "A", i, "correct" if i < solved else "incorrect", "1" if i < solved else str(10 + i))
                 for i in range(8)]
    for q, level in (("easy?", "Level 1"), ("hard?", "Level 5"), ("rare?", "Level 9"), ("none?", None)):
        levels[q] = level
        rows += [(q, "A", i, "incorrect", "6") for i in range(8)]  # 8 of 8 on one other answer
    verdicts, rollouts, problems = _tables(rows)
    by_id = {problem_id(q): level for q, level in levels.items()}
    problems = problems.set_column(problems.schema.get_field_index("level"), "level",
                                   [[by_id[p] for p in problems.column("problem_id").to_pylist()]])
    difficulty, _ = annotate_tables(verdicts, rollouts, problems, config=AnnotateConfig(), verifier_id="v")
    score = {r["problem_id"]: r["gold_suspicion"] for r in difficulty.to_pylist()}
    easy, hard, rare, none = (score[problem_id(q)] for q in ("easy?", "hard?", "rare?", "none?"))
    assert easy > 0.5 > hard  # the level decides what 0 of 8 means
    assert rare == pytest.approx(none)  # "Level 9" has 1 problem (under MIN_STRATUM): the pooled Beta, as for none
    assert hard < none < easy
    suspect = {r["problem_id"] for r in difficulty.to_pylist() if r["gold_suspect"]}
    assert problem_id("easy?") in suspect and problem_id("hard?") not in suspect
    # the same counts without the levels: one Beta for all, every 8-of-8 problem scored alike
    pooled, _ = annotate_tables(verdicts, rollouts, _tables(rows)[2], config=AnnotateConfig(), verifier_id="v")
    flat = {r["problem_id"]: r["gold_suspicion"] for r in pooled.to_pylist()}
    assert flat[problem_id("easy?")] == pytest.approx(flat[problem_id("hard?")]) == pytest.approx(none)


def test_a_small_stratum_is_drawn_towards_the_pooled_pass_rate() -> None:
    """Strata fitted beside every problem weighted as STRATUM_PRIOR problems: a stratum of 6 always-solved problems
    sits between the pooled mean and 1, one of 200 nearly at its own, one of 4 (under MIN_STRATUM) is not fitted."""
    con = duckdb.connect()
    con.execute("CREATE TABLE pooled (problem_id VARCHAR, c BIGINT, m BIGINT, v BIGINT, stratum VARCHAR)")
    rows = [(f"h{i}", 1 if i % 4 == 0 else 0, 6, 8, "hard") for i in range(200)]  # mostly failed
    rows += [(f"s{i}", 8, 0, 8, "small") for i in range(6)] + [(f"b{i}", 8, 0, 8, "big") for i in range(200)]
    rows += [(f"t{i}", 8, 0, 8, "tiny") for i in range(MIN_STRATUM - 1)]
    con.executemany("INSERT INTO pooled VALUES (?, ?, ?, ?, ?)", rows)
    model = fit(con, "pooled", prior=0.03)
    mean = {s: a / (a + b) for s, a, b, _ in model.strata}
    pooled_mean = model.alpha / (model.alpha + model.beta)
    assert set(mean) == {"hard", "small", "big"}  # "tiny" takes the pooled Beta
    assert model.pass_prior("tiny") == (model.alpha, model.beta)
    assert pooled_mean < mean["small"] < mean["big"]
    assert mean["big"] > 0.95 and mean["hard"] < 0.2


def test_wrong_answers_that_do_not_agree_never_flag() -> None:
    """A policy that solves most problems and, failing, repeats one wrong answer: 0 of 8 on the key with the wrong
    answers scattered scores high, but under half of them on one answer is no sign of another key."""
    con = duckdb.connect()
    rows = [("agree", i, "incorrect", "6") for i in range(8)]
    rows += [("scattered", i, "incorrect", str(20 + min(i, 5))) for i in range(8)]  # 3 on one answer, 5 apart
    rows += [("half", i, "incorrect", "6" if i < 4 else str(30 + i)) for i in range(8)]  # 4 of 8: half
    con.execute("CREATE TABLE s (problem_id VARCHAR, policy_id VARCHAR, status VARCHAR, extracted VARCHAR)")
    con.executemany("INSERT INTO s VALUES (?, 'A', ?, ?)", [(q, st, ex) for q, _, st, ex in rows])
    model = GoldModel(prior=0.03, alpha=8.0, beta=0.5, a=8.0, b=1.0)
    prepare(con, samples="s", threshold=0.5, prior=0.03, model=model)
    got = {q: (score, suspect) for q, score, suspect in
           con.execute("SELECT problem_id, gold_suspicion, gold_suspect FROM _modal").fetchall()}
    assert got["scattered"][0] >= 0.5 and not got["scattered"][1]
    assert got["agree"][1] and got["half"][1]


def _review_reference(scores: dict[str, tuple[float, bool, bool]], threshold: float, precision: float) -> set[str]:
    """The review rule written out in Python: flag (score, outnumbers, two or more on the wrong answer) at or above
    the threshold, then every outnumbering problem with two or more on the wrong answer scored REVIEW_FLOOR or more,
    most suspect first, while the running mean score holds."""
    flagged = {q for q, (s, out, _) in scores.items() if out and s >= threshold}
    ranked = sorted((q for q, (s, out, two) in scores.items() if out and two and s >= REVIEW_FLOOR),
                    key=lambda q: (-scores[q][0], q))
    total = 0.0
    for i, q in enumerate(ranked, 1):
        total += scores[q][0]
        if total / i < precision:
            break
        flagged.add(q)
    return flagged


def test_the_review_precision_flags_down_the_ranking_at_a_stated_expected_precision() -> None:
    """annotate.gold_review_precision: beyond the threshold rule, more keys down the ranking while the mean score of the
    flagged (their expected share of wrong keys) stays at the target; ties, scattered answers and problems scored under
    REVIEW_FLOOR never join, nor a single rollout on the wrong answer, and without it the flags are the threshold
    rule's."""
    con = duckdb.connect()
    con.execute("CREATE TABLE s (problem_id VARCHAR, policy_id VARCHAR, status VARCHAR, extracted VARCHAR)")
    rows = []
    for m in range(1, 9):  # 0 on the key, m of 8 on one wrong answer, the rest scattered; and 1 or 2 on the key
        for c in (0, 1, 2):
            if c + m <= 8:
                q = f"c{c}m{m}"
                rows += [(q, "correct", "5")] * c + [(q, "incorrect", "6")] * m
                rows += [(q, "incorrect", str(40 + i)) for i in range(8 - c - m)]
    rows += [("lone", "incorrect", "6")]  # one valid rollout, on a wrong answer
    rows += [("tie", "correct", "5")] * 4 + [("tie", "incorrect", "6")] * 4
    con.executemany("INSERT INTO s VALUES (?, 'A', ?, ?)", rows)
    model = GoldModel(prior=0.03, alpha=3.0, beta=1.0, a=2.0, b=2.0)

    def flags(precision: float | None) -> tuple[dict[str, tuple[float, bool]], set[str]]:
        prepare(con, samples="s", threshold=0.5, prior=0.03, model=model, review_precision=precision)
        got = con.execute("SELECT problem_id, gold_suspicion, gold_suspect FROM _modal").fetchall()
        return {q: s for q, s, _ in got}, {q for q, _, f in got if f}

    scores, plain = flags(None)
    counts = {q: (int(q[1]), int(q[3]), 8) for q in scores if q[0] == "c"} | {"tie": (4, 4, 8), "lone": (0, 1, 1)}
    by_rule = {q: (scores[q], m > c and 2 * m >= v - c, m >= 2) for q, (c, m, v) in counts.items()}
    assert plain == {q for q, (s, out, _) in by_rule.items() if out and s >= 0.5}
    assert 0 < len(plain) < len(scores)
    # problems between REVIEW_FLOOR and the threshold exist, so the review has something to add
    assert any(REVIEW_FLOOR <= s < 0.5 and out and two for s, out, two in by_rule.values())
    assert by_rule["lone"][0] >= REVIEW_FLOOR and by_rule["lone"][1]  # scored and outnumbering, yet one rollout
    previous = plain
    for precision in (0.9, 0.7, 0.5, 0.3):
        _, got = flags(precision)
        assert got == _review_reference(by_rule, 0.5, precision)
        assert got >= previous and not {"tie", "lone"} & got  # a lower target only adds; a tie or one rollout never
        assert all(scores[q] >= REVIEW_FLOOR for q in got)
        assert sum(scores[q] for q in got) / len(got) >= min(precision, min(scores[q] for q in plain))
        previous = got
    assert len(previous) > len(plain)


def _fake_run(n_items: int, k: int, correct_rate: float):
    """Problems 'What is a + b?' and k fake-engine rollouts each (wrong answers scatter over 9 values)."""
    problems, rollouts = [], []
    for j in range(n_items):
        a, b = 11 + 3 * j, 7 + 5 * j
        q = f"What is {a} + {b}?"
        pid = problem_id(q)
        problems.append({"problem_id": pid, "source": "synthetic", "source_id": str(j), "question": q,
                         "answer": str(a + b), "n_duplicates": 0})
        for i in range(k):
            text = fake_completion(Prompt(text=q), i, temperature=0.8, correct_rate=correct_rate)
            rollouts.append({"problem_id": pid, "policy_id": "pol_fake", "sample_idx": i, "seed": i, "completion": text,
                             "n_tokens": len(text.split()), "finish_reason": "stop"})
    policies = [{"policy_id": "pol_fake", "name": "fake", "model": "fake", "revision": "0", "engine": "fake",
                 "dtype": "float32", "temperature": 0.8, "top_p": 1.0, "top_k": -1, "max_tokens": 48, "stop": [],
                 "prompt_template": "t", "prompt_version": "1", "prompt_digest": "d", "chat": False, "identity": "{}"}]
    return (schema("problems").from_rows(problems), schema("rollouts").from_rows(rollouts),
            schema("policies").from_rows(policies))


def test_injected_wrong_golds_are_found_where_the_policy_is_strong(tmp_path: Path) -> None:
    """k = 8 of a policy that solves most items, 3 % of the keys moved by one: found, and the score calibrated."""
    from gold_suspicion import measure

    f = measure(*_fake_run(60, 8, 0.85), workdir=tmp_path, draws=40, signatures=True)
    assert f.eligible == f.problems == 60 and f.changed_per_draw == 2  # 3 % of 60
    assert f.tp + f.fn == 40 * 2
    # the signatures count exactly the misses and the false flags, each a (c, m, v) of 8 valid rollouts or fewer and
    # the biggest wrong class's working kind (read where it holds two rollouts or more)
    assert sum(f.missed.values()) == f.fn and sum(f.false.values()) == f.fp
    assert all(c >= 0 and 0 < m <= v <= 8 and c + m <= v and (kind in KINDS if m >= 2 else kind is None)
               for c, m, v, kind in (*f.missed, *f.false))
    assert f.recall >= 0.7 and f.precision >= 0.5
    assert f.ece <= 0.05


def _publish_with_a_suspect(root: Path) -> str:
    """Mark p_0000000000000007 ("Tom reads 5 pages a day for 6 days", gold 30) as every rollout saying 35, publish
    the tiny tables, and return the card's "Suspect answer keys" section."""
    from click.testing import CliRunner

    from pipeline.cli import cli
    from pipeline.io import read_table, write_table

    path = root / "data/difficulty/part-0.parquet"
    rows = read_table(path.parent, name="difficulty").to_pylist()
    for r in rows:
        wrong = r["problem_id"] == "p_0000000000000007"
        r.update(modal_answer="35" if wrong else None, modal_share=1.0 if wrong else None,
                 modal_is_gold=not wrong, gold_suspicion=0.998 if wrong else 0.0, gold_suspect=wrong)
    write_table(schema("difficulty").from_rows(rows), path, name="difficulty")
    res = CliRunner().invoke(cli, ["publish", "--params", str(root / "params.yaml")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return (root / "data/published/README.md").read_text().split("## Suspect answer keys", 1)[1].split("\n## ", 1)[0]


def test_published_rows_and_card_carry_the_suspects(tmp_path: Path) -> None:
    """A wrong-looking gold in the tiny publish tables: its rows carry the score, the card lists it."""
    import datasets
    from publish_tables import make_repo


    root = make_repo(tmp_path / "repo")
    section = _publish_with_a_suspect(root)
    assert "1 of 11 items are `gold_suspect`" in section
    assert "| `p_0000000000000007` | `30` | 0.0 | 0.998 |" in section
    # a cache of its own: the shared one keys on the files' paths and sizes, which an earlier run may share
    ds = datasets.load_dataset(str(root / "data/published"), "default", split="train", cache_dir=str(tmp_path / "hf"))
    kept = ds.filter(lambda r: not r["gold_suspect"])
    assert len(ds) - len(kept) == 1 and "p_0000000000000007" not in kept["problem_id"]
    per_policy = {d["policy"]: d["gold_suspicion"] for d in ds[ds["problem_id"].index("p_0000000000000007")]["difficulty"]}
    assert per_policy["smollm2-135m-3shot"] == 0.998


def test_a_hostile_gold_reaches_the_card_as_literal_text(tmp_path: Path) -> None:
    """A gold holding HTML and a markdown link is shown in the suspect table as a code span: it renders as written."""
    from publish_tables import make_repo

    from pipeline.io import read_table, write_table

    root = make_repo(tmp_path / "repo")
    hostile = "30 <img src=x onerror=alert(1)> [docs](https://evil.example) | `x`"
    problems = root / "data/problems/part-0.parquet"
    rows = read_table(problems.parent, name="problems").to_pylist()
    for r in rows:
        if r["problem_id"] == "p_0000000000000007":
            r["answer"] = hostile
    write_table(schema("problems").from_rows(rows), problems, name="problems")
    section = _publish_with_a_suspect(root)
    row = next(line for line in section.splitlines() if "p_0000000000000007" in line)
    assert "| `` 30 <img src=x onerror=alert(1)> [docs](https://evil.example) \\| `x` `` |" in row, row
    assert row.count(" | ") == 3   # the gold's pipe is escaped: the row keeps its four cells
