"""Rollouts on a Ray cluster: a pool of replicas, each an actor that owns an in-process engine.

Every sample of every request becomes its own single-seed request, and batches of
``batch_size`` of them go to whichever replica has room (at most two batches queued per
replica, so a replica never idles between batches). A sample's text depends only on
(prompt, sampling, seed), as with the ``vllm`` engine, so it does not matter which replica or
batch produced it; the stage above writes the same atomic shards and resumes the same way.

    rollout:
      engine_options:
        ray: {address: auto, replicas: 8, tensor_parallel_size: 2, num_gpus: 2, batch_size: 256,
              replica_options: {max_num_seqs: 256, max_model_len: 4096}}

A replica lost with its node (``RayActorError``) is dropped and its unfinished batches go to
the others; when none is left the engine raises :class:`EngineError`, and the samples already
yielded (the stage has written their shards) stay done: a re-run generates only the missing
keys. An error raised by the replica's engine itself stops the run with the request named.

Ray's blocking calls (``ray.get``, ``ray.wait``) run the process's Python signal handlers from
inside C++, to notice ^C, and pass on only ``KeyboardInterrupt`` and ``SystemExit``: any other
exception a handler raises there (a time limit's alarm, passband's engine watchdog, pytest-timeout)
comes out as ``SystemError: <cyfunction CoreWorker.wait ...> returned a result with an exception
set``, with the handler's exception as its cause. :func:`_signals_unmasked` raises that exception
itself, so a time limit reads as a time limit.

This is what ``ray.data.llm`` does inside (an actor pool of vLLM engines). ``ray.data.llm``
itself is not used: see docs/cluster.md for why, and which path is tested where.

Without ``address`` (and no ``RAY_ADDRESS``) a local Ray is started with
``local_num_cpus`` CPUs and no dashboard, and shut down on close. Ray is an optional extra
(``pip install 'passband[ray]'``); nothing imports it until the engine starts.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import astuple
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from pipeline.config import Model
from pipeline.engine_support.vllm_env import allowed_cores, cpu_ranges
from pipeline.engines import ENGINES, Engine, EngineError, ModelSpec, Request, Sample, create_engine, get_engine
from pipeline.errors import PassbandError
from pipeline.plugins import ShippedPlugin, load_shipped, shipped_plugins

_QUEUED_PER_REPLICA = 2


@contextlib.contextmanager
def _signals_unmasked() -> Iterator[None]:
    """Raise what a signal handler raised during a blocking Ray call, not the SystemError Ray turns it into."""
    try:
        yield
    except SystemError as exc:
        if exc.__cause__ is None or "returned a result with an exception set" not in str(exc):
            raise
        raise exc.__cause__.with_traceback(exc.__cause__.__traceback__) from None


class RayOptions(Model):
    address: str | None = Field(None, description="Ray cluster to join ('auto', 'ray://head:10001'); None: "
                                                  "RAY_ADDRESS, else a local Ray started by the engine")
    replicas: int = Field(1, gt=0, description="engine replicas (actors), each owning one engine")
    tensor_parallel_size: int = Field(1, gt=0, description="vLLM tensor parallelism inside each replica")
    batch_size: int = Field(256, gt=0, description="samples per call to a replica")
    num_cpus: float = Field(1.0, ge=0, description="CPUs reserved per replica (on CPU: the cores its engine uses)")
    num_gpus: float | None = Field(None, ge=0, description="GPUs reserved per replica (None: tensor_parallel_size "
                                                           "when the cluster has GPUs, else 0)")
    resources: dict[str, float] = Field(default_factory=dict, description="custom Ray resources per replica")
    spread: bool = Field(True, description="place replicas on different nodes where possible")
    local_num_cpus: int | None = Field(None, gt=0, description="CPUs of the local Ray started when no address "
                                                               "is given (None: enough for the replicas)")
    start_timeout_s: float = Field(900.0, gt=0, description="wait this long for every replica to load its model")
    log_to_driver: bool = Field(False, description="show the replicas' logs (engine logs are quiet by default)")
    replica_engine: str = Field("vllm", description="the engine each replica runs (vllm; fake in tests)")
    replica_options: dict[str, Any] = Field(default_factory=dict, description="that engine's options")

    @field_validator("replica_engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        try:
            get_engine(v)
        except PassbandError as exc:  # a ValueError, so the params error names the key
            raise ValueError(str(exc)) from None
        return v


class _Replica:
    """One Ray actor: an engine of its own, started in ``__init__``."""

    def __init__(self, engine: str, model: ModelSpec, options: dict[str, Any], root: str, env: dict[str, str],
                 plugins: list[ShippedPlugin]) -> None:
        # before vLLM is imported; this replica's own value even where the worker inherited the
        # driver's (an in-process vllm engine in the driver sets VLLM_CPU_OMP_THREADS_BIND to every core)
        os.environ.update(env)
        load_shipped(plugins)  # the user's Python plugins (an engine in a file), as the driver has them

        self.engine = create_engine(engine, model, options, root=Path(root))
        self.startup_s = self.engine.start()

    def ready(self) -> tuple[float, str]:
        import ray

        return self.startup_s, ray.get_runtime_context().get_node_id()

    def prompt_problem(self, request: Request) -> str | None:
        return self.engine.prompt_problem(request)

    def generate(self, requests: list[Request]) -> list[tuple]:
        return [astuple(s) for s in self.engine.generate(requests)]


def cpu_bind(rank: int, threads: int, cores: Sequence[int]) -> list[int]:
    """The cores of replica ``rank`` when replicas share a machine: consecutive slices of ``threads``, wrapping."""
    n = len(cores)
    threads = max(1, min(threads, n))
    start = (rank * threads) % n
    return [cores[(start + j) % n] for j in range(threads)]


@ENGINES.register
class RayEngine(Engine):
    name = "ray"
    Options = RayOptions

    # life cycle ---------------------------------------------------------------------------
    def _start(self) -> None:
        opts: RayOptions = self.options
        try:
            import ray
        except ImportError as exc:
            raise EngineError(f"the ray engine needs Ray (pip install 'passband[ray]'): {exc}") from exc
        self._ray = ray
        self._own_ray = False
        if not ray.is_initialized():
            address = opts.address or os.environ.get("RAY_ADDRESS")
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": opts.log_to_driver,
                                      "configure_logging": True, "logging_level": "ERROR"}
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = opts.local_num_cpus or max(1, math.ceil(opts.replicas * opts.num_cpus))
            try:
                ray.init(**kwargs)
            except Exception as exc:  # connection refused, version mismatch, ...
                raise EngineError(f"ray: cannot {'join ' + address if address else 'start a local Ray'}: {exc}") from exc
            self._own_ray = True
        try:
            self._launch()
        except BaseException:
            self._close()  # the replicas placed so far, and a local Ray started here
            raise

    def _launch(self) -> None:
        ray, opts = self._ray, self.options
        have = ray.cluster_resources()
        gpus = opts.num_gpus if opts.num_gpus is not None else (
            float(opts.tensor_parallel_size) if have.get("GPU", 0) > 0 else 0.0)
        options = dict(opts.replica_options)
        if opts.tensor_parallel_size > 1:
            options["llm_kwargs"] = {"tensor_parallel_size": opts.tensor_parallel_size,
                                     "distributed_executor_backend": "mp", **options.get("llm_kwargs", {})}
        placement: dict[str, Any] = {"num_cpus": opts.num_cpus, "num_gpus": gpus, "max_restarts": 0,
                                     "scheduling_strategy": "SPREAD" if opts.spread else "DEFAULT"}
        if opts.resources:
            placement["resources"] = dict(opts.resources)
        actor = ray.remote(_Replica).options(**placement)
        plugins = shipped_plugins()
        self._replicas = [actor.remote(opts.replica_engine, self.model, options, str(Path(self.root).resolve()),
                                       self._replica_env(rank, gpus), plugins)
                          for rank in range(opts.replicas)]
        try:
            with _signals_unmasked():
                ready = ray.get([r.ready.remote() for r in self._replicas], timeout=opts.start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise EngineError(f"ray: {opts.replicas} replicas not ready after {opts.start_timeout_s:.0f}s; each needs "
                              f"{opts.num_cpus} CPU, {gpus} GPU, {opts.resources or 'no custom resources'} "
                              f"(the cluster has {have}; see `ray status`)") from None
        except ray.exceptions.RayError as exc:
            raise EngineError(f"ray: a replica failed to start its {opts.replica_engine} engine: {exc}") from exc
        self.replica_startup_s = [s for s, _ in ready]
        self.replica_nodes = [n for _, n in ready]

    def _replica_env(self, rank: int, gpus: float) -> dict[str, str]:
        """Environment for replica ``rank``: on CPU, its own slice of the cores when replicas share a machine."""
        bind_env = get_engine(self.options.replica_engine).cpu_bind_env
        if gpus > 0 or bind_env is None:
            return {}

        cores = cpu_bind(rank, int(max(1, self.options.num_cpus)), allowed_cores())
        return {bind_env: cpu_ranges(cores)}

    def _close(self) -> None:
        ray = self.__dict__.get("_ray")
        for r in self.__dict__.pop("_replicas", []):
            with contextlib.suppress(Exception):  # already gone with its node
                ray.kill(r)
        if ray is not None and self.__dict__.pop("_own_ray", False):
            ray.shutdown()

    # generation ---------------------------------------------------------------------------
    def prompt_problem(self, request: Request) -> str | None:
        self.start()
        for r in list(self._replicas):
            try:
                with _signals_unmasked():
                    return self._ray.get(r.prompt_problem.remote(request))
            except self._ray.exceptions.RayActorError:
                self._replicas.remove(r)
        raise EngineError(f"ray: no replica left to check request {request.id}")

    def _stream(self, requests: Sequence[Request]) -> Iterator[Sample]:
        ray = self._ray
        opts: RayOptions = self.options
        items = [(req, i) for req in requests for i in range(req.n)]
        item_of = {f"{req.id}#{i}": (req, i) for req, i in items}  # a sample's own request: "<request id>#<index>"
        pending = deque(list(range(a, min(a + opts.batch_size, len(items))))
                        for a in range(0, len(items), opts.batch_size))
        inflight: dict[Any, tuple[Any, list[int]]] = {}
        load = dict.fromkeys(self._replicas, 0)
        lost: list[str] = []

        def submit() -> None:
            for r in itertools.cycle(list(load)):
                if not pending or all(n >= _QUEUED_PER_REPLICA for n in load.values()):
                    return
                if r in load and load[r] < _QUEUED_PER_REPLICA:
                    batch = pending.popleft()
                    subs = [Request(f"{req.id}#{i}", req.prompt, (req.seeds[i],), req.sampling)
                            for req, i in (items[j] for j in batch)]
                    inflight[r.generate.remote(subs)] = (r, batch)
                    load[r] += 1

        try:
            while pending or inflight:
                submit()
                if not inflight:
                    raise EngineError(f"ray: every replica was lost ({'; '.join(lost)}); {sum(map(len, pending))} "
                                      f"samples not generated: re-run to generate the missing keys")
                with _signals_unmasked():
                    [ref], _ = ray.wait(list(inflight), num_returns=1)
                r, batch = inflight.pop(ref)
                try:
                    with _signals_unmasked():
                        out = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                    if r in load:  # its other batches fail the same way: the replica is dropped once
                        del load[r]
                        self._replicas.remove(r)
                        lost.append(str(exc).splitlines()[0][:200])
                    pending.appendleft(batch)
                    continue
                except ray.exceptions.RayTaskError as exc:
                    raise EngineError(f"ray: a replica's {opts.replica_engine} engine failed (request ids there are "
                                      f"<request>#<sample>): {exc.cause if exc.cause else exc}") from exc
                if r in load:
                    load[r] -= 1
                for sub_id, _, seed, text, n_tokens, finish in out:
                    req, i = item_of[sub_id]
                    yield Sample(req.id, i, seed, text, n_tokens, finish)
        finally:
            for ref in inflight:  # the consumer stopped early or something failed: drop queued work
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
