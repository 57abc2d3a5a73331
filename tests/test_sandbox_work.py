"""Normal work inside a contained Run, through the real daemon: the agent makes
a virtual environment in the worktree and installs the project's package into
it, runs the project's tests with pytest and `npm test` (a local package in
node_modules), writes its caches (a fresh home has none: they are made before
they are bound), commits on its branch, and the Job reaches
review with its checks passed, the checks contained as the agent was (they
run the tests the agent wrote). A `cargo build` on a fresh home fetches a
git dependency into ~/.cargo/git, made before it is bound."""

from __future__ import annotations

import base64
import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from owlproc import ROOT, OwlDaemon, make_project
from support.need import missing, programs

PACKAGE = "VALUE = 42\n"
TEST = "import owlprobe\n\n\ndef test_value():\n    assert owlprobe.VALUE == 42\n"
NPM = '{"name": "probe", "version": "1.0.0", "scripts": {"test": "node test.js"}}\n'
JS_TEST = "const pad = require('padleft-local');\nconsole.log('npm tests passed: ' + pad('7'));\n"
JS_PKG = '{"name": "padleft-local", "version": "1.0.0", "main": "index.js"}\n'
JS_INDEX = "module.exports = (s) => s.padStart(3, '0');\n"

# What the project's tests need of its venv, then pytest with this interpreter
# (no index to install pytest from here): the venv's own site-packages on the path.
PYTEST = (
    'PYTHONPATH="$(.venv/bin/python -c \'import sysconfig; print(sysconfig.get_paths()["purelib"])\')" '
    f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
)
AGENT = f"""set -eu
python3 -m venv .venv
.venv/bin/pip install -q --no-index --disable-pip-version-check "$WHEEL"
{PYTEST} > pytest.out
npm install --offline --no-audit --no-fund --loglevel=error ./jspkg > /dev/null
npm test > npm.out
echo "$RANDOM" > "$HOME/.cache/owl-probe"
git add pytest.out npm.out && git commit -qm "the Job's work, tested"
"""


def wheel(folder: Path) -> Path:
    """A pure-Python wheel of `owlprobe`, built by hand: nothing to fetch."""
    path = folder / "owlprobe-1.0-py3-none-any.whl"
    files = {
        "owlprobe/__init__.py": PACKAGE,
        "owlprobe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: owlprobe\nVersion: 1.0\n",
        "owlprobe-1.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            data = text.encode()
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{name},sha256={digest.decode()},{len(data)}")
        record.append("owlprobe-1.0.dist-info/RECORD,,")
        z.writestr("owlprobe-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def committed(project: Path, branch: str, name: str) -> str:
    """A file as the Job's branch holds it."""
    return subprocess.run(
        ["git", "-C", str(project), "show", f"{branch}:{name}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def shell_daemon(
    base: Path,
    home: Path,
    script: str,
    sandbox: dict[str, object] | None = None,
    env: dict[str, str] | None = None,
    **config: dict[str, object],
) -> OwlDaemon:
    """A daemon whose Runs must be contained, its agent a shell running ``script``
    (``config``: more of the config's tables)."""
    (base / "agent.sh").write_text(script)
    return OwlDaemon(
        base / "owl",
        {
            "sandbox": {"mode": "required", **(sandbox or {})},
            "agents": {"shell": {"command": ["bash", str(base / "agent.sh")]}},
            "agent": {"default": "shell"},
            **config,
        },
        env={"HOME": str(home), "AGENT_PIDS": "", **(env or {})},
    )


def one_run(d: OwlDaemon, project: Path, prompt: str, timeout: float) -> tuple[dict, dict]:
    """A Job of ``prompt`` run once, contained, to review: the Job and its Run."""
    job = d.add(prompt, project)
    d.ok("start")
    j = d.wait_job(job, "review", timeout=timeout)
    [run] = j["runs"]
    assert run["contained"].startswith("contained: bwrap "), run["contained"]
    return j, run


@pytest.fixture
def base() -> Iterator[Path]:
    """Not under /tmp, which a contained Run sees as a private folder of its own."""
    path = Path(tempfile.mkdtemp(prefix="owl-work-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(900)  # a venv, pip, pytest and npm, on a machine others share
def test_a_contained_agent_installs_tests_caches_and_commits(base: Path) -> None:
    programs("bwrap", "npm", "node")
    # a fresh home: no ~/.cache, no ~/.npm yet (made before they are bound)
    home = base / "person"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    project = make_project(
        base / "proj",
        {
            "tests/test_probe.py": TEST,
            "package.json": NPM,
            "test.js": JS_TEST,
            "jspkg/package.json": JS_PKG,
            "jspkg/index.js": JS_INDEX,
            ".gitignore": ".venv/\nnode_modules/\npackage-lock.json\n",
            ".owl.toml": (
                f"[[checks]]\nname = 'tests'\nrun = '''{PYTEST}'''\n"
                # the tests are the agent's to write: they run no freer than it did
                "[[checks]]\nname = 'contained'\n"
                "run = 'test ! -e \"$HOME/.ssh/id_ed25519\" && echo the key is out of reach'\n"
            ),
        },
    )
    wheels = base / "wheels"
    wheels.mkdir()
    d = shell_daemon(
        base,
        home,
        AGENT,
        # this checkout (the interpreter that runs pytest) readable wherever it lies
        # and the folder of the wheel it installs, as a local index would be
        sandbox={"read": [str(ROOT), str(wheels)]},
        env={"WHEEL": str(wheel(wheels))},
    )
    with d:
        j, run = one_run(d, project, "install, test and commit", timeout=600)
        assert [(c["name"], c["passed"]) for c in run["checks"]] == [
            ("tests", True),
            ("contained", True),
        ], run
        assert "1 passed" in run["checks"][0]["output"]
        assert "1 passed" in committed(project, j["branch"], "pytest.out")
        assert "npm tests passed: 007" in committed(project, j["branch"], "npm.out")
        # the cache is the project's, in Owl's keeping: the person's is untouched
        [probe] = kept_caches(base).glob("cache-*/owl-probe")
        assert probe.read_text().strip().isdigit()
        assert not (home / ".cache" / "owl-probe").exists()


def kept_caches(base: Path) -> Path:
    """The one project's caches, as Owl keeps them (`owl.sandbox.ownhome`)."""
    [found] = (base / "owl" / "sandbox" / "projects").glob("*/caches")
    return found


DEP_TOML = '[package]\nname = "dep"\nversion = "0.1.0"\nedition = "2021"\n'
DEP_LIB = "pub fn answer() -> u32 {\n    42\n}\n"
APP_MAIN = 'fn main() {\n    println!("the answer: {}", dep::answer());\n}\n'
CARGO_AGENT = """set -eu
cargo build -q
./target/debug/probe > cargo.out
git add Cargo.lock cargo.out && git commit -qm "the Job's work, built"
"""


def rustup_cargo() -> tuple[str, str]:
    """cargo's folder and rustup's home, as the person's shell would give them
    (rustup's proxies in ~/.cargo/bin, its toolchains in ~/.rustup): the
    Run's home is a fresh one, so rustup's home is named."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    found = shutil.which("cargo") or str(home / ".cargo" / "bin" / "cargo")
    rustup = os.environ.get("RUSTUP_HOME") or str(home / ".rustup")
    if not os.access(found, os.X_OK):
        missing("not installed: cargo (rustup's, https://rustup.rs)")
    return str(Path(found).parent), rustup


def test_a_contained_cargo_build_fetches_a_git_dependency_on_a_fresh_home(base: Path) -> None:
    """cargo writes the dependency's clone and checkout under ~/.cargo/git, which
    a fresh home lacks: it is made before it is bound, so the build works (the
    rest of the home stays read-only: without it, "Read-only file system").
    No network: the dependency is a local repository, fetched as a git one is."""
    programs("bwrap")
    cargo_bin, rustup_home = rustup_cargo()
    home = base / "person"
    home.mkdir()
    dep = make_project(base / "dep", {"Cargo.toml": DEP_TOML, "src/lib.rs": DEP_LIB})
    app_toml = (
        '[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\n\n'
        f'[dependencies]\ndep = {{ git = "file://{dep}" }}\n'
    )
    project = make_project(
        base / "proj",
        {"Cargo.toml": app_toml, "src/main.rs": APP_MAIN, ".gitignore": "target/\n"},
    )
    path = f"{cargo_bin}:{os.environ.get('PATH', os.defpath)}"
    d = shell_daemon(
        base,
        home,
        CARGO_AGENT,
        env={"PATH": path, "RUSTUP_HOME": rustup_home},
        # the dependency's repository is not the project: the Run reads it when named
        sandbox={"read": [str(dep)]},
    )
    with d:
        j, run = one_run(d, project, "build and commit", timeout=120)
        log = Path(run["log"]).read_text(errors="replace")
        assert committed(project, j["branch"], "cargo.out") == "the answer: 42\n", log
        [checkouts] = kept_caches(base).glob("git-*/checkouts")
        assert any(checkouts.iterdir())
        assert not (home / ".cargo" / "git").exists()


PYPROJECT = (
    '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    '[project]\nname = "owlprobe"\nversion = "1.0"\n'
)
UNITTEST = (
    "import unittest\n\nimport owlprobe\n\n\nclass T(unittest.TestCase):\n"
    "    def test_value(self):\n        self.assertEqual(owlprobe.VALUE, 42)\n"
)
LOCKED = '{"name": "probe", "version": "1.0.0", "dependencies": {"padleft-local": "file:jspkg"}}\n'
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>p</groupId><artifactId>probe</artifactId><version>1.0</version>
<properties><maven.compiler.source>17</maven.compiler.source>
<maven.compiler.target>17</maven.compiler.target>
<project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>
<build><plugins>
<plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId>
<version>3.13.0</version></plugin>
<plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId>
<version>3.3.1</version></plugin>
</plugins></build></project>
"""
JAVA = 'package p; public class A { public static void main(String[] a) { System.out.println("built: " + 42); } }\n'
# The system's Python, with its site packages (setuptools and wheel, which an
# editable install builds with, from Debian's own packages: no index here).
BUILDS = """set -eu
/usr/bin/python3 -m venv --system-site-packages .venv
.venv/bin/pip install -q --no-index --no-build-isolation --disable-pip-version-check -e .
.venv/bin/python -m unittest discover -s tests 2> unittest.out
npm ci --offline --no-audit --no-fund --loglevel=error > /dev/null
node -e "console.log('npm ci: ' + require('padleft-local')('7'))" > npm.out
mvn -o -q -Dmaven.repo.local="$M2" compile
java -cp target/classes p.A > mvn.out
git add unittest.out npm.out mvn.out && git commit -qm "the Job's work, built"
"""


@pytest.mark.timeout(900)  # a venv, pip, npm and maven, each starting cold
def test_ordinary_builds_work_contained(base: Path) -> None:
    """`pip install -e .` and the project's Python tests, `npm ci` from its
    lock file (a local package: no registry), `mvn -o` on a warm local
    repository the config lets the Run read (the person's own, read-only):
    each in a real contained Run, with its home its own."""
    programs("bwrap", "npm", "node", "mvn", "java")
    if subprocess.run(["/usr/bin/python3", "-c", "import wheel, setuptools"]).returncode != 0:
        missing("Debian's python3-wheel and python3-setuptools")
    m2 = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".m2" / "repository"
    if not (m2 / "org/apache/maven/plugins/maven-compiler-plugin/3.13.0").is_dir():
        missing(f"a warm maven repository with maven-compiler-plugin 3.13.0 at {m2}")
    home = base / "person"
    home.mkdir()
    files = {
        "pyproject.toml": PYPROJECT,
        "src/owlprobe/__init__.py": PACKAGE,
        "tests/test_probe.py": UNITTEST,
        "package.json": LOCKED,
        "jspkg/package.json": JS_PKG,
        "jspkg/index.js": JS_INDEX,
        "pom.xml": POM,
        "src/main/java/p/A.java": JAVA,
        ".gitignore": ".venv/\nnode_modules/\ntarget/\n*.egg-info/\n",
    }
    project = make_project(base / "proj", files)
    subprocess.run(
        ["npm", "install", "--package-lock-only", "--offline", "--no-audit", "--no-fund"],
        cwd=project,
        check=True,
        capture_output=True,
    )
    subprocess.run(["git", "-C", str(project), "add", "package-lock.json"], check=True)
    subprocess.run(["git", "-C", str(project), "commit", "-qm", "lock"], check=True)
    d = shell_daemon(base, home, BUILDS, sandbox={"read": [str(m2)]}, env={"M2": str(m2)})
    with d:
        j, run = one_run(d, project, "build and commit", timeout=600)
        log = Path(run["log"]).read_text(errors="replace")
        assert "OK" in committed(project, j["branch"], "unittest.out"), log
        assert committed(project, j["branch"], "npm.out") == "npm ci: 007\n", log
        assert committed(project, j["branch"], "mvn.out") == "built: 42\n", log
    assert list(home.iterdir()) == []  # the person's home: nothing written
