"""A headless Chromium driven over the DevTools protocol (the ``websockets`` client), for the report's browser test.

:func:`chromium_path` finds Debian's ``/usr/bin/chromium`` (or ``$PASSBAND_CHROMIUM``); :class:`Browser` starts it
with a fresh profile, no network services, ``--remote-debugging-port=0``, reads the port from ``DevToolsActivePort``
and speaks to the first page's target. Console errors, uncaught exceptions and failed loads are collected.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import websockets

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--window-size=1400,1000", "--remote-debugging-port=0"]


def chromium_path() -> str | None:
    path = os.environ.get("PASSBAND_CHROMIUM") or "/usr/bin/chromium"
    return path if os.access(path, os.X_OK) else shutil.which("chromium")


class Browser:
    """``async with Browser() as b: await b.open(url)``; then :meth:`eval`, :meth:`click`, :meth:`screenshot`."""

    def __init__(self, executable: str, *, timeout: float = 60):
        self.executable, self.timeout = executable, timeout
        self.errors: list[str] = []
        self._id = 0
        self._waiters: dict[int, asyncio.Future] = {}
        self._events: list[tuple[str, dict]] = []

    async def __aenter__(self) -> Browser:
        self.profile = tempfile.mkdtemp(prefix="passband-chromium-")
        self.proc = subprocess.Popen([self.executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}: {self.proc.stderr.read()[-2000:]!r}")
            if time.monotonic() > deadline:
                raise RuntimeError("chromium wrote no DevToolsActivePort")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self.ws = await websockets.connect(pages[0]["webSocketDebuggerUrl"], max_size=64 << 20)
        self._reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime", "Log"):
            await self.send(f"{domain}.enable")
        return self

    async def __aexit__(self, *exc) -> None:
        self._reader.cancel()
        await self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    async def _read(self) -> None:
        async for raw in self.ws:
            msg = json.loads(raw)
            if "id" in msg and msg["id"] in self._waiters:
                self._waiters.pop(msg["id"]).set_result(msg)
                continue
            method, p = msg.get("method", ""), msg.get("params", {})
            self._events.append((method, p))
            if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
            elif method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                self.errors.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
            elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
                self.errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")

    async def send(self, method: str, **params) -> dict:
        self._id += 1
        fut = asyncio.get_running_loop().create_future()
        self._waiters[self._id] = fut
        await self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        msg = await asyncio.wait_for(fut, self.timeout)
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']}")
        return msg["result"]

    async def open(self, url: str) -> None:
        self._events.clear()
        await self.send("Page.navigate", url=url)
        await self.wait_for("document.readyState === 'complete'")

    async def eval(self, expression: str):
        r = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression[:80]}: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    async def wait_for(self, expression: str, *, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.timeout)
        while not await self.eval(f"Boolean({expression})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout or self.timeout} s for {expression}")
            await asyncio.sleep(0.1)

    async def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) at the middle of the first element ``selector`` matches."""
        box = await self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + Math.min(r.height / 2, 10)]; }})()""")
        if box is None:
            raise LookupError(f"nothing matches {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    async def screenshot(self, selector: str | None = None) -> bytes:
        """A PNG of the page's viewport, or of the element ``selector`` matches (scrolled into view)."""
        if selector is None:
            return base64.b64decode((await self.send("Page.captureScreenshot", format="png"))["data"])
        r = await self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView(); const r = e.getBoundingClientRect();
            return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]; }})()""")
        clip = {"x": r[0], "y": r[1], "width": max(r[2], 1), "height": max(r[3], 1), "scale": 1}
        data = await self.send("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        return base64.b64decode(data["data"])
