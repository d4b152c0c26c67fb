"""Answer-key suspicion: the probability that a problem's gold is wrong, given every policy's rollouts.

Per (problem, policy), over the *format-valid* rollouts (verdict ``correct`` or ``incorrect``: an answer was read
and graded; ``no_answer``, ``timeout`` and ``error`` are left out), answers are put in classes: every ``correct``
rollout is in the gold's class (math-verify said it equals the gold), every ``incorrect`` one in the class of its
extracted answer's normalised form (:data:`NORMALISED_SQL`). ``modal_answer`` is the biggest class (the gold's class
wins a tie), shown as its most frequent extracted text, ``modal_share`` its share, ``modal_is_gold`` whether it is
the gold's class.

``gold_suspicion`` is a posterior probability, the same on every row of a problem. Pooled over the policies that
measured it, the problem has ``v`` format-valid rollouts: ``c`` on the gold, ``m`` on the biggest wrong class,
``r`` elsewhere. Two hypotheses, each a model fitted to the run's own data (:class:`GoldModel`):

- **the key is right** (prior ``1 - annotate.gold_error_prior``): ``c`` of ``v`` reach it at the problem's pass
  rate ``p ~ Beta(alpha, beta)`` (its stratum's, below), and the wrong rollouts gather on one wrong answer with a
  share ``q ~ Beta(a, b)``: how consistently these policies repeat one wrong answer on the problems they fail;
- **the key is wrong** (prior ``annotate.gold_error_prior``, 3 %: public audits of GSM8K and MATH found a few per
  cent of wrong keys): the biggest wrong class is the true answer, reached ``m`` of ``v`` times at the same
  ``p``, and the key is one wrong answer among others, hit by a share ``Beta(1, KEY_MISS)`` (mean 5 %) of the
  other rollouts.

**The working.** Counts cannot tell a wrong key from a policy that repeats one slip: the embedded model answers
"8 * 4 = 24. The answer is 24." on 8 samples of 8 where the key 32 is right, and "3 + 5 = 8. The answer is 8." on
7 of 8 where a key was moved to 9. Where the biggest wrong class holds two rollouts or more, the working of its
first :data:`~.working.READ_PER_CLASS` is read (:mod:`.working`: ``false``, ``supported`` or ``none``, the class's
majority) and weighed as one more factor: under a wrong key that class is the true answer, so its kind is drawn as
the run's right-answer classes' kinds are (the gold classes of two rollouts or more), under a right key as its
wrong-answer classes' are (the biggest wrong classes). Both sets of shares are fitted to the run, then refined by
EM (:func:`_refine_working`: a wrong key's class belongs on the right side), with one added to each count and
nothing fitted below :data:`MIN_FIT` classes a side; so a policy whose wrong answers show no false arithmetic, or
a reader that cannot read its working, gets a factor near 1.

``alpha, beta`` are fitted by maximum likelihood (beta-binomial, a grid) to every problem's ``(c, v)``, ``a, b`` to
``(m, v - c)`` where two or more rollouts are wrong; with fewer than :data:`MIN_FIT` problems a uniform Beta(1, 1)
stands in.

**Expected difficulty.** No rollout on the key is ordinary on a problem these policies mostly fail and evidence on
one they mostly solve, so the pass-rate Beta is also fitted per *stratum* (:func:`strata_sql`): the source and
its own difficulty label (``problems.level``: ``math Level 5``), or the source and ``figure`` for a question that
draws or points at a figure (:data:`FIGURE_RE`: text policies fail those alike whatever the key). The
:data:`MAX_STRATA` biggest strata with at least :data:`MIN_STRATUM` problems get their own Beta, fitted to their
problems plus the pooled ones weighted to :data:`STRATUM_PRIOR` problems (a stratum of 10 is half its own, one of
200 nearly all); a problem in another stratum, or without a label, takes the pooled Beta.

Pooling treats the policies' rollouts as draws around one pass rate and one wrong-answer share, so two checkpoints
that repeat each other's mistakes raise the fitted ``q`` and with it what agreement can explain: they count as
correlated witnesses, not independent ones. The posterior is
``prior * L_wrong / (prior * L_wrong + (1 - prior) * L_right)``; 0 when no rollout is wrong, null when none is
format-valid. ``gold_suspect``: the posterior at or above ``annotate.gold_suspicion_threshold``, more rollouts on
the wrong answer than on the gold (``m > c``: a tie never flags), and the wrong rollouts agreeing (``m`` at least
half of ``v - c``: scattered wrong answers say the policies cannot do the problem, not that the key is wrong).
That flags a key more likely wrong than right. A review wants more of the wrong keys at a known cost: with
``annotate.gold_review_precision`` (say 0.5), the flag also goes down the ranking, most suspect first, over the
problems that meet the two count rules with two rollouts or more on the wrong answer and score
:data:`REVIEW_FLOOR` or more, as long as the mean score of the problems flagged so far (the expected share of
wrong keys among them: the score is calibrated) stays at or above it. On MATH-500 with 9 checkpoints this takes
the recall of injected wrong keys from about 0.52 to 0.73 and the precision from 0.97 to 0.57
(docs/tables.md#suspect-golds).

It still cannot tell a wrong key from policies that are confidently wrong the same way on a problem of a stratum
they usually solve, unless their working shows the slip; nor find a wrong key on a problem the policies fail too
(the "key wrong" explanation has the biggest wrong class as the true answer). The sum of the posteriors is the
number of wrong keys the model expects (over the flagged problems: among them), which ``passband summary``, the report
and the card print beside the count.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import exp, lgamma, log

import duckdb

from pipeline.annotate.answer_classes import NORMALISED_SQL, classes_sql
from pipeline.annotate.working import KINDS, class_kinds_sql, read_sql, read_working
from pipeline.sqltext import sql_literal

__all__ = [
    "MAX_STRATA",
    "MIN_FIT",
    "MIN_STRATUM",
    "NORMALISED_SQL",
    "REVIEW_FLOOR",
    "STRATUM_PRIOR",
    "GoldModel",
    "class_kinds_sql",
    "classes_sql",
    "fit",
    "posterior",
    "prepare",
    "read_sql",
    "read_working",
    "strata_sql",
]

MIN_FIT = 20  # problems a Beta needs to be fitted; fewer: Beta(1, 1)
MAX_STRATA = 64  # the biggest strata get their own pass-rate Beta; the rest take the pooled one
MIN_STRATUM = 5  # problems a stratum needs for a Beta of its own
STRATUM_PRIOR = 10.0  # the pooled problems' weight in a stratum's fit, in problems (10 and 20 compared: docs/tables.md)
# a question that draws its figure (Asymptote, TikZ, an image) or points at one: text policies fail such problems
# alike whatever the key, so they are weighed against each other, not against their level
FIGURE_RE = (r"\[asy\]|\\begin\{tikzpicture\}|\\includegraphics|<img\b|!\[[^\]]*\]\(|"
             r"(?i:\b(in|from) the (diagram|figure|picture|graph)\b|\b(diagram|figure) (below|above|shown)\b)")
# with annotate.gold_review_precision, a problem scored below this is never flagged however sure the ones above it are
REVIEW_FLOOR = 0.1
SAME_GRID = (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
KEY_MISS = 19.0  # a wrong key's share of the other rollouts ~ Beta(1, KEY_MISS): mean 5 %
# the fit's grid: mean 0.01..0.99, concentration 10^-1..10^3 (41 steps)
GRID_SQL = """SELECT mu * s AS a, (1 - mu) * s AS b FROM (SELECT i / 100.0 AS mu FROM range(1, 100) t(i))
              CROSS JOIN (SELECT pow(10, -1 + j / 10.0) AS s FROM range(0, 41) t(j))"""


def _lbb(k: str, n: str, a: str, b: str) -> str:
    """SQL: the log beta-binomial probability of ``k`` of ``n`` (without the binomial coefficient, which cancels)."""
    return (f"(lgamma({a} + {k}) + lgamma({b} + {n} - {k}) - lgamma({a} + {b} + {n})"
            f" - lgamma({a}) - lgamma({b}) + lgamma({a} + {b}))")


def _lbb_py(k: int, n: int, a: float, b: float) -> float:
    return (lgamma(a + k) + lgamma(b + n - k) - lgamma(a + b + n) - lgamma(a) - lgamma(b) + lgamma(a + b))


@dataclass(frozen=True)
class GoldModel:
    """The fitted model behind ``gold_suspicion`` (written to the annotate metrics)."""

    prior: float  # P(the key is wrong) before the rollouts
    alpha: float = 1.0  # the pass-rate prior Beta(alpha, beta)
    beta: float = 1.0
    a: float = 1.0  # the wrong rollouts' share on one wrong answer: 1 with probability ``same``, else Beta(a, b)
    b: float = 1.0
    same: float = 0.0
    fitted_pass_rate: int = 0  # problems each Beta was fitted on (0: Beta(1, 1))
    fitted_agreement: int = 0
    # the pass-rate Beta per stratum (strata_sql): (stratum, alpha, beta, its own problems)
    strata: tuple[tuple[str, float, float, int], ...] = ()
    # how often a class's working is each of working.KINDS (false, supported, none): in the run's right-answer classes
    # (the gold's, two rollouts or more) and in its wrong ones (the biggest wrong class, two or more); () unfitted
    working_right: tuple[float, ...] = ()
    working_wrong: tuple[float, ...] = ()
    fitted_working: tuple[int, int] = (0, 0)  # the classes each was fitted on

    def pass_prior(self, stratum: str | None = None) -> tuple[float, float]:
        """The pass-rate Beta a problem of ``stratum`` is weighed with: its stratum's, else the pooled one."""
        return next(((a, b) for s, a, b, _ in self.strata if s == stratum), (self.alpha, self.beta))

    def working_log_ratio(self, kind: str | None) -> float:
        """The log likelihood ratio, key wrong against key right, of the biggest wrong class's working being ``kind``:
        under a wrong key that class is the true answer, and its working shows ``kind`` as the run's right-answer
        classes do; under a right key, as its wrong-answer classes do. 0 unfitted or unread."""
        if not self.working_right or kind not in KINDS:
            return 0.0
        i = KINDS.index(kind)
        return log(self.working_right[i] / self.working_wrong[i])

    def log_odds_sql(self, c: str, m: str, v: str, *, alpha: str | None = None, beta: str | None = None,
                     kind: str | None = None) -> str:
        """SQL: the log odds that the key is wrong; ``alpha``, ``beta``: SQL for the pass-rate Beta (default: pooled);
        ``kind``: SQL for the working kind of the biggest wrong class (:mod:`.working`; null: unread)."""
        alpha, beta = alpha or repr(self.alpha), beta or repr(self.beta)
        r = f"({v} - {c} - {m})"
        wrong = _lbb(m, v, alpha, beta) + " + " + _lbb(c, f"({c} + {r})", "1.0", repr(KEY_MISS))
        right = _lbb(c, v, alpha, beta) + " + " + _agree_sql(m, r, self.same, self.a, self.b)
        work = "0.0"
        if kind is not None and self.working_right:
            cases = " ".join(f"WHEN {sql_literal(k)} THEN {self.working_log_ratio(k)!r}" for k in KINDS)
            work = f"(CASE WHEN {m} >= 2 THEN CASE {kind} {cases} ELSE 0.0 END ELSE 0.0 END)"
        return f"({log(self.prior / (1 - self.prior))!r} + {wrong} - ({right}) + {work})"


def posterior(model: GoldModel, c: int, m: int, v: int, stratum: str | None = None, working: str | None = None) -> float:
    """P(the key is wrong | c of v rollouts on it, m on the biggest wrong answer), as :func:`prepare` computes it;
    ``stratum``: the problem's (its pass-rate Beta, :meth:`GoldModel.pass_prior`); ``working``: the biggest wrong
    class's working kind (:meth:`GoldModel.working_log_ratio`, with ``m`` two or more).

        >>> model = GoldModel(prior=0.03, alpha=4.0, beta=1.0, a=1.0, b=1.0)  # a policy that solves most problems
        >>> round(posterior(model, 0, 8, 8), 2), round(posterior(model, 4, 4, 8), 4), posterior(model, 8, 0, 8)
        (0.98, 0.0, 0.0)
        >>> hard = GoldModel(prior=0.03, alpha=4.0, beta=1.0, strata=(("math Level 5", 0.5, 1.5, 100),))
        >>> round(posterior(hard, 0, 8, 8, "math Level 5"), 2)  # where these policies mostly fail, 0 of 8 is ordinary
        0.02
    """
    if min(c, m) < 0 or c + m > v:
        raise ValueError(f"counts c={c}, m={m} must fit in v={v}")
    if m == 0:
        return 0.0
    r = v - c - m
    agree = log(max(1e-300, (model.same if r == 0 else 0.0) + (1 - model.same) * exp(_lbb_py(m, m + r, model.a, model.b))))
    alpha, beta = model.pass_prior(stratum)
    x = (log(model.prior / (1 - model.prior)) + _lbb_py(m, v, alpha, beta) + _lbb_py(c, c + r, 1.0, KEY_MISS)
         - _lbb_py(c, v, alpha, beta) - agree + (model.working_log_ratio(working) if m >= 2 else 0.0))
    return 1 / (1 + exp(-min(700.0, max(-700.0, x))))


def _agree_sql(m: str, r: str, same, a, b) -> str:
    """SQL: the log probability, with the key right, that ``m`` of ``m + r`` wrong rollouts give one wrong answer."""
    return (f"ln(greatest(1e-300, CASE WHEN {r} = 0 THEN {same} ELSE 0.0 END"
            f" + (1 - {same}) * exp({_lbb(m, f'({m} + {r})', a, b)})))")


def _argmax_sql(points: str, weights: tuple[float, ...] = (0.0,)) -> str:
    """SQL: per group ``g`` of ``points`` (a relation of ``g, k, n, w``: weight ``w`` on ``k`` of ``n``), the grid's
    maximum-likelihood Beta(a, b) of a beta-binomial, mixed with a point mass at 1 of weight ``lam`` in ``weights``
    (all ``n`` at once, as ``k = n``): ``g, a, b, lam``."""
    agree = _agree_sql("p.k", "(p.n - p.k)", "grid.lam", "grid.a", "grid.b")
    return f"""
        WITH grid AS (SELECT g.a, g.b, l.lam FROM ({GRID_SQL}) g CROSS JOIN (SELECT unnest({list(weights)!r}) AS lam) l),
        ll AS (SELECT p.g, grid.a, grid.b, grid.lam, sum(p.w * {agree}) AS ll FROM ({points}) p CROSS JOIN grid
               GROUP BY ALL)
        SELECT g, a, b, lam FROM (SELECT *, row_number() OVER (PARTITION BY g ORDER BY ll DESC, lam, a, b) AS rank
                                  FROM ll) WHERE rank = 1 ORDER BY g"""


def _fit_beta(con: duckdb.DuckDBPyConnection, points: str, *, same: bool = False) -> tuple[float, float, float, int]:
    """Maximum-likelihood Beta(a, b) of a beta-binomial over ``points`` (a relation of ``k, n``) on the grid; with
    ``same``, mixed with a point mass at 1 of weight :data:`SAME_GRID` (all ``n`` at once, as ``k = n``)."""
    n_points = con.execute(f"SELECT count(*) FROM ({points})").fetchone()[0]
    if n_points < MIN_FIT:
        return 1.0, 1.0, 0.0, 0
    grouped = f"SELECT 0 AS g, k, n, count(*) AS w FROM ({points}) GROUP BY ALL"
    _, a, b, lam = con.execute(_argmax_sql(grouped, SAME_GRID if same else (0.0,))).fetchone()
    return float(a), float(b), float(lam), int(n_points)


def _fit_strata(con: duckdb.DuckDBPyConnection, pooled: str) -> tuple[tuple[str, float, float, int], ...]:
    """The pass-rate Beta of each of the :data:`MAX_STRATA` biggest strata of ``pooled`` (its ``stratum`` column;
    null: none) with :data:`MIN_STRATUM` problems or more, fitted as :func:`_fit_beta` fits the pooled one to the
    stratum's problems plus every problem's, weighted to :data:`STRATUM_PRIOR` problems in all (shrinkage: a small
    stratum stays near the pooled Beta, a big one is its own)."""
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _strata_points AS
        WITH pts AS (SELECT stratum, c AS k, v AS n, count(*) AS w FROM {pooled}
                     WHERE v > 0 AND stratum IS NOT NULL GROUP BY ALL),
        everyone AS (SELECT c AS k, v AS n, count(*) AS w FROM {pooled} WHERE v > 0 GROUP BY ALL),
        kept AS (SELECT stratum, sum(w)::BIGINT AS problems FROM pts GROUP BY 1 HAVING sum(w) >= {MIN_STRATUM}
                 ORDER BY problems DESC, stratum LIMIT {MAX_STRATA})
        SELECT stratum AS g, k, n, w::DOUBLE AS w, problems FROM pts JOIN kept USING (stratum)
        UNION ALL SELECT kept.stratum, e.k, e.n, e.w * {STRATUM_PRIOR!r} / (SELECT sum(w) FROM everyone), problems
        FROM kept CROSS JOIN everyone e""")
    rows = con.execute(f"""SELECT f.g, f.a, f.b, s.problems
        FROM ({_argmax_sql('SELECT g, k, n, w FROM _strata_points')}) f
        JOIN (SELECT DISTINCT g, problems FROM _strata_points) s USING (g) ORDER BY f.g""").fetchall()
    con.execute("DROP TABLE _strata_points")
    return tuple((str(s), float(a), float(b), int(n)) for s, a, b, n in rows)


def _fit_working(con: duckdb.DuckDBPyConnection, pooled: str) -> tuple[tuple[float, ...], tuple[float, ...], tuple[int, int]]:
    """How often each working kind shows in the right-answer classes (the gold's, ``gold_kind``, with ``c`` two or
    more) and in the wrong ones (the biggest wrong class, ``wrong_kind``, with ``m`` two or more) of ``pooled``, one
    added to each count; unfitted (``()``) with fewer than :data:`MIN_FIT` classes on either side. A wrong key's
    classes fall on the other side (about :data:`annotate.gold_error_prior`), which only narrows the difference."""
    def shares(column: str, count: str) -> tuple[tuple[float, ...], int]:
        rows = dict(con.execute(f"SELECT {column}, count(*) FROM {pooled} WHERE {count} >= 2 AND {column} IS NOT NULL "
                                f"GROUP BY 1").fetchall())
        n = sum(rows.values())
        return tuple((rows.get(k, 0) + 1) / (n + len(KINDS)) for k in KINDS), n
    right, n_right = shares("gold_kind", "c")
    wrong, n_wrong = shares("wrong_kind", "m")
    if min(n_right, n_wrong) < MIN_FIT:
        return (), (), (n_right, n_wrong)
    return right, wrong, (n_right, n_wrong)


def fit(con: duckdb.DuckDBPyConnection, pooled: str, *, prior: float) -> GoldModel:
    """The :class:`GoldModel` of the problems in ``pooled`` (a relation of ``c, m, v`` per problem, and optionally
    ``stratum`` and the working kinds ``gold_kind``, ``wrong_kind``)."""
    alpha, beta, _, n1 = _fit_beta(con, f"SELECT c AS k, v AS n FROM {pooled} WHERE v > 0")
    a, b, same, n2 = _fit_beta(con, f"SELECT m AS k, v - c AS n FROM {pooled} WHERE v - c >= 2", same=True)
    columns = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {pooled}").fetchall()}
    right, wrong, n3 = _fit_working(con, pooled) if "wrong_kind" in columns else ((), (), (0, 0))
    return GoldModel(prior=prior, alpha=alpha, beta=beta, a=a, b=b, same=same, fitted_pass_rate=n1,
                     fitted_agreement=n2, strata=_fit_strata(con, pooled) if "stratum" in columns else (),
                     working_right=right, working_wrong=wrong, fitted_working=n3)


def strata_sql(problems: str) -> str:
    """SQL: per problem of ``problems`` (a relation with ``problem_id, source, level, question``) its stratum: the
    source and ``figure`` where the question draws or shows a figure (:data:`FIGURE_RE`), else the source and its
    difficulty label (``math Level 5``); null without either."""
    return f"""SELECT problem_id, CASE WHEN regexp_matches(question, {sql_literal(FIGURE_RE)}) THEN source || ' figure'
                                       WHEN nullif(trim(level), '') IS NULL THEN NULL
                                       ELSE source || ' ' || trim(level) END AS stratum FROM {problems}"""


def _suspects_sql(score: str, threshold: float, review_precision: float | None) -> str:
    """``score`` (problem_id, outnumbers, witnessed, gold_suspicion) with ``gold_suspect``: outnumbering and at or
    above ``threshold``; with a ``review_precision``, also every outnumbering problem with two rollouts or more on
    the wrong answer (``witnessed``: one rollout is no agreement) scored :data:`REVIEW_FLOOR` or more, down the
    ranking (most suspect first) while the mean score of the problems ranked so far, the expected share of wrong
    keys among them, is at least ``review_precision``."""
    rule = f"outnumbers AND gold_suspicion >= {float(threshold)!r}"
    if review_precision is None:
        return f"SELECT *, {rule} AS gold_suspect FROM {score}"
    candidate = f"outnumbers AND witnessed AND gold_suspicion >= {REVIEW_FLOOR!r}"
    return f"""SELECT * EXCLUDE (running), {rule} OR ({candidate} AND running >= {float(review_precision)!r}) AS gold_suspect
        FROM (SELECT *, avg(gold_suspicion) FILTER (WHERE {candidate}) OVER (
                  ORDER BY {candidate} DESC, gold_suspicion DESC, problem_id ROWS UNBOUNDED PRECEDING) AS running
              FROM {score})"""


WORKING_EM_STEPS = 20  # EM steps of the working shares (they settle in a few on the runs measured)


def _log_odds(model: GoldModel) -> str:
    """SQL over ``_pooled p LEFT JOIN _pass_prior pp``: the log odds that the key is wrong."""
    return model.log_odds_sql("c", "m", "v", alpha=f"coalesce(pp.alpha, {model.alpha!r})",
                              beta=f"coalesce(pp.beta, {model.beta!r})", kind="wrong_kind")


def _refine_working(con: duckdb.DuckDBPyConnection, model: GoldModel) -> GoldModel:
    """The working shares re-fitted by EM. The plain fit counts every biggest wrong class as a wrong answer, but where
    the key is wrong that class is the true answer: with 3 % of keys wrong and a policy that reaches most true
    answers, those classes are a good part of the wrong side's ``supported`` ones, and the ratio comes out several
    times too small. Each step weighs a problem's biggest wrong class by the posterior that its key is wrong (to the
    right side) and by the rest (to the wrong side), and its gold class, where the key is right, to the right side."""
    for _ in range(WORKING_EM_STEPS):
        rows = con.execute(f"""WITH post AS (
                SELECT c, m, gold_kind, wrong_kind,
                       CASE WHEN m = 0 THEN 0.0 ELSE 1 / (1 + exp(-least(700.0, greatest(-700.0, {_log_odds(model)}))))
                       END AS p
                FROM _pooled p LEFT JOIN _pass_prior pp USING (stratum))
            SELECT kind, sum(right_w), sum(wrong_w) FROM (
                SELECT gold_kind AS kind, 1 - p AS right_w, 0.0 AS wrong_w FROM post WHERE c >= 2 AND gold_kind IS NOT NULL
                UNION ALL SELECT wrong_kind, p, 1 - p FROM post WHERE m >= 2 AND wrong_kind IS NOT NULL)
            GROUP BY 1""").fetchall()
        got = {k: (r, w) for k, r, w in rows}
        n_right, n_wrong = (sum(v[i] for v in got.values()) for i in (0, 1))
        right = tuple((got.get(k, (0.0, 0.0))[0] + 1) / (n_right + len(KINDS)) for k in KINDS)
        wrong = tuple((got.get(k, (0.0, 0.0))[1] + 1) / (n_wrong + len(KINDS)) for k in KINDS)
        if max(abs(a - b) for a, b in zip(right + wrong, model.working_right + model.working_wrong, strict=True)) < 1e-4:
            break
        model = replace(model, working_right=right, working_wrong=wrong)
    return model


def prepare(con: duckdb.DuckDBPyConnection, *, samples: str, threshold: float, prior: float,
            model: GoldModel | None = None, strata: str | None = None,
            review_precision: float | None = None, working: str | None = None) -> GoldModel:
    """Create ``_modal`` (problem_id, policy_id, modal_answer, modal_share, modal_is_gold, gold_suspicion,
    gold_suspect) from the verdict rows in ``samples``; the model is fitted on them unless ``model`` is given.
    ``strata``: a relation of ``problem_id, stratum`` (:func:`strata_sql`); None: one pass-rate Beta for all.
    ``review_precision``: flag further down the ranking at that expected precision (:func:`_suspects_sql`).
    ``working``: a relation of ``problem_id, policy_id, sample_idx, working`` (:func:`.working.working_kind`) holding
    at least the rows :func:`read_sql` selects; None: the working is not weighed. Returns the model used."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _classes AS {classes_sql(samples)}")
    kinds = (class_kinds_sql(samples, working) if working is not None else
             "SELECT NULL::VARCHAR AS problem_id, NULL::VARCHAR AS answer_class, NULL::VARCHAR AS kind WHERE false")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _kinds AS {kinds}")
    con.execute("""CREATE OR REPLACE TEMP TABLE _mode AS
        SELECT * FROM (
            SELECT *, sum(n_class) OVER (PARTITION BY problem_id, policy_id) AS n_valid,
                   row_number() OVER (PARTITION BY problem_id, policy_id
                                      ORDER BY n_class DESC, answer_class IS NULL DESC, answer_class) AS rank
            FROM _classes) WHERE rank = 1""")
    # per problem, over every policy that measured it: format-valid v, on the gold c, on the biggest wrong class m
    strata = strata or "(SELECT NULL::VARCHAR AS problem_id, NULL::VARCHAR AS stratum WHERE false)"
    # (the biggest wrong class: ties go to the first class in order, whose working is the one weighed)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _pooled AS
        WITH per_class AS (SELECT problem_id, answer_class, sum(n_class)::BIGINT AS n FROM _classes GROUP BY ALL),
        top AS (SELECT problem_id, n AS m, answer_class AS top_class FROM (
                    SELECT *, row_number() OVER (PARTITION BY problem_id ORDER BY n DESC, answer_class) AS rank
                    FROM per_class WHERE answer_class IS NOT NULL) WHERE rank = 1)
        SELECT problem_id, sum(n)::BIGINT AS v, coalesce(sum(n) FILTER (WHERE answer_class IS NULL), 0)::BIGINT AS c,
               coalesce(any_value(top.m), 0)::BIGINT AS m, any_value(st.stratum) AS stratum,
               any_value(gk.kind) AS gold_kind, any_value(wk.kind) AS wrong_kind
        FROM per_class LEFT JOIN top USING (problem_id)
        LEFT JOIN (SELECT problem_id, any_value(stratum) AS stratum FROM {strata} GROUP BY 1) st USING (problem_id)
        LEFT JOIN (SELECT problem_id, kind FROM _kinds WHERE answer_class IS NULL) gk USING (problem_id)
        LEFT JOIN (SELECT problem_id AS wk_problem, answer_class AS wk_class, kind FROM _kinds) wk
               ON wk.wk_problem = per_class.problem_id AND wk.wk_class = top.top_class
        GROUP BY problem_id""")
    fitted = model is None
    model = model or fit(con, "_pooled", prior=prior)
    con.execute("CREATE OR REPLACE TEMP TABLE _pass_prior (stratum VARCHAR, alpha DOUBLE, beta DOUBLE)")
    if model.strata:
        con.executemany("INSERT INTO _pass_prior VALUES (?, ?, ?)", [(s, a, b) for s, a, b, _ in model.strata])
    if fitted and model.working_right:
        model = _refine_working(con, model)
    log_odds = _log_odds(model)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _modal AS
        WITH score AS (
            SELECT problem_id, m > c AND 2 * m >= v - c AS outnumbers, m >= 2 AS witnessed,
                   CASE WHEN m = 0 THEN 0.0 ELSE 1 / (1 + exp(-least(700.0, greatest(-700.0, {log_odds})))) END
                     AS gold_suspicion
            FROM _pooled p LEFT JOIN _pass_prior pp USING (stratum))
        SELECT m.problem_id, m.policy_id, m.shown AS modal_answer, m.n_class / m.n_valid AS modal_share,
               m.answer_class IS NULL AS modal_is_gold, s.gold_suspicion,
               s.gold_suspect
        FROM _mode m JOIN ({_suspects_sql('score', threshold, review_precision)}) s USING (problem_id)""")
    for t in ("_classes", "_kinds", "_mode", "_pooled", "_pass_prior"):
        con.execute(f"DROP TABLE {t}")
    return model
