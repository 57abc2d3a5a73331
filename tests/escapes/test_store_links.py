"""A link a Run leaves in its Job's store never steers the host's git.

The Run writes its store's ``objects/``, ``refs/`` and ``logs/`` (a commit
needs them). A reflog there made a link to a file of the person's, and ``owl
jobs accept`` in a repository that signs its commits moved the store's branch
with the host's git, as the person: git appended a line to that file. A FIFO
planted there would hang it. Owl removes every link and special file from the
store before its git reads or writes it (bringing the branch in, signing)."""

from __future__ import annotations

import os
import subprocess

from escapes.harness import base, daemon, done, person, project, refused, who
from support.need import programs

__all__ = ["base", "who"]

PLANT = r"""
echo first > first.txt && git add first.txt && git commit -qm "first"
store=$(git rev-parse --git-common-dir)
branch=$(git symbolic-ref --short HEAD)
mkdir -p "$store/logs/refs/heads/$(dirname "$branch")"
rm -f "$store/logs/refs/heads/$branch" && ln -s "$VICTIM" "$store/logs/refs/heads/$branch" && echo "linked the reflog"
ln -s "$VICTIM" "$store/refs/heads/owl-link" && echo "linked a ref"
mkfifo "$store/logs/HEAD.fifo" && echo "made a fifo"
"""
VICTIM_TEXT = "# the person's own file\n"


def test_a_reflog_link_in_the_store_never_writes_a_file_at_accept(base, who):
    programs("bwrap", "ssh-keygen")
    home = person(base)
    key = base / "signing-key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "owl-test", "-f", str(key)],
        check=True,
    )
    victim = base / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    proj = project(base)
    git = ["git", "-c", "safe.directory=*", "-C", str(proj)]
    subprocess.run([*git, "config", "commit.gpgSign", "true"], check=True)
    subprocess.run([*git, "config", "gpg.format", "ssh"], check=True)
    subprocess.run([*git, "config", "user.signingKey", str(key)], check=True)
    if who is not None:
        for path in (key, key.with_suffix(".pub"), victim):
            os.chown(path, who[0].pw_uid, who[0].pw_gid)
    d = daemon(base, home, PLANT, known={"VICTIM": victim}, who=who)
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, job)
        refused(log)
        for said in ("linked the reflog", "linked a ref", "made a fifo"):
            assert said in log, log
        accepted = d.owl("jobs", "accept", str(job), timeout=120)
        assert accepted.returncode == 0, accepted
        assert "signed 2 commits" in accepted.stdout + accepted.stderr, accepted
    assert victim.read_text() == VICTIM_TEXT
    store = base / "owl" / "worktrees" / "job-1.git"
    links = [
        os.path.relpath(os.path.join(top, n), store)
        for top, dirs, files in os.walk(store)
        for n in dirs + files
        if os.path.islink(os.path.join(top, n))
    ]
    assert links == [], links
    # the branch as signed, in the project
    shown = subprocess.run(
        [*git, "log", "--format=%s", j["branch"]], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert shown[:2] == ["the Job's work", "first"], shown
