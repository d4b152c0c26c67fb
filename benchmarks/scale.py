"""passband's own stages at a GPU node's size, by replay: wall, CPU and memory per rollout at three sizes.

    .venv/bin/python benchmarks/scale.py --sizes 600 3000 15000 --k 16      # docs/scale.md's figures
    .venv/bin/python benchmarks/scale.py --sizes 40 --k 4                   # a quick look
    .venv/bin/python benchmarks/scale.py --sizes 600 3000 --resume-grow 3000   # + the kill -9 and +5 % checks
    .venv/bin/python benchmarks/scale.py --sizes 300 1200 --rerun publish catalog  # again on jobs --keep left
    .venv/bin/python benchmarks/scale.py --sizes 3000 --node-rate 100000 --concurrency 256  # +5 % at a node's rate

For each size N it builds a job under ``benchmarks/out/scale/N/``: N constructed word problems (a GSM8K-format
JSONL the ``gsm8k`` source reads, golds known), a policy served by ``benchmarks/replay_server.py`` (its own
process, answering as fast as it can: latency 0, no decode time, so what is measured is passband's side), and
runs each stage as ``passband <stage>`` in a fresh process: ingest -> rollout (``openai`` engine, k samples a
problem) -> verify -> annotate -> catalog -> publish. Per stage and size it prints wall time, rollouts/s, CPU
seconds per rollout (the stage's process and the processes it waited for), peak RSS of the process tree (the
sum of its processes' resident sets, sampled every 0.1 s, and the stage process's own VmHWM), bytes on disk
per rollout of what the stage wrote, and its ratio to the stage's limit, measured in the same run:

- rollout: a plain async aiohttp client (its own process) posting the same request bodies to the same server at
  the same concurrency: raw wall / stage generation time (goal >= 0.9);
- verify: raw ``math_verify.verify(parse(gold), parse(completion))`` on a sample of the same pairs in one
  process: stage rollouts per CPU-second / raw pairs per CPU-second (goal >= 1.0);
- annotate: a DuckDB scan of the completion text (length and a LIKE over every completion, same memory limit):
  stage wall / scan wall (reported);
- catalog, publish: pyarrow reading every table of the job: stage wall / read wall.

``--resume-grow N`` (at size N; docs/scale.md runs it at the middle size) then checks, in a second job
folder: rollout killed with SIGKILL once half its shards are written, rerun: the server is asked for exactly
the samples not on disk, the shards written before the kill are untouched and the table equals the
uninterrupted run's. Then, in the measured job, 5 % more problems: ingest, rollout, verify, annotate again;
only the new problems' samples are requested and verified, with the time of each against the full run.
Results go to ``benchmarks/out/scale/results.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

OUT = REPO / "benchmarks" / "out" / "scale"
PASSBAND = [sys.executable, "-m", "pipeline"]
NAMES = [("Mia", "She"), ("Tom", "He"), ("Ana", "She"), ("Leo", "He"), ("Zoe", "She"), ("Sam", "He")]
THINGS = ["pens", "apples", "books", "marbles", "coins", "stickers"]
TABLES = ("problems", "rollouts", "verdicts", "flags", "difficulty", "policies")
WRITES = {"ingest": ["problems", "rejects"], "rollout": ["rollouts", "policies"], "verify": ["verdicts"],
          "annotate": ["flags", "difficulty"], "catalog": ["passband.duckdb"], "publish": ["published"]}


# --- the job --------------------------------------------------------------------------------------


def write_source(path: Path, start: int, stop: int) -> None:
    """Problems start..stop-1 as GSM8K rows: distinct questions (the first number is 40 + i), golds by construction."""
    r = random.Random(0)
    rows = []
    for i in range(stop):
        name, pron = NAMES[i % len(NAMES)]
        thing = THINGS[(i // len(NAMES)) % len(THINGS)]
        a, b = 40 + i, r.randint(2, 60)
        c = r.randint(1, a)
        if i < start:
            continue
        q = (f"{name} has {a} {thing}. {pron} buys {b} more and then gives {c} to a friend. "
             f"How many {thing} does {name} have now?")
        rows.append(json.dumps({"question": q, "answer": f"{a} + {b} = {a + b}. {a + b} - {c} = {a + b - c}.\n"
                                                          f"#### {a + b - c}"}))
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(r + "\n" for r in rows))


def write_params(job: Path, url: str, *, k: int, concurrency: int, memory_mb: int) -> Path:
    import yaml

    params = {
        "ingest": {"sources": [{"name": "scale", "kind": "gsm8k", "path": "source.jsonl", "split": "train"}]},
        "policies": {"replay": {"model": "replay", "revision": "r1", "engine": "openai", "prompt": "zeroshot_boxed",
                                "thinking": "auto",
                                "sampling": {"temperature": 0.6, "top_p": 0.95, "max_tokens": 16384}}},
        "rollout": {"policies": ["replay"], "k": k,
                    "engine_options": {"openai": {"base_url": url, "concurrency": concurrency}}},
        "annotate": {"memory_limit_mb": memory_mb},
        "publish": {"licenses": {"gsm8k": "mit"}},
    }
    path = job / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


class Server:
    """The replay server in its own process, on the job's golds."""

    def __init__(self, golds: Path, *, concurrency: int, token_rate: float = 0.0) -> None:
        self.proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "replay_server.py"), "--golds", str(golds),
                                      "--concurrency", str(concurrency), "--token-rate", str(token_rate),
                                      "--idle-timeout", "900"],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"replay server did not start: {line!r}")
        self.url = line.split()[-1]

    def stats(self) -> dict:
        import httpx

        return httpx.get(self.url.removesuffix("/v1") + "/stats", timeout=30).json()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def golds_file(job: Path) -> Path:
    from pipeline.io import read_table

    t = read_table(job / "data" / "problems", name="problems", columns=["question", "answer"])
    path = job / "golds.jsonl"
    path.write_text("".join(json.dumps({"question": q, "gold": a}) + "\n"
                            for q, a in zip(t.column("question").to_pylist(), t.column("answer").to_pylist(), strict=True)))
    return path


# --- measuring one process ------------------------------------------------------------------------


def measure(cmd: list[str], *, cwd: Path, kill_when=None) -> dict:
    """Run ``cmd``; its wall, CPU (it and the processes it waited for), tree peak RSS (sampled) and own VmHWM."""
    import psutil
    from peak import hwm_kib

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    root = psutil.Process(proc.pid)
    peak_tree = own_hwm = 0
    killed = False
    while proc.poll() is None:
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            procs = []
        rss = 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                rss += p.memory_info().rss
        peak_tree = max(peak_tree, rss)
        own_hwm = max(own_hwm, hwm_kib(proc.pid) * 1024)
        if kill_when is not None and not killed and kill_when():
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
        time.sleep(0.1)
    out = proc.stdout.read()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0 and not killed:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-3000:]}")
    return {"wall_s": wall, "cpu_s": cpu, "peak_tree_mib": peak_tree / 2**20, "peak_own_mib": own_hwm / 2**20,
            "output": out.strip().splitlines()[-3:], "killed": killed}


def stage(name: str, job: Path, *extra: str, **kw) -> dict:
    args = {"ingest": ["--no-progress"], "rollout": ["--no-progress"], "verify": ["--no-progress"],
            "annotate": ["--no-progress", "--no-plots"]}.get(name, [])
    return measure([*PASSBAND, name, "--params", str(job / "params.yaml"), *args, *extra], cwd=job, **kw)


def dir_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def text_zstd_bytes(rollouts: Path) -> tuple[int, int]:
    """(raw bytes, zstd bytes) of the completion text, shard by shard (zstd's default level, as Parquet writes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    codec = pa.Codec("zstd")
    raw = packed = 0
    for path in sorted(rollouts.glob("*.parquet")):
        text = "\0".join(pq.read_table(path, columns=["completion"]).column("completion").to_pylist()).encode()
        raw += len(text)
        packed += codec.compress(text).size
    return raw, packed


# --- the limits -----------------------------------------------------------------------------------


def request_bodies(job: Path, path: Path) -> int:
    """The rollout stage's request bodies (same prompts, seeds, sampling) as JSONL: what a plain client sends."""
    from pipeline.engines import create_engine
    from pipeline.io import read_table
    from pipeline.params_loader import load_params
    from pipeline.rollout.core import plan, requests_for
    from pipeline.rollout.policy import resolve_policy

    params = load_params(job / "params.yaml")
    policy = resolve_policy("replay", params.policies["replay"], models_dir=job / params.paths.models)
    problems = read_table(job / "data" / "problems", name="problems")
    engine = create_engine("openai", policy.model, params.rollout.engine_options["openai"], root=job)
    n = 0
    with path.open("w") as fh:
        for req in requests_for(policy, plan(problems, k=params.rollout.k, existing=set())):
            for seed in req.seeds:
                endpoint, body = engine.body(req, seed)
                fh.write(json.dumps([endpoint, body]) + "\n")
                n += 1
    return n


async def _raw_client(url: str, bodies: list, concurrency: int) -> int:
    """The plain client: ``concurrency`` workers on one aiohttp session, each posting and reading the text."""
    import aiohttp

    todo = iter(bodies)
    chars = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def worker() -> None:
            nonlocal chars
            for endpoint, body in todo:
                async with session.post(url + endpoint, json=body) as r:
                    r.raise_for_status()
                    choice = (await r.json())["choices"][0]
                chars += len(choice["message"]["content"] if "message" in choice else choice["text"])

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return chars


def raw_client_main(url: str, bodies_path: Path, concurrency: int) -> None:
    bodies = [json.loads(line) for line in bodies_path.read_text().splitlines()]
    t0, c0 = time.perf_counter(), time.process_time()
    chars = asyncio.run(_raw_client(url, bodies, concurrency))
    print(json.dumps({"requests": len(bodies), "chars": chars, "wall_s": time.perf_counter() - t0,
                      "cpu_s": time.process_time() - c0}))


def raw_verify_main(job: Path, n: int) -> None:
    """Raw math-verify on ``n`` (gold, completion) pairs of the job, one process: pairs per CPU-second."""
    import duckdb
    from math_verify import parse, verify

    con = duckdb.connect()
    rows = con.execute(f"""SELECT p.answer, r.completion FROM read_parquet('{job}/data/rollouts/*.parquet') r
                           JOIN read_parquet('{job}/data/problems/*.parquet') p USING (problem_id)
                           USING SAMPLE {n} ROWS (reservoir, 7)""").fetchall()
    t0, c0 = time.perf_counter(), time.process_time()
    correct = 0
    for gold, text in rows:
        with contextlib.suppress(Exception):  # a raw caller's failure is a wrong answer, as math-verify's default
            correct += bool(verify(parse(gold), parse(text)))
    print(json.dumps({"pairs": len(rows), "correct": correct, "wall_s": time.perf_counter() - t0,
                      "cpu_s": time.process_time() - c0}))


def raw_scan_main(job: Path, memory_mb: int) -> None:
    import duckdb

    con = duckdb.connect(config={"memory_limit": f"{memory_mb}MB"})
    t0, c0 = time.perf_counter(), time.process_time()
    row = con.execute(f"""SELECT count(*), sum(strlen(completion)), count(*) FILTER (WHERE completion LIKE '%\\boxed{{%')
                          FROM read_parquet('{job}/data/rollouts/*.parquet')""").fetchone()
    print(json.dumps({"rows": row[0], "chars": row[1], "boxed": row[2], "wall_s": time.perf_counter() - t0,
                      "cpu_s": time.process_time() - c0}))


def raw_read_main(job: Path) -> None:
    import pyarrow.parquet as pq

    t0, c0 = time.perf_counter(), time.process_time()
    rows = 0
    for t in TABLES:
        for path in sorted((job / "data" / t).glob("*.parquet")):
            rows += pq.ParquetFile(path).read().num_rows  # one file at a time: what a streaming reader holds
    print(json.dumps({"rows": rows, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}))


def helper(*args: str, cwd: Path) -> dict:
    res = measure([sys.executable, str(Path(__file__).resolve()), *args], cwd=cwd)
    return {**json.loads(res["output"][-1]), "peak_tree_mib": res["peak_tree_mib"], "proc_wall_s": res["wall_s"]}


# --- one size -------------------------------------------------------------------------------------


def metrics(job: Path, stage_name: str) -> dict:
    """A stage's metrics file with its timings (data/logs/timings/) merged in."""
    out = {}
    for path in (job / "data" / "metrics" / f"{stage_name}.json", job / "data" / "logs" / "timings" / f"{stage_name}.json"):
        if path.exists():
            out.update(json.loads(path.read_text()))
    return out


def run_size(n: int, args) -> dict:
    job = OUT / str(n)
    shutil.rmtree(job, ignore_errors=True)
    job.mkdir(parents=True)
    write_source(job / "source.jsonl", 0, n)
    write_params(job, "http://127.0.0.1:9/v1", k=args.k, concurrency=args.concurrency, memory_mb=args.memory_mb)
    res: dict = {"problems": n, "k": args.k, "stages": {}}
    res["stages"]["ingest"] = stage("ingest", job)
    server = Server(golds_file(job), concurrency=args.server_concurrency)
    try:
        write_params(job, server.url, k=args.k, concurrency=args.concurrency, memory_mb=args.memory_mb)
        print(f"[{n}] rollout ...", flush=True)
        res["stages"]["rollout"] = stage("rollout", job)
        rollouts = n * args.k
        res["rollouts"] = rollouts
        gen_s = metrics(job, "rollout").get("seconds") or res["stages"]["rollout"]["wall_s"]
        bodies = job / "bodies.jsonl"
        request_bodies(job, bodies)
        raw = helper("--raw-client", server.url, str(bodies), str(args.concurrency), cwd=job)
        bodies.unlink()
        res["stages"]["rollout"]["limit"] = raw
        res["stages"]["rollout"]["generate_s"] = gen_s
        res["stages"]["rollout"]["ratio"] = raw["wall_s"] / gen_s  # >= 0.9: the stage as fast as a plain client
        if args.check:
            res["resume"] = resume_check(n, job, server, args)
    finally:
        server.close()
    print(f"[{n}] verify ...", flush=True)
    res["stages"]["verify"] = v = stage("verify", job)
    raw = helper("--raw-verify", str(job), str(args.verify_sample), cwd=job)
    v["limit"] = raw
    v["ratio"] = (rollouts / v["cpu_s"]) / (raw["pairs"] / raw["cpu_s"])  # per CPU-second: >= 1.0
    print(f"[{n}] annotate ...", flush=True)
    res["stages"]["annotate"] = a = stage("annotate", job)
    raw = helper("--raw-scan", str(job), str(args.memory_mb), cwd=job)
    a["limit"] = raw
    a["ratio"] = a["wall_s"] / raw["proc_wall_s"]
    for name in ("catalog", "publish"):
        try:
            res["stages"][name] = stage(name, job)
        except RuntimeError as exc:  # recorded, and the other figures kept: a failure at size is a finding
            res.setdefault("failed", {})[name] = str(exc).strip().splitlines()[-1]
            print(f"[{n}] {name} FAILED: {res['failed'][name]}", flush=True)
    raw = helper("--raw-read", str(job), cwd=job)
    for name in ("catalog", "publish"):
        if name in res["stages"]:
            res["stages"][name]["limit"] = raw
            res["stages"][name]["ratio"] = res["stages"][name]["wall_s"] / raw["proc_wall_s"]
    for name, s in res["stages"].items():
        s["bytes"] = sum(dir_bytes(job / "data" / w) for w in WRITES.get(name, []))
    text_raw, text_zstd = text_zstd_bytes(job / "data" / "rollouts")
    res["text_bytes"], res["text_zstd_bytes"] = text_raw, text_zstd
    res["rollouts_disk_vs_text_zstd"] = dir_bytes(job / "data" / "rollouts") / text_zstd
    if args.check:
        res["grow"] = grow_check(n, job, res, args)
    if not args.keep:
        shutil.rmtree(job / "data", ignore_errors=True)
    return res


def paced_size(n: int, args) -> dict:
    """The +5 % check with generation at a GPU node's rate (``--node-rate``): a job of ``n`` problems from scratch
    (ingest, rollout against the server paced at the node's tokens/s, verify, annotate), then 5 % more problems
    (:func:`grow_check`, the same pace), each stage's wall against the full run's. Only that is measured here: the
    limits, the kill -9 and the memory figures are the unpaced run's."""
    job = OUT / f"{n}-paced"
    shutil.rmtree(job, ignore_errors=True)
    job.mkdir(parents=True)
    write_source(job / "source.jsonl", 0, n)
    write_params(job, "http://127.0.0.1:9/v1", k=args.k, concurrency=args.concurrency, memory_mb=args.memory_mb)
    res: dict = {"problems": n, "k": args.k, "node_rate": args.node_rate, "token_rate": args.token_rate,
                 "concurrency": args.concurrency, "stages": {}}
    res["stages"]["ingest"] = stage("ingest", job)
    server = Server(golds_file(job), concurrency=args.server_concurrency, token_rate=args.token_rate)
    try:
        write_params(job, server.url, k=args.k, concurrency=args.concurrency, memory_mb=args.memory_mb)
        print(f"[{n} paced] rollout at {args.node_rate:.0f} tokens/s ...", flush=True)
        res["stages"]["rollout"] = stage("rollout", job)
        res["tokens"] = server.stats().get("tokens")
    finally:
        server.close()
    res["rollouts"] = n * args.k
    for name in ("verify", "annotate"):
        print(f"[{n} paced] {name} ...", flush=True)
        res["stages"][name] = stage(name, job)
    res["grow"] = grow_check(n, job, res, args)
    print(f"[{n} paced] +5 %: {res['grow']['all_vs_full']:.3f} of the full run", flush=True)
    for s in res["stages"].values():
        s.pop("output", None)
    if not args.keep:
        shutil.rmtree(job / "data", ignore_errors=True)
    return res


def rerun_size(n: int, args) -> dict:
    """Only ``args.rerun``'s stages (catalog, publish) again on the kept job of size ``n``, with the same limit."""
    job = OUT / str(n)
    if not (job / "data" / "rollouts").is_dir():
        raise SystemExit(f"{job} holds no kept job: build it first with --sizes {n} --keep")
    res: dict = {"problems": n, "k": args.k, "rollouts": _rows(job / "data" / "rollouts"), "stages": {}}
    raw = helper("--raw-read", str(job), cwd=job)
    for name in args.rerun:
        print(f"[{n}] {name} ...", flush=True)
        try:
            res["stages"][name] = s = stage(name, job)
        except RuntimeError as exc:
            res.setdefault("failed", {})[name] = str(exc).strip().splitlines()[-1]
            print(f"[{n}] {name} FAILED: {res['failed'][name]}", flush=True)
            continue
        s["limit"], s["ratio"] = raw, s["wall_s"] / raw["proc_wall_s"]
        s["bytes"] = sum(dir_bytes(job / "data" / w) for w in WRITES.get(name, []))
    return res


def _rows(directory: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in directory.glob("*.parquet"))


def resume_check(n: int, job: Path, server: Server, args) -> dict:
    """kill -9 the rollout at half its shards, rerun: only the missing samples asked for, nothing rewritten or lost."""

    sub = OUT / f"{n}-resume"
    shutil.rmtree(sub, ignore_errors=True)
    sub.mkdir(parents=True)
    shutil.copy(job / "source.jsonl", sub / "source.jsonl")
    shutil.copytree(job / "data" / "problems", sub / "data" / "problems")
    write_params(sub, server.url, k=args.k, concurrency=args.concurrency, memory_mb=args.memory_mb)
    shards = -(-n // 64)  # rollout.shard_size's default
    out = sub / "data" / "rollouts"
    first = stage("rollout", sub, kill_when=lambda: len(list(out.glob("*.parquet"))) >= shards // 2)
    kept = {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")}
    rows_kept = _rows(out)
    before = server.stats()["completions"]
    second = stage("rollout", sub)
    asked = server.stats()["completions"] - before
    untouched = all(p.stat().st_mtime_ns == kept[p.name] for p in out.glob("*.parquet") if p.name in kept)
    # compared in DuckDB, out of core: 240,000 completions are ~2.5 GB of text, past one Arrow string array's offsets
    import duckdb

    con = duckdb.connect()
    con.execute("SET memory_limit = '512MB'")
    rows = "SELECT problem_id, sample_idx, seed, md5(completion) AS h FROM read_parquet({!r})"
    a_sql, b_sql = rows.format(str(out / "*.parquet")), rows.format(str(job / "data" / "rollouts" / "*.parquet"))
    n_a, n_b = (con.execute(f"SELECT count(*) FROM ({q})").fetchone()[0] for q in (a_sql, b_sql))
    differ = con.execute(f"SELECT count(*) FROM (({a_sql} EXCEPT ALL {b_sql}) UNION ALL ({b_sql} EXCEPT ALL {a_sql}))"
                         ).fetchone()[0]
    same = n_a == n_b and differ == 0
    shutil.rmtree(sub, ignore_errors=True)
    res = {"killed": first["killed"], "rows_at_kill": rows_kept, "shards_at_kill": len(kept),
           "asked_on_rerun": asked, "expected_asked": n * args.k - rows_kept, "kept_shards_untouched": untouched,
           "final_rows": n_a, "equal_to_uninterrupted": same, "rerun_wall_s": second["wall_s"]}
    print(f"[{n}] resume: {res}", flush=True)
    return res


GROW_STAGES = ("ingest", "rollout", "verify", "annotate")  # what a +5 % rerun runs again before catalog and publish


def grow_check(n: int, job: Path, full: dict, args) -> dict:
    """5 % more problems: ingest, rollout, verify, annotate again; only the new ones are sampled and verified."""
    extra = max(1, n // 20)
    write_source(job / "source.jsonl", n, n + extra)
    ingest = stage("ingest", job)
    server = Server(golds_file(job), concurrency=args.server_concurrency, token_rate=args.token_rate)
    try:
        write_params(job, server.url, k=args.k, concurrency=args.concurrency, memory_mb=args.memory_mb)
        rollout = stage("rollout", job)
        asked = server.stats()["completions"]
    finally:
        server.close()
    verify = stage("verify", job)
    verified = metrics(job, "verify").get("verdicts")
    annotate = stage("annotate", job)
    walls = {"ingest": ingest["wall_s"], "rollout": rollout["wall_s"], "verify": verify["wall_s"],
             "annotate": annotate["wall_s"]}
    res = {"new_problems": extra, "asked": asked, "expected": extra * args.k, "verified": verified,
           "difficulty_rows": _rows(job / "data" / "difficulty"), "walls": walls,
           "wall_vs_full": {s: round(w / full["stages"][s]["wall_s"], 3) for s, w in walls.items()},
           "all_vs_full": round(sum(walls.values()) / sum(full["stages"][s]["wall_s"] for s in GROW_STAGES), 3)}
    print(f"[{n}] grow: {res}", flush=True)
    return res


def annotate_check(source: Path, args) -> dict:
    """annotate on a kept job's verified tables (``--annotate-job``): one core against every core, both from scratch
    (the 1 -> 2 core speedup), then the job less 5 % of its problems annotated and those 5 % added: the incremental
    rerun's wall against the full run's, and its outputs against the full run's (the same rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import yaml

    job = OUT / f"annotate-{source.name}"
    shutil.rmtree(job, ignore_errors=True)
    (job / "data").mkdir(parents=True)
    params = yaml.safe_load((source / "params.yaml").read_text())
    shutil.copytree(source / "data" / "problems", job / "data" / "problems")
    tables = {t: pq.read_table(source / "data" / t) for t in ("rollouts", "verdicts")}
    pids = sorted(set(tables["verdicts"].column("problem_id").to_pylist()))
    held = pa.array(pids[: max(1, len(pids) // 20)])  # the "new" 5 %

    def write(t: str, part: int, table) -> None:
        (job / "data" / t).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, job / "data" / t / f"part-{part}.parquet", compression="zstd")

    def annotate(workers: int, incremental: bool) -> dict:
        params["annotate"] = {**params.get("annotate", {}), "workers": workers, "incremental": incremental}
        (job / "params.yaml").write_text(yaml.safe_dump(params))
        m = stage("annotate", job)
        m["metrics"] = metrics(job, "annotate")
        return m

    def outputs() -> tuple:
        return tuple(pq.read_table(job / "data" / t / "part-0.parquet") for t in ("flags", "difficulty"))

    for t, table in tables.items():  # the whole job first
        write(t, 0, table)
    n = tables["verdicts"].num_rows
    print(f"[annotate {source.name}] {n} verdicts: 1 worker ...", flush=True)
    one = annotate(1, False)
    print(f"[annotate {source.name}] 2 workers ...", flush=True)
    two = annotate(args.annotate_workers, False)
    full = outputs()
    for t in ("flags", "difficulty"):
        shutil.rmtree(job / "data" / t)
    for t, table in tables.items():  # the job less 5 %, then the 5 % as a shard of their own
        new = pc.is_in(table.column("problem_id"), held)
        write(t, 0, table.filter(pc.invert(new)))
    print(f"[annotate {source.name}] 95 % ...", flush=True)
    before = annotate(args.annotate_workers, True)
    for t, table in tables.items():
        write(t, 1, table.filter(pc.is_in(table.column("problem_id"), held)))
    print(f"[annotate {source.name}] +5 % incremental ...", flush=True)
    grow = annotate(args.annotate_workers, True)
    same = all(a.equals(b) for a, b in zip(outputs(), full, strict=True))
    res = {"rollouts": n, "one_worker": one, "workers": args.annotate_workers, "all_workers": two, "before": before,
           "grow": grow, "speedup_wall": one["wall_s"] / two["wall_s"],
           "grow_wall_vs_full": grow["wall_s"] / two["wall_s"], "grow_cpu_vs_full": grow["cpu_s"] / two["cpu_s"],
           "grow_equal_to_full": same}
    for m in (one, two, before, grow):
        m.pop("output", None)
    print(json.dumps({k: v for k, v in res.items() if not isinstance(v, dict)}), flush=True)
    for name, m in (("1 worker", one), (f"{args.annotate_workers} workers", two), ("95 %", before),
                    ("+5 % incremental", grow)):
        print(f"  {name}: wall {m['wall_s']:.1f} s, CPU {1000 * m['cpu_s'] / n:.2f} ms/rollout, peak tree "
              f"{m['peak_tree_mib']:.0f} MiB (own {m['peak_own_mib']:.0f}), reused groups "
              f"{m['metrics'].get('reused_groups')}", flush=True)
    return res


# --- the report -----------------------------------------------------------------------------------


def table(results: list[dict]) -> str:
    """The figures per size and stage; "marginal" is the CPU of the rollouts a size adds to the one before it,
    (CPU - CPU before) / (rollouts - rollouts before): the per-rollout cost without the stage's fixed start-up
    (imports, worker pools), which a small job's per-rollout figure mostly is."""
    head = ("| size | stage | wall s | rollouts/s | CPU ms/rollout | marginal CPU ms/rollout | peak RSS tree MiB "
            "| own MiB | disk B/rollout | vs limit |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    before: dict[str, tuple[int, float]] = {}
    for r in sorted(results, key=lambda r: r["rollouts"]):
        n = r["rollouts"]
        for name, s in r["stages"].items():
            ratio = f"{s['ratio']:.2f}" if "ratio" in s else ""
            m0 = before.get(name)
            marginal = f"{1000 * (s['cpu_s'] - m0[1]) / (n - m0[0]):.2f}" if m0 and n > m0[0] else ""
            before[name] = (n, s["cpu_s"])
            lines.append(f"| {r['problems']} x {r['k']} | {name} | {s['wall_s']:.1f} | {n / s['wall_s']:.0f} | "
                         f"{1000 * s['cpu_s'] / n:.2f} | {marginal} | {s['peak_tree_mib']:.0f} | {s['peak_own_mib']:.0f} | "
                         f"{s.get('bytes', 0) / n:.0f} | {ratio} |")
    return "\n".join(lines)


def plot(results: list[dict], path: Path) -> None:
    """CPU ms per rollout and peak RSS of each stage against the job's size (matplotlib, a PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name in results[0]["stages"]:
        ran = [r for r in results if name in r["stages"]]  # a stage that failed at a size has no point there
        sizes = [r["rollouts"] for r in ran]
        a.plot(sizes, [1000 * r["stages"][name]["cpu_s"] / r["rollouts"] for r in ran], marker="o", label=name)
        b.plot(sizes, [r["stages"][name]["peak_tree_mib"] for r in ran], marker="o", label=name)
    a.set(xscale="log", yscale="log", xlabel="rollouts", ylabel="CPU ms per rollout", title="cost per rollout")
    b.set(xscale="log", xlabel="rollouts", ylabel="MiB", title="peak RSS of the process tree")
    b.axhline(2048, color="grey", linestyle="--", linewidth=0.8)
    a.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--raw-client":
        raw_client_main(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--raw-verify":
        raw_verify_main(Path(sys.argv[2]), int(sys.argv[3]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--raw-scan":
        raw_scan_main(Path(sys.argv[2]), int(sys.argv[3]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--plot":  # --plot RESULTS.json OUT.png
        plot(json.loads(Path(sys.argv[2]).read_text()), Path(sys.argv[3]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--raw-read":
        raw_read_main(Path(sys.argv[2]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[600, 3000, 15000], help="problems per size")
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--concurrency", type=int, default=64, help="the openai engine's (and the raw client's)")
    p.add_argument("--server-concurrency", type=int, default=256)
    p.add_argument("--memory-mb", type=int, default=512, help="annotate.memory_limit_mb (and the raw scan's)")
    p.add_argument("--verify-sample", type=int, default=1000, help="pairs raw math-verify grades")
    p.add_argument("--resume-grow", type=int, nargs="*", default=None,
                   help="the kill -9 and +5 %% checks at these sizes (no value: every size)")
    p.add_argument("--keep", action="store_true", help="keep each job's data/ (default: removed after its size)")
    p.add_argument("--json-out", type=Path, default=OUT / "results.json")
    p.add_argument("--annotate-job", type=Path, nargs="+", default=None,
                   help="kept jobs (--keep) whose verified tables annotate is measured on (1 vs --annotate-workers "
                        "workers, +5 %% incremental); nothing else runs")
    p.add_argument("--annotate-workers", type=int, default=2)
    p.add_argument("--grow-only", type=int, default=None, metavar="N",
                   help="only the +5 %% check, on the job of N problems that --keep left, against that size's full "
                        "run in --json-out (appended to it as grow_only)")
    p.add_argument("--node-rate", type=float, default=0.0, metavar="TOKENS_PER_S",
                   help="only the +5 %% check at --sizes, on jobs of their own (N-paced/), the server generating at "
                        "this many tokens/s in all (a GPU node's rate; --concurrency requests at once, each at "
                        "NODE_RATE / --concurrency tokens/s); default 0: the server as fast as it can, everything")
    p.add_argument("--rerun", nargs="+", choices=["catalog", "publish"], default=None,
                   help="only these stages again, on the jobs --keep left at --sizes (no build)")
    args = p.parse_args()
    args.token_rate = args.node_rate / args.concurrency if args.node_rate else 0.0
    OUT.mkdir(parents=True, exist_ok=True)
    if args.node_rate:
        paced = [paced_size(n, args) for n in args.sizes]
        (OUT / "paced.json").write_text(json.dumps(paced, indent=2) + "\n")
        return 0
    if args.annotate_job:
        found = [annotate_check(j.resolve(), args) for j in args.annotate_job]
        (OUT / "annotate.json").write_text(json.dumps(found, indent=2) + "\n")
        return 0
    if args.grow_only:
        results = json.loads(args.json_out.read_text())
        full = next(r for r in results if r["problems"] == args.grow_only)
        full["grow_only"] = grow_check(args.grow_only, OUT / str(args.grow_only), full, args)
        args.json_out.write_text(json.dumps(results, indent=2) + "\n")
        return 0
    results = []
    checks = args.resume_grow
    for n in args.sizes:
        args.check = checks is not None and (not checks or n in checks)
        r = rerun_size(n, args) if args.rerun else run_size(n, args)
        for s in r["stages"].values():
            s.pop("output", None)
        results.append(r)
        args.json_out.write_text(json.dumps(results, indent=2) + "\n")
        print(table([r]), flush=True)
        if "rollouts_disk_vs_text_zstd" in r:
            print(f"[{n}] rollouts disk / text zstd = {r['rollouts_disk_vs_text_zstd']:.3f}", flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
