"""What a Run changed outside its branch, in words: for the log, the Job's
history, the review page and the notices.

Apart from the snapshot and its comparison (outside.py) because every view
says the same changes the same way, and a view must not bring in what reads
a project's git folder. Every name and value in a change was written by the
agent: each is put on one line, its control characters made visible, cut long.
"""

from __future__ import annotations

from typing import Any


def _visible(value: str, limit: int = 120) -> str:
    """An agent-written value on one line: control characters as `\\xNN`, cut long."""
    out = "".join(
        c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
        for c in value
    )
    return out if len(out) <= limit else out[:limit] + "…"


def _short(value: str | None) -> str:
    if value is None:
        return ""
    value = _visible(value)
    if value.startswith("ref: "):
        return value[5:].removeprefix("refs/heads/")
    return value[:7] if len(value) == 40 and all(c in "0123456789abcdef" for c in value) else value


def _ref_name(name: str) -> str:
    for prefix, word in (
        ("refs/heads/", ""),
        ("refs/tags/", "tag "),
        ("refs/remotes/", "remote branch "),
    ):
        if name.startswith(prefix):
            return word + name[len(prefix) :]
    return name


def describe(c: dict[str, Any]) -> str:
    """One change in words: `moved main from a1b2c3d to e4f5a6b`, and, for a Run
    the person worked beside (`owl start`, a Shift), that it may be theirs."""
    said = _describe(c)
    return said + (" (perhaps yours: you were working meanwhile)" if c.get("shared") else "")


def _describe(c: dict[str, Any]) -> str:
    kind, name = c.get("kind"), _visible(str(c.get("name")))
    a = None if c.get("from") is None else _visible(str(c["from"]))
    b = None if c.get("to") is None else _visible(str(c["to"]))
    if kind == "ref":
        if name == "HEAD":
            return f"switched the person's checkout from {_short(a)} to {_short(b)}"
        ref = _ref_name(name)
        if a is None:
            return f"created {ref} at {_short(b)}"
        if b is None:
            return f"deleted {ref} (it was at {_short(a)})"
        return f"moved {ref} from {_short(a)} to {_short(b)}"
    if kind in ("config", "global-config"):
        where = "" if kind == "config" else " in ~/.gitconfig"
        if a is None:
            return f"set {name} = {b}{where}"
        if b is None:
            return f"removed {name} (it was {a}){where}"
        return f"changed {name} from {a} to {b}{where}"
    if kind == "store-ref":
        ref = _ref_name(name)
        mine = " in its own store; the project's is untouched"
        if a is None:
            return f"created {ref} at {_short(b)}{mine}"
        if b is None:
            return f"deleted {ref}{mine}"
        return f"moved {ref} from {_short(a)} to {_short(b)}{mine}"
    if kind == "git-file":
        return (
            f"rewrote the worktree's git file {name} to {b or '(nothing)'} "
            f"(Owl made it {a}); Owl put it back and blocked the Job"
        )
    if kind == "hook":
        if a is None:
            return f"added the hook {name}"
        if b is None:
            return f"removed the hook {name}"
        return f"changed the hook {name}"
    return f"left {name} unreadable, so nothing was compared ({b or a})"


def summary(items: list[dict[str, Any]], limit: int = 3) -> str:
    """`the agent moved main from a1b2c3d to e4f5a6b; set core.fsmonitor = …`."""
    said = [describe(c) for c in items[:limit]]
    more = f" (and {len(items) - limit} more)" if len(items) > limit else ""
    who = "the agent, or you," if items and all(c.get("shared") for c in items) else "the agent"
    return f"{who} " + "; ".join(said) + more
