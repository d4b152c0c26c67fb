"""An OpenAI-compatible server that replays reasoning-model completions at a chosen rate: a `vllm serve` stand-in.

    .venv/bin/python benchmarks/replay_server.py --golds golds.jsonl --model replay --concurrency 256 \\
        --token-rate 2000 --latency-ms 50          # prints "replay: listening on http://127.0.0.1:PORT/v1"

It speaks what vLLM's server speaks and passband's ``openai`` engine sends: ``GET /v1/models``,
``POST /v1/completions`` and ``/v1/chat/completions`` with ``n``, ``seed``, ``stop``, ``max_tokens``
(a completion longer than that is cut and answers ``finish_reason: "length"``), ``temperature``/``top_p``
(accepted, unused) and ``usage``; ``GET /stats`` gives its counters. ``stream: true`` is refused with a 400
(the engine never streams).
It binds to 127.0.0.1 only and stops by itself: after ``--idle-timeout`` seconds without a request, and
when the process that started it dies.

**The corpus** is built, never downloaded: each completion is drawn from (gold, seed) by a seeded RNG, so
a request with the same prompt and seed always gets the same text (a resumed run sees what a straight run
saw). Its shape is a reasoning model's (the kinds of tests/support/make_thinking_cases.py, at length):

- lengths log-normal, median ~1,500 tokens (``--median-tokens``) with a long tail (sigma 1.0: ~5 % past
  8k tokens), cut at ``max_tokens``: a cut completion is an unfinished ``<think>`` block;
- ``<think>`` closed then a boxed answer, closed then the answer in a sentence ("The answer is 18."),
  closed then prose without a marker ("So Mia has 18 pens left."), no thinking block at all, and
  repetition loops (one paragraph over and over until ``max_tokens``);
- right or wrong answers: each problem has its own pass rate (a hash of its question), so the verdicts
  spread over every band.

A token is counted as 4 characters of text. The gold of a prompt comes from ``--golds`` (JSONL of
``{"question", "gold"}``): the question is found as a run of whole lines of the prompt (the last user
message of a chat); an unknown question gets a made-up answer (graded incorrect).

**Timing**: each request waits ``latency_ms`` (time to first token) plus its tokens at ``token_rate``
tokens/s (one sequence's decode rate), with at most ``concurrency`` requests generating at once (vLLM's
``max_num_seqs``); the rest queue. The node's rate is about concurrency x token_rate tokens/s. Latency 0
and rate 0 answer at once (the server's own cost only).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import random
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

CHARS_PER_TOKEN = 4

# --- the corpus -----------------------------------------------------------------------------------

NAMES = ["Mia", "Tom", "Ana", "Leo", "Zoe", "Sam", "Ivy", "Ben"]
THINGS = ["apples", "pens", "books", "marbles", "coins", "eggs", "cards", "shells"]
STEPS = [
    "First, {n} has {a} {t}. Adding {b} more gives {a} + {b} = {s}.",
    "Let me double-check: {s} - {b} = {a}, which matches what we started with.",
    "Hmm, wait. Maybe I misread the problem. Let me read it again carefully.",
    "If each of the {a} groups holds {b} {t}, that is {a} * {b} = {p} {t} in total.",
    "So far we have {s}. Now we need to account for the {b} that were given away.",
    "Alternatively, I could set up an equation: let x be the number of {t}. Then x - {b} = {a}, so x = {s}.",
    "That seems too simple. Let me verify by plugging the value back in: {a} + {b} = {s}. Yes, that works.",
    "Actually, hold on. The question asks for the total, not the difference, so I should use {s}.",
    "Breaking it down: {a} tens and {b} ones, so {a}0 + {b} = {q}.",
    "Let's consider the ratio {a}/{b}. Simplifying, it does not reduce further since gcd({a}, {b}) = 1.",
    "Okay, so the intermediate result is {p}. Dividing by {b} gives back {a}, consistent.",
    "Wait, I think I made an arithmetic slip earlier. Recomputing: {a} + {b} is {s}, not {w}.",
]
INTROS = ["Okay, let me try to figure this out.", "Alright, so I need to solve this problem step by step.",
          "Let me start by reading the problem carefully.", "Hmm, let's see what the question is asking."]
SENTENCE_ENDINGS = ["The answer is {a}.", "Final answer: {a}", "Therefore, the final answer is {a}."]
PROSE_ENDINGS = ["So {n} ends up with {a} {t} in total.", "That leaves exactly {a} {t}."]
# kind -> weight; the rest of the shape (length, right or wrong) is drawn per completion
KINDS = {"closed_boxed": 0.50, "closed_sentence": 0.12, "closed_prose": 0.06, "no_thinking_boxed": 0.20,
         "repetition_loop": 0.04, "closed_flipflop": 0.08}


def _paragraph(r: random.Random) -> str:
    a, b = r.randint(2, 99), r.randint(2, 99)
    vals = {"a": a, "b": b, "s": a + b, "p": a * b, "q": 10 * a + b, "w": a + b + r.randint(1, 9),
            "n": r.choice(NAMES), "t": r.choice(THINGS)}
    return " ".join(r.choice(STEPS).format(**vals) for _ in range(r.randint(2, 5)))


def _filler(r: random.Random, chars: int) -> str:
    """About ``chars`` characters of reasoning paragraphs."""
    parts, n = [], 0
    while n < chars:
        p = _paragraph(r)
        parts.append(p)
        n += len(p) + 2
    return "\n\n".join(parts)[:max(chars, 0)]


def _wrong(gold: str, r: random.Random) -> str:
    try:
        return str(int(gold) + r.randint(1, 9))
    except ValueError:
        return str(r.randint(2, 999))


def pass_rate_of(question_key: str) -> float:
    """A problem's own pass rate: a quarter never solved, a quarter always, the rest spread (every band)."""
    u = int(hashlib.sha256(question_key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return 0.0 if u < 0.25 else 1.0 if u > 0.75 else (u - 0.25) * 2


def completion(gold: str, *, seed: int, key: str, median_tokens: int, sigma: float = 1.0) -> tuple[str, int, bool]:
    """One completion for a problem with ``gold``: (text, tokens it would have, whether it loops).

    ``key`` (the question) fixes the problem's pass rate; ``seed`` the sample. The text is not yet cut at
    ``max_tokens``: :func:`answer` does that."""
    r = random.Random(f"{key}\0{seed}")
    kind = r.choices(list(KINDS), weights=list(KINDS.values()))[0]
    right = r.random() < pass_rate_of(key)
    ans = gold if right else _wrong(gold, r)
    tokens = max(40, int(median_tokens * math.exp(r.gauss(0.0, sigma))))
    vals = {"a": ans, "n": r.choice(NAMES), "t": r.choice(THINGS)}
    intro = r.choice(INTROS)
    if kind == "repetition_loop":
        para = _paragraph(r)
        reps = tokens * CHARS_PER_TOKEN // (len(para) + 2) + 1
        return f"<think>\n{intro}\n\n" + "\n\n".join([para] * reps), tokens * 4, True  # loops until cut
    body = _filler(r, tokens * CHARS_PER_TOKEN - 200)
    if kind == "no_thinking_boxed":
        text = f"{intro}\n\n{body}\n\nThe answer is $\\boxed{{{ans}}}$."
    else:
        if kind == "closed_flipflop":
            body += f"\n\nSo the answer is {_wrong(gold, r)}. Wait, no. Actually it should be {ans}."
        head = f"<think>\n{intro}\n\n{body}\n</think>\n\n"
        if kind == "closed_boxed":
            tail = f"Putting it together step by step, we get {ans}.\n\n**Final Answer**\n\\boxed{{{ans}}}"
        elif kind == "closed_sentence":
            tail = r.choice(SENTENCE_ENDINGS).format(**vals)
        elif kind == "closed_flipflop":
            tail = f"\\boxed{{{ans}}}"
        else:
            tail = r.choice(PROSE_ENDINGS).format(**vals)
        text = head + tail
    return text, max(1, len(text) // CHARS_PER_TOKEN), False


def answer(text: str, n_tokens: int, *, max_tokens: int | None, stop: list[str]) -> tuple[str, int, str]:
    """``text`` as a server returns it: cut at the first stop string ("stop") or at max_tokens ("length")."""
    cut = len(text)
    for s in stop:
        if s and (i := text.find(s)) != -1:
            cut = min(cut, i)
    if cut < len(text):
        text = text[:cut]
        return text, max(1, len(text) // CHARS_PER_TOKEN), "stop"
    if max_tokens is not None and n_tokens > max_tokens:
        text = text[:max_tokens * CHARS_PER_TOKEN]
        return text, max_tokens, "length"
    return text, n_tokens, "stop"


# --- the server -----------------------------------------------------------------------------------


@dataclass
class Config:
    model: str = "replay"
    golds: Mapping[str, str] = field(default_factory=dict)  # question -> gold
    median_tokens: int = 1500
    latency_ms: float = 0.0
    token_rate: float = 0.0  # tokens/s of one sequence; 0: no decode time
    concurrency: int = 256
    idle_timeout_s: float = 600.0
    parent_pid: int | None = None  # stop when this process is gone


class Replay:
    """The aiohttp application and its counters (requests, completions, the most generating at once)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.requests = self.completions = self.tokens = self.active = self.max_active = 0
        self.last = time.monotonic()
        self.sem = asyncio.Semaphore(config.concurrency)
        self.app = web.Application(client_max_size=64 << 20)
        self.app.add_routes([web.get("/v1/models", self.models), web.get("/health", self.health),
                             web.get("/stats", self.stats),
                             web.post("/v1/completions", self.complete), web.post("/v1/chat/completions", self.complete)])

    def gold_of(self, text: str) -> tuple[str, str]:
        """(the question's key, its gold): the first run of whole prompt lines that is a known question."""
        lines = text.split("\n")
        for i in range(len(lines)):
            for j in range(len(lines), i, -1):
                q = "\n".join(lines[i:j])
                if q in self.config.golds:
                    return q, self.config.golds[q]
        return text, str(int(hashlib.sha256(text.encode()).hexdigest()[:6], 16) % 1000)

    async def models(self, request: web.Request) -> web.Response:
        self.last = time.monotonic()
        return web.json_response({"object": "list", "data": [{"id": self.config.model, "object": "model",
                                                              "owned_by": "replay"}]})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": self.requests, "completions": self.completions, "tokens": self.tokens,
                                  "max_active": self.max_active})

    async def complete(self, request: web.Request) -> web.Response:
        self.last = time.monotonic()
        self.requests += 1
        chat = request.path.endswith("/chat/completions")
        try:
            body = await request.json()
            if body.get("stream"):
                return _error(400, "stream: true is not supported by the replay server")
            if body.get("model") != self.config.model:
                return _error(404, f"The model `{body.get('model')}` does not exist.")
            if chat:
                msgs = body["messages"]
                prompt = next((m["content"] for m in reversed(msgs) if m.get("role") == "user"), "")
                prompt_chars = sum(len(m.get("content") or "") for m in msgs)
            else:
                prompt = body["prompt"]
                prompt_chars = len(prompt)
            n = int(body.get("n") or 1)
            seed = body.get("seed")
            max_tokens = body.get("max_tokens")
            stop = body.get("stop") or []
            stop = [stop] if isinstance(stop, str) else list(stop)
        except (KeyError, TypeError, ValueError) as exc:
            return _error(400, f"bad request: {exc!r}")
        key, gold = self.gold_of(prompt)
        base = seed if seed is not None else random.getrandbits(32)
        choices, total, longest = [], 0, 0
        for i in range(n):
            text, n_tok, _ = completion(gold, seed=base if n == 1 else hash((base, i)), key=key,
                                        median_tokens=self.config.median_tokens)
            text, n_tok, finish = answer(text, n_tok, max_tokens=max_tokens, stop=stop)
            total += n_tok
            longest = max(longest, n_tok)
            choice = {"index": i, "finish_reason": finish, "logprobs": None}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            choices.append(choice)
        async with self.sem:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            try:
                cfg = self.config
                # the n sequences decode together: the longest decides
                delay = cfg.latency_ms / 1000 + (longest / cfg.token_rate if cfg.token_rate > 0 else 0.0)
                if delay > 0:
                    await asyncio.sleep(delay)
            finally:
                self.active -= 1
        self.completions += n
        self.tokens += total
        self.last = time.monotonic()
        usage = {"prompt_tokens": prompt_chars // CHARS_PER_TOKEN, "completion_tokens": total,
                 "total_tokens": prompt_chars // CHARS_PER_TOKEN + total}
        return web.json_response({"id": f"cmpl-{self.requests}", "object": "chat.completion" if chat else "text_completion",
                                  "created": int(time.time()), "model": self.config.model, "choices": choices,
                                  "usage": usage})

    async def watchdog(self, stop: asyncio.Event) -> None:
        """Stop when idle for ``idle_timeout_s`` or when the parent process is gone."""
        cfg = self.config
        while not stop.is_set():
            await asyncio.sleep(0.5)
            if time.monotonic() - self.last > cfg.idle_timeout_s:
                print(f"replay: idle for {cfg.idle_timeout_s:.0f}s, stopping", file=sys.stderr, flush=True)
                stop.set()
            elif cfg.parent_pid is not None and not _alive(cfg.parent_pid):
                print("replay: parent process gone, stopping", file=sys.stderr, flush=True)
                stop.set()


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"object": "error", "message": message, "type": "BadRequestError", "code": status},
                             status=status)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return os.getppid() == pid  # re-parented: the parent died and its pid may be another process's now


async def serve(config: Config, *, port: int = 0, ready=None, stop: asyncio.Event | None = None) -> Replay:
    """Run until ``stop`` is set (or the watchdog sets it); ``ready(url, replay)`` once listening."""
    replay = Replay(config)
    runner = web.AppRunner(replay.app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)  # loopback only
    await site.start()
    actual = runner.addresses[0][1]
    stop = stop or asyncio.Event()
    dog = asyncio.create_task(replay.watchdog(stop))
    try:
        if ready is not None:
            ready(f"http://127.0.0.1:{actual}/v1", replay)
        await stop.wait()
    finally:
        dog.cancel()
        await runner.cleanup()
    return replay


class ReplayServer:
    """The server on a thread of this process (tests)::

        with ReplayServer(Config(golds={"What is 2 + 2?": "4"})) as srv:
            ...  # srv.url, srv.replay.completions
    """

    def __init__(self, config: Config, *, port: int = 0) -> None:
        self.config, self.port = config, port
        self.url: str | None = None
        self.replay: Replay | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replay-server", daemon=True)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._stop = asyncio.Event()

        def ready(url: str, replay: Replay) -> None:
            self.url, self.replay = url, replay
            self._ready.set()

        try:
            loop.run_until_complete(serve(self.config, port=self.port, ready=ready, stop=self._stop))
        finally:
            loop.close()
            self._ready.set()

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        self._ready.wait(30)
        if self.url is None:
            raise RuntimeError("replay server did not start")
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


def load_golds(path: Path) -> dict[str, str]:
    golds = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            golds[row["question"]] = str(row["gold"])
    return golds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--golds", type=Path, default=None, help="JSONL of {question, gold}")
    p.add_argument("--model", default="replay", help="the served model name")
    p.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    p.add_argument("--median-tokens", type=int, default=1500)
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--token-rate", type=float, default=0.0, help="tokens/s of one sequence (0: no decode time)")
    p.add_argument("--concurrency", type=int, default=256, help="requests generating at once; the rest queue")
    p.add_argument("--idle-timeout", type=float, default=600.0)
    p.add_argument("--parent-pid", type=int, default=os.getppid(), help="stop when this process is gone")
    args = p.parse_args(argv)
    config = Config(model=args.model, golds=load_golds(args.golds) if args.golds else {},
                    median_tokens=args.median_tokens, latency_ms=args.latency_ms, token_rate=args.token_rate,
                    concurrency=args.concurrency, idle_timeout_s=args.idle_timeout, parent_pid=args.parent_pid)

    def ready(url: str, replay: Replay) -> None:
        print(f"replay: listening on {url}", flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        replay = asyncio.run(serve(config, port=args.port, ready=ready))
        print(f"replay: {replay.requests} requests, {replay.completions} completions, "
              f"at most {replay.max_active} generating at once", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
