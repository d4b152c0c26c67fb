"""Rollout core on the fake engine: prompts, policy ids, keys and seeds, incremental work, engine registry."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipeline.config import ConfigError, PolicyConfig, SamplingConfig
from pipeline.engines import Engine, EngineError, ModelSpec, Prompt, Request, Sample, create_engine, get_engine
from pipeline.engines.fake import FakeEngine, fake_completion
from pipeline.keys import problem_id, sample_seed
from pipeline.rollout.core import existing_keys, plan, rollout, select_problems, shard_name
from pipeline.rollout.policy import check_distinct, make_policy, policies_table
from pipeline.rollout.prompts import PromptTemplate, known_templates, load_template, render
from pipeline.schema import schema

# --- helpers ---------------------------------------------------------------------------------


def problems(questions: list[str], source: str = "synthetic") -> pa.Table:
    rows = [{"problem_id": problem_id(q), "source": source, "source_id": f"s:{i}", "split": "train", "question": q,
             "answer": "0", "n_duplicates": 0} for i, q in enumerate(questions)]
    return schema("problems").from_rows(rows)


QS = [f"What is {a} + {b}?" for a, b in [(1, 2), (3, 4), (5, 6), (7, 8), (2, 9), (4, 4), (6, 1)]]


def policy(name: str = "p", **overrides):
    base = {"model": "test/model", "revision": "r1", "engine": "fake", "prompt": "fewshot_arith",
            "sampling": {"temperature": 0.8, "max_tokens": 32, "stop": ["\nQ:"]}}
    cfg = PolicyConfig.model_validate({**base, **overrides})
    return make_policy(name, cfg, model_id=cfg.model, revision=cfg.revision or "", path=cfg.model)


def fake(**options) -> FakeEngine:
    return create_engine("fake", ModelSpec("test/model", "test/model", "r1", "float32"), options)


def run_all(probs, pol, *, k, existing=frozenset(), engine=None, shard_size=3):
    engine = engine or fake()
    shards = list(rollout(probs, policy=pol, k=k, existing=set(existing), engine=engine, shard_size=shard_size))
    table = pa.concat_tables([t for _, t in shards]) if shards else schema("rollouts").empty()
    return shards, table, engine


def keyset(table: pa.Table) -> set[tuple[str, str, int]]:
    return set(zip(*(table.column(c).to_pylist() for c in ("problem_id", "policy_id", "sample_idx")), strict=True))


# --- prompts ---------------------------------------------------------------------------------


def test_fewshot_template_renders_three_examples_then_the_question():
    tpl = load_template("fewshot_arith")
    p = render(tpl, "What is 3 + 5?")
    assert p.messages is None and not p.chat
    blocks = p.text.split("\n\n")
    assert len(blocks) == 4 and all(b.startswith("Q: ") for b in blocks)
    assert blocks[0].endswith("The answer is 14.") and "\nA: " in blocks[0]
    assert blocks[-1] == "Q: What is 3 + 5?\nA:"


def test_chat_template_renders_messages_with_system_and_examples():
    tpl = PromptTemplate(name="t", version="2", chat=True, system="Be brief.", template="Solve: {question}",
                         examples=[{"question": "1+1", "answer": "2"}])
    p = render(tpl, "2+2")
    assert p.chat and p.text is None
    assert [m["role"] for m in p.messages] == ["system", "user", "assistant", "user"]
    assert p.messages[-1]["content"] == "Solve: 2+2"
    assert render(tpl, "2+2", system="Other.").messages[0] == {"role": "system", "content": "Other."}


def test_zeroshot_boxed_is_chat_and_asks_for_boxed():
    p = render(load_template("zeroshot_boxed"), "Compute $\\frac{1}{2} + {x}$.")
    (msg,) = p.messages
    assert msg["role"] == "user" and "\\boxed{}" in msg["content"]
    assert msg["content"].startswith("Compute $\\frac{1}{2} + {x}$.")  # braces in the question survive


def test_templates_are_validated_and_unknown_names_suggest():
    assert {"fewshot_arith", "zeroshot_boxed"} <= set(known_templates())
    with pytest.raises(ConfigError, match=r"did you mean fewshot_arith"):
        load_template("fewshot_arit")
    with pytest.raises(ValueError, match=r"exactly once"):
        PromptTemplate(name="t", version="1", chat=False, template="no placeholder")
    assert PromptTemplate(name="t", version=3, chat=False, template="{question}").version == "3"


def test_template_digest_covers_text_not_description():
    tpl = load_template("fewshot_arith")
    assert tpl.model_copy(update={"description": "other words"}).digest == tpl.digest
    ex = [*tpl.examples[:2], tpl.examples[2].model_copy(update={"answer": "6 + 3 = 9. So 9."})]
    assert tpl.model_copy(update={"examples": ex}).digest != tpl.digest
    assert tpl.model_copy(update={"separator": "\n"}).digest != tpl.digest


# --- policy identity -------------------------------------------------------------------------


def test_policy_id_is_stable_and_ignores_name_and_engine_options():
    a, b = policy("a"), policy("b", engine_options={"delay_s": 1})
    assert a.policy_id == b.policy_id and a.policy_id.startswith("pol_")
    assert a.identity["prompt"] == {"name": "fewshot_arith", "version": "1", "digest": load_template("fewshot_arith").digest,
                                    "chat": False}
    with pytest.raises(ConfigError, match="same snapshot"):
        check_distinct([a, b])


@pytest.mark.parametrize("change", [
    {"model": "test/other"}, {"revision": "r2"}, {"engine": "vllm"}, {"dtype": "bfloat16"},
    {"sampling": {"temperature": 0.7, "max_tokens": 32, "stop": ["\nQ:"]}},
    {"sampling": {"temperature": 0.8, "top_p": 0.9, "max_tokens": 32, "stop": ["\nQ:"]}},
    {"sampling": {"temperature": 0.8, "top_k": 50, "max_tokens": 32, "stop": ["\nQ:"]}},
    {"sampling": {"temperature": 0.8, "max_tokens": 33, "stop": ["\nQ:"]}},
    {"sampling": {"temperature": 0.8, "max_tokens": 32, "stop": []}},
    {"prompt": "zeroshot_boxed"}, {"system_prompt": "You are terse."},
])
def test_policy_id_changes_with_every_identity_field(change):
    assert policy(**change).policy_id != policy().policy_id


def test_policy_id_changes_with_template_version_and_digest():
    tpl = load_template("fewshot_arith")
    cfg = PolicyConfig(model="m", revision="r", engine="fake")
    base = make_policy("p", cfg, model_id="m", revision="r", path="m", template=tpl).policy_id
    bumped = make_policy("p", cfg, model_id="m", revision="r", path="m", template=tpl.model_copy(update={"version": "2"}))
    edited = make_policy("p", cfg, model_id="m", revision="r", path="m",
                         template=tpl.model_copy(update={"template": "Question: {question}\nA:"}))
    assert len({base, bumped.policy_id, edited.policy_id}) == 3


def test_policies_table_is_readable_and_valid():
    t = policies_table([policy("a"), policy("z", prompt="zeroshot_boxed")])
    rows = t.to_pylist()
    assert [r["name"] for r in rows] == ["a", "z"]
    assert rows[0]["prompt_template"] == "fewshot_arith" and rows[0]["chat"] is False and rows[1]["chat"] is True
    assert rows[0]["stop"] == ["\nQ:"] and rows[0]["top_k"] == -1 and rows[0]["model"] == "test/model"
    assert schema("policies").validate(t).num_rows == 2


# --- keys, seeds, shards ---------------------------------------------------------------------


def test_rollout_writes_every_key_once_with_its_seed():
    pol = policy()
    shards, table, _ = run_all(problems(QS), pol, k=4, shard_size=3)
    assert table.num_rows == len(QS) * 4
    assert keyset(table) == {(problem_id(q), pol.policy_id, i) for q in QS for i in range(4)}
    for r in table.to_pylist():
        assert r["seed"] == sample_seed(r["problem_id"], pol.policy_id, r["sample_idx"])
        assert r["finish_reason"] in {"stop", "length"} and r["n_tokens"] > 0
    assert [t.num_rows for _, t in shards] == [12, 12, 4]  # 3 problems per shard
    assert len({n for n, _ in shards}) == 3 and all(n.startswith(pol.policy_id) for n, _ in shards)


def test_sample_text_depends_on_the_key_only():
    pol = policy()
    probs = problems(QS)
    _, whole, _ = run_all(probs, pol, k=3, shard_size=100)
    _, small, _ = run_all(probs, pol, k=3, shard_size=1)
    one_by_one = pa.concat_tables([run_all(probs.slice(i, 1), pol, k=3)[1] for i in range(probs.num_rows)])
    srt = [("problem_id", "ascending"), ("sample_idx", "ascending")]
    assert whole.sort_by(srt).equals(small.sort_by(srt))
    assert whole.sort_by(srt).equals(one_by_one.sort_by(srt))
    texts = whole.column("completion").to_pylist()
    assert len(set(texts)) > len(texts) // 2  # seeds differ, so samples differ


def test_shard_names_are_fixed_by_their_keys():
    pol = policy()
    a = [n for n, _ in run_all(problems(QS), pol, k=2)[0]]
    b = [n for n, _ in run_all(problems(QS), pol, k=2)[0]]
    assert a == b
    work = plan(problems(QS), k=2, existing=set())
    assert shard_name(pol.policy_id, work[:3]) != shard_name(pol.policy_id, work[3:6])


def test_select_problems_by_source_and_limit():
    t = pa.concat_tables([problems(QS[:4]), problems(QS[4:], source="other")])
    assert select_problems(t, sources=["other"]).num_rows == 3
    lim = select_problems(t, limit=2).column("problem_id").to_pylist()
    assert lim == sorted(t.column("problem_id").to_pylist())[:2]


# --- incremental: the engine sees exactly the missing keys ------------------------------------


def _requested(engine: FakeEngine) -> list[tuple[str, int]]:
    return [x for call in engine.calls for x in call]


def test_adding_problems_generates_only_the_new_ones():
    pol = policy()
    _, first, _ = run_all(problems(QS[:4]), pol, k=3)
    _, second, eng = run_all(problems(QS), pol, k=3, existing=existing_keys(first, pol.policy_id))
    new = {problem_id(q) for q in QS[4:]}
    assert len(_requested(eng)) == 3 * 3 == eng.generated
    assert {pid for pid, _ in _requested(eng)} == new
    assert keyset(second) == {(p, pol.policy_id, i) for p in new for i in range(3)}


def test_raising_k_generates_only_the_new_sample_indices():
    pol = policy()
    _, first, _ = run_all(problems(QS), pol, k=2)
    _, second, eng = run_all(problems(QS), pol, k=5, existing=existing_keys(first, pol.policy_id))
    assert len(_requested(eng)) == len(QS) * 3
    assert set(second.column("sample_idx").to_pylist()) == {2, 3, 4}
    seeds = {(pid, s) for pid, s in _requested(eng)}
    assert seeds == {(problem_id(q), sample_seed(problem_id(q), pol.policy_id, i)) for q in QS for i in (2, 3, 4)}
    # the first samples are the same as if k had been 5 from the start
    _, full, _ = run_all(problems(QS), pol, k=5)
    srt = [("problem_id", "ascending"), ("sample_idx", "ascending")]
    assert pa.concat_tables([first, second]).sort_by(srt).equals(full.sort_by(srt))


def test_adding_a_policy_generates_only_for_it_and_a_full_rerun_nothing():
    p1, p2 = policy("a"), policy("b", sampling={"temperature": 1.0, "max_tokens": 32})
    _, first, _ = run_all(problems(QS), p1, k=2)
    done = {p1.policy_id: existing_keys(first, p1.policy_id), p2.policy_id: existing_keys(first, p2.policy_id)}
    assert done[p2.policy_id] == set()
    _, again, eng1 = run_all(problems(QS), p1, k=2, existing=done[p1.policy_id])
    _, new, eng2 = run_all(problems(QS), p2, k=2, existing=done[p2.policy_id])
    assert again.num_rows == 0 and eng1.calls == []  # nothing missing: the engine is not even called
    assert len(_requested(eng2)) == len(QS) * 2 and set(new.column("policy_id").to_pylist()) == {p2.policy_id}


# --- engine contract -------------------------------------------------------------------------


def test_unknown_engine_and_unknown_options_are_errors():
    with pytest.raises(ConfigError, match=r"unknown engine 'vlm' \(did you mean vllm\?\); known: fake, openai, ray, vllm"):
        get_engine("vlm")
    with pytest.raises(ConfigError, match=r"engine_options\.fake: dealy_s: unknown key \(did you mean delay_s\?\)"):
        fake(dealy_s=1)


def test_fake_engine_is_deterministic_and_respects_max_tokens():
    s = SamplingConfig(temperature=0.8, max_tokens=3)
    req = Request("r", Prompt(text="Q: What is 2 + 3?\nA:"), seeds=(1, 2), sampling=s)
    a, b = fake().generate([req]), fake().generate([req])
    assert a == b and [x.index for x in a] == [0, 1] and [x.seed for x in a] == [1, 2]
    assert all(x.finish_reason == "length" and x.n_tokens == 3 for x in a)
    full = fake_completion(req.prompt, 1, temperature=0.8)
    assert full.startswith(" 2 + 3 = ") and full.endswith(".")
    with pytest.raises(ValueError, match="unique"):
        fake().generate([req, req])


class _Broken(Engine):
    name = "broken"

    def __init__(self, mode: str):
        super().__init__(model=ModelSpec("m", "m", "r", "float32"))
        self.mode = mode

    def _stream(self, requests):
        for r in requests:
            if self.mode == "extra":
                yield Sample(r.id, 99, 0, "x", 1, "stop")
            elif self.mode == "reason":
                yield Sample(r.id, 0, r.seeds[0], "x", 1, "abort")
            return  # "short": stops after the first request's nothing


@pytest.mark.parametrize(("mode", "match"), [
    ("extra", "unexpected sample 99"), ("reason", "finish_reason 'abort'"), ("short", "samples missing"),
])
def test_engine_misbehaviour_is_an_error_naming_the_request(mode, match):
    with pytest.raises(EngineError, match=match):
        run_all(problems(QS[:2]), policy(), k=2, engine=_Broken(mode))


def test_engine_failure_keeps_the_shards_already_yielded():
    pol = policy()
    got = []
    with pytest.raises(EngineError, match="failing as asked"):
        for name, t in rollout(problems(QS), policy=pol, k=2, existing=set(), engine=fake(fail_after=7), shard_size=1):
            got.append((name, t))
    assert len(got) == 3 and all(t.num_rows == 2 for _, t in got)
