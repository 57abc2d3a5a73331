import sys
from pathlib import Path

# Test helpers (owlproc, display, support) import as top-level modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import os  # noqa: E402

# `owl add`, `owl start` and `owl shift start` start a daemon when none runs;
# in tests that would leave daemons behind, so only the tests of that
# behaviour turn it back on (they stop what they started).
os.environ["OWL_NO_AUTOSTART"] = "1"

# git on the engine thread is a bug (owl.git.safegit): make it an error here, in
# this process and in every daemon a test starts.
os.environ["OWL_STRICT_THREADS"] = "1"


import pytest  # noqa: E402

from owlproc import make_project  # noqa: E402


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh git repository with one commit, for a test's Jobs."""
    return make_project(tmp_path / "proj")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Where a test's daemon keeps its config, database and logs (OWL_HOME)."""
    return tmp_path / "home"


# ------------------------------------------------------------------ markers
#
# Every test is marked by what it needs, read from what it uses: the helpers
# its body, its fixtures and the test-side functions and classes they call
# reach (followed through the tests' own modules, to any depth). So a new
# test is marked the moment it uses the daemon harness or a display, and the
# tiers (`tools/test --fast`, the parallel run, the serial `isolated` one)
# need no list kept by hand.

import functools  # noqa: E402
import heapq  # noqa: E402
import inspect  # noqa: E402
import types  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any, Iterator  # noqa: E402

TESTS = Path(__file__).resolve().parent
BENCH = TESTS.parent / "bench"  # the soak the tests run a minute of

#: (module, name) of a helper -> the marker a test that uses it gets.
NEEDS: dict[tuple[str, str], str] = {
    ("owlproc", "OwlDaemon"): "daemon",  # and every subclass (SocketOwl, OwlTray, UserOwl)
    ("owlproc", "stop_daemons"): "daemon",
    ("display", "virtual_display"): "display",
    ("display", "display_fixture"): "display",
    ("compositors", "compositor"): "wayland",
    ("compositors", "require"): "wayland",
    ("support.claude", "require_claude"): "claude",
    ("support.users", "second_user"): "slow",  # a user of its own and an install for it
    ("test_hostile", "StatusProbe"): "isolated",  # times the daemon's answers while it works
}

#: Words in a test's name that say it measures a latency: it runs alone (`isolated`).
LATENCY_WORDS = ("latency",)

#: Words in a test's code that say what it starts: turning autostart back on
#: (see above) lets `owl add` start a daemon; `owl daemon` run by hand is one.
WORDS: dict[str, str] = {"OWL_NO_AUTOSTART": "daemon"}
OWL_DAEMON_ARGV = ("OWL", "daemon")

#: A test that allows itself this long (pytest.mark.timeout) says it is slow.
SLOW_TIMEOUT = 120


def _is_test_code(obj: Any) -> bool:
    try:
        return _in_tests(inspect.getfile(obj))
    except (TypeError, OSError):
        return False


@functools.cache
def _in_tests(file: str) -> bool:
    """Whether a source file is the tests' or the benches' (once per file: a
    path resolved for every function reached was most of the collection's
    time, which every worker of every tier pays)."""
    where = Path(file).resolve()
    return where.is_relative_to(TESTS) or where.is_relative_to(BENCH)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _needs_of(obj: Any, seen: set[int]) -> set[str]:
    """The markers `obj` (a function or class of the tests) needs, by what it
    reaches: every object reached once (`seen`), each one read once a session."""
    found: set[str] = set()
    todo = [obj]
    while todo:
        now = todo.pop()
        if id(now) in seen:
            continue
        seen.add(id(now))
        own, reached = _edges(now)
        found |= own
        todo.extend(reached)
    return found


#: id -> (the object, what it needs itself, the tests' code it reaches); the
#: object is kept so that its id names it for the whole collection.
_EDGES: dict[int, tuple[Any, frozenset[str], tuple[Any, ...]]] = {}


def _edges(obj: Any) -> tuple[frozenset[str], tuple[Any, ...]]:
    """What `obj` needs by itself and what it reaches, read once: the same
    helpers are reached from hundreds of tests, and reading their code again
    for each was most of the collection's time, which every worker pays."""
    kept = _EDGES.get(id(obj))
    if kept is None or kept[0] is not obj:
        own, reached = _read(obj)
        kept = _EDGES[id(obj)] = (obj, frozenset(own), tuple(reached))
    return kept[1], kept[2]


def _read(obj: Any) -> tuple[set[str], list[Any]]:
    """What `obj` needs by itself, and the functions and classes its code reaches."""
    found: set[str] = set()
    if isinstance(obj, type):
        members = []
        for klass in obj.__mro__:
            need = NEEDS.get((klass.__module__, klass.__name__))
            if need:
                found.add(need)
        for klass in obj.__mro__:
            if klass is not object and _is_test_code(klass):
                for member in vars(klass).values():
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    if isinstance(member, property):
                        member = member.fget
                    if inspect.isfunction(member):
                        members.append(member)
        return found, members
    func = inspect.unwrap(obj) if callable(obj) else obj
    if not inspect.isfunction(func):
        return found, []
    need = NEEDS.get((func.__module__, func.__name__))
    if need:
        return {need}, []
    if not _is_test_code(func):
        return found, []
    codes = list(_codes(func.__code__))
    names = {n for code in codes for n in code.co_names}
    words = {c for code in codes for c in code.co_consts if isinstance(c, str)}
    found |= {need for word, need in WORDS.items() if word in words}
    if OWL_DAEMON_ARGV[0] in names and OWL_DAEMON_ARGV[1] in words:
        found.add("daemon")
    space = func.__globals__
    reached = [space[n] for n in names if n in space]
    reached += [
        getattr(m, n)
        for m in list(reached)
        if isinstance(m, types.ModuleType)
        for n in names
        if hasattr(m, n)
    ]
    reached += [c.cell_contents for c in func.__closure__ or () if _filled(c)]
    reached += list(func.__defaults__ or ())
    targets = []
    for target in reached:
        if isinstance(target, type) or inspect.isfunction(target) or hasattr(target, "__wrapped__"):
            targets.append(target)
        elif hasattr(target, "__pytest_wrapped__"):
            targets.append(target.__pytest_wrapped__.obj)
    return found, targets


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018  (reading it is the test)
        return True
    except ValueError:
        return False


def needs(item: pytest.Item) -> set[str]:
    """What a collected test needs: from its body and every fixture it uses."""
    seen: set[int] = set()
    found = set()
    func = getattr(item, "function", None)
    if func is not None:
        found |= _needs_of(func, seen)
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info else ():
        for fixturedef in defs:
            found |= _needs_of(fixturedef.func, seen)
    if any(word in item.name for word in LATENCY_WORDS):
        found.add("isolated")
    timeout = item.get_closest_marker("timeout")
    if timeout and timeout.args and float(timeout.args[0]) >= SLOW_TIMEOUT:
        found.add("slow")
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        have = {m.name for m in item.iter_markers()}
        for marker in sorted(needs(item) - have):
            item.add_marker(marker)
    items[:] = longest_first(items, known_seconds(), workers(config))


# ------------------------------------------------------------------ order
#
# The parallel run (`tools/test`: `--dist loadgroup`) hands the tests out in
# their collection order, one at a time, to whichever worker has little left:
# so the longest go first, and the short ones fill the end. Handed out in
# files, or in four quarters of the collection at the start, the slow files
# fell to one worker, which ran on alone at the end.

#: What a whole run measured, per test (`tests/slowest.txt`); a test not
#: named there is guessed by what it needs (the first of these it has).
GUESS = (("slow", 20.0), ("claude", 15.0), ("agent_clis", 15.0), ("wayland", 5.0))
GUESS_DAEMON = 3.0  # `daemon` or `display`: a daemon started, a Job or two run
GUESS_OTHER = 0.1
SLOWEST = TESTS / "slowest.txt"


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist names it too, but a run without xdist (-p no:xdist) must know it
    config.addinivalue_line("markers", "xdist_group(name): tests one worker takes together")


def known_seconds() -> dict[str, float]:
    """`tests/slowest.txt`: "SECONDS NODEID" a line, the seconds a whole run took for
    each of its slowest tests (set-up, call and tear-down together)."""
    known = {}
    for line in SLOWEST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, nodeid = line.split(maxsplit=1)
            known[nodeid] = float(seconds)
    return known


def guess(item: pytest.Item) -> float:
    for marker, seconds in GUESS:
        if item.get_closest_marker(marker):
            return seconds
    if item.get_closest_marker("daemon") or item.get_closest_marker("display"):
        return GUESS_DAEMON
    return GUESS_OTHER


@dataclass
class Unit:
    """Tests one worker takes together (one test, or a module sharing a fixture)."""

    items: list[pytest.Item]
    seconds: float
    heavy: bool  # a real agent CLI: seconds of CPU to start, each


def longest_first(
    items: list[pytest.Item], known: dict[str, float], workers: int = 1
) -> list[pytest.Item]:
    """The tests, longest first, as `workers` taking the next one when free would
    run them, with at most half of them on a real agent CLI's test at once: four
    such tests started together on two cores (each CLI takes seconds of CPU to
    start) ran past their own timeouts on a loaded machine. Those that share a
    fixture set up once for their module (a display and a tray, a wheel
    installed) stay together, in their order, as one unit (`xdist_group`: one
    worker takes them all); the unit goes where its tests' sum puts it."""
    grouped: dict[str, list[pytest.Item]] = {}
    for item in items:
        shared = shared_module(item)
        if shared is not None:
            item.add_marker(pytest.mark.xdist_group(shared))
        grouped.setdefault(shared or item.nodeid, []).append(item)
    units = [
        Unit(
            tests,
            sum(known.get(t.nodeid, guess(t)) for t in tests),
            any(t.get_closest_marker(m) for t in tests for m in HEAVY),
        )
        for tests in grouped.values()
    ]
    units.sort(key=lambda u: u.seconds, reverse=True)
    cap = max(1, workers // 2)
    free = [0.0] * max(1, workers)  # when each worker is next free, as a heap
    heavy_ends: list[float] = []
    order = []
    while units:
        now = heapq.heappop(free)
        heavy_ends = [t for t in heavy_ends if t > now]
        pick = 0
        if len(heavy_ends) >= cap:  # the longest that is not one more agent CLI
            pick = next((i for i, u in enumerate(units) if not u.heavy), 0)
        unit = units.pop(pick)
        order.append(unit)
        if unit.heavy:
            heavy_ends.append(now + unit.seconds)
        heapq.heappush(free, now + unit.seconds)
    return [item for unit in order for item in unit.items]


#: The markers of tests that run a real agent CLI.
HEAVY = ("claude", "agent_clis")


def workers(config: pytest.Config) -> int:
    """How many workers share the run (1 without pytest-xdist)."""
    given = getattr(config, "workerinput", {}).get("workercount")
    return int(given) if given else 1


def shared_module(item: pytest.Item) -> str | None:
    """The test's module, where it uses a fixture its module or class sets up once."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info else ():
        if any(d.scope in ("module", "class", "package") for d in defs):
            return item.nodeid.split("::", 1)[0]
    return None
