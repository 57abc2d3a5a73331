"""macOS LaunchAgent: `~/Library/LaunchAgents/dev.owl.plist`.

Pure file writing with plistlib from `templates/dev.owl.plist`: the agent
runs at login in the Aqua (GUI) session, since the tray needs one, and is
not kept alive, so Quit from the menu stays quit. It is picked up at the
next login; nothing is loaded into launchd now.

launchd starts a login item with its own PATH (`/usr/bin:/bin:/usr/sbin:
/sbin`), no LANG, and stdout/stderr on /dev/null. Agents are found on PATH
and inherit the daemon's environment, so the PATH and locale of the session
that turned start-at-login on are recorded in the plist, and launchd's
output goes to a file in Owl's log folder (where the daemon logs too).
"""

from __future__ import annotations

import os
import plistlib
import signal
import subprocess
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from owl.autostart.command import install, owl_environment, template, uninstall

LABEL = "dev.owl"
LOG_NAME = "owl.log"  # the daemon's own log file, in Owl's log folder
# What a login session lacks and an agent needs, taken from the session
# that turns start-at-login on.
SESSION_VARIABLES = ("PATH", "LANG", "LC_ALL", "LC_CTYPE")
LAUNCHD_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"  # what launchd gives its jobs
LOGIN_SHELL_TIMEOUT = 5.0
_MARK = "OWL-LOGIN-PATH="
FORCE_VARIABLE = "OWL_TAKE_LOGIN_PATH"  # "1": mend PATH off macOS too (tests); "0": never


def path() -> Path:
    return Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def session_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """PATH and locale of this session: what launchd would not give the agent.

    Turned on from a tray that Finder or launchd started, PATH is launchd's
    own; the login shell's PATH (where Homebrew, nvm and npm put theirs) is
    asked for instead."""
    env = os.environ if environ is None else environ
    out = {k: env[k] for k in SESSION_VARIABLES if env.get(k)}
    if out.get("PATH", LAUNCHD_PATH) == LAUNCHD_PATH:
        path = login_shell_path(env)
        if path:
            out["PATH"] = path
    return out


SAID_KEPT = 2000  # of what the shell printed, the last characters kept to show


@dataclass(frozen=True)
class LoginPath:
    """What asking the login shell for its PATH gave: the PATH, or why not,
    with the command tried and what the shell printed before it ended or
    was ended (its rc files' own output, a tmux they exec'd, ...)."""

    path: str | None
    tried: str  # "/bin/zsh -l -i -c 'printf …'"
    why: str | None = None  # "gave no PATH", "did not answer within 5 s", ...
    said: str = ""


def login_shell_path(environ: Mapping[str, str]) -> str | None:
    """PATH as the person's login shell sets it up, or None if it cannot tell."""
    return read_login_path(environ).path


def read_login_path(environ: Mapping[str, str], timeout: float | None = None) -> LoginPath:
    """Ask ``$SHELL -l -i`` for its PATH, within a bound (LOGIN_SHELL_TIMEOUT).

    The shell runs in a session of its own: past the bound the whole of it
    (a background job an rc file started that holds the output open) is
    killed, and what it printed until then is kept."""
    shell = environ.get("SHELL") or "/bin/zsh"
    script = f'printf "\\n{_MARK}%s\\n" "$PATH"'
    tried = f"{shell} -l -i -c '{script}'"
    bound = LOGIN_SHELL_TIMEOUT if timeout is None else timeout
    try:
        proc = subprocess.Popen(
            [shell, "-l", "-i", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(environ),
            start_new_session=True,
        )
    except OSError as e:
        return LoginPath(None, tried, f"could not start: {e.strerror or e}")
    try:
        out, _ = proc.communicate(timeout=bound)
        why = None if proc.returncode == 0 else f"exited with status {proc.returncode}"
    except subprocess.TimeoutExpired as e:
        out = e.output or b""
        why = f"did not answer within {bound:g} s"
        _end(proc)
    text = out.decode("utf-8", "replace")
    for line in reversed(text.splitlines()):
        if line.startswith(_MARK) and line[len(_MARK) :]:
            return LoginPath(line[len(_MARK) :], tried)
    said = text[-SAID_KEPT:]
    return LoginPath(None, tried, why or "printed no PATH", said)


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Kill the shell and all its session left (a background job, a tmux)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def mend_path(
    environ: MutableMapping[str, str] | None = None, platform: str | None = None
) -> tuple[str, str]:
    """At the daemon's start: take the login shell's PATH when a service
    manager's is all there is, and say which PATH this process (and every Run)
    uses.

    Owl.app opened from Finder, the Dock or `open` gets launchd's PATH, where
    neither `claude` nor `node` is found; the LaunchAgent carries a PATH of its
    own, but an app started by hand does not. Likewise a daemon the systemd
    user manager runs (`MANAGERPID` set: the user unit, or the unit systemd makes
    of the XDG autostart entry) gets the manager's PATH, without the
    `~/.local/bin` where Claude Code's installer puts `claude` and the
    person's `~/.profile` adds it: there the login shell's PATH comes first and
    the manager's own folders follow. On macOS and under a user manager (or
    with OWL_TAKE_LOGIN_PATH=1; =0 turns it off). Returns (PATH, where from)."""
    env = os.environ if environ is None else environ
    force = env.get(FORCE_VARIABLE, "").strip()
    path_now = env.get("PATH", "")
    darwin = (platform or sys.platform) == "darwin"
    managed = not darwin and bool(env.get("MANAGERPID")) and force != "0"
    wanted = force == "1" or (darwin and force != "0")
    if not managed and (not wanted or path_now not in ("", LAUNCHD_PATH)):
        return path_now, "inherited"
    shell = env.get("SHELL") or ("/bin/zsh" if darwin else _passwd_shell())
    read = read_login_path(dict(env, SHELL=shell))
    _last_read["read"] = read
    who = "the user manager" if managed else "launchd"
    if not read.path:
        return path_now, f"{who}'s; the login shell {shell} gave none: {read.why}"
    if managed:
        env["PATH"] = merged(read.path, path_now)
    else:
        env["PATH"] = read.path
    return env["PATH"], f"from the login shell {shell}; {who} gave {path_now or 'none'}"


def merged(first: str, then: str) -> str:
    """PATH `first`, then the folders of `then` it lacks, in their order."""
    out: list[str] = []
    for part in [*first.split(os.pathsep), *then.split(os.pathsep)]:
        if part and part not in out:
            out.append(part)
    return os.pathsep.join(out)


def _passwd_shell() -> str:
    """The person's login shell as the password database names it (a user
    manager's environment may carry no SHELL)."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    except (ImportError, KeyError):
        return "/bin/sh"


_last_read: dict[str, LoginPath] = {}


def path_read() -> LoginPath | None:
    """What the daemon's start got asking the login shell for PATH (None: not asked)."""
    return _last_read.get("read")


def log_file() -> Path:
    """Where launchd sends Owl's stdout and stderr (the daemon's log file)."""
    from owl.settings.paths import get_paths

    return get_paths().logs / LOG_NAME


def render(argv: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> bytes:
    doc = plistlib.loads(template(f"{LABEL}.plist"))
    doc["Label"] = LABEL
    doc["ProgramArguments"] = list(argv)
    if env:
        doc["EnvironmentVariables"] = dict(env)
    else:
        doc.pop("EnvironmentVariables", None)
    if log is not None:
        doc["StandardOutPath"] = doc["StandardErrorPath"] = str(log)
    return plistlib.dumps(doc, fmt=plistlib.FMT_XML)


def enable(argv: list[str]) -> Path:
    log = log_file()
    # launchd opens the file but does not create its folder.
    from owl.settings.paths import make_private_dir

    make_private_dir(log.parent)
    env = {**session_environment(), **owl_environment()}
    return install(path(), render(argv, env, log))


def disable() -> Path:
    return uninstall(path())


def status() -> tuple[bool, Path]:
    target = path()
    try:
        doc = plistlib.loads(target.read_bytes())
    except (FileNotFoundError, plistlib.InvalidFileException, ValueError):
        return False, target
    return not doc.get("Disabled", False), target
