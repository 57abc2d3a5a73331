"""An agent that reaches past its branch: the real daemon, a real agent script, real git.

The agent runs uncontained (`sandbox.mode = "off"`: contained, the project's
`.git` is read only, see tests/escapes/test_git_history.py), as the person,
and writes the project's `.git` by its path:
it moves `main` to a commit that loosens the checks, plants a hook in the
project's hooks folder and sets `core.fsmonitor` to a payload. Owl must run none
of it (the payload says who ran it), gate with the checks of the commit the
Job started from, and report every change on the Run, in `owl jobs show` and
in the status document the tray's notices read.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from owlproc import OwlDaemon, make_project, wait_for
from owl.tray.notices import Notices

# The payload notes who ran it: an agent's own git carries OWL_RUN_ID.
PAYLOAD = '#!/bin/sh\necho "${OWL_RUN_ID:-not an agent}" >> "$PAYLOAD_LOG"\n'

HARM = r"""
set -e
common=$PROJECT_GIT
G="git --git-dir=$common"
# a commit on main whose .owl.toml lets any work pass, made without touching
# the person's index or checkout
idx=$(mktemp); rm -f "$idx"
GIT_INDEX_FILE=$idx $G read-tree refs/heads/main
blob=$(printf '[[checks]]\nname = "unit"\nrun = "true"\n' | $G hash-object -w --stdin)
GIT_INDEX_FILE=$idx $G update-index --add --cacheinfo "100644,$blob,.owl.toml"
tree=$(GIT_INDEX_FILE=$idx $G write-tree)
loose=$($G commit-tree "$tree" -p refs/heads/main -m "loosen the checks")
$G update-ref refs/heads/main "$loose"
echo "work of run $OWL_RUN_ID" > out.txt
git add out.txt
git commit -q -m "the work"
cp "$PAYLOAD" "$common/hooks/post-checkout"
chmod +x "$common/hooks/post-checkout"
$G config core.fsmonitor "$PAYLOAD"
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "core.fsmonitor=false", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def hostile_daemon(tmp_path: Path) -> tuple[OwlDaemon, Path]:
    payload, log = tmp_path / "payload.sh", tmp_path / "payload.log"
    payload.write_text(PAYLOAD)
    payload.chmod(0o755)
    cfg = {
        "agents": {
            "harm": {"command": ["/bin/sh", "-c", HARM, "harm", "{prompt}"]},
            "script": {"command": ["/bin/sh", "-c", "exit 0"]},
        },
        "agent": {"default": "harm"},
        "sandbox": {"mode": "off"},
    }
    env = {
        "PAYLOAD": str(payload),
        "PAYLOAD_LOG": str(log),
        "PROJECT_GIT": str(tmp_path / "proj" / ".git"),
    }
    d = OwlDaemon(tmp_path / "home", cfg, env=env)
    return d, log


def ran_outside_agents(log: Path) -> list[str]:
    try:
        lines = log.read_text().split()
    except FileNotFoundError:
        return []
    return [line for line in lines if not line.isdigit()]


def test_changes_outside_the_branch_are_recorded_shown_and_never_run(tmp_path):
    project = make_project(
        tmp_path / "proj",
        {"README": "a project\n", ".owl.toml": '[[checks]]\nname = "unit"\nrun = "true"\n'},
    )
    main_before = git(project, "rev-parse", "main")
    d, log = hostile_daemon(tmp_path)
    with d:
        job = d.add("do harm", project)
        d.machine("idle")
        d.wait_job(job, "review")
        main_after = git(project, "rev-parse", "main")
        assert main_after != main_before
        run = wait_for(
            lambda: (r := d.job(job)["runs"][0])["outside"] is not None and r,
            what="the Run's outside changes to be recorded",
        )
        found = {(c["kind"], c["name"]): c for c in run["outside"]}
        assert found[("ref", "refs/heads/main")]["from"] == main_before
        assert found[("ref", "refs/heads/main")]["to"] == main_after
        assert found[("config", "core.fsmonitor")] == {
            "kind": "config",
            "name": "core.fsmonitor",
            "from": None,
            "to": str(tmp_path / "payload.sh"),
        }
        assert found[("hook", "post-checkout")]["from"] is None
        assert found[("hook", "post-checkout")]["to"].endswith("(executable)")
        # the Job's own branch is its business, not news
        assert not any(c["name"].startswith("refs/heads/owl/") for c in run["outside"])
        # recorded: the start's snapshot kept on disk for a crash is gone
        wait_for(
            lambda: not list((d.home / "logs").glob("*outside.json*")),
            what="the kept snapshot to be removed",
        )

        text = d.ok("jobs", "show", str(job))
        assert (
            f"outside its branch, the agent moved main from {main_before[:7]} to {main_after[:7]}"
        ) in text
        assert f"the agent set core.fsmonitor = {tmp_path / 'payload.sh'}" in text
        assert "the agent added the hook post-checkout" in text

        notes = Notices().update(d.status())
        [(title, body)] = [n for n in notes if "outside its branch" in n[0]]
        assert title == f"Job {job} changed things outside its branch"
        assert body.startswith(f"the agent moved main from {main_before[:7]} to {main_after[:7]}")

        # Owl's own git (show, a new Job's worktree, drop's status, accept) runs none of it
        other = d.add("do harm", project, "--agent", "script")
        d.wait_job(other, "review")
        d.ok("jobs", "show", str(other))
        d.ok("jobs", "drop", str(other))
        d.ok("jobs", "accept", str(job))
    assert ran_outside_agents(log) == []
    # the payload is real: the person's own `git status` runs it
    subprocess.run(
        ["git", "-C", str(project), "status"],
        capture_output=True,
        env=dict(os.environ, PAYLOAD_LOG=str(log)),
    )
    assert ran_outside_agents(log) != []


def test_checks_gate_with_the_commit_the_job_started_from(tmp_path):
    project = make_project(
        tmp_path / "proj",
        {"README": "a project\n", ".owl.toml": '[[checks]]\nname = "unit"\nrun = "false"\n'},
    )
    d, log = hostile_daemon(tmp_path)
    with d:
        job = d.add("do harm", project, "--attempts", "2")
        d.machine("idle")
        j = d.wait_job(job, "blocked", timeout=30)
        assert [r["outcome"] for r in j["runs"]] == ["failed", "failed"]
        assert all(r["checks"][0]["run"] == "false" for r in j["runs"])
        assert "unit" in j["reason"]
        # main did move: the loosened checks are there, and were not used
        assert 'run = "true"' in git(project, "show", "main:.owl.toml")
    assert ran_outside_agents(log) == []


def test_changes_leave_out_the_jobs_branches_and_owls_refs():
    from owl.git.outside import Snapshot, changes, owned_ref
    from owl.git.outsidewords import summary

    a, b = "a" * 40, "b" * 40
    before = Snapshot(
        loose={
            "refs/heads/main": a,
            "refs/heads/owl/job-1": a,
            "refs/heads/owl/job-2": a,
            "HEAD": "ref: refs/heads/main",
        },
        hooks={"pre-commit.sample": "1234"},
    )
    after = Snapshot(
        loose={
            "refs/heads/main": a,
            "refs/heads/owl/job-1": b,
            "refs/owl/dropped/owl/job-3/1": b,
            "refs/tags/v1": b,
            "HEAD": "ref: refs/heads/owl/job-1",
        },
        hooks={"pre-commit.sample": "1234", "pre-push": "99 (executable)"},
    )
    found = changes(
        before, after, ignore_ref=owned_ref("owl/job-1", {"owl/job-2"}), settings=lambda text: {}
    )
    assert [(c["kind"], c["name"], c["from"], c["to"]) for c in found] == [
        ("ref", "HEAD", "ref: refs/heads/main", "ref: refs/heads/owl/job-1"),
        ("ref", "refs/tags/v1", None, b),
        ("hook", "pre-push", None, "99 (executable)"),
    ]
    assert summary(found) == (
        "the agent switched the person's checkout from main to "
        "owl/job-1; created tag v1 at bbbbbbb; added the hook pre-push"
    )


def test_a_base_file_git_cannot_read_is_an_error_not_an_absent_file(tmp_path):
    import pytest

    from owl.git import workspace

    project = make_project(tmp_path / "proj")
    assert workspace.read_base_file(project, ".owl.toml") is None
    with pytest.raises(workspace.WorkspaceError, match="cannot read .owl.toml"):
        workspace.read_base_file(project, ".owl.toml", "0" * 40)
    with pytest.raises(workspace.WorkspaceError):
        workspace.read_base_file(tmp_path / "nowhere", ".owl.toml")


def test_packed_refs_count_as_refs_and_packing_them_is_no_change():
    from owl.git.outside import Snapshot, changes, owned_ref

    a, b = "a" * 40, "b" * 40
    packed = f"# pack-refs with: peeled\n{a} refs/heads/main\n{a} refs/tags/v1\n^{b}\n".encode()
    before = Snapshot(loose={"refs/heads/main": a}, packed=b"")
    packed_only = Snapshot(packed=packed)
    moved = Snapshot(loose={"refs/heads/main": b}, packed=packed)
    ignore = owned_ref("owl/job-1", set())
    assert [
        c["name"] for c in changes(before, packed_only, ignore_ref=ignore, settings=lambda t: {})
    ] == ["refs/tags/v1"]
    assert [
        (c["name"], c["from"], c["to"])
        for c in changes(packed_only, moved, ignore_ref=ignore, settings=lambda t: {})
    ] == [("refs/heads/main", a, b)]


def merge_during_a_run(d: OwlDaemon, project: Path) -> tuple[int, int]:
    """Two Jobs: the first (agent "quick") commits and goes to review, the
    second (agent "slow") is running when Owl merges the first into main;
    (the second Job, its Run)."""
    first = d.add("go", project, "--agent", "quick")
    second = d.add("go", project, "--agent", "slow")
    d.machine("idle")
    d.wait_job(first, "review")
    run_id = d.wait_run(second, "running")["id"]
    main_before = git(project, "rev-parse", "main")
    d.ok("jobs", "accept", str(first), "--merge")
    assert git(project, "rev-parse", "main") != main_before
    return second, run_id


def two_agents(slow: str) -> dict:
    """A config with a "quick" agent that commits and a "slow" one running `slow`."""
    return {
        "agents": {
            "slow": {"command": ["/bin/sh", "-c", slow]},
            "quick": {
                "command": [
                    "/bin/sh",
                    "-c",
                    "echo x > x.txt && git add x.txt && git commit -q -m quick",
                ]
            },
        }
    }


def test_owls_own_merge_during_a_run_is_not_the_agents(tmp_path):
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home", two_agents("sleep 4")) as d:
        second, _ = merge_during_a_run(d, project)
        d.wait_job(second, "review")
        run = wait_for(
            lambda: (r := d.job(second)["runs"][0])["outside"] is not None and r,
            what="the Run's outside changes to be recorded",
        )
        assert run["outside"] == []


def test_a_snapshot_survives_its_json_as_it_was_read(tmp_path):
    import pytest

    from owl.git.outside import Snapshot, changes, from_json, owned_ref, take, to_json

    project = make_project(tmp_path / "proj")
    git(project, "tag", "v1")
    git(project, "pack-refs", "--all")
    git(project, "branch", "loose-one")
    hook = project / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    real = take(project)
    assert real.problem is None and real.packed and "refs/heads/loose-one" in real.loose
    assert from_json(to_json(real)) == real
    odd = Snapshot(
        loose={"refs/heads/caf\udce9": "ref: refs/heads/x"},
        packed=b"",
        config=b"[core]\n\tfsmonitor = \xff\x00\n",
        global_config=None,
        hooks={"pre-push": "a link to /nowhere"},
    )
    assert from_json(to_json(odd)) == odd
    gone = take(tmp_path / "nowhere")
    assert from_json(to_json(gone)) == gone and gone.problem
    # what a round trip keeps is what the comparison needs: no change against itself
    assert changes(from_json(to_json(real)), take(project), ignore_ref=owned_ref(None, set())) == []
    for bad, says in (
        ("{", "not JSON"),
        ("[]", "not a snapshot"),
        ('{"format": 1, "loose": {"a": 1}, "hooks": {}}', "loose"),
        ('{"format": 1, "loose": {}, "hooks": {}, "config": "!!"}', "base64"),
        ('{"format": 1, "loose": {}, "hooks": {}, "problem": 3}', "problem"),
    ):
        with pytest.raises(ValueError, match=says):
            from_json(bad)


def test_a_comparison_that_hangs_is_given_up_and_said(tmp_path):
    import time

    from owl.git import outsidekeep
    from owl.git.outside import Snapshot, owned_ref

    project = tmp_path / "hung"
    project.mkdir()
    os.mkfifo(project / ".git")  # reading it blocks, as a dead mount does
    t0 = time.monotonic()
    try:
        [entry] = outsidekeep.compare_by(
            Snapshot(), project, owned_ref(None, set()), time.monotonic() + 1.0
        )
        took = time.monotonic() - t0
    finally:
        fd = os.open(project / ".git", os.O_WRONLY | os.O_NONBLOCK)  # lets the reader go
        os.close(fd)
    assert entry["kind"] == "unknown" and "did not answer within 1 s" in entry["to"]
    assert took < 3.0, took


def test_what_changes_while_you_work_beside_a_run_is_said_to_be_perhaps_yours(tmp_path):
    """A Run started with `owl start` goes on while the person works: their
    own commit on main lands in the same `.git` as the agent's work, so the
    Run's report says the move may be theirs, not that the agent made it."""
    project = make_project(tmp_path / "proj")
    with OwlDaemon(tmp_path / "home") as d:
        job = d.add("sleep=3 exit=0", project)
        d.ok("start")  # the machine is in use: exempt
        d.wait_run(job, "running")
        (project / "mine.txt").write_text("the person's work\n")
        subprocess.run(["git", "-C", str(project), "add", "mine.txt"], check=True)
        subprocess.run(["git", "-C", str(project), "commit", "-q", "-m", "mine"], check=True)
        j = wait_for(
            lambda: (x := d.job(job))["runs"][0].get("outside") is not None and x,
            timeout=20,
            what="the Run's end compared",
        )
        [moved] = j["runs"][0]["outside"]
        assert moved["kind"] == "ref" and moved["name"] == "refs/heads/main"
        assert moved["shared"] is True
        text = d.ok("jobs", "show", str(job))
        assert "moved main from" in text and "(perhaps yours: you were working meanwhile)" in text


def test_a_report_of_shared_changes_names_you_too():
    from owl.git import outside, outsidewords

    found = [{"kind": "ref", "name": "refs/heads/main", "from": "a" * 40, "to": "b" * 40}]
    assert outsidewords.summary(found).startswith("the agent moved main from aaaaaaa")
    mine = outside.shared(found)
    assert outsidewords.summary(mine) == (
        "the agent, or you, moved main from aaaaaaa to bbbbbbb "
        "(perhaps yours: you were working meanwhile)"
    )
    assert outside.shared(None) is None and found[0].get("shared") is None
