"""What a Run's end means for its Job, and how the Job's next Run begins.

Theory of operation
-------------------

`lifecycle` says how a Run ended as a process tree: succeeded, failed (the
agent exited non-zero, a check failed, a timeout) or interrupted (the person
came back, `owl stop`, the daemon stopped). That is not yet what it means for
the Job. An agent that exits 1 because the account hit its 5-hour usage limit,
or because the model's service answered 529, did nothing wrong: spending an
attempt on it would exhaust an overnight queue within seconds, every Job
failing the same way at once. So the driver reads the agent's output and
reports facts (`Report`: a limit and when it resets, a service error, the
conversation's session id, what the Run cost), and `judge` decides:

    agent exited non-zero (or exited 0 but said it gave up, Report.gave_up:
    aider does after its own retries), and
    Report.limit                             -> interrupted, no attempt spent;
                                                the agent waits until the reset
    ... and Report.setup_problem             -> interrupted, no attempt spent;
                                                the Job is blocked with the reason
                                                and a hint (a missing variable, a
                                                port out of reach, no program): a
                                                person's config fixes it, not a retry
    ... and bwrap failed at its own start    -> interrupted, no attempt spent; the
        (`sandbox_failed`)                      same failure again blocks the Job
    ... and Report.service_error             -> interrupted, no attempt spent;
                                                the agent waits for a backoff
    exited 0 but Report.gave_up, neither     -> failed, saying on what
    anything else                            -> as lifecycle said (failed spends
                                                an attempt, interrupted does not)
    succeeded, or failed for its own reasons -> the agent's backoff starts over

The wait is per agent (`Wait`): no Run of that agent starts before `until`;
Jobs of other agents go on. `until` is the reset moment the agent gave (its
`resetsAt`, else the words it printed, see `agents.resets`), else a backoff of
5 minutes that doubles with each wait in a row, at most 1 hour. A reset
moment already past, or further off than `max_wait` (`limits.max_wait`, 8
days by default: no real limit lasts longer than a week), or one no calendar
holds ("try again in 3000000 days", `resetsAt` 1e18) is no reset moment: the
backoff applies, and the reason says what the agent gave.

The next Run (`plan`) carries the conversation on where the agent can
(claude's `--resume` with the last session id, in the same worktree) and is
told in one short message what happened in between: the person's reply; the
person came back and the Run was stopped; the limit reset; which check failed.
Where it cannot, it starts fresh with the handoff (`agents.handoff`). A reply
always reaches the next Run, resumed or not.

Pure: no clock (`now` is given, epoch seconds, and the zone to show times
in), no store, no processes, so every rule is table-tested.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from datetime import tzinfo

from owl.rules import timefmt
from owl.rules.budget import Reading, real

BACKOFF_FIRST = 300.0
BACKOFF_MAX = 3600.0
MAX_WAIT = 8 * 86400.0  # the longest wait an agent's own words may set (limits.max_wait)

# How a Run that ended its turn at its service's limit checkpoint is said (and
# known again when the next Run is told to carry on with the work it listed).
AT_CHECKPOINT = "stopped at the limit"

# How each kind of limit is named to a person.
LIMIT_WORDS = {
    "five_hour": "5-hour usage limit",
    "seven_day": "weekly usage limit",
    "seven_day_opus": "weekly Opus limit",
    "seven_day_sonnet": "weekly Sonnet limit",
    "overage": "extra usage limit",
    "rate_limit": "API rate limit (HTTP 429)",
    "usage": "usage limit",
}


@dataclass(frozen=True)
class Report:
    """What the driver read in a Run's output: facts, no decisions."""

    session_id: str | None = None
    limit: str | None = None  # a kind of LIMIT_WORDS, when the agent met one
    resets_at: float | None = None  # epoch second the agent says it resets
    service_error: str | None = None  # "HTTP 529 overloaded", "connection error"
    resume_failed: str | None = None  # why --resume could not carry the conversation on
    usage: dict[str, Any] | None = None  # the result event's duration, turns, tokens, cost
    last_message: str | None = None  # the agent's final message
    reset_said: str | None = None  # what the reset moment was read from (cut short)
    # the error the agent gave up on although it exited 0 (aider ends a
    # --message run so after its retries), cut short: it did not succeed
    gave_up: str | None = None
    # session ids the stream announced but that were not taken: not the shape
    # of one, or a different one after the first (kept for the log, never obeyed)
    sessions_ignored: tuple[str, ...] = ()
    # the usage windows the agent reported (a subscription's share used, and
    # when each resets), as read: `budget.insane` says which to believe
    windows: tuple[Reading, ...] = ()
    # the agent could not start for a reason of its setup (owl.agents.setup):
    # "missing environment variable X", "could not connect to 127.0.0.1:P",
    # "PROGRAM was not found"
    setup_problem: str | None = None
    # the agent ended its turn because its service told it the limit was near
    # (Claude Code's checkpoint: it exits 0 with the work listed, not done):
    # with `limit` and `resets_at`, a wait like a limit, no checks run
    at_checkpoint: bool = False


@dataclass(frozen=True)
class Wait:
    """An agent may not start before `until` (epoch seconds)."""

    agent: str
    kind: str  # a LIMIT_WORDS key, or "service"
    until: float
    reason: str
    strikes: int = 0  # backoffs in a row, doubling the next one


@dataclass(frozen=True)
class Verdict:
    outcome: str  # succeeded | failed | interrupted
    reason: str | None
    wait: Wait | None = None  # the agent waits from now on
    clear: bool = False  # the agent worked: its backoff starts over
    thaw_lost: bool = False  # the agent lost its turn at a thaw: carried on at once
    block: bool = False  # the Job is blocked with `reason` (a setup problem), nothing spent

    @property
    def spends_attempt(self) -> bool:
        return self.outcome == "failed"


def backoff(strikes: int) -> float:
    """5 min, 10, 20, 40, then 1 h: the wait after `strikes` waits in a row."""
    return float(min(BACKOFF_MAX, BACKOFF_FIRST * (2 ** max(0, min(strikes, 16)))))


def agent_label(agent: str) -> str:
    return "Claude" if agent == "claude" else agent


def at_words(until: float, now: float, tz: tzinfo | None) -> str:
    """'at 08:10' today, 'on Jul 15 at 00:00' on another day, 'on Jul 15
    2027 at 00:00' past six days: the day said by the rule `owl status`
    shows moments by (`timefmt.ahead`), so a wait past midnight reads the
    same in a Run's reason and on the status's lines. Never raises: a moment
    no calendar holds is 'at a moment that cannot be shown'."""
    shown = timefmt.ahead(real(until), now, tz)
    if shown == "?":
        return f"at {timefmt.UNSHOWN}"
    day, _, hm = shown.rpartition(" ")
    return f"on {day} at {hm}" if day else f"at {hm}"


def usable_reset(resets_at: float | None, now: float, max_wait: float) -> bool:
    """Whether a reset moment an agent gave may set its wait: to come, within
    `max_wait`, a real number."""
    r = real(resets_at)
    return r is not None and now < r <= now + max_wait


def judge(
    *,
    agent: str,
    outcome: str,
    ended_by: str | None,
    exit_code: int | None,
    reason: str | None,
    report: Report | None,
    strikes: int,
    now: float,
    tz: tzinfo | None = None,
    max_wait: float = MAX_WAIT,
    freeze: tuple[float, float | None] | None = None,
) -> Verdict:
    """What the end of a Run of `agent` means (see the module docstring).

    `strikes` is how many backoffs in a row the agent has waited already;
    `max_wait` the longest wait a reset moment it gave may set; `freeze` the
    Run's last freeze, (frozen, thawed) in epoch seconds."""
    rep = report or Report()
    # an agent that says it gave up failed by its own account, whatever its exit code
    own_exit = ended_by == "exit" and (exit_code not in (None, 0) or bool(rep.gave_up))
    if outcome == "succeeded" and own_exit and rep.gave_up:
        outcome, reason = "failed", f"{agent_label(agent)} gave up: {rep.gave_up}"
    if outcome == "succeeded" and ended_by == "exit" and rep.at_checkpoint and rep.limit:
        # ended its turn at its service's checkpoint: the work is listed, not done
        return _limited(agent, rep, strikes, now, tz, max_wait, checkpoint=True)
    if (
        outcome in ("failed", "interrupted")
        and (own_exit or outcome == "interrupted")
        and rep.limit
    ):
        return _limited(agent, rep, strikes, now, tz, max_wait)
    if outcome == "failed" and own_exit and rep.resume_failed:
        why = (
            f"the conversation could not be resumed ({rep.resume_failed}); "
            "the next Run starts afresh"
        )
        return Verdict("interrupted", why)
    if outcome == "failed" and own_exit and rep.setup_problem:
        why = (
            f"{agent_label(agent)} could not start: {rep.setup_problem}; "
            f"{setup_hint(agent, rep.setup_problem)}"
        )
        return Verdict("interrupted", why, block=True)
    lost = thaw_lost(freeze, now) if outcome == "failed" and own_exit else None
    if lost is not None and rep.service_error:
        why = (
            f"{agent_label(agent)} lost its turn when its Run was thawed after a freeze "
            f"of {lost:.0f} s ({rep.service_error}): the same idle spell, carried on at once"
        )
        return Verdict("interrupted", why, thaw_lost=True)
    if outcome == "failed" and own_exit and rep.service_error:
        until = now + backoff(strikes)
        why = (
            f"{agent_label(agent)}'s model service failed ({rep.service_error}); "
            f"trying again {at_words(until, now, tz)}"
        )
        return Verdict("interrupted", why, Wait(agent, "service", until, why, strikes + 1))
    return Verdict(outcome, reason, clear=outcome != "interrupted")


THAW_SPAN = 600.0  # a service error this soon after a thaw is the freeze's doing


def thaw_lost(freeze: tuple[float, float | None] | None, now: float) -> float | None:
    """How long the Run was frozen, when it was thawed at most `THAW_SPAN`
    seconds before `now`: an agent whose stream watchdog fired at the thaw
    (a connection the freeze left stale, "stream disconnected", "went to sleep
    mid-response") and that gave up on it lost its turn to the freeze, not to
    its model's service. None otherwise."""
    if freeze is None:
        return None
    frozen, thawed = real(freeze[0]), real(freeze[1])
    if frozen is None or thawed is None or not frozen <= thawed <= now:
        return None
    return thawed - frozen if now - thawed <= THAW_SPAN else None


SANDBOX_FAILED = "the sandbox could not be set up"


def sandbox_failed(words: str, last_reason: str | None) -> Verdict:
    """A contained start that failed at bwrap's own set-up, before the agent
    ran (bwrap's `words`): Owl's failure, not the agent's, so no attempt is
    spent. Once is a moment of the host's (a folder gone as it started); the
    same failure on the Job's Run before (`last_reason`) blocks the Job, as a
    failing setup does: a retry will not mend the settings or the machine."""
    why = f"{SANDBOX_FAILED}: {words}"
    if last_reason is not None and last_reason.startswith(why):
        return Verdict(
            "interrupted",
            f"{why}; the same as its Run before: fix the [sandbox] settings or the "
            "machine (owl config check), then owl jobs extend",
            block=True,
        )
    return Verdict("interrupted", why)


def setup_hint(agent: str, problem: str) -> str:
    """What fixes a setup problem (`Report.setup_problem`), in the config's words."""
    if problem.startswith("missing environment variable "):
        name = problem.removeprefix("missing environment variable ")
        return (
            f'pass it into the sandbox with sandbox.env_keep = ["{name}"] (a contained Run '
            "drops variables whose names or values look secret), or set it where Owl runs; then "
            "owl jobs extend"
        )
    if problem.startswith("could not connect to 127.0.0.1:"):
        port = problem.rsplit(":", 1)[1]
        return (
            f"keep the port reachable from the Run with sandbox.host_ports = [{port}] and "
            "check its server runs; then owl jobs extend"
        )
    if problem.endswith(" was not found"):
        return f"install it, or check agents.{agent}.path or its command; then owl jobs extend"
    return "fix the agent's setup, then owl jobs extend"


def _limited(
    agent: str,
    rep: Report,
    strikes: int,
    now: float,
    tz: tzinfo | None,
    max_wait: float,
    checkpoint: bool = False,
) -> Verdict:
    kind = rep.limit or "usage"
    words = LIMIT_WORDS.get(kind, kind.replace("_", " ") + " limit")
    name = agent_label(agent)
    who = f"{name}'s {words}"
    if checkpoint:  # "Claude stopped at the limit (its 5-hour usage limit's checkpoint)"
        who = f"{name} {AT_CHECKPOINT} (its {words}'s checkpoint)"
    if rep.resets_at is not None and usable_reset(rep.resets_at, now, max_wait):
        until = real(rep.resets_at) or now
        why = f"{who}; resets {at_words(until, now, tz)}"
        return Verdict("interrupted", why, Wait(agent, kind, until, why, strikes))
    until = now + backoff(strikes)
    then = at_words(until, now, tz)
    r = real(rep.resets_at)
    past = r is not None and r <= now
    if not rep.reset_said and (rep.resets_at is None or past):
        why = f"{who}; no reset time given, trying again {then}"
    else:
        why = f"{who}; the reset it gave, {unusable_words(rep, now, max_wait)}: trying again {then}"
    return Verdict("interrupted", why, Wait(agent, kind, until, why, strikes + 1))


def unusable_words(rep: Report, now: float, max_wait: float) -> str:
    """What the agent said of its reset and why it was not used: '"try again in
    3000000 days", is more than 8 days away'."""
    said = rep.reset_said or (f"{rep.resets_at!r}" if rep.resets_at is not None else "?")
    said = f'"{" ".join(said.split())}"'
    r = real(rep.resets_at)
    if r is None:
        return f"{said}, is not a time"
    if r <= now:
        return f"{said}, is already past"
    return f"{said}, is more than {_days(max_wait)} away"


def _days(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        n = int(seconds // 86400)
        return f"{n} day{'s' if n != 1 else ''}"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    return f"{seconds:g}s"


def bounded(wait: Wait, now: float, max_wait: float) -> Wait:
    """A stored wait no longer than `max_wait` from `now` (one an older Owl set
    from an agent's words, "until 2054", ends within the bound)."""
    until = real(wait.until)
    if until is not None and until <= now + max_wait:
        return wait
    return replace(wait, until=now + max_wait)


def waiting(wait: Wait | None, now: float) -> Wait | None:
    """The wait still in force at `now`, or None."""
    return wait if wait is not None and wait.until > now else None


# ------------------------------------------------------------ the next Run


@dataclass(frozen=True)
class Prior:
    """The Job's previous Run, as far as the next one cares."""

    outcome: str | None
    reason: str | None
    session_id: str | None = None
    check_note: str | None = None  # the failed check and its output tail
    carried_by: str | None = None  # other agents that worked on the Job since


@dataclass(frozen=True)
class Plan:
    resume: str | None  # the session id to carry on, or None: fresh
    message: str | None  # what the resumed conversation is told
    replies: tuple[str, ...] = field(default=())


def plan(
    prior: Prior | None,
    replies: list[str] | tuple[str, ...],
    *,
    can_resume: bool,
    handoff: str | None = None,
) -> Plan:
    """How the next Run of a Job begins.

    `replies` are the person's words not yet given to a Run; `can_resume` is
    whether the driver and the config allow carrying a conversation on."""
    replies = tuple(r for r in replies if r.strip())
    if not can_resume or prior is None or not prior.session_id:
        return Plan(None, None, replies)
    return Plan(prior.session_id, resume_message(prior, replies, handoff), replies)


def resume_message(prior: Prior, replies: tuple[str, ...], handoff: str | None) -> str:
    """The one message a resumed conversation gets: what happened, then the handoff."""
    if prior.carried_by and not replies:
        head = (
            f"While you waited, {prior.carried_by} carried the task on in this worktree. "
            "Read its commits (git log) and the handoff before you go on, then carry on "
            "from where the work now stands."
        )
    elif replies:
        said = "\n\n".join(replies)
        head = f"The person looked at your work and replied:\n\n{said}\n\nCarry on accordingly."
    elif prior.outcome == "interrupted":
        why = prior.reason or "it was stopped"
        if AT_CHECKPOINT in why:
            head = (
                "You stopped at your usage limit's checkpoint and listed the work that "
                "remained. The limit has reset: carry on with that work now, from where "
                "you stopped."
            )
        elif "limit" in why or "model service" in why:
            head = (
                f"Your run was stopped by {why.split(';')[0]}. That wait is over: carry on "
                "where you stopped."
            )
        else:
            who = (
                "The person came back to the machine and your run was stopped"
                if "grace window" in why or "paused" in why
                else "Your run was stopped"
            )
            head = (
                f"{who} ({why}). Any tool call that was running was ended, so check its "
                "effect before you rely on it, then carry on where you stopped."
            )
    elif prior.outcome == "failed":
        head = f"Your previous run failed: {prior.reason or 'no reason was given'}."
        if prior.check_note:
            head += "\n\n" + prior.check_note.strip()
        head += "\n\nFix that and carry on."
    else:
        head = "Carry on with the task."
    if handoff:
        head += f"\n\nYour handoff (.owl/HANDOFF.md) says:\n{handoff.strip()}"
    return head
