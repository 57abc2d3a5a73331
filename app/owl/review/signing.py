"""Signing a Job's commits at accept, where the person's keys are.

A contained Run cannot reach the person's keys (`~/.gnupg`, `~/.ssh` and the
agents' sockets are out of its sight), so in a repository whose config says
`commit.gpgSign = true` its commits are made unsigned. The signing happens
at `owl jobs accept`, which runs as the person, outside any Run.

Why every commit, not a signed merge commit on top: a host's "require signed
commits" rule checks every commit pushed, and a signed merge over unsigned
commits does not meet it. So accept makes a signed copy of each of the Job's
commits that its base does not hold (not reachable from the base branch nor
from the commit the Job started at) and no other branch, tag or remote branch
holds either (a copy of a colleague's commits the agent merged in would fork
their history: those are left as they are, and the answer says how many),
parents before children, with plumbing:
`git commit-tree -S` with the same tree, the parents mapped to their signed
copies, the same message bytes (and `encoding` header) and the same author
(name, email and date); the committer is the person, now. The trees are
unchanged, so what was reviewed is what is kept. Only once every copy is made
does the branch move, by `update-ref` guarded by its old value (a branch moved
meanwhile is a refusal, nothing changed); then the Job's own store's branch
follows, so a later bringing-in (`owl.git.storing.land`) does not take the
unsigned tip back. A merge commit Owl then makes is signed too
(`owl.review.merge`). An accept tried again (after a merge it refused) signs
the copies again: new hashes, the same trees. What a copy does not keep: a commit's old signature
(replaced) and a `mergetag` header (a signed tag merged in; its tag is not
what the host checks).

Which program signs. Signing runs a program the config names (`gpg.format`:
openpgp, ssh or x509; `gpg.program`, `gpg.ssh.program`, `gpg.x509.program`;
`user.signingKey`; `gpg.ssh.defaultKeyCommand`), which is what Owl's git
refuses everywhere else (`owl.git.safegit`). So these settings are read with
where each came from (`git config --show-origin`, in the project, the system
file included, includes followed as git follows them), and signing is
refused in one line when any of them comes from a file inside Owl's own
folders (the Jobs' worktrees and stores): an agent could have written those,
and a project's config could include one. The project's `.git/config`, the
person's `~/.gitconfig` and `/etc/gitconfig` are the person's: a contained
Run cannot write them. The values read are then given to the signing git as
its own settings (read after every file), so a file changed between the read
and git's own cannot swap the program; every other setting is as Owl's git
always has it (hooks off, no drivers).

Signing can fail (no key, a gpg-agent with no pinentry, a passphrase not
given in time): accept refuses in one line with git's reason and how to see
more, changing nothing; `--unsigned` accepts without signing. The signing git
may wait on a passphrase, so it has SIGN_TIMEOUT rather than git's usual
minute; it runs, as all of accept's git, off the engine thread. A gpg-agent
that signing starts is ended with git, as everything git starts is; where the
person's agent runs already (a desktop session's does) it is only asked.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from owl.errors import Refused
from owl.git import safegit, workspace

SIGN_TIMEOUT = 120.0  # a passphrase typed into a pinentry
MAX_COMMITS = 1000  # more than this to sign: the person signs them (`--unsigned`)

# format -> (the setting naming its program, git's default program)
FORMATS = {
    "openpgp": ("gpg.program", "gpg"),
    "x509": ("gpg.x509.program", "gpgsm"),
    "ssh": ("gpg.ssh.program", "ssh-keygen"),
}
# The settings that decide whether and how git signs (lower case, as git lists them).
KEYS = frozenset(
    {
        "commit.gpgsign",
        "gpg.format",
        "gpg.program",
        "gpg.openpgp.program",
        "gpg.x509.program",
        "gpg.ssh.program",
        "gpg.ssh.defaultkeycommand",
        "user.signingkey",
    }
)
_PATTERN = r"^(commit\.gpgsign|user\.signingkey|gpg\..*)$"
# Objects as they are stored: a replace ref or graft never stands in for a commit.
_ENV = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull}


@dataclass(frozen=True)
class Setting:
    """One value of a signing setting, as `git config --show-origin --show-scope` lists it."""

    key: str
    value: str | None  # None: the key is written without `=` (a boolean true)
    scope: str  # system, global, local, worktree, command
    origin: str  # "file:PATH", "command line:", ...


@dataclass(frozen=True)
class Signer:
    """How the signing git signs: the values read, given to it as its own settings."""

    fmt: str
    program: str
    key: str | None = None
    key_command: str | None = None

    def config(self) -> tuple[tuple[str, str], ...]:
        out = [("gpg.format", self.fmt), (FORMATS[self.fmt][0], self.program)]
        if self.key is not None:
            out.append(("user.signingKey", self.key))
        if self.key_command is not None:
            out.append(("gpg.ssh.defaultKeyCommand", self.key_command))
        return tuple(out)

    def words(self) -> str:
        """ "ssh key ~/.ssh/id_ed25519.pub", for the answer."""
        if self.key is None:
            if self.key_command is not None:
                return f"{self.fmt}, the key gpg.ssh.defaultKeyCommand gives"
            return f"{self.fmt}, {self.program}'s key for your committer name and email"
        key = self.key
        if key.startswith("key::"):
            key = key[5:]
            key = key if len(key) <= 40 else key[:40] + "…"
        return f"{self.fmt} key {key}"

    @staticmethod
    def _q(path: str) -> str:
        """A path for the shell, a leading ~/ left for it to expand."""
        if path.startswith("~/"):
            return "~/" + shlex.quote(path[2:])
        return shlex.quote(path)

    def how_to_look(self) -> str:
        """A command the person can run to see why signing failed (git says little)."""
        if self.fmt == "ssh":
            if self.key and not self.key.startswith("key::"):
                return (
                    f"see why with: echo test | {shlex.quote(self.program)} -Y sign -n git "
                    f"-f {self._q(self.key)}"
                )
            return "check that your ssh-agent holds the key (ssh-add -L)"
        local = f" --local-user {shlex.quote(self.key)}" if self.key else ""
        prog = shlex.quote(self.program)
        if self.fmt == "x509":
            return f"see why with: echo test | {prog} --sign{local} >/dev/null"
        return (
            f"see why with: echo test | {prog} --clearsign{local} (a passphrase needs a "
            "gpg-agent whose pinentry can ask you)"
        )


# ----------------------------------------------------------------- pure


def parse(out: bytes) -> list[Setting]:
    """`git config -z --show-scope --show-origin --get-regexp` output, in git's order."""
    fields = out.decode("utf-8", "surrogateescape").split("\0")
    found = []
    for i in range(0, len(fields) - 2, 3):
        scope, origin, entry = fields[i], fields[i + 1], fields[i + 2]
        key, nl, value = entry.partition("\n")
        found.append(Setting(key.lower(), value if nl else None, scope, origin))
    return found


def truth(value: str | None) -> bool | None:
    """git's reading of a boolean; None for a value git would refuse."""
    if value is None:
        return True
    v = value.strip().lower()
    if v in ("true", "yes", "on"):
        return True
    if v in ("false", "no", "off", ""):
        return False
    try:
        return int(v) != 0
    except ValueError:
        return None


def origin_path(s: Setting, cwd: Path) -> str | None:
    """The real path of the file a setting came from (relative ones are git's cwd's)."""
    if not s.origin.startswith("file:"):
        return None
    return os.path.realpath(os.path.join(cwd, s.origin[len("file:") :]))


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def decide(settings: list[Setting], cwd: Path, owls: list[str], job_id: int) -> Signer | None:
    """The signer the person's config asks for, None when it does not sign;
    Refused when a signing setting comes from inside `owls` (Owl's own
    folders, real paths) or makes no sense to git. Pure but for realpath."""
    mine = [s for s in settings if s.scope != "command" and s.key in KEYS]
    for s in mine:
        path = origin_path(s, cwd)
        if path is not None and _inside(path, owls):
            raise Refused(
                f"cannot sign job {job_id}'s commits: {s.key} is set in {path}, inside Owl's "
                "own folders, where an agent could have written it; nothing was changed; "
                "remove that setting, or accept with --unsigned"
            )
    last = {s.key: s for s in mine}
    sign = last.get("commit.gpgsign")
    if sign is None:
        return None
    on = truth(sign.value)
    if on is None:
        raise Refused(
            f"cannot accept job {job_id}: commit.gpgSign = {sign.value!r} ({sign.origin}) is "
            "not a boolean git knows; fix it, or accept with --unsigned"
        )
    if not on:
        return None
    fmt_set = last.get("gpg.format")
    fmt = (fmt_set.value or "").strip().lower() if fmt_set is not None else "openpgp"
    if fmt not in FORMATS:
        raise Refused(
            f"cannot sign job {job_id}'s commits: gpg.format = {fmt!r} is not one git signs "
            "with (openpgp, ssh, x509); nothing was changed; fix it, or accept with --unsigned"
        )
    program = FORMATS[fmt][1]
    names = ("gpg.program", "gpg.openpgp.program") if fmt == "openpgp" else (FORMATS[fmt][0],)
    for s in mine:  # git's order: the last one read wins
        if s.key in names and s.value:
            program = s.value
    key = last.get("user.signingkey")
    command = last.get("gpg.ssh.defaultkeycommand") if fmt == "ssh" else None
    signer = Signer(
        fmt,
        program,
        key.value if key is not None and key.value else None,
        command.value if command is not None and command.value else None,
    )
    if fmt == "ssh" and signer.key is None and signer.key_command is None:
        raise Refused(
            f"cannot sign job {job_id}'s commits: gpg.format = ssh, and neither "
            "user.signingKey nor gpg.ssh.defaultKeyCommand names a key; nothing was changed; "
            "set one, or accept with --unsigned"
        )
    return signer


def reason(said: str) -> str:
    """git's (and the signing program's) own words, on one line."""
    lines = []
    for line in said.splitlines():
        text = line.strip()
        if not text or text.startswith("[GNUPG:]"):
            continue
        for prefix in ("error: ", "fatal: "):
            text = text.removeprefix(prefix)
        if text not in lines:
            lines.append(text)
    return "; ".join(lines)[:300] or "no reason given"


def failure(job_id: int, signer: Signer, said: str) -> str:
    return (
        f"cannot sign job {job_id}'s commits with "
        f"{signer.words()} ({reason(said)}); nothing was changed; {signer.how_to_look()}; "
        "or accept with --unsigned to keep them unsigned"
    )


def merge_failure(branch: str, base: str, signer: Signer, said: str) -> str:
    return (
        f"the merge commit of {branch} into {base} could not be signed with "
        f"{signer.words()} ({reason(said)}); the merge was undone; {signer.how_to_look()}; "
        "or accept with --unsigned"
    )


# ------------------------------------------------------------------- git


def signer(project: Path, owls: list[str], job_id: int) -> Signer | None:
    """How the project's config asks git to sign (see `decide`), read without running anything."""
    proc = safegit.run_bytes(
        project,
        "config",
        "-z",
        "--includes",
        "--show-scope",
        "--show-origin",
        "--get-regexp",
        _PATTERN,
        env={"GIT_CONFIG_NOSYSTEM": "0"},  # the system file is the person's too
    )
    if proc.returncode not in (0, 1):  # 1: none set
        raise Refused(
            f"cannot accept job {job_id}: git cannot read the project's config "
            f"({reason(proc.stderr.decode('utf-8', 'replace'))})"
        )
    return decide(parse(proc.stdout), project, [os.path.realpath(f) for f in owls], job_id)


@dataclass(frozen=True)
class Resigned:
    signed: int  # commits copied, signed
    shared: (
        int  # the Job's commits some other branch, tag or remote branch holds: left as they were
    )


def resign(
    project: Path,
    job_id: int,
    branch: str,
    base: list[str],
    signer: Signer,
    store: Path | None = None,
) -> Resigned:
    """Sign the commits of `branch` that `base` (commits, refs) does not hold,
    as the module docstring says. A commit another branch, tag or remote
    branch holds too (a branch the agent merged in, one the person made from
    the Job's) is left as it is: a copy would fork that history. Refused, with
    nothing changed, when one cannot be signed."""
    if not base:
        raise Refused(
            f"cannot sign job {job_id}'s commits: Owl cannot tell where they begin (no base "
            "recorded); nothing was changed; accept with --unsigned and sign them yourself"
        )
    ref = f"refs/heads/{branch}"
    try:
        old = workspace.branch_tip(project, branch)
    except workspace.WorkspaceError as e:
        raise Refused(f"cannot accept job {job_id}: {e}") from None
    if old is None:
        raise Refused(f"the branch {branch} is not in {project} any more")
    # git before 2.41 matches --exclude for --branches against the short name,
    # later versions against the full one: say both
    others = (f"--exclude={branch}", f"--exclude={ref}", "--branches", "--tags", "--remotes")
    rows = _listed(project, job_id, old, *base, *others)
    everything = _listed(project, job_id, old, *base, count=True)
    shared = int(everything[0][0]) - len(rows) if everything else 0
    if not rows:
        return Resigned(0, shared)
    if len(rows) > MAX_COMMITS:
        raise Refused(
            f"cannot sign job {job_id}'s commits: its branch has {len(rows)} commits to sign, "
            f"more than Owl signs ({MAX_COMMITS}); nothing was changed; accept with "
            "--unsigned and sign them yourself"
        )
    copies: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="owl-sign-") as tmp:
        for sha, *parents in rows:
            copies[sha] = _copy(
                project, job_id, sha, [copies.get(p, p) for p in parents], signer, Path(tmp)
            )
    tip = copies[old]
    moved = workspace.git(
        project, "update-ref", "-m", "owl: signed at accept", ref, tip, old, check=False
    )
    if moved.returncode != 0:
        raise Refused(
            f"cannot accept job {job_id}: its branch {branch} moved while its commits were "
            "being signed; nothing was changed; accept again"
        )
    if store is not None and store.is_dir():
        # the store's branch follows (guarded: one the agent moved since stays as it is)
        workspace.git(
            store, "update-ref", "-m", "owl: signed at accept", ref, tip, old, check=False
        )
    return Resigned(len(rows), shared)


def _listed(
    project: Path, job_id: int, tip: str, *exclude: str, count: bool = False
) -> list[list[str]]:
    """The commits of `tip` none of `exclude` holds, parents first, each with
    its parents (or, with `count`, their number)."""
    how = ["--count"] if count else ["--topo-order", "--reverse", "--parents"]
    listed = workspace.git(
        project,
        "rev-list",
        "--ignore-missing",  # a base commit the person's history no longer has
        *how,
        tip,
        "--not",
        *exclude,
        check=False,
        env=_ENV,
    )
    if listed.returncode != 0:
        raise Refused(
            f"cannot sign job {job_id}'s commits: git cannot list them "
            f"({reason(listed.stderr)}); nothing was changed"
        )
    return [r.split() for r in listed.stdout.split("\n") if r.strip()]


_AUTHOR = re.compile(rb"^(.*) <(.*)> (\d+) ([+-]\d{4})$")


def headers(raw: bytes) -> tuple[dict[bytes, bytes], bytes]:
    """A raw commit's first value of each header, and its message's bytes."""
    head, _, message = raw.partition(b"\n\n")
    found: dict[bytes, bytes] = {}
    for line in head.split(b"\n"):
        if line.startswith(b" "):
            continue  # a continuation line (a signature's body)
        name, _, value = line.partition(b" ")
        found.setdefault(name, value)
    return found, message


def _copy(
    project: Path, job_id: int, sha: str, parents: list[str], signer: Signer, tmp: Path
) -> str:
    """A signed copy of commit `sha` with these parents: its new hash."""
    raw = safegit.run_bytes(project, "cat-file", "commit", sha, env=_ENV)
    if raw.returncode != 0:
        raise Refused(f"cannot accept job {job_id}: git cannot read commit {sha[:10]}")
    fields, message = headers(raw.stdout)
    author = _AUTHOR.match(fields.get(b"author", b""))
    tree = fields.get(b"tree", b"").decode("ascii", "replace")
    if author is None or not tree:
        raise Refused(f"cannot sign job {job_id}'s commits: commit {sha[:10]} is malformed")
    name, email, when, zone = (g.decode("utf-8", "surrogateescape") for g in author.groups())
    env = {
        **_ENV,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": f"@{when} {zone}",
    }
    config = signer.config()
    if b"encoding" in fields:
        config += (("i18n.commitEncoding", fields[b"encoding"].decode("utf-8", "replace")),)
    path = tmp / sha
    path.write_bytes(message)
    args = ["commit-tree", tree, *(a for p in parents for a in ("-p", p)), "-F", str(path), "-S"]
    try:
        proc = workspace.git(
            project, *args, check=False, timeout=SIGN_TIMEOUT, config=config, env=env
        )
    except workspace.WorkspaceError as e:  # past its time: the passphrase was not given
        raise Refused(failure(job_id, signer, str(e))) from None
    new = proc.stdout.strip()
    if proc.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40,64}", new):
        raise Refused(failure(job_id, signer, proc.stderr or proc.stdout))
    return new
