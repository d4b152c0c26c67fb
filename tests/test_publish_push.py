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


def _refused(repo: Path, tmp_path: Path, *args: str) -> str:
    """push (dry run, then a real one) against a stand-in Hub: refused in one line, the Hub never asked anything."""
    with HubServer(token=TOKEN) as hub:
        for extra in (["--dry-run"], []):
            r = passband(repo, env_for(hub, tmp_path), "push", "--repo-id", "o/d", *args, *extra)
            assert r.returncode == 1, (extra, r.stdout, r.stderr[-2000:])
            assert r.stderr.startswith("Error: ") and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
        assert hub.requests == [] and hub.commits == []
    return r.stderr


def test_push_uploads_exactly_what_publish_wrote_and_never_follows_a_link(repo, tmp_path):
    folder = repo / "data/published"
    build = json.loads((folder / "build.json").read_text())
    on_disk = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert sorted(build["files"]) == [p for p in on_disk if p != "build.json"]   # the manifest: every other file
    assert all(len(m["sha256"]) == 64 and m["size"] == (folder / p).stat().st_size for p, m in build["files"].items())
    secret = tmp_path / "private.txt"
    secret.write_text("PRIVATE-KEY-MATERIAL")

    (folder / "NOTES.txt").symlink_to(secret)  # a link planted after publish, to a file outside
    assert "NOTES.txt is a link" in _refused(repo, tmp_path)
    (folder / "NOTES.txt").unlink()
    (folder / "data" / "more").symlink_to(tmp_path, target_is_directory=True)  # a link to a folder
    assert "data/more is a link" in _refused(repo, tmp_path)
    (folder / "data" / "more").unlink()
    (folder / ".hidden").write_text("not publish's")  # hidden entries are no exception
    assert ".hidden was not written by publish" in _refused(repo, tmp_path)
    (folder / ".hidden").unlink()
    (folder / "data" / "extra").mkdir()
    assert "data/extra/ was not written by publish" in _refused(repo, tmp_path)
    (folder / "data" / "extra").rmdir()
    shard = folder / next(p for p in build["files"] if p.endswith(".parquet"))
    original = shard.read_bytes()
    shard.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # same size, other bytes
    assert "changed since publish wrote it" in _refused(repo, tmp_path)
    shard.unlink()
    shard.symlink_to(secret)  # a listed file replaced by a link
    assert f"{shard.relative_to(folder)} is a link" in _refused(repo, tmp_path)
    shard.unlink()
    shard.write_bytes(original)

    with HubServer(token=TOKEN) as hub:  # the folder as publish left it: pushed, build.json included
        r = passband(repo, env_for(hub, tmp_path), "push", "--repo-id", "o/d")
        assert r.returncode == 0, r.stderr[-2000:]
        assert set(hub.commits[0].added) == {*build["files"], "build.json"}
        assert not any(b"PRIVATE-KEY-MATERIAL" in data for data in hub.commits[0].added.values())


def test_a_corrupt_build_json_or_a_repo_id_the_hub_refuses_is_one_line(repo, tmp_path):
    build = repo / "data/published/build.json"
    good = build.read_bytes()
    for content in (b"{not json", b"[1, 2]", b"\xff\xfe", b'{"files": {"../x": {"size": 1}}}', b'{"passband_version": 1}',
                    json.dumps({**json.loads(good), "files": {}}).encode()):
        build.write_bytes(content)
        assert "run `passband publish` again" in _refused(repo, tmp_path), content
    build.write_bytes(good)
    with HubServer(token=TOKEN) as hub:
        for repo_id in ("a..b/c", "o/a--b", "o/name.git", "o/d\n", "o/d\r", "-o/d", "o/" + "x" * 97):
            r = passband(repo, env_for(hub, tmp_path), "push", "--repo-id", repo_id)
            assert r.returncode == 1 and "must be ORG/NAME" in r.stderr and r.stderr.count("\n") == 1, (repo_id, r.stderr)
        assert hub.requests == []
