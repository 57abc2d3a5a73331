"""What the git escapes share: a daemon whose Runs must be contained, its shell
agent running an attack script and then its Job's work, and the project's refs
and objects as plain git and the file system give them, to compare.

The script prints ``refused: WHAT`` or ``ESCAPED: WHAT`` for each try, so a
failure names the way out that worked."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from owlproc import OwlDaemon, make_project, wait_for

TRY = r"""set -u
try() { if eval "$2" >/dev/null 2>&1; then echo "ESCAPED: $1"; else echo "refused: $1"; fi; }
"""
WORK = r"""
echo "$OWL_RUN_ID" > "work-$OWL_RUN_ID.txt" && git add "work-$OWL_RUN_ID.txt" \
  && git commit -qm "the Job's work" && echo "committed"
"""


@pytest.fixture
def base() -> Iterator[Path]:
    """Not under /tmp, which a contained Run sees as an empty folder of its own."""
    path = Path(tempfile.mkdtemp(prefix="owl-escape-git-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def daemon(base: Path, script: str, known: Mapping[str, object]) -> OwlDaemon:
    """A daemon whose Runs must be contained; its agent runs `script` (what an
    attacker knows or guesses, `known`, written at its head), then the work."""
    home = base / "person"
    home.mkdir(exist_ok=True)
    path = base / "attack.sh"
    head = "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in known.items())
    path.write_text(TRY + head + script + WORK)
    return OwlDaemon(
        base / "owl",
        {
            "sandbox": {"mode": "required"},
            "agents": {"shell": {"command": ["bash", str(path)]}},
            "agent": {"default": "shell"},
        },
        env={"HOME": str(home), "AGENT_PIDS": ""},
    )


def project(base: Path) -> Path:
    """A project with history packed, a loose object, a tag and another Job's branch."""
    p = make_project(base / "proj")
    git(p, "tag", "v1")
    git(p, "branch", "owl/job-99")
    git(p, "gc", "-q")
    (p / "more.txt").write_text("more\n")
    git(p, "add", "more.txt")
    git(p, "commit", "-qm", "second")
    return p


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def state(repo: Path) -> dict[str, object]:
    """The project's refs (but Job branches owl/job-1…), every file of its
    objects folder with its size, and whether it has alternates."""
    refs = [
        line
        for line in git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
        if not line.startswith(("refs/heads/owl/job-1 ", "refs/owl/"))
    ]
    objects = repo / ".git" / "objects"
    files = {
        str(Path(d, f).relative_to(objects)): os.path.getsize(Path(d, f))
        for d, _, names in os.walk(objects)
        for f in names
    }
    return {"refs": refs, "objects": files, "packed-refs": _read(repo / ".git" / "packed-refs")}


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def refused(log: str, *ways: str) -> None:
    assert "ESCAPED" not in log, log
    for way in ways:
        assert f"refused: {way}" in log, log
    assert "committed" in log, log


def run_log(job: dict, index: int = -1) -> str:
    return Path(job["runs"][index]["log"]).read_text(errors="replace")


def outside_of(d: OwlDaemon, job_id: int, index: int = -1) -> list[str]:
    """The lines of what a Run changed outside its branch, once recorded."""

    def said() -> list[str] | None:
        import json

        j = json.loads(d.ok("jobs", "show", str(job_id), "--json"))
        run = j["runs"][index]
        return run["outside_text"] if run.get("outside") is not None else None

    return wait_for(said, timeout=30, what="the Run's outside report")


def landed(repo: Path, branch: str, runs: int = 1) -> None:
    said = git(repo, "log", "--format=%s", branch).splitlines()
    assert said[:runs] == ["the Job's work"] * runs, said
