"""Links out of the worktree, to a secret or to a file the Run may only read;
and a repository that signs its commits.

A hard link is an inode's second name: made in the worktree, it would let the
Run write a file it may only read (``~/.bashrc``, the project's git config) or
keep a secret's content after the Run. The link cannot be made: the hidden
paths show an empty folder or /dev/null, and every other file lies on another
mount than the worktree's (a link across mounts is EXDEV, even on one
filesystem). A symlink can be made, to anything: it is a path, which reads
as nothing inside and is committed as that path, not as what it names.

``commit.gpgsign = true``: the keys are out of the Run's reach, so its commits
are made unsigned (git's environment settings, for the Run alone); `owl jobs
accept` signs them (tests/test_accept_signing.py)."""

from __future__ import annotations

import subprocess

from escapes.harness import BASHRC, KEY, base, daemon, done, landed, person, project, refused
from support.need import programs

__all__ = ["base"]

ATTACKS = r"""
key="$HOME/.ssh/id_ed25519"
try "hard-link the hidden key" "ln $key key-link && grep -q PRIVATE key-link"
try "hard-link a hidden file" "ln $HOME/.netrc netrc-link"
try "hard-link a file it may only read, and write it" "ln $HOME/.bashrc bashrc-link && echo pwned >> bashrc-link"
try "hard-link the project's git config, and write it" "ln $PROJECT_GIT/config config-link && echo '[core] fsmonitor = /bin/true' >> config-link"
try "hard-link Owl's config" "ln $OWL_CONFIG owl-config-link"
try "read the key through a symlink" "ln -s $key key-symlink && grep -q PRIVATE key-symlink"
try "read Owl's config through a symlink" "ln -s $OWL_CONFIG owl-symlink && cat owl-symlink"
try "read the key through /proc/self/root" "grep -q PRIVATE /proc/self/root$key"
try "read the key through pid 1's root" "grep -q PRIVATE /proc/1/root$key"
git add -A key-symlink 2>/dev/null
"""


def test_no_link_out_of_the_worktree_reaches_a_secret_or_writes_a_read_only_file(base):
    programs("bwrap")
    home = person(base)
    proj = project(base)
    git = ["git", "-C", str(proj)]
    subprocess.run([*git, "config", "commit.gpgsign", "true"], check=True)
    subprocess.run([*git, "config", "user.signingkey", "NO-SUCH-KEY"], check=True)
    config = (proj / ".git" / "config").read_text()
    d = daemon(
        base,
        home,
        ATTACKS,
        known={"PROJECT_GIT": proj / ".git", "OWL_CONFIG": base / "owl" / "config.toml"},
    )
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, job)
    refused(
        log,
        "hard-link the hidden key",
        "hard-link a hidden file",
        "hard-link a file it may only read, and write it",
        "hard-link the project's git config, and write it",
        "hard-link Owl's config",
        "read the key through a symlink",
        "read Owl's config through a symlink",
        "read the key through /proc/self/root",
        "read the key through pid 1's root",
    )
    assert (home / ".bashrc").read_text() == BASHRC
    assert (home / ".ssh" / "id_ed25519").read_text() == KEY
    assert (proj / ".git" / "config").read_text() == config
    landed(proj, j["branch"])
    # the symlink is committed as the path it is, and the commit unsigned
    shown = subprocess.run(
        [*git, "show", f"{j['branch']}:key-symlink"], capture_output=True, text=True, check=True
    ).stdout
    assert shown == str(home / ".ssh" / "id_ed25519"), shown
    signed = subprocess.run(
        [*git, "log", "-1", "--format=%G?", j["branch"]], capture_output=True, text=True
    ).stdout.strip()
    assert signed == "N", signed
    assert "; commits unsigned here, signed at accept" in j["runs"][-1]["contained"]
