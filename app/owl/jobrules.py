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

    agent exited non-zero, Report.limit      -> interrupted, no attempt spent;
                                                the agent waits until the reset
    agent exited non-zero, Report.service_error -> interrupted, no attempt spent;
                                                the agent waits for a backoff
    anything else                            -> as lifecycle said (failed spends
                                                an attempt, interrupted does not)
    succeeded, or failed for its own reasons -> the agent's backoff starts over

The wait is per agent (`Wait`): no Run of that agent starts before `until`;
Jobs of other agents go on. `until` is the reset moment the agent gave (its
`resetsAt`, else the words it printed, see `agents.resets`), else a backoff of
5 minutes that doubles with each wait in a row, at most 1 hour. A reset
moment already past is no reset moment: the backoff applies.

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

from dataclasses import dataclass, field
from datetime import datetime, tzinfo

BACKOFF_FIRST = 300.0
BACKOFF_MAX = 3600.0

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
    limit: str | None = None           # a kind of LIMIT_WORDS, when the agent met one
    resets_at: float | None = None     # epoch second the agent says it resets
    service_error: str | None = None   # "HTTP 529 overloaded", "connection error"
    resume_failed: str | None = None   # why --resume could not carry the conversation on
    usage: dict | None = None          # the result event's duration, turns, tokens, cost
    last_message: str | None = None    # the agent's final message


@dataclass(frozen=True)
class Wait:
    """An agent may not start before `until` (epoch seconds)."""

    agent: str
    kind: str               # a LIMIT_WORDS key, or "service"
    until: float
    reason: str
    strikes: int = 0        # backoffs in a row, doubling the next one


@dataclass(frozen=True)
class Verdict:
    outcome: str                    # succeeded | failed | interrupted
    reason: str | None
    wait: Wait | None = None        # the agent waits from now on
    clear: bool = False             # the agent worked: its backoff starts over

    @property
    def spends_attempt(self) -> bool:
        return self.outcome == "failed"


def backoff(strikes: int) -> float:
    """5 min, 10, 20, 40, then 1 h: the wait after `strikes` waits in a row."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * (2 ** max(0, min(strikes, 16))))


def agent_label(agent: str) -> str:
    return "Claude" if agent == "claude" else agent


def at_words(until: float, now: float, tz: tzinfo | None) -> str:
    """'at 08:10', or 'on Jul 15 at 00:00' when it is more than a day away."""
    moment = datetime.fromtimestamp(until, tz)
    if until - now < 86400:
        return f"at {moment:%H:%M}"
    return f"on {moment:%b} {moment.day} at {moment:%H:%M}"


def judge(*, agent: str, outcome: str, ended_by: str | None, exit_code: int | None,
          reason: str | None, report: Report | None, strikes: int, now: float,
          tz: tzinfo | None = None) -> Verdict:
    """What the end of a Run of `agent` means (see the module docstring).

    `strikes` is how many backoffs in a row the agent has waited already."""
    rep = report or Report()
    own_exit = ended_by == "exit" and exit_code not in (None, 0)
    if outcome in ("failed", "interrupted") and (own_exit or outcome == "interrupted") \
            and rep.limit:
        return _limited(agent, rep, strikes, now, tz)
    if outcome == "failed" and own_exit and rep.resume_failed:
        why = (f"the conversation could not be resumed ({rep.resume_failed}); "
               "the next Run starts afresh")
        return Verdict("interrupted", why)
    if outcome == "failed" and own_exit and rep.service_error:
        until = now + backoff(strikes)
        why = (f"{agent_label(agent)}'s model service failed ({rep.service_error}); "
               f"trying again {at_words(until, now, tz)}")
        return Verdict("interrupted", why, Wait(agent, "service", until, why, strikes + 1))
    return Verdict(outcome, reason, clear=outcome != "interrupted")


def _limited(agent: str, rep: Report, strikes: int, now: float, tz: tzinfo | None) -> Verdict:
    kind = rep.limit or "usage"
    words = LIMIT_WORDS.get(kind, kind.replace("_", " ") + " limit")
    name = agent_label(agent)
    if rep.resets_at is not None and rep.resets_at > now:
        until = rep.resets_at
        why = f"{name}'s {words}; resets {at_words(until, now, tz)}"
        return Verdict("interrupted", why, Wait(agent, kind, until, why, strikes))
    until = now + backoff(strikes)
    why = f"{name}'s {words}; no reset time given, trying again {at_words(until, now, tz)}"
    return Verdict("interrupted", why, Wait(agent, kind, until, why, strikes + 1))


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
    check_note: str | None = None      # the failed check and its output tail


@dataclass(frozen=True)
class Plan:
    resume: str | None                 # the session id to carry on, or None: fresh
    message: str | None                # what the resumed conversation is told
    replies: tuple[str, ...] = field(default=())


def plan(prior: Prior | None, replies: list[str] | tuple[str, ...], *, can_resume: bool,
         handoff: str | None = None) -> Plan:
    """How the next Run of a Job begins.

    `replies` are the person's words not yet given to a Run; `can_resume` is
    whether the driver and the config allow carrying a conversation on."""
    replies = tuple(r for r in replies if r.strip())
    if not can_resume or prior is None or not prior.session_id:
        return Plan(None, None, replies)
    return Plan(prior.session_id, resume_message(prior, replies, handoff), replies)


def resume_message(prior: Prior, replies: tuple[str, ...], handoff: str | None) -> str:
    """The one message a resumed conversation gets: what happened, then the handoff."""
    if replies:
        said = "\n\n".join(replies)
        head = f"The person looked at your work and replied:\n\n{said}\n\nCarry on accordingly."
    elif prior.outcome == "interrupted":
        why = prior.reason or "it was stopped"
        if "limit" in why or "model service" in why:
            head = (f"Your run was stopped by {why.split(';')[0]}. That wait is over: carry on "
                    "where you stopped.")
        else:
            who = ("The person came back to the machine and your run was stopped"
                   if "grace window" in why or "paused" in why else "Your run was stopped")
            head = (f"{who} ({why}). Any tool call that was running was ended, so check its "
                    "effect before you rely on it, then carry on where you stopped.")
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
