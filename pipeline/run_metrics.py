"""One stats object for every stage's metrics: named counters, timers, rates and values that merge with ``+``.

Modelled on datatrove's ``Stats``/``MetricStatsDict``: a run (or a worker, a shard, a policy) keeps its own
:class:`RunStats`; two of them add up (counters and timers summed, sections merged key by key), and the result
serialises to the dict a stage writes as its metrics (:func:`pipeline.io.write_metrics`: the counts to the DVC
metrics file, the timings to ``data/logs/timings/``, which neither DVC nor git tracks)::

    stats = RunStats()
    stats["set"] = "main"                        # a value: kept as is; two runs merge only if they agree
    stats.count("samples", 8)                    # a counter: summed
    stats.add_time("generate_s", 1.25)           # a timer (seconds): summed; written rounded, to the timings
    stats.rate("tokens_per_s", "tokens", "generate_s", digits=2)  # counter / timer, worked out when written
    stats.section("policies").section("smollm2").count("tokens", 96)
    (stats + other).counts()                     # {"samples": 16, "set": "main", "policies": {...}}
    stats.timings()                              # {"generate_s": 2.5, "tokens_per_s": ...}

Which keys are timings is said where they are made (:meth:`add_time`, :meth:`timer`, :meth:`rate`), not guessed
from their names; :meth:`to_dict` gives counts and timings in one dict, as a stage's ``metrics()`` always did.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["RunStats", "StatsError"]


class StatsError(ValueError):
    """Two stats that cannot merge: a key of different kinds, two different values, rates defined differently."""


@dataclass
class _Counter:
    value: int | float = 0

    def __add__(self, other: _Counter) -> _Counter:
        return _Counter(self.value + other.value)

    def out(self, stats: RunStats) -> Any:
        return self.value


@dataclass
class _Timer:
    seconds: float = 0.0
    digits: int = 3

    def __add__(self, other: _Timer) -> _Timer:
        return _Timer(self.seconds + other.seconds, self.digits)

    def out(self, stats: RunStats) -> Any:
        return round(self.seconds, self.digits)


@dataclass
class _Rate:
    numerator: str  # a counter of the same stats
    denominator: str  # a timer of the same stats
    digits: int
    empty: float | None  # the value when either side is zero

    def __add__(self, other: _Rate) -> _Rate:
        if self != other:
            raise StatsError(f"rates defined differently: {self} and {other}")
        return self

    def out(self, stats: RunStats) -> Any:
        num = stats._number(self.numerator)
        den = stats._seconds(self.denominator)
        return round(num / den, self.digits) if den > 0 and num else self.empty


@dataclass
class _Value:
    value: Any

    def __add__(self, other: _Value) -> _Value:
        if self.value != other.value:
            raise StatsError(f"cannot merge two different values: {self.value!r} and {other.value!r}")
        return self

    def out(self, stats: RunStats) -> Any:
        return self.value


_TIMING_KINDS = (_Timer, _Rate)


class RunStats:
    """A run's metrics: an ordered map of named counters, timers, rates, values and nested sections."""

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}

    # --- recording ---------------------------------------------------------------------------------------------

    def count(self, name: str, n: int | float = 1) -> RunStats:
        """Add ``n`` to counter ``name`` (created at 0)."""
        self._get(name, _Counter).value += n
        return self

    def add_time(self, name: str, seconds: float, *, digits: int = 3) -> RunStats:
        """Add ``seconds`` to timer ``name`` (written rounded to ``digits``)."""
        timer = self._get(name, lambda: _Timer(0.0, digits))
        timer.seconds += seconds
        return self

    @contextmanager
    def timer(self, name: str, *, digits: int = 3) -> Iterator[None]:
        """Time the ``with`` block into timer ``name``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add_time(name, time.perf_counter() - t0, digits=digits)

    def rate(self, name: str, numerator: str, denominator: str, *, digits: int, empty: float | None = 0.0) -> RunStats:
        """Declare ``name`` = counter ``numerator`` / timer ``denominator``, rounded to ``digits`` (``empty`` when
        either is zero), worked out when the stats are written."""
        self._set(name, _Rate(numerator, denominator, digits, empty))
        return self

    def section(self, name: str) -> RunStats:
        """The nested stats ``name`` (created empty): per policy, per source, per status."""
        return self._get(name, RunStats)

    def __setitem__(self, name: str, value: Any) -> None:
        """Set value ``name``: a label, a measured figure or a record that is not summed."""
        self._set(name, value if isinstance(value, RunStats) else _Value(value))

    def __getitem__(self, name: str) -> Any:
        """A counter's or value's current value, a timer's seconds, a section."""
        item = self._items[name]
        if isinstance(item, RunStats):
            return item
        if isinstance(item, _Timer):
            return item.seconds
        if isinstance(item, _Rate):
            return item.out(self)
        return item.value

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def __len__(self) -> int:
        return len(self._items)

    # --- merging -----------------------------------------------------------------------------------------------

    def __add__(self, other: RunStats) -> RunStats:
        """Both runs' stats: counters and timers summed, sections merged, values and rates kept where they agree."""
        if not isinstance(other, RunStats):
            return NotImplemented
        out = RunStats()
        for name, item in [*self._items.items(), *other._items.items()]:
            mine = out._items.get(name)
            if mine is None:
                out._items[name] = RunStats() + item if isinstance(item, RunStats) else _copy(item)
            elif type(mine) is not type(item):
                raise StatsError(f"{name!r} is a {_kind(mine)} in one run and a {_kind(item)} in the other")
            else:
                out._items[name] = mine + item
        return out

    def __radd__(self, other: Any) -> RunStats:  # sum([...]) starts from 0
        if other == 0:
            return RunStats() + self
        return NotImplemented

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> RunStats:
        """Stats from a core's plain record: integers become counters, nested mappings sections, anything else
        (a label, a measured float, a list, None) a value. Timers and rates are added by the caller, who knows them."""
        out = cls()
        for name, value in record.items():
            if isinstance(value, Mapping):
                out._items[name] = cls.of(value)
            elif isinstance(value, int) and not isinstance(value, bool):
                out._items[name] = _Counter(value)
            else:
                out._items[name] = _Value(value)
        return out

    @classmethod
    def merge(cls, stats: Iterable[RunStats]) -> RunStats:
        """Every run's stats merged into one (an empty stats for none)."""
        out = cls()
        for s in stats:
            out = out + s
        return out

    # --- serialising ---------------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Counts and timings in one dict, sections nested (what a stage's ``metrics()`` returns)."""
        return self._dump(lambda item: True)

    def counts(self) -> dict[str, Any]:
        """Everything but the timings: the DVC metrics file's content (the same run to run)."""
        return self._dump(lambda item: not isinstance(item, _TIMING_KINDS))

    def timings(self) -> dict[str, Any]:
        """The timers and rates only (a section without any is left out)."""
        return self._dump(lambda item: isinstance(item, _TIMING_KINDS), prune=True)

    def _dump(self, keep, *, prune: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, item in self._items.items():
            if isinstance(item, RunStats):
                inner = item._dump(keep, prune=prune)
                if inner or not prune:
                    out[name] = inner
            elif keep(item):
                out[name] = item.out(self)
        return out

    def __repr__(self) -> str:
        return f"RunStats({self.to_dict()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunStats) and self._items == other._items

    # --- inside ----------------------------------------------------------------------------------------------------

    def _get(self, name: str, make):
        item = self._items.get(name)
        if item is None:
            item = self._items[name] = make()
        expected = type(make()) if not isinstance(make, type) else make
        if not isinstance(item, expected):
            raise StatsError(f"{name!r} is a {_kind(item)}, not a {_kind(expected())}")
        return item

    def _set(self, name: str, item: Any) -> None:
        if (old := self._items.get(name)) is not None and type(old) is not type(item):
            raise StatsError(f"{name!r} is a {_kind(old)}, not a {_kind(item)}")
        self._items[name] = item

    def _number(self, name: str) -> int | float:
        item = self._items.get(name)
        return item.value if isinstance(item, _Counter) else 0

    def _seconds(self, name: str) -> float:
        item = self._items.get(name)
        return item.seconds if isinstance(item, _Timer) else 0.0


def _copy(item: Any) -> Any:
    return type(item)(**vars(item))


def _kind(item: Any) -> str:
    return {_Counter: "counter", _Timer: "timer", _Rate: "rate", _Value: "value", RunStats: "section"}[type(item)]
