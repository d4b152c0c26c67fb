"""A deterministic engine for tests: no model, instant start, text a pure function of the seed.

For the last ``What is a <op> b?`` in the prompt (or a backward child's shown step,
``reads: "a <op> b = x."``) it answers in the few-shot style, right or wrong depending on the
seed (about ``correct_rate`` of the samples are right)::

    " 3 + 5 = 8. The answer is 8."      # or " 3 + 5 = 9. The answer is 9."

Other questions get ``" The answer is <n>."`` with ``n`` from the seed. ``max_tokens`` cuts the
text (word count stands in for tokens; ``finish_reason`` becomes ``length``). Options:
``delay_s`` (sleep per sample, for crash tests), ``log_path`` (append one line per generated
sample, so a test in another process can see exactly what was generated), ``fail_after``
(raise after that many samples), ``max_prompt_chars`` (a longer prompt cannot be taken, as past a
model's context length). ``calls`` records every request in this process.
"""

from __future__ import annotations

import hashlib
import operator
import re
import time
from collections.abc import Iterator, Sequence

from pydantic import Field

from pipeline.config import Model
from pipeline.engines import ENGINES, Engine, EngineError, Prompt, Request, Sample

_QUESTION = re.compile(r"What is (\d+) ([-+*]) (\d+)\?|reads: \"(\d+) ([-+*]) (\d+) = x\.\"")
_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


class FakeOptions(Model):
    delay_s: float = Field(0.0, ge=0)
    correct_rate: float = Field(0.5, ge=0, le=1)
    log_path: str | None = None
    fail_after: int | None = Field(None, ge=0)
    max_prompt_chars: int | None = Field(None, gt=0, description="a longer prompt cannot be taken (stands in for "
                                                                 "a model's context length)")


def prompt_text(prompt: Prompt) -> str:
    if prompt.text is not None:
        return prompt.text
    return "\n".join(f"{m['role']}: {m['content']}" for m in prompt.messages or ())


def fake_completion(prompt: Prompt, seed: int, *, temperature: float, correct_rate: float = 0.5) -> str:
    """The fake engine's text for one sample (depends on the prompt, the seed and temperature only)."""
    text = prompt_text(prompt)
    h = int.from_bytes(hashlib.sha256(f"{text}|{seed}|{temperature}".encode()).digest()[:8], "big")
    found = _QUESTION.findall(text)
    if not found:
        return f" The answer is {h % 100}."
    last = found[-1]
    a, op, b = last[:3] if last[0] else last[3:]
    value = _OPS[op](int(a), int(b))
    if (h % 1000) / 1000 >= correct_rate:
        value += 1 + (h >> 10) % 9
    return f" {a} {op} {b} = {value}. The answer is {value}."


@ENGINES.register
class FakeEngine(Engine):
    name = "fake"
    Options = FakeOptions

    def __post_init__(self) -> None:
        super().__post_init__()
        self.calls: list[list[tuple[str, int]]] = []  # per stream() call: (request_id, seed) of every sample
        self.generated = 0

    def prompt_problem(self, request: Request) -> str | None:
        limit = self.options.max_prompt_chars
        n = len(prompt_text(request.prompt))
        return f"prompt has {n} characters; the engine's max_prompt_chars is {limit}" if limit and n > limit else None

    def _stream(self, requests: Sequence[Request]) -> Iterator[Sample]:
        opts: FakeOptions = self.options
        call: list[tuple[str, int]] = []
        self.calls.append(call)
        log = open(self.root / opts.log_path, "a", encoding="utf-8") if opts.log_path else None  # noqa: SIM115
        try:
            for req in requests:
                for i, seed in enumerate(req.seeds):
                    if opts.fail_after is not None and self.generated >= opts.fail_after:
                        raise EngineError(f"fake engine: failing as asked after {opts.fail_after} samples (request {req.id})")
                    if opts.delay_s:
                        time.sleep(opts.delay_s)
                    full = fake_completion(req.prompt, seed, temperature=req.sampling.temperature,
                                           correct_rate=opts.correct_rate)
                    words = full.split(" ")[1:]
                    limit = req.sampling.max_tokens
                    finish = "length" if len(words) > limit else "stop"
                    text = " " + " ".join(words[:limit])
                    call.append((req.id, seed))
                    self.generated += 1
                    if log:
                        log.write(f"{req.id}\t{i}\t{seed}\n")
                        log.flush()
                    yield Sample(req.id, i, seed, text, min(len(words), limit), finish)
        finally:
            if log:
                log.close()
