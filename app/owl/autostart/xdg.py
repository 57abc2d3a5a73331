"""XDG autostart: `$XDG_CONFIG_HOME/autostart/owl.desktop` (Linux, BSDs).

The file is the template in `templates/owl-autostart.desktop` with `Exec`
pointing at this installation and `Icon` at the packaged app icon, so it
works without anything installed into an icon theme.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from owl.autostart.command import install, owl_environment, template, uninstall

FILENAME = "owl.desktop"


def autostart_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "autostart"


def path() -> Path:
    return autostart_dir() / FILENAME


# Characters that force quoting of an argument in Exec (Desktop Entry spec).
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def quote_exec_arg(arg: str) -> str:
    """Quote one argument for an Exec line, per the Desktop Entry spec.

    Inside double quotes, `"`, `` ` ``, `$` and `\\` take a backslash; a
    literal `%` is always `%%`. The whole value is then written through
    the string-escaping rule, which doubles every backslash again.
    """
    arg = arg.replace("%", "%%")
    if arg and not (set(arg) & _RESERVED):
        return arg
    inner = re.sub(r'(["`$\\])', r"\\\1", arg)
    return f'"{inner}"'


def exec_line(argv: list[str], env: dict[str, str] | None = None) -> str:
    words = [f"{k}={v}" for k, v in (env or {}).items()]
    if words:
        words.insert(0, "env")
    value = " ".join(quote_exec_arg(w) for w in words + list(argv))
    return value.replace("\\", "\\\\")


def _icon_path() -> str | None:
    from importlib.resources import files

    try:
        icon = files("owl.tray").joinpath("assets", "owl.png")
        return str(icon) if icon.is_file() else None
    except (ModuleNotFoundError, FileNotFoundError):
        return None


def render(argv: list[str], env: dict[str, str] | None = None) -> str:
    """The .desktop text for `argv` (pure apart from reading the template)."""
    out = []
    for line in template("owl-autostart.desktop").decode("utf-8").splitlines():
        if line.startswith("Exec="):
            line = "Exec=" + exec_line(argv, env)
        elif line.startswith("Icon="):
            icon = _icon_path()
            if icon:
                line = "Icon=" + icon
        out.append(line)
    return "\n".join(out) + "\n"


def enable(argv: list[str]) -> Path:
    return install(path(), render(argv, owl_environment()).encode("utf-8"))


def disable() -> Path:
    return uninstall(path())


def status() -> tuple[bool, Path]:
    """On when the file exists and is not hidden or disabled in it."""
    target = path()
    try:
        text = target.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return False, target
    keys = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    off = (
        keys.get("Hidden", "").strip() == "true"
        or keys.get("X-GNOME-Autostart-enabled", "true").strip() == "false"
    )
    return not off, target
