"""The ``unsupported_answer`` flag: a right final answer whose own working does not produce it.

Every arithmetic statement in the completion (``a op b = c``, chains ``a + b = c + d = e``) is
evaluated with exact rationals, after units, ``$``, thousands commas and LaTeX (``\\times``,
``\\frac{}{}``, ...) are stripped; a side that still holds a backslash is read by sympy
(latex2sympy2, math-verify's own parser) where it parses. A correct answer is flagged when

1. the working holds a false statement (``21 - 15 = 3`` is false: 6), or
2. in a short working (:data:`SHORT_WORKING_CHARS`), no true statement evaluates to the answer and no equation it
   solves has the answer as its root (``3R + 5(R + 2) = 42``, :mod:`pipeline.arith.algebra`), although the answer
   needs computing (it is not one of the question's numbers): ``Ben * 4 = 16`` is not arithmetic, and ``The answer is
   16.`` alone is no working; a longer working without such a computation is undecided here, never flagged, or
3. (``annotate.options.unsupported_answer.setup``, on by default) the working never computes with some
   number of the question: true arithmetic on the wrong quantities, ``19 + 20 = 39`` where the
   problem needs 4 * 10 + 19 - 20 ("the working never computes with 4, 10 of the question"). A
   step done in the head (``36 - 33 = 3`` for 21 + 15 - 33) counts as using 21 and 15.

Real rows (SmolLM2-135M, 3-shot, synthetic set), each graded correct::

    "Ana has 21 marbles. She buys 15 more and then gives 33 ..."  gold 3
    " Ana has 21 - 15 = 3 marbles. The answer is 3."      -> "21 - 15 = 3 is false (6)"
    "Ben has 4 pens. He buys 12 more. ..."  gold 16
    " Ben * 4 = 16. The answer is 16."                    -> "no true computation gives 16 (Ben * 4 = 16 is not arithmetic)"
    "Ben buys 4 bags with 10 eggs in each bag. He already had 19 eggs and then gives away 20. ..."  gold 39
    " 19 + 20 = 39. The answer is 39."                    -> "the working never computes with 4, 10 of the question"
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from pipeline.annotate.graded import graded_text
from pipeline.annotate.hit import Hit
from pipeline.arith import Statement, answer_value, gives, numbers, question_numbers, show, solutions, statements

_CACHED_CHARS = 2000  # completions up to this long are cached (65,536 of them: at most ~130 MB of keys)
# the setup rule reads a short working only: in a worked solution of more steps, a number of the question left out
# is a distractor ("Shelly's 3 kids"), a decomposition (3 + 2 people for "a family of 5") or used in another form
# (25 cents as $0.25): 8 of 8 such flags read on four reasoning models' GSM8K rollouts were (docs/flags.md)
SETUP_MAX_STATEMENTS = 2
SHORT_WORKING_CHARS = 300  # ... in a working of a line or two (the main job's are under 200 characters)
# "no true computation gives the answer" is decided on a short working only too: a longer one that reaches its answer in
# words, in LaTeX this reader cannot evaluate (\cos^{-1}, a floor, a binomial), in code and its output, or in algebra
# of two unknowns is not a skipped computation but one this reader cannot check, and so never a flag (precision first:
# on four reasoning models' GSM8K working the rule's 3 flags past this length were all such; on MATH-500 most of
# 671, docs/flags.md). A false statement is decided at any length.


def check_working(completion: str, extracted: str | None, question: str, *, setup: bool = False,
                  thinking: bool = True) -> Hit | None:
    """The ``unsupported_answer`` decision for one correct completion (see the module's doc).

    ``setup``: also fire when the working's arithmetic never uses some of the question's numbers
    (a wrong setup, such as ``19 + 20 = 39``), with the evidence naming them. ``thinking``: verify read the
    completion's thinking apart, so the working is its final section (:func:`~pipeline.annotate.graded.graded_text`).
    Linear in the completion (:mod:`pipeline.arith`); a group's k samples often repeat one short text, so short ones
    are cached.
    """
    if len(completion) <= _CACHED_CHARS:
        return _check_cached(completion, extracted, question, setup, thinking)
    return _check(completion, extracted, question, setup, thinking)


@lru_cache(maxsize=65536)
def _check_cached(completion: str, extracted: str | None, question: str, setup: bool, thinking: bool) -> Hit | None:
    return _check(completion, extracted, question, setup, thinking)


def _check(completion: str, extracted: str | None, question: str, setup: bool, thinking: bool) -> Hit | None:
    answer = answer_value(extracted)
    if answer is None:
        return None
    working = graded_text(completion, thinking)  # a reasoning model's thinking tries and drops; its answer is worked
    stmts = statements(working)
    false = [s for s in stmts if s.ok is False]
    if false:
        shown = "; ".join(f"{s.text} is false ({show(s.lhs_value)})" for s in false[:3])
        return Hit(float(len(false)), shown)
    given = question_numbers(question)
    if (answer not in given and len(working) <= SHORT_WORKING_CHARS and not any(gives(s, answer) for s in stmts)
            and answer not in solutions(working)):
        claims = [s for s in stmts if s.ok is None and (s.rhs_value == answer or _mentions(s.rhs, answer))]
        why = f" ({claims[0].text} is not arithmetic)" if claims else (" (no working)" if not stmts else "")
        return Hit(0.0, f"no true computation gives {show(answer)}{why}")
    if (setup and len(stmts) <= SETUP_MAX_STATEMENTS and len(working) <= SHORT_WORKING_CHARS
            and (unused := unused_numbers(stmts, given))):
        shown = ", ".join(show(v) for v in sorted(unused))
        return Hit(0.0, f"the working never computes with {shown} of the question")
    return None


def unused_numbers(stmts: list[Statement], given: frozenset[Fraction]) -> set[Fraction]:
    """The question's numbers the working never computes with. An operand that is neither a number of the question
    nor an earlier result, but two unused question numbers combined (36 for 21 + 15: a step done in the head), uses them."""
    unused, results = set(given), set()
    pairs: dict[Fraction, tuple[Fraction, Fraction]] | None = None  # combined value -> its pair, for `unused`
    for s in stmts:
        for v in numbers(s.rhs if s.lhs == "…" else s.lhs):  # "result = 313.9 + 12.6" computes with its right side
            if v in unused:
                unused.discard(v)
                pairs = None
            elif v not in results:
                if pairs is None:  # rebuilt only when `unused` shrank: at most once per question number
                    pairs = {}
                    for a in unused:  # the first pair in iteration order wins, as a scan over the pairs would
                        for b in unused:
                            if a != b:
                                for c in _combos(a, b):
                                    pairs.setdefault(c, (a, b))
                if pair := pairs.get(v):
                    unused.difference_update(pair)
                    pairs = None
        if s.ok and s.rhs_value is not None:
            results.add(s.rhs_value)
    return unused


def _combos(a: Fraction, b: Fraction) -> set[Fraction]:
    return {a + b, a - b, a * b} | ({a / b} if b else set())


def _mentions(text: str, value: Fraction) -> bool:
    return value in numbers(text)
