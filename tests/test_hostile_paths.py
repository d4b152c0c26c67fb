"""Hostile and careless paths: nothing outside passband's own outputs is ever deleted or overwritten.

Each reproduction of the issue drives the CLI as a user would and checks the outcome is one line
(exit 1) or a bounded, recorded result, and that the user's files are still there, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from hub_server import HubServer
from publish_tables import make_repo

from pipeline.cli import cli
from pipeline.config import ConfigError, load_params, parse_params
from pipeline.io import read_table, replace_dir, write_table
from pipeline.ownership import TABLE_MARKER, NotOwnedError
from pipeline.schema import schema

THESIS = b"chapter 1\n" + bytes(range(256)) * 4


def run(root: Path, *args: str):
    return CliRunner().invoke(cli, [*args, "--params", str(root / "params.yaml")])


def one_line_error(res, *needles: str) -> None:
    assert res.exit_code == 1, res.output
    assert res.output.startswith("Error: ") and res.output.count("\n") == 1 and "Traceback" not in res.output, res.output
    for n in needles:
        assert n in res.output, res.output


def set_params(root: Path, **sections) -> None:
    p = yaml.safe_load((root / "params.yaml").read_text())
    for section, values in sections.items():
        p.setdefault(section, {}).update(values)
    (root / "params.yaml").write_text(yaml.safe_dump(p))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def mini_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "in.jsonl").write_text("".join(json.dumps({"q": f"What is {i} + 1?", "a": str(i + 1)}) + "\n" for i in range(3)))
    params = {"ingest": {"sources": [{"name": "mine", "kind": "jsonl", "path": "in.jsonl",
                                      "mapping": {"question": "q", "answer": "a"}}]},
              "policies": {"p": {}}, "rollout": {"policies": ["p"]}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root


@pytest.fixture()
def pub(tmp_path) -> Path:
    return make_repo(tmp_path / "repo")


# --- publish: the published folder ----------------------------------------------------------------

def test_publish_refuses_a_folder_it_did_not_write(pub):
    (pub / "notes").mkdir()
    (pub / "notes/thesis.txt").write_bytes(THESIS)
    set_params(pub, paths={"published": "notes"})
    one_line_error(run(pub, "publish"), "notes", "passband did not write it", "paths.published")
    assert snapshot(pub / "notes") == {"thesis.txt": THESIS}
    assert not [p for p in pub.iterdir() if p.name.startswith(".notes")]  # no staging left behind


@pytest.mark.parametrize("value", [".", "./", "data/..", "", "data", "data/problems"])
def test_publish_into_the_project_or_over_another_path_is_a_config_error(pub, value):
    before = snapshot(pub)
    set_params(pub, paths={"published": value})
    params_text = (pub / "params.yaml").read_bytes()
    res = run(pub, "publish")
    one_line_error(res, "paths.published")
    assert snapshot(pub) == {**before, "params.yaml": params_text}


def test_publish_refuses_a_symlink_to_a_folder_outside(pub, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "thesis.txt").write_bytes(THESIS)
    (pub / "data/published").symlink_to(outside, target_is_directory=True)
    one_line_error(run(pub, "publish"), "symbolic link", "data/published")
    assert snapshot(outside) == {"thesis.txt": THESIS} and (pub / "data/published").is_symlink()


def test_publish_refuses_a_file_and_replaces_its_own_folder(pub):
    assert run(pub, "publish").exit_code == 0
    (pub / "data/published/README.md").write_text("stale")
    assert run(pub, "publish").exit_code == 0  # its own folder (build.json): replaced whole
    assert (pub / "data/published/README.md").read_text() != "stale"
    (pub / "mine.txt").write_bytes(THESIS)
    set_params(pub, paths={"published": "mine.txt"})
    one_line_error(run(pub, "publish"), "is a file")
    assert (pub / "mine.txt").read_bytes() == THESIS


def test_a_folder_made_while_publish_writes_is_checked_again_before_the_swap(pub, monkeypatch):
    import pipeline.publish.stage as publish

    real = publish.write_folder

    def meanwhile(*args, **kwargs):
        (pub / "data/published").mkdir(parents=True)
        (pub / "data/published/thesis.txt").write_bytes(THESIS)
        return real(*args, **kwargs)

    monkeypatch.setattr(publish, "write_folder", meanwhile)
    one_line_error(run(pub, "publish"), "passband did not write it")
    assert snapshot(pub / "data/published") == {"thesis.txt": THESIS}
    assert not [p for p in (pub / "data").iterdir() if p.name.startswith(".published")]


def test_publish_into_an_empty_folder_is_fine(pub):
    (pub / "out").mkdir()
    set_params(pub, paths={"published": "out"})
    assert run(pub, "publish").exit_code == 0 and (pub / "out/build.json").is_file()


# --- ingest: replace_dir ------------------------------------------------------------------------

def test_ingest_never_deletes_the_source_in_its_output_folder(tmp_path):
    root = mini_repo(tmp_path / "r")
    (root / "mydata").mkdir()
    pq.write_table(pa.table({"question": ["What is 3 + 4?"], "answer": ["7"]}), root / "mydata/source.parquet")
    source = (root / "mydata/source.parquet").read_bytes()
    p = yaml.safe_load((root / "params.yaml").read_text())
    p["paths"] = {"problems": "mydata"}
    p["ingest"]["sources"] = [{"name": "mine", "kind": "parquet", "path": "mydata/source.parquet"}]
    (root / "params.yaml").write_text(yaml.safe_dump(p))
    one_line_error(run(root, "ingest", "--no-progress"), "mydata", "source.parquet", "did not write")
    assert snapshot(root / "mydata") == {"source.parquet": source}


def test_a_folder_of_an_earlier_version_is_adopted_and_stray_files_are_never_removed(tmp_path):
    root = mini_repo(tmp_path / "r")
    old = schema("problems").empty()
    write_table(old, root / "data/problems/part-7.parquet", name="problems")  # an earlier run's stale shard, no marker
    assert run(root, "ingest", "--no-progress").exit_code == 0
    folder = root / "data/problems"
    names = sorted(p.name for p in folder.iterdir())
    assert names[0] == TABLE_MARKER and "part-7.parquet" not in names and all(n.endswith(".parquet") for n in names[1:])
    assert read_table(folder, name="problems").num_rows == 3
    # a file dropped into the (now marked) folder afterwards is never removed nor overwritten
    (folder / "notes.txt").write_bytes(THESIS)
    pq.write_table(pa.table({"x": [1]}), folder / "mine.parquet")
    mine = (folder / "mine.parquet").read_bytes()
    assert run(root, "ingest", "--no-progress").exit_code == 0
    assert (folder / "notes.txt").read_bytes() == THESIS and (folder / "mine.parquet").read_bytes() == mine


def test_a_folder_holding_another_tables_marker_or_a_link_is_refused(tmp_path):
    root = mini_repo(tmp_path / "r")
    (root / "data/problems").mkdir(parents=True)
    (root / "data/problems" / TABLE_MARKER).write_text("passband table rejects\n")
    one_line_error(run(root, "ingest", "--no-progress"), "holds table 'rejects'")
    (root / "data/problems" / TABLE_MARKER).unlink()
    (root / "data/problems").rmdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    write_table(schema("problems").empty(), outside / "part-9.parquet", name="problems")
    theirs = snapshot(outside)
    (root / "data/problems").symlink_to(outside, target_is_directory=True)
    one_line_error(run(root, "ingest", "--no-progress"), "symbolic link")
    assert snapshot(outside) == theirs


def test_replace_dir_takes_a_lazy_iterable_and_refuses_before_writing(tmp_path):
    t = schema("problems").empty()
    made = replace_dir(tmp_path / "t", ((f"part-{i}", t) for i in range(3)), name="problems")
    assert [p.name for p in made] == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    (tmp_path / "u").mkdir()
    (tmp_path / "u/keep.csv").write_bytes(THESIS)
    pulled = []

    def shards():
        pulled.append(1)
        yield "part-0", t

    with pytest.raises(NotOwnedError, match=r"keep\.csv"):
        replace_dir(tmp_path / "u", shards(), name="problems")
    assert pulled == [] and snapshot(tmp_path / "u") == {"keep.csv": THESIS}


# --- params.yaml: paths and bounds ----------------------------------------------------------------

@pytest.mark.parametrize("paths, needle", [
    ({"problems": "../elsewhere"}, "outside the project"),
    ({"models": "/srv/models"}, "allow_outside"),
    ({"models": "..", "allow_outside": ["models"]}, "contains the project folder"),
    ({"rollouts": "data/problems/rollouts"}, "paths.problems ('data/problems') contains paths.rollouts"),
    ({"allow_outside": ["modles"]}, "did you mean models"),
    ({"catalog": "params.yaml"}, "must name a .duckdb file"),
])
def test_paths_stay_inside_the_project_unless_allowed(tmp_path, paths, needle):
    root = mini_repo(tmp_path / "r")
    set_params(root, paths=paths)
    one_line_error(run(root, "ingest", "--no-progress"), needle)
    assert not (root / "data").exists()


def test_an_allowed_outside_path_loads_but_never_one_containing_the_project(tmp_path):
    root = mini_repo(tmp_path / "r")
    set_params(root, paths={"models": str(tmp_path / "shared-models"), "allow_outside": ["models"]})
    assert load_params(root / "params.yaml").paths.models == str(tmp_path / "shared-models")
    set_params(root, paths={"models": str(tmp_path)})
    with pytest.raises(ConfigError, match="contains the project folder"):
        load_params(root / "params.yaml")


@pytest.mark.parametrize("key, value", [("verify.timeout_s", ".inf"), ("verify.timeout_s", ".nan"),
                                        ("verify.timeout_s", "-1"), ("verify.memory_mb", ".inf"),
                                        ("annotate.memory_limit_mb", ".inf"), ("rollout.k", ".inf"),
                                        ("policies.p.sampling.temperature", ".inf")])
def test_every_bound_is_finite_and_positive(tmp_path, key, value):
    root = mini_repo(tmp_path / "r")
    text = (root / "params.yaml").read_text()
    p = yaml.safe_load(text)
    *parents, last = key.split(".")
    node = p
    for k in parents:
        node = node.setdefault(k, {})
    node[last] = yaml.safe_load(value)
    (root / "params.yaml").write_text(yaml.safe_dump(p))
    one_line_error(run(root, "ingest", "--no-progress"), key)
    assert not (root / "data").exists()


def test_default_params_pass_the_path_checks():
    repo = Path(__file__).resolve().parent.parent
    assert load_params(repo / "params.yaml").paths.allow_outside == []
    assert load_params(repo / "experiments/band_value/params.yaml").paths.allow_outside == ["models"]
    with pytest.raises(ConfigError, match=r"paths\.models"):
        parse_params({**yaml.safe_load((repo / "params.yaml").read_text()), "paths": {"models": "/x"}})


# --- lock files and other writers that could follow a planted link --------------------------------

def _secret(path: Path) -> tuple[bytes, int]:
    path.write_bytes(THESIS)
    path.chmod(0o600)
    return path.read_bytes(), stat.S_IMODE(path.stat().st_mode)


def test_a_symlinked_lock_file_is_refused_never_truncated_or_chmod_ed(tmp_path):
    root = mini_repo(tmp_path / "r")
    secret = tmp_path / "secret"
    before = _secret(secret)
    (root / ".passband/locks").mkdir(parents=True)
    (root / ".passband/locks/ingest.lock").symlink_to(secret)
    one_line_error(run(root, "ingest", "--no-progress"), "ingest.lock", "symbolic link")
    assert (secret.read_bytes(), stat.S_IMODE(secret.stat().st_mode)) == before
    (root / ".passband/locks/ingest.lock").unlink()
    os.link(secret, root / ".passband/locks/ingest.lock")  # a hard link: refused as well
    one_line_error(run(root, "ingest", "--no-progress"), "hard link")
    assert (secret.read_bytes(), stat.S_IMODE(secret.stat().st_mode)) == before


def test_a_symlinked_lock_folder_is_refused(tmp_path):
    root = mini_repo(tmp_path / "r")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = _secret(elsewhere / "ingest.lock")
    (root / ".passband").mkdir()
    (root / ".passband/locks").symlink_to(elsewhere, target_is_directory=True)
    one_line_error(run(root, "ingest", "--no-progress"), "locks")
    assert ((elsewhere / "ingest.lock").read_bytes(), stat.S_IMODE((elsewhere / "ingest.lock").stat().st_mode)) == before


def test_an_atomic_write_replaces_a_planted_link_never_writes_through_it(tmp_path):
    root = mini_repo(tmp_path / "r")
    secret = tmp_path / "secret"
    before = _secret(secret)
    (root / "data/metrics").mkdir(parents=True)
    (root / "data/metrics/ingest.json").symlink_to(secret)
    assert run(root, "ingest", "--no-progress").exit_code == 0
    metrics = root / "data/metrics/ingest.json"
    assert not metrics.is_symlink() and json.loads(metrics.read_text())
    assert (secret.read_bytes(), stat.S_IMODE(secret.stat().st_mode)) == before


# --- doctor --repair -----------------------------------------------------------------------------

def test_doctor_repair_moves_nothing_out_of_a_table_folder_linked_outside(tmp_path):
    root = mini_repo(tmp_path / "r")
    assert run(root, "ingest", "--no-progress").exit_code == 0
    outside = tmp_path / "outside-rejects"
    (root / "data/rejects").rename(outside)
    (root / "data/rejects").symlink_to(outside, target_is_directory=True)
    (outside / "broken.parquet").write_bytes(b"PAR1 not really")
    theirs = snapshot(outside)
    res = run(root, "doctor", "--repair")
    assert res.exit_code == 1, res.output
    assert "OUTSIDE  data/rejects:" in res.output and "NOT MOVED data/rejects/broken.parquet" in res.output
    assert "doctor: moved 0 paths" in res.output and "left in place" in res.output.splitlines()[-1]
    assert snapshot(outside) == theirs
    assert not (root / ".passband/quarantine").exists() or not any((root / ".passband/quarantine").rglob("*.parquet"))
    res = run(root, "doctor")
    assert res.exit_code == 1 and "OUTSIDE" in res.output


def test_doctor_counts_only_the_moves_that_happened(tmp_path, monkeypatch):
    import shutil

    root = mini_repo(tmp_path / "r")
    assert run(root, "ingest", "--no-progress").exit_code == 0
    (root / "data/problems/broken.parquet").write_bytes(b"PAR1 not really")
    (root / "data/rejects/broken.parquet").write_bytes(b"PAR1 not really")
    real_move = shutil.move
    monkeypatch.setattr(shutil, "move", lambda src, dst: real_move(src, dst) if "problems" in src else dst)  # a silent no-op
    res = run(root, "doctor", "--repair")
    assert res.exit_code == 1, res.output
    assert "doctor: moved 1 path to" in res.output
    assert "NOT MOVED data/rejects/broken.parquet: it is still in place after the move" in res.output
    assert not (root / "data/problems/broken.parquet").exists() and (root / "data/rejects/broken.parquet").exists()


# --- the model folder and GRPO checkpoints ---------------------------------------------------------

def test_prepare_model_refuses_a_model_folder_it_did_not_write(tmp_path):
    root = mini_repo(tmp_path / "r")
    mine = root / "data/models/smollm2-135m-instruct"
    mine.mkdir(parents=True)
    (mine / "my-weights.bin").write_bytes(THESIS)
    one_line_error(run(root, "prepare-model"), "smollm2-135m-instruct", "passband_model.json")
    assert snapshot(mine) == {"my-weights.bin": THESIS}


def test_a_grpo_checkpoint_folder_it_did_not_train_is_refused_before_training(tmp_path):
    from pipeline.train.grpo import GrpoConfig, train_arm

    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "thesis.txt").write_bytes(THESIS)
    with pytest.raises(NotOwnedError, match=r"train_log\.json"):
        train_arm([{"question": "q", "answer": "1"}], model_dir=tmp_path / "none", out_dir=out, config=GrpoConfig(),
                  render=str)
    assert snapshot(out) == {"thesis.txt": THESIS}


# --- push: the repo's real visibility --------------------------------------------------------------

TOKEN = "hf_passbandHOSTILE" + hashlib.sha256(b"hostile").hexdigest()[:20]


def push(root: Path, hub: HubServer, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_HOME": str(tmp / "hf-home"), "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1",
                "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN})
    return subprocess.run([sys.executable, "-m", "pipeline", "push", "--repo-id", "o/d", *args,
                           "--params", str(root / "params.yaml")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)


def test_push_into_an_existing_public_repo_checks_its_real_visibility(pub, tmp_path):
    from hub_server import Repo

    assert run(pub, "publish").exit_code == 0
    with HubServer(token=TOKEN) as hub:
        hub.repos["o/d"] = Repo("o/d", private=False)  # made public earlier, by hand
        r = push(pub, hub, tmp_path)
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
        assert "already exists and is public" in r.stderr and "--set-visibility" in r.stderr
        assert hub.commits == [] and hub.repos["o/d"].private is False
        assert "(private)" not in r.stdout + r.stderr

        r = push(pub, hub, tmp_path, "--allow-visibility-mismatch")
        assert r.returncode == 0, r.stderr[-2000:]
        assert "existing repo, public" in r.stdout and "(private)" not in r.stdout
        assert len(hub.commits) == 1 and hub.repos["o/d"].private is False

        r = push(pub, hub, tmp_path, "--set-visibility")
        assert r.returncode == 0, r.stderr[-2000:]
        assert hub.settings_payloads == [{"visibility": "private"}] and hub.repos["o/d"].private is True
        assert "made private" in r.stdout

        r = push(pub, hub, tmp_path, "--public")  # now private: asking for public is the mismatch
        assert r.returncode == 1 and "already exists and is private" in r.stderr
        assert len(hub.commits) == 2 and hub.unknown == []


def test_a_new_repo_is_created_with_the_visibility_asked_for_and_read_back(pub, tmp_path):
    assert run(pub, "publish").exit_code == 0
    with HubServer(token=TOKEN) as hub:
        r = push(pub, hub, tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        assert hub.repos["o/d"].private is True and "created private" in r.stdout
        assert hub.unknown == []


@pytest.mark.parametrize("kind, proof, content", [
    ("published", "build.json", {"passband_version": "0.1.0"}),
    ("report", "report.json", {"passband_version": "0.1.0"}),
    ("model", "passband_model.json", {"model_id": "m", "revision": "sha256:0"}),
    ("checkpoint", "train_log.json", {"config": {}, "log": []}),
])
def test_each_kinds_proof_is_accepted_and_a_lookalike_is_not(tmp_path, kind, proof, content):
    from pipeline import ownership as own

    owned = {"published": own.published_proof, "report": own.report_proof, "model": own.model_proof,
             "checkpoint": own.checkpoint_proof}[kind]
    folder = tmp_path / kind
    folder.mkdir()
    (folder / "other.bin").write_bytes(THESIS)
    (folder / proof).write_text(json.dumps({"something": "else"}))  # the right name, not passband's content
    with pytest.raises(NotOwnedError, match=re.escape(proof)):
        own.check_target(folder, owned=owned, what=f"the {kind} folder")
    (folder / proof).write_text(json.dumps(content))
    assert own.check_target(folder, owned=owned, what=f"the {kind} folder") is True
    assert own.check_target(tmp_path / "absent", owned=owned, what="x") is False


@pytest.mark.parametrize("case", ["nul", "loop", "through a file", "through a file, deeper"])
def test_a_configured_path_with_a_nul_a_link_loop_or_a_file_in_it_is_one_line(tmp_path, case):
    root = mini_repo(tmp_path / "repo")
    (root / "loop").symlink_to("loop")
    (root / "afile").write_text("x")
    value, needle = {"nul": ("data/pro\0blems", "NUL byte"),
                     "loop": ("loop/problems", "Too many levels of symbolic links"),
                     "through a file": ("afile/problems", "which is a file, not a folder"),
                     "through a file, deeper": ("afile/x/problems", "which is a file, not a folder")}[case]
    set_params(root, paths={"problems": value})
    before = snapshot(root)
    one_line_error(run(root, "ingest", "--no-progress"), f"paths.problems: {value!r}", needle)
    assert snapshot(root) == before
