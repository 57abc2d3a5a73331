"""A repository that signs its commits: a contained Run commits unsigned, and
`owl jobs accept` signs every commit of the Job where the person's keys are,
with the real ssh-keygen and the real gpg, through the real daemon.

The daemon's tests run a shell agent in a real contained Run (real bwrap) that
commits in a project whose config says ``commit.gpgSign = true``, then accept;
the last ones take the settings (``owl.review.signing``) and the copying
(``owl.review.resign``) straight, on data and on a real repository."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from escapes.harness import base, daemon, done, person, project
from owl.errors import Refused
from owl.git.jobstore import store_path
from owl.review import resign, signing
from support.need import programs

__all__ = ["base"]

# Two commits of the Job's, one by another author, one whose message git's own
# cleanup would change (trailing spaces, blank lines at the end).
WORK = r"""
echo one > one.txt && git add one.txt
GIT_AUTHOR_NAME="Agent Smith" GIT_AUTHOR_EMAIL=agent@example.invalid \
  GIT_AUTHOR_DATE="2001-02-03T04:05:06+0700" git commit -qm "the first of the Job's"
printf 'second  \n\nbody line   \n\n\n' > msg.txt
echo two > two.txt && git add two.txt && git commit -q --cleanup=verbatim -F msg.txt && rm msg.txt
"""


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    ).stdout


def commits(repo: Path, rng: str) -> list[str]:
    return git(repo, "rev-list", "--reverse", rng).split()


def kept(repo: Path, sha: str) -> tuple[str, str, bytes]:
    """What signing must keep of a commit: its tree, its author (with date), its message bytes."""
    raw = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "commit", sha], capture_output=True, check=True
    ).stdout
    head, _, message = raw.partition(b"\n\n")
    lines = head.decode().splitlines()
    tree = next(x for x in lines if x.startswith("tree "))
    author = next(x for x in lines if x.startswith("author "))
    return tree, author, message


def signed_project(base: Path, **config: str) -> Path:
    proj = project(base)
    git(proj, "config", "commit.gpgSign", "true")
    for key, value in config.items():
        git(proj, "config", key.replace("_", "."), value)
    return proj


def review(d, proj: Path) -> tuple[int, dict]:
    job = d.add("do the work", proj)
    d.ok("start")
    j, log = done(d, job)
    assert "ESCAPED" not in log and "committed" in log, log
    assert "commits unsigned here, signed at accept" in j["runs"][-1]["contained"]
    return job, j


def ssh_key(base: Path) -> Path:
    programs("ssh-keygen")
    key = base / "signing-key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "owl-test", "-f", str(key)],
        check=True,
    )
    return key


def ssh_signing(base: Path) -> tuple[Path, Path, Path]:
    """(key, the person's home, a project that signs its commits with that ssh key)."""
    programs("bwrap")
    key = ssh_key(base)
    return key, person(base), signed_project(base, gpg_format="ssh", user_signingKey=str(key))


def the_base_moves_on(proj: Path, name: str, text: str) -> str:
    """The person commits on main (unsigned: it is not what is tested); main's new tip."""
    (proj / name).write_text(text)
    git(proj, "add", name)
    git(proj, "-c", "commit.gpgSign=false", "commit", "-qm", "meanwhile")
    return git(proj, "rev-parse", "main").strip()


def ssh_verified(base: Path, key: Path, repo: Path, rng: str) -> list[str]:
    """Each commit's "%G? committer": G for a good signature by `key` (the person's)."""
    allowed = base / "allowed"
    allowed.write_text("test@example.invalid " + key.with_suffix(".pub").read_text())
    return git(
        repo, "-c", f"gpg.ssh.allowedSignersFile={allowed}", "log", "--format=%G? %cn <%ce>", rng
    ).splitlines()


@pytest.fixture
def gnupg(base: Path) -> Iterator[Path]:
    """A gpg home of the test's own with one signing key, no passphrase."""
    programs("gpg", "gpgconf")
    home = base / "gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(
        [
            "gpg",
            "--batch",
            "--passphrase",
            "",
            "--quick-gen-key",
            "Owl Test <t@example.com>",
            "ed25519",
            "sign",
            "never",
        ],
        env=env,
        check=True,
        capture_output=True,
    )
    try:
        yield home
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False)


def test_accept_merge_signs_every_commit_with_an_ssh_key(base):
    key, home, proj = ssh_signing(base)
    first = git(proj, "rev-parse", "main").strip()
    with daemon(base, home, WORK) as d:
        job, j = review(d, proj)
        branch = j["branch"]
        before = commits(proj, f"main..{branch}")
        assert len(before) == 3  # the two above and the harness's own
        assert git(proj, "log", "--format=%G?", f"main..{branch}").split() == ["N"] * 3
        p = d.owl("jobs", "accept", str(job), "--merge")
        assert p.returncode == 0, p.stderr
        assert f"signed 3 commits with ssh key {key}" in p.stdout, p.stdout
        assert d.job(job)["state"] == "done"
    after = commits(proj, f"{first}..main")
    assert len(after) == 3 and set(after).isdisjoint(before)
    assert [kept(proj, c) for c in after] == [kept(proj, c) for c in before]
    assert git(proj, "rev-parse", "main").strip() == git(proj, "rev-parse", branch).strip()
    shown = ssh_verified(base, key, proj, f"{first}..main")
    assert shown == ["G Test <test@example.invalid>"] * 3, shown
    author = kept(proj, after[0])[1]
    assert author.startswith("author Agent Smith <agent@example.invalid> ") and author.endswith(
        " +0700"
    )


def test_accept_merge_signs_the_commits_and_the_merge_commit_with_gpg(base, gnupg):
    programs("bwrap")
    home = person(base)
    proj = signed_project(base, user_signingKey="t@example.com")
    genv = {"GNUPGHOME": str(gnupg)}
    with daemon(base, home, WORK, env=genv) as d:
        job, j = review(d, proj)
        branch = j["branch"]
        before = commits(proj, f"main..{branch}")
        # the base moves on: accept needs a merge commit
        moved = the_base_moves_on(proj, "other.txt", "the person's\n")
        p = d.owl("jobs", "accept", str(job), "--merge")
        assert p.returncode == 0, p.stderr
        assert "signed 3 commits with openpgp key t@example.com" in p.stdout, p.stdout
        assert "with a merge commit (signed)" in p.stdout, p.stdout
    tip = git(proj, "rev-parse", "main").strip()
    parents = git(proj, "rev-list", "--parents", "-n1", tip).split()[1:]
    assert parents[0] == moved
    new = commits(proj, f"{moved}..main")
    assert len(new) == 4 and new[-1] == tip and set(new).isdisjoint(before)
    assert [kept(proj, c) for c in new[:-1]] == [kept(proj, c) for c in before]
    for c in new:
        v = subprocess.run(
            ["git", "-C", str(proj), "verify-commit", c],
            capture_output=True,
            text=True,
            env={**os.environ, **genv},
        )
        assert v.returncode == 0 and "Good signature" in v.stderr, (c, v.stderr)


PLANT = r"""
printf '[gpg]\n\tprogram = %s\n' "$EVIL" > .signing.cfg
git add .signing.cfg && git commit -qm "a config of the Job's"
"""


def test_a_signing_setting_an_agent_wrote_is_refused_and_nothing_runs(base):
    """The project's config includes a file inside the Job's worktree (as a
    team's shared `.gitconfig` is included); the agent writes gpg.program there."""
    programs("bwrap")
    home = person(base)
    marker = base / "ran"
    evil = base / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    evil.chmod(0o755)
    proj = signed_project(base, user_signingKey="t@example.com")
    planted = base / "owl" / "worktrees" / "job-1" / ".signing.cfg"
    git(proj, "config", "include.path", str(planted))
    with daemon(base, home, PLANT, known={"EVIL": evil}) as d:
        job, j = review(d, proj)
        assert planted.is_file()  # there, and included, as accept begins
        tip = git(proj, "rev-parse", j["branch"]).strip()
        main = git(proj, "rev-parse", "main").strip()
        p = d.owl("jobs", "accept", str(job), "--merge")
        assert p.returncode != 0
        said = p.stderr.strip()
        assert len(said.splitlines()) == 1, said
        assert f"gpg.program is set in {planted}" in said, said
        assert "inside Owl's own folders" in said and "--unsigned" in said, said
        assert not marker.exists()
        assert d.job(job)["state"] == "review"
        assert git(proj, "rev-parse", j["branch"]).strip() == tip
        assert git(proj, "rev-parse", "main").strip() == main
        p = d.owl("jobs", "accept", str(job), "--merge", "--unsigned")
        assert p.returncode == 0, p.stderr
        assert "kept unsigned (--unsigned)" in p.stdout, p.stdout
    assert not marker.exists()
    assert git(proj, "rev-parse", "main").strip() == tip


def test_a_key_that_cannot_sign_is_a_one_line_refusal_and_unsigned_accepts(base):
    programs("bwrap", "ssh-keygen")
    home = person(base)
    missing = base / "no-such-key"
    proj = signed_project(base, gpg_format="ssh", user_signingKey=str(missing))
    with daemon(base, home, WORK) as d:
        job, j = review(d, proj)
        branch = j["branch"]
        tip = git(proj, "rev-parse", branch).strip()
        main = git(proj, "rev-parse", "main").strip()
        p = d.owl("jobs", "accept", str(job), "--merge")
        assert p.returncode != 0
        said = p.stderr.strip()
        assert len(said.splitlines()) == 1, said
        assert f"cannot sign job 1's commits with ssh key {missing}" in said, said
        assert "Couldn't load public key" in said and "nothing was changed" in said, said
        assert "--unsigned" in said, said
        assert d.job(job)["state"] == "review"
        assert git(proj, "rev-parse", branch).strip() == tip
        assert git(proj, "rev-parse", "main").strip() == main
        assert Path(j["worktree"]).is_dir()
        p = d.owl("jobs", "accept", str(job), "--merge", "--unsigned")
        assert p.returncode == 0, p.stderr
        assert "kept unsigned (--unsigned)" in p.stdout, p.stdout
        assert d.job(job)["state"] == "done"
    assert git(proj, "rev-parse", "main").strip() == tip
    assert git(proj, "log", "--format=%G?", f"{main}..main").split() == ["N"] * 3


def test_accept_without_merge_signs_the_kept_branch(base):
    key, home, proj = ssh_signing(base)
    with daemon(base, home, WORK) as d:
        job, j = review(d, proj)
        before = commits(proj, f"main..{j['branch']}")
        p = d.owl("jobs", "accept", str(job))
        assert p.returncode == 0, p.stderr
        assert "signed 3 commits" in p.stdout and "kept" in p.stdout, p.stdout
    after = commits(proj, f"main..{j['branch']}")
    assert [kept(proj, c) for c in after] == [kept(proj, c) for c in before]
    shown = ssh_verified(base, key, proj, f"main..{j['branch']}")
    assert shown == ["G Test <test@example.invalid>"] * 3, shown


# ------------------------------------------------------- the settings, as data


def S(key: str, value: str | None, origin: str = "file:.git/config", scope: str = "local"):
    return signing.Setting(key, value, scope, origin)


def test_the_last_setting_read_wins_and_owls_own_command_line_is_not_the_persons(tmp_path):
    got = signing.decide(
        [
            S("commit.gpgsign", "true", "file:/home/me/.gitconfig", "global"),
            S("gpg.format", "ssh", "file:/home/me/.gitconfig", "global"),
            S("gpg.ssh.program", "/usr/bin/ssh-keygen"),
            S("user.signingkey", "~/.ssh/a.pub", "file:/home/me/.gitconfig", "global"),
            S("user.signingkey", "~/.ssh/b.pub"),
            S("commit.gpgsign", "false", "command line:", "command"),
        ],
        tmp_path,
        [str(tmp_path / "owl" / "worktrees")],
        7,
    )
    assert got == signing.Signer("ssh", "/usr/bin/ssh-keygen", "~/.ssh/b.pub")
    assert got.config() == (
        ("gpg.format", "ssh"),
        ("gpg.ssh.program", "/usr/bin/ssh-keygen"),
        ("user.signingKey", "~/.ssh/b.pub"),
    )
    assert signing.decide([S("commit.gpgsign", "no")], tmp_path, [], 7) is None
    assert signing.decide([S("user.signingkey", "X")], tmp_path, [], 7) is None
    assert signing.decide([S("commit.gpgsign", None)], tmp_path, [], 7) == signing.Signer(
        "openpgp", "gpg"
    )


def test_a_setting_from_owls_folders_is_refused_even_one_that_turns_signing_off(tmp_path):
    owls = [str(tmp_path / "owl" / "worktrees")]
    (tmp_path / "owl" / "worktrees" / "job-3").mkdir(parents=True)
    inside = f"file:{tmp_path}/owl/worktrees/job-3/x.cfg"
    with pytest.raises(Refused, match="commit.gpgsign is set in .*job-3/x.cfg"):
        signing.decide([S("commit.gpgsign", "false", inside)], tmp_path, owls, 3)
    with pytest.raises(Refused, match="gpg.format = 'smime' is not one git signs with"):
        signing.decide([S("commit.gpgsign", "1"), S("gpg.format", "smime")], tmp_path, owls, 3)
    with pytest.raises(Refused, match="neither user.signingKey nor gpg.ssh.defaultKeyCommand"):
        signing.decide([S("commit.gpgsign", "1"), S("gpg.format", "ssh")], tmp_path, owls, 3)
    # a file beside Owl's folders, by a name that only starts alike, is the person's
    beside = f"file:{tmp_path}/owl/worktrees-old/x.cfg"
    assert signing.decide([S("commit.gpgsign", "true", beside)], tmp_path, owls, 3) is not None


def test_a_merge_refused_after_signing_leaves_the_store_following_the_signed_branch(base):
    """A merge commit that conflicts is found only once it is tried, after the
    signing: the branch stays signed, in the project and in the Job's own
    store alike, so bringing the store's branch in again takes nothing back."""
    key, home, proj = ssh_signing(base)
    with daemon(base, home, WORK) as d:
        job, j = review(d, proj)
        branch = j["branch"]
        before = commits(proj, f"main..{branch}")
        the_base_moves_on(proj, "work.txt", "the person's own\n")
        p = d.owl("jobs", "accept", str(job), "--merge")
        assert p.returncode != 0 and "conflicts in work.txt" in p.stderr, p.stderr
        assert d.job(job)["state"] == "review"
        after = commits(proj, f"main..{branch}")
        assert [kept(proj, c) for c in after] == [kept(proj, c) for c in before]
        assert (
            ssh_verified(base, key, proj, f"main..{branch}")
            == ["G Test <test@example.invalid>"] * 3
        )
        store = store_path(Path(j["worktree"]))
        assert git(store, "rev-parse", f"refs/heads/{branch}") == git(proj, "rev-parse", branch)
        # the worktree is on the signed tip, its files as they were: nothing to commit
        assert git(Path(j["worktree"]), "status", "--porcelain") == ""
        p = d.owl("jobs", "drop", str(job), "--force")
        assert p.returncode == 0, p.stderr
    assert git(proj, "for-each-ref", "refs/owl/dropped/").count("\n") <= 1


def test_a_merge_it_would_refuse_signs_nothing(base):
    _, home, proj = ssh_signing(base)
    with daemon(base, home, WORK) as d:
        job, j = review(d, proj)
        branch = j["branch"]
        tip = git(proj, "rev-parse", branch)
        the_base_moves_on(proj, "other.txt", "the person's\n")
        (proj / "README").write_text("changed, not committed\n")
        p = d.owl("jobs", "accept", str(job), "--merge")
        assert p.returncode != 0 and "uncommitted changes" in p.stderr, p.stderr
        assert git(proj, "rev-parse", branch) == tip
        assert d.job(job)["state"] == "review"


def test_a_signed_copy_keeps_a_message_that_is_not_utf8_byte_for_byte(base):
    """Straight through `resign.resign`: a Latin-1 message with its
    `encoding` header kept byte for byte; the base merged into the branch
    (as an agent may do) keeps the base's commit as it is."""
    key = ssh_key(base)
    repo = project(base)
    git(repo, "switch", "-qc", "work")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    (base / "msg").write_bytes(b"caf\xe9 cr\xe8me\n\n  indented  \n")
    git(repo, "-c", "i18n.commitEncoding=ISO-8859-1", "commit", "-qF", str(base / "msg"))
    git(repo, "switch", "-q", "main")
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", "b.txt")
    git(repo, "commit", "-qm", "meanwhile on main")
    meanwhile = git(repo, "rev-parse", "main").strip()
    git(repo, "switch", "-q", "work")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge main", "main")
    latin, merged = git(repo, "rev-list", "--topo-order", "--reverse", "main..work").split()
    signer = signing.Signer("ssh", "ssh-keygen", str(key))
    assert resign.resign(repo, 5, "work", ["refs/heads/main"], signer) == resign.Resigned(2, 0)
    latin2, merged2 = git(repo, "rev-list", "--topo-order", "--reverse", "main..work").split()
    assert kept(repo, latin2) == kept(repo, latin) and kept(repo, merged2) == kept(repo, merged)
    raw = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "commit", latin2], capture_output=True, check=True
    ).stdout
    assert b"\nencoding ISO-8859-1\n" in raw
    assert raw.endswith(b"\n\ncaf\xe9 cr\xe8me\n\n  indented\n")  # as git commit left it
    assert git(repo, "rev-list", "--parents", "-n1", merged2).split()[1:] == [latin2, meanwhile]
    assert ssh_verified(base, key, repo, "main..work") == ["G Test <test@example.invalid>"] * 2


def test_a_commit_another_branch_holds_is_left_as_it_was(base):
    """A branch the agent merged in (a colleague's feature), or one the person
    made from the Job's: a copy of its commits would fork that history."""
    key = ssh_key(base)
    repo = project(base)
    git(repo, "switch", "-qc", "feature")
    (repo / "f.txt").write_text("f\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-qm", "a colleague's")
    feature = git(repo, "rev-parse", "feature").strip()
    git(repo, "switch", "-qc", "work", "main")
    (repo / "w.txt").write_text("w\n")
    git(repo, "add", "w.txt")
    git(repo, "commit", "-qm", "the Job's")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    signer = signing.Signer("ssh", "ssh-keygen", str(key))
    main = git(repo, "rev-parse", "main").strip()
    assert resign.resign(repo, 5, "work", [main], signer) == resign.Resigned(2, 1)
    parents = git(repo, "rev-list", "--parents", "-n1", "work").split()[1:]
    assert parents[1] == feature and git(repo, "rev-parse", "feature").strip() == feature
    shown = sorted(ssh_verified(base, key, repo, "main..work"))
    assert shown == ["G Test <test@example.invalid>"] * 2 + ["N Test <test@example.invalid>"]
