"""The openai engine against a scripted OpenAI-compatible server on loopback: bodies, retries, limits."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipeline.config import SamplingConfig
from pipeline.engines import EngineError, ModelSpec, Prompt, Request, create_engine

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)


class Server:
    """A tiny OpenAI-compatible server; ``script`` maps the n-th POST (0-based) to a status code."""

    def __init__(self, *, model: str = "m", script: dict[int, int] | None = None, delay_s: float = 0.0):
        self.model, self.script, self.delay_s = model, script or {}, delay_s
        self.bodies: list[tuple[str, dict]] = []
        self.posts = 0
        self.active = self.max_active = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, obj) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (server stopping)
                    self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"data": [{"id": outer.model}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    n = outer.posts
                    outer.posts += 1
                    outer.active += 1
                    outer.max_active = max(outer.max_active, outer.active)
                try:
                    time.sleep(outer.delay_s)
                    code = outer.script.get(n, 200)
                    if code == -1:  # hang past the client's timeout
                        time.sleep(2)
                        code = 200
                    if code != 200:
                        reply = {"error": f"scripted {code}"}
                    else:
                        with outer.lock:
                            outer.bodies.append((self.path, body))
                        text = f" seed={body['seed']}"
                        choice = {"finish_reason": "stop", "index": 0}
                        if self.path.endswith("/chat/completions"):
                            choice["message"] = {"role": "assistant", "content": text}
                        else:
                            choice["text"] = text
                        reply = {"choices": [choice], "usage": {"completion_tokens": 2}}
                finally:
                    # no longer in flight once answered: a client that posts its next request on reading this one
                    # must not find this thread still counted
                    with outer.lock:
                        outer.active -= 1
                self._send(code, reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


SAMPLING = SamplingConfig(temperature=0.7, top_p=0.9, max_tokens=8, stop=["\nQ:"])


def engine(url: str, **options):
    opts = {"base_url": url, "backoff_s": 0.01, "max_backoff_s": 0.05, "startup_timeout_s": 2, **options}
    return create_engine("openai", ModelSpec("m", "m", "r", "float32"), opts)


def test_text_and_chat_requests_one_per_seed():
    reqs = [Request("a", Prompt(text="Q: 1+1?\nA:"), seeds=(11, 12, 13), sampling=SAMPLING),
            Request("b", Prompt(messages=({"role": "user", "content": "hi"},)), seeds=(21,), sampling=SAMPLING)]
    with Server() as srv, engine(srv.url) as eng:
        out = eng.generate(reqs)
    assert [(s.request_id, s.index, s.seed, s.text) for s in out] == [
        ("a", 0, 11, " seed=11"), ("a", 1, 12, " seed=12"), ("a", 2, 13, " seed=13"), ("b", 0, 21, " seed=21")]
    assert all(s.n_tokens == 2 and s.finish_reason == "stop" for s in out)
    paths = sorted(p for p, _ in srv.bodies)
    assert paths == ["/v1/chat/completions"] + ["/v1/completions"] * 3
    body = next(b for p, b in srv.bodies if p == "/v1/completions")
    assert body["n"] == 1 and body["model"] == "m" and body["stop"] == ["\nQ:"] and body["temperature"] == 0.7
    assert "top_k" not in body  # -1 (off) is not sent; it is a vLLM extension
    chat = next(b for p, b in srv.bodies if p.endswith("chat/completions"))
    assert chat["messages"] == [{"role": "user", "content": "hi"}] and "prompt" not in chat


def test_retries_transient_errors_with_backoff():
    reqs = [Request("a", Prompt(text="x"), seeds=(1,), sampling=SAMPLING)]
    with Server(script={0: 503, 1: 429, 2: 500}) as srv, engine(srv.url, max_retries=3) as eng:
        (s,) = eng.generate(reqs)
    assert s.text == " seed=1" and srv.posts == 4


def test_gives_up_after_max_retries_naming_the_request():
    reqs = [Request("prob-7", Prompt(text="x"), seeds=(1,), sampling=SAMPLING)]
    with (Server(script={i: 503 for i in range(10)}) as srv, engine(srv.url, max_retries=2) as eng,
          pytest.raises(EngineError, match=r"request prob-7 sample 0 failed after 3 attempts")):
        eng.generate(reqs)
    assert srv.posts == 3


def test_client_errors_are_not_retried():
    reqs = [Request("a", Prompt(text="x"), seeds=(1,), sampling=SAMPLING)]
    with (Server(script={0: 400}) as srv, engine(srv.url, max_retries=5) as eng,
          pytest.raises(EngineError, match=r"request a sample 0: HTTP 400")):
        eng.generate(reqs)
    assert srv.posts == 1


def test_timeout_is_retried():
    reqs = [Request("a", Prompt(text="x"), seeds=(1,), sampling=SAMPLING)]
    with Server(script={0: -1}) as srv, engine(srv.url, timeout_s=0.5, max_retries=2) as eng:
        (s,) = eng.generate(reqs)
    assert s.seed == 1 and srv.posts == 2


def test_concurrency_is_bounded():
    reqs = [Request(f"r{i}", Prompt(text="x"), seeds=tuple(range(4)), sampling=SAMPLING) for i in range(6)]
    with Server(delay_s=0.2) as srv, engine(srv.url, concurrency=3) as eng:
        out = eng.generate(reqs)
    assert len(out) == 24 and 1 < srv.max_active <= 3  # never more than the bound (exactly 3 unless the box is loaded)


# a wait for a server uses no CPU, so its bound is a kill switch on the wall clock: far past the 0.5 s asked for,
# short of the 60 s default a start that ignored startup_timeout_s would wait
@pytest.mark.timeout(30)
def test_start_checks_the_served_model_and_waits_for_the_server():
    with Server(model="other") as srv:
        with pytest.raises(EngineError, match=r"serves \['other'\], not 'm'"):
            engine(srv.url).start()
        assert engine(srv.url, served_model="other").start() >= 0
    with pytest.raises(EngineError, match="no server at"):
        engine("http://127.0.0.1:9/v1", startup_timeout_s=0.5).start()


# --- several servers (a fleet of `vllm serve` replicas) ------------------------------------------


def _reqs(n: int, k: int) -> list[Request]:
    return [Request(f"r{i}", Prompt(text="x"), seeds=tuple(100 * i + j for j in range(k)), sampling=SAMPLING)
            for i in range(n)]


def test_requests_are_spread_over_several_servers():
    with Server(delay_s=0.02) as a, Server(delay_s=0.02) as b, engine([a.url, b.url], concurrency=4) as eng:
        out = eng.generate(_reqs(6, 4))
    assert [s.text for s in out] == [f" seed={100 * i + j}" for i in range(6) for j in range(4)]
    assert a.posts + b.posts == 24 and a.posts >= 6 and b.posts >= 6  # least-loaded: both get a real share


def test_a_failing_server_is_set_aside_and_its_requests_retried_on_another():
    with (Server(script={i: 503 for i in range(100)}) as bad, Server() as good,
          engine([bad.url, good.url], concurrency=2, max_retries=1, server_cooldown_s=60) as eng):
        out = eng.generate(_reqs(5, 4))
    assert len(out) == 20 and [s.text for s in out] == [f" seed={100 * i + j}" for i in range(5) for j in range(4)]
    assert good.posts == 20 and bad.posts <= 2  # after its first failures it gets nothing during the cool-down
    assert {s.url: s.failures for s in eng.servers}[bad.url.rstrip("/")] == bad.posts


def test_every_server_failing_still_gives_up_naming_the_request_and_server():
    with (Server(script={i: 503 for i in range(100)}) as a, Server(script={i: 500 for i in range(100)}) as b,
          engine([a.url, b.url], max_retries=2) as eng,
          pytest.raises(EngineError, match=r"request r0 sample 0 failed after 3 attempts \(last at http://127")):
        eng.generate(_reqs(1, 1))
    assert a.posts + b.posts == 3


def test_servers_down_at_start_are_left_out_only_if_allowed():
    dead = "http://127.0.0.1:9/v1"
    with Server() as srv:
        with pytest.raises(EngineError, match=r"1 of 2 servers up, 2 needed: openai: no server at http://127.0.0.1:9"):
            engine([srv.url, dead], startup_timeout_s=0.3).start()
        with engine([srv.url, dead], startup_timeout_s=0.3, min_servers=1) as eng:
            assert len(eng.generate(_reqs(2, 2))) == 4
        assert srv.posts == 4 and [s.url for s in eng.servers] == [srv.url] and "127.0.0.1:9" in eng.servers_down[0]
    with pytest.raises(EngineError, match="a list of distinct URLs"):
        engine([dead, dead]).start()
