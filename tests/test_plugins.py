"""One plugin contract: every registered engine, detector, extractor, reformulation method and preset through the same
checks, and a throwaway plugin of each kind (a detector, a preset, an engine, a prompt template, an extractor, a
reformulation method) loaded from the files params.yaml lists and seen used end to end (the preset ingested, the
engine's rollouts with the prompt, the extractor's answers in the verdicts, the detector's flag in the flags table, the
method's children in the reformulated problems)."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel

from pipeline.annotate.detectors import (
    DETECTORS,
    KINDS,
    SIDE_COLUMNS,
    Detector,
    Hit,
    check_options,
    register,
)
from pipeline.annotate.flag_runner import SAMPLE_COLUMNS, candidate_sql, sql_hits_sql
from pipeline.annotate.quality import LABELS
from pipeline.cli import cli
from pipeline.config import ConfigError, SamplingConfig
from pipeline.engines import ENGINES, FINISH_REASONS, Engine, ModelSpec, Prompt, Request, create_engine
from pipeline.ingest.presets import PRESETS, PRESETS_DIR
from pipeline.ingest.sources import PROBLEM_FIELDS, SOURCES, Source
from pipeline.io import read_table
from pipeline.params_loader import load_params
from pipeline.plugins import Registry
from pipeline.publish.provenance import source_licenses
from pipeline.reformulate import METHODS, Child, Parent, Reformulator, Skip, build
from pipeline.rollout.prompts import PROMPTS
from pipeline.verify.extract import EXTRACTORS, Extractor

SAMPLING = SamplingConfig(temperature=0.7, max_tokens=8)
SPEC = ModelSpec("test/m", "test/m", "r1", "float32")
REGISTRIES = {"engine": ENGINES, "flag detector": DETECTORS, "extractor": EXTRACTORS, "source preset": PRESETS,
              "source kind": SOURCES, "reformulation method": METHODS, "prompt template": PROMPTS}


# -- the one lookup path ---------------------------------------------------------------------------

@pytest.mark.parametrize("what", sorted(REGISTRIES))
def test_every_registry_refuses_an_unknown_name_with_the_close_ones(what):
    reg: Registry = REGISTRIES[what]
    name = next(iter(reg))
    with pytest.raises(ConfigError) as err:
        reg.lookup(name[:-1] + "#")
    msg = str(err.value)
    assert msg.startswith(f"unknown {what} {name[:-1] + '#'!r} (did you mean {name}") and "known: " in msg
    assert "\n" not in msg and reg.lookup(name) is reg[name]


def test_a_second_plugin_of_one_name_from_elsewhere_is_refused_naming_both():
    reg: Registry = Registry("widget")
    reg.add("w", object(), origin="a.py")
    with pytest.raises(ConfigError, match=r"widget 'w' is defined twice: in a\.py and in b\.py"):
        reg.add("w", object(), origin="b.py")
    with pytest.raises(ConfigError, match="widget: 'a/b' is not a valid name"):
        reg.add("a/b", object(), origin="a.py")


# -- engines -----------------------------------------------------------------------------------------

def _check_engine(engine: Engine) -> None:
    """The engine contract: one sample per seed in request then seed order, each sample's text decided by (prompt,
    sampling, seed) alone (not by what else is in the batch), a known finish reason, a token count."""
    a = Request("a", Prompt(text="Q: What is 2 + 3?\nA:"), seeds=(1, 2), sampling=SAMPLING)
    b = Request("b", Prompt(messages=({"role": "user", "content": "What is 4 - 1?"},)), seeds=(3,), sampling=SAMPLING)
    with engine:
        both = engine.generate([a, b])
        alone = engine.generate([a])
        with pytest.raises(ValueError, match="unique"):
            engine.generate([a, a])
    assert [(s.request_id, s.index, s.seed) for s in both] == [("a", 0, 1), ("a", 1, 2), ("b", 0, 3)]
    assert [s.text for s in alone] == [s.text for s in both[:2]]
    for s in both:
        assert isinstance(s.text, str) and s.finish_reason in FINISH_REASONS
        assert isinstance(s.n_tokens, int) and s.n_tokens >= 0


@pytest.mark.parametrize("name", list(ENGINES))
def test_every_engine_declares_the_contract(name):
    cls = ENGINES[name]
    assert issubclass(cls, Engine) and cls.name == name
    assert issubclass(cls.Options, BaseModel) and cls.Options.model_config.get("extra") == "forbid"
    cls.Options()  # every knob has a default
    assert cls.cpu_bind_env is None or isinstance(cls.cpu_bind_env, str)
    assert (cls.__doc__ or inspect.getmodule(cls).__doc__), f"engine {name} has no docstring"
    assert Path(ENGINES.origin(name)).parent.name == "engines"  # one module in pipeline/engines


def test_the_fake_engine_conforms():
    _check_engine(create_engine("fake", SPEC))


def test_the_openai_engine_conforms_against_a_tiny_server():
    from test_rollout_openai import Server

    with Server(model=SPEC.path) as srv:
        _check_engine(create_engine("openai", SPEC, {"base_url": srv.url, "startup_timeout_s": 5}))


# vllm and ray load a model or start a cluster: tests/test_rollout_engine.py (marker engine) and
# tests/test_engines_ray.py (marker ray) run them; their static contract is checked above.


# -- detectors ---------------------------------------------------------------------------------------

def _samples(rows: list[dict]) -> pa.Table:
    types = {"sample_idx": pa.int64(), "thinking_chars": pa.int64(), "n_tokens": pa.int64(), "n": pa.int64(),
             "n_correct": pa.int64(),
             "steps": pa.int64(), "ref_steps": pa.int64(), "median_correct_steps": pa.float64(),
             "pass_rate": pa.float64()}
    return pa.table({c: pa.array([r[c] for r in rows], type=types.get(c, pa.string())) for c in SAMPLE_COLUMNS})


NEUTRAL = {"problem_id": "p", "policy_id": "q", "sample_idx": 0, "status": "correct", "extracted": "5", "thinking_chars": None,
           "completion": " 2 + 3 = 5. The answer is 5.", "n_tokens": 9, "finish_reason": "stop",
           "question": "What is 2 + 3?", "n": 8, "n_correct": 4, "pass_rate": 0.5, "steps": 1, "ref_steps": None,
           "median_correct_steps": 1.0}


@pytest.mark.parametrize("name", list(DETECTORS))
def test_every_detector_conforms(name):
    cls = DETECTORS[name]
    assert issubclass(cls, Detector) and cls.name == name and cls.kind in KINDS and cls.side in SIDE_COLUMNS
    assert (cls.summary and cls.label is None) or cls.label in LABELS
    assert issubclass(cls.Options, BaseModel) and cls.Options.model_config.get("extra") == "forbid"
    assert Path(DETECTORS.origin(name)).name == f"{name}.py"  # one file each, named after it
    d = cls()  # every knob has a default (annotate.options.<name> may be absent)
    assert check_options({name: d.options.model_dump()})[name] == d.options  # its knobs are annotate.options.<name>
    con = duckdb.connect()
    con.register("samples", _samples([NEUTRAL]))
    candidates = con.sql(candidate_sql([d])).to_arrow_table()  # its SQL runs on the samples view
    if d.sql_only:
        con.register("cand", candidates)
        con.sql(sql_hits_sql([d], source="cand")).fetchall()
    hit = d.detect(dict(NEUTRAL))
    assert hit is None or (isinstance(hit, Hit) and isinstance(hit.evidence, str) and hit.evidence)


@pytest.mark.parametrize("name", list(SOURCES))
def test_every_source_kind_conforms(name):
    cls = SOURCES[name]
    assert issubclass(cls, Source) and cls.name == name and cls.__doc__
    assert Path(SOURCES.origin(name)).name == f"{name}.py"  # one file each, named after it
    assert issubclass(cls.Options, BaseModel) and cls.Options.model_config.get("extra") == "forbid"
    cls()  # every knob has a default


def test_every_code_plugin_kind_is_one_shape():
    """Detectors, extractors, source kinds, engines, reformulation methods and dump layouts: each a Plugin subclass
    with a name and an Options model (the YAML kinds, presets and prompt templates, are data)."""
    from pipeline.plugins import Plugin
    from pipeline.rollout.layout import LAYOUTS

    kinds = [*DETECTORS.values(), *(type(e) for e in EXTRACTORS.values()), *SOURCES.values(), *ENGINES.values(),
             *METHODS.values(), *LAYOUTS.values()]
    odd = [k for k in kinds if not (issubclass(k, Plugin) and isinstance(k.name, str) and issubclass(k.Options, BaseModel))]
    assert not odd and len(kinds) > 30


def test_a_source_entrys_stray_option_is_refused_when_the_params_load(tmp_path, throwaway):
    params = _project(tmp_path)
    raw = yaml.safe_load(params.read_text())
    raw["ingest"]["sources"][1]["options"] = {"sep": "|"}  # the pairs kind has no knobs
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"ingest\.sources\.mine\.options: sep: unknown key"):
        load_params(params)
    raw["ingest"]["sources"][1]["options"] = {}
    raw["ingest"]["sources"][0]["options"] = {"hf_splt": "test"}
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"ingest\.sources\.tiny\.options: hf_splt: unknown key \(did you mean hf_split\?\)"):
        load_params(params)


# -- extractors and presets --------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(EXTRACTORS))
def test_every_extractor_conforms(name):
    fn = EXTRACTORS[name]
    assert isinstance(fn, Extractor) and fn.name == name and Path(EXTRACTORS.origin(name)).name == f"{name}.py"
    assert fn.__doc__, f"extractor {name} has no docstring"
    assert fn("") is None
    for text in ("The answer is 42.", "#### 42", "\\boxed{42}", "42 is the answer.", "So she has 42 apples.", "x" * 5000):
        got = fn(text)
        assert got is None or (isinstance(got, str) and got.strip())


PARENT = Parent("p1", "gsm8k", "Janet has 16 eggs. She eats 3 and sells the rest at $2 each. How much does she make?",
                "26", solution="16 - 3 = <<16-3=13>>13 eggs. 13 * 2 = <<13*2=26>>26 dollars.\n#### 26")


@pytest.mark.parametrize("name", list(METHODS))
def test_every_reformulator_conforms(name):
    """The method contract: a name, a version, documented skip reasons, options that validate with their defaults, a
    method_version of its version and a digest, and one outcome per parent (a child with a question and a gold, or a
    skip with one of its reasons)."""
    cls = METHODS[name]
    assert issubclass(cls, Reformulator) and cls.name == name and isinstance(cls.version, str) and cls.version
    assert issubclass(cls.Options, BaseModel) and cls.reasons
    assert all(isinstance(k, str) and isinstance(v, str) and v for k, v in cls.reasons.items())
    method = build(name, {}, generate=lambda prompts: ["" for _ in prompts], generator={})
    assert re.fullmatch(re.escape(cls.version) + r"-[0-9a-f]{8}", method.method_version)
    empty = Parent("p0", "gsm8k", "", "1")
    outcomes = method.reformulate([PARENT, empty])
    assert len(outcomes) == 2
    for out in outcomes:
        assert isinstance(out, Child | Skip)
        if isinstance(out, Child):
            assert out.question.strip() and out.answer.strip() and isinstance(out.metadata, dict)
        else:
            assert out.reason in cls.reasons and out.detail


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_conforms(name):
    p = PRESETS[name]
    assert Path(PRESETS.origin(name)) == PRESETS_DIR / f"{name}.yaml"
    assert set(p.mapping) <= set(PROBLEM_FIELDS) and "question" in p.mapping
    assert "answer" in p.mapping or p.gold_from != "answer", f"{name}: no gold column"
    assert p.hub.count("/") == 1
    assert ("source_difficulty" in p.mapping) == (p.difficulty_measure is not None)


def test_a_preset_file_must_carry_its_own_name(tmp_path):
    (tmp_path / "two.yaml").write_text("name: one\nhub: o/n\nmapping: {question: q, answer: a}\n")
    from pipeline.ingest.presets import _add

    with pytest.raises(ConfigError, match="declares name 'one', expected 'two'"):
        _add(Registry("source preset"), tmp_path / "two.yaml")


# -- a throwaway plugin of each kind, end to end ------------------------------------------------------

PRESET = """\
name: tiny-preset
hub: org/tiny
license: cc-by-4.0
mapping: {question: problem, answer: final, source_difficulty: rating}
difficulty_measure: "rating: 1 to 3, higher = harder"
"""
PROMPT = """\
name: echo-prompt
version: "1"
chat: false
template: "Q: {question}\\nA:"
"""
ENGINE = '''\
"""An engine that always answers 5: a throwaway plugin."""
from pipeline.config import Model
from pipeline.engines import ENGINES, Engine, Sample


class EchoOptions(Model):
    answer: str = "5"


@ENGINES.register
class EchoEngine(Engine):
    name = "echo"
    Options = EchoOptions

    def _stream(self, requests):
        for r in requests:
            for i, seed in enumerate(r.seeds):
                yield Sample(r.id, i, seed, f" The answer is {self.options.answer}.", 5, "stop")
'''
DETECTOR = '''\
"""A detector that fires on every completion holding its marker: a throwaway plugin."""
from pydantic import Field

from pipeline.annotate.detectors import Detector, Hit, register
from pipeline.config import Model


@register
class EchoFlag(Detector):
    """The completion holds the marker."""

    name = "echo_flag"
    kind = "degeneracy"
    where = "contains(completion, '{opts.marker}')"

    class Options(Model):
        marker: str = Field("answer", description="the text it fires on")

    def detect(self, row):
        return Hit(1.0, f"holds {self.options.marker!r}")
'''
EXTRACTOR = '''\
"""An extractor that reads the word after the last "is": a throwaway plugin."""
from pipeline.verify.extract import Extractor, register


@register
class AfterIs(Extractor):
    """The word after the last " is "."""

    name = "after_is"

    def read(self, completion):
        if " is " not in completion:
            return None
        return completion.rsplit(" is ", 1)[1].split()[0].strip(".") or None
'''
METHOD = '''\
"""A reformulation method that asks the question again, politely: a throwaway plugin."""
from typing import ClassVar

from pydantic import Field

from pipeline.config import Model
from pipeline.reformulate.registry import Child, Reformulator, register


class PleaseOptions(Model):
    word: str = Field("Please:", description="what the new question starts with")


@register
class Please(Reformulator):
    name = "please"
    version = "1"
    Options = PleaseOptions
    reasons: ClassVar[dict[str, str]] = {"empty": "the question is empty"}

    def one(self, parent):
        if not parent.question.strip():
            return self.skip("empty", "no question")
        return Child(f"{self.options.word} {parent.question}", parent.answer, metadata={"word": self.options.word})
'''

SOURCE = '''\
"""A source kind of lines ``question || answer``: a throwaway plugin."""
from pipeline.ingest.readers import resolve_path
from pipeline.ingest.records import RawRow
from pipeline.ingest.sources import Source, register


@register
class Pairs(Source):
    """Lines of ``question || answer``."""

    name = "pairs"

    def read(self, cfg, *, root, limits):
        for i, line in enumerate(resolve_path(cfg, root, file=True).read_text().splitlines()):
            question, _, answer = line.partition("||")
            yield RawRow(cfg.name, str(i), question.strip(), answer=answer.strip(), split=cfg.split,
                         excerpt=line[:200])
'''


@pytest.fixture
def throwaway():
    yield
    for reg, name in ((PRESETS, "tiny-preset"), (ENGINES, "echo"), (DETECTORS, "echo_flag"), (PROMPTS, "echo-prompt"),
                      (EXTRACTORS, "after_is"), (METHODS, "please"), (SOURCES, "pairs")):
        if name in reg:
            reg.remove(name)


def _project(root: Path) -> Path:
    (root / "plugins").mkdir()
    (root / "plugins/tiny-preset.yaml").write_text(PRESET)
    (root / "plugins/echo-prompt.yaml").write_text(PROMPT)
    (root / "plugins/echo_engine.py").write_text(ENGINE)
    (root / "plugins/echo_flag.py").write_text(DETECTOR)
    (root / "plugins/after_is.py").write_text(EXTRACTOR)
    (root / "plugins/please.py").write_text(METHOD)
    (root / "plugins/pairs_source.py").write_text(SOURCE)
    (root / "pairs.txt").write_text("What is 6 - 1? || 5\n")
    (root / "tiny").mkdir()
    rows = [{"problem": "What is 2 + 3?", "final": "5", "rating": 1}, {"problem": "What is 9 - 4?", "final": "5", "rating": 2},
            {"problem": "What is 2 * 4?", "final": "8", "rating": 3}]
    (root / "tiny/train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    params = {
        "plugins": ["plugins/tiny-preset.yaml", "plugins/echo-prompt.yaml", "plugins/echo_engine.py",
                    "plugins/echo_flag.py", "plugins/after_is.py", "plugins/please.py", "plugins/pairs_source.py"],
        "ingest": {"sources": [{"name": "tiny", "kind": "jsonl", "preset": "tiny-preset", "path": "tiny/train.jsonl"},
                               {"name": "mine", "kind": "pairs", "path": "pairs.txt"}]},
        "policies": {"echo": {"model": "test/m", "revision": "r1", "engine": "echo", "prompt": "echo-prompt",
                              "sampling": {"max_tokens": 8}}},
        "rollout": {"policies": ["echo"], "k": 2, "engine_options": {"echo": {"answer": "5"}}},
        "verify": {"workers": 1, "extractors": ["after_is"]},
        "annotate": {"options": {"echo_flag": {"marker": "answer is"}}},
        # the echo engine fails the child as it failed its parent: the child lands where that puts it
        "reformulate": {"methods": ["please"], "options": {"please": {"word": "Kindly:"}}, "target_bands": ["unsolved"]},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root / "params.yaml"


def _detector(name: str, **attrs) -> type[Detector]:
    return type(name, (Detector,), {"name": name, "__doc__": "A throwaway detector.", **attrs})


def test_a_detector_whose_scan_names_the_other_sides_column_fails_when_it_registers():
    """`where` runs first over one side's columns: naming a verdicts column on the rollouts side (the default) is one
    line at registration, naming the side and its columns (it was a 43-line DuckDB traceback in annotate)."""
    with pytest.raises(ConfigError, match=r"its where names a column of no table on side 'rollouts' .*\"status\".*"
                                          r"its columns: problem_id, policy_id, sample_idx, completion") as e:
        register(_detector("wrong_side", kind="risk", where="status = 'correct'"))
    assert "\n" not in str(e.value) and "wrong_side" not in DETECTORS
    with pytest.raises(ConfigError, match="no table on any side"):
        register(_detector("no_such", kind="risk", where="nonsense_column > 1", scan="status = 'correct'",
                           side="verdicts"))
    # the same predicate on its own side registers
    register(_detector("right_side", kind="risk", where="status = 'correct'", side="verdicts"))
    DETECTORS.remove("right_side")


@pytest.mark.slow
def test_a_plugin_detector_from_a_file_runs_in_annotates_worker_pool(tmp_path, throwaway, monkeypatch):
    """The pool's spawned workers cannot import a plugin file's module: the plugins are shipped to them and loaded
    there first, and the detector arrives by name (it died as 'a detector worker died' before)."""
    import pipeline.annotate.core as core

    params = _project(tmp_path)
    raw = yaml.safe_load(params.read_text())
    raw["annotate"]["workers"] = 2
    params.write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(core, "POOL_MIN_ROWS", 1)  # the pool even for these 6 rows
    runner = CliRunner()
    for args in (["ingest"], ["rollout", "--set", "main"], ["verify", "--set", "main"],
                 ["annotate", "--set", "main", "--no-plots"]):
        res = runner.invoke(cli, [*args, "--params", str(params), "--no-progress"])
        assert res.exit_code == 0, f"{args}: {res.output}"
    flags = read_table(tmp_path / "data/flags", name="flags").to_pylist()
    echo = [f for f in flags if f["flag"] == "echo_flag"]
    assert len(echo) == 8 and {f["evidence"] for f in echo} == {"holds 'answer is'"}


@pytest.mark.slow
def test_a_plugin_preset_engine_and_detector_from_files_are_used_end_to_end(tmp_path, throwaway):
    """A preset, a prompt, an engine, a detector, an extractor, a reformulation method and a source kind, each one
    file a params.yaml's ``plugins`` lists, used by the stages."""
    params = _project(tmp_path)
    _run_stages(params)
    _check_plugin_outputs(tmp_path, params)


@pytest.mark.slow
@pytest.mark.ray
def test_the_plugin_files_run_in_other_processes_on_ray_and_in_the_pool(tmp_path, throwaway, monkeypatch):
    """The same project with the plugins' work in processes that never read params.yaml: the ``ray`` engine's replica
    (a Ray actor) runs the plugin engine, verify's Ray tasks the plugin extractor, annotate's spawned worker pool the
    plugin detector, each from the file's text shipped to it; the outputs are the in-process run's."""
    import pipeline.annotate.core as core

    params = _project(tmp_path)
    raw = yaml.safe_load(params.read_text())
    raw["policies"]["echo"]["engine"] = "ray"
    raw["rollout"]["engine_options"] = {"ray": {"replicas": 1, "local_num_cpus": 1, "batch_size": 2,
                                                "replica_engine": "echo", "replica_options": {"answer": "5"}}}
    raw["verify"].update(executor="ray", ray_chunk_rows=3)
    raw["annotate"]["workers"] = 2
    params.write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(core, "POOL_MIN_ROWS", 1)  # the pool even for these rows
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    _run_stages(params)
    _check_plugin_outputs(tmp_path, params)


def _run_stages(params: Path) -> None:
    runner = CliRunner()
    for args in (["ingest"], ["rollout", "--set", "main"], ["verify", "--set", "main"],
                 ["annotate", "--set", "main", "--no-plots"], ["reformulate"]):
        res = runner.invoke(cli, [*args, "--params", str(params), "--no-progress"])
        assert res.exit_code == 0, f"{args}: {res.output}"


def _check_plugin_outputs(tmp_path: Path, params: Path) -> None:
    problems = read_table(tmp_path / "data/problems", name="problems").to_pylist()
    assert sorted((p["question"], p["source_difficulty"], p["source_difficulty_measure"]) for p in problems) == [
        ("What is 2 * 4?", 3.0, "rating: 1 to 3, higher = harder"), ("What is 2 + 3?", 1.0, "rating: 1 to 3, higher = harder"),
        ("What is 6 - 1?", None, None),  # the source kind's, from a plugin file
        ("What is 9 - 4?", 2.0, "rating: 1 to 3, higher = harder")]
    policies = read_table(tmp_path / "data/policies", name="policies").to_pylist()
    assert [p["prompt_template"] for p in policies] == ["echo-prompt"]
    rollouts = read_table(tmp_path / "data/rollouts", name="rollouts").to_pylist()
    assert len(rollouts) == 8 and {r["completion"] for r in rollouts} == {" The answer is 5."}
    verdicts = read_table(tmp_path / "data/verdicts", name="verdicts").to_pylist()
    assert len(verdicts) == 8 and {(v["extractor"], v["extracted"]) for v in verdicts} == {("after_is", "5")}
    flags = read_table(tmp_path / "data/flags", name="flags").to_pylist()
    echo = [f for f in flags if f["flag"] == "echo_flag"]
    assert len(echo) == 8 and {f["evidence"] for f in echo} == {"holds 'answer is'"}
    difficulty = read_table(tmp_path / "data/difficulty", name="difficulty").to_pylist()
    assert {d["pass_rate"] for d in difficulty} == {0.0, 1.0}
    assert all(dict(d["flag_rates"])["echo_flag"] == 1.0 for d in difficulty)
    # the method's child of the one parent the echo engine fails (gold 8), with the method's option
    children = read_table(tmp_path / "data/reformulated/problems", name="problems").to_pylist()
    assert [(c["method"], c["question"], c["answer"], json.loads(c["metadata"])["word"]) for c in children] == [
        ("please", "Kindly: What is 2 * 4?", "8", "Kindly:")]
    # the preset's own license is what the published items of that source carry
    # (the plugin kind's source names none: unknown, said so on the card)
    assert [(s.source, s.license) for s in source_licenses(load_params(params), root=tmp_path)] == [
        ("tiny", "cc-by-4.0"), ("mine", "unknown")]


def test_a_typo_in_a_plugin_name_or_file_is_one_line_at_load(tmp_path, throwaway):
    params = _project(tmp_path)
    raw = yaml.safe_load(params.read_text())
    raw["policies"]["echo"]["engine"] = "ecoh"
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"policies\.engine: unknown engine 'ecoh' \(did you mean echo\?\)"):
        load_params(params)
    raw["plugins"].append("plugins/missing.py")
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"plugins: 'plugins/missing.py' is not a file"):
        load_params(params)
    raw["plugins"][-1] = "plugins/broken.py"
    (tmp_path / "plugins/broken.py").write_text("import no_such_module_here\n")
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"plugins: 'plugins/broken.py' failed to load: ModuleNotFoundError"):
        load_params(params)
    raw["plugins"][-1] = "plugins/odd.yaml"
    (tmp_path / "plugins/odd.yaml").write_text("question: 1\n")
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"plugins: 'plugins/odd.yaml' must hold exactly one of the keys template "
                                          r"\(prompt template\), hub \(source preset\)"):
        load_params(params)
    raw["plugins"].pop()
    raw["policies"]["echo"]["engine"] = "echo"
    raw["verify"]["extractors"] = ["after_si"]
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"verify\.extractors: unknown extractor 'after_si' \(did you mean after_is\?\)"):
        load_params(params)
    raw["verify"]["extractors"] = ["after_is"]
    raw["reformulate"]["methods"] = ["pleas"]
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"reformulate\.methods: unknown reformulation method 'pleas' "
                                          r"\(did you mean please\?\)"):
        load_params(params)
    raw["reformulate"] = {"methods": ["please"], "options": {"please": {"wrod": "x"}}}
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"reformulate\.options\.please: wrod: unknown key \(did you mean word\?\)"):
        load_params(params)
    raw["reformulate"] = {"methods": ["please"], "options": {"pleas": {}}}
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"reformulate\.options: unknown reformulation method 'pleas'"):
        load_params(params)
    raw["reformulate"] = {"methods": ["please"]}
    raw["annotate"]["options"] = {"echo_flag": {"markr": "x"}}
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"annotate\.options\.echo_flag: markr: unknown key \(did you mean marker\?\)"):
        load_params(params)
    raw["annotate"]["options"] = {"echo_flga": {"marker": "x"}}
    params.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"annotate\.options: unknown flag detector 'echo_flga' \(did you mean echo_flag\?\)"):
        load_params(params)


def test_the_plugin_docs_show_each_kind_as_one_file():
    doc = (Path(__file__).resolve().parents[1] / "docs/operations.md").read_text()
    section = doc.split("## Adding a detector, a preset or an engine", 1)[1].split("\n## ", 1)[0]
    for snippet in ("from pipeline.annotate.detectors import Detector, Hit, register", "@ENGINES.register", "license:",
                    "plugins:", "from pipeline.verify.extract import Extractor, register", "class Please(Reformulator):"):
        assert snippet in section, snippet


def test_threads_reading_a_registry_during_its_first_scan_wait_for_all_of_it():
    """Eight threads read a registry at once before it was ever read: each sees every plugin the scan registers,
    none a half-filled registry (the scan here is slow on purpose, so the others arrive while it runs)."""
    import threading
    import time

    from pipeline.plugins import Registry

    def scan(reg):
        for name in ("alpha", "beta", "gamma"):
            reg.add(name, name.upper(), origin="test")
            assert name in reg  # the scanning thread's own read passes (re-entrant), it does not wait for itself
            time.sleep(0.05)

    reg = Registry("thing", scan=scan)
    barrier = threading.Barrier(8)
    seen: list = [None] * 8

    def read(k):
        barrier.wait()
        try:
            seen[k] = reg.lookup("gamma"), sorted(reg)
        except Exception as exc:  # what the unguarded scan gave: "unknown thing 'gamma'"
            seen[k] = repr(exc)

    threads = [threading.Thread(target=read, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [("GAMMA", ["alpha", "beta", "gamma"])] * 8


def test_a_shipped_plugin_that_fails_to_load_fails_the_same_way_again():
    """A Ray worker given a plugin file that raises (a retried task gets it twice) names the user's spec each time."""
    from pipeline.plugins import load_shipped

    shipped = [("plugins/bad.py", "bad.py", "raise ValueError('nope')\n")]
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"^plugins: 'plugins/bad.py' failed to load: ValueError: nope$"):
            load_shipped(shipped)
