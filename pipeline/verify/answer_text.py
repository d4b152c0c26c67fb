"""How an extracted answer's text is read before it is graded: units, dollars and a percent sign dropped, prose
refused, an equation read by its last right-hand side, number words, choice letters, clock times and bracket kinds
(:mod:`pipeline.verify.grader` grades what this gives; the decided policies are listed there).
"""

from __future__ import annotations

import re
from functools import lru_cache

from pipeline.numbers import NUMBER_WORDS, PLAIN, STRICT, WRITTEN, without_separators, words_value

# linear on any text: a whitespace run is entered only at its start; the trailing dollars are stripped, not matched
_PERCENT = re.compile(r"(?<!\s)\s*+\\?%\s*+$")


_LEADING_DOLLARS = re.compile(r"^\s*+\\?\$++\s*+")


# a number and then words: space-separated (the first word of two or more letters, not pi), or a glued unit
_GLUED_UNIT = r"(?:cm|mm|km|kg|mg|lbs?|oz|ft|mph|hrs?|mins?|secs?|ml|cents?|dollars?|units?)\.?"


_UNIT_WORDS = re.compile(rf"^(-?{WRITTEN})(?:\s+(?!pi\b)[A-Za-z]{{2,}}[A-Za-z. ]*|\s*{_GLUED_UNIT})$")


_TEXT = re.compile(r"^\\(?:text|textbf|mathrm)\{(.*)\}$")


_PROSE_WORD = re.compile(r"^[A-Za-z'’]+[,.;:!?]?$")


_CHOICE = re.compile(r"^\(?([A-Ea-e])\)?$")


# a choice letter in parentheses followed by its option's words: "(B) Circle", "\text{(B)} Circle"
CHOICE_LEAD = re.compile(r"^(?:\\text\{\s*)?\(([A-Ea-e])\)\}?\s+[A-Za-z][A-Za-z .,'-]*$")


# LaTeX text wrappers inside an answer, unwrapped to read an ordinal: "11^{\text{th}}\text{ grade}" -> "11^{th} grade"
TEXT_ANY = re.compile(r"\\(?:text|textrm|mathrm)\{([^{}]*)\}")


# a clock time, "7:15", "7:15 a.m.", "19:05", "7:15pm"
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})\s*(?:([ap])\.?\s*m\.?)?$", re.I)


# unicode math a model writes that math-verify's LaTeX parser does not read: pi, infinity, the minus sign
_UNICODE_MATH = {"π": "\\pi ", "∞": "\\infty ", "−": "-"}


# a word after a number that makes it no unit but an operation or a comparison: "3 times the radius", "5 more than x"
_NOT_UNIT_WORDS = frozenset(("times", "plus", "minus", "over", "divided", "and", "or", "of", "more", "less", "than",
                             "fewer", "greater", "smaller", "larger", "mod", "if", "when", "where", "for", "is", "are",
                             "equals", "to", "by", "with", "not"))


# words that are math, not units: "12 pi", "5 sqrt 2" stay math
_MATH_WORDS = frozenset(("pi", "sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "frac", "cdot",
                         "infty", "text", "mathrm"))


_UNIT_WORD = re.compile(r"[A-Za-z]{2,}\.?")


_MATH_MARK = re.compile(r"[\d\\]")  # a digit or a LaTeX command: the head is math, not words ("twenty-one")


_MAX_UNIT_WORDS = 4


ORDINAL = re.compile(r"^(-?\d+)(?:st|nd|rd|th|\^\{?(?:\\text\{)?(?:st|nd|rd|th)\}?\}?)(?:\s+[A-Za-z][A-Za-z ]*)?$")


_GOLD_WORD = re.compile(r"[A-Za-z]{2,}")


_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")


def _unit_tail(a: str) -> int:
    """Where trailing unit words start in ``a`` ("12\\pi inches per second" -> 6), or -1: up to
    :data:`_MAX_UNIT_WORDS` words of two or more letters, none an operation or math, after something that ends a
    value (a digit, a symbol such as ``2i`` or ``\\circ``, a closing brace or bracket, a dollar), not after a word."""
    words = a.split(" ")
    k = len(words)
    while k > 0 and len(words) - k < _MAX_UNIT_WORDS and _UNIT_WORD.fullmatch(words[k - 1]) and (
            words[k - 1].lower().rstrip(".") not in _NOT_UNIT_WORDS | _MATH_WORDS | NUMBER_WORDS):
        k -= 1
    if k == len(words) or k == 0 or (k > 0 and _UNIT_WORD.fullmatch(words[k - 1]) and len(words) - k == _MAX_UNIT_WORDS):
        return -1
    head = " ".join(words[:k]).rstrip()
    last = words[k - 1]
    if _UNIT_WORD.fullmatch(last) or not (head[-1:].isalnum() or head[-1:] in "})]$|") or not _MATH_MARK.search(head):
        return -1  # the scan stopped at a word ("5 more apples"), the head ends in an operator or is no math
    return len(head)


def has_words(gold: str) -> bool:
    """Whether a gold holds a word (two or more letters outside LaTeX commands): ``5 \\text{ cm}``, ``\\text{Monday}``."""
    return bool(_GOLD_WORD.search(_LATEX_COMMAND.sub(" ", gold)))


# in a clause after a count, words that make the count part of a computation or a comparison ("four more than")
_COMPUTING = frozenset(("times", "plus", "minus", "over", "divided", "more", "less", "than", "fewer", "greater",
                        "smaller", "larger", "mod", "equals", "equal", "product", "sum", "difference", "quotient",
                        "twice", "half", "percent", "per"))


def _counted_clause(tail: list[str]) -> bool:
    """A clause after a count that says what it counts: plain words only (no digit, no math), the first a noun-like
    word that is no operation ("boxes hold neither pens nor pencils"), none computing with the count."""
    return (_UNIT_WORD.fullmatch(tail[0]) is not None and tail[0].rstrip(".") not in _NOT_UNIT_WORDS | _MATH_WORDS
            and all(_PROSE_WORD.match(w) and w.strip(",.;:!?").lower() not in _COMPUTING | _MATH_WORDS | NUMBER_WORDS
                    for w in tail))


def number_words(a: str) -> str | None:
    """``three boxes`` -> ``3``, ``one hundred and twenty`` -> ``120``: number words, then at most
    :data:`_MAX_UNIT_WORDS` unit words (none an operation: "three times x" is no number), or a longer clause of
    plain words about the count (:func:`_counted_clause`: "four boxes hold neither pens nor pencils"); None
    otherwise."""
    words = a.lower().replace("-", " ").split()
    k = 0
    while k < len(words) and (words[k] in NUMBER_WORDS or (words[k] == "and" and k > 0)):
        k += 1
    while k > 0 and words[k - 1] == "and":
        k -= 1
    tail = words[k:]
    if k == 0:
        return None
    if len(tail) > _MAX_UNIT_WORDS:  # "four boxes hold neither pens nor pencils": a count, then a clause about it
        if not _counted_clause(tail):
            return None
    elif any(not _UNIT_WORD.fullmatch(w) or w.rstrip(".") in _NOT_UNIT_WORDS | _MATH_WORDS for w in tail):
        return None
    value = words_value(words[:k])
    return str(value) if value is not None else None


_WHICH_IS = re.compile(r"(?i),?(?<!\s)\s++which\s++is\s++")


def last_rhs(a: str) -> str:
    """``4 + 2 + 10 = 24 bars`` -> ``24 bars``; ``..., which is 12`` -> ``12`` (outside braces only)."""
    if "=" not in a and "which" not in a.lower():  # the common case, without the walk
        return a
    parts = _WHICH_IS.split(a)
    a = parts[-1] if len(parts) > 1 and parts[-1].strip() else a
    depth, cut = 0, -1
    for i, ch in enumerate(a):
        depth += {"{": 1, "}": -1, "(": 1, ")": -1}.get(ch, 0)
        if ch == "=" and depth == 0 and a[i - 1:i] not in ("<", ">", "!") and a[i + 1:i + 2] != "=":
            cut = i
    return a[cut + 1:].strip() if cut >= 0 and a[cut + 1:].strip() else a


def is_equation(text: str) -> bool:
    """A top-level ``=`` (not ``<=``, ``>=``, ``!=``, ``==``) outside braces and brackets."""
    return "=" in text and last_rhs(text.split(",")[0] if "which" in text.lower() else text) != text


def is_prose(text: str) -> bool:
    """Three or more plain words, two of them of three or more letters: "the number of stickers"; not ``p - q``."""
    words = text.split()
    return (len(words) >= 3 and all(_PROSE_WORD.match(w) for w in words)
            and sum(len(w.strip(",.;:!?")) >= 3 for w in words) >= 2)


def strip_dollars(a: str) -> str:
    """A leading ``$``/``\\$`` run and a trailing ``$`` run removed, with the whitespace around them."""
    a = _LEADING_DOLLARS.sub("", a, count=1)
    t = a.rstrip()
    if t.endswith("$"):
        return t.rstrip("$").rstrip()
    return a


# "The number of ways is 12", "the correct value of $k$ is $2$": a subject, then its value. The subject starts with
# "the" (a noun phrase, up to 12 words); the value is what follows the first "is" / "equals", unless it opens with
# a word that qualifies it ("not 12", "less than 12", "an integer") or holds another verb (a second clause).
_SUBJECT_IS = re.compile(r"(?i)^(?:the|our|my)\s++(?:[^\s=]++\s++){0,12}?(?:is|equals)\s++(?P<value>\S.*)$")
_QUALIFIED = re.compile(r"(?i)^(?:not|never|no|neither|less|more|greater|smaller|larger|at|between|about|around|"
                        r"approximately|roughly|nearly|almost|close|an?|the|some|any|either|in|of|equal|given|"
                        r"positive|negative|divisible|undefined|unknown)\b")
_ANOTHER_VERB = re.compile(r"(?i)\b(?:is|are|was|were|equals|if|when|because|since|but)\b")


def subject_value(a: str) -> str | None:
    """The value of ``the <subject> is <value>`` (see :data:`_SUBJECT_IS`), or None when ``a`` is not that."""
    if not (m := _SUBJECT_IS.match(a)) or _WHICH_IS.search(a):  # "..., which is 12" is last_rhs's
        return None
    value = m.group("value").strip()
    if _QUALIFIED.match(value.lstrip("$\\( ")) or _ANOTHER_VERB.search(value):
        return None
    return value


# "Jenny eats 9 cookies", "It will take the child 4 days to save enough money", "Jean paid $27,000": a sentence of
# plain words that states one number after its subject. Not when it holds a second number or any math, a negation,
# a hedge or a condition, or a word that qualifies the number or computes with it ("3 more hours than James", "at
# least 3", "about 3", "3 times as many"): then the sentence is graded whole, as before (precision first).
_STATED_NUMBER = re.compile(rf"^(?:\\?\$|€|£)?(-?{STRICT}(?:/{PLAIN})?)(?:\\?%)?[,.;!?]?$")
_STATED_WORD = re.compile(r"^[A-Za-z'’-]+[,.;!?]?$")
_STATED_REFUSED = frozenset((
    "not", "no", "never", "cannot", "can't", "isn't", "won't", "doesn't", "don't", "didn't", "aren't", "wasn't",
    "neither", "nor", "either", "or", "if", "unless", "when", "whether", "but", "however", "although", "except",
    "wait", "maybe", "perhaps", "probably", "possibly", "might", "think", "guess", "believe", "seems", "suppose",
    "assume", "assuming", "check", "verify", "step", "question", "problem", "example", "approximately", "about",
    "around", "roughly", "nearly", "almost", "least", "most", "over", "under", "than", "between", "within", "up",
    "more", "less", "fewer", "greater", "smaller", "larger", "as", "twice", "half", "plus", "minus", "divided",
    "product", "sum", "difference", "quotient", "mod", "equal", "equals", "ratio"))


def stated_value(a: str) -> str | None:
    """The number that a sentence of plain words states after its subject (see :data:`_STATED_NUMBER`), or None."""
    tokens = a.replace("**", "").split()
    numbers = [i for i, t in enumerate(tokens) if any(c.isdigit() for c in t)]
    if len(tokens) < 3 or len(numbers) != 1 or numbers[0] == 0:  # a leading number is unit_words' ("12 apples")
        return None
    i = numbers[0]
    if not (m := _STATED_NUMBER.match(tokens[i].strip("$") if tokens[i].count("$") == 2 else tokens[i])):
        return None
    words = tokens[:i] + tokens[i + 1:]
    if not all(_STATED_WORD.match(w) and w.strip(",.;!?").lower() not in _STATED_REFUSED for w in words):
        return None
    return m.group(1)


@lru_cache(maxsize=65536)  # answers repeat across a problem's k samples
def normalize(answer: str, *, keep_equation: bool = False, strip_units: bool = False) -> tuple[str, tuple[str, ...]]:
    """The answer as it is compared, and the policies (:data:`~pipeline.verify.policies.POLICIES`) that shaped it:
    unicode pi, infinity and minus as LaTeX, math delimiters and a currency sign stripped, the last right-hand side
    of an equation kept (unless ``keep_equation``: the gold is an equation), a trailing percent sign and trailing
    unit words dropped (after an expression only with ``strip_units``: the gold has no words)."""
    fired: list[str] = []
    a = answer.strip().rstrip(".").strip()
    if any(c in a for c in _UNICODE_MATH):
        for c, latex in _UNICODE_MATH.items():
            a = a.replace(c, latex)
        a = a.replace(" $", "$").strip()
        fired.append("unicode_math")
    if not keep_equation and (value := subject_value(a)) is not None:
        a = value.rstrip(".").strip()
        fired.append("subject_value")
    elif not keep_equation and strip_units and (value := stated_value(a)) is not None:
        a = value
        fired.append("stated_value")
    if (a.startswith("\\(") and a.endswith("\\)")) or (a.startswith("\\[") and a.endswith("\\]")):
        a = a[2:-2].strip()
    if strip_units and not _UNIT_WORDS.match(a) and (cut := _unit_tail(a)) > 0:
        a = a[:cut].rstrip()  # "$12\\pi$ inches per second", "12\\pi inches per second": the expression
        fired.append("unit_words")
    b = strip_dollars(a)
    if b != a and ("\\$" in a or a.count("$") % 2 or not (a.startswith("$") and a.endswith("$"))):
        fired.append("currency")
    a = b
    if not keep_equation:
        b = last_rhs(a)
        if b != a:
            fired.append("last_rhs")
        a = b
    b = _PERCENT.sub("", a)
    if b != a:
        fired.append("percent_unit")
    a = b
    if m := _UNIT_WORDS.match(a):
        b = without_separators(m.group(1))
        if b != a and a != m.group(1):
            fired.append("unit_words")
        a = b
    return a.strip().rstrip(".").strip(), tuple(fired)


def normalize_answer(answer: str) -> str:
    """The answer as it is compared with a value gold (see :func:`normalize`)."""
    return normalize(answer)[0]


def choice_letter(text: str) -> str | None:
    """``C``, ``(C)``, ``\\text{(C)}`` -> ``C``; anything else -> None."""
    t = text.strip().strip("$").strip()
    if m := _TEXT.match(t):
        t = m.group(1).strip()
    m = _CHOICE.match(t)
    return m.group(1).upper() if m else None


def clock_time(text: str) -> tuple[int, int, str | None] | None:
    """A clock time as (hours, minutes, "a"/"p"/None): ``7:15 \\text{ a.m.}``, ``\\text{7:15 a.m.}``, ``19:05``."""
    t = TEXT_ANY.sub(r"\1", text.strip().strip("$")).replace("~", " ").strip()
    m = _CLOCK.match(t)
    if m is None or int(m.group(2)) >= 60:
        return None
    return int(m.group(1)), int(m.group(2)), (m.group(3) or "").lower() or None


def clock_verdict(gold: str, answer: str) -> bool | None:
    """Whether two clock times are the same time (None: the gold is no clock time; False: it is and the answer is not).
    With a.m./p.m. on both, or on
    neither, the times compare as written; a 24-hour time equals its 12-hour form (19:15 is 7:15 p.m.); a 12-hour
    time without a.m./p.m. (7:15) equals either half of the day only as a gold, never as the answer to a gold that
    names the half (precision first: the answer left it open)."""
    g, a = clock_time(gold), clock_time(answer)
    if g is None:
        return None
    if a is None:  # a time is asked: any other answer is wrong (math-verify would read 05:00 as a ratio, or fail)
        return False

    def minutes(h: int, m: int, half: str | None) -> int:
        return (h % 12 + (12 if half == "p" else 0)) * 60 + m if half else h * 60 + m

    if bool(g[2]) == bool(a[2]):
        return minutes(*g) == minutes(*a)
    if a[2]:  # the gold names no half: a 24-hour gold, or a 12-hour one that either half answers
        return minutes(*a) == minutes(*g) or (g[0] <= 12 and minutes(*a) % 720 == minutes(*g) % 720)
    return a[0] > 12 and minutes(*a) == minutes(*g)  # only an unambiguous 24-hour answer matches a named half


def bracket_kind(text: str) -> str | None:
    """The outer bracket of an answer: ``set`` (``\\{...\\}``), ``tuple`` (``(...)``/``[...]`` with a comma) or None."""
    t = text.strip().strip("$").strip()
    t = re.sub(r"\\left|\\right", "", t).strip()
    if t.startswith("\\{") and t.endswith("\\}"):
        return "set"
    if t[:1] in "([" and t[-1:] in ")]" and "," in t:
        return "tuple"
    return None


def parse_answer(answer: str) -> list:
    """math-verify's parse of a normalised answer: LaTeX in ``$...$`` first, plain expression as fallback."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    text = answer if "\\boxed" in answer else f"${answer}$"
    parsed = parse(text, extraction_config=[LatexExtractionConfig()], parsing_timeout=None, raise_on_error=True)
    if not parsed:
        parsed = parse(answer, extraction_config=[ExprExtractionConfig()], parsing_timeout=None, raise_on_error=True)
    return parsed
