"""A real Ray cluster on 127.0.0.1 for tests: a head and worker nodes, each a separate `ray start --block` process.

Each node runs in its own process group (session), so :meth:`LocalCluster.kill_worker` can
SIGKILL a node with everything it started (raylet, actors, their engine subprocesses), as
when a machine is lost. :meth:`LocalCluster.stop` kills the groups it started and nothing
else (never ``ray stop``, which would stop every Ray on the machine).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))
# node loss noticed in about 10 s instead of the default 30 s (Ray reads RAY_<system config name>); not 3 s: a
# raylet starved of CPU on a busy machine (vLLM's OpenMP threads spin on every core) could miss 3 checks in a row
# and be declared dead while alive
SYSTEM_CONFIG = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "2000",
                 "RAY_health_check_failure_threshold": "10"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    def __init__(self, *, head_cpus: int = 1, worker_cpus: int = 1, start_timeout_s: float = 300.0) -> None:
        self.head_cpus, self.worker_cpus, self.start_timeout_s = head_cpus, worker_cpus, start_timeout_s
        self.temp = tempfile.mkdtemp(prefix="pbray")  # short: Ray's socket paths must fit in 107 bytes
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}
        # a loopback test cluster without Ray's token authentication (on by default since Ray 2.5x; its token
        # file is machine-wide state): the nodes, the readiness probe and this process's driver all agree
        os.environ["RAY_AUTH_MODE"] = "disabled"
        self.env = {**os.environ, **SYSTEM_CONFIG, "RAY_USAGE_STATS_ENABLED": "0",
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                                os.environ.get("PYTHONPATH")]))}

    def _node(self, name: str, args: list[str]) -> None:
        log = open(Path(self.temp) / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats", *args], env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self) -> LocalCluster:
        self._node("head", ["--head", f"--port={self.port}", "--node-ip-address=127.0.0.1", f"--num-cpus={self.head_cpus}",
                            "--num-gpus=0", "--include-dashboard=false", f"--temp-dir={self.temp}",
                            '--resources={"head": 1}'])
        self._wait_nodes(1)
        self._node("worker", [f"--address={self.address}", "--node-ip-address=127.0.0.1", f"--num-cpus={self.worker_cpus}",
                              "--num-gpus=0", f"--temp-dir={self.temp}", '--resources={"worker": 1}'])
        self._wait_nodes(2)
        return self

    def _wait_nodes(self, n: int) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            dead = [k for k, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"ray node {dead} exited: {self.log(dead[0])[-2000:]}")
            if self._gcs_nodes() >= n:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{n} ray nodes not up after {self.start_timeout_s}s: {self.log('head')[-2000:]}")

    def _gcs_nodes(self) -> int:
        code = (f"import ray; ray.init(address='{self.address}', logging_level='ERROR'); "
                "print(sum(n['Alive'] for n in ray.nodes()))")
        try:  # a probe that a busy machine slowed past its limit counts as "not up yet", and _wait_nodes asks again
            out = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return 0
        try:
            return int(out.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return 0

    def log(self, name: str) -> str:
        path = Path(self.temp) / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _tree(self, name: str) -> list[psutil.Process]:
        """Node ``name``'s processes: the `ray start` process, its process group and every descendant (Ray
        workers may leave the group)."""
        p = self.procs[name]
        found: dict[int, psutil.Process] = {}
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(p.pid)
            found.update({q.pid: q for q in [root, *root.children(recursive=True)]})
        for q in psutil.process_iter():
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if os.getpgid(q.pid) == p.pid:
                    found[q.pid] = q
                    found.update({c.pid: c for c in q.children(recursive=True)})
        return list(found.values())

    def _kill(self, name: str) -> None:
        for q in self._tree(name):
            with contextlib.suppress(psutil.Error):
                q.kill()
        self.procs[name].wait(timeout=30)

    def kill_worker(self) -> None:
        """SIGKILL every process of the worker node at once: `ray start`, its raylet, actors, their engine processes."""
        self._kill("worker")

    def stop(self) -> None:
        for name in ("worker", "head"):
            p = self.procs.get(name)
            if p is None:
                continue
            for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            self._kill(name)  # anything of the node still around
        shutil.rmtree(self.temp, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
