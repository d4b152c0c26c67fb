"""Engine logs go to a file, not the terminal: unit checks, and a quiet rollout on the real engine.

The real-engine test is marked `engine`; on a shared machine run it under the lock:
    flock /tmp/pb-heavy.lock nice -n 5 .venv/bin/python -m pytest -m engine tests/test_engines_logs.py
"""

from __future__ import annotations

import json
import logging
import logging.config
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.engine_support.vllm_env import configure_logging, logging_config, output_to


def test_output_to_catches_a_child_process_and_restores_the_terminal(tmp_path, capfd):
    log = tmp_path / "engine.log"
    with output_to(log):
        os.write(1, b"from this process\n")  # what a library's print or a C extension writes
        subprocess.run([sys.executable, "-c", "import sys; print('from a worker', file=sys.stderr)"], check=True)
    print("back on the terminal", flush=True)
    out, err = capfd.readouterr()
    assert out == "back on the terminal\n" and err == ""
    assert log.read_text().splitlines() == ["from this process", "from a worker"]


def test_output_to_adds_the_log_tail_to_an_error(tmp_path, capfd):
    log = tmp_path / "engine.log"
    with pytest.raises(RuntimeError) as info, output_to(log):
        os.write(2, b"ValueError: the cause, printed by the engine\n")
        raise RuntimeError("engine failed to start, see above")
    assert "the cause, printed by the engine" in "\n".join(info.value.__notes__)
    assert str(log) in info.value.__notes__[0]
    print("after", flush=True)
    assert capfd.readouterr().out == "after\n"


def test_output_to_none_changes_nothing(capfd):
    with output_to(None):
        print("visible", flush=True)
    assert capfd.readouterr().out == "visible\n"


def test_logging_config_writes_the_vllm_logger_to_the_file(tmp_path, capfd):
    env: dict[str, str] = {}
    log = configure_logging(tmp_path / "logs/vllm.log", to_terminal=False, environ=env)
    assert env["VLLM_CONFIGURE_LOGGING"] == "1"
    cfg = json.loads(Path(env["VLLM_LOGGING_CONFIG_PATH"]).read_text())
    assert cfg == logging_config(log, to_terminal=False)
    logging.config.dictConfig(cfg)
    try:
        logging.getLogger("vllm.engine").info("Initializing a V1 LLM engine")
        logging.getLogger("vllm.engine").debug("a debug line")
        for h in logging.getLogger("vllm").handlers:
            h.flush()
        text = log.read_text()
        assert "INFO vllm.engine: Initializing a V1 LLM engine" in text and "a debug line" not in text
        assert capfd.readouterr().err == ""
        assert "terminal" in logging_config(log, to_terminal=True)["handlers"]
    finally:
        for h in logging.getLogger("vllm").handlers:
            h.close()
        logging.getLogger("vllm").handlers.clear()


@pytest.mark.engine
def test_a_quiet_rollout_on_the_real_engine(embedded_model_dir, tmp_path):
    """`passband rollout` prints its own lines only; vLLM's go to data/logs/vllm.log, named in the result line."""
    params = {
        "paths": {"models": str(embedded_model_dir.parent), "allow_outside": ["models"]},
        "ingest": {"sources": [{"name": "synthetic", "kind": "synthetic", "options": {"n_per_level": 1}}]},
        "policies": {"smollm2": {"model": "embedded", "sampling": {"max_tokens": 16, "stop": ["\nQ:", "\n\n"]}}},
        "rollout": {"policies": ["smollm2"], "k": 2, "shard_size": 8,
                    "engine_options": {"vllm": {"max_num_seqs": 8, "max_model_len": 512, "kv_cache_gib": 1}}},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "PASSBAND_LOG"))}

    def passband(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pipeline", *args, "--params", str(tmp_path / "params.yaml")],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)

    assert passband("ingest", "--no-progress").returncode == 0
    res = passband("rollout", "--set", "main")
    assert res.returncode == 0, res.stderr[-3000:]
    text = res.stdout + res.stderr
    # the progress bar redraws one line on a terminal (\r); into a pipe tqdm writes each redraw on a line of its own,
    # so the bar's states are counted as one line
    parts = [part for part in re.split(r"[\r\n]", text) if part.strip()]
    bar = [part for part in parts if re.match(r"rollout\[main\]: +\d+%\|", part)]
    print(f"quiet rollout: {len(parts) - len(bar)} lines and a progress bar ({len(bar)} states):\n{text}")
    assert bar and len(parts) - len(bar) <= 3
    # and nothing but passband's own: the result line, the policy, the progress bar's states
    assert [part for part in re.split(r"[\r\n]", text) if part.strip()
            and not part.startswith(("rollout[main]", "  smollm2: pol_"))] == []
    assert "engine log data/logs/vllm.log" in res.stdout
    log = (tmp_path / "data/logs/vllm.log").read_text()
    print(f"data/logs/vllm.log: {len(log.splitlines())} lines, {log.count(' INFO ')} INFO, {log.count('WARNING')} WARNING")
    assert "INFO vllm" in log and len(log.splitlines()) > 20  # the lines the terminal was spared


def test_an_engine_that_fails_to_start_prints_its_cause(tmp_path, monkeypatch, capfd):
    """vllm.LLM stands in for an engine whose worker prints the cause and dies: the error names it and the log."""
    import types

    from pipeline.engines import EngineError, ModelSpec
    from pipeline.engines.vllm_engine import VLLMEngine

    class LLM:
        def __init__(self, **kwargs):
            os.write(2, b"INFO engine args ...\nValueError: max_model_len 4096 > the model's 2048\n")
            raise RuntimeError("Engine core initialization failed. See root cause above.")

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    # the engine sets VLLM_* variables in os.environ: give it a copy, so this process's stays as it was
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k != "PASSBAND_LOG_LEVEL"})
    engine = VLLMEngine(ModelSpec("m", str(tmp_path / "m"), "r", "float32"), {"kv_cache_gib": 1}, root=tmp_path)
    with pytest.raises(EngineError) as info:
        engine.start()
    msg = str(info.value)
    assert msg.startswith("vllm failed to start: RuntimeError: Engine core initialization failed.")
    assert "ValueError: max_model_len 4096 > the model's 2048" in msg and str(tmp_path / "data/logs/vllm.log") in msg
    assert capfd.readouterr().err == ""  # the engine's own lines went to the log, not the terminal
