"""Reaching the person away, with real parts: the real daemon on the manual machine,
the real Apprise library delivering to local receivers (its json:// and ntfy
plugins), a local ntfy server's JSON stream and a local Telegram Bot API for
replies that move Jobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

from notify_servers import NtfyServer, Receiver, TelegramServer  # noqa: E402
from owlproc import OWL, OwlDaemon, make_project, wait_for  # noqa: E402

FAILING_CHECK = ".owl.toml", "[[checks]]\nname = 'unit'\nrun = 'exit 3'\n"


def titles(rx: Receiver) -> list[str]:
    return [g["body"].get("title") for g in rx.got]


def test_sent_only_while_away_and_a_burst_is_one_digest(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with (
        Receiver() as rx,
        OwlDaemon(
            tmp_path / "home",
            config={"notify": {"away": [rx.url()], "batch": "5s"}, "runs": {"max_parallel": 2}},
        ) as d,
    ):
        # present: the Job reaches review while the person works beside it
        first = d.add("write=a commit=one exit=0", project)
        d.ok("start")
        d.wait_job(first, "review")
        # away: two Jobs reach review within the batch
        d.machine("idle")
        jobs = [d.add(f"write=f{i} commit=c{i} exit=0", project) for i in (2, 3)]
        for j in jobs:
            d.wait_job(j, "review")
        wait_for(lambda: rx.got, timeout=15, what="the digest")
        d.ok("status")  # one round trip more: nothing else was queued behind it
        assert len(rx.got) == 1, rx.got
        [msg] = rx.got
        assert msg["body"]["title"] == "Owl: 2 things need you"
        body = msg["body"]["message"]
        assert (
            f"Job {jobs[0]} ready for review" in body and f"Job {jobs[1]} ready for review" in body
        )
        assert f"Job {first} " not in body
        assert "1 file changed" in body  # the diffstat, read off the engine thread
        # the channel and its last send, masked
        st = d.status()["notify"]
        assert st["channels"][0]["url"] == f"json://127.0.0.1:{rx.port}/ow…"
        assert st["channels"][0]["last"]["ok"] is True
        text = d.ok("status")
        assert f"channel:    json://127.0.0.1:{rx.port}/ow… · last send ok" in text
        # back: the briefing, in status and --since-away
        d.machine("input")
        brief = wait_for(lambda: d.status()["notify"]["briefing"], what="the briefing")
        newest = d.status()["recent"][0]["job_id"]  # the two finish in either order
        assert brief["review"] == newest and newest in jobs and brief["runs"] == 2
        said = d.ok("status", "--since-away").strip()
        assert (
            said.startswith("While you were away (")
            and f"2 Runs · job {jobs[0]} ready for review · job {jobs[1]} ready for review" in said
        )
        assert json.loads(d.ok("status", "--since-away", "--json"))["text"] == said


def test_a_run_that_ended_while_present_is_no_news_however_late_its_end_is_told(
    tmp_path: Path,
) -> None:
    """A Run's end is told once its branch is checked in the project (git, off the
    engine's thread). The first Job reaches review while the person is there; its
    branch's git is slow, so the person is away before its end is told: still no
    news of the spell (the digest and the briefing count the two away Runs)."""
    from slowgit import SlowGit

    slow = SlowGit(tmp_path / "bin")
    slow.slow(3, on="refs/heads/owl/job-1^{commit}")  # the first Job's branch only
    project = make_project(tmp_path / "p")
    with (
        Receiver() as rx,
        OwlDaemon(
            tmp_path / "home",
            config={"notify": {"away": [rx.url()], "batch": "4s"}, "runs": {"max_parallel": 2}},
            env={"PATH": slow.path()},
        ) as d,
    ):
        first = d.add("write=a commit=one exit=0", project)
        d.ok("start")
        d.wait_job(first, "review")  # recorded; its fetch still sleeps
        d.machine("idle")
        jobs = [d.add(f"write=f{i} commit=c{i} exit=0", project) for i in (2, 3)]
        for j in jobs:
            d.wait_job(j, "review")
        wait_for(lambda: rx.got, timeout=20, what="the digest")
        d.machine("input")
        brief = wait_for(lambda: d.status()["notify"]["briefing"], what="the briefing")
        assert brief["runs"] == 2, brief
        assert sorted(j["id"] for j in brief["jobs"]) == sorted(jobs)
        assert [m["body"]["title"] for m in rx.got] == ["Owl: 2 things need you"]
        assert f"Job {first} " not in rx.got[0]["body"]["message"]


def test_quiet_hours_let_only_the_urgent_through(tmp_path: Path) -> None:
    now = time.localtime()
    start = f"{(now.tm_hour + 23) % 24:02d}:00"
    end = f"{(now.tm_hour + 2) % 24:02d}:00"
    fine = make_project(tmp_path / "fine")
    failing = make_project(tmp_path / "failing", dict([FAILING_CHECK, ("README", "x\n")]))
    with (
        Receiver() as rx,
        OwlDaemon(
            tmp_path / "home",
            config={
                "notify": {
                    "away": [rx.url()],
                    "batch": "0s",
                    "quiet": f"{start}-{end}",
                    "urgent": ["blocked"],
                }
            },
        ) as d,
    ):
        d.machine("idle")
        ok = d.add("write=a commit=one exit=0", fine)
        d.wait_job(ok, "review")
        bad = d.add("write=b commit=two exit=0", failing, "--attempts", "1")
        d.wait_job(bad, "blocked")
        wait_for(lambda: rx.got, timeout=15, what="the urgent message")
        d.ok("status")
        assert titles(rx) == [f"Owl: Job {bad} blocked"], titles(rx)
        assert "check unit failed" in rx.got[0]["body"]["message"]


def test_a_failing_and_a_hanging_channel_hold_up_nothing(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with (
        Receiver("hang") as hung,
        Receiver("fail") as bad,
        Receiver() as rx,
        OwlDaemon(
            tmp_path / "home",
            config={"notify": {"away": [hung.url(), bad.url(), rx.url()], "batch": "0s"}},
        ) as d,
    ):
        d.machine("idle")
        job = d.add("write=a commit=one exit=0", project)
        d.wait_job(job, "review")
        wait_for(lambda: rx.got, timeout=10, what="the good channel's message")
        assert hung.wait(lambda: hung.requests) and bad.wait(lambda: bad.requests)
        # the engine answers at once, and a Run still freezes at the first input
        long = d.add("sleep=30", project)
        run = d.wait_run(long, "running")
        began = time.monotonic()
        d.machine("input")
        d.wait_run(long, "frozen", timeout=5)
        assert time.monotonic() - began < 2.0
        chans = {c["url"].split("/")[2]: c for c in d.status()["notify"]["channels"]}
        failed = chans[f"127.0.0.1:{bad.port}"]
        assert failed["last"]["ok"] is False and failed["retry_at"] is not None
        assert "failed" in failed["last"]["answer"]
        assert (
            chans[f"127.0.0.1:{hung.port}"]["last"] is None
            or chans[f"127.0.0.1:{hung.port}"]["sending"]
        )
        assert run["job_id"] == long
        hung.set_mode("ok")


def test_notify_test_says_what_each_channel_answered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with Receiver() as rx, Receiver("fail") as bad:
        (home / "config.toml").write_text(
            f'[notify]\naway = ["{rx.url("hook-secret")}", "{bad.url("other-secret")}", '
            '"nosuch://my-secret-thing"]\n'
        )
        env = dict(os.environ, OWL_HOME=str(home))
        p = subprocess.run(
            [*OWL, "notify", "test"], capture_output=True, text=True, env=env, timeout=60
        )
        assert p.returncode == 1, p.stdout + p.stderr
        lines = p.stdout.splitlines()
        assert len(lines) == 3, lines
        assert lines[0].startswith(f"json://127.0.0.1:{rx.port}/ho…: ok")
        assert lines[1].startswith(f"json://127.0.0.1:{bad.port}/ot…: failed")
        assert lines[2] == "nosuch://my…: not a URL Apprise knows"
        assert "secret" not in p.stdout + p.stderr
        assert rx.got and rx.got[0]["body"]["title"] == "Owl: a test"
        shown = subprocess.run(
            [*OWL, "config", "show"], capture_output=True, text=True, env=env, timeout=60
        ).stdout
        assert "[notify]" in shown and "secret" not in shown


def test_config_check_and_status_say_which_channel_apprise_cannot_use(tmp_path: Path) -> None:
    """Read as Apprise reads a URL to send, and nothing sent."""
    home = tmp_path / "home"
    with Receiver() as rx:
        good, typo = rx.url("hook-secret"), f"jsn://127.0.0.1:{rx.port}/my-secret-topic"
        (home).mkdir()
        (home / "config.toml").write_text(f'[notify]\naway = ["{good}", "{typo}"]\n')
        env = dict(os.environ, OWL_HOME=str(home))
        p = subprocess.run(
            [*OWL, "config", "check"], capture_output=True, text=True, env=env, timeout=60
        )
        assert p.returncode == 1 and p.stdout == "", p
        assert p.stderr == (
            f"owl: {home / 'config.toml'}: notify.away[2] = "
            f"'jsn://127.0.0.1:{rx.port}/my…': not a URL Apprise knows\n"
        )
        with OwlDaemon(home, config={"notify": {"away": [good, typo]}}) as d:
            chans = wait_for(
                lambda: (c := d.status()["notify"]["channels"])[1]["problem"] and c,
                what="the channels read",
            )
            assert chans[0]["problem"] is None
            assert chans[1]["problem"] == "not a URL Apprise knows"
            text = d.ok("status")
            assert (
                f"channel:    jsn://127.0.0.1:{rx.port}/my… · cannot be used: "
                "not a URL Apprise knows · nothing sent yet"
            ) in text
            assert f"json://127.0.0.1:{rx.port}/ho… · nothing sent yet" in text
        assert rx.got == []  # nothing was sent to find out


def test_replies_through_the_ntfy_stream_move_the_job(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with NtfyServer() as ntfy:
        topic = "owl-secret-topic"

        def ack(words: str) -> dict:
            """Owl's answer on the topic that says `words`."""
            return ntfy.wait(
                lambda: next(
                    (
                        m
                        for m in ntfy.on(topic)
                        if "owl" in m.get("tags", []) and words in m["message"]
                    ),
                    None,
                )
            )

        cfg = {"notify": {"away": [ntfy.url(topic)], "reply": ntfy.url(topic), "batch": "0s"}}
        with OwlDaemon(tmp_path / "home", config=cfg) as d:
            assert ntfy.wait(lambda: ntfy.subscribers >= 1), "the daemon never subscribed"
            d.machine("idle")
            job = d.add("write=a commit=one exit=0", project)
            d.wait_job(job, "review")
            # the review went out through Apprise's ntfy plugin
            sent = ntfy.wait(
                lambda: [
                    m
                    for m in ntfy.on(topic)
                    if m.get("title") == f"Owl: Job {job} ready for review"
                ]
            )
            assert sent, ntfy.on(topic)

            ntfy.publish(topic, f"{job} also cover the empty case")
            assert ack(f"job {job} queued with your reply, 1st in the queue")
            j = wait_for(
                lambda: (j := d.job(job))["state"] == "review" and len(j["runs"]) == 2 and j,
                timeout=20,
                what="the second Run",
            )
            assert j["runs"][1]["outcome"] == "succeeded"
            # the return to review is told as the first was, and the person hears back
            reviews = ntfy.wait(
                lambda: (
                    (
                        told := [
                            m
                            for m in ntfy.on(topic)
                            if m.get("title") == f"Owl: Job {job} ready for review"
                        ]
                    )
                    and len(told) == 2
                    and told
                )
            )
            for m in reviews:  # the agent's last line, and what may be answered
                assert "“done commit=one”" in m["message"], m["message"]
                assert f"Reply '{job} accept', '{job} drop'" in m["message"]
            ntfy.publish(topic, "what now?")
            assert ack("Owl understands")
            ntfy.publish(topic, f"{job} accept")
            assert ack(f"job {job}")
            d.wait_job(job, "done")
            ntfy.publish(topic, "pause")
            assert ack("paused")
            assert d.status()["paused"] is True
            d.ok("resume")
            # a message dated later than the next start, to be seen again after it
            ntfy.publish(topic, "pause", at=time.time() + 20)
            assert wait_for(lambda: d.status()["paused"], what="the second pause")
            d.ok("resume")
        with OwlDaemon(tmp_path / "home", config=cfg) as d:
            assert ntfy.wait(lambda: ntfy.subscribers >= 1)
            assert any(m["message"] == "pause" for m in ntfy.after(topic, str(int(time.time()))))
            # the stream gives the stored messages first, the replayed pause among
            # them, then this one: its answer means the replay was read
            ntfy.publish(topic, "status")
            assert ack("nothing running · 0 queued")
            assert d.status()["paused"] is False  # the replayed pause was not acted on


def test_telegram_replies_and_an_unknown_chat(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with TelegramServer() as tg:
        cfg = {
            "notify": {"away": [tg.url()], "reply": tg.url(), "telegram_api": tg.api, "batch": "0s"}
        }
        with OwlDaemon(tmp_path / "home", config=cfg) as d:
            assert tg.wait(lambda: tg.polls >= 1), "the daemon never polled"
            d.machine("idle")
            job = d.add("write=a commit=one exit=0", project)
            d.wait_job(job, "review")
            # delivered by Apprise's tgram plugin, pointed at this Bot API
            told = tg.wait(
                lambda: [m for m in tg.sent if f"Job {job} ready for review" in str(m.get("text"))]
            )
            assert told and str(told[0]["chat_id"]) == str(tg.chat)

            def ack(words: str) -> dict:
                return tg.wait(
                    lambda: next((m for m in tg.sent if words in str(m.get("text"))), None)
                )

            tg.say(f"{job} accept", chat=999)  # not the configured chat
            tg.say("also cover the empty case", reply_to_text=told[0]["text"])
            assert ack(f"job {job} queued with your reply")
            assert not any(str(m.get("chat_id")) == "999" for m in tg.sent)
            j = wait_for(
                lambda: (j := d.job(job))["state"] == "review" and len(j["runs"]) == 2 and j,
                timeout=20,
                what="the second Run",
            )
            assert j["state"] == "review"  # the stranger's accept did nothing


def test_the_briefing_and_recent_runs_forget_a_dropped_job(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    with OwlDaemon(tmp_path / "home") as d:
        d.machine("idle")
        kept = d.add("write=a commit=one exit=0", project)
        gone = d.add("write=b commit=two exit=0", project)
        d.wait_job(kept, "review")
        d.wait_job(gone, "review")
        d.machine("input")
        brief = wait_for(lambda: d.status()["notify"]["briefing"], what="the briefing")
        assert f"job {gone} ready for review" in brief["text"], brief
        assert brief["review"] == gone
        d.ok("jobs", "drop", "--force", str(gone))
        st = d.status()
        brief = st["notify"]["briefing"]
        assert f"job {gone} " not in brief["text"] and f"job {kept} ready" in brief["text"]
        assert brief["review"] == kept and "2 Runs" in brief["text"]  # they did happen
        assert [r["job_id"] for r in st["recent"]] == [kept]
        assert f"job {gone}" not in d.ok("status", "--since-away")


def test_a_verify_that_sends_a_job_to_review_is_told_and_no_reply_hint_without_replies(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path / "p", dict([FAILING_CHECK, ("README", "x\n")]))
    with (
        Receiver() as rx,
        OwlDaemon(tmp_path / "home", config={"notify": {"away": [rx.url()], "batch": "0s"}}) as d,
    ):
        d.machine("idle")
        job = d.add("write=b commit=two exit=0", project, "--attempts", "1")
        d.wait_job(job, "blocked")
        wait_for(lambda: rx.got, timeout=15, what="the blocked message")
        blocked = rx.got[0]["body"]
        assert blocked["title"] == f"Owl: Job {job} blocked"
        assert "Reply '" not in blocked["message"] and "reply '" not in blocked["message"]
        assert f"owl jobs reply {job} '<what to do>'" in blocked["message"]
        assert "“done commit=two”" in blocked["message"]  # the agent's last line
        # the check was wrong: fixed on main, the Job's checks run again from there
        (project / ".owl.toml").write_text("[[checks]]\nname = 'unit'\nrun = 'true'\n")
        subprocess.run(["git", "-C", str(project), "commit", "-qam", "fix"], check=True)
        d.ok("jobs", "verify", str(job), "--checks-from", "main")
        d.wait_job(job, "review")
        wait_for(lambda: len(rx.got) == 2, timeout=15, what="the review message")
        review = rx.got[1]["body"]
        assert review["title"] == f"Owl: Job {job} ready for review", review
        assert "unit passed" in review["message"] and "Reply '" not in review["message"]
