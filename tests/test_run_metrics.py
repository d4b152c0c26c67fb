"""pipeline/run_metrics.py: one mergeable stats object for every stage's metrics (datatrove's Stats is the model)."""

from __future__ import annotations

import json
import types

import pytest

from pipeline import run_metrics
from pipeline.io import write_metrics
from pipeline.run_metrics import RunStats, StatsError


def _shard(samples: int, tokens: int, seconds: float) -> RunStats:
    s = RunStats()
    s["set"] = "main"
    s.count("samples", samples).count("tokens", tokens)
    s.add_time("seconds", seconds)
    s.rate("tokens_per_s", "tokens", "seconds", digits=2)
    s.section("policies").section("p").count("tokens", tokens)
    return s


def test_two_shards_add_up_counters_timers_and_sections():
    total = _shard(8, 100, 1.0) + _shard(4, 60, 0.6)
    assert total.counts() == {"set": "main", "samples": 12, "tokens": 160, "policies": {"p": {"tokens": 160}}}
    assert total.timings() == {"seconds": 1.6, "tokens_per_s": 100.0}
    assert total.to_dict() == {**total.counts(), **total.timings()}
    assert sum([_shard(1, 1, 1.0), _shard(1, 1, 1.0)]).counts()["samples"] == 2  # sum() starts from 0
    assert RunStats.merge([]).to_dict() == {}


def test_merging_does_not_change_either_side():
    a, b = _shard(1, 10, 1.0), _shard(2, 20, 1.0)
    before = a.to_dict(), b.to_dict()
    a + b
    assert (a.to_dict(), b.to_dict()) == before


def test_values_merge_only_when_they_agree_and_kinds_never_mix():
    other = _shard(1, 1, 1.0)
    other["set"] = "reformulated"
    with pytest.raises(StatsError, match="'main' and 'reformulated'"):
        _shard(1, 1, 1.0) + other
    timed = RunStats().add_time("samples", 1.0)
    with pytest.raises(StatsError, match="'samples' is a counter in one run and a timer in the other"):
        _shard(1, 1, 1.0) + timed
    with pytest.raises(StatsError, match="'samples' is a counter, not a timer"):
        _shard(1, 1, 1.0).add_time("samples", 1.0)


def test_a_rate_is_empty_when_either_side_is_zero():
    s = RunStats().count("rows", 0).add_time("seconds", 2.0).rate("rows_per_s", "rows", "seconds", digits=1, empty=None)
    assert s.timings() == {"seconds": 2.0, "rows_per_s": None}
    assert RunStats().count("tokens", 5).rate("tokens_per_s", "tokens", "seconds", digits=2).timings() == {
        "tokens_per_s": 0.0}


def test_of_a_plain_record_counts_integers_and_keeps_everything_else():
    s = RunStats.of({"verifier_id": "v1", "flags": 3, "mean_pass_rate": 0.25, "ok": True, "bands": {"hard": 2},
                     "prior": None, "target_bands": ["learnable"]})
    assert s.counts() == {"verifier_id": "v1", "flags": 3, "mean_pass_rate": 0.25, "ok": True, "bands": {"hard": 2},
                          "prior": None, "target_bands": ["learnable"]}
    assert s.timings() == {}
    assert (s + s).counts()["bands"] == {"hard": 4}  # a nested record is a section: its counters add up
    assert (s + s).counts()["mean_pass_rate"] == 0.25  # a measured figure is a value: kept where both agree


def test_write_metrics_puts_timers_and_rates_in_the_logs_whatever_their_names(tmp_path):
    s = RunStats().count("rows", 4).add_time("fold_time", 0.5).rate("rows_per_fold_second", "rows", "fold_time", digits=1)
    s.section("nested").add_time("inner", 0.25)
    s.section("empty")
    path = write_metrics(tmp_path / "data/metrics/x.json", s, root=tmp_path)
    assert json.loads(path.read_text()) == {"rows": 4, "nested": {}, "empty": {}}
    timings = json.loads((tmp_path / "data/logs/timings/x.json").read_text())
    assert timings == {"fold_time": 0.5, "rows_per_fold_second": 8.0, "nested": {"inner": 0.25}}


def test_the_timer_context_records_the_block(monkeypatch):
    ticks = iter([10.0, 10.25, 20.0, 20.5])  # a scripted clock: the blocks take 0.25 s and 0.5 s
    monkeypatch.setattr(run_metrics, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    s = RunStats()
    with s.timer("seconds"):
        pass
    with s.timer("seconds"):
        pass
    assert s["seconds"] == 0.75 and "seconds" in s.timings()
