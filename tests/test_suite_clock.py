"""No test bounds the wall clock: a difference of ``time.perf_counter()``, ``time.time()`` or ``time.monotonic()``
(or a name that holds one) bounded above by anything that is not itself a wall-clock duration (or a rate bounded
below) fails this test.

A busy machine stretches the wall clock with nothing wrong (another build, a shared CI runner), so a bound on a
cost is CPU time (``time.process_time()``, tests/support/cpu_clock.py for the processes a test starts) or a ratio measured
in one run (time on 2n against time on n: both sides stretch alike). A wait that uses no CPU (a hang, a server
that never answers) gets a kill switch instead: ``@pytest.mark.timeout(N)``, far past the expected time. The
absolute figures live in benchmarks/ (scripts that print them), which this rule does not scan.

The rule follows names through assignments in a function and the functions around it: ``t = perf_counter()`` is a
reading, ``elapsed = perf_counter() - t`` a duration, ``elapsed / n`` still one, ``t_2n / t_n`` a ratio (no longer a
duration), ``n / elapsed`` a rate, ``max(a, b)`` a duration when either is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WALL_CLOCKS = frozenset({"perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns"})
NONE, READING, DURATION, RATE = 0, 1, 2, 3  # what an expression holds (a rate: something per wall-clock second)
PASS_THROUGH = frozenset({"abs", "float", "int", "max", "min", "round", "sum"})


def _combine(op: ast.operator, a: int, b: int) -> int:
    if isinstance(op, ast.Sub) and a == b == READING:
        return DURATION
    if isinstance(op, (ast.Add, ast.Sub)) and READING in (a, b):
        return READING  # a deadline: a reading plus a constant
    if isinstance(op, (ast.Div, ast.FloorDiv)):
        if a == b and a in (DURATION, RATE):
            return NONE  # a ratio of two timings of one run
        if a == NONE and b in (DURATION, RATE):
            return RATE if b == DURATION else DURATION
    if isinstance(op, ast.Mult) and {a, b} == {DURATION, RATE}:
        return NONE
    return b if a == NONE else a if b == NONE else max(a, b)


class _Scope:
    def __init__(self, clocks: set[str], modules: set[str], outer: dict[str, int]):
        self.clocks, self.modules, self.names = clocks, modules, dict(outer)

    def kind(self, node: ast.AST) -> int:
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr in WALL_CLOCKS and isinstance(f.value, ast.Name)
                    and f.value.id in self.modules) or (isinstance(f, ast.Name) and f.id in self.clocks):
                return READING
            if isinstance(f, ast.Name) and f.id in PASS_THROUGH:
                return max((self.kind(a) for a in node.args), default=NONE)
            return NONE
        if isinstance(node, ast.Name):
            return self.names.get(node.id, NONE)
        if isinstance(node, ast.UnaryOp):
            return self.kind(node.operand)
        if isinstance(node, ast.BinOp):
            return _combine(node.op, self.kind(node.left), self.kind(node.right))
        return NONE

    def assign(self, targets: list[ast.expr], value: ast.expr) -> None:
        k = self.kind(value)
        for t in targets:
            if isinstance(t, ast.Name):  # a name assigned several kinds keeps the strongest
                self.names[t.id] = max(self.names.get(t.id, NONE), k)


def _bounds_the_wall_clock(op: ast.cmpop, a: int, b: int, *, asserted: bool) -> bool:
    """In an assert: an upper bound on a duration, or a lower bound on a rate, by something that is neither (a lower
    bound on a duration is no harm: a busy machine only makes it truer). Elsewhere (``if elapsed > 5: fail()``) the
    direction says nothing, so any comparison of the two."""
    if isinstance(op, (ast.Eq, ast.NotEq)) or not asserted:
        return isinstance(op, (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)) and \
            {a, b} in ({DURATION, NONE}, {RATE, NONE})
    if isinstance(op, (ast.Gt, ast.GtE)):
        a, b = b, a
    elif not isinstance(op, (ast.Lt, ast.LtE)):
        return False
    return (a == DURATION and b == NONE) or (a == NONE and b == RATE)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _own_nodes(body: list[ast.AST]):
    """The nodes of a body; a nested function, class or lambda is yielded but not entered (a scope of its own)."""
    todo = list(body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))


def wall_clock_bounds(source: str) -> list[int]:
    """The line of every comparison that bounds a wall-clock duration by something that is not one."""
    tree = ast.parse(source)
    clocks, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "time"}
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            clocks |= {a.asname or a.name for a in node.names if a.name in WALL_CLOCKS}
    found: list[int] = []

    def visit(body: list[ast.AST], outer: dict[str, int]) -> None:
        scope = _Scope(clocks, modules, outer)
        nodes = list(_own_nodes(body))
        for _ in range(3):  # names from names: a few rounds settle any chain a test writes
            for node in nodes:
                if isinstance(node, ast.Assign):
                    scope.assign(node.targets, node.value)
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                    scope.assign([node.target], node.value)
        asserted = {id(n) for a in nodes if isinstance(a, ast.Assert) for n in _own_nodes([a.test])}
        for node in nodes:
            if isinstance(node, ast.Compare):
                sides = [scope.kind(n) for n in (node.left, *node.comparators)]
                if any(_bounds_the_wall_clock(op, a, b, asserted=id(node) in asserted)
                       for op, a, b in zip(node.ops, sides, sides[1:], strict=False)):
                    found.append(node.lineno)
            elif isinstance(node, ast.Lambda):
                visit([node.body], scope.names)
            elif isinstance(node, _SCOPES):
                visit(node.body, scope.names)

    visit(tree.body, {})
    return sorted(found)


@pytest.mark.parametrize("source", [
    "import time\nt = time.perf_counter()\nwork()\nassert time.perf_counter() - t < 1.0",
    "import time\ndef test():\n    t0 = time.monotonic()\n    elapsed = time.monotonic() - t0\n    assert elapsed < 20",
    "from time import perf_counter as pc\nt = pc()\nassert pc() - t <= 3 * timeout + 2",
    "import time as clock\nt = clock.time()\nif (clock.time() - t) / 4 > 0.5:\n    fail()",
    "import time\nt = time.time()\nassert n / (time.time() - t) > 100  # a throughput floor",
    "import time\nt = time.monotonic()\ndef check():\n    assert max(time.monotonic() - t, 0) < 5",
    "import time\nt = time.perf_counter_ns()\nassert 0 < time.perf_counter_ns() - t < 10**9",
])
def test_the_rule_catches_a_planted_wall_clock_bound(source):
    assert wall_clock_bounds(source), source


@pytest.mark.parametrize("source", [
    "import time\nt = time.process_time()\nwork()\nassert time.process_time() - t < 1.0",  # CPU time
    "import time\ndef test():\n    t = time.perf_counter()\n    a()\n    t_n = time.perf_counter() - t\n"
    "    t = time.perf_counter()\n    b()\n    t_2n = time.perf_counter() - t\n    assert t_2n / t_n < 3",  # a ratio
    "import time\na = time.perf_counter() - t\nb = time.perf_counter() - t\nassert a < 3 * b",  # both sides stretch
    "import time\ndeadline = time.monotonic() + 60\nwhile time.monotonic() < deadline:\n    poll()",  # a kill switch
    "import time\nt = time.perf_counter()\nresult.seconds = time.perf_counter() - t",  # recorded, not bounded
    "import time\nt = time.perf_counter()\ntime.sleep(0.1)\nassert time.perf_counter() - t >= 0.1",  # a floor: load only helps
    "import time\nt = time.perf_counter()\nassert n / (time.perf_counter() - t) < 10**6",  # a rate's ceiling: likewise
])
def test_the_rule_leaves_cpu_time_ratios_and_deadlines_alone(source):
    assert wall_clock_bounds(source) == [], source


CPU_CLOCKS = frozenset({"process_time", "process_time_ns", "tree_cpu_s", "getrusage"})


def _marks_timing(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "timing" for n in ast.walk(node))


def unmarked_cpu_bounds(source: str) -> list[str]:
    """The tests that read a CPU clock without the ``timing`` mark (tests/test_suite_under_load.py runs the marked ones
    beside busy loops, so a bound that only holds on a quiet machine shows)."""
    tree = ast.parse(source)
    if any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
           and _marks_timing(n.value) for n in tree.body):
        return []
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
            called = {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", None)
                      for c in ast.walk(node) if isinstance(c, ast.Call)}
            if called & CPU_CLOCKS and not any(_marks_timing(d) for d in node.decorator_list):
                found.append(node.name)
    return found


def test_the_mark_rule_finds_an_unmarked_cpu_bound():
    body = "    t = time.process_time()\n    work()\n    assert time.process_time() - t < 1.0\n"
    assert unmarked_cpu_bounds("import time\ndef test_a():\n" + body) == ["test_a"]
    assert unmarked_cpu_bounds("import time\n@pytest.mark.timing\ndef test_a():\n" + body) == []
    assert unmarked_cpu_bounds("import time\npytestmark = [pytest.mark.slow, pytest.mark.timing]\ndef test_a():\n"
                               + body) == []


def test_every_cpu_bound_is_marked_timing():
    found = [f"{path.relative_to(REPO)}::{name}" for path in sorted((REPO / "tests").glob("test_*.py"))
             for name in unmarked_cpu_bounds(path.read_text())]
    assert not found, "mark these @pytest.mark.timing: " + ", ".join(found)


def test_no_test_bounds_the_wall_clock():
    found = [f"{path.relative_to(REPO)}:{line}" for path in sorted((REPO / "tests").rglob("*.py"))
             for line in wall_clock_bounds(path.read_text())]
    assert not found, "a wall-clock bound (bound CPU time or a ratio instead: tests/test_suite_clock.py): " + \
        ", ".join(found)
