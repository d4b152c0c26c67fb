"""vLLM's offline engine, in-process (``vllm.LLM``): the CPU build here, the CUDA build on a GPU.

Every sample is its own engine request with ``SamplingParams(n=1, seed=<sample seed>)``, so
its text does not depend on batching or order (vLLM's own ``n`` derives the seeds of a
request's samples from one seed and their position). Requests are fed to the engine through
a bounded queue (``max_queued``) and collected step by step, so finished samples stream out
while the engine keeps its batch full: the same loop as ``LLM.generate`` without waiting for
the whole batch.

Chat prompts go through the model's own chat template (``tokenizer.apply_chat_template``) and
are tokenised without adding special tokens twice, as ``LLM.chat`` does.

By default (``in_process``) vLLM's engine core and its one worker run in this process: no process
is spawned, which halves the engine's start-up on a 2-core CPU (each spawned process imports torch
and vLLM again; benchmarks/vllm_in_process.py). ``in_process: false`` keeps vLLM's own processes (tensor
parallelism needs them; the watchdog then turns a killed worker into an error): scripts that start
the engine that way need the ``__main__`` guard.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from pipeline.config import Model
from pipeline.engine_support import watchdog
from pipeline.engine_support.vllm_env import DEFAULT_KV_CACHE_GIB, configure_cpu_env, configure_logging, output_to, verbose
from pipeline.engines import ENGINES, Engine, EngineError, Request, Sample


class VLLMOptions(Model):
    max_num_seqs: int = Field(32, gt=0, description="sequences decoded together")
    max_model_len: int = Field(2048, gt=0, description="prompt + completion tokens")
    kv_cache_gib: int = Field(DEFAULT_KV_CACHE_GIB, ge=1, description="CPU build: KV cache in GiB (VLLM_CPU_KVCACHE_SPACE)")
    threads: int | None = Field(None, gt=0, description="CPU build: cores to bind (None: every allowed core)")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="CUDA build only")
    enforce_eager: bool = True
    max_queued: int = Field(256, gt=0, description="requests handed to the engine at once (>= max_num_seqs)")
    cache_root: str = Field("data/cache/vllm", description="VLLM_CACHE_ROOT, relative to the repository root")
    log_file: str = Field("data/logs/vllm.log", description="vLLM's own log lines (on the terminal too with --verbose)")
    in_process: bool = Field(True, description="engine core and worker in this process (no spawn: a faster start); "
                                                "false: vLLM's own processes (tensor parallelism, the watchdog)")
    llm_kwargs: dict[str, Any] = Field(default_factory=dict, description="passed to vllm.LLM as they are")


_FINISH = {"stop": "stop", "length": "length"}


def runs_in_process(opts: VLLMOptions) -> bool:
    """``in_process``, unless ``llm_kwargs`` name an executor or ask for tensor parallelism (which needs processes)."""
    kw = opts.llm_kwargs
    return opts.in_process and "distributed_executor_backend" not in kw and kw.get("tensor_parallel_size", 1) == 1


@ENGINES.register
class VLLMEngine(Engine):
    name = "vllm"
    Options = VLLMOptions
    cpu_bind_env = "VLLM_CPU_OMP_THREADS_BIND"

    def _start(self) -> None:
        opts: VLLMOptions = self.options
        configure_cpu_env(threads=opts.threads, kv_cache_gib=opts.kv_cache_gib, cache_root=self.root / opts.cache_root)
        self.log_path = configure_logging(self.root / opts.log_file)
        try:
            with output_to(None if verbose() else self.log_path):  # vLLM prints platform notes at import
                from vllm import LLM
        except ImportError as exc:
            raise EngineError(f"the vllm engine needs vLLM (pip install 'passband[cpu]' or '[gpu]'): {exc}") from exc
        kwargs: dict[str, Any] = {
            "model": self.model.path,
            "dtype": self.model.dtype,
            "seed": 0,
            "max_model_len": opts.max_model_len,
            "max_num_seqs": opts.max_num_seqs,
            "enforce_eager": opts.enforce_eager,
        }
        if self.model.path == self.model.model_id and not Path(self.model.path).is_dir():  # a hub id: pin the revision
            kwargs["revision"] = self.model.revision
        if _on_gpu():
            kwargs["gpu_memory_utilization"] = opts.gpu_memory_utilization
        in_process = runs_in_process(opts)
        if in_process:
            kwargs["distributed_executor_backend"] = "uni"
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if in_process else "1"
        kwargs.update(opts.llm_kwargs)
        before = watchdog.children()
        try:
            with output_to(None if verbose() else self.log_path):
                self.llm = LLM(**kwargs)
        except Exception as exc:  # the cause on the terminal, with the log lines that explain it
            tail = "".join(f"\n{note}" for note in getattr(exc, "__notes__", []))
            raise EngineError(f"vllm failed to start: {type(exc).__name__}: {exc} (full log: {self.log_path}){tail}") from exc
        self._workers = watchdog.children() - before  # a killed worker fails the stream, not hangs it
        self.tokenizer = self.llm.get_tokenizer()
        self._ids = itertools.count()

    def _close(self) -> None:
        llm = self.__dict__.pop("llm", None)
        if getattr(self, "_died", False):  # vLLM's shutdown would wait on the dead worker: end the others directly
            watchdog.kill(self._workers)
            return
        if llm is not None:
            shutdown = getattr(llm.llm_engine, "shutdown", None) or getattr(getattr(llm.llm_engine, "engine_core", None),
                                                                             "shutdown", None)
            if callable(shutdown):
                shutdown()
            del llm

    def engine_prompt(self, request: Request) -> dict[str, Any]:
        """What vLLM is given for a request: the raw text, or the chat-templated token ids."""
        if request.prompt.text is not None:
            return {"prompt": request.prompt.text}
        text = self.tokenizer.apply_chat_template(list(request.prompt.messages), tokenize=False, add_generation_prompt=True)
        return {"prompt_token_ids": self.tokenizer(text, add_special_tokens=False)["input_ids"]}

    def prompt_problem(self, request: Request) -> str | None:
        """A prompt of ``max_model_len`` tokens or more leaves no room to generate (vLLM would raise on it)."""
        self.start()
        p = self.engine_prompt(request)
        n = len(p["prompt_token_ids"]) if "prompt_token_ids" in p else len(self.tokenizer(p["prompt"])["input_ids"])
        limit = self.options.max_model_len
        return f"prompt has {n} tokens; the engine's max_model_len is {limit}" if n >= limit else None

    def sampling_params(self, request: Request, seed: int):
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        s = request.sampling
        return SamplingParams(
            n=1, seed=seed, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_tokens,
            stop=list(s.stop) or None, output_kind=RequestOutputKind.FINAL_ONLY,
        )

    def _stream(self, requests: Sequence[Request]) -> Iterator[Sample]:
        opts: VLLMOptions = self.options
        engine = self.llm.llm_engine
        todo = ((req, i) for req in requests for i in range(req.n))
        rendered: dict[str, dict[str, Any]] = {}
        inflight: dict[str, tuple[Request, int]] = {}
        depth = max(opts.max_queued, opts.max_num_seqs)

        def top_up() -> None:
            for req, i in itertools.islice(todo, max(0, depth - len(inflight))):
                if req.id not in rendered:
                    rendered.clear()  # requests arrive in order: keep only the current one
                    rendered[req.id] = self.engine_prompt(req)
                rid = f"passband-{next(self._ids)}"
                engine.add_request(rid, rendered[req.id], self.sampling_params(req, req.seeds[i]))
                inflight[rid] = (req, i)

        try:
            with watchdog.dies_with(getattr(self, "_workers", set()), engine="vllm"):
                yield from self._steps(engine, inflight, top_up)
        except watchdog.EngineDied:
            inflight.clear()  # nothing to abort: the engine is gone
            self._died = True
            raise
        finally:
            if inflight:  # the consumer stopped early or something failed: leave the engine clean
                engine.abort_request(list(inflight))

    def _steps(self, engine, inflight: dict[str, tuple[Request, int]], top_up) -> Iterator[Sample]:
        top_up()
        while inflight:
            for out in engine.step():
                if not out.finished or out.request_id not in inflight:
                    continue
                req, i = inflight.pop(out.request_id)
                o = out.outputs[0]
                if o.finish_reason not in _FINISH:
                    raise EngineError(f"vllm: request {req.id} sample {i} finished with {o.finish_reason!r}")
                yield Sample(req.id, i, req.seeds[i], o.text, len(o.token_ids), _FINISH[o.finish_reason])
            top_up()


def _on_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
