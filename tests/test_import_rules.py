"""The shape the code keeps: what the CLI and `views` may import, and the engine's size.

The `owl` command and the views it formats must not bring in anything that
starts or signals processes (a CLI that imports the process-tree code could
stop something by mistake, and pays for it on every call). Checked in a fresh
interpreter, since this test process has imported everything already.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app" / "owl"

# Modules that start, signal or supervise processes (git included).
FORBIDDEN = (
    "owl.tree",
    "owl.engine.loop",
    "owl.daemon.main",
    "owl.git.setup",
    "owl.engine.checks",
    "owl.git.workspace",
    "owl.git.safegit",
    "owl.engine.carryon",
    "owl.verbs.caller_side",
    "owl.engine.runstart",
    "subprocess",
)

PROBE = """
import importlib, json, pkgutil, sys
import owl.cli, owl.verbs.views
for m in pkgutil.iter_modules(owl.cli.__path__):
    importlib.import_module("owl.cli." + m.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_cli_and_views_import_nothing_that_runs_processes() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    loaded = json.loads(out)
    assert "owl.verbs.views" in loaded and "owl.cli.status" in loaded  # the probe did import them
    bad = sorted(m for m in loaded if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert bad == [], f"importing owl.cli and owl.verbs.views brought in {bad}"


def test_cli_takes_no_private_names_from_the_daemon() -> None:
    taken = []
    for path in sorted((APP / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "owl.daemon.main":
                taken += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert taken == []


def test_engine_stays_small() -> None:
    lines = len((APP / "engine" / "loop.py").read_text().splitlines())
    assert lines < 480, f"engine/loop.py has {lines} lines"


# ------------------------------------------------------------ the import graph
#
# Read from the source (every module under app/owl, imports inside functions
# included), not from sys.modules: an import inside a function closes a circle
# as surely as one at the top, it only closes it later. Imports under
# `if TYPE_CHECKING:` never run: they are left out of what a module brings in,
# but not out of the circles, since a type taken from a module above ties the
# two as surely as a call does (the engine's phases take `State`, not `Engine`).


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(APP.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(APP.rglob("*.py"))}


def _owl_module(name: str) -> str | None:
    """The Owl module that `name` (a module, or a name in one) is read from."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_only(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def _imports(module: str, types: bool = False) -> list[tuple[str, str, int]]:
    """(imported Owl module, the name taken or "", line) for each import in
    `module`; those under `if TYPE_CHECKING:` only with `types`."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skip = set() if types else _type_checking_only(tree)
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(m, "", node.lineno) for a in node.names if (m := _owl_module(a.name))]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                if full in MODULES:
                    out.append((full, "", node.lineno))
                elif m := _owl_module(base):
                    out.append((m, a.name, node.lineno))
    return out


def _graph() -> dict[str, set[str]]:
    return {m: {to for to, _, _ in _imports(m, types=True) if to != m} for m in MODULES}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import one another round (Tarjan's SCCs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = _graph()
    assert "owl.cli.parser" in graph["owl.cli"]  # imported inside main()
    assert "owl.engine.state" in graph["owl.engine.acting"]  # under TYPE_CHECKING
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles() -> None:
    graph = _graph()
    circles = _circles(graph)
    shown = [
        "; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c) for c in circles
    ]
    assert circles == [], "modules that import one another round:\n" + "\n".join(shown)


def test_rules_import_nothing_of_owl_outside_themselves() -> None:
    bad = [
        f"{m}:{line} imports {to}"
        for m in MODULES
        if m.startswith("owl.rules.")
        for to, _, line in _imports(m)
        if not to.startswith("owl.rules")
    ]
    assert bad == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_privates(tree: ast.AST) -> set[str]:
    """The private names a module defines: at the top, in its classes, and as
    attributes it sets (`self._x = ...`)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.rpartition(".")[2])
        elif isinstance(node, ast.arg):
            out.add(node.arg)
    return {n for n in out if _private(n)}


#: Private names of Python and its libraries, not of another Owl module.
NOT_OWLS = {
    "_replace",
    "_asdict",
    "_fields",
    "_make",
    "_exit",
    "_getframe",
    "_current_frames",
    "_condition",  # pynput's listener: the one way to wait for it to stop
    "_gen_c",
}  # pywayland's generated protocol classes (owl.idle.wlproto)


def private_uses(module: str) -> list[str]:
    """Where `module` takes another module's private name: `from x import _y`,
    `x._y` on an Owl module, or `obj._y` for a private attribute `module`
    itself never defines (so another module's: `eng._q` in a run phase)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    own = _defined_privates(tree)
    owl_names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("owl"):
                    owl_names[a.asname or a.name.partition(".")[0]] = a.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("owl"):
            for a in node.names:
                if f"{node.module}.{a.name}" in MODULES:
                    owl_names[a.asname or a.name] = f"{node.module}.{a.name}"
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = [
        f"{module}:{line} takes {to}.{name}"
        for to, name, line in _imports(module)
        if name and _private(name) and to != module
    ]
    out += [
        f"{module}:{line} takes the private module {to}"
        for to, name, line in _imports(module)
        if not name and _private(to.rpartition(".")[2]) and to.rpartition(".")[0] != package
    ]
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in owl_names:
            if owl_names[base.id] != module:
                out.append(f"{module}:{node.lineno} takes {ast.unparse(node)}")
        elif isinstance(base, ast.Name) and base.id in ("self", "cls", "super"):
            continue
        elif node.attr not in own and node.attr not in NOT_OWLS:
            out.append(f"{module}:{node.lineno} takes {ast.unparse(node)}")
    return out


def test_the_private_check_sees_every_spelling(tmp_path: Path, monkeypatch) -> None:
    sample = APP / "_sample_for_the_test.py"
    monkeypatch.setitem(MODULES, "owl._sample_for_the_test", tmp_path / "sample.py")
    (tmp_path / "sample.py").write_text(
        "from owl.settings.paths import _socket_in\n"
        "from owl.tree import _platform\n"
        "from owl.rules import bounds\n"
        "def f(eng):\n"
        "    from owl.store.db import _hidden\n"
        "    eng._q.put(1)\n"
        "    return bounds._show(1), self_ok(eng)\n"
        "class A:\n"
        "    def g(self):\n"
        "        self._mine = 1\n"
        "        return self._mine, other._mine\n"
    )
    assert not sample.exists()
    taken = " ".join(private_uses("owl._sample_for_the_test"))
    for name in ("_socket_in", "owl.tree._platform", "_hidden", "eng._q", "bounds._show"):
        assert name in taken, name
    assert "_mine" not in taken  # its own attribute, on itself or another of its objects


def test_no_module_takes_another_modules_private_names() -> None:
    taken = [u for m in MODULES for u in private_uses(m)]
    assert taken == [], "private names taken across modules:\n" + "\n".join(taken)
