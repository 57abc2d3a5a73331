"""A signed copy of each of a Job's commits, made at accept (`owl.review.signing`
says whether and with what).

Why every commit, not a signed merge commit on top: a host's "require signed
commits" rule checks every commit pushed, and a signed merge over unsigned
commits does not meet it. So accept makes a signed copy of each of the Job's
commits that its base does not hold (not reachable from the base branch nor
from the commit the Job started at) and no other branch, tag or remote branch
holds either (a copy of a colleague's commits the agent merged in would fork
their history: those are left as they are, and the answer says how many),
parents before children, with plumbing: `git commit-tree -S` with the same
tree, the parents mapped to their signed copies, the same message bytes (and
`encoding` header) and the same author (name, email and date); the committer
is the person, now. The trees are unchanged, so what was reviewed is what is
kept. Only once every copy is made does the branch move, by `update-ref`
guarded by its old value (a branch moved meanwhile is a refusal, nothing
changed); then the Job's own store's branch follows, so a later bringing-in
(`owl.git.storing.land`) does not take the unsigned tip back. An accept tried
again (after a merge it refused) signs the copies again: new hashes, the same
trees. What a copy does not keep: a commit's old signature (replaced) and a
`mergetag` header (a signed tag merged in; its tag is not what the host
checks).

Cost: some 60 ms a commit with an ssh key, 60-105 ms with gpg (the more when
each signature has to start gpg's agent), measured on 100 commits.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from owl.errors import Refused
from owl.git import safegit, storing, workspace
from owl.review.signing import SIGN_TIMEOUT, Signer, failure, reason

MAX_COMMITS = 1000  # more than this to sign: the person signs them (`--unsigned`)
# Objects as they are stored: a replace ref or graft never stands in for a commit.
_ENV = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull}


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
        # the store's branch follows (guarded: one the agent moved since stays
        # as it is), with no link a Run left for git to write through
        storing.scrubbed(str(store))
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
