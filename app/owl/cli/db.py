"""`owl db check` and `owl db recover`: a damaged database, checked and saved."""

from __future__ import annotations

import argparse
from typing import Any

from owl.cli.common import EXIT_OK, EXIT_REFUSED, json_flag, paths, print_json, verb, with_actions
from owl.errors import Refused


def register(sub: Any) -> None:
    acts = with_actions(
        sub,
        "db",
        help="the database: check it, or recover what can still be read",
        description="check: read every page of the database and count its Jobs and "
        "Runs. recover (with no daemon running): copy every row SQLite can still read "
        "into a fresh file; the damaged one is kept beside it.",
    )
    s = verb(acts, "check", help="read every page of the database")
    json_flag(s)
    s.set_defaults(fn=cmd_check)
    s = verb(
        acts,
        "recover",
        help="copy every readable row into a fresh file, keeping the damaged one beside it",
    )
    json_flag(s)
    s.set_defaults(fn=cmd_recover)


def cmd_check(a: argparse.Namespace) -> int:
    from owl.store import repair as dbrepair

    report = dbrepair.check(paths().db)
    if a.json:
        print_json(
            {
                "path": str(report.path),
                "ok": report.ok,
                "text": report.text,
                "counts": report.counts,
                "version": report.version,
            }
        )
        return EXIT_OK if report.ok else EXIT_REFUSED
    if not report.ok:
        raise Refused(report.text)
    print(report.text)
    return EXIT_OK


def cmd_recover(a: argparse.Namespace) -> int:
    from owl.store import repair as dbrepair

    p = paths()
    try:
        done = dbrepair.recover(p.db, p.lock)
    except (RuntimeError, OSError) as e:
        raise Refused(str(e)) from None
    if a.json:
        print_json(
            {
                "path": str(done.path),
                "kept": str(done.kept),
                "method": done.method,
                "saved": done.saved,
            }
        )
    else:
        print(done.text)
    return EXIT_OK
