"""``prose_final``: the value the last sentence states, for models that answer in prose (off by default)."""

from __future__ import annotations

import re

from pipeline import numbers
from pipeline.verify.answer_text import stated_value
from pipeline.verify.extract import ANSWER_SPAN_CHARS, CONDITIONAL, Extractor, conditional_before, register

# prose_final: the last sentence's value, when the sentence concludes ("So", "Therefore", ...) or states it ("is",
# "=", "comes to", ...), is no question, condition or plan, and ends on the value (a few unit words may follow)
_CONCLUSION = re.compile(r"(?i)^(?:so|therefore|thus|hence|in total|altogether|together|in all|all in all|in the end|"
                         r"finally|in conclusion|overall|as a result|this means|that means)\b")
_STATES = re.compile(r"(?i)(?:\b(?:is|are|was|were|equals?|comes\s+to|totals?|makes?|made|gives?|has|have|had|costs?|"
                     r"earns?|earned|pays?|paid|spends?|spent|needs?|gets?|got)\b|=)")
_PLAN = re.compile(r"(?i)\b(?:let\s+me|let's|let\s+us|I\s+will|I'll|we\s+will|we'll|we\s+need|next|need\s+to|"
                   r"have\s+to|going\s+to|should\s+we)\b")
# a fraction written inline ("4/9") is one value, not its denominator
_PROSE_VALUE = re.compile(r"\$(?:\\\$|[^$]){1,200}\$|\\\((?:(?!\\\)).){1,200}\\\)|\\?\$?-?" + numbers.STRICT
                          + "(?:/" + numbers.PLAIN + ")?")
_UNIT_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
# a word right before the value (not after "=") or among the words after it that makes the value part of a relation
_RELATION_BEFORE = frozenset(("than", "of", "times", "by", "from", "plus", "minus", "and", "or", "over", "divided",
                              "more", "less", "fewer", "with", "out"))
_RELATION_AFTER = frozenset(("than", "times", "plus", "minus", "and", "or", "divided", "more", "less", "fewer", "if",
                             "unless"))
_MAX_TAIL_WORDS = 6


def _last_sentence(text: str) -> str:
    """The last sentence of the text's last non-empty line (split at ". ", "! ", "? "), stripped."""
    lines = [ln for ln in text[-ANSWER_SPAN_CHARS:].splitlines() if ln.strip()]
    if not lines:
        return ""
    return re.split(r"(?<=[.!?])\s+", lines[-1].strip())[-1]


@register
class ProseFinal(Extractor):
    """The value the last sentence states ("Therefore, the total comes to 18 dollars." -> 18), for models that
    answer in prose (not in the default list). The sentence must conclude ("So", "Therefore", ...) or state
    ("is", "=", "comes to", "makes", ...), must not be a question, a condition or a plan, and must end on its
    value (up to six unit words after it, none a relation such as "than" or "of")."""

    name = "prose_final"

    def read(self, completion: str) -> str | None:
        sentence = _last_sentence(completion)
        if not sentence or sentence.endswith("?") or _PLAN.search(sentence):
            return None
        cond = CONDITIONAL.search(sentence)
        if cond and re.search(r"(?i)\b(?:answer|result)\b", sentence[cond.end():]):  # a supposition about the answer
            return None
        sentence = sentence.rstrip(".!").rstrip()
        concludes = _CONCLUSION.search(sentence)
        values = list(_PROSE_VALUE.finditer(sentence))
        if not values:
            return None
        value = values[-1]
        head, tail = sentence[:value.start()], sentence[value.end():].split()
        before = set() if head.rstrip().endswith("=") else {w.lower().strip(",") for w in head.split()[-2:]}
        if head.lower().rstrip().endswith("total of"):  # "a total of 140 flowers": a count, not a relation
            before.discard("of")
        if (before & _RELATION_BEFORE or conditional_before(sentence, value.start()) or len(tail) > _MAX_TAIL_WORDS
                or any(not _UNIT_WORD.fullmatch(w) or w.lower() in _RELATION_AFTER for w in tail)):
            # a concluding sentence that states one number in plain words ("Therefore, Kelly will have 90 cents left
            # after buying the can of pop"): that number (answer_text.stated_value's rules)
            return stated_value(sentence[concludes.end():].lstrip(" ,")) if concludes else None
        if not (concludes or _STATES.search(head)):
            return None
        return value.group().strip() or None
