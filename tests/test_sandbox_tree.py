"""The guarantee with the sandbox on: a tree inside bwrap (own PID namespace) is
seen by host pid, frozen whole, and killed whole; survivors are found by tag."""

import os
import subprocess
import sys
import time

import psutil
from owl import tree
from owl.sandbox import contain, policy
from support.need import programs as need

TREE = (
    "import os,subprocess,sys,time\n"
    "for i in range(3):\n"
    "    subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)'],"
    " start_new_session=True)\n"
    "open('ready','w').write('x')\n"
    "time.sleep(60)\n"
)


def _wait(cond, what, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_contained_tree_is_frozen_killed_and_found_by_its_tag(tmp_path):
    need("bwrap")
    wt = tmp_path / "wt"
    wt.mkdir()
    env = dict(os.environ, OWL_RUN_ID="sandbox-test-1", HOME=str(tmp_path))
    w = contain.wrap(
        [sys.executable, "-c", TREE],
        settings=policy.Settings(network=False),
        agent="script",
        env=env,
        worktree=str(wt),
        project=str(wt),
        owl_dirs=[],
    )
    assert w.contained
    popen = tree.spawn(
        w.argv,
        cwd=str(wt),
        env=w.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        reaper=True,
    )
    pt = tree.ProcessTree(("OWL_RUN_ID", "sandbox-test-1"), popen.pid)
    try:
        _wait(lambda: (wt / "ready").exists(), "the tree inside the sandbox")

        def three_sleepers() -> list[psutil.Process]:
            found = [
                p
                for p in pt.sweep()
                if "time.sleep(60)" in " ".join(p.cmdline())
                and "-c" in p.cmdline()
                and p.cmdline()[-1].endswith("(60)")
            ]
            return found if len(found) >= 3 else []

        # (all three, not the first sweep that meets any: under a loaded
        # machine one sweep met two, a sleeper still on its way)
        sleepers = _wait(three_sleepers, "the three sleepers seen by host pid")
        # found by tag after a crash: the processes inside carry OWL_RUN_ID
        found = {p.pid for p in tree.find_survivors("OWL_RUN_ID", ["sandbox-test-1"])}
        assert {p.pid for p in sleepers} <= found
        pt.freeze()
        assert all(p.status() == psutil.STATUS_STOPPED for p in pt.sweep())
        pt.thaw()
        assert pt.kill() >= 5
        assert not [p for p in sleepers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    finally:
        pt.kill()
