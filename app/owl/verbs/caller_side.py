"""The slow halves of verbs, done on the caller's thread, never the engine's.

Why: a verb arrives on a socket thread (or the tray's) and is carried out on
the engine thread, which must never wait on git or a project's files. So a
verb that needs git does it in two halves: what changes state runs on the
engine thread and returns its answer with a `LATER` step; `finish` then
runs that step here, on the caller's thread, to complete the answer (a
branch's commits and diffstat, a dropped Job's worktree removed). And `owl
add` reads its project (is it a repository, its `.owl.toml`, the agent)
here first, so the engine only writes the new Job.

A verb whose git must come *between* two looks at the state (drop's check
for unkept work, accept's merge, verify's checks) is strung together here
from halves in `owl.verbs.engine_side`: the engine checks the Job's state and holds it,
git runs here, and the engine checks again and changes the state. The hold
is let go whatever happens here, so a failing git never leaves a Job stuck.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from owl.git import guards
from owl.git import jobstore
from owl.git import outside
from owl.settings import project as projectmod
from owl.git import workspace
from owl.errors import Refused
from owl.verbs.engine_side import Verbs
from owl.verbs.holding import daemons_git
from owl.verbs.views import LATER
from owl.review import resign, signing


def finish(answer: Any) -> Any:
    """Run the answer's LATER step, if it has one, and return the full answer."""
    if isinstance(answer, dict) and LATER in answer:
        later = answer.pop(LATER)
        answer = later(answer)
    return answer


def prepare_add(cfg: Any, prompt: str, project: str, agent: str | None) -> dict:
    """What `owl add` needs to know about its project, found with git: the
    repository's root, its `.owl.toml`, the agent and whether it can run."""
    from owl import agents

    root, head = workspace.project_head(project)
    settings = settings_at(root, head)
    name = (
        agent or cfg.projects.get(str(root), {}).get("agent") or settings.agent or cfg.default_agent
    )
    # "claude,codex": the next agent carries the Job on while the first waits
    chain = [n.strip() for n in name.split(",")]
    if not all(chain) or len(set(chain)) != len(chain):
        raise Refused(
            f"--agent {name!r}: name each agent once, separated by commas (e.g. claude,codex)"
        )
    for each in chain:
        try:
            driver = agents.get_driver(each, cfg.agent(each))
        except ValueError as e:
            raise Refused(str(e)) from None
        problem = driver.problem()
        if problem:
            if not agent:
                problem += other_agents(cfg, each)
            raise Refused(problem)
    return {"root": str(root), "agent": ",".join(chain), "prompt": prompt}


# A project's committed settings by (top, commit): what a commit holds never
# changes, so Jobs queued one after another in a project read them with git once.
_SETTINGS: dict[tuple[str, str], projectmod.ProjectSettings] = {}
_SETTINGS_KEPT = 64


def settings_at(root: Path, head: str) -> projectmod.ProjectSettings:
    """The `.owl.toml` committed at `head` (HEAD's commit when it was asked),
    read once per commit; Refused (its one line) when it is wrong."""
    key = (str(root), head)
    known = _SETTINGS.get(key)
    if known is not None:
        return known
    try:
        # read at HEAD, not at the hash: git names a hash's missing file as it
        # names a missing commit, and telling them apart takes another git. (A
        # commit made between the two gits is kept under the one before it: the
        # next Job sees the new HEAD and reads it; only a reset back to that
        # exact commit would find the newer settings.)
        settings = projectmod.load(Path(root))
    except projectmod.ProjectError as e:
        raise Refused(str(e)) from None
    except (OSError, workspace.WorkspaceError):
        return projectmod.ProjectSettings()  # not kept: git may read it next time
    if len(_SETTINGS) >= _SETTINGS_KEPT:
        _SETTINGS.pop(next(iter(_SETTINGS)))
    _SETTINGS[key] = settings
    return settings


def other_agents(cfg: Any, name: str) -> str:
    """What else the person can do when the default agent cannot run: name one
    (`--agent`), or make another the default, among those configured."""
    others = sorted(a for a in cfg.agents if a != name and (cfg.agents[a] or {}).get("command"))
    known = (
        f"configured: {', '.join(others)}"
        if others
        else "none other is configured: add [agents.NAME] with a command to config.toml"
    )
    return f"; or run another agent with --agent NAME, or set agent.default ({known})"


@contextlib.contextmanager
def _held(engine: Any, job_id: int) -> Iterator[None]:
    """Let go of the Job's hold on the way out, however this half ends."""
    try:
        yield
    finally:
        try:
            engine.call(lambda: Verbs(engine).release(job_id))
        except Refused:  # the daemon is stopping: nothing is held any more
            pass


def _quietly(call: Any) -> None:
    """An engine call on the way out that must not hide why we are leaving."""
    with contextlib.suppress(Refused):
        call()


def drop(engine: Any, job_id: int, force: bool) -> dict:
    """`owl jobs drop`: refuse if git finds work nobody kept (without `force`),
    then drop; a Job with no Run going has its workspace removed here."""
    with daemons_git(engine):
        return _drop(engine, job_id, force)


def _drop(engine: Any, job_id: int, force: bool) -> dict:
    e = engine
    begun = e.call(lambda: Verbs(e).drop_begin(job_id, force))
    if "job" not in begun:
        return begun
    with _held(e, job_id):
        # forced, a branch that cannot be brought in stays, with its store (drop_workspace)
        landed = None if force else guards.bring_in(begun["job"], "drop")
        refusal = landed or guards.drop_refusal(begun["job"], force)
        if refusal:
            raise Refused(refusal)
        answer = e.call(lambda: Verbs(e).drop_commit(job_id, force))
    job = answer.pop("workspace", None)
    if job is not None:
        answer["message"] += guards.drop_workspace(job)
        e.call(lambda: Verbs(e).verb_done(job_id))
    return answer


def accept(
    engine: Any,
    job_id: int,
    merge: bool,
    delete_branch: bool,
    anyway: bool = False,
    unsigned: bool = False,
) -> dict:
    """`owl jobs accept [--merge] [--delete-branch] [--unsigned]`: keep a Job's work.

    In a repository that signs its commits, the Job's commits are signed
    first (`owl.review.signing`), unless `unsigned`. With `merge`, its branch
    is brought into its base branch (see `owl.review.merge`); with
    `delete_branch`, the branch goes once merged. The worktree is removed
    before the Job is recorded done, so a removal that fails leaves it in
    review with the reason. With `anyway`, a blocked or exhausted Job is
    accepted too, and recorded as accepted past its checks."""
    with daemons_git(engine):
        return _accept(engine, job_id, merge, delete_branch, anyway, unsigned)


def _accept(
    engine: Any,
    job_id: int,
    merge: bool,
    delete_branch: bool,
    anyway: bool = False,
    unsigned: bool = False,
) -> dict:
    from owl.review import merge as mergemod

    e = engine
    job = e.call(lambda: Verbs(e).accept_begin(job_id, anyway))
    if job is None:
        return e.call(lambda: Verbs(e).accepted_already(job_id))
    project = Path(job["project"])
    with _held(e, job_id):
        refusal = guards.bring_in(job, "accept") or guards.accept_refusal(job)
        if refusal:
            raise Refused(refusal)
        signer = _signer(e, project, job, unsigned)
        # Recorded before any git changes anything: a crash from here on is
        # finished (or undone) at the next start (owl.verbs.recovery).
        e.call(
            lambda: Verbs(e).intend(
                job_id, "accept", {"merge": merge, "delete_branch": delete_branch}
            )
        )
        try:
            answer = _accept_git(e, project, job, merge, delete_branch, anyway, signer)
        except BaseException:
            _quietly(lambda: e.call(lambda: Verbs(e).verb_done(job_id)))  # nothing was changed
            raise
    if delete_branch:
        try:
            mergemod.delete_merged_branch(project, job)
        finally:
            _quietly(lambda: e.call(lambda: Verbs(e).verb_done(job_id)))
    return answer


UNSIGNED = "kept unsigned (--unsigned)"


def _signer(e: Any, project: Path, job: dict, unsigned: bool) -> signing.Signer | str | None:
    """How the Job's commits will be signed; UNSIGNED when the repository signs
    but the person said not to; None when it does not sign. Refused (nothing
    changed) when its signing settings cannot be trusted or make no sense."""
    worktree = Path(job["worktree"]) if job.get("worktree") else None
    owls = [str(e.paths.worktrees)]
    if worktree is not None:
        owls += [str(worktree), str(jobstore.store_path(Path(os.path.realpath(worktree))))]
    try:
        found = signing.signer(project, owls, job["id"])
    except Refused:
        if unsigned:
            return UNSIGNED  # nothing of those settings runs
        raise
    if found is not None and unsigned:
        return UNSIGNED
    return found


def _accept_git(
    e: Any,
    project: Path,
    job: dict,
    merge: bool,
    delete_branch: bool,
    anyway: bool = False,
    signer: signing.Signer | str | None = None,
) -> dict:
    from owl.review import merge as mergemod

    job_id = job["id"]
    signs = signer if isinstance(signer, signing.Signer) else None
    if signs is not None:  # what would refuse, refused before any commit is signed
        if merge:
            mergemod.prepare(project, job)
        elif delete_branch:
            mergemod.require_merged(project, job)
    words = None if isinstance(signer, signing.Signer) else signer  # what to say, unsigned
    signed = _sign(e, project, job, signs) if signs is not None else words
    merged = _merge(e, project, job, signs) if merge else None
    if delete_branch:
        mergemod.require_merged(project, job)  # refuses before anything changes
    worktree = Path(job["worktree"]) if job["worktree"] else None
    e.call(lambda: Verbs(e).verb_step(job_id, "removing"))
    try:
        workspace.remove(project, worktree)
    except (workspace.WorkspaceError, OSError) as err:
        raise Refused(
            f"cannot accept job {job_id}: its worktree could not be removed ({err})"
        ) from None
    past = job["state"] if anyway else None
    return e.call(lambda: Verbs(e).accept_commit(job_id, merged, delete_branch, past, signed))


def _sign(e: Any, project: Path, job: dict, signer: signing.Signer) -> str | None:
    """Sign the Job's commits its base does not hold; what to say of it."""
    from owl.review import merge as mergemod

    keep = [job["base"]] if job.get("base") else []
    base = mergemod.base_branch_of(project, job)
    if base is not None:
        keep.append(f"refs/heads/{base}")
    worktree = Path(job["worktree"]) if job.get("worktree") else None
    store = jobstore.store_path(Path(os.path.realpath(worktree))) if worktree else None
    before = outside.take(project)
    try:
        done = resign.resign(project, job["id"], job["branch"], keep, signer, store)
    finally:
        moved = outside.moves(before, outside.take(project))
        e.call(lambda: e.own_ref_moves(project, moved))
    said = []
    if done.signed:
        said.append(f"signed {_commits(done.signed)} with {signer.words()}")
    if done.shared:
        said.append(
            f"{_commits(done.shared)} another branch or tag holds too left as "
            + ("it was" if done.shared == 1 else "they were")
        )
    return "; ".join(said) or None


def _commits(n: int) -> str:
    return f"{n} commit{'s' if n != 1 else ''}"


def _merge(e: Any, project: Path, job: dict, signer: signing.Signer | None = None) -> str:
    """Merge the Job's branch (looked at afresh: signing may have taken a
    while); live Runs in the project take the refs Owl moved as their starting
    point, so no agent is said to have moved them."""
    from owl.review import merge as mergemod

    before = outside.take(project)
    try:
        return mergemod.merge(project, job, signer)[1]
    finally:
        moved = outside.moves(before, outside.take(project))
        e.call(lambda: e.own_ref_moves(project, moved))


def verify(engine: Any, job_id: int, checks_from: str | None = None) -> dict:
    """`owl jobs verify`: the Job's checks, as the commit it started from
    declares them (an agent can move the base branch), run again; with
    `checks_from`, as another commit the person names declares them (a
    `.owl.toml` they fixed on main after the Job was blocked by it)."""
    e = engine
    job = e.call(lambda: Verbs(e).verify_begin(job_id))
    with _held(e, job_id):
        project = Path(job["project"])
        ref = checks_from or job["base"] or "HEAD"
        try:
            commit = _commit_of(project, ref)
            settings = projectmod.load(project, commit)
        except (projectmod.ProjectError, workspace.WorkspaceError, OSError) as err:
            raise Refused(str(err)) from None
        where = source_words(commit, checks_from)
        if not settings.checks:
            raise Refused(
                f"{job['project']} declares no checks ([[checks]] in the .owl.toml of {where})"
            )
        return e.call(lambda: Verbs(e).verify_commit(job_id, settings.checks, commit, where))


def source_words(commit: str, named: str | None) -> str:
    """Which .owl.toml's checks: "a1b2c3d (the commit the Job started from)"."""
    short = commit[:7]
    if named is None:
        return f"{short} (the commit the Job started from)"
    return f"{short} ({named})" if not commit.startswith(named) else short


def _commit_of(project: Path, ref: str) -> str:
    """The commit `ref` names in `project`, or Refused in one line."""
    if not ref or ref.startswith("-") or any(c in ref for c in "\0\n"):
        raise Refused(f"not a commit: {ref!r}")
    proc = workspace.git(
        project, "rev-parse", "--verify", "-q", "--end-of-options", f"{ref}^{{commit}}", check=False
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise Refused(f"--checks-from {ref}: no such commit in {project}")
    return proc.stdout.strip()


def start(engine: Any) -> dict:
    """`owl start`: the settings of the projects with live Runs are read here
    first (git), so the scheduler never takes a cap it does not know yet for 0
    and refuses; then the engine starts the head of the queue."""
    e = engine
    for project in e.call(e.unknown_settings):
        value = projectmod.read(Path(project))
        e.call(lambda p=project, v=value: e.learn_settings(p, v))
    return finish(e.call(Verbs(e).start_now))
