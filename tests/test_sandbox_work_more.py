"""More ordinary work inside a contained Run, through the real daemon: `uv sync`
and the project's tests through `uv run`, `go build` and `go test ./...` with a
dependency fetched through a module proxy. Each offline (a folder of wheels, a
proxy that is a folder), each committing what it made; the tools' caches land
in the project's caches in Owl's keeping, never in the person's home."""

from __future__ import annotations

import io
import os
import shutil
import sys
import zipfile
from pathlib import Path

from test_sandbox_work import base, committed, kept_caches, one_run, shell_daemon, wheel

from owlproc import make_project
from support.need import missing, programs

__all__ = ["base"]  # the fixture, used by name

UV_PROJECT = (
    '[project]\nname = "probe"\nversion = "1.0"\nrequires-python = ">=3.11"\n'
    'dependencies = ["owlprobe==1.0"]\n'
)
UNITTEST = (
    "import unittest\n\nimport owlprobe\n\n\nclass T(unittest.TestCase):\n"
    "    def test_value(self):\n        self.assertEqual(owlprobe.VALUE, 42)\n"
)
UV_AGENT = """set -eu
uv sync
uv run python -m unittest discover -s tests 2> uv.out
git add uv.lock uv.out && git commit -qm "the Job's work, synced and tested"
"""


def uv_folder(base: Path) -> str:
    """A folder holding uv, as its own installer leaves it (one binary in a
    ``bin`` on PATH): a copy of the test dependencies' uv (`.[test]`, beside
    this interpreter, whose ``bin`` Owl keeps off an agent's PATH), else of
    the one on PATH."""
    here = Path(sys.executable).parent / "uv"
    found = str(here) if os.access(here, os.X_OK) else shutil.which("uv")
    if found is None:
        missing("not installed: uv (pip install -e '.[test]')")
    folder = base / "tools" / "bin"
    folder.mkdir(parents=True)
    shutil.copy2(found, folder / "uv")
    return str(folder)


def test_uv_sync_and_uv_run_work_contained_and_cache_in_the_projects_keeping(base: Path) -> None:
    """uv resolves the project's one dependency from a folder of wheels (no
    index), makes the venv in the worktree, installs from its cache (in
    ~/.cache/uv: the project's cache folder, not the person's) and runs the
    project's tests; the lock file and their output are committed."""
    programs("bwrap")
    home = base / "person"
    home.mkdir()
    wheels = base / "wheels"
    wheels.mkdir()
    wheel(wheels)
    project = make_project(
        base / "proj",
        {"pyproject.toml": UV_PROJECT, "tests/test_probe.py": UNITTEST, ".gitignore": ".venv/\n"},
    )
    env = {
        "PATH": f"{uv_folder(base)}:{os.environ.get('PATH', os.defpath)}",
        "UV_OFFLINE": "1",
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(wheels),
        "UV_PYTHON": "/usr/bin/python3",  # Debian's: nothing to download
        "UV_PYTHON_DOWNLOADS": "never",
    }
    d = shell_daemon(base, home, UV_AGENT, sandbox={"read": [str(wheels)]}, env=env)
    with d:
        j, run = one_run(d, project, "sync, test and commit", timeout=120)
        log = Path(run["log"]).read_text(errors="replace")
        assert "OK" in committed(project, j["branch"], "uv.out"), log
        assert 'name = "owlprobe"' in committed(project, j["branch"], "uv.lock"), log
        # uv's cache (~/.cache/uv) is the project's, in Owl's keeping
        [uv_cache] = kept_caches(base).glob("cache-*/uv")
        assert (uv_cache / "CACHEDIR.TAG").is_file()
        assert any(uv_cache.glob("archive-v*/*/owlprobe/__init__.py")), sorted(uv_cache.iterdir())
    assert list(home.iterdir()) == []  # the person's home: nothing written


GO_MOD = "module example.com/probe\n\ngo 1.19\n\nrequire example.com/dep v1.0.0\n"
GO_MAIN = (
    'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/dep"\n)\n\n'
    'func main() {\n\tfmt.Println("the answer:", dep.Answer())\n}\n'
)
GO_TEST = (
    'package main\n\nimport (\n\t"testing"\n\n\t"example.com/dep"\n)\n\n'
    "func TestAnswer(t *testing.T) {\n\tif dep.Answer() != 42 {\n"
    '\t\tt.Fatal("wrong answer")\n\t}\n}\n'
)
DEP_MOD = "module example.com/dep\n\ngo 1.19\n"
DEP_GO = "package dep\n\n// Answer is the answer.\nfunc Answer() int { return 42 }\n"
GO_AGENT = """set -eu
go mod tidy
go build -o probe .
./probe > go.out
go test ./... > gotest.out
git add go.sum go.out gotest.out && git commit -qm "the Job's work, built and tested"
"""


def go_proxy(folder: Path) -> Path:
    """A module proxy that is a folder (GOPROXY=file://…) holding
    example.com/dep v1.0.0: what `go mod download` reads from a real one."""
    v = folder / "example.com" / "dep" / "@v"
    v.mkdir(parents=True)
    (v / "list").write_text("v1.0.0\n")
    (v / "v1.0.0.info").write_text('{"Version": "v1.0.0", "Time": "2026-01-01T00:00:00Z"}\n')
    (v / "v1.0.0.mod").write_text(DEP_MOD)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("example.com/dep@v1.0.0/go.mod", DEP_MOD)
        z.writestr("example.com/dep@v1.0.0/dep.go", DEP_GO)
    (v / "v1.0.0.zip").write_bytes(buf.getvalue())
    return folder


def test_go_build_and_go_test_work_contained_and_cache_in_the_projects_keeping(
    base: Path,
) -> None:
    """`go mod tidy` fetches the one dependency from the proxy into
    ~/go/pkg/mod (GOMODCACHE), `go build` and `go test ./...` compile through
    ~/.cache/go-build (GOCACHE): both the project's caches, in Owl's keeping,
    made before they are bound on a home that never had them."""
    programs("bwrap", "go")
    home = base / "person"
    home.mkdir()
    proxy = go_proxy(base / "goproxy")
    project = make_project(
        base / "proj",
        {
            "go.mod": GO_MOD,
            "main.go": GO_MAIN,
            "main_test.go": GO_TEST,
            ".gitignore": "/probe\n",
        },
    )
    env = {
        "GOPROXY": f"file://{proxy}",
        "GOSUMDB": "off",  # no checksum database to ask: the proxy is ours
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
    }
    # At Owl's own priority (nice 10, its session's autogroup) a Run's compile
    # gets a tenth of a core's share against each busy session: on this shared
    # machine that is a minute, not seconds. The priority is not what is tested.
    d = shell_daemon(
        base, home, GO_AGENT, sandbox={"read": [str(proxy)]}, env=env, runs={"nice": 0}
    )
    with d:
        j, run = one_run(d, project, "build, test and commit", timeout=180)
        log = Path(run["log"]).read_text(errors="replace")
        assert committed(project, j["branch"], "go.out") == "the answer: 42\n", log
        assert committed(project, j["branch"], "gotest.out").startswith("ok "), log
        assert "example.com/dep v1.0.0" in committed(project, j["branch"], "go.sum")
        caches = kept_caches(base)
        # GOMODCACHE: the dependency's source, unpacked in the project's keeping
        [mod] = caches.glob("mod-*")
        assert (mod / "example.com" / "dep@v1.0.0" / "dep.go").is_file()
        # GOCACHE: the compiled packages
        [gocache] = caches.glob("cache-*/go-build")
        assert any(gocache.glob("??/*-d"))
    assert list(home.iterdir()) == []  # the person's home: nothing written
