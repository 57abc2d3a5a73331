"""What the budget says where the person reads it: the briefing, the phone's
morning digest, `owl status`, the tray's line. Pure parts, with a fake clock."""

from __future__ import annotations

from owl.cli.carry import budget_facts, limit_facts
from owl.notify import events as ev
from owl.notify.briefing import spent, summary, view
from owl.notify.route import Router, Rules
from owl.tray.wording import limit_line

T0 = 1_800_000_000.0
WORDS = "claude: keeping 20% of your five-hour window for you — 85% used, resets 21:40"


def stamp(event: ev.Event, t: float) -> ev.Stamp:
    return ev.Stamp(event, t)


def night() -> Router:
    r = Router(Rules(batch=0, quiet=(23 * 60, 7 * 60)))
    r.presence(True, T0)
    for i, (job, cost) in enumerate([(3, 0.5), (4, 0.84), (5, 0.5)]):
        r.event(stamp(ev.RunEnded(job, job * 10, "review", f"job {job}", cost=cost), T0 + i))
    for t, (five, seven) in enumerate([(0.40, 0.31), (0.62, 0.38), (0.78, 0.44)]):
        r.event(stamp(ev.Window("claude", "five_hour", five, T0 + t), T0 + 10 + t))
        r.event(stamp(ev.Window("claude", "seven_day", seven, T0 + t), T0 + 10 + t))
    return r


def test_the_morning_digest_and_the_briefing_say_what_the_night_cost():
    r = night()
    assert r.tick(T0 + 60, 3 * 60) == []  # the quiet hours hold the reviews
    r.event(stamp(ev.LimitWait("claude", T0 + 9000, WORDS, T0 + 100, "budget:five_hour"), T0 + 100))
    [m] = r.tick(T0 + 3600, 7 * 60)  # 07:00
    cost = "3 Jobs ran · $1.84 · claude five-hour 40% → 78%, seven-day 31% → 44%"
    assert m.items[-1].title == "What the night cost" and m.items[-1].body == cost
    spell = r.presence(False, T0 + 4 * 3600)
    assert spell is not None and spent(spell) == cost
    text = summary(spell, T0 + 4 * 3600, hhmm=lambda t: "08:10")
    assert text == (
        "While you were away (4h): 3 Runs · job 3 ready for review · job 4 ready for review · "
        "job 5 ready for review · $1.84 · claude five-hour 40% → 78%, seven-day 31% → 44% · "
        + WORDS
    )
    doc = view(spell, T0 + 4 * 3600, ended=T0 + 4 * 3600)
    assert doc["spent"] == cost and doc["windows"]["claude five_hour"] == [0.4, 0.78]


def test_a_budget_hold_on_the_phone_is_said_in_its_own_words():
    r = Router(Rules(batch=0, limit_after=60))
    r.presence(True, T0)
    r.event(stamp(ev.LimitWait("claude", T0 + 9000, WORDS, T0, "budget:five_hour"), T0))
    [m] = r.tick(T0, 12 * 60)
    assert m.title == f"Owl: {WORDS}"
    assert m.items[0].body.startswith("Work waits until ")


def test_status_and_the_tray_say_the_hold_and_the_days_total(tmp_path, monkeypatch):
    monkeypatch.setenv("OWL_HOME", str(tmp_path))  # the agents named come from its config
    st = {
        "limits": [
            {
                "agent": "claude",
                "kind": "budget:five_hour",
                "until_epoch": T0,
                "until_text": "21:40",
                "reason": WORDS,
            }
        ],
        "budget": {
            "today": {"usd": 1.84, "tokens": 12345},
            "caps": {"daily_usd": 5.0},
            "held": None,
            "spend": False,
        },
    }
    facts = limit_facts(st)
    assert ("limit", WORDS) in facts
    assert ("budget", "today $1.84 of $5.00 · 12,345 tokens") in facts
    assert limit_line(st) == WORDS
    day = "today's $5.12 reached budget.daily_usd ($5.00); work goes on at midnight"
    st["budget"]["held"] = {"until_text": "00:00", "reason": day}
    assert ("budget", f"no Run starts before 00:00: {day}") in budget_facts(st["budget"])
    assert limit_line(st) == f"Waiting: {day}"
    st["budget"]["spend"] = True
    assert "the Shift spends past the headroom kept" in budget_facts(st["budget"])[0][1]
