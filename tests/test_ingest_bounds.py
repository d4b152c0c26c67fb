"""Ingest on hostile and careless input: every malformed row a reject with its reason,
bounded memory on huge lines and many rows, capped text fields, one-line errors for unreadable files,
shards streamed and byte-identical run to run."""

from __future__ import annotations

import codecs
import gzip
import hashlib
import json
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from shared_data import shared_path

from pipeline.cli import cli
from pipeline.config import SourceConfig, load_params
from pipeline.ingest import SourceError, ingest, run
from pipeline.ingest import fold as fold_module
from pipeline.ingest.core import MAX_REJECT_ID, REASONS, Limits
from pipeline.ingest.sources import read_source
from pipeline.io import read_table, shard_paths

GOOD = [{"question": f"What is {i} + {i + 1}?", "answer": str(2 * i + 1)} for i in range(3)]


def _jsonl(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _good_lines() -> list[bytes]:
    return [json.dumps(r).encode() for r in GOOD]


def _ingest(path: Path, kind: str = "jsonl", limits: Limits = Limits(), **cfg) -> tuple:
    src = SourceConfig(name="s", kind=kind, path=str(path), **cfg)
    return ingest(read_source(src, root=path.parent, limits=limits), limits=limits)


def _reasons(result) -> list[tuple[str, str]]:
    return [(r["source_id"], r["reason"]) for r in result.rejects.to_pylist()]


def _answers(result) -> list[str]:
    return result.problems.column("answer").to_pylist()


def test_a_line_nested_3000_deep_is_a_reject_and_the_file_goes_on(tmp_path):
    deep = b'{"question": ' + b"[" * 3000 + b"]" * 3000 + b', "answer": "1"}'
    assert len(deep) < 7000
    res = _ingest(_jsonl(tmp_path / "d.jsonl", [_good_lines()[0], deep, *_good_lines()[1:]]))
    assert _reasons(res) == [("d.jsonl:2", "too_deep")]
    assert _answers(res) == ["1", "3", "5"]
    assert res.rows_read == 4


def test_a_deep_value_under_the_parser_limit_is_a_reject_not_a_crash(tmp_path):
    """900 deep parses, but mapping it (str() of the id, its excerpt) must not take the stage down."""
    nested = b"[" * 900 + b"]" * 900
    lines = [b'{"question": "What is 1 + 1?", "answer": "2", "id": ' + nested + b"}",
             b'{"question": ' + nested + b', "answer": "2"}', _good_lines()[2]]
    res = _ingest(_jsonl(tmp_path / "d.jsonl", lines), mapping={"id": "id"})
    reasons = dict(_reasons(res))
    assert reasons["d.jsonl:2"] == "wrong_type"
    assert set(reasons.values()) <= {"wrong_type", "field_too_long", "bad_row"}
    assert "5" in _answers(res) and res.rows_read == 3
    assert all(len(r["excerpt"]) <= 200 for r in res.rejects.to_pylist())


@pytest.mark.parametrize("line,reason", [
    (b'{"question": "Big?", "answer": ' + b"1" * 5000 + b"}", "malformed_json"),  # int over 4,300 digits
    (b'{"question": "x", "answer": 1e999}', "wrong_type"),  # inf is not an answer
    (b'{"question": "NaN?", "answer": NaN}', "wrong_type"),
    (b"\xff\xfe{}", "not_utf8"),
    (b"null", "not_an_object"),
])
def test_each_malformed_line_is_a_reject_with_its_reason(tmp_path, line, reason):
    res = _ingest(_jsonl(tmp_path / "m.jsonl", [*_good_lines()[:1], line]))
    assert _reasons(res) == [("m.jsonl:2", reason)] and reason in REASONS
    assert _answers(res) == ["1"]


def test_a_huge_line_is_a_reject_read_in_bounded_pieces(tmp_path):
    """A 40 MB line under a 1 MiB cap: rejected with its size, never held whole (allocation peak < 8 MB)."""
    big = b'{"question": "' + b"x" * 40_000_000 + b'", "answer": "1"}'
    path = _jsonl(tmp_path / "h.jsonl", [_good_lines()[0], big, *_good_lines()[1:]])
    del big
    src = SourceConfig(name="s", kind="jsonl", path=str(path))
    tracemalloc.start()
    try:
        records = list(read_source(src, root=tmp_path, limits=Limits()))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, peak
    res = ingest(records)
    rej = res.rejects.to_pylist()
    assert [(r["source_id"], r["reason"]) for r in rej] == [("h.jsonl:2", "line_too_long")]
    assert "40,000,031 bytes" in rej[0]["detail"] and "max_line_bytes" in rej[0]["detail"]
    assert rej[0]["excerpt"].startswith('{"question": "xxx') and len(rej[0]["excerpt"]) <= 200
    assert _answers(res) == ["1", "3", "5"]


def test_the_line_cap_is_exact_and_the_last_line_needs_no_newline(tmp_path):
    line = json.dumps({"question": "What is 2 + 2?", "answer": "4"}).encode()
    path = tmp_path / "e.jsonl"
    path.write_bytes(line + b"\n" + line.replace(b"2 + 2", b"2 + 3").replace(b'"4"', b'"5"'))
    assert _answers(_ingest(path, limits=Limits(max_line_bytes=len(line)))) == ["4", "5"]
    res = _ingest(path, limits=Limits(max_line_bytes=len(line) - 1))
    assert _reasons(res) == [("e.jsonl:1", "line_too_long"), ("e.jsonl:2", "line_too_long")]


def test_a_utf8_byte_order_mark_is_ignored(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + b"\n".join(_good_lines()))
    res = _ingest(path)
    assert _answers(res) == ["1", "3", "5"] and not _reasons(res)


@pytest.mark.parametrize("field", ["id", "subject", "level", "extra"])
def test_every_text_field_is_capped(tmp_path, field):
    """A 5 MB id (subject, level, extra column) from Parquet is a reject; the 5 MB text is stored nowhere."""
    rows = [{"q": f"What is {i} + 1?", "a": str(i + 1), "id": f"r{i}", "subject": "s", "level": "1", "extra": "e"}
            for i in range(3)]
    rows[1][field] = "z" * 5_000_000
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p.parquet")
    res = _ingest(tmp_path / "p.parquet", kind="parquet", mapping={"question": "q", "answer": "a"})
    rej = res.rejects.to_pylist()
    assert [r["reason"] for r in rej] == ["field_too_long"]
    assert (field if field != "extra" else "metadata") in rej[0]["detail"] and "ingest.max_" in rej[0]["detail"]
    assert _answers(res) == ["1", "3"]
    for table in (res.problems, res.rejects):
        for col in table.columns:
            if pa.types.is_string(col.type):
                assert max((len(v) for v in col.to_pylist() if v), default=0) < 1_000, col
    if field == "id":
        assert len(rej[0]["source_id"]) <= MAX_REJECT_ID and "5000000 characters" in rej[0]["source_id"]


def test_field_caps_are_configurable(tmp_path):
    path = _jsonl(tmp_path / "c.jsonl", [json.dumps({**GOOD[0], "note": "n" * 300}).encode()])
    assert _reasons(_ingest(path, limits=Limits(max_metadata_chars=200))) == [("c.jsonl:1", "field_too_long")]
    assert _answers(_ingest(path, limits=Limits(max_metadata_chars=400))) == ["1"]


@pytest.mark.parametrize("damage", ["cut in half", "a damaged page"])
def test_a_damaged_parquet_source_is_one_line_naming_the_file(tmp_path, damage):
    pq.write_table(pa.table({"question": [f"What is {i} + 1?" for i in range(20_000)],
                             "answer": [str(i + 1) for i in range(20_000)]}), tmp_path / "src.parquet",
                   row_group_size=5_000)
    data = bytearray((tmp_path / "src.parquet").read_bytes())
    if damage == "cut in half":
        data = data[: len(data) // 2]
    else:  # the footer is intact: the damage shows only when that page is read
        data[len(data) // 2: len(data) // 2 + 2000] = b"\xab" * 2000
    (tmp_path / "src.parquet").write_bytes(bytes(data))
    src = SourceConfig(name="s", kind="parquet", path="src.parquet")
    with pytest.raises(SourceError, match=r"src\.parquet is not a readable Parquet file") as info:
        list(read_source(src, root=tmp_path))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("content,message", [
    (b"", "has no rows"),
    (b"\n  \n\n", "has no rows"),
    ("\n".join(json.dumps(r) for r in GOOD).encode("utf-16"), "UTF-16"),
    (gzip.compress(b"\n".join(_good_lines()), mtime=0), "gzip-compressed"),
])
def test_an_unreadable_jsonl_file_is_one_line_naming_it(tmp_path, content, message):
    (tmp_path / "f.jsonl").write_bytes(content)
    src = SourceConfig(name="s", kind="gsm8k", path="f.jsonl")
    with pytest.raises(SourceError, match=message) as info:
        list(read_source(src, root=tmp_path))
    assert "f.jsonl" in str(info.value) and "\n" not in str(info.value)


def test_a_folder_given_as_a_jsonl_source_is_a_config_error(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(Exception, match="is not a file"):
        list(read_source(SourceConfig(name="s", kind="jsonl", path="dir.jsonl"), root=tmp_path))


def _project(tmp: Path, sources: list[dict], **ingest_cfg) -> Path:
    raw = {"ingest": {"sources": sources, **ingest_cfg}, "policies": {"p": {}}, "rollout": {"policies": ["p"]}}
    (tmp / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return tmp / "params.yaml"


def test_the_cli_names_a_damaged_source_in_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "src.parquet").write_bytes(b"PAR1 this is not a parquet file at all PAR1")
    params = _project(tmp_path, [{"name": "s", "kind": "parquet", "path": "src.parquet"}])
    res = CliRunner().invoke(cli, ["ingest", "--params", str(params), "--no-progress"])
    assert res.exit_code != 0
    out = res.output.strip().splitlines()
    assert len(out) == 1 and "src.parquet" in out[0] and "Traceback" not in res.output, res.output
    assert not (tmp_path / "data" / "problems").exists()


def test_shards_stream_in_order_and_are_byte_identical_run_to_run(tmp_path):
    """35 rows with duplicates and a conflict, shards of 10: the same rows as the in-memory fold, in order."""
    rows = [{"question": f"What is {i % 30} + 1?", "answer": str(i % 30 + 1)} for i in range(35)]
    rows[33]["answer"] = "99"  # question 3 again with another gold: both rows of it are rejects
    lines = [json.dumps(r).encode() for r in rows] + [b"{broken"]
    _jsonl(tmp_path / "rows.jsonl", lines)
    params = _project(tmp_path, [{"name": "s", "kind": "jsonl", "path": "rows.jsonl"}], shard_rows=10)
    summary = run(load_params(params), root=tmp_path, progress=False)
    assert (summary.rows_read, summary.problems, summary.rejects, summary.duplicates) == (36, 29, 3, 4)
    shards = shard_paths(tmp_path / "data/problems")
    assert [p.name for p in shards] == [f"part-0000{i}.parquet" for i in range(3)]
    assert [pq.read_metadata(p).num_rows for p in shards] == [10, 10, 9]
    expected = _ingest(tmp_path / "rows.jsonl")
    assert read_table(tmp_path / "data/problems", name="problems").equals(expected.problems)
    assert read_table(tmp_path / "data/rejects", name="rejects").equals(expected.rejects)
    assert [r["reason"] for r in expected.rejects.to_pylist()] == ["conflicting_gold", "conflicting_gold",
                                                                   "malformed_json"]
    first = {p.name: p.read_bytes() for p in [*shards, *shard_paths(tmp_path / "data/rejects")]}
    run(load_params(params), root=tmp_path, progress=False)
    again = {p.name: p.read_bytes() for p in [*shard_paths(tmp_path / "data/problems"),
                                               *shard_paths(tmp_path / "data/rejects")]}
    assert again == first


def test_rows_are_spooled_not_held(tmp_path, monkeypatch):
    """2,000 rows of 10 KB (20 MB): with a 1 MiB spool the fold's Python allocations stay under 8 MB."""
    monkeypatch.setattr(fold_module, "SPOOL_BYTES", 1 << 20)
    path = tmp_path / "big.jsonl"
    with path.open("wb") as fh:
        for i in range(2000):
            fh.write(json.dumps({"question": f"Problem {i}: what is {i} + 1?", "answer": str(i + 1),
                                 "solution": f"{i} + 1 = {i + 1}. " + "w" * 10_000}).encode() + b"\n")
    src = SourceConfig(name="s", kind="jsonl", path="big.jsonl")
    from pipeline.ingest.core import check
    from pipeline.ingest.fold import Fold

    tracemalloc.start()
    try:
        with Fold(tmp_path) as fold:
            for rec in read_source(src, root=tmp_path):
                fold.add(rec.source, *check(rec))
            summary = fold.finish()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert summary.problems == 2000
    assert peak < 8_000_000, peak


@pytest.mark.slow
def test_real_gsm8k_train_gives_the_same_problems_as_before(tmp_path):
    """The streaming ingest of ../shared/data/gsm8k/train.jsonl: the 7,473 problems the in-memory
    implementation (commit 6175d4c) gave, with the same problem_ids in the same order."""
    path = shared_path("gsm8k/train.jsonl")
    params = _project(tmp_path, [{"name": "gsm8k_train", "kind": "gsm8k", "path": str(path), "split": "train"}])
    summary = run(load_params(params), root=tmp_path, progress=False)
    assert (summary.rows_read, summary.problems, summary.rejects, summary.duplicates) == (7473, 7473, 0, 0)
    ids = read_table(tmp_path / "data/problems", name="problems", columns=["problem_id"]).column(0).to_pylist()
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()
    assert digest == "2484fe37a9f7142e19302d3b966fa06c0a9787db44d87e793f98b5a3b11a19fb"


def test_a_row_whose_check_raises_is_a_bad_row_reject():
    from pipeline.ingest.core import check
    from pipeline.ingest.records import RawRow

    class Boom:
        def __str__(self) -> str:
            raise RecursionError("maximum recursion depth exceeded")

    ok, row = check(RawRow("s", "f:1", "What is 1 + 1?", answer="2", subject=Boom()))
    assert not ok and row["reason"] == "bad_row" and "RecursionError" in row["detail"]


def test_a_row_whose_mapping_raises_is_a_bad_row_reject_and_the_rest_go_on():
    from pipeline.ingest.readers import mapped as _mapped

    def to_row(sid, obj):
        if obj["bad"]:
            raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")
        from pipeline.ingest.records import RawRow
        return RawRow("s", sid, obj["q"], answer="1")

    items = iter([("f:1", {"bad": False, "q": "a"}), ("f:2", {"bad": True}), ("f:3", {"bad": False, "q": "b"})])
    out = list(_mapped(SourceConfig(name="s", kind="jsonl", path="f"), items, to_row))
    assert [type(r).__name__ for r in out] == ["RawRow", "RawReject", "RawRow"]
    assert out[1].reason == "bad_row" and "4300 digits" in out[1].detail


# --- Parquet and hf: each value measured on the Arrow data before it is decoded -------------------------------------


def _dictionary_file(path: Path, chars: int = 100_000, rows: int = 1_024, store_schema: bool = True) -> Path:
    """``rows`` rows whose question is one string of ``chars`` characters stored once (dictionary-encoded)."""
    question = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["x" * chars]))
    pq.write_table(pa.table({"question": question, "answer": pa.array(["1"] * rows)}), path, compression="zstd",
                   store_schema=store_schema)
    return path


@pytest.mark.parametrize("kind,store_schema", [("parquet", True), ("parquet", False), ("hf", True)])
def test_a_dictionary_encoded_huge_question_is_rejected_before_it_is_decoded(tmp_path, kind, store_schema):
    """One 100,000-character question repeated over 1,024 rows: 100 MB as Python strings, read with a Python
    allocation peak under 8 MB, every row a question_too_long reject with its true length."""
    path = _dictionary_file(tmp_path / "bomb.parquet", store_schema=store_schema)
    assert path.stat().st_size < 2_000
    src = SourceConfig(name="s", kind=kind, path=path.name)
    tracemalloc.start()
    try:
        records = list(read_source(src, root=tmp_path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, peak
    assert [r.reason for r in records] == ["question_too_long"] * 1_024
    assert "100,000 characters" in records[0].detail and "ingest.max_question_chars" in records[0].detail
    assert records[0].excerpt == "x" * 200
    assert records[5].source_id == ("bomb.parquet:5" if kind == "parquet" else "train:5")


def test_arrow_caps_give_the_cores_reasons_and_the_rest_is_read(tmp_path):
    rows = [{"question": "What is 1 + 1?", "answer": "2", "solution": "s" * 60_000, "note": "n"},
            {"question": "What is 1 + 2?", "answer": "3", "solution": "1 + 2 = 3", "note": "n" * 20_000},
            {"question": "What is 1 + 3?", "answer": "4", "solution": "1 + 3 = 4", "note": "n" * 900},
            {"question": "What is 1 + 4?", "answer": "5", "solution": "1 + 4 = 5", "note": "n"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p.parquet")
    res = _ingest(tmp_path / "p.parquet", kind="parquet", limits=Limits(max_line_bytes=800))
    assert [(r["source_id"], r["reason"]) for r in res.rejects.to_pylist()] == [
        ("p.parquet:0", "solution_too_long"), ("p.parquet:1", "field_too_long"), ("p.parquet:2", "row_too_long")]
    assert "metadata" in res.rejects.to_pylist()[1]["detail"]
    assert _answers(res) == ["5"]


def test_a_row_that_cannot_be_decoded_is_one_reject(tmp_path):
    """Invalid UTF-8 in a Parquet string column (another writer's bytes): that row a not_utf8 reject, the rest read."""
    data = b"What is 1 + 1?" + b"caf\xff?" + b"What is 1 + 3?"
    offsets = pa.array([0, 14, 19, 33], pa.int32())
    question = pa.Array.from_buffers(pa.string(), 3, [None, offsets.buffers()[1], pa.py_buffer(data)])
    pq.write_table(pa.table({"question": question, "answer": ["2", "3", "4"]}), tmp_path / "u.parquet",
                   use_dictionary=False)
    res = _ingest(tmp_path / "u.parquet", kind="parquet")
    assert _reasons(res) == [("u.parquet:1", "not_utf8")]
    assert _answers(res) == ["2", "4"]


# --- Parquet and local folders: a byte budget before anything is decoded --------------------------------------


def _plain_parquet(path: Path, n: int, size: int, **write) -> Path:
    """``n`` distinct questions of ``size`` characters, plain-encoded (no dictionary) and zstd: tiny on disk."""
    rows = {"question": [f"{i:06d}" + "x" * size for i in range(n)], "answer": [str(i) for i in range(n)]}
    pq.write_table(pa.table(rows), path, compression="zstd", use_dictionary=False, **write)
    return path


@pytest.mark.slow
def test_a_parquet_compression_bomb_is_refused_unread(tmp_path):
    """256 distinct 1.5 MB values in one plain page: 15 kB on disk, 384 MB decoded (1.4 GB and 68 s before)."""
    path = _plain_parquet(tmp_path / "bomb.parquet", 256, 1_500_000)
    assert path.stat().st_size < 100_000
    tracemalloc.start()
    with pytest.raises(SourceError, match=r"decompresses to 384,\d{3},\d{3} bytes .* compression bomb"):
        _ingest(path, kind="parquet")
    assert tracemalloc.get_traced_memory()[1] < 32 << 20
    tracemalloc.stop()


@pytest.mark.slow
def test_large_plain_values_under_the_bomb_line_are_read_a_few_rows_at_a_time(tmp_path, monkeypatch):
    """160 distinct 1.5 MB values in pages of one value each (240 MB decoded): each batch holds about 16 MB, so the
    rejects are measured ten at a time, and each reject costs the same however many the column holds."""
    import pipeline.ingest.arrow_rows as arrow_rows

    path = _plain_parquet(tmp_path / "big.parquet", 160, 1_500_000, data_page_size=1 << 20, write_batch_size=1)
    sizes: list[int] = []
    real = arrow_rows.row_bytes
    monkeypatch.setattr(arrow_rows, "row_bytes", lambda arr: sizes.append(len(arr)) or real(arr))
    result = _ingest(path, kind="parquet")
    assert [r for _, r in _reasons(result)] == ["question_too_long"] * 160
    assert max(sizes) <= 16   # rows per batch: 16 MB / 1.5 MB, not 1,024


def test_a_local_folder_without_split_names_is_read_by_the_bounded_readers(tmp_path):
    """`kind: hf` on a folder of `data.jsonl` (all 'train', as 🤗 datasets reads it): the line cap holds there too
    (a 100 MB line passed through the datasets library at 859 MiB)."""
    folder = tmp_path / "ds"
    folder.mkdir()
    big = json.dumps({"question": "x" * (3 << 20), "answer": "1"}).encode()
    _jsonl(folder / "data.jsonl", [*_good_lines(), big])
    result = _ingest(folder, kind="hf", mapping={"question": "question", "answer": "answer"})
    assert sorted(_answers(result)) == sorted(r["answer"] for r in GOOD)
    assert [r for _, r in _reasons(result)] == ["line_too_long"]
    pq.write_table(pa.table({"question": [r["question"] for r in GOOD], "answer": [r["answer"] for r in GOOD]}),
                   folder / "part-0.parquet")   # a Parquet file with no split name: read as the parquet kind reads
    result = _ingest(folder, kind="hf", mapping={"question": "question", "answer": "answer"})
    assert sorted(_answers(result)) == sorted(r["answer"] for r in GOOD) and _reasons(result) == []


@pytest.mark.slow
def test_slow_golds_spend_at_most_the_ingests_gold_budget(tmp_path):
    """8 distinct golds that each run to the check's time limit (deep parentheses; 52 s before): with a budget of
    2 s, the pool stops taking them once it is spent, and the golds it never checked are rejects that say why (the
    time it takes is the benchmark's: benchmarks/hostile.py, ingest_slow_golds_budget)."""
    from pipeline.config import VerifyConfig

    golds = ["(" * (150 + i) + "1" + ")" * (150 + i) for i in range(8)]
    rows = [{"question": f"What is the value of expression {i}?", "answer": g} for i, g in enumerate(golds)]
    path = _jsonl(tmp_path / "in.jsonl", [*_good_lines(), *(json.dumps(r).encode() for r in rows)])
    src = SourceConfig(name="s", kind="jsonl", path=str(path))
    limits = Limits(max_answer_chars=1_000)
    result = ingest(read_source(src, root=tmp_path, limits=limits), limits=limits,
                    verify=VerifyConfig(timeout_s=1.0, workers=2, max_answer_chars=1_000), gold_budget_s=2.0)
    assert sorted(_answers(result)) == sorted(r["answer"] for r in GOOD)   # the plain numbers: graded, kept
    details = [r["detail"] for r in result.rejects.to_pylist()]
    reasons = [r["reason"] for r in result.rejects.to_pylist()]
    assert len(details) == 8 and set(reasons) <= {"unparseable_gold", "ungradable_gold"}   # timed out, or not asked
    budget = [d for d in details if "gold-grading budget (ingest.gold_budget_s = 2 s) was spent" in d]
    assert budget and len(budget) == reasons.count("ungradable_gold")
