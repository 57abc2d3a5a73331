"""Finishing, or undoing, a drop or accept that a crash cut short.

`owl jobs drop` and `owl jobs accept` change the store and git in several
steps (a Job recorded cancelled, its branch kept and deleted, its worktree
removed; a branch merged, the worktree removed, the Job recorded done, the
branch deleted). A daemon killed between two of them would leave the Job
saying one thing and git another. So each verb records its intent in the
store before its first git change (`Store.begin_verb`) and deletes it once
all is done, and crash recovery (`owl.daemon.crash_recovery.recover`, run by the
watchdog when the daemon dies and by the next start) does what is left:

- a drop: the Job is cancelled already, so its workspace goes as a drop
  removes it (`guards.drop_workspace`, which keeps the branch's tip under
  refs/owl/dropped/ before the branch is deleted, and may be done twice);
- an accept with `--merge`: a merge git left half way in a checkout (its
  MERGE_HEAD is the Job's branch) is aborted; if the branch is in its base
  branch the merge completed, and the accept is finished (the worktree
  removed, the Job done, the branch deleted when asked); if not, nothing was
  merged and the Job stays in review, its reason saying so (its branch may
  hold the signed copies of its commits by then: the same trees, and the
  next accept signs what it finds);
- an accept without it is finished, since the person asked for it;
- a worktree whose removal had begun is removed even if it now looks
  changed (half its files gone): it was found clean before.

Runs only while no live Run of this home exists (recovery holds the
daemon lock, after every leftover process was killed).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from owl.errors import Refused
from owl.git import guards, workspace
from owl.git.workspace import WorkspaceError
from owl.rules import jobtable

log = logging.getLogger("owl.recovery")

STOPPED = "the daemon stopped while this job was being accepted"


def finish(store: Any) -> list[int]:
    """Finish or undo every verb the store says was under way; returns their Jobs' ids."""
    ids = []
    for intent in store.verbs_under_way():
        job_id = intent["job_id"]
        job = store.job(job_id)
        try:
            if job is not None:
                said = _one(store, job, intent)
                log.warning("job %s: %s", job_id, said)
        except Exception as e:  # noqa: BLE001 - one Job's trouble never stops a start
            log.warning(
                "job %s: the %s a crash cut short could not be finished: %s",
                job_id,
                intent["verb"],
                e,
            )
        store.end_verb(job_id)
        ids.append(job_id)
    return ids


def _one(store: Any, job: dict, intent: dict) -> str:
    project = Path(job["project"])
    gone = workspace.project_problem(project)
    if gone:
        return f"the {intent['verb']} a crash cut short is left as it is: {gone}"
    if intent["verb"] == "drop":
        return _drop(store, job)
    if intent["verb"] == "accept":
        return _accept(store, job, intent["args"], intent.get("step"))
    return f"an unknown verb {intent['verb']!r} was under way; nothing done"


def _drop(store: Any, job: dict) -> str:
    if job["state"] != "cancelled":
        return "a drop was begun but not recorded; the job is left as it is"
    said = guards.drop_workspace(job)
    store.set_job(job["id"], reason=f"dropped{said}")
    return f"the drop a crash cut short was finished{said}"


def _accept(store: Any, job: dict, args: dict, step: str | None) -> str:
    from owl.review import merge as mergemod

    project = Path(job["project"])
    delete = bool(args.get("delete_branch"))
    if job["state"] == "done":
        if delete:
            mergemod.delete_merged_branch(project, job)
        return "the accept a crash cut short was finished" + (
            f"; branch {job['branch']} deleted" if delete else ""
        )
    if job["state"] != "review":
        return f"an accept was under way for a job now {job['state']}; nothing done"
    if args.get("merge"):
        aborted = _abort_half_merge(project, job)
        base = mergemod.base_branch_of(project, job)
        merged = (
            base is not None
            and workspace.git(
                project,
                "merge-base",
                "--is-ancestor",
                f"refs/heads/{job['branch']}",
                f"refs/heads/{base}",
                check=False,
            ).returncode
            == 0
        )
        if not merged:
            reason = (
                f"{STOPPED}; nothing was merged{aborted}: run owl jobs accept "
                f"{job['id']} --merge again"
            )
            store.set_job(job["id"], reason=reason)
            return reason
    worktree = Path(job["worktree"]) if job.get("worktree") else None
    try:
        workspace.remove(project, worktree, force=step == "removing")
    except (WorkspaceError, Refused, OSError) as e:
        reason = f"{STOPPED}; its worktree stays ({e}): accept it again"
        store.set_job(job["id"], reason=reason)
        return reason
    if jobtable.allows(jobtable.Event.ACCEPT, job["state"]):
        store.apply(job["id"], jobtable.Event.ACCEPT, worktree=None)
    if delete:
        mergemod.delete_merged_branch(project, job)
    return "the accept a crash cut short was finished" + (
        f"; branch {job['branch']} deleted" if delete else ""
    )


def _abort_half_merge(project: Path, job: dict) -> str:
    """Abort a merge of the Job's branch that git left under way in a checkout of
    `project`; the words to say it ("" when there was none)."""
    tip = workspace.branch_tip(project, job["branch"])
    out = workspace.git(project, "worktree", "list", "--porcelain", check=False).stdout
    said = ""
    for line in out.splitlines():
        if not line.startswith("worktree "):
            continue
        tree = Path(line[len("worktree ") :])
        head = workspace.git(tree, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False)
        if tip is not None and head.returncode == 0 and head.stdout.strip() == tip:
            workspace.git(tree, "merge", "--abort", check=False)
            said = f" (the merge git had begun in {tree} was undone)"
    return said
