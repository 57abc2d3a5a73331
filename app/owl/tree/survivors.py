"""Processes known by their tag rather than by a tree, found and ended.

Apart from ``ProcessTree`` because no tree holds them any more: after a
daemon crash (its next start, or the watchdog) the tree that knew a Run is
gone, and what is left is a tag in each process's environment
(``OWL_RUN_ID``, ``OWL_INSTANCE``; ``OWL_SETUP`` for a worktree setup that
was given up) and the identities the database kept (pid and create time).
So they are found over the whole process table, and ended through a fresh
tree of their own, which keeps the same PID-reuse safety and leaves alone
what Owl may not signal.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import psutil

from . import _platform
from .process_tree import KILL_TIMEOUT, ProcessTree


def find_survivors(
    tag_name: str,
    tag_values: Iterable[str],
    identities: Iterable[tuple[int, float]] = (),
    instance: tuple[str, str] | None = None,
) -> list[psutil.Process]:
    """After a daemon crash: live processes left from earlier Runs.

    A process is a survivor if it is a recorded identity (pid and create
    time both match), or its environment has ``tag_name`` set to one of
    ``tag_values`` and, when ``instance`` is given, that variable set to
    that value too (several Owl homes may run on one machine: another's
    processes are never touched). Everything descended from a survivor is a
    survivor too (a tool started with ``env -i`` loses the tag, not its
    parent).
    """
    values = set(tag_values)
    me = os.getpid()
    found: dict[int, psutil.Process] = {}

    def foreign(env: dict[str, str] | None) -> bool:
        return (
            instance is not None
            and env is not None
            and instance[0] in env
            and env[instance[0]] != instance[1]
        )

    for pid, created in identities:
        try:
            proc = psutil.Process(pid)
            if (
                pid == me
                or abs(proc.create_time() - created) > 0.005
                or proc.status() == psutil.STATUS_ZOMBIE
            ):
                continue
        except psutil.Error:
            continue
        if not foreign(_platform.backend.environ(pid)):
            found[pid] = proc

    if values:
        for proc in psutil.process_iter():
            if proc.pid == me or proc.pid in found:
                continue
            env = _platform.backend.environ(proc.pid)
            if env is None or env.get(tag_name) not in values:
                continue
            if instance is not None and env.get(instance[0]) != instance[1]:
                continue
            found[proc.pid] = proc

    if found:
        children: dict[int, list[int]] = {}
        for pid, ppid in _ppids().items():
            children.setdefault(ppid, []).append(pid)
        queue = list(found)
        while queue:
            for child in children.get(queue.pop(), ()):
                if child in found or child == me:
                    continue
                try:
                    found[child] = psutil.Process(child)
                except psutil.Error:
                    continue
                queue.append(child)

    out = []
    for proc in found.values():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.Error:
            continue
    return out


def _ppids() -> dict[int, int]:
    return {pid: row.ppid for pid, row in _platform.backend.snapshot().items()}


def kill_processes(procs: list[psutil.Process], timeout: float = KILL_TIMEOUT) -> int:
    """Kill these processes and all they started, PID-reuse safe: each is
    signalled only while it is still the process ``procs`` names (its create
    time). Waits until they are gone (at most ``timeout`` seconds); returns
    how many were killed."""
    return end_processes(procs, timeout)[0]


def end_processes(
    procs: list[psutil.Process], timeout: float = KILL_TIMEOUT
) -> tuple[int, list[dict[str, Any]]]:
    """As kill_processes; also returns the processes the system would not
    let us signal ({pid, command, why}), which were left alone."""
    with ProcessTree(None) as tree:
        for proc in procs:
            try:
                created = proc.create_time()
            except psutil.Error:
                continue
            tree.add_leader(proc.pid, create_time=created)
        killed = tree.kill(timeout)
        return killed, tree.refused()
