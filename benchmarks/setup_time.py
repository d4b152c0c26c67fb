"""The set-up, cold and warm, with each installer, side by side in one run; and the README's main job on a fresh clone.

Each arm is a fresh clone (``git clone`` of this repository at a revision, ``../shared`` beside it) that runs
``bash .ci/setup`` twice: **cold**, with an empty download cache of its own (``UV_CACHE_DIR`` / ``PIP_CACHE_DIR``
pointed at a new folder), then **warm**, ``.venv`` removed and the same cache kept (a second clone on the same
machine). The arms:

- ``uv``: this revision's set-up (``uv pip sync`` of ``.ci/locks/cpu.txt``);
- ``pip``: the same lock installed by pip (``PASSBAND_INSTALLER=pip``);
- ``before``: the set-up before the lock (``--before REV``, default 19dfbf3: pip resolving the extras each time).

``freeze``: a digest of the venv's ``pip freeze --all`` (every pinned distribution): two arms that installed the
same lock from different empty caches show the same digest. With ``--main-job`` the uv and before arms then
run the README's main command after the warm set-up (``. .venv/bin/activate && dvc repro --quiet``) and report
set-up + repro against the 6-minute goal, and ``git status`` after it (a fresh clone's repro must leave it clean).

    .venv/bin/python benchmarks/setup_time.py [--main-job] [--arms uv pip before] [--keep]

Prints a table and writes benchmarks/out/setup_time.json. Run it on a quiet box: the set-ups are CPU- and disk-bound.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out" / "setup_time.json"


def sh(cmd: str, cwd: Path, env: dict[str, str], log: Path) -> float:
    """Run ``cmd`` in bash; its wall seconds. Output goes to ``log``; a failure raises with the log's tail."""
    t = time.perf_counter()
    with log.open("a") as f:
        f.write(f"\n$ {cmd}\n")
        f.flush()
        proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{cmd!r} failed in {cwd} (rc {proc.returncode}):\n{log.read_text()[-3000:]}")
    return seconds


def arm(name: str, rev: str, base: Path, main_job: bool) -> dict:
    root = base / name
    clone = root / "passband"
    root.mkdir()
    (root / "shared").symlink_to(REPO.parent / "shared")
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", rev], cwd=clone, check=True)
    cache = root / "cache"
    cache.mkdir()
    # as a user runs it: no PASSBAND_ knobs, no venv active, and Python writing bytecode (an agent's or CI's shell may
    # set PYTHONDONTWRITEBYTECODE, which makes every process compile what it imports again)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PASSBAND_", "VIRTUAL_ENV")) and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(UV_CACHE_DIR=str(cache / "uv"), PIP_CACHE_DIR=str(cache / "pip"))
    if name == "pip":
        env["PASSBAND_INSTALLER"] = "pip"
    log = root / "log.txt"
    out = {"arm": name, "rev": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                                             text=True, check=True).stdout.strip()}
    out["cold_s"] = round(sh("bash .ci/setup", clone, env, log), 1)
    shutil.rmtree(clone / ".venv")
    out["warm_s"] = round(sh("bash .ci/setup", clone, env, log), 1)
    out["cache_mb"] = round(sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 2**20)
    freeze = subprocess.run([str(clone / ".venv/bin/python"), "-m", "pip", "freeze", "--all"], capture_output=True,
                            text=True, env=env).stdout.split("\n")
    pinned = sorted(line for line in freeze if "==" in line)  # passband itself is an editable line, not a pin
    out["distributions"] = len(pinned)
    out["freeze_sha256"] = hashlib.sha256("\n".join(pinned).encode()).hexdigest()[:16]
    if main_job:
        out["repro_s"] = round(sh(". .venv/bin/activate && dvc repro --quiet", clone, env, log), 1)
        out["main_job_s"] = round(out["warm_s"] + out["repro_s"], 1)
        status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
        out["git_status_after"] = status.strip().splitlines()
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", nargs="+", default=["uv", "pip", "before"], choices=["uv", "pip", "before"])
    ap.add_argument("--before", default="19dfbf3", help="the revision whose set-up is 'before' (pip, no lock)")
    ap.add_argument("--main-job", action="store_true", help="also run dvc repro after the warm set-up (uv, before)")
    ap.add_argument("--keep", action="store_true", help="keep the clones (under the printed folder)")
    args = ap.parse_args()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    base = Path(tempfile.mkdtemp(prefix="setup_time-", dir="/tmp"))
    print(f"clones under {base}", flush=True)
    rows = []
    try:
        for name in args.arms:
            rev = args.before if name == "before" else head.strip()
            rows.append(arm(name, rev, base, args.main_job and name != "pip"))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"\n{'arm':8} {'rev':9} {'cold s':>7} {'warm s':>7} {'cache MB':>9} {'dists':>6} {'freeze':>17} {'repro s':>8} "
          f"{'main job s':>11}")
    for r in rows:
        print(f"{r['arm']:8} {r['rev']:9} {r['cold_s']:7.1f} {r['warm_s']:7.1f} {r['cache_mb']:9} {r['distributions']:6} "
              f"{r['freeze_sha256']:>17} {r.get('repro_s', float('nan')):8.1f} {r.get('main_job_s', float('nan')):11.1f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
