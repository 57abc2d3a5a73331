"""The README's "Using it" works as written: its commands, run in order with the
real `owl` in a fresh OWL_HOME, with a command agent (the config names it),
on a machine with no display, with a display (Xvfb), and with the manual machine."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from owlproc import OWL, ROOT, make_project, stop_daemons, wait_for

AGENT = (
    'sleep 1; echo "working on: $1"; echo fixed > fix.txt; git add -A; '
    'git commit -qm "$1"; echo done'
)


def blocks() -> list[list[str]]:
    """The shell blocks of the README's "Using it" section, as lines."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it\n", 1)[1].split("\n## ", 1)[0]
    return [b.strip("\n").splitlines() for b in re.findall(r"```sh\n(.*?)```", section, re.S)]


def fresh(tmp_path: Path, display: dict[str, str] | None = None) -> tuple[dict, Path, Path]:
    home = tmp_path / "owl-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[agent]\ndefault = "fixer"\n[agents.fixer]\n'
        f"command = {json.dumps(['sh', '-c', AGENT, 'sh', '{prompt}'])}\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "OWL_MACHINE", "OWL_NO_AUTOSTART")
    }
    env.update(display or {})
    env["OWL_HOME"] = str(home)
    project = make_project(tmp_path / "code" / "api", {"tests/test_sync.py": "flaky\n"})
    return env, home, project


def run_block(lines: list[str], env: dict, project: Path) -> dict[str, subprocess.CompletedProcess]:
    """Each line as a shell would run it: `cd`, `export`, `owl ...` (~/code/api is the project)."""
    cwd, said = Path.home(), {}
    for line in lines:
        words = [w.replace("~/code/api", str(project)) for w in shlex.split(line, comments=True)]
        if not words:
            continue
        if words[0] == "cd":
            cwd = Path(words[1])
        elif words[0] == "export":
            key, _, value = words[1].partition("=")
            env[key] = value
        else:
            assert words[0] == "owl", line
            p = subprocess.run(
                [*OWL, *words[1:]], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
            )
            assert p.returncode == 0, (line, p.returncode, p.stdout, p.stderr)
            said[" ".join(words[1:3])] = p
    return said


def first_hour(tmp_path: Path, display: dict[str, str] | None = None) -> None:
    env, home, project = fresh(tmp_path, display)
    try:
        said = run_block(blocks()[0], env, project)
        listed = [
            subprocess.run([*OWL, "jobs", *extra], env=env, capture_output=True, text=True).stdout
            for extra in ((), ("--all",))
        ]
    finally:
        stop_daemons(home)
    assert listed[0].startswith("no jobs") and "1    -  done" in listed[1], listed
    assert said["add fix"].stdout == "1\n" and "started the daemon" in said["add fix"].stderr
    assert said["jobs"].stdout.split()[:7] == [
        "ID",
        "POS",
        "STATE",
        "AGENT",
        "PROJECT",
        "AGE",
        "TITLE",
    ]
    assert "fix the flaky test in tests/test_sync.py" in said["jobs"].stdout
    log = said["logs 1"].stdout
    assert log.splitlines()[0].startswith("job 1 · run 1 · attempt 1")
    assert "working on: fix the flaky test in tests/test_sync.py" in log and "done" in log
    assert "log: owl logs 1" in said["jobs show"].stdout
    assert "+fixed" in said["jobs diff"].stdout
    assert "accepted" in said["jobs accept"].stdout
    log = subprocess.run(
        ["git", "-C", str(project), "log", "--format=%s", "owl/job-1"],
        capture_output=True,
        text=True,
    ).stdout
    assert "fix the flaky test in tests/test_sync.py" in log


def test_the_first_hour_without_a_display(tmp_path):
    first_hour(tmp_path)


def test_the_first_hour_with_a_display(tmp_path):
    from display import virtual_display

    with virtual_display() as desk:
        first_hour(
            tmp_path, {k: desk[k] for k in ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS") if k in desk}
        )


def test_the_manual_machine_for_headless_use(tmp_path):
    env, home, project = fresh(tmp_path)
    cfg = home / "config.toml"
    cfg.write_text(cfg.read_text().replace("sleep 1;", "sleep 3;"))
    lines = blocks()[1]
    try:
        run_block(lines, env, project)
        job = wait_for(
            lambda: (
                (
                    j := json.loads(
                        subprocess.run(
                            [*OWL, "jobs", "show", "1", "--json"],
                            env=env,
                            capture_output=True,
                            text=True,
                        ).stdout
                    )
                )["state"]
                == "review"
                and j
            ),
            timeout=30,
            what="review",
        )
    finally:
        stop_daemons(home)
    [run] = job["runs"]  # frozen by the input, thawed by the idle: one Run
    assert run["outcome"] == "succeeded"
    assert "export OWL_MACHINE=manual" in lines[0]
