"""The tray menu's data: an entry, what a click on it does, and how two menus compare.

Apart from the menu's contents because every view of the menu shares them:
`menu` builds the tree out of them, `owl.tray.app` turns it into pystray
items (relabelling in place a menu of the same shape), and the tests read it
without a display.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from owl import textsafe


@dataclass(frozen=True)
class Action:
    """What a click does.

    kind is one of:
    ``verb`` (ask the daemon: `verb` with `args`), ``open`` (open `path` with
    the desktop's opener), ``review`` (write the review page of Job
    `args` job_id and open it), ``autostart`` (turn start-at-login on if `args`
    has on=True, else off), ``config`` (open the config file), ``quit``.
    """

    kind: str
    verb: str | None = None
    args: tuple[tuple[str, Any], ...] = ()
    path: str | None = None

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.args)


@dataclass(frozen=True)
class Item:
    """One menu entry. A `submenu` makes it a cascade; `checked` a checkbox."""

    label: str
    action: Action | None = None
    enabled: bool = True
    checked: bool | None = None
    submenu: tuple["Item", ...] | None = None
    separator: bool = False
    default: bool = False  # shown bold; the heading of the menu

    def __post_init__(self) -> None:
        # Labels carry agent and repository text (titles, project paths):
        # one line, with nothing in it that a menu would act on.
        object.__setattr__(self, "label", textsafe.line(self.label))


SEPARATOR = Item("", separator=True, enabled=False)


def verb(name: str, **args: Any) -> Action:
    return Action("verb", verb=name, args=tuple(sorted(args.items())))


def same_shape(a: tuple[Item, ...], b: tuple[Item, ...]) -> bool:
    """Whether menu `b` differs from `a` only in its words and in which items
    are greyed out: the same entries, doing the same things, the same checks.
    Such a menu is relabelled where it is, open or not (a menu on screen keeps
    the widgets it opened with); any other change makes a new one."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if (x.separator, x.action, x.checked, x.default, x.submenu is None) != (
            y.separator,
            y.action,
            y.checked,
            y.default,
            y.submenu is None,
        ):
            return False
        if x.submenu is not None and y.submenu is not None and not same_shape(x.submenu, y.submenu):
            return False
    return True


def find(items: tuple[Item, ...], label: str) -> Item | None:
    """The first item (searching submenus too) whose label is `label`."""
    for it in items:
        if it.label == label:
            return it
        if it.submenu:
            hit = find(it.submenu, label)
            if hit is not None:
                return hit
    return None
