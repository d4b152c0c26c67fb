"""Final-answer extractors: one class shape (:class:`Extractor`), one registry, tried in the configured order.

An extractor reads a completion and returns the final answer it finds (a string) or None.
Markdown emphasis (``**47**``, ``**Final Answer:** 47``) is removed before any rule runs.
The embedded model's few-shot style ends "... 3 + 5 = 8. The answer is 8." and MATH-style
completions end "... so the answer is $\\boxed{\\frac{1}{2}}$"::

    >>> extract("3 + 5 = 8. The answer is 8.", extractors=["boxed", "gsm8k", "answer_is"])
    Extraction(answer='8', extractor='answer_is')
    >>> extract("#### 42\\nExtra 7", extractors=["gsm8k"])
    Extraction(answer='42', extractor='gsm8k')

Registered: ``boxed`` (content of the last ``\\boxed{}``/``\\fbox{}``), ``gsm8k`` (the rest of
the line after the last ``####``), ``answer_is`` (after the last "the answer is", "final answer:"
or "answer:", up to the end of its sentence), ``is_the_answer`` (the token before "... is the
answer"), ``last_number`` (the last number anywhere: lenient, off by default), ``prose_final`` (the value
the last sentence states, for models that answer in prose: off by default).
:func:`candidates` lists *every* answer the rules see, for the ``multiple_answers`` flag.

Bounded on any text: only the last :data:`SEARCH_CHARS` characters of a completion are searched
(a final answer is at its end; a looping or padded completion costs the same as a short one),
every rule is linear in what it reads (no pattern that backtracks over its own matches: is_the_answer
walks back from each phrase instead), and an "answer is" span is read up to :data:`ANSWER_SPAN_CHARS`
characters (longer ones are past ``verify.max_answer_chars`` anyway).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.config import ConfigError
from pipeline.gold import GoldError, last_boxed
from pipeline.plugins import Plugin, Registry, origin_of

# the rules: one module each in pipeline/verify/extractors/ (found by a folder scan), and a user's own (a plugin
# file registering one: docs/operations.md); listed in the order they were first written, a user's after them.
# The registry holds one instance of each rule (a rule has no knobs: what decides a verdict is in verifier_id).
EXTRACTORS: Registry[Extractor] = Registry(
    "extractor", package="pipeline.verify.extractors",
    order=("boxed", "gsm8k", "answer_is", "is_the_answer", "prose_final", "last_number"))

SEARCH_CHARS = 32_768  # the tail of a completion the extractors search for its final answer
ANSWER_SPAN_CHARS = 2_048  # how far past "the answer is" its sentence is read


@dataclass(frozen=True)
class Extraction:
    answer: str
    extractor: str
    policies: tuple[str, ...] = ()  # the verifier policies (pipeline/verify/policies.py) the extraction used


Found = tuple[str, tuple[str, ...]]  # an answer and the verifier policies its reading used


class Extractor(Plugin):
    """Base class of a final-answer rule (the one plugin shape, :class:`pipeline.plugins.Plugin`): a ``name`` and one
    method, ``read(completion)``, which returns the answer (a string), the answer with the verifier policies its
    reading used (:data:`Found`), or None. A rule that can pass over an answer phrase (a question, a condition, a
    plan, an answer the model then doubts) also says why it found none in ``passed_over`` (:func:`refused`). An
    instance called on a completion returns the answer alone."""

    def read(self, completion: str) -> str | Found | None:
        raise NotImplementedError

    def passed_over(self, completion: str) -> tuple[str, ...] | bool:
        """Why no phrase answered: a policy tuple (``doubted_answer``), True (``hedged_phrase``) or False (none)."""
        return False

    def found(self, completion: str) -> Found | None:
        got = self.read(completion)
        if got is None or isinstance(got, tuple):
            return got
        return got, ()

    def __call__(self, completion: str) -> str | None:
        got = self.found(completion)
        return got[0] if got is not None else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def register(cls: type[Extractor]) -> type[Extractor]:
    """Class decorator: register one instance of the :class:`Extractor` subclass ``cls`` under its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Extractor)) or not isinstance(getattr(cls, "name", None), str):
        raise ConfigError(f"extractor {cls!r}: an extractor is an Extractor subclass with a `name`")
    EXTRACTORS.add(cls.name, cls(), origin=origin_of(cls))
    return cls


def get_extractor(name: str) -> Extractor:
    return EXTRACTORS.lookup(name)


# A sentence ends at a period that is not a decimal point, at a question mark, or at a newline.
_SENTENCE_END = re.compile(r"(?<!\\)\.(?!\d)|\?|\n")
_DOLLAR = re.compile(r"(?<!\\)\$")
# The phrases that mark a final answer: "the answer is", "the final answer would be", "Final Answer:", "the final
# result is", and for a multiple-choice question "the (only) correct option is (B) Circle" ("option" or "choice",
# "correct" or "right": a bare "the first option is" names an option, not the answer). A bare "the result is" is
# working, not an answer: "result" counts only as "final result".
_ANSWER_IS = re.compile(
    r"(?i)\b(?:the\s++)?(?P<final>final\s++)?(?P<noun>answer(?:\s++to\s++(?:the|this)\s++(?:question|problem))?|result"
    r"|(?:only\s++)?(?:correct|right)\s++(?:option|choice))"
    r"(?:\s++(?:is|(?P<modal>should|would|must)\s++be)\b|(?=\s*+:))"
    r"(?!\s*+(?:correct|right|wrong|incorrect|not|unknown)\b)\s*+[:=]?\s*+")
# markdown emphasis around an answer or a label: "**47**", "**Final Answer:** 47", "__47__"
_EMPHASIS = re.compile(r"\*\*|__")
# A phrase inside a conditional clause is a supposition, not an answer: "if the answer is 4, then ...".
CONDITIONAL = re.compile(r"\b(?:[Ii]f|[Ww]hether|[Ss]uppos(?:e|ing)|[Aa]ssum(?:e|ing)|[Uu]nless|[Pp]rovided)\b")
_CLAUSE_BREAK = re.compile(r"(?i)[,;:]|\bthen\b")
_LOOK_BACK_CHARS = 300  # how far back a phrase's sentence is searched for a conditional word
# The first word of a plan or a property, not of a value: "the answer should be an integer", "... in dollars".
PLAN_WORDS = frozenset((
    "a", "an", "the", "less", "more", "greater", "smaller", "larger", "at", "between", "in", "of", "equal", "positive",
    "negative", "divisible", "expressed", "written", "given", "found", "computed", "calculated", "determined", "rounded",
    "some", "any", "either", "what", "how", "not", "close"))
# The opening of a worked solution, not of a value: "Answer: We start by solving \\( z^4 + \\dots = 0 \\)", "Answer: Let's
# denote ...", "the answer is: to find x, we ...". Models that echo a "Question: ... Answer:" template write these; the
# sentence can end in an equation whose right-hand side would be graded as the answer.
PLAN_OPENER = re.compile(
    r"(?i)^\s*+(?:(?:we|i)\s++(?:(?:will|shall|can|must|should|need\s++to|have\s++to|want\s++to|are\s++going\s++to|am\s++going"
    r"\s++to|first)\s++\w|'ll\s|start|begin|first\b)|we'll\s|i'll\s|let(?:'s|\s++us|\s++me)\s|(?:to|in\s++order\s++to)\s++"
    r"(?:find|solve|determine|compute|calculate|evaluate|get|answer|figure)\b|first(?:ly)?,\s)")
_FILLER = re.compile(r"(?i)^(?:also|just|simply|now|then|therefore|thus|so|hence|exactly|clearly|actually|indeed|"
                     r"definitely|certainly|surely|obviously|still)\b,?\s+(?=\S)")


def until_sentence_end(text: str) -> tuple[str, bool]:
    """Text up to the end of its sentence (read up to :data:`ANSWER_SPAN_CHARS`), and whether that end is a
    question mark; ``$...$`` spans are kept whole (they may hold periods)."""
    text = text[:ANSWER_SPAN_CHARS]
    pos, in_math = 0, False
    while m := _SENTENCE_END.search(text, pos):
        # an escaped \$ is a currency sign, not a delimiter
        in_math ^= len(_DOLLAR.findall(text, pos, m.start())) % 2 == 1
        if not in_math:
            return text[:m.start()], m.group() == "?"
        close = _DOLLAR.search(text, m.start())  # the end of this math span: the next sentence end is after it
        if close is None:
            return text, False
        pos, in_math = close.end(), False
    return text, False


def _display_block(text: str) -> str | None:
    """The content of the display block ``text`` starts with (``\\[ ... \\]`` or ``$$ ... $$``, read up to
    :data:`ANSWER_SPAN_CHARS`); None when the block never closes (truncated)."""
    text = text[:ANSWER_SPAN_CHARS]
    for open_, close in (("\\[", "\\]"), ("$$", "$$")):
        if text.startswith(open_):
            end = text.find(close, len(open_))
            return text[len(open_):end].strip() if end >= 0 else None
    return None


def _cleaned(answer: str) -> tuple[str | None, bool]:
    """The answer trimmed (surrounding space, trailing punctuation, up to three leading filler words: "also 6",
    "indeed just 6" are 6), and whether a filler word was dropped."""
    answer = answer.strip()
    trimmed = answer
    for _ in range(3):
        trimmed = _FILLER.sub("", trimmed, count=1)
    return trimmed.rstrip(".,;:!").strip() or None, trimmed != answer


def clean_answer(answer: str) -> str | None:
    return _cleaned(answer)[0]


def conditional_before(text: str, pos: int) -> bool:
    """Whether position ``pos`` stands inside a conditional clause of its sentence: a conditional word ("if",
    "whether", "suppose", ...) before it in the sentence (up to :data:`_LOOK_BACK_CHARS` back) with no clause
    break (a comma, a colon, "then") in between. "If we add them, the answer is 12" is a statement."""
    lo = max(0, pos - _LOOK_BACK_CHARS)
    start = max(text.rfind(c, lo, pos) for c in ".?!\n") + 1 or lo
    last = None
    for last in CONDITIONAL.finditer(text, max(start, lo), pos):  # noqa: B007 - the last one is wanted
        pass
    return last is not None and _CLAUSE_BREAK.search(text, last.end(), pos) is None


def states_no_value(span: str, question: bool, *, modal: bool = False) -> bool:
    """A span after an answer phrase that states no answer: a question, a value under a condition ("20 if we
    count twice"), the opening of a worked solution (:data:`PLAN_OPENER`: "We start by ...", "Let's ..."), or after
    "should be" / "must be" a plan or a property ("an integer", "in dollars"; after "is" such prose is left to the
    grader's ``prose`` policy, as before)."""
    # a span past the answer cap (verify.max_answer_chars, 200 by default) is no answer anyway: its head is enough
    if question or CONDITIONAL.search(span, 0, 256):
        return True
    if PLAN_OPENER.match(span):  # "Answer: We start by solving ...": a solution begins, no value is stated
        return True
    words = span.split(None, 2)
    return modal and len(words) >= 2 and words[0].lower().strip(",") in PLAN_WORDS


def read_box(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (brace-matched), trimmed; an unclosed one (truncated text) is none."""
    try:
        found = last_boxed(text)
    except GoldError:
        return None
    return clean_answer(found) if found is not None else None


def repeated_box(text: str) -> str | None:
    """When the last ``\\boxed{`` never closes or is empty: the content of the last non-empty closed box, if the one
    before that states the same (a loop restating its final box until the token limit cut it); else None."""
    try:
        if last_boxed(text):
            return None  # the last box closes on an answer (or there is none): not this case
    except GoldError:
        pass
    boxes = _all_boxed(text)
    if len(boxes) >= 2 and boxes[-1] == boxes[-2]:
        return clean_answer(boxes[-1])
    return None


HEDGED = ("hedged_phrase",)
DOUBTED = ("doubted_answer",)
Read = tuple[str | None, tuple[str, ...]]  # an answer phrase's answer (None: it states none) and the policies used

# What a model writes when it doubts or retracts what it just stated: "wait", "let me verify", "I'm not sure",
# "but that can't be right", "hmm". A bare "but" or "let's check the units" elsewhere is working, not doubt; these
# are the forms that put the stated answer in question.
DOUBT = re.compile(
    r"(?i)\b(?:wait\b|hold on\b|hmm+\b|(?:but|let me|let's|let us|I should|I need to|we should)\s++"
    r"(?:re-?)?(?:check|verify|double[- ]check|reconsider|re-?examine|re-?evaluate|recheck|recompute|recalculate|"
    r"confirm|make sure|think again|look again)\b|(?:i'?m|i am|we're|we are)\s++not\s++(?:sure|certain|confident)\b|"
    r"(?:that|this)\s++(?:can(?:'|no)t|could(?:n'| no)t|doesn'?t|does not|isn'?t|is not)\s++(?:be\s++)?"
    r"(?:right|correct|possible|make sense|seem right)\b|(?:i|we)\s++(?:made|make)\s++(?:a|an)\s++"
    r"(?:mistake|error)\b|actually,?\s++no\b|on second thought\b)")
# A later sentence that takes the doubted value back up: it names the value and says it holds.
AFFIRM = re.compile(r"(?i)\b(?:correct|right|confirm(?:s|ed)?|checks? out|verified|consistent|indeed|holds|"
                    r"matches|yes|so|therefore|thus|hence|the answer)\b")
_DOUBT_WINDOW = 8_192  # how far after an answer phrase doubt is looked for


def doubted(completion: str, end: int, answer: str) -> bool:
    """Whether the answer stated up to ``end`` is then doubted or retracted ("Wait, let me verify ...", "I'm not
    sure") and never reaffirmed: no later sentence names the same value with a word that says it holds ("so 24 is
    correct", "yes, 24"). Precision first: such an answer is a guess, not a final answer."""
    tail = completion[end:end + _DOUBT_WINDOW]
    last = None
    for last in DOUBT.finditer(tail):  # noqa: B007 - the last doubt is the one that must be answered
        pass
    if last is None:
        return False
    value = re.compile(rf"(?<![\w.]){re.escape(answer)}(?![\w]|\.\d)")
    sentences = re.split(r"(?<=[.!?\n])", tail[last.end():])
    return not any(value.search(s) and AFFIRM.search(s) for s in sentences)


def _read_phrase(completion: str, m: re.Match, *, doubt: bool = True) -> Read | None:
    """What the answer phrase ``m`` states; None when ``m`` is no answer phrase ("the result is" without "final")."""
    noun = m.group("noun").lower()
    if noun == "result" and not m.group("final"):
        return None
    used = (("final_result",) if noun == "result" else ()) + (("modal_answer",) if m.group("modal") else ())
    if conditional_before(completion, m.start()):
        return None, HEDGED
    rest = completion[m.end():m.end() + ANSWER_SPAN_CHARS]
    if rest.startswith(("\\boxed", "\\fbox")):  # "the answer is \boxed{8}." (None when the box never closes)
        return read_box(rest), used
    if rest.startswith(("\\[", "$$")):  # "the final result is:\n\[ \frac{1}{8} \]" (None when it never closes)
        block = _display_block(rest)
        if block is not None and "\\boxed" in block:
            block = read_box(block)
        return (clean_answer(block) if block else None), (*used, "display_block")
    span, question = until_sentence_end(rest)
    if states_no_value(span, question, modal=bool(m.group("modal"))):
        return None, HEDGED
    answer, filler = _cleaned(span)
    if doubt and answer is not None and not m.group("final") and doubted(completion, m.end() + len(span), answer):
        return None, DOUBTED  # "final answer" is an explicit marker: doubt after it is the model's, not a retraction
    return answer, (*used, "filler_words") if filler else used


MAX_PHRASES = 16  # answer phrases read back from the last one before giving up (each is read up to 2 KB)


def answer_phrases(completion: str, *, last: int | None = None, doubt: bool = True) -> list[tuple[re.Match, Read]]:
    """The answer phrases in text order (the ``last`` ones only, when given), with what each states (a question, a
    condition or a plan states none; with ``doubt``, nor one the model then doubts and never reaffirms)."""
    found = []
    for m in deque(_ANSWER_IS.finditer(completion), maxlen=last):
        read = _read_phrase(completion, m, doubt=doubt)
        if read is not None:
            found.append((m, read))
    return found


_IS_FINAL = re.compile(r"(?i)[\s$*]*+(?:is|was)\s++(?:the|my|our)\s++final\s++answer\b")
MARKED_EXTRACTORS = frozenset(("boxed", "gsm8k"))  # a \boxed{} or a "####" line is marked final by itself


def marked_final(found: Extraction, completion: str) -> bool:
    """Whether an extraction comes from an explicit final marker: a box, a ``####`` line, or an answer phrase that
    says "final" ("Final answer: 7", "the final answer is 7"). A completion cut at the token limit answers only
    this way: what it stated along the way may be a step it was still checking."""
    if found.extractor in MARKED_EXTRACTORS or _BOX_OPEN.search(found.answer):
        return True  # a box, or a phrase whose answer is a box ("the answer is \\boxed{1}")
    if found.extractor == "is_the_answer":  # "24 is the final answer"
        at = completion.rfind(found.answer)
        return at >= 0 and _IS_FINAL.match(completion, at + len(found.answer)) is not None
    if found.extractor != "answer_is":
        return False
    for m, (answer, _) in reversed(answer_phrases(completion, last=MAX_PHRASES)):
        if answer is not None:  # the phrase answer_is read
            return m.group("final") is not None
    return False


def strip_emphasis(text: str) -> str:
    """Markdown bold/underline markers removed: ``So the final answer is **47**.`` reads as ``... is 47.``"""
    return _EMPHASIS.sub("", text) if "**" in text or "__" in text else text


BOX_BEFORE_TAIL = ("box_before_tail",)


def extract(completion: str, *, extractors: Sequence[str]) -> Extraction | None:
    """The first configured extractor that finds an answer wins (markdown emphasis removed first), in the
    completion's last :data:`SEARCH_CHARS` characters. When none does there and the completion is longer, its last
    closed box anywhere (``box_before_tail``): a model that boxed its answer and then repeated tags or phrases until
    the token limit pushed the box out of the window."""
    found = _extract(strip_emphasis(completion[-SEARCH_CHARS:]), extractors)
    if found is None and len(completion) > SEARCH_CHARS and "boxed" in extractors:
        boxes = _all_boxed(completion)
        if boxes and (answer := clean_answer(boxes[-1])) is not None:
            return Extraction(answer, "boxed", BOX_BEFORE_TAIL)
    return found


def _extract(completion: str, extractors: Sequence[str]) -> Extraction | None:
    for name in extractors:
        found = get_extractor(name).found(completion)  # the first read scans the rules' folder
        if found is not None:
            return Extraction(found[0], name, found[1])
    return None


def refused(completion: str, *, extractors: Sequence[str]) -> tuple[str, ...]:
    """The policies behind finding no answer: ``doubted_answer`` when the last answer phrase was doubted and never
    reaffirmed, ``hedged_phrase`` when one the configured extractors read was passed over as a question, a condition
    or a plan (the caller asks only when ``extract`` found none)."""
    completion = strip_emphasis(completion[-SEARCH_CHARS:])
    for name in extractors:
        why = get_extractor(name).passed_over(completion)
        if why:
            return why if isinstance(why, tuple) else HEDGED
    return ()


_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*+\{")
_BRACE = re.compile(r"\\.|[{}]", re.S)


def _all_boxed(text: str) -> list[str]:
    """Contents of every closed ``\\boxed{...}``, brace-matched, in text order: one pass with a stack of open
    braces (linear, also on ``\\boxed{`` repeated without end)."""
    opens = {m.end(): m for m in _BOX_OPEN.finditer(text)}  # position after the box's "{" -> its match
    found: list[tuple[int, str]] = []
    stack: list[int] = []
    for m in _BRACE.finditer(text):
        c = m.group()
        if c == "{":
            stack.append(m.end())
        elif c == "}" and stack:
            start = stack.pop()
            if start in opens and (b := text[start:m.start()].strip()):
                found.append((start, b))
    return [b for _, b in sorted(found)]


def candidates(completion: str) -> list[Extraction]:
    """Every final answer the rules see, in text order of rule (boxed, gsm8k markers, answer-is phrases), in the
    completion's last :data:`SEARCH_CHARS` characters."""
    completion = strip_emphasis(completion[-SEARCH_CHARS:])
    found = [Extraction(b, "boxed") for b in _all_boxed(completion)]
    for part in completion.split("####")[1:]:
        if a := clean_answer(part.lstrip(" \t").split("\n", 1)[0]):
            found.append(Extraction(a, "gsm8k"))
    for m, (answer, _) in answer_phrases(completion, doubt=False):  # a doubted answer was still stated
        if answer is not None and m.group("noun").lower() != "result" and not completion[m.end():].startswith(
                ("\\boxed", "\\fbox")):  # a box is already counted; "final result" is no answer marker of the flags
            found.append(Extraction(answer, "answer_is"))
    return found
