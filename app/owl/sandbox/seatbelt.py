"""The same Policy as a macOS Seatbelt (``sandbox-exec``) profile: pure text.

Never run on a Mac yet; tested on Linux by its content. Seatbelt takes the last
matching rule, so the profile allows reading, then denies the hidden paths, then
allows writing only where the Policy does, and denies the git config, hooks and
info laid over those.
"""

from __future__ import annotations

from .policy import Policy


def _q(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def profile(policy: Policy) -> str:
    lines = [
        "(version 1)",
        "(deny default)",
        "(allow process-fork)",
        "(allow process-exec)",
        "(allow signal (target children))",
        "(allow sysctl-read)",
        "(allow mach-lookup)",
        "(allow ipc-posix-shm)",
    ]
    if policy.read_root == "home":
        lines.append("(allow file-read*)")
    else:
        lines.append(
            "(allow file-read* "
            + " ".join(
                f"(subpath {_q(p)})"
                for p in (
                    "/usr",
                    "/bin",
                    "/sbin",
                    "/System",
                    "/Library",
                    "/opt",
                    "/private/etc",
                    "/dev",
                    *policy.readable,
                )
            )
            + ")"
        )
    for path in policy.hidden:
        lines.append(f"(deny file-read* file-write* (subpath {_q(path)}))")
    for path in policy.revealed:
        lines.append(f"(allow file-read* (subpath {_q(path)}))")
    writable = [*policy.writable, "/private/tmp", "/private/var/folders", "/dev/null"]
    lines.append("(allow file-write* " + " ".join(f"(subpath {_q(p)})" for p in writable) + ")")
    for path in policy.readonly_over:
        lines.append(f"(deny file-write* (subpath {_q(path)}))")
    if policy.network == "none":
        lines.append("(deny network*)")
    else:
        lines.append("(allow network-outbound (remote ip))")
        lines.append("(deny network-outbound (remote unix-socket))")
    return "\n".join(lines) + "\n"
