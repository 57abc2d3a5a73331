"""The same Policy as a macOS Seatbelt (``sandbox-exec``) profile, and the argv that runs it.

Seatbelt reads a profile as a list of rules and, for each operation, takes the
LAST rule that matches it (``(deny default)`` first, so what no rule allows is
refused). The order below is what makes it say what bwrap's mounts say:

1. what every process needs to run at all (each rule with its reason), with
   ``mach-lookup`` limited to the services a command-line agent uses: no
   LaunchServices (``open``), no pasteboard, no window server, and no other
   process's arguments or environment (``ps eww``);
2. reading: the system's folders (``SYSTEM_READ``); macOS's shared ``/tmp``
   and per-user temp folders refused, read and write (the Run's own temporary
   folder is one of its writable places, ``mactemp``); the person's home refused as a
   whole (a Run has a home of its own, ``macview``), and allowed back, read
   only, the allow-list Linux's Run sees of it: the project and its git
   folder, the toolchains and the agent's programs, ``sandbox.read``, the
   cleaned ``~/.gitconfig`` and the agent's config Owl copied in; then no
   terminal but the ptys the Run opened itself;
3. the Run's writable places (its worktree, what a commit needs of its
   store, its own home with its project's caches and its agent's state,
   ``sandbox.write``) with the hidden folders of Owl's that hold them,
   laid DEEPEST LAST: the rule on the longer path wins, so the worktree
   inside Owl's hidden folder is readable and writable;
4. the project's git folder denied for writing over that; no removing or
   replacing a writable folder itself (the rules come from resolved paths:
   a link left in its place would lead the next Run's rule elsewhere); no
   renaming a hidden path, or any folder above it, out of its place;
5. every other hidden path, LAST of every file rule: a secret inside a
   writable or readable folder (``sandbox.write``, ``sandbox.read``) stays
   hidden whatever allowed it before (hidden always wins, as bwrap's later
   mount does);
6. the network: no address reached directly but 127.0.0.1/::1 on the
   Policy's ports and on Owl's proxy's (``seatnet.py``, outside the Run, which
   refuses the host in every spelling by the address a name resolves to):
   Seatbelt names an address only as ``*`` or ``localhost``, so an allowed
   ``*`` with ``localhost`` refused after it would still reach the host as
   ``::ffff:127.0.0.1``, ``0.0.0.0``, another 127.x or its LAN address. No
   unix socket of the host but the resolver's and ``sandbox.sockets``;
   servers the Run starts bind the loopback only; ``network = false``: none.
   What Seatbelt cannot say: which 127.0.0.1 port is the Run's own server, so
   one it starts is reached from inside only on the Policy's ports (Go's
   ``httptest`` and supertest, on a random port, are refused).

Modelled on Anthropic's sandbox-runtime profile for macOS (its process,
sysctl, mach-lookup, IPC, ioctl and pty rules), narrowed where Owl's Policy
says less. Never run on a Mac here: tested on Linux by parsing the profile
and evaluating paths with Seatbelt's documented matching (``subpath``,
``literal``, ``regex``; last match wins).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from pathlib import Path

from .policy import Policy

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
ENV = "/usr/bin/env"
SEATNET = str(Path(__file__).with_name("seatnet.py"))
# Where the profile names its proxy's port until seatnet.py has one (seatnet.PLACEHOLDER).
EGRESS_PORT = "OWL_EGRESS_PORT"

# macOS resolves these symlinks before Seatbelt matches a path: the rules name the targets.
_FIRMLINKS = (("/tmp", "/private/tmp"), ("/var", "/private/var"), ("/etc", "/private/etc"))

# macOS's own folders a command needs to read (all a Run reads outside the allow-list).
SYSTEM_READ = (
    "/usr",
    "/bin",
    "/sbin",
    "/System",
    "/Library",
    "/opt",  # Homebrew on Apple silicon, MacPorts
    "/nix",
    "/private/etc",
    "/private/var/select",  # xcode-select's choice of developer tools
    "/private/var/db/xcode_select_link",
    "/private/var/db/timezone",
    "/private/var/run/resolv.conf",  # /etc/resolv.conf's target: Go's own resolver reads it
    "/Applications/Xcode.app",  # git and clang when Xcode is the chosen toolchain
    "/dev",
)

# Apple's services a command-line agent looks up, each with why (sandbox-runtime's list,
# without LaunchServices' launchservicesd: `open` and `NSWorkspace` start apps through it,
# outside the Run).
MACH_SERVICES = (
    ("com.apple.system.logger", "syslog(3) and os_log from every program"),
    ("com.apple.logd", "os_log"),
    ("com.apple.system.notification_center", "notify(3): the resolver and time zone watch it"),
    ("com.apple.system.opendirectoryd.libinfo", "getpwuid, getgrgid: who the user is"),
    ("com.apple.system.opendirectoryd.membership", "group membership for access checks"),
    ("com.apple.bsd.dirhelper", "confstr(_CS_DARWIN_USER_TEMP_DIR): the per-user temp folder"),
    ("com.apple.distributed_notifications@Uv3", "CoreFoundation's notifications"),
    ("com.apple.lsd.mapdb", "reading LaunchServices' type database (UTIs), not opening apps"),
    ("com.apple.FontObjectsServer", "fonts, for tools that render text (browsers under test)"),
    ("com.apple.fonts", "fonts"),
    ("com.apple.audio.systemsoundserver", "a terminal bell from a tool"),
    ("com.apple.PowerManagement.control", "power assertions a build tool takes"),
    ("com.apple.trustd.agent", "TLS certificate checks (git, curl and Go use the system's)"),
)
# No Keychain: its items are reached through securityd (com.apple.SecurityServer),
# but the login keychain's file is read by the calling process itself, and
# ~/Library/Keychains stays hidden. An agent logs in with a credential passed in
# (Claude Code: CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`, which Owl can
# hold: owl.sandbox.ownhome.held_token), and no Keychain item is within a Run's reach.

# Read-only machine facts (the Linux Run reads /proc/sys likewise).
SYSCTL_WRITE = ("kern.tcsm_enable",)  # V8 (Node) sets it when it sizes its threads

# macOS's /tmp and the per-user folders under /var/folders (the person's TMPDIR,
# and the caches confstr(_CS_DARWIN_USER_CACHE_DIR) names: clang's modules, ...)
# are shared by every program of the person's: refused, read and write. A Run's
# TMPDIR is a folder of its own under /private/tmp (mactemp), allowed as its
# other writable places are. The profile named no read there for macOS's own
# frameworks (it allowed both whole, as shared), so none is kept: dyld's shared
# cache is under /System, and dirhelper (a daemon) makes the per-user folders.
# Read, not run on a Mac: a framework that needs one would show as a refusal
# there. launchd's listeners in /tmp stay hidden by name as well.
SHARED_TMP = ("/private/tmp", "/private/var/folders")
LAUNCHD_LISTENERS = r"^/private/tmp/com\.apple\.launchd\."

# What stands for /proc/PID/cmdline and environ: another process's arguments
# and environment (the daemon's secrets among them) are read through these sysctls.
PROCARGS = ("kern.procargs",)  # kern.procargs and kern.procargs2

# The sandbox extension macOS gives a sandboxed process for a pty it opened
# itself (/dev/ptmx): its own terminals, not the person's.
PTY_EXTENSION = "com.apple.sandbox.pty"

DEVICES_RW = (
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/dtracehelper",
)


def _q(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def real(path: str) -> str:
    """``path`` as Seatbelt sees it: /tmp, /var and /etc are /private's."""
    for short, long in _FIRMLINKS:
        if path == short or path.startswith(short + "/"):
            return long + path[len(short) :]
    return path


def _re(path: str) -> str:
    """``path`` as a regular expression that matches it alone."""
    return "".join("\\" + c if c in ".^$*+?()[]{}|\\" else c for c in path)


def _depth(path: str) -> int:
    return len([p for p in path.split("/") if p])


def _ancestors(path: str) -> list[str]:
    out = []
    parent = posixpath.dirname(path)
    while parent not in ("/", ""):
        out.append(parent)
        parent = posixpath.dirname(parent)
    return out


def _base() -> list[str]:
    """What every process of the Run needs to run at all, each rule with its reason."""
    services = MACH_SERVICES
    return [
        "(version 1)",
        "; refused unless a later rule allows it",
        "(deny default)",
        "; a Run is a tree of processes: fork and exec (the profile holds for all of them)",
        "(allow process-fork)",
        "(allow process-exec)",
        "; ps, top, a test runner watching its workers: only the Run's own processes",
        "(allow process-info* (target same-sandbox))",
        "(allow signal (target same-sandbox))",
        "(allow mach-priv-task-port (target same-sandbox))",
        "; dyld maps the executable pages of every library (Homebrew's dylibs, node's addons)",
        "(allow file-map-executable)",
        "; CoreFoundation reads the person's defaults (locale, ...); it writes none",
        "(allow user-preference-read)",
        "; machine facts: CPU count, memory, OS version (read only)",
        "(allow sysctl-read)",
        "; but no other process's arguments and environment (`ps eww`, the daemon's secrets:",
        "; what /proc/PID/environ is on Linux); `ps` still lists pids and names",
        "(deny sysctl-read " + " ".join(f"(sysctl-name-prefix {_q(n)})" for n in PROCARGS) + ")",
        "; V8 sizes its threads by kern.tcsm_enable and writes it",
        "(allow sysctl-write " + " ".join(f"(sysctl-name {_q(n)})" for n in SYSCTL_WRITE) + ")",
        "; POSIX shared memory and semaphores: Python's multiprocessing, node's workers",
        "(allow ipc-posix-shm)",
        "(allow ipc-posix-sem)",
        "; IOKit: power source and surface facts the frameworks read (no device opened)",
        "(allow iokit-get-properties)",
        '(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))',
        "; socket(2) itself; where it may connect is said under the network",
        "(allow system-socket)",
        "; Mach services by name: these only (not LaunchServices, the pasteboard, the window "
        "server or Apple Events, through which a process leaves the Run)",
        "(allow mach-lookup",
        *(f"  (global-name {_q(name)}) ; {why}" for name, why in services),
        ")",
        "; the devices every shell uses",
        "(allow file-read* file-write* file-ioctl "
        + " ".join(f"(literal {_q(d)})" for d in DEVICES_RW)
        + ")",
        '(allow file-read* file-write* (regex #"^/dev/fd/"))',
        "; a terminal of its own: script(1), expect, an agent's own pty for its tools",
        "(allow pseudo-tty)",
        '(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))',
    ]


def _terminals() -> list[str]:
    """After the reads, which would open every /dev/ttysNNN: the person's
    terminals (Terminal's windows, the same user's ptys) are neither read (their
    keys), written, nor controlled (TIOCSTI); the ptys the Run opened are its own."""
    ttys = '(regex #"^/dev/ttys[0-9]+$")'
    return [
        "; no terminal but the ptys it opened (macOS marks them with this extension):",
        "; the person's are /dev/ttysNNN of the same user",
        f"(deny file-read* file-write* file-ioctl {ttys})",
        f"(allow file-read* file-write* file-ioctl (require-all {ttys} "
        f"(extension {_q(PTY_EXTENSION)})))",
    ]


def _own(policy: Policy) -> tuple[list[str], list[str]]:
    """The Run's own places Owl keeps (``ownhome``: its home, and the folders
    and files linked into it, ``macview``): those it only reads, those it writes."""
    ro = [s for s, _, w in policy.own_binds if not w]
    rw = [policy.own_home, *(s for s, _, w in policy.own_binds if w)] if policy.own_home else []
    return [real(p) for p in ro], [real(p) for p in rw]


def _writable(policy: Policy) -> list[str]:
    return [*(real(p) for p in policy.writable), *_own(policy)[1]]


def _split_hidden(policy: Policy) -> tuple[list[str], list[str]]:
    """The hidden paths that hold a place of the Run's (Owl's folder around its
    worktree, its store, its home: laid deepest last, the place's rule wins),
    and every other (laid last of all: nothing allowed before reveals one)."""
    places = [*_writable(policy), *(real(p) for p in policy.revealed), *_own(policy)[0]]
    inner: list[str] = []
    outer: list[str] = []
    for h in (real(p) for p in policy.hidden):
        holds = any(p != h and p.startswith(h.rstrip("/") + "/") for p in places)
        (inner if holds else outer).append(h)
    return inner, outer


def _reads(policy: Policy) -> list[str]:
    """The system's folders; the shared temporary folders refused; the
    person's home refused as a whole; then, of it and elsewhere, what the Run
    reads."""
    system = " ".join(f"(subpath {_q(p)})" for p in SYSTEM_READ)
    shared = " ".join(f"(subpath {_q(p)})" for p in SHARED_TMP)
    out = [
        "; reading: the system's own folders",
        f"(allow file-read* {system})",
        '(allow file-read-metadata (literal "/"))',
        "; macOS's /tmp and per-user temp folders are shared with the person's programs:",
        "; neither read nor written (what a Run left there, their tools would read; what",
        "; they leave, it would); its TMPDIR is a folder of its own, allowed below",
        f"(deny file-read* file-write* {shared})",
    ]
    if policy.home:
        out += [
            "; the person's home as a whole: neither read nor written (the Run has its own)",
            f"(deny file-read* file-write* (subpath {_q(real(policy.home))}))",
        ]
    places = [real(p) for p in policy.readable]
    if places:
        out += [
            "; read only: the project and its git folder, the toolchains and programs,",
            "; sandbox.read (the cleaned git config and the Job's store: below, in Owl's folder)",
            "(allow file-read* " + " ".join(f"(subpath {_q(p)})" for p in places) + ")",
        ]
    return out


def _layers(policy: Policy, saved: Sequence[str] = ()) -> list[str]:
    """The Run's writable places, and the store it reads, deepest last with
    the hidden folders of Owl's that hold them: the longer path's rule wins;
    beside each of ``saved`` (its agent's state files), the file it is saved
    through."""
    out = ["; writable (allowed) paths and the hidden folders around them, the deeper one last"]
    out += _deepest_last(
        policy,
        "(deny file-read* file-write* {})",
        "(allow file-read* file-write* {})",
        read="(allow file-read* {})",
    )
    own = set(_own(policy)[1][1:])
    files = [real(p) for p in saved if real(p) in own]
    if files:
        # Claude Code saves ~/.claude.json (a link here) by writing a new file
        # beside where the link leads, `NAME.tmp.PID.HEX`, and renaming it over;
        # beside a cache or a state folder nothing is saved so
        out.append("; a state file saved through its link: a new file beside it renamed over it")
        out += [f'(allow file-read* file-write* (regex #"^{_re(p)}\\.[^/]+$"))' for p in files]
    # realpath(3) and git stat every folder above the worktree, some of them hidden
    above = sorted({a for p in _writable(policy) for a in _ancestors(p)})
    if above:
        out.append("; the folders above a writable path may be looked at, not listed")
        out.append(
            "(allow file-read-metadata " + " ".join(f"(literal {_q(a)})" for a in above) + ")"
        )
    return out


def _hidden(policy: Policy) -> list[str]:
    """Every other hidden path, after every rule that allows a file: hidden wins."""
    _, outer = _split_hidden(policy)
    out = ["; hidden, last: no rule above reveals one (Seatbelt: the last match wins)"]
    out += [f"(deny file-read* file-write* (subpath {_q(h)}))" for h in outer]
    out.append(f'(deny file-read* file-write* (regex #"{LAUNCHD_LISTENERS}"))')
    return out


def _deepest_last(policy: Policy, deny: str, allow: str, read: str | None = None) -> list[str]:
    """A rule per hidden folder of Owl's that holds a place of the Run's and
    per writable path (``{}``: its ``subpath``), and with ``read`` per place
    read only inside such a folder (the Job's git store, the cleaned git
    config), shallower first: on a path under several, the longest one's
    rule is the last that matches."""
    inner, _ = _split_hidden(policy)
    layers = [(p, 0) for p in inner]
    if read is not None:
        layers += [(p, 1) for p in (*(real(p) for p in policy.revealed), *_own(policy)[0])]
    layers += [(p, 2) for p in _writable(policy)]
    layers.sort(key=lambda item: (_depth(item[0]), item[1]))
    rules = (deny, read or deny, allow)
    return [rules[kind].format(f"(subpath {_q(path)})") for path, kind in layers]


def _over(policy: Policy) -> list[str]:
    out = []
    if policy.readonly_over:
        out.append("; read only over what is writable (the project's git folder)")
        out += [f"(deny file-write* (subpath {_q(real(p))}))" for p in policy.readonly_over]
    tops = " ".join(f"(literal {_q(p)})" for p in _writable(policy))
    if tops:
        # the rules come from resolved paths (macview.resolved): a writable folder
        # swapped for a link (~/.cache -> ~) would take the next Run's rule with it
        out.append("; a writable folder is written in, not removed (to leave a link in its place)")
        out.append(
            f"(deny file-write-unlink (require-all (vnode-type DIRECTORY) (require-any {tops})))"
        )
    # (what is inside a hidden path is denied writing already, unlink included)
    hidden = [real(p) for p in policy.hidden]
    keep = sorted({*hidden, *(a for p in hidden for a in _ancestors(p))})
    if keep:
        out.append("; a hidden path, or a folder above it, is not renamed out of the rules' reach")
        out.append("(deny file-write-unlink " + " ".join(f"(literal {_q(a)})" for a in keep) + ")")
    return out


def _network(policy: Policy) -> list[str]:
    # unix sockets in the Run's own folders, not in what is hidden there
    own = _deepest_last(
        policy,
        "(deny network-outbound (remote unix-socket {}))",
        "(allow network-bind (local unix-socket {}))\n"
        "(allow network-outbound (remote unix-socket {}))".replace("{}", "{0}"),
    )
    own = [ln for rule in own for ln in rule.split("\n")]
    for h in _split_hidden(policy)[1]:  # hidden wins here too
        own.append(f"(deny network-outbound (remote unix-socket (subpath {_q(h)})))")
        own.append(f"(deny network-bind (local unix-socket (subpath {_q(h)})))")
    if policy.network == "none":
        return [
            "; network = false: none, but unix sockets the Run makes in its own folders",
            "(deny network*)",
            *own,
        ]
    out = [
        "; the network: through Owl's proxy outside the Run (seatnet.py) and nothing else.",
        "; Seatbelt names no address but * and localhost (127.0.0.1, ::1): an allowed *",
        "; with localhost refused after it would still reach the host as ::ffff:127.0.0.1,",
        "; 0.0.0.0, another 127.x or the Mac's LAN address. The proxy refuses those by the",
        "; address each name resolves to; no other address is reached directly",
        f'(allow network-outbound (remote ip "localhost:{EGRESS_PORT}"))',
    ]
    if policy.host_ports:
        out.append(
            "; the host's loopback on the agent's own ports (its provider, sandbox.host_ports)"
        )
        out += [f'(allow network-outbound (remote ip "localhost:{p}"))' for p in policy.host_ports]
    out += [
        "; servers the Run starts listen on the loopback only (not the LAN); they are",
        "; reached from inside only on the ports above: Seatbelt cannot tell the Run's",
        "; own port from the host's",
        '(allow network-bind network-inbound (local ip "localhost:*"))',
        "; no unix socket of the host (ssh-agent, Docker, launchd's listeners): the resolver's only",
        '(allow network-outbound (remote unix-socket (literal "/private/var/run/mDNSResponder")))',
        "; and its own, in its own folders",
        *own,
    ]
    if policy.sockets:
        out.append("; the host's sockets opened on purpose (sandbox.sockets)")
        out += [
            f"(allow network-outbound (remote unix-socket (literal {_q(real(p))})))"
            for p in policy.sockets
        ]
    return out


def profile(policy: Policy, saved: Sequence[str] = ()) -> str:
    """The profile text for ``policy``; ``saved``: the Run's own agent-state
    files (``macview.state_files``), each saved through its link."""
    lines = [
        *_base(),
        *_reads(policy),
        *_terminals(),
        *_layers(policy, saved),
        *_over(policy),
        *_hidden(policy),
        *_network(policy),
    ]
    return "\n".join(lines) + "\n"


def with_egress(text: str, port: int) -> str:
    """The profile with its proxy's port (``seatnet.py`` does this at the Run's start)."""
    return text.replace(EGRESS_PORT, str(port))


def profile_of(argv: Sequence[str]) -> str:
    """The profile in a Run's argv (the element after sandbox-exec's ``-p``)."""
    return argv[list(argv).index(SANDBOX_EXEC) + 2]


def argv(policy: Policy, command: Sequence[str], saved: Sequence[str] = ()) -> list[str]:
    """``sandbox-exec -p PROFILE env -u SECRET… TMPDIR=… command…``: the profile
    holds from the first instruction of ``env`` on, for it and all it starts;
    ``env`` drops what the Policy drops (bwrap's --unsetenv/--setenv). Both exec:
    the agent is the process Owl started, and SIGTERM reaches it directly.
    (``env`` takes a first word with ``=`` for a variable: agents' programs have none.)"""
    out = [SANDBOX_EXEC, "-p", profile(policy, saved), ENV]
    for name in policy.env_unset:
        out += ["-u", name]
    out += [f"{name}={value}" for name, value in policy.env_set]
    return [*out, *command]


def label(policy: Policy) -> str:
    """What `owl jobs show` says of a Run contained so."""
    if policy.network == "none":
        return "contained: Seatbelt, no network"
    ports = ", ".join(str(p) for p in policy.host_ports)
    return "contained: Seatbelt, network through Owl's proxy" + (
        f" (the host's loopback: ports {ports})" if ports else " (not the host's loopback)"
    )
