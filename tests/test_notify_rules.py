"""The notify room's pure parts with a fake clock: what goes out when, the reply
words, the briefing, masking and the [notify] section."""

from __future__ import annotations

import pytest

from owl.notify import events as ev
from owl.notify import words
from owl.notify.briefing import Spell, summary
from owl.notify.route import Router, Rules, in_quiet
from owl.settings import config as configmod
from owl.settings.notifyconf import mask, parse_quiet

T0 = 1_800_000_000.0
NOON = 12 * 60
NIGHT = 23 * 60 + 30


def ended(job: int, state: str, **kw) -> ev.RunEnded:
    return ev.RunEnded(job_id=job, run_id=job * 10, state=state, title=f"job {job} title", **kw)


def at(event: ev.Event, t: float) -> ev.Stamp:
    return ev.Stamp(event, t)


def away_router(**rules) -> Router:
    r = Router(Rules(**rules))
    r.presence(True, T0)
    return r


def test_present_sends_nothing_and_the_state_is_not_sent_later() -> None:
    r = Router(Rules(batch=0))
    r.event(at(ended(1, "review"), T0))
    assert r.tick(T0 + 1, NOON) == []
    r.presence(True, T0 + 2)
    r.event(at(ended(1, "review"), T0 + 3))  # seen again: no change of state
    assert r.tick(T0 + 4, NOON) == []


def test_away_one_message_per_job_per_change_of_state() -> None:
    r = away_router(batch=0)
    r.event(
        at(
            ended(1, "review", cost=0.25, last_message="Done.\nmore", checks=(("unit", True),)),
            T0 + 1,
        )
    )
    [m] = r.tick(T0 + 1, NOON)
    assert m.title == "Owl: Job 1 ready for review"
    assert "“Done.”" in m.body and "unit passed" in m.body and "$0.25" in m.body
    r.event(at(ended(1, "review"), T0 + 2))
    assert r.tick(T0 + 2, NOON) == []
    r.event(at(ended(1, "pending"), T0 + 3))  # a reply sent it back
    r.event(at(ended(1, "review"), T0 + 4))
    assert [m.title for m in r.tick(T0 + 4, NOON)] == ["Owl: Job 1 ready for review"]


def test_every_return_is_told_after_a_reply_a_retry_or_a_verify() -> None:
    """A reply moves the Job out of review with no Run's end said: the Run that
    brings it back is a change all the same, and so is each later one."""
    r = away_router(batch=0)
    for run, state in ((10, "review"), (11, "review"), (12, "blocked"), (13, "blocked")):
        r.event(at(ev.RunEnded(job_id=1, run_id=run, state=state, title="t"), T0 + run))
        [m] = r.tick(T0 + run, NOON)
        assert m.title.startswith("Owl: Job 1 "), (run, m)
    # `owl jobs verify` sends it to review (no Run: run 0), then seen again: once
    r.event(at(ev.RunEnded(job_id=1, run_id=0, state="review", title="t"), T0 + 20))
    assert [m.title for m in r.tick(T0 + 20, NOON)] == ["Owl: Job 1 ready for review"]
    r.event(at(ev.RunEnded(job_id=1, run_id=0, state="review", title="t"), T0 + 21))
    assert r.tick(T0 + 21, NOON) == []


def test_the_reply_hint_only_where_a_reply_channel_listens() -> None:
    for replies in (False, True):
        r = away_router(batch=0, replies=replies)
        r.event(at(ended(1, "review"), T0 + 1))
        r.event(at(ended(2, "blocked", reason="check unit failed"), T0 + 1))
        [m] = r.tick(T0 + 1, NOON)
        assert ("Reply '1 accept', '1 drop' or '1 <what to change>'." in m.body) is replies
        assert ("reply '2 <what to do>'" in m.body) is replies
        assert ("owl jobs reply 2 '<what to do>'" in m.body) is not replies


def test_a_command_agents_last_line_comes_from_its_log() -> None:
    """No final message (a command agent): the log's last line, read off the engine thread."""
    r = away_router(batch=0)
    stamp = at(ended(1, "review"), T0 + 1)
    stamp.extra["log_tail"] = "half a line\nworking\nwrote hello.txt and committed\n\n"
    r.event(stamp)
    stamp = at(ended(2, "exhausted", reason="the agent exited with code 3"), T0 + 1)
    stamp.extra["log_tail"] = "tried\nerror: \x1b[31mno network\n"
    r.event(stamp)
    [m] = r.tick(T0 + 1, NOON)
    assert "“wrote hello.txt and committed”" in m.body
    assert "The agent's last line: “error: \\x1b[31mno network”" in m.body


def test_a_burst_within_batch_is_one_digest() -> None:
    r = away_router(batch=60)
    r.event(at(ended(1, "review"), T0 + 10))
    r.event(at(ended(2, "blocked", reason="check unit failed"), T0 + 30))
    assert r.tick(T0 + 69, NOON) == []
    assert r.next_wake(T0 + 69) == T0 + 70
    [m] = r.tick(T0 + 70, NOON)
    assert m.title == "Owl: 2 things need you"
    assert "Job 1 ready for review" in m.body and "Why: check unit failed" in m.body
    assert r.tick(T0 + 200, NOON) == [] and r.next_wake(T0 + 200) is None


def test_quiet_hours_hold_all_but_the_urgent() -> None:
    r = away_router(batch=0, quiet=(23 * 60, 7 * 60), urgent=frozenset({"blocked"}))
    r.event(at(ended(1, "review"), T0))
    r.event(at(ended(2, "blocked", reason="why"), T0))
    [m] = r.tick(T0, NIGHT)
    assert [i.job_id for i in m.items] == [2]
    assert r.tick(T0 + 60, 3 * 60) == []  # still quiet at 03:00
    [m] = r.tick(T0 + 120, 7 * 60)  # 07:00: the rest goes, with what the night cost
    assert [i.job_id for i in m.items] == [1, None]
    assert m.items[-1].body == "2 Jobs ran"


def test_held_in_the_quiet_and_back_before_it_ends_is_dropped() -> None:
    r = away_router(batch=0, quiet=(23 * 60, 7 * 60))
    r.event(at(ended(1, "review"), T0))
    assert r.tick(T0, NIGHT) == []
    spell = r.presence(False, T0 + 100)
    assert spell is not None and r.tick(T0 + 200, NOON) == []


@pytest.mark.parametrize(
    "minute,quiet,inside",
    [
        (23 * 60, (23 * 60, 7 * 60), True),
        (6 * 60 + 59, (23 * 60, 7 * 60), True),
        (7 * 60, (23 * 60, 7 * 60), False),
        (NOON, (23 * 60, 7 * 60), False),
        (13 * 60, (12 * 60, 14 * 60), True),
        (14 * 60, (12 * 60, 14 * 60), False),
        (NOON, None, False),
        (NOON, (NOON, NOON), False),
    ],
)
def test_quiet_window(minute: int, quiet, inside: bool) -> None:
    assert in_quiet(minute, quiet) is inside


def test_limit_wait_told_only_when_longer_than_limit_after() -> None:
    r = away_router(batch=0, limit_after=3600)
    r.event(at(ev.LimitWait("claude", T0 + 600, "5-hour limit", T0), T0))
    assert r.tick(T0, NOON) == []
    r.event(
        ev.Stamp(ev.LimitWait("claude", T0 + 7200, "5-hour limit", T0), T0, {"until_hhmm": "08:10"})
    )
    [m] = r.tick(T0, NOON)
    assert m.title == "Owl: claude waits until 08:10"


def test_untouchable_and_disk_once() -> None:
    r = away_router(batch=0)
    for _ in range(2):
        r.event(at(ev.Untouchable(3, 30, 99, "sudo sleep", "it became root"), T0))
        r.event(at(ev.DiskFull("/x/owl.db", "database or disk is full"), T0))
    [m] = r.tick(T0, NOON)
    assert [i.kind for i in m.items] == ["untouchable", "disk"]


def test_agent_text_is_made_visible_and_cut() -> None:
    r = away_router(batch=0)
    r.event(at(ended(1, "review", last_message="\x1b]0;pwned\x07 " + "x" * 1000), T0))
    [m] = r.tick(T0, NOON)
    assert "\x1b" not in m.body and "\\x1b" in m.body
    assert max(len(line) for line in m.body.splitlines()) < 260


def test_the_briefing() -> None:
    r = away_router(batch=0)
    r.event(at(ended(12, "review", cost=0.5), T0 + 10))
    r.event(at(ended(14, "blocked", reason="check unit failed", cost=0.34), T0 + 20))
    r.event(at(ended(15, "pending"), T0 + 30))
    r.event(at(ev.LimitWait("claude", T0 + 9000, "limit", T0 + 40), T0 + 40))
    spell = r.presence(False, T0 + 2 * 3600 + 600)
    assert spell is not None and spell.newest_review() == 12
    text = summary(spell, T0 + 2 * 3600 + 600, hhmm=lambda t: "08:10")
    assert text == (
        "While you were away (2h 10m): 3 Runs · job 12 ready for review · "
        "job 14 blocked (check unit failed) · $0.84 · claude waits until 08:10"
    )


def test_nothing_happened_no_briefing() -> None:
    r = away_router()
    assert r.presence(False, T0 + 3600) is None
    assert summary(Spell(since=T0), T0 + 10) == ""


@pytest.mark.parametrize(
    "text,verb,job,rest",
    [
        ("12 also cover the empty case", "reply", 12, "also cover the empty case"),
        ("12 accept", "accept", 12, None),
        ("12 Drop", "drop", 12, None),
        ("job 12 accept", "accept", 12, None),
        ("#7: try again", "reply", 7, "try again"),
        ("pause", "pause", None, None),
        ("Resume", "resume", None, None),
        ("status", "status", None, None),
        ("hello", "help", None, None),
        ("", "help", None, None),
        ("12", "help", None, None),
        ("rm -rf / ; 3", "help", None, None),
    ],
)
def test_reply_words(text: str, verb: str, job, rest) -> None:
    cmd = words.parse(text)
    assert (cmd.verb, cmd.job_id, cmd.text) == (verb, job, rest)


def test_reply_to_a_message_about_a_job() -> None:
    about = words.job_of("Owl: Job 12 ready for review")
    assert about == 12
    assert words.parse("also the empty case", about) == words.Command(
        "reply", 12, "also the empty case"
    )
    assert words.parse("accept", about) == words.Command("accept", 12)
    assert words.ordinal(1) == "1st" and words.ordinal(2) == "2nd" and words.ordinal(11) == "11th"


@pytest.mark.parametrize(
    "url,shown",
    [
        ("ntfys://ntfy.sh/my-secret-topic", "ntfys://ntfy.sh/my…"),
        ("tgram://123456:ABCDEF/98765", "tgram://12…/98…"),
        ("mailto://user:pass@gmail.com", "mailto://…@gmail.com"),
        ("json://127.0.0.1:8080/hook?token=abc", "json://127.0.0.1:8080/ho…?…"),
    ],
)
def test_mask(url: str, shown: str) -> None:
    assert mask(url) == shown


def test_notify_section() -> None:
    cfg = configmod.from_dict(
        {
            "idle": {"after": "5m"},
            "notify": {
                "away": ["ntfys://ntfy.sh/secret-topic"],
                "quiet": "23:00-07:00",
                "urgent": ["blocked", "exhausted"],
                "reply": "ntfys://ntfy.sh/secret-topic",
            },
        }
    )
    n = cfg.notify
    assert n.quiet == parse_quiet("23:00-07:00") == (1380, 420) and n.away_after is None
    doc = configmod.effective_document(cfg)["notify"]
    assert doc["away"] == ["ntfys://ntfy.sh/se…"] and doc["reply"] == "ntfys://ntfy.sh/se…"
    assert doc["away_after"] == "5m" and doc["batch"] == "1m" and doc["limit_after"] == "1h"
    assert "secret" not in str(configmod.effective_document(cfg))


@pytest.mark.parametrize(
    "body,words_",
    [
        ({"away": "ntfys://ntfy.sh/x"}, "notify.away"),
        ({"away": ["nope"]}, "notify.away"),
        ({"quiet": "25:00-07:00"}, "notify.quiet"),
        ({"urgent": ["soon"]}, "unknown kind 'soon'"),
        ({"reply": "json://host.example/x"}, "notify.reply"),
        ({"batch": 60}, "notify.batch"),
        ({"colour": "red"}, "unknown key notify.colour"),
        ({"reply": "tgram://token-only"}, "CHAT_ID"),
    ],
)
def test_notify_section_errors(body: dict, words_: str) -> None:
    with pytest.raises(configmod.ConfigError) as e:
        configmod.from_dict({"notify": body}, "/home/me/config.toml")
    said = str(e.value)
    assert said.startswith("/home/me/config.toml: ") and words_ in said and "\n" not in said


def test_a_secret_url_is_masked_in_the_error() -> None:
    with pytest.raises(configmod.ConfigError) as e:
        configmod.from_dict({"notify": {"reply": "json://ntfy.sh/very-secret-topic"}})
    assert "very-secret" not in str(e.value)


def _listener(seen: set, handled: list, acks: list):
    from owl.notify.replies import NtfyListener

    def remember(channel: str, ident: str) -> bool:
        if (channel, ident) in seen:
            return False
        seen.add((channel, ident))
        return True

    lis = NtfyListener(
        "ntfy://127.0.0.1:9/topic",
        started_at=T0,
        remember=remember,
        handle=lambda m: handled.append(m.text) or "ok",
    )
    lis.answer = lambda msg, text: acks.append(text)  # type: ignore[method-assign]
    return lis


def _line(mid: str, text: str, t: float, **extra) -> bytes:
    import json

    return json.dumps(
        {"id": mid, "time": int(t), "event": "message", "topic": "topic", "message": text, **extra}
    ).encode()


def test_a_reply_is_acted_on_once_never_when_older_than_the_start_nor_owls_own() -> None:
    seen: set = set()
    handled: list = []
    acks: list = []
    lis = _listener(seen, handled, acks)
    lis._line(_line("a", "1 accept", T0 - 60))  # before the start
    lis._line(_line("b", "pause", T0 + 1))
    lis._line(_line("b", "pause", T0 + 1))  # the same id again
    lis._line(_line("c", "Job 1 ready", T0 + 2, title="Owl: Job 1 ready for review"))
    lis._line(_line("d", "job 1 queued", T0 + 2, tags=["owl"]))
    lis._line(b'{"event": "keepalive", "id": "e"}')
    lis._line(b"not json")
    assert handled == ["pause"] and acks == ["ok"]
    again = _listener(seen, handled, acks)  # a restart, the same store
    again._line(_line("b", "pause", T0 + 1))
    assert handled == ["pause"]


def test_replies_are_rate_limited_and_said_once() -> None:
    from owl.notify.replies import RATE_MOST, RateLimit

    handled: list = []
    acks: list = []
    lis = _listener(set(), handled, acks)
    for i in range(RATE_MOST + 3):
        lis._line(_line(f"m{i}", "status", T0 + 1))
    assert len(handled) == RATE_MOST
    assert sum("Too many replies" in a for a in acks) == 1
    r = RateLimit(most=2, per=60)
    assert [r.allow(t) for t in (0, 1, 2, 61, 62)] == [True, True, False, True, True]


def test_the_briefing_tops_the_menu_and_is_announced_once() -> None:
    from owl.tray.menu import build_menu
    from owl.tray.notices import Notices

    base = {"machine": {"idle": False}, "runs": [], "queue": [], "recent": [], "review": []}
    brief = {
        "text": "While you were away (2h 10m): 1 Run · job 12 ready for review",
        "review": 12,
        "id": T0,
        "back_at": T0,
        "age_s": 5.0,
    }
    status = dict(base, notify={"briefing": brief})
    first = build_menu(status)[0]
    assert first.label == brief["text"] and first.action is not None
    assert first.action.kind == "review" and first.action.kwargs == {"job_id": 12}
    assert not build_menu(dict(base, notify={"briefing": dict(brief, age_s=7200)}))[
        0
    ].label.startswith("While")
    notices = Notices()
    assert notices.update(base) == []  # primed: what was there is not news
    said = notices.update(status)
    assert [(n[0], n[1], n.review) for n in said] == [("Welcome back", brief["text"], 12)]
    assert notices.update(status) == []


def test_a_dropped_job_is_no_news_and_the_spell_forgets_it() -> None:
    r = away_router(batch=60)
    r.event(at(ended(1, "review"), T0 + 1))
    r.event(at(ended(2, "blocked", reason="check unit failed"), T0 + 2))
    r.event(at(ev.JobGone(2), T0 + 3))  # dropped within the batch: not sent
    [m] = r.tick(T0 + 61, NOON)
    assert m.title == "Owl: Job 1 ready for review"
    ended_spell = r.presence(False, T0 + 70)
    assert ended_spell is not None and "job 2" not in summary(ended_spell, T0 + 70)
    r.event(at(ev.JobGone(1), T0 + 80))  # after the spell: the briefing forgets it too
    assert summary(ended_spell, T0 + 70).endswith("(1m): 2 Runs")
    assert ended_spell.newest_review() is None


def test_runs_that_cannot_be_contained_are_told_once_an_away_spell() -> None:
    why = "bubblewrap is not installed (sudo apt install bubblewrap)"
    r = away_router(batch=0)
    for _ in range(3):  # every idle spell's first look says it again
        r.event(at(ev.Uncontained(why), T0))
    [m] = r.tick(T0, NOON)
    assert m.title == "Owl: Runs cannot be contained"
    assert why in m.body and "start by themselves" in m.body
    assert [i.kind for i in m.items] == ["sandbox"]
    spell = r.presence(False, T0 + 60)  # back: the briefing says it happened
    assert spell is not None and "Runs could not be contained" in summary(spell, T0 + 60)
    r.presence(True, T0 + 120)  # away again: news again, once
    r.event(at(ev.Uncontained(why), T0 + 130))
    r.event(at(ev.Uncontained(why), T0 + 140))
    [m] = r.tick(T0 + 140, NOON)
    assert len(m.items) == 1


def test_a_run_that_ended_before_the_person_left_is_no_news_of_the_spell() -> None:
    r = Router(Rules(batch=0))
    r.presence(True, T0 - 600, at=T0)  # quiet since T0 - 600, found away at T0
    r.event(at(ended(1, "review"), T0 - 1))  # ended while present, told late
    r.event(at(ev.RunEnded(job_id=2, run_id=0, state="review", title="t"), T0 + 1))  # a verify
    r.event(at(ended(3, "review"), T0 + 2))
    assert [m.title for m in r.tick(T0 + 2, NOON)] == ["Owl: 2 things need you"]
    spell = r.presence(False, T0 + 60)
    assert spell is not None and spell.runs == 1 and sorted(spell.jobs) == [2, 3]
