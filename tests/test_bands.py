"""pipeline/bands.py declares the bands once: their names, order, edges, sides and the assignment rule; no other module
of pipeline/ spells a band name as data."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from pipeline.bands import (
    BANDS,
    DEFAULT_EDGES,
    LEARNABLE,
    SIDES,
    TOO_EASY,
    TOO_HARD,
    UNSOLVED,
    assign_band,
    band_ranges,
    side_ranges,
)
from pipeline.config import BandsConfig

PIPELINE = Path(__file__).resolve().parents[1] / "pipeline"


def test_no_other_module_spells_a_band_name():
    """A string constant equal to a band's name outside bands.py (prose that mentions one is fine): the names come
    from its constants, so a renamed band cannot leave a stale copy behind."""
    found = []
    for path in sorted(PIPELINE.rglob("*.py")):
        if path.name == "bands.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in BANDS:
                found.append(f"{path.relative_to(PIPELINE.parent)}:{node.lineno}: {node.value!r}")
    assert not found, found


def test_the_ranges_tile_zero_to_one_in_order():
    cfg = BandsConfig()
    ranges = band_ranges(cfg)
    ordered = sorted(ranges.values())
    assert ordered[0][0] == 0.0 and ordered[-1][1] == 1.0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ordered))
    assert [b for b, _ in sorted(ranges.items(), key=lambda kv: -kv[1][0])] == list(BANDS)  # easiest first
    assert (cfg.unsolved_max, cfg.learnable_min, cfg.learnable_max) == tuple(DEFAULT_EDGES.values())


@pytest.mark.parametrize("edges", [{}, {"unsolved_max": 0.05, "learnable_min": 0.3, "learnable_max": 0.7}])
def test_each_side_is_the_union_of_its_bands(edges):
    cfg = BandsConfig(**edges)
    sides = side_ranges(cfg)
    assert set(SIDES) == set(BANDS) and set(sides) == {"below", LEARNABLE, "above"}
    assert sides["below"] == (0.0, cfg.learnable_min)
    assert sides[LEARNABLE] == band_ranges(cfg)[LEARNABLE] and sides["above"] == band_ranges(cfg)[TOO_EASY]


def test_the_assignment_rule_at_k_8():
    cfg = BandsConfig()
    got = [assign_band(c, 8, cfg) for c in range(9)]
    # 0 is always unsolved and a success never is; 1/8 = 0.125 < 0.2; 2..6 of 8 learnable; 7 and 8 too_easy
    assert got == [UNSOLVED, TOO_HARD, *[LEARNABLE] * 5, TOO_EASY, TOO_EASY]
    assert assign_band(1, 1000, cfg) == TOO_HARD  # 0.001 < 0.02, but a success is never unsolved
