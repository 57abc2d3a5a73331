"""`owl notify test`: one short message to each channel, and what each answered.

Run by the CLI itself, not the daemon (nothing of the engine's is needed, and a
channel that hangs holds up only this command, each send being bounded). One
line a channel, its URL masked; exit 1 if any failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import socket
import sys
from typing import Any

from owl import textsafe
from owl.cli.common import EXIT_OK, EXIT_REFUSED, json_flag, print_json, verb, with_actions
from owl.errors import Refused

TEST_TITLE = "Owl: a test"
TEST_BODY = "Owl can reach you here while you are away from {host}."


def register(sub: Any) -> None:
    acts = with_actions(sub, "notify", help="the channels that reach you while you are away")
    t = verb(
        acts,
        "test",
        help="send one short message to each channel in notify.away and say what each answered",
    )
    json_flag(t)
    t.set_defaults(fn=cmd_notify_test)


def cmd_notify_test(a: argparse.Namespace) -> int:
    from owl.notify import channels
    from owl.settings import config as configmod
    from owl.settings.paths import get_paths

    path = get_paths().config
    try:
        cfg = configmod.load(path)
    except configmod.ConfigError as e:
        raise Refused(str(e)) from None
    urls = list(cfg.notify.away)
    if not urls:
        raise Refused(
            f"no channels: set notify.away in {path}, e.g. "
            'away = ["ntfys://ntfy.sh/your-secret-topic"]'
        )
    body = TEST_BODY.format(host=socket.gethostname())
    # Each channel on a thread of its own: a slow one does not hold up the others.
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(urls))) as pool:
        answers = list(
            pool.map(
                lambda u: channels.send(u, TEST_TITLE, body, telegram_api=cfg.notify.telegram_api),
                urls,
            )
        )
    failed = sum(1 for x in answers if not x.ok)
    if a.json:
        print_json(
            {
                "channels": [
                    {"url": channels.mask(u), "ok": x.ok, "answer": x.text}
                    for u, x in zip(urls, answers)
                ],
                "failed": failed,
            }
        )
    else:
        for x in answers:
            print(textsafe.line(x.text))
    if failed:
        print(
            f"owl: {failed} of {len(answers)} channel{'s' if len(answers) != 1 else ''} failed",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    return EXIT_OK
