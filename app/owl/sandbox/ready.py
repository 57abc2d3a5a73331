"""Whether a Run can be contained here; if not, one line: why, and what fixes it.

``bwrap.probe`` says what went wrong in bubblewrap's words ("bwrap: setting up
uid map: Permission denied"); a person needs the cause and the command that
removes it, for their distribution: the package to install (apt, dnf,
pacman, zypper, apk, from ``/etc/os-release``), or Ubuntu's AppArmor rule
that forbids unprivileged user namespaces
(``kernel.apparmor_restrict_unprivileged_userns = 1``, Ubuntu 23.10 and
later), whose own fix is the AppArmor profile Ubuntu ships for bwrap.

``explain`` is pure (the host's facts are handed in) and table-tested;
``ask`` probes afresh (a process: never on the engine's thread) and keeps the
answer, which ``last`` and ``problem`` give without starting anything.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass

from . import bwrap, seatexec

OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")
APPARMOR_USERNS = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
USERNS_CLONE = "/proc/sys/kernel/unprivileged_userns_clone"
MAX_USERNS = "/proc/sys/user/max_user_namespaces"

# What bwrap says when the kernel (or a security module) refuses it a user namespace.
USERNS_WORDS = (
    "uid map",
    "gid map",
    "no permissions to create new namespace",
    "creating new namespace failed",
    "failed rtm_newaddr",
    "unshare",
)

# Ubuntu's own fix: the profile for /usr/bin/bwrap that the apparmor-profiles
# package ships (Ubuntu 24.04; later releases load it with apparmor itself).
APPARMOR_FIX = (
    "sudo apt install apparmor-profiles && sudo install -m 0644 "
    "/usr/share/apparmor/extra-profiles/bwrap-userns-restrict /etc/apparmor.d/ && "
    "sudo apparmor_parser -r /etc/apparmor.d/bwrap-userns-restrict"
)


@dataclass(frozen=True)
class Host:
    """What the machine says of itself, as read from its files (None: not there)."""

    os_release: str = ""
    apparmor_userns: str | None = None
    userns_clone: str | None = None
    max_userns: str | None = None


@dataclass(frozen=True)
class Answer:
    """One probe's answer: None, or the line that says why and what fixes it."""

    problem: str | None
    at: float  # time.monotonic() when asked


def _distro(os_release: str) -> set[str]:
    """The ID and ID_LIKE words of an os-release file."""
    words: set[str] = set()
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("ID", "ID_LIKE"):
            words |= set(value.strip().strip("\"'").lower().split())
    return words


def install_command(os_release: str) -> str:
    """How bubblewrap is installed on this distribution."""
    ids = _distro(os_release)
    ids |= {"opensuse"} if any(i.startswith("opensuse") for i in ids) else set()
    for names, command in (
        ({"debian", "ubuntu"}, "sudo apt install bubblewrap"),
        ({"fedora", "rhel", "centos"}, "sudo dnf install bubblewrap"),
        ({"arch"}, "sudo pacman -S bubblewrap"),
        ({"suse", "opensuse"}, "sudo zypper install bubblewrap"),
        ({"alpine"}, "sudo apk add bubblewrap"),
        ({"gentoo"}, "sudo emerge sys-apps/bubblewrap"),
    ):
        if ids & names:
            return command
    return "install the bubblewrap package"


def explain(why: str, host: Host) -> str:
    """The probe's ``why`` as one line a person can act on."""
    low = why.lower()
    if low.startswith("bubblewrap is not installed"):
        return f"bubblewrap is not installed ({install_command(host.os_release)})"
    said = why.split(": ", 1)[1] if low.startswith("bwrap cannot make a sandbox here: ") else why
    if not any(w in low for w in USERNS_WORDS):
        return f"bwrap cannot make a sandbox here: {said}"
    if host.apparmor_userns == "1":
        ubuntu = "ubuntu" in _distro(host.os_release)
        return (
            f"bwrap cannot make a sandbox here ({said}): "
            + ("Ubuntu's " if ubuntu else "")
            + "AppArmor forbids unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns = 1); give bwrap its AppArmor "
            f"profile: {APPARMOR_FIX}"
        )
    if host.userns_clone == "0":
        return (
            f"bwrap cannot make a sandbox here ({said}): user namespaces are turned off "
            "(kernel.unprivileged_userns_clone = 0): sudo sysctl -w "
            "kernel.unprivileged_userns_clone=1"
        )
    if host.max_userns == "0":
        return (
            f"bwrap cannot make a sandbox here ({said}): user namespaces are turned off "
            "(user.max_user_namespaces = 0): sudo sysctl -w user.max_user_namespaces=15000"
        )
    return (
        f"bwrap cannot make a sandbox here ({said}): this system does not let it make "
        "a user namespace (inside a container, allow nested user namespaces)"
    )


def waiting_words(problem: str) -> str:
    """The one line Jobs held for their sandbox wait with: why, and what fixes it."""
    return (
        f"Runs cannot be contained: {problem}; they wait until they can "
        '(sandbox.mode = "auto" runs them uncontained)'
    )


def _read(path: str, limit: int = 8192) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def host() -> Host:
    """This machine's facts (small files; nothing is run)."""
    release = next((t for p in OS_RELEASE if (t := _read(p)) is not None), "")

    def value(path: str) -> str | None:
        text = _read(path, 64)
        return None if text is None else text.strip()

    return Host(release, value(APPARMOR_USERNS), value(USERNS_CLONE), value(MAX_USERNS))


_lock = threading.Lock()
_last: list[Answer] = []


def ask() -> str | None:
    """Probe bwrap (Seatbelt's sandbox-exec on macOS) afresh (a process: never on the engine's thread); the line
    that says why a sandbox cannot be made here, or None when it can."""
    if sys.platform == "darwin":  # Seatbelt: part of macOS, said in its own words
        answer = Answer(seatexec.probe(fresh=True), time.monotonic())
    else:
        why = bwrap.probe(fresh=True)
        answer = Answer(None if why is None else explain(why, host()), time.monotonic())
    with _lock:
        _last[:] = [answer]
    return answer.problem


def last() -> Answer | None:
    """The last answer, or None when nothing was asked yet (nothing is started)."""
    with _lock:
        return _last[0] if _last else None


def problem() -> str | None:
    """The last answer's line, probing once when nothing was asked yet."""
    answer = last()
    if answer is None:
        return ask()
    return answer.problem
