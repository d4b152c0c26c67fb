"""Any OpenAI-compatible server (``vllm serve``, SGLang, TGI, a hosted API) over HTTP.

Raw-text prompts go to ``/v1/completions``, chat prompts to ``/v1/chat/completions``. Each
sample is one HTTP request with ``n=1`` and its own ``seed`` (a server's ``n`` derives the
samples' seeds from one seed and their position), sent by ``concurrency`` async workers
with a per-request timeout and retries with exponential back-off and jitter on connection
errors, timeouts, 429 and 5xx. Any other error stops the run with the request named.

    rollout:
      engine_options:
        openai: {base_url: "http://127.0.0.1:8000/v1", concurrency: 32}

``base_url`` may be a list (a fleet of ``vllm serve`` replicas, no Ray needed): each sample goes
to the healthy server with the fewest requests in flight. A server that fails a request
(connection error, timeout, 429, 5xx) is set aside for ``server_cooldown_s`` and the retry goes to
another one; a server that never answers at start is left out while ``min_servers`` remain::

    openai: {base_url: ["http://gpu1:8000/v1", "http://gpu2:8000/v1"], concurrency: 64}

``top_k`` is sent only when set (!= -1); it is a vLLM/SGLang extension. The API key is read
from the environment variable ``api_key_env`` (servers on loopback usually need none).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from pipeline.config import Model
from pipeline.engines import ENGINES, Engine, EngineError, Request, Sample

if TYPE_CHECKING:  # the HTTP clients are imported where a request is made: the folder scan that finds the engines stays cheap
    import aiohttp

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_FINISH = {"stop": "stop", "length": "length", "eos": "stop"}


class OpenAIOptions(Model):
    base_url: str | list[str] = Field("http://127.0.0.1:8000/v1", description="server URL up to and including "
                                                                            "/v1, or a list of them")
    min_servers: int | None = Field(None, gt=0, description="with several base URLs: start with this many up "
                                                            "(None: all of them)")
    server_cooldown_s: float = Field(5.0, ge=0, description="with several base URLs: a server that failed a "
                                                            "request gets none for this long")
    served_model: str | None = Field(None, description="the server's model name (default: the policy's model)")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key, if any")
    concurrency: int = Field(32, gt=0, description="requests in flight at once")
    timeout_s: float = Field(600.0, gt=0, description="per HTTP request")
    max_retries: int = Field(5, ge=0)
    backoff_s: float = Field(1.0, gt=0, description="first back-off; doubles each retry, with jitter")
    max_backoff_s: float = Field(30.0, gt=0)
    startup_timeout_s: float = Field(60.0, ge=0, description="wait this long for the server at start")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="added to every request body")


class _Retryable(Exception):
    pass


class _Down(EngineError):
    pass


@dataclass
class _Server:
    url: str
    inflight: int = 0
    posts: int = 0
    failures: int = 0
    down_until: float = 0.0


@ENGINES.register
class OpenAIEngine(Engine):
    name = "openai"
    Options = OpenAIOptions

    @property
    def urls(self) -> list[str]:
        urls = [self.options.base_url] if isinstance(self.options.base_url, str) else list(self.options.base_url)
        if not urls or len(set(urls)) != len(urls):
            raise EngineError(f"engine_options.openai.base_url: one URL or a list of distinct URLs, got {urls!r}")
        return [u.rstrip("/") for u in urls]

    @property
    def served_model(self) -> str:
        return self.options.served_model or self.model.path

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.options.api_key_env)
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _start(self) -> None:
        """Wait for every server's ``GET /models`` to answer and check that it serves our model."""
        opts: OpenAIOptions = self.options
        urls = self.urls
        need = len(urls) if opts.min_servers is None else opts.min_servers
        if need > len(urls):
            raise EngineError(f"openai: min_servers is {need} but base_url lists {len(urls)}")
        deadline = time.monotonic() + opts.startup_timeout_s
        up, down = [], []
        for base in urls:
            try:
                self._wait_for(base, deadline)
                up.append(base)
            except _Down as exc:
                down.append(str(exc))
        if len(up) < need:
            raise EngineError(f"openai: {len(up)} of {len(urls)} servers up, {need} needed: " + "; ".join(down))
        self.servers = [_Server(u) for u in up]
        self.servers_down = down

    def _wait_for(self, base: str, deadline: float) -> None:
        import httpx

        opts: OpenAIOptions = self.options
        url = base + "/models"
        last: Exception | str = "no attempt"
        while True:
            try:
                r = httpx.get(url, headers=self._headers(), timeout=10.0)
                if r.status_code == 200:
                    served = [m.get("id") for m in r.json().get("data", [])]
                    if self.served_model not in served:
                        raise EngineError(f"openai: {base} serves {served}, not {self.served_model!r} "
                                          f"(set engine_options.openai.served_model)")
                    return
                last = f"HTTP {r.status_code}: {r.text[:200]}"
            except httpx.HTTPError as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise _Down(f"openai: no server at {url} after {opts.startup_timeout_s:.0f}s ({last})")
            time.sleep(0.5)

    def body(self, request: Request, seed: int) -> tuple[str, dict[str, Any]]:
        """The endpoint and JSON body of one sample."""
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.served_model, "n": 1, "seed": seed, "temperature": s.temperature, "top_p": s.top_p,
            "max_tokens": s.max_tokens,
        }
        if s.stop:
            body["stop"] = list(s.stop)
        if s.top_k != -1:
            body["top_k"] = s.top_k
        body.update(self.options.extra_body)
        if request.prompt.chat:
            return "/chat/completions", {**body, "messages": list(request.prompt.messages)}
        return "/completions", {**body, "prompt": request.prompt.text}

    def _pick(self) -> _Server:
        """The server with the fewest requests in flight among those not cooling down (or among all)."""
        now = time.monotonic()
        healthy = [s for s in self.servers if s.down_until <= now] or self.servers
        return min(healthy, key=lambda s: (s.inflight, s.posts))

    async def _one(self, sessions: dict[str, aiohttp.ClientSession], request: Request, i: int) -> Sample:
        import aiohttp

        opts: OpenAIOptions = self.options
        path, body = self.body(request, request.seeds[i])
        for attempt in range(opts.max_retries + 1):
            server = self._pick()
            server.inflight += 1
            server.posts += 1
            try:
                async with sessions[server.url].post(server.url + path, json=body) as r:
                    if r.status in _RETRY_STATUS:
                        raise _Retryable(f"HTTP {r.status}: {(await r.text(errors='replace'))[:200]}")
                    if r.status != 200:
                        raise EngineError(f"openai: request {request.id} sample {i}: HTTP {r.status}: "
                                          f"{(await r.text(errors='replace'))[:300]}")
                    data = await r.json(content_type=None)
                return self._sample(data, request, i)
            except (aiohttp.ClientError, TimeoutError, _Retryable) as exc:
                server.failures += 1
                server.down_until = time.monotonic() + opts.server_cooldown_s
                if attempt == opts.max_retries:
                    where = f" (last at {server.url})" if len(self.servers) > 1 else ""
                    raise EngineError(f"openai: request {request.id} sample {i} failed after "
                                      f"{opts.max_retries + 1} attempts{where}: {exc!r}") from exc
                if len(self.servers) > 1 and self._pick() is not server:
                    continue  # another server is healthy: retry there at once
                delay = min(opts.max_backoff_s, opts.backoff_s * 2**attempt) * (0.5 + random.random() / 2)
                await asyncio.sleep(delay)
            finally:
                server.inflight -= 1
        raise AssertionError("unreachable")

    def _sample(self, data: dict[str, Any], request: Request, i: int) -> Sample:
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"] if request.prompt.chat else choice["text"]
            finish = _FINISH[choice["finish_reason"]]
            n_tokens = int(data["usage"]["completion_tokens"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise EngineError(f"openai: request {request.id} sample {i}: unexpected response "
                              f"({exc!r}): {str(data)[:300]}") from None
        return Sample(request.id, i, request.seeds[i], text or "", n_tokens, finish)

    async def _produce(self, requests: Sequence[Request], out: queue.Queue, state: dict[str, Any]) -> None:
        import aiohttp

        opts: OpenAIOptions = self.options
        work: asyncio.Queue = asyncio.Queue()
        for req in requests:
            for i in range(req.n):
                work.put_nowait((req, i))
        # aiohttp, not httpx, for the samples: httpx's pool scans every connection for every request, which at 64
        # in flight cost ~8 ms of CPU a request against aiohttp's ~0.9 ms (benchmarks/scale.py, docs/scale.md)
        timeout = aiohttp.ClientTimeout(total=opts.timeout_s, connect=30.0)
        async with contextlib.AsyncExitStack() as stack:
            clients = {s.url: await stack.enter_async_context(aiohttp.ClientSession(
                headers=self._headers(), timeout=timeout, connector=aiohttp.TCPConnector(limit=opts.concurrency)))
                for s in self.servers}

            async def worker() -> None:
                while True:
                    try:
                        req, i = work.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                    out.put(await self._one(clients, req, i))

            tasks = [asyncio.create_task(worker()) for _ in range(min(opts.concurrency, work.qsize()))]
            loop = asyncio.get_running_loop()
            state["cancel"] = lambda: loop.call_soon_threadsafe(_cancel_all, tasks)
            try:
                await asyncio.gather(*tasks)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    def _stream(self, requests: Sequence[Request]) -> Iterator[Sample]:
        out: queue.Queue = queue.Queue()
        state: dict[str, Any] = {}
        done = object()

        def run() -> None:
            try:
                asyncio.run(self._produce(requests, out, state))
            except asyncio.CancelledError:
                pass
            except BaseException as exc:  # handed to the consumer thread
                out.put(exc)
            finally:
                out.put(done)

        thread = threading.Thread(target=run, name="passband-openai", daemon=True)
        thread.start()
        try:
            while (item := out.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if thread.is_alive() and "cancel" in state:  # the consumer stopped early: drop what is in flight
                with contextlib.suppress(RuntimeError):  # the loop may have closed meanwhile
                    state["cancel"]()
            thread.join()


def _cancel_all(tasks: list[asyncio.Task]) -> None:
    for t in tasks:
        t.cancel()
