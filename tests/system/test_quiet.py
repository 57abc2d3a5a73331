"""No needless noise on a person's desktop machine (see conftest): a contained
agent's commit under Debian 13's git (2.47) leaves no `packed-refs.lock` error in
its Run's log, and stopping the daemon while a Run works, by `owl daemon stop`
or by `systemctl --user stop owl`, leaves no traceback in the daemon's log or in
the user manager's journal."""

from __future__ import annotations

from shlex import quote

from system.conftest import OWL, Desktop
from system.test_desktop import RUN_STARTED, config, logged, service_on

# commits in the Job's worktree, inside bubblewrap, then works on
COMMITTER = (
    '[agents.committer]\ncommand = ["sh", "-c", "echo one > one.txt && git add one.txt && '
    "git -c user.name=dev -c user.email=dev@owl commit -qm one && echo committed; "
    'exec sleep 300"]\n[agent]\ndefault = "committer"\n[sandbox]\nmode = "required"\n'
)


def run_log(desktop: Desktop, home: str, what: str) -> str:
    """The newest Run's log, once it says `what` (a grep in the machine)."""
    started = logged(desktop, home, RUN_STARTED, "the Run to work").strip().splitlines()[-1]
    run = started.split(" run ", 1)[1].split()[0]
    desktop.wait(f"grep -q {what} {home}/logs/{run}.log", f"the Run's log to say {what}")
    return desktop.sh(f"cat {home}/logs/{run}.log")


def test_a_commit_in_a_run_is_quiet_and_a_stop_with_a_live_run_has_no_traceback(
    desktop: Desktop, owl_home: str
) -> None:
    h = owl_home
    since = desktop.sh("date '+%Y-%m-%d %H:%M:%S'").strip()
    desktop.sh(config(h, COMMITTER))
    service_on(desktop, h)
    desktop.sh(f"export OWL_HOME={h}; {OWL} add --project {h}/proj -- commit; {OWL} start")
    log = run_log(desktop, h, "committed")
    assert "packed-refs" not in log and "error" not in log.lower(), log
    assert "git version 2.47" in desktop.sh("git --version")
    # the daemon asked to stop over its socket, the Run working
    desktop.sh(f"export OWL_HOME={h}; {OWL} daemon stop")
    desktop.wait("! systemctl --user is-active -q owl.service", "the unit stopped")
    # the unit started again; a second Job's Run working, systemd stops the unit
    desktop.sh("systemctl --user start owl.service")
    started = r" owl daemon \S+ started \(pid "
    desktop.wait(
        f"[ $(grep -cE {quote(started)} {h}/logs/owl.log) -ge 2 ]", "the daemon again", 600
    )
    desktop.sh(f"export OWL_HOME={h}; {OWL} add --project {h}/proj -- again; {OWL} start")
    desktop.wait(
        f"[ $(grep -cE {quote(RUN_STARTED)} {h}/logs/owl.log) -ge 2 ]", "the second Run to work"
    )
    desktop.sh("systemctl --user stop owl.service")
    said = desktop.sh(
        f"journalctl --user -u owl.service --since '{since}' --no-pager -o cat; "
        f"cat {h}/logs/owl.log"
    )
    assert said.count(" owl daemon ") >= 4 and " stopped (pid " in said, said
    assert "Traceback" not in said, said
