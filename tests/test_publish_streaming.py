"""Publish streams the problems (its memory does not grow with the item count): the folder is the same however the
problems are cut into id ranges and chunks, rows keep problem order within a split, and a null the schema forbids
is still a shard's one-line error (the tables are no longer read whole and validated by pyarrow)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from publish_tables import PRIMARY_ID, REFORM, difficulty_row, make_repo, problem_row

from pipeline.config import load_params
from pipeline.errors import PassbandError
from pipeline.io import write_table
from pipeline.publish import core, run
from pipeline.schema import schema

pytestmark = pytest.mark.slow  # not in the inner loop (README: Tests)


def _repo(root: Path) -> Path:
    """The publish fixture (with its reformulations and their parents) plus 400 problems with random ids, in two
    shards, and publish.shard_rows 60 so the configs have several shards."""
    make_repo(root)
    rng = random.Random(7)
    for part in (1, 2):
        problems, diff = [], []
        for i in range(200):
            pid = f"p_{rng.getrandbits(64):016x}"
            src = ("gsm8k_train", "gsm8k_test", "math_train")[i % 3]
            problems.append(problem_row(pid, src, "test" if src == "gsm8k_test" else "train", f"What is {i} + {part}?",
                                        str(i + part)))
            if i % 7:  # every seventh unmeasured
                diff.append(difficulty_row(pid, PRIMARY_ID, rng.randint(0, 8)))
        write_table(schema("problems").from_rows(problems), root / f"data/problems/part-{part}.parquet", name="problems")
        write_table(schema("difficulty").from_rows(diff), root / f"data/difficulty/part-{part}.parquet",
                    name="difficulty")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["publish"]["shard_rows"] = 60
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_folder_does_not_depend_on_how_the_problems_are_cut(tmp_path, monkeypatch):
    root = _repo(tmp_path / "repo")
    params = load_params(root / "params.yaml")
    whole = run(params, root=root)
    assert whole.dataset.rows("default") > 300 and whole.dataset.rows("reformulated") > 0
    assert len(whole.dataset.configs["default"]["train"].files) > 2  # several shards
    one_cut = _files(whole.folder)

    ranges = []
    real = core._ranges
    monkeypatch.setattr(core, "PART_BYTES", 3_000)  # ~100 problems a range
    monkeypatch.setattr(core, "CHUNK", 5)  # parents looked up while both streams are open, many times
    monkeypatch.setattr(core, "_ranges", lambda con, table: ranges.append(real(con, table)) or ranges[-1])
    cut = run(params, root=root)
    assert len(ranges[0]) >= 4 and ranges[0][0][0] is None and ranges[0][-1][1] is None
    assert _files(cut.folder) == one_cut  # byte for byte: rows, card, histogram, exports, build.json

    for config, splits in cut.dataset.configs.items():
        for split, rows in splits.items():
            ids = rows.column("problem_id").to_pylist()
            assert ids == sorted(ids), (config, split)  # problem order within a split, across ranges and shards
            assert rows.num_rows == sum(pq.ParquetFile(f).metadata.num_rows for f in rows.files)
    reform = {r["problem_id"]: r for r in cut.dataset.configs["reformulated"]["train"].pylist(["problem_id", "parent_id",
                                                                                              "parent_band"])}
    for pid, parent, *_ in REFORM:
        if pid in reform:  # its parent's primary measurement was found from another chunk
            assert reform[pid]["parent_id"] == parent and reform[pid]["parent_band"] is not None


def test_a_null_the_schema_forbids_is_the_shards_one_line_error(tmp_path):
    root = make_repo(tmp_path / "repo")
    shard = root / "data/problems/part-0.parquet"
    table = pq.read_table(shard)
    answers = table.column("answer").to_pylist()
    answers[1] = None
    i = table.schema.get_field_index("answer")
    table = table.set_column(i, pa.field("answer", pa.string(), nullable=True), pa.array(answers, pa.string()))
    pq.write_table(table, shard)  # the footer still says passband.table: problems
    with pytest.raises(PassbandError) as err:
        run(load_params(root / "params.yaml"), root=root)
    message = str(err.value)
    assert "\n" not in message and str(shard) in message and "column 'answer' has nulls" in message
    assert not (root / "data/published").exists()  # nothing published


def test_the_core_builds_the_same_rows_from_tables_in_memory(tmp_path):
    """``core.build`` on Arrow tables (``Inputs.of_tables``, no shards) gives the rows the stage publishes."""
    from pipeline.io import read_table
    from pipeline.publish.shards import ConfigWriter
    from pipeline.publish.stage import _renderer

    root = _repo(tmp_path / "repo")
    params = load_params(root / "params.yaml")
    published = run(params, root=root)
    tables = {name: read_table(root / folder, name=declared) for name, folder, declared in (
        ("problems", "data/problems", "problems"), ("difficulty", "data/difficulty", "difficulty"),
        ("policies", "data/policies", "policies"), ("reformulated_problems", "data/reformulated/problems", "problems"),
        ("reformulated_difficulty", "data/reformulated/difficulty", "difficulty"))}
    spec = core.Spec(policy=params.rollout.policies[0], bands=tuple(params.publish.bands),
                     reformulated_bands=tuple(params.publish.reformulated_bands),
                     licenses={"synthetic": "apache-2.0", "gsm8k_train": "mit", "gsm8k_test": "mit", "math_train": "mit"},
                     render=_renderer(params.publish.prompt_template)[0])
    sink = ConfigWriter(tmp_path / "out", schema=core.SCHEMA, shard_rows=params.publish.shard_rows)
    built = core.build(core.Inputs.of_tables(**tables), spec=spec, sink=sink)
    assert list(built.configs) == list(published.dataset.configs)
    skip = ["license"]  # licenses come from the stage's LICENSE files; the rest must be equal
    for config, splits in built.configs.items():
        assert list(splits) == list(published.dataset.configs[config])
        for split, rows in splits.items():
            names = [n for n in core.SCHEMA.names if n not in skip]
            assert rows.select(names).equals(published.dataset.configs[config][split].select(names)), (config, split)
    assert built.reformulation == published.dataset.reformulation and built.unmeasured == published.dataset.unmeasured
