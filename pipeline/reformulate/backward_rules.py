"""The rule-based backward writer (``llm_backward`` with ``writer: rules``, the embedded default).

Where the parent's reference solution is a chain of computations that recomputes
(:func:`pipeline.arith.chain`: the synthetic set's ``14 + 9 = 23.`` steps,
GSM8K's ``<<48/2=24>>`` annotations) and ends at the gold, the answer is stated and the
child asks for a quantity the chain determines. Rungs, in the order the ladder measures them:

- ``input``: one number of the question becomes ``x`` (the rule of ``fobar``: the first that
  occurs once, differs from the answer and is an operand of the chain) and the answer is
  stated; gold = that number. Checked by recomputation: the chain, re-run with ``x`` moved
  by one, no longer reaches the answer (so the answer pins ``x`` down), and re-run with the
  masked number reaches it again.
- ``step:<i>``: the intermediate result of step i (last first), asked for with the answer
  stated and that step of the solution shown with its result replaced by ``x``::

      Mia has 14 pens. She buys 9 more and then gives 5 to a friend. How many pens does Mia
      have now? The answer to this question is 18. One step of its solution reads:
      "14 + 9 = x." What is the value of x?                                      -> 23

  Gold = the step's recomputed value; a step whose result equals the answer or a number the
  question already gives, or whose sentence does not show its computation (GSM8K's
  ``S + <<+30+46=76>>76``), is no rung.
- ``step:<i>.<j>``: step j of the place-value expansion of step i
  (:func:`pipeline.arith.expand_step`: ``48 - 29 = 19`` is ``48 - 20 = 28``
  then ``28 - 9 = 19``), shown alone with its result replaced by ``x``; measured after the
  solution's own steps. A one-operation parent (the synthetic set's ``What is 48 - 29?``, most
  of its hard items) has no intermediate of its own; its expansion does::

      What is 48 - 29? The answer to this question is 19. One step of its solution reads:
      "48 - 20 = x." What is the value of x?                                      -> 28

  Gold = that step's recomputed value, under the same rules as ``step:<i>``.
"""

from __future__ import annotations

import re
from fractions import Fraction

from pipeline.arith import NotArithmetic, Step, chain, expand_step, fmt, step_value
from pipeline.reformulate.fobar import TEMPLATE as FOBAR_TEMPLATE
from pipeline.reformulate.fobar import answer_text
from pipeline.reformulate.numerals import count_x, find_numbers, has_variable_x, mask
from pipeline.reformulate.registry import Child, Parent, Rung, Skip

STEP_TEMPLATE = ('{question} The answer to this question is {answer}. One step of its solution reads: "{step}" '
                 "What is the value of x?")
REASONS: dict[str, str] = {
    "no_solution": "the parent has no reference solution to recompute",
    "no_chain": "the solution states no computation that recomputes (not a chain of arithmetic steps)",
    "chain_misses_answer": "the solution's last computation is not the gold answer",
    "x_in_question": "the question already uses a variable x",
    "no_input": "no number of the question is an operand of the chain that the answer pins down",
    "no_intermediate": "the chain has no intermediate result other than the answer and the question's numbers",
}
_CALC = re.compile(r"<<[^<>]*>>")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _operands(expr: str) -> list[Fraction]:
    return [Fraction(t.replace(",", "")) for t in re.findall(r"\d[\d,]*(?:\.\d+)?", expr)]


def _replay(steps: list[Step], old: Fraction, new: Fraction) -> Fraction:
    """The chain re-run with the input ``old`` replaced by ``new``, results propagated to later steps by value."""
    values: dict[Fraction, Fraction] = {old: new}
    last = Fraction(0)
    for s in steps:
        parts = re.split(r"(\d[\d,]*(?:\.\d+)?)", s.expr.replace(",", ""))
        expr = "".join(str(values.get(Fraction(p), Fraction(p))) if re.fullmatch(r"\d+(?:\.\d+)?", p) else p
                       for p in parts)
        expr = re.sub(r"(\d+)/(\d+)", r"(\1/\2)", expr)
        last = step_value(expr)
        values[s.value] = last
    return last


def _input_rung(parent: Parent, steps: list[Step], answer: Fraction) -> Child | Skip:
    if has_variable_x(parent.question):
        return Skip("x_in_question", "the question already uses the variable x")
    numbers = find_numbers(parent.question)
    counts: dict[Fraction, int] = {}
    for n in numbers:
        counts[Fraction(n.value)] = counts.get(Fraction(n.value), 0) + 1
    used = {v for s in steps for v in _operands(s.expr)}
    tried = []
    for n in numbers:
        v = Fraction(n.value)
        if not n.maskable or counts[v] > 1 or v == answer or v not in used or len(numbers) < 2:
            continue
        tried.append(n.text)
        try:
            same, moved = _replay(steps, v, v), _replay(steps, v, v + 1)
        except NotArithmetic:
            continue
        if same != answer or moved == answer:
            continue
        meta = {"rung_kind": "input", "masked": fmt(v), "masked_text": n.text, "recomputed": fmt(same),
                "recomputed_with_x_plus_1": fmt(moved), "chain": [f"{s.expr} = {fmt(s.value)}" for s in steps]}
        q = FOBAR_TEMPLATE.format(question=mask(parent.question, n), answer=answer_text(parent.answer))
        return Child(q, fmt(v), None, meta)
    return Skip("no_input", f"candidates {tried or 'none'} among {[n.text for n in numbers]}")


def _step_text(solution: str, step: Step) -> str:
    """The solution's sentence holding ``step``, its result replaced by x (GSM8K annotations dropped)."""
    start = max((m.end() for m in _SENTENCE_END.finditer(solution, 0, step.start)), default=0)
    end_m = _SENTENCE_END.search(solution, step.end)
    end = end_m.start() if end_m else len(solution)
    before, after = solution[start:step.start], solution[step.end:end]
    if solution[step.start:step.start + 2] == "<<":  # 48/2 = <<48/2=24>>24 clips: drop the annotation and the result
        after = re.sub(r"^\s*\$?\s*-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)", "", after)  # the result, restated after it
        before = re.sub(r"[=$\s]*$", "", before)
        text = f"{before.rstrip()} = x{after}"
    else:
        text = f"{before}{step.expr} = x{after}"
    return " ".join(_CALC.sub("", text).split())


def _expansion(step: Step) -> list[tuple[int, str, Fraction]]:
    """Step ``step``'s place-value steps: (1-based index, ``a op b = x.``, recomputed value); [] if it does not expand."""
    expanded = expand_step(f"{step.expr} = {fmt(step.value)}.") or []
    out = []
    for j, text in enumerate(expanded[1:], start=1):  # [0] is the decomposition, not a computation
        expr = text.split("=")[0].strip()
        out.append((j, f"{expr} = x.", step_value(expr)))
    return out


def _squash(text: str) -> str:
    return re.sub(r"[\s$,]", "", text)


def rungs(parent: Parent) -> list[Rung]:
    """The rule writer's rungs for one parent (each a Child with a recomputed gold, or why it is no rung)."""
    if not parent.solution or not parent.solution.strip():
        return [("input", Skip("no_solution", "the parent has no reference solution"))]
    try:
        steps = chain(parent.solution)
    except NotArithmetic as exc:
        return [("input", Skip("no_chain", f"a step does not recompute: {exc}"))]
    if not steps:
        return [("input", Skip("no_chain", "no computation found in the solution"))]
    try:
        answer = Fraction(parent.answer.replace(",", "").strip())
    except (ValueError, ZeroDivisionError):
        return [("input", Skip("chain_misses_answer", f"gold {parent.answer!r} is not a number"))]
    if steps[-1].value != answer:
        return [("input", Skip("chain_misses_answer", f"last step {steps[-1].expr} = {fmt(steps[-1].value)}, "
                                                      f"gold {parent.answer}"))]
    out: list[Rung] = [("input", _input_rung(parent, steps, answer))]
    givens = {Fraction(n.value) for n in find_numbers(parent.question)}
    for i in reversed(range(len(steps) - 1)):
        s = steps[i]
        if s.value == answer or s.value in givens or s.value < 0:
            continue
        text = _step_text(parent.solution, s)
        if count_x(text) != 1 or has_variable_x(parent.question) or _squash(s.expr) + "=x" not in _squash(text):
            continue  # the sentence must show the very computation whose result it asks for
        q = STEP_TEMPLATE.format(question=parent.question, answer=answer_text(parent.answer), step=text)
        meta = {"rung_kind": "intermediate", "step": i + 1, "steps_total": len(steps), "step_text": text,
                "chain": [f"{t.expr} = {fmt(t.value)}" for t in steps]}
        out.append((f"step:{i + 1}", Child(q, fmt(s.value), None, meta)))
    for i, s in enumerate(steps):
        for j, text, value in _expansion(s):
            if value == answer or value in givens or value < 0 or has_variable_x(parent.question):
                continue
            q = STEP_TEMPLATE.format(question=parent.question, answer=answer_text(parent.answer), step=text)
            meta = {"rung_kind": "intermediate", "step": i + 1, "steps_total": len(steps), "step_text": text,
                    "expanded_from": f"{s.expr} = {fmt(s.value)}", "expansion_step": j,
                    "chain": [f"{t.expr} = {fmt(t.value)}" for t in steps]}
            out.append((f"step:{i + 1}.{j}", Child(q, fmt(value), None, meta)))
    if len(out) == 1 and isinstance(out[0][1], Skip):
        out.append(("step", Skip("no_intermediate", f"{len(steps)} step(s), none an intermediate to ask for")))
    return out
