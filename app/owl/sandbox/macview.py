"""A Run's home of its own on macOS, where Seatbelt lays no binds.

On Linux a Run's home of its own (``ownhome``) is bound at the person's
``$HOME`` path, and its project's caches and its agent's state are bound into
it. Seatbelt cannot bind: it only allows or refuses paths. So on macOS the
Run's home is Owl's folder itself, at its own path, and the Run is told that
it is home: ``HOME`` (what libc's callers, git, Node, Python, Go and Rust
read) and ``CFFIXED_USER_HOME`` (what CoreFoundation's ``NSHomeDirectory``
takes before the account's record). Each place Linux binds into the home is
a symlink in it instead (``~/.cache`` to the project's cache folder,
``~/.claude`` to Claude's state for the project, ``~/.gitconfig`` to the
cleaned copy), made by Owl before each Run. Seatbelt decides on the path a
link leads to, so the profile's rules name Owl's folders themselves, never a
link (``seatbelt``); a link the Run swaps for another leads nowhere it could
not already go, and is made again at the next start.

A link is made from a descriptor of the folder it lies in, no link followed
on the way (``ownhome.opened``); whatever the Run left in its place is
removed first, but for a plain file the Run renamed over the link to its
agent's state file (a program that saves a file by renaming a new one over
the link itself): that is the agent's newer state, and is moved over the
state file it replaces. Claude Code (2.1.332, measured) keeps the link: it
reads it, writes ``TARGET.tmp.PID.HEX`` beside where it leads and renames that
over the target, which the profile allows beside the agent's state files
alone (``state_files``), never beside a cache or a state folder.
Everything here runs on Linux as well: only what the Run is told and what
Seatbelt is given is macOS's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import replace

from . import mactemp, ownhome
from .folders import SYSTEM_HIDDEN, under
from .policy import Facts, Policy

# What CoreFoundation reads for the home (NSHomeDirectory) before getpwuid's.
CF_HOME = "CFFIXED_USER_HOME"


def link_places(own: ownhome.Own, home: str) -> None:
    """Every place Linux would bind inside the home (``own.binds``: source,
    place at the person's ``home`` path, writable) made a link to its source
    at the same place in the Run's own home; places outside the home are left
    (``settled`` keeps the agent's state inside it)."""
    for source, place, writable in own.binds:
        if place == home or not under(place, home):
            continue
        rel = os.path.relpath(place, home)
        folder, name = os.path.split(rel)
        with ownhome.opened(own.home, folder) as d:
            _link_at(d, name, source, writable)


def _link_at(d: int, name: str, source: str, writable: bool) -> None:
    try:
        st = os.lstat(name, dir_fd=d)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        if os.readlink(name, dir_fd=d) == source:
            return
    elif st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and writable:
        if _is_file(source):  # the agent saved its state by renaming over the link
            os.rename(name, source, src_dir_fd=d)
            st = None
    if st is not None:
        ownhome.remove_at(d, name)
    os.symlink(source, name, dir_fd=d)


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def settled(env: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    """The agent's environment without those of ``names`` (the variables its
    state is found by: ``CODEX_HOME``, ``XDG_DATA_HOME``...) that lead outside
    its home: Seatbelt cannot put Owl's folder there, so the agent keeps its
    state where its default is, in the Run's own home, linked to Owl's."""
    home = env.get("HOME", "")
    return {
        k: v
        for k, v in env.items()
        if k not in set(names) or not home or under(os.path.normpath(v), home)
    }


def state_vars(paths: Iterable[str]) -> tuple[str, ...]:
    """The variables named in an agent's state paths (``$CODEX_HOME|~/.codex``)
    and the XDG homes: where they lead decides where its state is."""
    out = ["XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"]
    for p in paths:
        if p.startswith("$"):
            out.append(p[1:].partition("|")[0].partition("/")[0])
    return tuple(dict.fromkeys(out))


def at_home(pol: Policy, env: Mapping[str, str]) -> Policy:
    """The Policy with the Run told that its own home is home: ``HOME`` and
    ``CFFIXED_USER_HOME`` set to it, and every variable naming a place in the
    person's home that the Run is not given (``CARGO_HOME``, ``GOPATH``,
    ``HISTFILE``) moved to the same place in its own: there is its link to
    Owl's folder, or nothing of the person's. A variable naming what the Run
    reads or writes of theirs (a toolchain: ``RUSTUP_HOME``) is left, as is a
    list (``PATH``)."""
    home, own = pol.home, pol.own_home
    given = (*pol.readable, *pol.writable, *pol.revealed)
    moved: dict[str, str] = {"HOME": own, CF_HOME: own}
    dropped = set(pol.env_unset)
    for name, value in env.items():
        if name in dropped:
            continue
        path = os.path.normpath(value) if value.startswith("/") else ""
        if not path or os.pathsep in value or name in moved or not under(path, home):
            continue
        if not any(under(path, g) for g in given):
            moved[name] = own + path[len(home) :]
    kept = [(k, v) for k, v in pol.env_set if k not in moved]
    return replace(pol, env_set=(*kept, *moved.items()))


def state_files(pol: Policy) -> tuple[str, ...]:
    """The Run's own places that are files (its agent's state files:
    ``~/.claude.json``), where a program saves through the link by writing a
    new file beside where it leads and renaming it over: the profile allows
    that file there alone, not beside a cache or a state folder."""
    return tuple(source for source, _, writable in pol.own_binds if writable and _is_file(source))


def with_tmp(pol: Policy, slot: str, folder: str) -> Policy:
    """The Policy with its Job's and agent's temporary folders (``mactemp``:
    ``slot``) writable, and the Run's own among them (``folder``) named by
    ``TMPDIR`` and its kin: the one place under macOS's shared ``/tmp`` and
    ``/var/folders`` the profile allows it."""
    return replace(
        pol, writable=(*pol.writable, slot), env_set=mactemp.env_with(pol.env_set, folder)
    )


def hidden(pol: Policy, facts: Facts) -> Policy:
    """What Seatbelt must refuse by name besides the Policy's hidden paths:
    Owl's folders and the X11 sockets' folders, wherever they are (macOS's
    ``/tmp`` is the person's and writable, and ``OWL_HOME`` may lie there);
    the Run's own places inside them are allowed by their deeper rules."""
    return replace(pol, hidden=_unique((*pol.hidden, *facts.owl_home, *SYSTEM_HIDDEN)))


def resolved(pol: Policy, facts: Facts) -> Policy:
    """The Policy's paths as Seatbelt matches them: resolved, links and all
    (macOS's /tmp, /var and /etc lead into /private; ``~/.aws`` may lead into
    ``~/dotfiles``). A hidden path is denied at both its names. A writable
    folder of the person's (``sandbox.write``) is allowed where it leads,
    unless that holds the home, Owl's folders or something hidden; a writable
    file that is a link keeps its own name, which then matches nothing (a
    Run may swap a file it writes for a link, never a folder: see
    seatbelt.py). seatbelt.py stays pure: the file system is asked here."""
    real = os.path.realpath
    hidden = [*pol.hidden, *(real(p) for p in pol.hidden)]
    guarded = {real(p) for p in (facts.home, facts.user_home, *facts.owl_home)}
    guarded |= set(hidden)

    def writable(path: str) -> str:
        to = real(path)
        if to == path:
            return path
        holds = any(g == to or g.startswith(to.rstrip("/") + "/") for g in guarded)
        # a folder cannot be swapped for a link by a Run (seatbelt.py); a file can
        return to if os.path.isdir(to) and not holds else path

    def every(paths: Iterable[str]) -> tuple[str, ...]:
        return _unique(real(p) for p in paths)

    return replace(
        pol,
        readable=every(pol.readable),
        hidden=_unique(hidden),
        writable=_unique(writable(p) for p in pol.writable),
        readonly_over=every(pol.readonly_over),
        revealed=every(pol.revealed),
        sockets=every(pol.sockets),
        home=real(pol.home) if pol.home else "",
        own_home=real(pol.own_home) if pol.own_home else "",
        own_binds=tuple((real(s), p, w) for s, p, w in pol.own_binds),
    )


def _unique(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for p in paths if p))
