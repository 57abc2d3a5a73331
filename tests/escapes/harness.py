"""What every escape test shares: a home with secrets, a daemon whose Runs must
be contained, a shell agent that tries each way out and then does its Job's
work, and the verdict read from the Run's log and the Job's branch.

The attack script prints ``refused: WHAT`` or ``ESCAPED: WHAT`` for each try
(see ``TRY``), so a failure names the way out that worked."""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from owlproc import OwlDaemon, make_project
from support.users import UserOwl, chown_tree, second_user, shared_install

KEY = "PRIVATE KEY of the person\n"
BASHRC = "# the person's own\n"

# A try: the command (run by eval) must fail; its output is kept out of the log.
TRY = r"""set -u
try() { if eval "$2" >/dev/null 2>&1; then echo "ESCAPED: $1"; else echo "refused: $1"; fi; }
"""
# The Job's own work, last: it must land whatever was tried before.
WORK = r"""
echo work > work.txt && git add work.txt && git commit -qm "the Job's work" && echo "committed"
"""


@pytest.fixture
def base() -> Iterator[Path]:
    """Not under /tmp, which a contained Run sees as an empty folder of its own
    (a secret there would be out of reach for that reason alone, proving nothing)."""
    path = Path(tempfile.mkdtemp(prefix="owl-escape-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["root", "user"])
def who(request, base: Path) -> Iterator[tuple[pwd.struct_passwd, Path] | None]:
    """Whom the daemon runs as: root (None), or an ordinary user made for the
    test (the user, and the copy of Owl it runs from)."""
    if request.param == "root":
        yield None
        return
    with second_user("esc") as user:
        base.chmod(0o755)
        yield user, shared_install(base / "lib")


def person(base: Path) -> Path:
    """A home with a key, a shell's rc file and a password file."""
    home = base / "person"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(KEY)
    (home / ".netrc").write_text("machine example.com password hunter2\n")
    (home / ".bashrc").write_text(BASHRC)
    return home


def daemon(
    base: Path,
    home: Path,
    script: str,
    *,
    known: Mapping[str, object] = {},
    env: Mapping[str, str] = {},
    sandbox: Mapping[str, object] = {},
    agents: Mapping[str, dict] = {},
    config: Mapping[str, dict] = {},
    who: tuple[pwd.struct_passwd, Path] | None = None,
) -> OwlDaemon:
    """A daemon whose Runs must be contained, its default agent `bash` running
    ``script`` (with ``known``, what an attacker knows or guesses, written at
    its head); more agents in ``agents`` (each runs it too). ``who``: run as
    that ordinary user (the ``who`` fixture), the home and project theirs."""
    path = base / "attack.sh"
    head = "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in known.items())
    path.write_text(TRY + head + script + WORK)
    command = ["bash", str(path)]
    cfg = {
        "sandbox": {"mode": "required", **sandbox},
        "agents": {"shell": {"command": command}}
        | {name: {"command": command, **more} for name, more in agents.items()},
        "agent": {"default": "shell"},
        **config,
    }
    if who is None:
        return OwlDaemon(base / "owl", cfg, env={"HOME": str(home), "AGENT_PIDS": "", **env})
    user, shared = who
    for mine in (home, base / "proj"):
        if mine.exists():
            chown_tree(mine, user)
    path.chmod(0o644)
    d = UserOwl(base / "owl", user, shared, cfg, env={"AGENT_PIDS": "", **env})
    d.env["HOME"] = str(home)
    return d


def owner(who: tuple[pwd.struct_passwd, Path] | None) -> int:
    """The uid the daemon runs as."""
    return os.getuid() if who is None else who[0].pw_uid


def project(base: Path, files: dict[str, str] | None = None) -> Path:
    return make_project(base / "proj", files)


def done(d: OwlDaemon, job: int, timeout: float = 300) -> tuple[dict, str]:
    """The Job's view once at review (its Run over) and the Run's log. (A
    contained Run starts in well under a second; a machine loaded by a
    parallel test run has stretched one to a minute.)"""
    j = d.wait_job(job, "review", timeout=timeout)
    return j, Path(j["runs"][-1]["log"]).read_text(errors="replace")


def refused(log: str, *ways: str) -> None:
    """Nothing escaped, each of ``ways`` was tried and refused, the work committed."""
    assert "ESCAPED" not in log, log
    for way in ways:
        assert f"refused: {way}" in log, log
    assert "committed" in log, log


def landed(project_dir: Path, branch: str) -> None:
    """The Run's work is on its branch."""
    said = subprocess.run(
        [
            "git",
            "-c",
            "safe.directory=*",
            "-C",
            str(project_dir),
            "log",
            "-1",
            "--format=%s",
            branch,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert said.strip() == "the Job's work", said
