"""`owl config ...` and `owl autostart ...`: the files around Owl."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from owl.cli.common import EXIT_OK, json_flag, paths, print_json, verb, with_actions
from owl.errors import Refused

if TYPE_CHECKING:
    from pathlib import Path


def register_config(sub: Any) -> None:
    acts = with_actions(sub, "config", help="the config file: path, show, check")
    for name, text in (
        ("path", "where the config file is"),
        ("show", "the config in force, every key with its value"),
        ("check", "check the config file; one line says what is wrong"),
    ):
        s = verb(acts, name, help=text)
        json_flag(s)
        s.set_defaults(fn=cmd_config)


def register_autostart(sub: Any) -> None:
    acts = with_actions(
        sub,
        "autostart",
        help="start Owl at login: on, off, or status",
        description="Start Owl at login: its tray, through the desktop's login items "
        "(XDG autostart, or a LaunchAgent on macOS); or, with --service, the daemon "
        "alone as a systemd user unit, for machines without a desktop.",
    )
    s = verb(acts, "on", help="start Owl at login")
    s.add_argument(
        "--service",
        action="store_true",
        help="install and start a systemd user "
        "unit that runs the daemon (no tray), where the session has systemd",
    )
    json_flag(s)
    s.set_defaults(fn=cmd_autostart)
    s = verb(
        acts,
        "off",
        help="do not start Owl at login (removes the login item and the "
        "user unit, whichever is there)",
    )
    s.add_argument(
        "--service",
        action="store_true",
        help="remove only the systemd user "
        "unit (stopping the daemon it runs), keeping the login item",
    )
    json_flag(s)
    s.set_defaults(fn=cmd_autostart)
    s = verb(acts, "status", help="whether Owl starts at login, and from which file")
    json_flag(s, '{"on": ..., "path": ..., "service": ..., "unit": ...}')
    s.set_defaults(fn=cmd_autostart)


def cmd_config(a: argparse.Namespace) -> int:
    from owl.settings import config as configmod

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
        bad = _channel_problems(cfg)
        if bad:
            raise Refused(
                f"{p.config}: {bad[0]}" + (f" (and {len(bad) - 1} more)" if bad[1:] else "")
            )
        said = _sandbox_notes(cfg)
        if a.json:
            print_json(
                {"path": str(p.config), "exists": p.config.exists(), "ok": True, "notes": said}
            )
        else:
            print(
                f"{p.config}: ok"
                if p.config.exists()
                else f"{p.config}: not there; defaults in force"
            )
            for line in said:
                print(f"{p.config}: {line}")
        return EXIT_OK
    doc = configmod.effective_document(cfg)
    if a.json:
        print_json(doc)
    else:
        import tomli_w

        sys.stdout.write(tomli_w.dumps(doc))
    return EXIT_OK


def _sandbox_notes(cfg) -> list[str]:
    """What `[sandbox]` keys written as older configs wrote them now mean."""
    from owl.sandbox import keys

    out = keys.notes(cfg.sandbox or {})
    for name, spec in cfg.agents.items():
        out += keys.notes(spec.get("sandbox") or {}, f"agents.{name}.sandbox")
    return out


def _channel_problems(cfg) -> list[str]:
    """Each channel URL Apprise could not use, as Apprise reads it (nothing is
    sent: `owl notify test` sends), the URL masked: it is a secret."""
    n = cfg.notify
    urls = [(f"notify.away[{i}]", u) for i, u in enumerate(n.away, start=1)]
    if n.reply:
        urls.append(("notify.reply", n.reply))
    if not urls:
        return []
    from owl.notify.channels import mask, problem

    out = []
    for key, url in urls:
        why = problem(url)
        if why:
            out.append(f"{key} = {mask(url)!r}: {why}")
    return out


def cmd_autostart(a: argparse.Namespace) -> int:
    from owl import autostart
    from owl.autostart import systemd

    if a.action == "on" and a.service:
        from owl.autostart.command import owl_command, owl_environment

        was = systemd.status()[0]
        unit: Path | None = systemd.enable(owl_command(), owl_environment())
        _said(
            a,
            {"on": True, "service": True, "unit": str(unit), "already": was},
            f"{'already on; rewritten and restarted' if was else 'the daemon now runs as'} "
            f"{unit} (systemctl --user status owl; loginctl enable-linger starts it "
            "without a login)",
        )
    elif a.action == "on":
        _login_item_on(a)
    elif a.action == "off" and a.service:
        unit = systemd.disable()
        if unit is None:
            _said(
                a,
                {"service": False, "already": True, "unit": str(systemd.unit_path())},
                f"already off (no {systemd.unit_path()})",
            )
        else:
            _said(
                a,
                {"service": False, "removed": [str(unit)]},
                f"the daemon no longer runs as a systemd user unit (removed {unit})",
            )
    elif a.action == "off":
        on, path = autostart.status()
        if on:
            autostart.disable()
        unit = systemd.disable()
        if not on and unit is None:
            _said(a, {"on": False, "already": True, "path": str(path)}, f"already off (no {path})")
        else:
            gone = [str(x) for x in (path if on else None, unit) if x is not None]
            _said(
                a,
                {"on": False, "removed": gone},
                f"Owl will not start at login (removed {', '.join(gone)})",
            )
    else:
        on, path = autostart.status()
        service, unit = systemd.status()
        if a.json:
            print_json({"on": on, "path": str(path), "service": service, "unit": str(unit)})
        else:
            print(
                f"{'on' if on else 'off'} ({path})"
                + (f"; the daemon runs as a systemd user unit ({unit})" if service else "")
            )
    return EXIT_OK


def _login_item_on(a: argparse.Namespace) -> None:
    """The login item; on a systemd desktop also the user unit it starts (so
    the tray at login and `owl add` reach one daemon, the unit's); and the truth
    where nothing will read the login item (no desktop session here)."""
    import os

    from owl import autostart
    from owl.autostart import systemd
    from owl.autostart.command import owl_command, owl_environment

    was = autostart.status()[0]
    path = autostart.enable()
    doc: dict[str, Any] = {"on": True, "path": str(path), "already": was, "starts": True}
    unit = None
    if sys.platform.startswith("linux"):
        unit = systemd.install_unit(owl_command(), owl_environment())
        doc["unit"] = str(unit) if unit else None
    desktop = sys.platform == "darwin" or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    if desktop:
        text = f"Owl {'already starts' if was else 'will start'} at login ({path})"
        if unit is not None:
            text += f"; its daemon runs as the user unit {unit}, started by the tray"
        _said(a, doc, text)
        return
    why = systemd.problem()
    instead = (
        "`owl autostart on --service` runs the daemon as a systemd user unit"
        if why is None
        else f"and {why}: `owl daemon --detach` starts the daemon now"
    )
    doc.update(starts=False, why="no desktop session")
    _said(
        a,
        doc,
        f"wrote {path}, but it will not start Owl here: only a desktop session's login "
        f"reads it, and this session has none (no DISPLAY or WAYLAND_DISPLAY); {instead}",
    )


def _said(a: argparse.Namespace, doc: dict, text: str) -> None:
    if a.json:
        print_json(doc)
    else:
        print(text)
