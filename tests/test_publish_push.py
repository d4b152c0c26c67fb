"""passband push, end to end against a stand-in Hub on 127.0.0.1 (tests/support/hub_server.py): one commit with
every file of the folder, a message naming the passband version and the dvc.lock digest, and the token
in no file the pipeline wrote and in no output."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hub_server import HubServer
from publish_tables import make_repo

from pipeline.cli import cli

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)

TOKEN = "hf_passbandTEST" + hashlib.sha256(b"push-test").hexdigest()[:24]


def env_for(hub: HubServer | None, tmp: Path, *, token: str | None = TOKEN) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_HOME": str(tmp / "hf-home"), "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
    env["HF_ENDPOINT"] = hub.url if hub else "http://127.0.0.1:9"  # a closed port: nothing may be reached
    if token:
        env["HF_TOKEN"] = token
    return env


def passband(root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args, "--params", str(root / "params.yaml")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture()
def repo(tmp_path) -> Path:
    root = make_repo(tmp_path / "repo")
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"ingest": {"cmd": "passband ingest"}}}))
    r = CliRunner().invoke(cli, ["publish", "--params", str(root / "params.yaml")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return root


def local_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_push_uploads_the_folder_in_one_commit(repo, tmp_path):
    folder = repo / "data/published"
    build = json.loads((folder / "build.json").read_text())
    with HubServer(token=TOKEN) as hub:
        r = passband(repo, env_for(hub, tmp_path), "push", "--repo-id", "passband-org/difficulty")
        assert r.returncode == 0, r.stderr[-3000:]
        assert hub.unknown == [] and hub.unauthorized == []
        assert hub.create_payloads == [{"name": "difficulty", "organization": "passband-org", "visibility": "private",
                                        "type": "dataset"}]
        assert len(hub.commits) == 1
        commit = hub.commits[0]
        assert commit.repo_id == "passband-org/difficulty"
        assert commit.added == local_files(folder)  # every file, byte for byte (parquet/png through LFS)
        assert any(path.startswith("/lfs-upload/") for _, path in hub.requests)
        assert "passband 0.1.0" in commit.summary
        assert build["dvc_lock_digest"] and f"dvc.lock sha256:{build['dvc_lock_digest']}" in commit.summary
        assert "pushed: " in r.stdout

    written = [p for p in (repo / "data").rglob("*") if p.is_file()] + [repo / "params.yaml"]
    written += [p for p in (tmp_path / "hf-home").rglob("*") if p.is_file()]
    assert [p for p in written if TOKEN.encode() in p.read_bytes()] == []
    assert TOKEN not in r.stdout + r.stderr


def test_public_push_and_a_second_push_removes_stale_shards(repo, tmp_path):
    with HubServer(token=TOKEN) as hub:
        env = env_for(hub, tmp_path)
        assert passband(repo, env, "push", "--repo-id", "o/d", "--public").returncode == 0
        assert hub.create_payloads[0]["visibility"] == "public"

        params = yaml.safe_load((repo / "params.yaml").read_text())
        params["publish"]["bands"] = ["learnable", "too_hard"]
        (repo / "params.yaml").write_text(yaml.safe_dump(params))
        assert passband(repo, env, "publish").returncode == 0
        r = passband(repo, env, "push", "--repo-id", "o/d", "--public")  # the repo is public: asked for as it is
        assert r.returncode == 0, r.stderr[-3000:]
        assert len(hub.commits) == 2
        stale = hub.commits[1].deleted
        assert "data/too_easy/train-00000-of-00001.parquet" in stale and "data/unsolved/train-00000-of-00001.parquet" in stale
        assert hub.repos["o/d"].files == local_files(repo / "data/published")  # the repo mirrors the folder


def test_dry_run_lists_files_and_contacts_nobody(repo, tmp_path):
    with HubServer(token=TOKEN) as hub:
        r = passband(repo, env_for(hub, tmp_path, token=None), "push", "--repo-id", "o/d", "--dry-run")
        assert r.returncode == 0, r.stderr
        assert hub.requests == []
    files = local_files(repo / "data/published")
    assert len(files) > 10 and all(path in r.stdout for path in files)
    assert f"{len(files)} files" in r.stdout and "(private asked for;" in r.stdout
    assert "commit: passband 0.1.0: publish (dvc.lock sha256:" in r.stdout
    assert "dry run: nothing uploaded" in r.stdout


def test_push_needs_a_token_an_explicit_valid_repo_id_and_the_cards_repo(repo, tmp_path):
    with HubServer(token=TOKEN) as hub:
        r = passband(repo, env_for(hub, tmp_path, token=None), "push", "--repo-id", "o/d")
        assert r.returncode == 1 and "no Hugging Face token" in r.stderr
        r = passband(repo, env_for(hub, tmp_path), "push")
        assert r.returncode == 2 and "--repo-id" in r.stderr
        r = passband(repo, env_for(hub, tmp_path), "push", "--repo-id", "just-a-name")
        assert r.returncode == 1 and "must be ORG/NAME" in r.stderr
        r = passband(repo, env_for(hub, tmp_path, token="hf_wrong"), "push", "--repo-id", "o/d")
        assert r.returncode == 1 and "push to o/d failed" in r.stderr and "hf_wrong" not in r.stderr
        assert hub.commits == []

    r = passband(repo, env_for(None, tmp_path), "push", "--repo-id", "o/d")  # the endpoint is a closed port
    assert r.returncode == 1 and "push to o/d failed: cannot reach http://127.0.0.1:9" in r.stderr
    assert "Traceback" not in r.stderr and TOKEN not in r.stderr

    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["publish"]["repo_id"] = "o/other"
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    r = passband(repo, env_for(None, tmp_path), "push", "--repo-id", "o/d")
    assert r.returncode == 1 and "the card was built for 'o/other'" in r.stderr
