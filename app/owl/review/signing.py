"""Signing a Job's commits at accept, where the person's keys are: whether
and how, from the person's own settings.

A contained Run cannot reach the person's keys (`~/.gnupg`, `~/.ssh` and the
agents' sockets are out of its sight), so in a repository whose config says
`commit.gpgSign = true` its commits are made unsigned. The signing happens
at `owl jobs accept`, which runs as the person, outside any Run: each of the
Job's commits is copied signed (`owl.review.resign`, which says why every
commit), and a merge commit Owl then makes is signed too (`owl.review.merge`).

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
import shlex
from dataclasses import dataclass
from pathlib import Path

from owl.errors import Refused
from owl.git import safegit

SIGN_TIMEOUT = 120.0  # a passphrase typed into a pinentry

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
