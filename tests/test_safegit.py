"""Owl's own git runs nothing the repository names: real git, real payloads.

Each case plants a payload the way an agent could from its worktree (the
repository config and hooks folder are shared with the person's checkout),
then makes Owl's git do the work that would trigger it, and looks for the
payload's marker file.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from owl.git import disarm, gitprocess, safegit
from owl.git import jobstore, storing, workspace
from support.plaingit import GIT_ENV, git as sh


def payload(tmp: Path, name: str) -> tuple[Path, Path]:
    """An executable that touches a marker file; returns (script, marker)."""
    marker = tmp / f"RAN-{name}"
    script = tmp / f"{name}.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(0o755)
    return script, marker


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    sh(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\n")
    sh(path, "add", "a.txt")
    sh(path, "commit", "-q", "-m", "base")
    return path


def test_fsmonitor_set_by_the_agent_never_runs(tmp_path: Path, repo: Path) -> None:
    script, marker = payload(tmp_path, "fsmonitor")
    ws = storing.ensure(repo, 1, "owl/", tmp_path / "wts")
    # the agent, in its worktree, writes the config it shares with the person
    sh(ws.worktree, "config", "core.fsmonitor", str(script))
    (ws.worktree / "a.txt").write_text("changed\n")
    assert workspace.is_dirty(ws.worktree)
    workspace.commits_since(repo, ws.base, ws.branch)
    workspace.diff_stat(repo, ws.base, ws.branch)
    assert not marker.exists()
    # the same setting does run for a plain git there: the test's payload is real
    subprocess.run(
        ["git", "-C", str(ws.worktree), "status"],
        capture_output=True,
        env={**os.environ, **GIT_ENV},
    )
    assert marker.exists()
    marker.unlink()
    workspace.remove(repo, ws.worktree, force=True)
    assert not marker.exists()


def test_hooks_in_the_shared_folder_never_run(tmp_path: Path, repo: Path) -> None:
    markers = []
    for hook in ("post-checkout", "reference-transaction", "pre-auto-gc"):
        script, marker = payload(tmp_path, hook)
        target = repo / ".git" / "hooks" / hook
        target.write_text(script.read_text())
        target.chmod(0o755)
        markers.append(marker)
    ws = storing.ensure(repo, 1, "owl/", tmp_path / "wts")
    workspace.remove(repo, ws.worktree, force=True)
    workspace.delete_branch(repo, ws.branch)
    assert [m.name for m in markers if m.exists()] == []


def test_filters_and_diff_drivers_never_run(tmp_path: Path, repo: Path) -> None:
    smudge, smudged = payload(tmp_path, "smudge")
    clean, cleaned = payload(tmp_path, "clean")
    textconv, conv = payload(tmp_path, "textconv")
    external, ext = payload(tmp_path, "external")
    (repo / ".git" / "info" / "attributes").write_text("* filter=x=y diff=evil\n")
    sh(repo, "config", "filter.x=y.smudge", str(smudge))
    sh(repo, "config", "filter.x=y.clean", str(clean))
    sh(repo, "config", "filter.x=y.required", "true")
    sh(repo, "config", "diff.evil.textconv", str(textconv))
    sh(repo, "config", "diff.external", str(external))
    ws = storing.ensure(repo, 1, "owl/", tmp_path / "wts")
    (ws.worktree / "a.txt").write_text("two\n")
    # the agent's own commit, with the filter off (`-c` cannot name it: it holds "=")
    subprocess.run(
        ["git", "-C", str(ws.worktree), "commit", "-q", "-am", "work"],
        check=True,
        env={
            **os.environ,
            **GIT_ENV,
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "filter.x=y.clean",
            "GIT_CONFIG_VALUE_0": "cat",
        },
    )
    storing.land(repo, jobstore.places(repo, ws.worktree), ws.branch)
    (ws.worktree / "a.txt").write_text("three\n")
    assert workspace.is_dirty(ws.worktree)
    assert (
        workspace.diff_stat(repo, ws.base, ws.branch)
        == "1 file changed, 1 insertion(+), 1 deletion(-)"
    )
    assert len(workspace.commits_since(repo, ws.base, ws.branch)) == 1
    workspace.git(repo, "diff", ws.base, ws.branch)
    workspace.git(repo, "log", "-p", ws.branch)
    assert [p.name for p in (smudged, cleaned, conv, ext) if p.exists()] == []


def test_the_tree_is_ended_on_timeout(tmp_path: Path, repo: Path) -> None:
    pidfile = tmp_path / "pids"
    sh(repo, "config", "alias.slow", f"!sh -c 'sleep 60 & echo $! >> {pidfile}; sleep 60'")
    started = time.monotonic()
    with pytest.raises(workspace.WorkspaceError, match="ran longer than 1 s"):
        workspace.git(repo, "slow", timeout=1)
    assert time.monotonic() - started < 10
    pid = int(pidfile.read_text().split()[0])
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "git's child outlived its timeout"
        time.sleep(0.05)


def test_what_git_leaves_behind_is_ended(tmp_path: Path, repo: Path) -> None:
    pidfile = tmp_path / "pids"
    sh(repo, "config", "alias.leave", f"!sh -c 'setsid sleep 60 & echo $! > {pidfile}'")
    proc = workspace.git(repo, "leave")
    assert proc.returncode == 0
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "a process git started outlived it"
        time.sleep(0.05)


def test_overrides_blank_every_driver_command() -> None:
    got = dict(
        disarm.overrides(
            [
                "filter.lfs.process",
                "filter.a.b.smudge",
                "merge.ours.driver",
                "credential.https://h.helper",
                "user.name",
                "diff.x.textconv",
            ]
        )
    )
    assert got["filter.lfs.process"] == "" and got["filter.lfs.required"] == "false"
    assert got["filter.a.b.smudge"] == "" and got["merge.ours.driver"] == ""
    assert got["credential.https://h.helper"] == ""
    assert "user.name" not in got and got["core.hooksPath"] == "/dev/null"
    assert got["core.fsmonitor"] == "false"


def test_daemon_git_variables_do_not_reach_git(repo: Path, monkeypatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/nonexistent")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", "/bin/false")
    assert workspace.git(repo, "rev-parse", "--show-toplevel").stdout.strip() == str(repo)


def _on_a_marked_thread(repo: Path) -> BaseException | None:
    """Run git on a thread marked as the engine's; what it raised, if anything."""
    import threading

    raised: list[BaseException | None] = [None]

    def body() -> None:
        safegit.forbid_here()
        try:
            safegit.run(repo, "status", "--porcelain")
        except BaseException as e:
            raised[0] = e

    t = threading.Thread(target=body)
    t.start()
    t.join(60)
    return raised[0]


def test_git_on_the_engine_thread_is_an_error_when_strict(repo: Path, monkeypatch) -> None:
    monkeypatch.setenv("OWL_STRICT_THREADS", "1")
    err = _on_a_marked_thread(repo)
    assert isinstance(err, safegit.OnEngineThread) and "git status" in str(err)
    safegit.run(repo, "status", "--porcelain")  # any other thread: git as usual


def test_git_on_the_engine_thread_is_logged_with_where_it_came_from(
    repo: Path, monkeypatch, caplog
) -> None:
    monkeypatch.delenv("OWL_STRICT_THREADS", raising=False)
    assert _on_a_marked_thread(repo) is None  # a person's daemon carries on
    rec = [r for r in caplog.records if "on the engine thread" in r.getMessage()]
    assert rec and rec[0].stack_info and "in body" in rec[0].stack_info


# ----------------------------------------------- every route a driver can be planted by


def escaping_payload(tmp: Path, name: str, nap: str) -> tuple[Path, Path]:
    """A driver that writes a marker and starts a `setsid env -i sleep` meant to outlive git."""
    marker = tmp / f"RAN-{name}"
    script = tmp / f"{name}.sh"
    script.write_text(
        f"#!/bin/sh\ntouch {marker}\nsetsid env -i sleep {nap} </dev/null >/dev/null 2>&1 &\ncat\n"
    )
    script.chmod(0o755)
    return script, marker


def sleepers(nap: str) -> list[int]:
    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if (p.info["cmdline"] or [])[:2] == ["sleep", nap]
    ]


def _drivers_file(tmp: Path, script: Path) -> Path:
    hooks = tmp / "planted-hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-checkout", "pre-commit", "post-merge", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\n{script} </dev/null\n")
        (hooks / hook).chmod(0o755)
    planted = tmp / "planted.cfg"
    planted.write_text(
        f'[filter "evil"]\n\tsmudge = {script}\n\tclean = {script}\n\trequired = true\n'
        f'[filter "proc"]\n\tprocess = {script}\n'
        f'[merge "evil"]\n\tdriver = {script} %O %A %B\n'
        f"[core]\n\tfsmonitor = {script}\n\thooksPath = {hooks}\n"
    )
    return planted


ROUTES = (
    "includeif-gitdir",
    "onbranch",
    "hasconfig-remote",
    "include-path",
    "config-worktree",
    "committed-gitattributes",
)


def _plant(route: str, repo: Path, planted: Path) -> None:
    """Plant the drivers as an agent could, from its worktree, by `route`."""
    if route == "includeif-gitdir":
        sh(repo, "config", "includeIf.gitdir:**/worktrees/**.path", str(planted))
    elif route == "onbranch":
        sh(repo, "config", "includeIf.onbranch:owl/**.path", str(planted))
    elif route == "hasconfig-remote":
        sh(repo, "config", "remote.origin.url", "https://example.invalid/r.git")
        sh(
            repo,
            "config",
            "includeIf.hasconfig:remote.*.url:https://example.invalid/**.path",
            str(planted),
        )
    elif route == "include-path":
        sh(repo, "config", "include.path", str(planted))
    elif route == "config-worktree":
        sh(repo, "config", "extensions.worktreeConfig", "true")
        (repo / ".git" / "config.worktree").write_text(planted.read_text())
    if route == "committed-gitattributes":
        sh(repo, "config", "includeIf.gitdir:**/worktrees/**.path", str(planted))
        (repo / ".gitattributes").write_text("*.txt filter=evil merge=evil\n")
        subprocess.run(
            ["git", "-C", str(repo), "-c", "filter.evil.clean=", "add", ".gitattributes"],
            check=True,
            env={**os.environ, **GIT_ENV},
        )
        subprocess.run(
            [
                "git",
                "-C",
                str(repo),
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
                "commit",
                "-q",
                "-m",
                "attributes",
            ],
            check=True,
            env={**os.environ, **GIT_ENV},
        )
    else:
        (repo / ".git" / "info" / "attributes").write_text(
            "*.txt filter=evil merge=evil\n*.md filter=proc\n"
        )


@pytest.mark.parametrize("route", ROUTES)
def test_a_planted_driver_never_runs_by_any_route(tmp_path: Path, repo: Path, route: str) -> None:
    nap = str(4000 + ROUTES.index(route))
    script, marker = escaping_payload(tmp_path, route, nap)
    (repo / "b.md").write_text("bee\n")
    sh(repo, "add", "b.md")
    sh(repo, "commit", "-q", "-m", "md")
    _plant(route, repo, _drivers_file(tmp_path, script))
    # A new Job's worktree: `worktree add` and its checkout.
    ws = storing.ensure(repo, 1, "owl/", tmp_path / "wts")
    assert (ws.worktree / "a.txt").read_text() == "one\n"
    if route == "config-worktree":  # the agent's own worktree's config, too
        wt_git = Path(sh(ws.worktree, "rev-parse", "--git-dir"))
        (wt_git / "config.worktree").write_text(_drivers_file(tmp_path, script).read_text())
    # The agent changes files; Owl looks at them, then the person accepts.
    (ws.worktree / "a.txt").write_text("two\n")
    (ws.worktree / "b.md").write_text("changed\n")
    assert workspace.is_dirty(ws.worktree)
    workspace.diff_stat(repo, ws.base, ws.branch)
    workspace.git(ws.worktree, "diff")
    workspace.git(ws.worktree, "checkout", "--", "a.txt", "b.md")
    workspace.remove(repo, ws.worktree)
    # A second Job, set up after the plant was there all along.
    storing.ensure(repo, 2, "owl/", tmp_path / "wts")
    assert not marker.exists(), f"the driver planted by {route} ran"
    assert sleepers(nap) == []


def test_a_driver_that_runs_is_ended_with_git(tmp_path: Path, repo: Path) -> None:
    """Should git ever start something (here an alias Owl itself would never
    call), a `setsid env -i` escapee is ended when git ends."""
    script, marker = escaping_payload(tmp_path, "alias", "4100")
    sh(repo, "config", "alias.escape", f"!{script} </dev/null")
    assert workspace.git(repo, "escape").returncode == 0
    assert marker.exists()
    assert sleepers("4100") == []


def test_a_driver_that_hangs_is_ended_with_its_escapee_on_timeout(
    tmp_path: Path, repo: Path
) -> None:
    script, marker = escaping_payload(tmp_path, "hang", "4101")
    sh(repo, "config", "alias.hang", f"!{script} </dev/null; sleep 4102")
    with pytest.raises(workspace.WorkspaceError, match="ran longer"):
        workspace.git(repo, "hang", timeout=1.5)
    assert marker.exists()
    assert sleepers("4101") == [] and sleepers("4102") == []


def test_a_worktree_holding_a_checked_out_submodule_is_not_removed_unforced(
    tmp_path: Path, repo: Path
) -> None:
    """Owl never looks inside a submodule (a repository with its own config), so
    it cannot say one is clean: removing such a worktree needs --force."""
    ws = storing.ensure(repo, 1, "owl/", tmp_path / "wts")
    sub = ws.worktree / "lib"
    sub.mkdir()
    sh(sub, "init", "-q")
    sh(sub, "commit", "-q", "--allow-empty", "-m", "lib")
    (ws.worktree / ".gitmodules").write_text('[submodule "lib"]\n\tpath = lib\n\turl = ./lib\n')
    sh(ws.worktree, "add", ".gitmodules")
    sh(
        ws.worktree,
        "update-index",
        "--add",
        "--cacheinfo",
        f"160000,{sh(sub, 'rev-parse', 'HEAD')},lib",
    )
    sh(ws.worktree, "commit", "-q", "-m", "a submodule")
    (sub / "work.txt").write_text("uncommitted, inside the submodule\n")
    with pytest.raises(workspace.Refused, match=r"holds submodules \(lib\)"):
        workspace.remove(repo, ws.worktree)
    assert ws.worktree.is_dir()
    workspace.remove(repo, ws.worktree, force=True)
    assert not ws.worktree.exists()


def test_a_reused_pid_is_never_taken_for_gits_session() -> None:
    """git is reaped before its leftovers are looked for, so its pid is free
    again; on a machine that forks fast another process may have it, leading a
    session and group of its own. That process and its group are not git's
    leftovers (git's session, had it any member left, would hold the number)."""
    from owl import tree

    mark = tree.backend.last_pid()
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)  # as a Run's leader is
    try:
        # as if git had had the stranger's pid, exited and been reaped
        gitprocess.end_leftovers(stranger.pid, "no-such-tag", mark)
        assert stranger.poll() is None, "a stranger's group was killed for git's"
    finally:
        stranger.kill()
        stranger.wait()
