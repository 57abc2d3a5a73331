"""`owl config ...` and `owl autostart ...`: the files around Owl."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from owl.cli.common import EXIT_OK, json_flag, paths, print_json, verb
from owl.errors import Refused


def register(sub: Any) -> None:
    c = verb(sub, "config", help="the config file: path, show, check")
    acts = c.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in (("path", "where the config file is"),
                       ("show", "the config in force, every key with its value"),
                       ("check", "check the config file; one line says what is wrong")):
        s = verb(acts, name, help=text)
        json_flag(s)
        s.set_defaults(fn=cmd_config)

    au = verb(sub, "autostart", help="start Owl at login: on, off, or status")
    acts = au.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = verb(acts, "on", help="start Owl at login")
    json_flag(s)
    s.set_defaults(fn=cmd_autostart)
    s = verb(acts, "off", help="do not start Owl at login")
    json_flag(s)
    s.set_defaults(fn=cmd_autostart)
    s = verb(acts, "status", help="whether Owl starts at login, and from which file")
    json_flag(s, "{\"on\": ..., \"path\": ...}")
    s.set_defaults(fn=cmd_autostart)


def cmd_config(a: argparse.Namespace) -> int:
    from owl import config as configmod

    p = paths()
    if a.action == "path":
        if a.json:
            print_json({"path": str(p.config), "exists": p.config.exists()})
        else:
            print(p.config)
        return EXIT_OK
    try:
        cfg = configmod.load(p.config)
    except configmod.ConfigError as e:
        raise Refused(str(e)) from None
    if a.action == "check":
        if a.json:
            print_json({"path": str(p.config), "exists": p.config.exists(), "ok": True})
        else:
            print(f"{p.config}: ok" if p.config.exists()
                  else f"{p.config}: not there; defaults in force")
        return EXIT_OK
    doc = configmod.effective_document(cfg)
    if a.json:
        print_json(doc)
    else:
        import tomli_w

        sys.stdout.write(tomli_w.dumps(doc))
    return EXIT_OK


def cmd_autostart(a: argparse.Namespace) -> int:
    from owl import autostart

    if a.action == "on":
        print(f"Owl will start at login ({autostart.enable()})")
    elif a.action == "off":
        print(f"Owl will not start at login (removed {autostart.disable()})")
    else:
        on, path = autostart.status()
        if a.json:
            print_json({"on": on, "path": str(path)})
        else:
            print(f"{'on' if on else 'off'} ({path})")
    return EXIT_OK
