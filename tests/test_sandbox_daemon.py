"""Runs contained by the real daemon: real bwrap (and pasta), a stand-in agent.

The Run's work reaches review with its commit while what lies outside its Job
is refused from inside; the guarantee (freeze on input, TERM then KILL after
the window) holds for the contained tree; `owl status` and `owl jobs show`
say how each Run was contained."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from display import virtual_display
from owlproc import (
    OWL,
    ROOT,
    OwlDaemon,
    Unmet,
    frozen_states,
    left_running,
    make_project,
    process_states,
    processes,
    wait_for,
)
from support.anthropic_stub import AnthropicStub, Bash, Text
from support.claude import require_claude
from support.need import programs
from support.sockets import answers


# A shell agent: the escapes first (each must fail), then the Job's own work.
ESCAPES = r"""
set -u
try() { if eval "$2" >/dev/null 2>&1; then echo "ESCAPED: $1"; else echo "refused: $1"; fi; }
try "read the ssh key" "cat $HOME/.ssh/id_ed25519"
try "append to .bashrc" "echo pwned >> $HOME/.bashrc && grep -q \"the person's own\" $HOME/.bashrc"
try "write another repository" "touch $HOME/other/planted"
try "read Owl's config" "cat $OWL_CONFIG"
try "see a process outside its Run" "kill -0 $OUTSIDE_PID"
try "plant a hook" "echo 'exit 0' > $PROJECT_GIT/hooks/pre-commit"
try "set core.fsmonitor" "git config core.fsmonitor /bin/true && grep -q fsmonitor $PROJECT_GIT/config"
try "read a secret variable" "test -n \"${GITHUB_TOKEN:-}\""
$OWL_CLI --help >/dev/null && echo "owl runs inside"
try "use Owl's socket" "OWL_HOME=$OUTSIDE_OWL_HOME $OWL_CLI status"
try "reach the session bus" "dbus-send --bus=$OUTSIDE_BUS --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames"
try "start a process outside with systemd-run" "XDG_RUNTIME_DIR=$OUTSIDE_RUNTIME DBUS_SESSION_BUS_ADDRESS=$OUTSIDE_BUS systemd-run --user --quiet touch $OUTSIDE_MARK"
try "read the X server's pointer" "DISPLAY=$OUTSIDE_DISPLAY xdotool getmouselocation"
test -z "${DISPLAY:-}${DBUS_SESSION_BUS_ADDRESS:-}" && echo "no display, no bus"
echo work > done.txt && git add done.txt && git commit -qm "the Job's work" && echo "committed"
"""


@pytest.fixture
def base() -> Iterator[Path]:
    """Where these tests keep everything: not under /tmp, which a contained Run
    sees as a private, empty /tmp of its own (so a secret there would be out of
    reach for that reason alone, proving nothing)."""
    path = Path(tempfile.mkdtemp(prefix="owl-sandbox-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def home_with_secrets(base: Path) -> Path:
    home = base / "person"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".bashrc").write_text("# the person's own\n")
    make_project(home / "other")
    return home


def contained(
    tmp_path: Path, home: Path, command: list[str], env: dict[str, str], **config: dict
) -> OwlDaemon:
    """A daemon whose Runs must be contained, its agent `command` (or, given
    `agents` and `agent` in `config`, those)."""
    return OwlDaemon(
        tmp_path / "owl",
        {
            "sandbox": {"mode": "required"},
            "agents": {"shell": {"command": command}},
            "agent": {"default": "shell"},
            **config,
        },
        env={"HOME": str(home), "AGENT_PIDS": "", "GITHUB_TOKEN": "ghp_secret", **env},
    )


@contextlib.contextmanager
def session_bus(runtime: Path) -> Iterator[str]:
    """A real session bus where a desktop session keeps it, $XDG_RUNTIME_DIR/bus."""
    runtime.mkdir(mode=0o700)
    address = f"unix:path={runtime / 'bus'}"
    bus = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address={address}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: answers(runtime / "bus"), what="the session bus")
        yield address
    finally:
        bus.terminate()
        bus.wait(5)


def reachable(argv: list[str], env: dict[str, str]) -> None:
    """What the Run is refused is reachable from outside it (else its refusal proves nothing)."""
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, f"{argv} outside the sandbox: {done.stderr}"


def test_a_contained_run_reaches_review_and_every_escape_is_refused(base, home_with_secrets):
    """Each escape is tried from inside with what it needs (a path, an address, a
    display) named outright, as an attacker who guessed it would; each but
    systemd-run is shown to work from outside. Here no user manager runs, so
    systemd-run fails outside too: what it needs, the session bus, is what the
    bus escape shows out of reach."""
    programs("bwrap", "dbus-daemon", "dbus-send", "systemd-run", "xdotool")
    with virtual_display(dbus=False) as desktop, session_bus(base / "runtime") as bus:
        agent = {"command": ["bash", str(base / "scripts" / "escapes.sh")]}
        escapes_refused(base, home_with_secrets, desktop["DISPLAY"], bus, agent, {})


@pytest.mark.claude
def test_the_real_claude_contained_tries_every_escape_with_its_bash_tool(base, home_with_secrets):
    """The same escapes, as one Bash tool call of the real Claude Code CLI
    (against the Messages API stub, its port kept reachable from the Run's own
    network), through the daemon: refused, and visible in the Run's log."""
    programs("bwrap", "pasta", "dbus-daemon", "dbus-send", "systemd-run", "xdotool")
    claude = require_claude()
    script = [Bash(f"bash {base / 'scripts' / 'escapes.sh'}"), Text("Tried, and did the work.")]
    with (
        AnthropicStub(script) as stub,
        virtual_display(dbus=False) as desktop,
        session_bus(base / "runtime") as bus,
    ):
        env = {**stub.env(home_with_secrets), "CLAUDE_CODE_MAX_RETRIES": "1"}
        agent = {"path": claude}
        escapes_refused(base, home_with_secrets, desktop["DISPLAY"], bus, agent, env, "claude")


def escapes_refused(
    base: Path,
    home: Path,
    display: str,
    bus: str,
    agent: dict,
    env: dict[str, str],
    name: str = "shell",
) -> None:
    project = make_project(base / "proj")
    mark = base / "started-by-systemd-run"
    d = contained(
        base,
        home,
        [],
        {
            # the daemon lives in a desktop session: its display, bus and runtime folder
            "DISPLAY": display,
            "DBUS_SESSION_BUS_ADDRESS": bus,
            "XDG_RUNTIME_DIR": str(base / "runtime"),
            **env,
        },
        # The script runs `owl` inside (it must start there, and its socket stay
        # out of reach): this checkout readable even where it lies under /tmp,
        # which a contained Run sees as a private, empty folder of its own.
        # the checkout (the owl it runs) and the attack's script: read, named so
        sandbox={"mode": "required", "read_also": [str(ROOT), str(base / "scripts")]},
        agents={name: agent},
        agent={"default": name},
    )
    # What an attacker knows or guesses, written into the script itself (the
    # sandbox drops variables that point into the runtime folder).
    known = {
        "PROJECT_GIT": project / ".git",
        "OUTSIDE_PID": os.getpid(),
        "OWL_CONFIG": d.home / "config.toml",
        "OWL_CLI": " ".join(OWL),
        "OUTSIDE_OWL_HOME": d.home,
        "OUTSIDE_BUS": bus,
        "OUTSIDE_RUNTIME": base / "runtime",
        "OUTSIDE_MARK": mark,
        "OUTSIDE_DISPLAY": display,
    }
    (base / "scripts").mkdir(exist_ok=True)
    (base / "scripts" / "escapes.sh").write_text(
        "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in known.items()) + ESCAPES
    )
    reachable(["xdotool", "getmouselocation"], d.env)
    reachable(
        [
            "dbus-send",
            f"--bus={bus}",
            "--print-reply",
            "--dest=org.freedesktop.DBus",
            "/",
            "org.freedesktop.DBus.ListNames",
        ],
        d.env,
    )
    with d:
        reachable([*OWL, "status"], d.env)
        job = d.add("do the work", project)
        d.ok("start")
        j = d.wait_job(job, "review", timeout=30)
        log = Path(j["runs"][0]["log"]).read_text()
        assert "ESCAPED" not in log, log
        for what in (
            "read the ssh key",
            "append to .bashrc",
            "write another repository",
            "read Owl's config",
            "see a process outside its Run",
            "plant a hook",
            "set core.fsmonitor",
            "read a secret variable",
            "use Owl's socket",
            "reach the session bus",
            "start a process outside with systemd-run",
            "read the X server's pointer",
        ):
            assert f"refused: {what}" in log, log
        assert "owl runs inside" in log and "no display, no bus" in log, log
        assert not mark.exists()
        assert "committed" in log
        assert subprocess.run(
            ["git", "-C", str(project), "log", "--format=%s", j["branch"]],
            capture_output=True,
            text=True,
        ).stdout.startswith("the Job's work")
        assert (home / ".bashrc").read_text() == "# the person's own\n"
        assert not (home / "other" / "planted").exists()
        assert not (project / ".git" / "hooks" / "pre-commit").exists()
        assert "fsmonitor" not in (project / ".git" / "config").read_text()
        label = j["runs"][0]["contained"]
        assert label.startswith("contained: bwrap "), label
        shown = d.ok("jobs", "show", str(job))
        assert label in shown
        st = d.status()
        assert st["sandbox"]["contained"] is True


def test_a_contained_tree_is_frozen_on_input_and_killed_after_the_window(base, home_with_secrets):
    programs("bwrap")
    project = make_project(base / "proj")
    d = OwlDaemon(
        base / "owl",
        {"sandbox": {"mode": "required"}, "interruption": {"grace_window": "2s"}},
        env={"HOME": str(home_with_secrets), "AGENT_PIDS": ""},
    )
    with d:
        job = d.add("trap-term setsid-child=60 sleep=60", project)
        d.machine("idle")
        run = wait_for(
            # the sandbox's processes, the agent and its grandchild: past the
            # sandbox's start, so the freeze does not meet pasta being set up
            lambda: (r := d.status()["runs"]) and len(r[0]["pids"]) >= 5 and r[0],
            timeout=20,
            what="the contained tree to start",
        )
        pids = [int(p) for p in run["pids"]]
        procs = processes(pids)
        assert run["contained"].startswith("contained: bwrap")
        d.machine("input")
        # (a process that exited just as the freeze came stays a zombie: its
        # parent, stopped, cannot reap it until it is thawed or killed; pasta
        # still forking into the background waits in the kernel with the stop
        # pending until its child, stopped too, goes on)
        frozen = {"stopped", "gone", "zombie", "stop pending"}
        wait_for(
            lambda: set((s := frozen_states(pids)).values()) <= frozen or Unmet(s),
            timeout=5,
            what="every process of the contained Run stopped",
        )
        frozen_at = time.monotonic()
        j = d.wait_job(job, "pending", timeout=20)
        assert j["runs"][-1]["outcome"] == "interrupted"
        wait_for(
            lambda: not (left := left_running(procs)) or Unmet(left),
            timeout=10,
            what="nothing of the contained Run left",
        )
        # the window (2 s) and the 5 s before KILL, with room for a busy machine
        assert time.monotonic() - frozen_at < 2 + 5 + 3


def test_a_project_may_narrow_the_sandbox_never_widen_it(base):
    from owl.engine import containing
    from owl.settings import config, project

    cfg = config.from_dict({"sandbox": {"mode": "auto", "network": True}})
    narrowed = project.parse(
        '[sandbox]\nnetwork = false\nread = "project"\nmode = "required"\n', "p/.owl.toml"
    ).sandbox
    s = containing.settings_for(cfg, "claude", narrowed)
    assert (s.network, s.read, s.mode) == (False, (), "required")
    off = config.from_dict({"sandbox": {"mode": "off"}})
    assert containing.settings_for(off, "claude", narrowed).mode == "off"  # the person's word
    with pytest.raises(project.ProjectError, match="sandbox.write"):
        project.parse('[sandbox]\nwrite = ["/"]\n', "p/.owl.toml")


# An agent that cleans up on TERM: it takes a second, says so in a file, exits 0.
TRAPS_TERM = r"""
trap 'echo > ending; sleep 1; echo cleaned > cleaned-up; exit 0' TERM
echo started > started
while :; do sleep 0.1; done
"""


def sandbox_processes(pids: list[int]) -> list[int]:
    """The Run's processes that are its sandbox: bwrap, its network helper, pasta."""
    out = []
    for pid in pids:
        try:
            line = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            continue
        if any(w in line for w in ("bwrap", "netns.py", "pasta")):
            out.append(pid)
    return out


@pytest.mark.parametrize("how", ["stop", "input"])
def test_a_contained_agent_asked_to_stop_gets_its_time_before_the_kill(
    base, home_with_secrets, how
):
    """SIGTERM is the agent's, not the sandbox's: bwrap's outer process, the
    network helper and pasta stay while the agent ends in its own time, and
    the Run's status is the agent's own (it was bwrap's -15)."""
    programs("bwrap")
    project = make_project(base / "proj")
    script = base / "traps.sh"
    script.write_text(TRAPS_TERM)
    d = contained(
        base, home_with_secrets, ["bash", str(script)], {}, interruption={"grace_window": "1s"}
    )
    with d:
        job = d.add("work until asked to stop", project)
        d.machine("idle")
        run = d.wait_run(job, "running", timeout=20)
        worktree = Path(d.job(job)["worktree"])
        wait_for(lambda: (worktree / "started").exists(), timeout=20, what="the agent to start")
        pids = wait_for(
            lambda: (
                (ps := [int(p) for p in d.status()["runs"][0]["pids"]])
                and len(sandbox_processes(ps)) >= (4 if shutil.which("pasta") else 2)
                and ps
            ),
            timeout=10,
            what="the Run's record to show its sandbox (bwrap out and in, and its network)",
        )
        sandbox = sandbox_processes(pids)
        procs = processes(pids)
        assert run["contained"].startswith("contained: bwrap"), run["contained"]
        if how == "input":
            d.machine("input")  # frozen, then TERM and CONT when the window (1 s) passes
        else:
            d.ok("stop")
        asked_at = time.monotonic()
        wait_for(lambda: (worktree / "ending").exists(), timeout=5, what="the agent's TERM")
        assert "gone" not in process_states(sandbox).values(), (
            "the sandbox did not outlive the TERM meant for its agent"
        )
        wait_for(
            lambda: (worktree / "cleaned-up").exists(),
            timeout=5,
            what="the agent's own ending, inside its 5 s",
        )
        wait_for(
            lambda: not (left := left_running(procs)) or Unmet(left),
            timeout=5 + 3,
            what="nothing of the contained Run left",
        )
        assert time.monotonic() - asked_at < 5 + 3
        j = d.wait_job(job, "pending", timeout=10)
        assert (j["runs"][-1]["exit_code"], j["runs"][-1]["ended_by"]) == (0, "sigterm")
