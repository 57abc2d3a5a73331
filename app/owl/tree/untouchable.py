"""Processes of a Run that Owl may not signal: met, named, and left alone.

Apart from the sweep because it is a rule of its own about what the sweep's
signals meet, not about which processes belong to the Run. An agent run as
an ordinary user may start a program that becomes another user (as ``sudo``
does, or any setuid program); the kernel then refuses our signals to it
(EPERM). That is never an error: the process is marked refused where a
signal met the refusal, left alone from then on (not waited for to stop,
not killed again, and it does not keep the tree ``alive()``), and named with
its pid, its command and why, so a person can see what Owl could not stop.
Every other process of the tree is signalled as usual.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Protocol, TypeVar

import psutil


class Member(Protocol):
    """What this module needs of one process of a tree (``member.TreeMember``)."""

    pid: int
    refused: str | None
    failed: str | None


class Handle(Protocol):
    """A way to signal one process start (the backend's ``Handle``)."""

    def send(self, sig: int) -> bool: ...


M = TypeVar("M", bound=Member)


def send(m: Member, handle: Handle, sig: int) -> bool:
    """Signal one member through ``handle``; False if it is gone or may not
    be signalled.

    EPERM (a process that became another user, as sudo does) is never an
    error here: the member is marked refused, left alone, and the caller
    goes on to signal every other process of the tree. A member that takes
    a signal again (it went back to our uid) is no longer refused. Any other
    failure marks it ``failed`` with why (see ``could_not``)."""
    try:
        sent = handle.send(sig)
    except PermissionError:
        if m.refused is None:
            m.refused = why_refused(m.pid)
        return False
    except OSError as exc:
        could_not(m, exc)
        return False
    m.failed = None
    if sent:
        m.refused = None
    return sent


def could_not(m: Member, exc: OSError) -> None:
    """Mark a member whose signal could not be sent (not refused: the system
    would have let us, but the call failed, e.g. out of file descriptors).
    Unlike a refused one it is still the tree's to stop: the freeze retries
    it, and until it is stopped it is named and the freeze counts as failed."""
    m.failed = f"Owl could not signal it: {exc.strerror or exc}"


def ours(members: Iterable[M]) -> list[M]:
    """The members we may signal (the refused ones are left alone)."""
    return [m for m in members if m.refused is None]


def named(members: Iterable[Member]) -> list[dict[str, Any]]:
    """The refused members as {pid, command, why}: for `owl status` and the
    Run's record."""
    return [
        {"pid": m.pid, "command": command_of(m.pid), "why": m.refused}
        for m in members
        if m.refused is not None
    ]


def named_failed(members: Iterable[Member]) -> list[dict[str, Any]]:
    """The members a signal could not reach, as {pid, command, why}."""
    return [
        {"pid": m.pid, "command": command_of(m.pid), "why": m.failed}
        for m in members
        if m.failed is not None
    ]


def named_running(members: Iterable[Member]) -> list[dict[str, Any]]:
    """The members a freeze left running, as {pid, command, why}: those it
    could not signal (see named_failed), then those signalled that have not
    yet acted on it (in the kernel, in uninterruptible I/O)."""
    members = list(members)
    out = named_failed(members)
    out += [
        {"pid": m.pid, "command": command_of(m.pid), "why": "signalled to stop, still running"}
        for m in members
        if m.failed is None
    ]
    return out


def why_refused(pid: int) -> str:
    """Why this process may not be signalled by us, in words."""
    mine = os.geteuid()
    try:
        uids = psutil.Process(pid).uids()
    except psutil.Error:
        return "the system refused to let Owl signal it"
    if uids.effective != mine or uids.real != mine:
        who = "root" if uids.effective == 0 else f"uid {uids.effective}"
        return (
            f"it became {who} (real uid {uids.real}, Owl runs as uid {mine}); Owl may not signal it"
        )
    return "the system refused to let Owl signal it"


def command_of(pid: int) -> str:
    """A process's command line in one line, or its name if that is unreadable."""
    try:
        proc = psutil.Process(pid)
        line = " ".join(proc.cmdline()) or proc.name()
    except psutil.Error:
        return "?"
    return line if len(line) <= 200 else line[:199] + "…"
