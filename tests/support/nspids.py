"""The pids the stand-in agents note, as this host sees them.

A contained Run has a PID namespace of its own, where `os.getpid()` is not the
pid the host knows. So an agent notes each process as its namespace and its
pid there (`pid:[4026532260] 2`, see tests/agents/agent.py); here a line is
mapped back to the host's pid: a process whose /proc/<pid>/ns/pid is that
namespace and whose innermost `NSpid:` is that pid. A process that is gone
maps to nothing, which is what the "nothing survives" checks read. A line of
the host's own namespace (an uncontained Run), or a bare pid, is a host pid.
"""

from __future__ import annotations

import os

HOST_NS = os.readlink("/proc/self/ns/pid")


def parse(text: str) -> list[tuple[str, int]]:
    """The (namespace, pid) of each well-formed line, in the order written."""
    out: list[tuple[str, int]] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 1 and fields[0].isdigit():
            out.append((HOST_NS, int(fields[0])))
        elif len(fields) == 2 and fields[1].isdigit():
            out.append((fields[0], int(fields[1])))
    return out


def inner_pids(namespaces: set[str]) -> dict[tuple[str, int], int]:
    """(namespace, pid inside it) -> host pid, for every live process of those namespaces."""
    found: dict[tuple[str, int], int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ns = os.readlink(f"/proc/{entry}/ns/pid")
            if ns not in namespaces:
                continue
            with open(f"/proc/{entry}/status") as f:
                nspid = next(line for line in f if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue  # gone meanwhile, a zombie, or not ours to read
        found[(ns, int(nspid.split()[-1]))] = int(entry)
    return found


def host_pids(text: str) -> list[int]:
    """The host pids of the lines in `text` (contained ones only while they live)."""
    noted = parse(text)
    inner = {ns for ns, _ in noted if ns != HOST_NS}
    mapped = inner_pids(inner) if inner else {}
    out: list[int] = []
    for ns, pid in noted:
        host = pid if ns == HOST_NS else mapped.get((ns, pid))
        if host is not None and host not in out:
            out.append(host)
    return out
