"""tools/setup.sh on macOS, run on Linux with stub interpreters and a stubbed uname.

Each stub `python3.X` is a script that runs the real interpreter's `-c` code
with `sys.version_info` replaced by its own version (so setup.sh's version
check is really executed), makes a venv whose python is a stub of the same
version, and logs every `-m venv` and `-m pip` it is asked for. PATH holds only
the stubs and the few programs setup.sh needs, so no package manager is found.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REAL_PY = sys.executable

STUB = """#!{bash}
# A stand-in for Python {version}.
log="{log}"
case "$1" in
  -c) exec "{real}" -c 'import sys; sys.version_info = ({major}, {minor}, 0, "final", 0)
exec(compile(sys.argv[1], "<check>", "exec"))' "$2" ;;
  -V|--version) echo "Python {major}.{minor}.0" ;;
  -m)
    echo "$0 $*" >> "$log"
    if [ "$2" = venv ]; then
      dir="${{@: -1}}"
      /bin/mkdir -p "$dir/bin" && /bin/cp "$0" "$dir/bin/python"
    fi ;;
  *) exit 2 ;;
esac
"""


def _stub(path: Path, version: str, log: Path) -> Path:
    major, minor = version.split(".")
    path.write_text(
        STUB.format(
            bash=shutil.which("bash"),
            version=version,
            log=log,
            real=REAL_PY,
            major=major,
            minor=minor,
        )
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def mac(tmp_path: Path) -> dict:
    """A checkout with setup.sh, a PATH of stubs and a Darwin uname."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "setup.sh", repo / "tools" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for tool in ("bash", "dirname", "rm", "env", "id", "cat", "sha256sum", "cut"):
        (stubs / tool).symlink_to(shutil.which(tool))
    (stubs / "uname").write_text('#!/bin/sh\n[ "$1" = -s ] && echo Darwin || echo Darwin\n')
    (stubs / "uname").chmod(0o755)
    return {"repo": repo, "stubs": stubs, "log": tmp_path / "calls.log"}


def _run(mac: dict, **env: str) -> subprocess.CompletedProcess:
    assert not (mac["stubs"] / "apt-get").exists()
    return subprocess.run(
        ["bash", str(mac["repo"] / "tools" / "setup.sh")],
        env={"PATH": str(mac["stubs"]), "HOME": str(mac["repo"]), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _calls(mac: dict) -> list[str]:
    return mac["log"].read_text().splitlines() if mac["log"].exists() else []


def test_takes_the_first_python_that_passes_the_check(mac: dict) -> None:
    s, log = mac["stubs"], mac["log"]
    (s / "python3.13").write_text("#!/bin/sh\necho 'not really a python' >&2\nexit 1\n")
    (s / "python3.13").chmod(0o755)
    _stub(s / "python3.12", "3.12", log)
    _stub(s / "python3.11", "3.11", log)
    _stub(s / "python3", "3.9", log)  # the Command Line Tools' one
    out = _run(mac)
    assert out.returncode == 0, out.stderr
    venv = mac["repo"] / ".venv"
    calls = _calls(mac)
    assert calls[0] == f"{s}/python3.12 -m venv .venv", calls
    assert "--system-site-packages" not in calls[0]
    assert calls[1] == ".venv/bin/python -m pip install -q --disable-pip-version-check -e ."
    assert (venv / "bin" / "python").is_file()


def test_a_venv_on_an_old_python_is_rebuilt(mac: dict) -> None:
    s, log = mac["stubs"], mac["log"]
    _stub(s / "python3.11", "3.11", log)
    venv = mac["repo"] / ".venv"
    (venv / "bin").mkdir(parents=True)
    _stub(venv / "bin" / "python", "3.9", log)
    (venv / "left-over").write_text("from the 3.9 venv")
    out = _run(mac)
    assert out.returncode == 0, out.stderr
    assert "owl setup: rebuilding .venv" in out.stderr
    assert not (venv / "left-over").exists()
    assert _calls(mac)[0] == f"{s}/python3.11 -m venv .venv"
    again = _run(mac)  # now it is good: kept
    assert again.returncode == 0 and "rebuilding" not in again.stderr
    assert [c for c in _calls(mac) if " -m venv " in c] == [f"{s}/python3.11 -m venv .venv"]


def test_no_suitable_python_is_one_clear_line(mac: dict) -> None:
    _stub(mac["stubs"] / "python3.11", "3.10", mac["log"])  # mislabelled: fails the check
    _stub(mac["stubs"] / "python3", "3.9", mac["log"])
    out = _run(mac)
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0
    assert "Python 3.11 or newer" in out.stderr and "brew install" in out.stderr
    assert not (mac["repo"] / ".venv").exists() and _calls(mac) == []


def test_owl_python_forces_the_interpreter(mac: dict) -> None:
    forced = _stub(mac["stubs"].parent / "my-python", "3.13", mac["log"])
    _stub(mac["stubs"] / "python3.12", "3.12", mac["log"])
    out = _run(mac, OWL_PYTHON=str(forced))
    assert out.returncode == 0, out.stderr
    assert _calls(mac)[0] == f"{forced} -m venv .venv"


def test_linux_reaches_the_distributions_packages_by_path(mac: dict) -> None:
    """The same script on Linux still sees the distribution's python3-gi, as
    paths in a .pth file of the venv rather than as a system site (whose own
    .pth files would run at every interpreter start); a venv made with a
    system site by an older set-up loses it."""
    (mac["stubs"] / "uname").write_text("#!/bin/sh\necho Linux\n")
    for tool in ("mkdir", "grep", "sed"):
        (mac["stubs"] / tool).symlink_to(shutil.which(tool))
    # the stub says this interpreter's own version: site's paths are named by it
    ours = "%d.%d" % sys.version_info[:2]
    forced = _stub(mac["stubs"] / "python3", ours, mac["log"])
    out = _run(mac, OWL_PYTHON=str(forced))
    assert out.returncode == 0, out.stderr
    assert _calls(mac)[0] == f"{forced} -m venv .venv"
    venv = mac["repo"] / ".venv"
    pth = venv / "lib" / f"python{ours}" / "site-packages" / "owl-distribution-packages.pth"
    # The stub runs this very interpreter's code: its site directories are listed.
    want = [p for p in site.getsitepackages() if Path(p).is_dir()]
    assert want and pth.read_text().split() == want

    (venv / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = true\n")
    for stamp in venv.glob(".owl-setup*"):
        stamp.unlink()
    again = _run(mac, OWL_PYTHON=str(forced))
    assert again.returncode == 0, again.stderr
    cfg = (venv / "pyvenv.cfg").read_text().splitlines()
    assert cfg[1] == "include-system-site-packages = false"


def test_once_set_up_it_is_not_done_again_until_its_inputs_change(mac: dict) -> None:
    """tools/owl runs setup.sh every time: after the first, a stamp (a hash of
    pyproject.toml and setup.sh) is all it looks at, and says nothing."""
    _stub(mac["stubs"] / "python3.12", "3.12", mac["log"])
    first = _run(mac)
    assert first.returncode == 0, first.stderr
    steps = first.stderr.splitlines()
    assert steps and all(line.startswith("owl setup: ") for line in steps), steps
    assert any("making the virtual environment" in s for s in steps)
    assert steps[-1].startswith("owl setup: done")
    pips = lambda: [c for c in _calls(mac) if " -m pip " in c]  # noqa: E731
    assert len(pips()) == 1
    again = _run(mac)
    assert again.returncode == 0 and again.stderr == "" and again.stdout == ""
    assert len(pips()) == 1
    with (mac["repo"] / "pyproject.toml").open("a") as f:
        f.write("\n# a new dependency\n")
    changed = _run(mac)
    assert changed.returncode == 0 and "installing Owl" in changed.stderr
    assert len(pips()) == 2
