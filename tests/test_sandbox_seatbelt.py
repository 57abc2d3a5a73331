"""The macOS Seatbelt profile, rule by rule against what a contained Linux Run may reach.

No Mac here: the profile is parsed and every path is decided by a small
evaluator that follows Seatbelt's documented semantics (the last matching rule
wins; subpath, literal, regex; see support/seatbelt_eval.py). Each Linux
guarantee (tests/test_sandbox_policy.py, the README's table) is asked of it."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest
from owl.sandbox import (
    agentstate,
    contain,
    folders,
    mactemp,
    macview,
    ownhome,
    policy,
    seatbelt,
    seatexec,
    toolplaces,
)
from support.seatbelt_eval import allowed, parse, rules

HOME = "/Users/me"
OWL = f"{HOME}/Library/Application Support/owl"
# a Job made before the worktrees left the data folder: its worktree is still there
WT = f"{OWL}/worktrees/job-1"
RUNTIME = f"{HOME}/Library/Caches/TemporaryItems/owl"
PROJECT = f"{HOME}/code/api"
STORE = f"{OWL}/worktrees/job-1.git"  # the Job's own git store, beside its worktree
EGRESS = 50123  # the port seatnet.py's proxy got
# The Run's own places (ownhome), where Owl keeps them on macOS: no space in the path.
KEEP = f"{HOME}/.local/share/owl/sandbox"
OWN = f"{KEEP}/jobs/job-1/home"
CACHES = f"{KEEP}/projects/api-1a2b/caches"
STATE = f"{KEEP}/projects/api-1a2b/agents/claude-3c4d"
OWN_BINDS = (
    (f"{CACHES}/cache-1", f"{HOME}/.cache", True),
    (f"{CACHES}/npm-2", f"{HOME}/.npm", True),
    (f"{CACHES}/Caches-3", f"{HOME}/Library/Caches", True),
    (f"{STATE}/claude-4", f"{HOME}/.claude", True),
    (f"{STATE}/claude.json-5", f"{HOME}/.claude.json", True),
    (f"{KEEP}/jobs/job-1/gitconfig", f"{HOME}/.gitconfig", False),
)
# The Run's temporary folder of its own (mactemp), its TMPDIR.
TMP_SLOT = "/private/tmp/owl-501/job-1.claude"  # the Job's and agent's, in the profile
RUN_TMP = f"{TMP_SLOT}/0a1b2c3d"  # this Run's, its TMPDIR


@pytest.fixture(autouse=True)
def private_tmp(monkeypatch, tmp_path_factory):
    """Where a Run's temporary folder is made on macOS (``/private/tmp``,
    which Linux has not): a folder of this test's."""
    root = tmp_path_factory.mktemp("private-tmp")
    monkeypatch.setattr(mactemp, "ROOT", str(root))
    return root


def facts(**kw: object) -> policy.Facts:
    base: dict = {
        "home": HOME,
        "user_home": HOME,
        "worktree": WT,
        "git_common": STORE,
        "git_admin": f"{STORE}/worktrees/job-1",
        "project_git": f"{PROJECT}/.git",
        "project": PROJECT,
        "owl_home": (OWL, f"{HOME}/Library/Logs/owl", RUNTIME, KEEP),
        "runtime_dir": None,
        "env": {
            "HOME": HOME,
            "GITHUB_TOKEN": "t",
            "ANTHROPIC_API_KEY": "a",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:4123",
            "PATH": "/opt/homebrew/bin:/usr/bin",
        },
        "own_home": OWN,
        "own_binds": OWN_BINDS,
    }
    base.update(kw)
    return policy.Facts(**base)


def mac_policy(
    settings: policy.Settings | None = None, agent: str = "claude", **kw: object
) -> policy.Policy:
    """The Policy as macOS's wrapping hands it to seatbelt.py (``macview``; the
    paths here need no resolving)."""
    f = facts(**kw)
    pol = policy.compute(
        settings or policy.Settings(), agentstate.AGENTS.get(agent, agentstate.AgentState()), f
    )
    return macview.with_tmp(macview.at_home(macview.hidden(pol, f), f.env), TMP_SLOT, RUN_TMP)


def make(settings: policy.Settings | None = None, agent: str = "claude", **kw: object) -> str:
    pol = mac_policy(settings, agent, **kw)
    # the agent's state files (macview.state_files reads which own places are files)
    saved = [s for s, _, w in pol.own_binds if w and s.endswith(".json-5")]
    return seatbelt.with_egress(seatbelt.profile(pol, saved), EGRESS)


def text_of(argv: list[str]) -> str:
    """The profile a Run's argv carries, its proxy's port as seatnet.py gives it."""
    return seatbelt.with_egress(seatbelt.profile_of(argv), EGRESS)


def can_read(text: str, path: str) -> bool:
    return allowed(text, "file-read-data", path=path)


def can_write(text: str, path: str) -> bool:
    return allowed(text, "file-write-data", path=path) and allowed(
        text, "file-write-create", path=path
    )


def test_the_worktree_is_readable_and_writable_though_owls_folder_around_it_is_hidden():
    text = make()
    for path in (WT, f"{WT}/src/main.py", f"{WT}/.git"):
        assert can_read(text, path) and can_write(text, path), path
    assert allowed(text, "file-write-unlink", path=f"{WT}/old.txt")  # rm, mv inside it
    # the rest of Owl's folders: the database, other Jobs' worktrees, the logs, the socket
    for path in (
        f"{OWL}/owl.db",
        f"{OWL}/worktrees/job-2/secret.txt",
        f"{HOME}/Library/Logs/owl/owl.log",
        f"{RUNTIME}/owl.sock",
    ):
        assert not can_read(text, path) and not can_write(text, path), path
    # realpath and git may stat the folders above the worktree, not list or read them
    assert allowed(text, "file-read-metadata", path=f"{OWL}/worktrees")
    assert not allowed(text, "file-read-data", path=f"{OWL}/worktrees")


def test_what_a_commit_needs_is_writable_and_git_config_hooks_info_are_read_only():
    """The Job's own store, inside Owl's hidden folder: its objects, refs, logs
    and the worktree's admin folder writable, the rest of it read only; the
    project's own git folder read only; another Job's store hidden."""
    text = make()
    for path in (
        f"{STORE}/objects/ab/cdef",
        f"{STORE}/refs/heads/owl/job-1",
        f"{STORE}/logs/HEAD",
        f"{STORE}/worktrees/job-1/index",
    ):
        assert can_write(text, path), path
    for path in (
        f"{STORE}/config",
        f"{STORE}/hooks/pre-commit",
        f"{STORE}/info/exclude",
        f"{STORE}/packed-refs",
        f"{PROJECT}/.git/config",
        f"{PROJECT}/.git/refs/heads/main",
        f"{PROJECT}/.git/objects/ab/cdef",
    ):
        assert can_read(text, path) and not can_write(text, path), path
    assert not can_read(text, f"{OWL}/worktrees/job-2.git/config")


def test_the_runs_own_home_caches_and_state_are_writable_the_persons_are_not():
    """The Run's home is Owl's folder; its caches and its agent's state are
    Owl's (per project, per agent), linked into it. The person's home is
    refused as a whole: their caches, their agent's state, their dotfiles."""
    text = make()
    for path in (
        f"{OWN}/.zsh_history",
        f"{OWN}/.config/tool/settings",
        f"{STATE}/claude-4/projects/x.jsonl",
        f"{STATE}/claude.json-5",
        f"{CACHES}/npm-2/_cacache/x",
        f"{CACHES}/Caches-3/pip/http/x",
        f"{RUN_TMP}/build.o",
    ):
        assert can_read(text, path) and can_write(text, path), path
    for path in (
        f"{HOME}/.claude/projects/x.jsonl",
        f"{HOME}/.claude.json",
        f"{HOME}/.claude/settings.json",
        f"{HOME}/.npm/_npx/x/index.js",
        f"{HOME}/Library/Caches/pip/x",
        f"{HOME}/Documents/notes.txt",
        f"{HOME}/.zshrc",
        f"{HOME}/.codex/config.toml",  # another agent's state
        f"{HOME}/.copilot/config.json",
        f"{HOME}/code/other/src/a.py",  # another project
        f"{KEEP}/jobs/job-2/home/.zsh_history",  # another Job's home
        f"{KEEP}/projects/web-9e8f/caches/npm-2/x",  # another project's caches
    ):
        assert not can_read(text, path) and not can_write(text, path), path
    for path in (
        "/usr/bin/git",
        "/opt/homebrew/bin/node",
        f"{PROJECT}/README.md",
        "/private/var/run/resolv.conf",
    ):
        assert can_read(text, path) and not can_write(text, path), path
    # the person's own agent config, which Owl reads: not renamed away either
    assert not allowed(text, "file-write-unlink", path=f"{HOME}/.claude/settings.json")
    # the cleaned git config: read, not written
    gitconfig = f"{KEEP}/jobs/job-1/gitconfig"
    assert can_read(text, gitconfig) and not can_write(text, gitconfig)


def test_a_state_file_is_saved_as_claude_code_saves_it_through_its_link():
    """Measured with Claude Code 2.1.332 (strace, ~/.claude.json a link): it
    reads the link, writes ``TARGET.tmp.PID.HEX`` beside where it leads and
    renames that over the target. The sibling named after the Run's own place
    may be made and renamed over it; nothing else in Owl's folder around it."""
    text = make()
    target = f"{STATE}/claude.json-5"
    temp = f"{target}.tmp.15337.fb2f4f49b1e5"
    for op in ("file-write-create", "file-write-data", "file-write-unlink"):
        assert allowed(text, op, path=temp), op
    assert allowed(text, "file-write-create", path=target)
    for path in (f"{STATE}/other.json", f"{STATE}/claude.json-5x", f"{temp}/deeper"):
        assert not can_write(text, path), path
    # nothing is saved so beside a cache or a state folder: no file beside one
    for place in (
        f"{CACHES}/cache-1",
        f"{CACHES}/npm-2",
        f"{CACHES}/Caches-3",
        f"{STATE}/claude-4",
    ):
        for path in (f"{place}.tmp.15337.fb2f4f49b1e5", f"{place}.old", f"{place}.d"):
            assert not can_write(text, path), path
            assert not allowed(text, "file-write-unlink", path=path), path


def test_the_run_is_told_its_own_home_is_home():
    """HOME (libc, git, Node, Python, Go, Rust) and CFFIXED_USER_HOME
    (CoreFoundation's NSHomeDirectory) are the Run's own home; a variable
    naming a place in the person's home is moved into the Run's, but for
    what the Run reads of theirs (a toolchain) and lists (PATH)."""
    env = {
        **facts().env,
        "CARGO_HOME": f"{HOME}/.cargo",
        "RUSTUP_HOME": f"{HOME}/.rustup",
        "HISTFILE": f"{HOME}/.zsh_history",
        "PATH": f"{HOME}/.cargo/bin:/usr/bin",
        "PROJECT_DIR": f"{PROJECT}/src",
    }
    pol = mac_policy(env=env)
    inside = policy.agent_env(env, pol)
    assert inside["HOME"] == OWN and inside["CFFIXED_USER_HOME"] == OWN and " " not in OWN
    assert inside["CARGO_HOME"] == f"{OWN}/.cargo"
    assert inside["HISTFILE"] == f"{OWN}/.zsh_history"
    assert inside["RUSTUP_HOME"] == f"{HOME}/.rustup"  # a toolchain, read where it is
    assert inside["PATH"] == env["PATH"] and inside["PROJECT_DIR"] == f"{PROJECT}/src"
    assert "GITHUB_TOKEN" not in inside
    argv = seatbelt.argv(pol, ["claude"])
    assert f"HOME={OWN}" in argv and f"CFFIXED_USER_HOME={OWN}" in argv


@pytest.mark.parametrize(
    "path",
    [
        f"{HOME}/.ssh/id_ed25519",
        f"{HOME}/.aws/credentials",
        f"{HOME}/.config/gh/hosts.yml",
        f"{HOME}/.netrc",
        f"{HOME}/.docker/config.json",
        f"{HOME}/Library/Keychains/login.keychain-db",
        f"{HOME}/Library/Cookies/Cookies.binarycookies",
        f"{HOME}/Library/Safari/History.db",
        f"{HOME}/Library/Application Support/Google/Chrome/Default/Login Data",
        f"{HOME}/Library/Application Support/Firefox/Profiles/x.default/logins.json",
        f"{HOME}/Library/Mail/V10/MailData/Envelope Index",
        f"{HOME}/Library/Messages/chat.db",
        "/private/tmp/com.apple.launchd.AbCd/Listeners",  # the ssh-agent's socket
        "/private/tmp/.X11-unix/X0",
    ],
)
def test_secrets_are_hidden_macos_own_included(path):
    text = make()
    assert not can_read(text, path) and not can_write(text, path)
    assert not allowed(text, "file-read-metadata", path=path)


def test_a_secret_inside_a_writable_folder_stays_hidden_whatever_the_policys_order():
    """Hidden is denied last: `sandbox.write = ["~"]` does not open ~/.ssh,
    and the runtime folder (inside ~/Library/Caches, writable) stays hidden."""
    pol = mac_policy(policy.Settings(write=(HOME,)))
    for p in (pol, dataclasses.replace(pol, hidden=pol.hidden[::-1], writable=pol.writable[::-1])):
        text = seatbelt.profile(p)
        assert can_write(text, f"{HOME}/Documents/x")
        assert not can_read(text, f"{HOME}/.ssh/id_ed25519")
        assert not can_read(text, f"{HOME}/Library/Keychains/login.keychain-db")
        assert not can_read(text, f"{RUNTIME}/owl.sock")
        assert can_write(text, f"{WT}/a.py")  # deeper again than Owl's hidden folder


def test_order_sensitive_rules_come_in_the_right_order():
    """Read by position in the profile, not only by outcome: the person's home
    refused after the system's reads and before every allow inside it; every
    hidden path's deny after every file allow (hidden always wins), but for
    Owl's folder around the worktree, which the worktree's deeper allow
    follows; the store read after Owl's folder is hidden, its parts to write
    after that."""
    text = make(policy.Settings(write=(HOME,), read=(f"{HOME}/notes",)))
    lines = [ln for ln in text.splitlines() if ln.startswith("(")]

    def first(s: str) -> int:
        return next(i for i, ln in enumerate(lines) if s in ln)

    home = first(f'(deny file-read* file-write* (subpath "{HOME}"))')
    assert first('(allow file-read* (subpath "/usr")') < home
    assert first('(deny file-read* file-write* (subpath "/private/tmp")') < home
    assert first('(deny file-read* file-write* (subpath "/private/tmp")') < first(
        f'(allow file-read* file-write* (subpath "{TMP_SLOT}"))'
    )
    file_allows = [
        i
        for i, ln in enumerate(lines)
        if ln.startswith("(allow file-") and f'"{HOME}' in ln and "file-read-metadata" not in ln
    ]
    assert file_allows and min(file_allows) > home
    for secret in (f"{HOME}/.ssh", f"{HOME}/.pgpass", RUNTIME):
        deny = first(f'(deny file-read* file-write* (subpath "{secret}"))')
        assert deny > max(file_allows), secret
    # Owl's data folder holds this (older) Job's worktree: denied, then the deeper allows
    owl = first(f'(deny file-read* file-write* (subpath "{OWL}"))')
    assert owl < first(f'(allow file-read* file-write* (subpath "{WT}"))')
    assert first(f'(allow file-read* (subpath "{STORE}"))') > owl
    assert first(f'(allow file-read* file-write* (subpath "{STORE}/refs"))') > first(
        f'(allow file-read* (subpath "{STORE}"))'
    )
    assert can_read(text, f"{HOME}/notes/x") and can_write(text, f"{HOME}/notes/x")
    assert not can_read(text, f"{HOME}/.ssh/id_ed25519")


def test_a_hidden_path_or_a_folder_above_it_cannot_be_renamed_away():
    text = make()
    for path in (f"{HOME}/Library/Caches/TemporaryItems", RUNTIME, f"{HOME}/.ssh"):
        assert not allowed(text, "file-write-unlink", path=path), path
    assert allowed(text, "file-write-unlink", path=f"{CACHES}/Caches-3/pip")
    # nor is a folder of the Run's own removed (its link could lead the next rule away)
    for path in (OWN, f"{CACHES}/Caches-3", f"{STATE}/claude-4"):
        assert not allowed(text, "file-write-unlink", path=path, is_dir=True), path


def test_read_project_reads_the_system_the_project_and_the_toolchains_only():
    text = make(policy.Settings(read="project"))
    for path in (
        "/usr/lib/libSystem.B.dylib",
        "/System/Library/x",
        "/opt/homebrew/bin/node",
        f"{PROJECT}/src/a.py",
        f"{WT}/a.py",
        f"{STATE}/claude-4/x",
        "/private/etc/hosts",
    ):
        assert can_read(text, path), path
    for path in (
        f"{HOME}/Documents/x",
        f"{HOME}/Desktop/y",
        f"{HOME}/code/other/z",
        f"{HOME}/.claude/x",
    ):
        assert not can_read(text, path), path


def test_mach_lookup_only_for_what_a_cli_agent_needs():
    text = make(agent="check")
    assert allowed(text, "mach-lookup", mach="com.apple.system.logger")
    assert allowed(text, "mach-lookup", mach="com.apple.trustd.agent")
    for service in (
        "com.apple.coreservices.launchservicesd",  # open -a
        "com.apple.pasteboard.1",
        "com.apple.windowserver.active",
        "com.apple.coreservices.appleevents",  # osascript
        "com.apple.SecurityServer",  # a check gets no Keychain
        "com.example.anything",
    ):
        assert not allowed(text, "mach-lookup", mach=service), service
    # no Keychain for Claude Code either: it logs in with the token Owl passes in
    # (the login keychain's file, which the Security framework reads itself, is hidden)
    claude = make(agent="claude")
    for service in ("com.apple.SecurityServer", "com.apple.securityd.xpc"):
        assert not allowed(claude, "mach-lookup", mach=service), service
    assert not can_read(claude, f"{HOME}/Library/Keychains/login.keychain-db")
    # every rule naming mach-lookup names its services: no blanket allow
    for rule in rules(text):
        if "mach-lookup" in rule.ops and rule.action == "allow":
            assert rule.filters


def test_what_node_and_python_need():
    text = make()
    assert allowed(text, "process-info-pidinfo", same_sandbox=True)
    assert not allowed(text, "process-info-pidinfo", same_sandbox=False)
    assert allowed(text, "signal", same_sandbox=True)
    assert not allowed(text, "signal", same_sandbox=False)  # the daemon, the person's shell
    assert allowed(text, "user-preference-read")
    assert not allowed(text, "user-preference-write")
    assert allowed(text, "sysctl-write", sysctl="kern.tcsm_enable")
    assert not allowed(text, "sysctl-write", sysctl="kern.maxfiles")
    assert allowed(text, "sysctl-read", sysctl="hw.ncpu")
    assert allowed(text, "ipc-posix-sem") and allowed(text, "ipc-posix-shm")
    assert allowed(text, "file-map-executable", path="/opt/homebrew/lib/libssl.3.dylib")
    assert allowed(text, "pseudo-tty")
    for dev in ("/dev/ptmx", "/dev/null", "/dev/tty"):
        assert allowed(text, "file-ioctl", path=dev) and can_write(text, dev), dev
    # a pty it opened itself (macOS marks it), not the person's terminal
    own = frozenset({seatbelt.PTY_EXTENSION})
    assert allowed(text, "file-ioctl", path="/dev/ttys004", extensions=own)
    assert allowed(text, "file-write-data", path="/dev/ttys004", extensions=own)
    for op in ("file-ioctl", "file-write-data", "file-read-data"):
        assert not allowed(text, op, path="/dev/ttys004"), op
    assert not can_write(text, "/dev/disk0")


def test_the_network_as_on_linux():
    text = make()
    assert not allowed(text, "network-outbound", remote_ip=("93.184.216.34", 443))  # direct
    assert allowed(text, "network-outbound", remote_ip=("127.0.0.1", EGRESS))  # Owl's proxy
    assert allowed(text, "network-outbound", remote_ip=("localhost", 4123))  # its provider
    assert not allowed(text, "network-outbound", remote_ip=("localhost", 5432))  # a host's db
    assert allowed(text, "network-bind", local_unix=f"{WT}/.s.sock")
    assert allowed(text, "network-outbound", remote_unix="/private/var/run/mDNSResponder")
    for sock in (
        "/private/tmp/com.apple.launchd.AbCd/Listeners",
        f"{HOME}/.docker/run/docker.sock",
        f"{RUNTIME}/owl.sock",
    ):
        assert not allowed(text, "network-outbound", remote_unix=sock), sock
    assert allowed(text, "network-outbound", remote_unix=f"{WT}/.s.sock")
    opened = make(policy.Settings(sockets=(f"{HOME}/.colima/default/docker.sock",)))
    assert allowed(opened, "network-outbound", remote_unix=f"{HOME}/.colima/default/docker.sock")
    assert not allowed(opened, "network-outbound", remote_unix=f"{HOME}/.docker/run/docker.sock")
    ported = make(policy.Settings(host_ports=(11434,)))
    assert allowed(ported, "network-outbound", remote_ip=("localhost", 11434))
    off = make(policy.Settings(network=False))
    assert not allowed(off, "network-outbound", remote_ip=("93.184.216.34", 443))
    assert not allowed(off, "network-outbound", remote_ip=("localhost", 4123))
    assert not allowed(off, "network-outbound", remote_ip=("127.0.0.1", EGRESS))
    assert allowed(off, "network-outbound", remote_unix=f"{WT}/.s.sock")


# The host's loopback as a program may write it: each reaches the host's
# 127.0.0.1 listeners (Postgres, Redis, Ollama, an IDE's MCP server) on macOS.
SPELLINGS = [
    "127.0.0.1",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:7f00:1",  # the same, in hex
    "0.0.0.0",  # connect() to it reaches the host
    "127.0.0.2",  # the rest of 127.0.0.0/8
    "127.255.255.254",
    "::1",
    "::",  # [::]
    "::127.0.0.1",  # IPv4-compatible
    "192.168.1.23",  # the Mac's own LAN address
    "169.254.169.254",  # link-local: a cloud's metadata service
]


@pytest.mark.parametrize("addr", SPELLINGS)
@pytest.mark.parametrize("port", [5432, 6379, 11434, 443])
def test_the_hosts_loopback_is_refused_in_every_spelling(addr, port):
    """Read against the rule text: no rule lets the Run reach an address
    directly but localhost on named ports; and the proxy those ports lead to
    refuses each spelling (tests/test_seatnet.py, for real)."""
    for text in (make(), make(policy.Settings(read="project"))):
        for proto in ("tcp", "udp"):
            assert not allowed(text, "network-outbound", remote_ip=(addr, port), proto=proto)


def test_no_rule_allows_an_address_beyond_localhost_on_a_named_port():
    """The order that matters: no allow of ``*`` anywhere (a later deny of
    localhost could not take back what Seatbelt cannot name), and every
    network-outbound allow names localhost and a port, or a unix socket."""
    text = make(policy.Settings(host_ports=(11434,)))
    for rule in rules(text):
        if rule.action != "allow" or not any(o.startswith("network") for o in rule.ops):
            continue
        for f in rule.filters:
            if f[1] in ("unix-socket",):
                continue
            where = f[2][1]
            assert "*" not in where.split(":")[0], rule
            if "network-outbound" in rule.ops:
                assert where.startswith("localhost:") and where.split(":")[1].isdigit(), rule
        assert "network*" not in rule.ops, rule


def test_the_runs_own_servers_listen_on_the_loopback_only():
    """A server the Run starts binds and accepts on 127.0.0.1 (never the LAN);
    it is reached from inside only on the Policy's ports: Seatbelt cannot tell
    the Run's port from the host's (the limit docs/containment.md states)."""
    text = make(policy.Settings(host_ports=(8080,)))
    for op in ("network-bind", "network-inbound"):
        assert allowed(text, op, local_ip=("127.0.0.1", 54321)), op
        assert allowed(text, op, local_ip=("::1", 54321)), op
        assert not allowed(text, op, local_ip=("0.0.0.0", 8080)), op
        assert not allowed(text, op, local_ip=("192.168.1.23", 8080)), op
    assert allowed(text, "network-outbound", remote_ip=("127.0.0.1", 8080))
    assert not allowed(text, "network-outbound", remote_ip=("127.0.0.1", 54321))


def test_the_profiles_proxy_port_is_seatnets_placeholder():
    from owl.sandbox import seatnet

    assert seatbelt.EGRESS_PORT == seatnet.PLACEHOLDER
    raw = seatbelt.profile(mac_policy())
    assert f'"localhost:{seatbelt.EGRESS_PORT}"' in raw
    with pytest.raises(ValueError):  # sandbox-exec would refuse it as well
        allowed(raw, "network-outbound", remote_ip=("127.0.0.1", 1))


def test_each_rule_says_why():
    """Every rule of the fixed part is under a comment giving its reason."""
    text = make()
    base = text.split("; reading")[0].splitlines()
    for i, line in enumerate(base):
        if line.startswith("(allow") or line.startswith("(deny"):
            above = next(ln for ln in reversed(base[:i]) if not ln.startswith(("(", "  ", ")")))
            assert above.startswith(";"), line
    assert parse(text)  # balanced


def test_the_argv_drops_what_the_policy_drops_and_runs_env_under_sandbox_exec():
    pol = mac_policy()
    argv = seatbelt.argv(pol, ["/opt/homebrew/bin/claude", "-p", "hi"])
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"] and argv[2].startswith("(version 1)")
    assert argv[3] == "/usr/bin/env"
    rest = argv[4:]
    assert rest[rest.index("GITHUB_TOKEN") - 1] == "-u"
    assert "ANTHROPIC_API_KEY" not in rest and f"TMPDIR={RUN_TMP}" in rest
    assert rest[-3:] == ["/opt/homebrew/bin/claude", "-p", "hi"]


def test_contain_wraps_a_run_with_seatbelt_on_macos(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(seatexec, "probe", lambda fresh=False: None)
    monkeypatch.setattr(seatexec, "compiles", lambda text, sandbox_exec=None: None)
    wt = tmp_path / "wt"
    wt.mkdir()
    w = contain.wrap(
        ["/bin/echo", "hi"],
        settings=policy.Settings(),
        agent="codex",
        env={"HOME": str(tmp_path / "home"), "PATH": "/usr/bin"},
        worktree=str(wt),
        project=str(tmp_path),
        owl_dirs=[str(tmp_path / "owl")],
    )
    assert w.contained
    # its network: seatnet.py's proxy, outside, started before sandbox-exec,
    # which removes the Run's temporary folder when it ends
    at = w.argv.index(seatbelt.SANDBOX_EXEC)
    tmp = w.env["TMPDIR"]
    assert w.argv[at - 5 : at] == [seatbelt.SEATNET, "-", "--tmp", tmp, "--"]
    assert w.label == "contained: Seatbelt, network through Owl's proxy (not the host's loopback)"
    text = text_of(w.argv)
    # the rules name real paths (/tmp is /private/tmp on macOS)
    assert allowed(text, "file-write-data", path=seatbelt.real(f"{wt}/x"))
    assert not allowed(text, "file-read-data", path=seatbelt.real(f"{tmp_path}/owl/db"))
    assert not allowed(text, "mach-lookup", mach="com.apple.SecurityServer")  # codex


@pytest.fixture
def fresh_answer(monkeypatch):
    """The sandbox's last answer asked again once this test's stand-ins are gone
    (it is kept for the whole process)."""
    from owl.sandbox import ready

    yield
    monkeypatch.undo()
    ready.ask()


def test_without_sandbox_exec_macos_words_and_no_apt(tmp_path, monkeypatch, fresh_answer):
    why = seatexec.probe(str(tmp_path / "sandbox-exec"))
    assert why and "sandbox-exec" in why and "part of macOS" in why and "apt" not in why
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(seatexec, "probe", lambda fresh=False: why)
    from owl.sandbox import ready

    assert ready.ask() == why and ready.problem() == why
    w = contain.wrap(
        ["/bin/true"],
        settings=policy.Settings(),
        agent="claude",
        env={},
        worktree=str(tmp_path),
        project=str(tmp_path),
        owl_dirs=[],
    )
    assert not w.contained and w.label == f"not contained: {why}"
    from owl.engine import containing
    from owl.settings import config
    from owl.settings.paths import Paths
    from owl.verbs.statusdoc import sandbox_view

    view = sandbox_view(config.from_dict({"sandbox": {"mode": "auto"}}, "c.toml"))
    assert view["problem"] == why and not view["contained"] and "apt" not in view["line"]
    cfg = config.from_dict({"sandbox": {"mode": "required"}}, "c.toml")
    o = tmp_path / "owl"
    paths = Paths(o / "config.toml", o / "owl.db", o / "run/s", o / "logs", o / "wt", o / "run")
    with pytest.raises(containing.Refusal) as refused:
        containing.wrap(cfg, paths, "claude", ["/bin/true"], {}, tmp_path, tmp_path)
    assert "sandbox-exec" in str(refused.value) and "apt" not in str(refused.value)


def test_a_check_on_macos_runs_under_seatbelt_without_the_keychain(tmp_path, monkeypatch):
    """A check runs the project's tests, which the agent wrote: contained as the
    agent is, with no agent's state and no Keychain."""
    from owl.engine import containing
    from owl.settings import config
    from owl.settings.paths import Paths

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(seatexec, "probe", lambda fresh=False: None)
    monkeypatch.setattr(seatexec, "compiles", lambda text, sandbox_exec=None: None)
    o = tmp_path / "owl"
    paths = Paths(o / "config.toml", o / "owl.db", o / "run/s", o / "logs", o / "wt", o / "run")
    wt = o / "wt" / "job-1"
    wt.mkdir(parents=True)
    check = containing.for_checks(config.from_dict({}, "c.toml"), paths, wt, tmp_path)
    argv, env, _masked = check(["make", "test"], {"HOME": str(tmp_path), "GITHUB_TOKEN": "t"})
    at = argv.index("/usr/bin/sandbox-exec")
    assert argv[at + 1] == "-p" and argv[-2:] == ["make", "test"]
    assert "GITHUB_TOKEN" not in env
    text = text_of(argv)
    assert allowed(text, "file-write-data", path=seatbelt.real(f"{wt}/build.o"))
    assert not allowed(text, "file-read-data", path=seatbelt.real(f"{o}/owl.db"))
    assert not allowed(text, "mach-lookup", mach="com.apple.SecurityServer")
    # no agent's state: nothing of one allowed, and no link to one in its home
    allows = [ln for ln in text.splitlines() if ln.startswith("(allow")]
    assert not [ln for ln in allows if "/agents/" in ln or "/.claude" in ln]
    home = Path(env["HOME"])
    assert not (home / ".claude").exists() and (home / ".cache").is_symlink()


def test_macos_caches_folder_is_never_made_on_linux(tmp_path):
    """~/Library/Caches is a Run's own cache only where macOS's sw_vers is on
    the PATH: no such folder made for a Run on Linux."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin"}
    caches = [c for c in folders.DEFAULT_CACHES if toolplaces.wanted_cache(c, env)]
    assert "~/Library/Caches" not in caches and "~/.cache" in caches
    own = ownhome.make(
        str(tmp_path / "keep"),
        "job-1",
        str(tmp_path),
        str(home),
        env,
        caches,
        "check",
        agentstate.AgentState(),
    )
    assert not [p for _, p, _ in own.binds if "Library" in p]
    assert not (home / "Library").exists()


@pytest.fixture
def var_tmp():
    """Not under /tmp: the profile refuses macOS's /tmp as a whole (but for
    the Run's own temporary folder), so a home there would read as refused for
    that reason alone."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="owl-seatbelt-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def linked_home(tmp_path):
    """A home whose dotfiles are links into ~/dotfiles, as many people keep
    them, and a cache an older Run swapped for a link to the home."""
    home = tmp_path / "home"
    dots = home / "dotfiles"
    (dots / "aws").mkdir(parents=True)
    (dots / "aws" / "credentials").write_text("[default]\naws_secret_access_key = s\n")
    (dots / "claude").mkdir()
    (dots / "claude" / "settings.json").write_text("{}")
    (home / ".aws").symlink_to(dots / "aws")
    (home / ".claude").symlink_to("dotfiles/claude")  # relative, as stow makes them
    (home / ".cache").symlink_to(home)
    (home / ".zshrc").write_text("# mine\n")
    return home


def darwin_wrap(tmp_path, home, agent="claude", **settings):
    wt = tmp_path / "owl" / "worktrees" / "job-1"
    wt.mkdir(parents=True, exist_ok=True)
    return contain.wrap(
        ["/bin/echo", "hi"],
        settings=policy.Settings(**settings),
        agent=agent,
        env={"HOME": str(home), "PATH": "/usr/bin"},
        worktree=str(wt),
        project=str(tmp_path / "project"),
        owl_dirs=[str(tmp_path / "owl")],
    )


def mac_on(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(seatexec, "probe", lambda fresh=False: None)
    monkeypatch.setattr(seatexec, "compiles", lambda text, sandbox_exec=None: None)


def own_home_of(w) -> Path:
    return Path(w.env["HOME"])


def test_rules_name_resolved_paths_a_linked_dotfile_stays_hidden(var_tmp, monkeypatch):
    """Seatbelt matches the path the kernel resolved: ``~/.aws`` and
    ``~/dotfiles/aws``, where the reads land, are both refused (the home as a
    whole, and every hidden path at both its names)."""
    tmp_path = var_tmp
    mac_on(monkeypatch)
    home = linked_home(tmp_path)
    text = text_of(darwin_wrap(tmp_path, home).argv)
    for name in (home / "dotfiles" / "aws" / "credentials", home / ".aws" / "credentials"):
        path = seatbelt.real(str(name))
        assert not can_read(text, path) and not can_write(text, path), name
        assert not allowed(text, "file-read-metadata", path=path), name
    assert not can_read(text, seatbelt.real(str(home / ".zshrc")))  # nothing of the home


def test_a_linked_agent_state_folder_of_the_persons_is_neither_read_nor_written(
    var_tmp, monkeypatch
):
    """``~/.claude -> ~/dotfiles/claude``: the person's state stays theirs.
    The Run's ``~/.claude`` is Owl's state for the project, linked into its own
    home, with the person's settings copied in (their link followed: no Run
    writes their home)."""
    tmp_path = var_tmp
    mac_on(monkeypatch)
    home = linked_home(tmp_path)
    (home / "dotfiles" / "claude" / "settings.json").write_text('{"theme": "mine"}\n')
    w = darwin_wrap(tmp_path, home)
    text = text_of(w.argv)
    claude = home / "dotfiles" / "claude"
    for path in (claude / "projects" / "x.jsonl", claude / "settings.json"):
        assert not can_read(text, seatbelt.real(str(path)))
        assert not can_write(text, seatbelt.real(str(path)))
    own = own_home_of(w) / ".claude"
    assert own.is_symlink() and "/agents/claude-" in os.readlink(own)
    state = os.path.realpath(own)
    assert can_write(text, seatbelt.real(f"{state}/projects/x.jsonl"))
    assert allowed(text, "file-write-unlink", path=seatbelt.real(f"{state}/old.jsonl"))
    assert (own / "settings.json").read_text() == '{"theme": "mine"}\n'
    # a state file may be replaced (a new one renamed over it), a folder may not
    state_file = os.path.realpath(own_home_of(w) / ".claude.json")
    assert allowed(text, "file-write-unlink", path=seatbelt.real(state_file))
    assert not allowed(text, "file-write-unlink", path=seatbelt.real(state), is_dir=True)
    # saved through its link (a new file beside it, renamed over it): the state
    # file only, never beside a cache or a state folder
    assert can_write(text, seatbelt.real(f"{state_file}.tmp.4242.ab12"))
    cache = os.path.realpath(own_home_of(w) / ".cache")
    for beside in (cache, state):
        assert not can_write(text, seatbelt.real(f"{beside}.tmp.4242.ab12")), beside


def test_a_link_the_run_left_in_its_home_is_made_again(var_tmp, monkeypatch):
    """The Run may replace the links in its own home (it is its home): with a
    link to the person's home, a folder of its own, or a file renamed over its
    state file. The next start makes each link again from Owl's records (the
    state file the agent saved is kept), and the profile names Owl's folders,
    never where a link leads."""
    tmp_path = var_tmp
    mac_on(monkeypatch)
    home = linked_home(tmp_path)
    w = darwin_wrap(tmp_path, home)
    own = own_home_of(w)
    cache, state = os.readlink(own / ".cache"), os.path.realpath(own / ".claude.json")
    (own / ".cache").unlink()
    (own / ".cache").symlink_to(home)  # what a Run could leave
    (own / ".claude").unlink()
    (own / ".claude").mkdir()
    (own / ".claude" / "planted").write_text("x")
    saved = own / ".claude.json.tmp"
    saved.write_text('{"numStartups": 2}\n')
    os.replace(saved, own / ".claude.json")  # a program that renames over the link
    text = text_of(darwin_wrap(tmp_path, home).argv)
    assert os.readlink(own / ".cache") == cache and (own / ".claude").is_symlink()
    assert os.path.realpath(own / ".claude.json") == state
    assert Path(state).read_text() == '{"numStartups": 2}\n'
    for path in (home / ".zshrc", home / "new-file", home / "dotfiles" / "aws" / "x"):
        assert not can_write(text, seatbelt.real(str(path))), path
    assert can_write(text, seatbelt.real(f"{cache}/pip/x"))
    assert not allowed(text, "file-write-unlink", path=seatbelt.real(cache), is_dir=True)
    wt = seatbelt.real(str(tmp_path / "owl" / "worktrees" / "job-1"))
    assert not allowed(text, "file-write-unlink", path=wt, is_dir=True)


def test_claude_logs_in_with_the_token_owl_holds(var_tmp, monkeypatch):
    """``claude setup-token``'s token, kept by Owl in its config folder
    (``credentials/claude``, 0600), reaches Claude's Run as
    CLAUDE_CODE_OAUTH_TOKEN and no check's; the folder it is kept in is hidden
    from the Run like the rest of Owl's. A token others may read, or a link,
    is refused in one line naming it."""
    import os

    from owl.engine import containing
    from owl.settings import config
    from owl.settings.paths import Paths

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(seatexec, "probe", lambda fresh=False: None)
    monkeypatch.setattr(seatexec, "compiles", lambda text, sandbox_exec=None: None)
    o = var_tmp / "owl"
    paths = Paths(o / "config.toml", o / "owl.db", o / "run/s", o / "logs", o / "wt", o / "run")
    held = containing.held_credentials(paths)
    held.mkdir(parents=True)
    token = held / "claude"
    token.write_text("sk-ant-oat01-held\n")
    token.chmod(0o600)
    (held / "codex").write_text("sk-codex\n")
    (held / "codex").chmod(0o600)
    env = {"HOME": str(var_tmp / "home"), "PATH": "/usr/bin"}
    wt = o / "wt" / "job-1"
    wt.mkdir(parents=True)
    cfg = config.from_dict({}, "c.toml")
    w = containing.wrap(cfg, paths, "claude", ["claude", "-p", "x"], env, wt, var_tmp)
    assert w.env["CLAUDE_CODE_OAUTH_TOKEN"] == "sk-ant-oat01-held"
    assert "CODEX_API_KEY" not in w.env  # not Codex's
    assert not can_read(text_of(w.argv), seatbelt.real(str(token)))
    mine = {**env, "CLAUDE_CODE_OAUTH_TOKEN": "mine"}  # the person's own environment wins
    w = containing.wrap(cfg, paths, "claude", ["claude", "-p", "x"], mine, wt, var_tmp)
    assert w.env["CLAUDE_CODE_OAUTH_TOKEN"] == "mine"
    check = containing.for_checks(cfg, paths, wt, var_tmp)
    _argv, check_env, _ = check(["make"], env)
    assert "CLAUDE_CODE_OAUTH_TOKEN" not in check_env
    token.chmod(0o644)
    auto = config.from_dict({"sandbox": {"mode": "auto"}}, "c.toml")
    for c in (cfg, auto):  # held, not run uncontained: that would not mend it
        with pytest.raises(containing.Refusal, match="chmod 600") as refused:
            containing.wrap(c, paths, "claude", ["claude", "-p", "x"], env, wt, var_tmp)
        assert str(token) in str(refused.value) and "uncontained" not in str(refused.value)
    token.chmod(0o600)
    os.rename(token, held / "elsewhere")
    token.symlink_to(held / "elsewhere")
    with pytest.raises(containing.Refusal, match=str(token)):
        containing.wrap(cfg, paths, "claude", ["claude", "-p", "x"], env, wt, var_tmp)


FAKE_SANDBOX_EXEC = """#!{python}
# sandbox-exec as macOS's takes its arguments: -p PROFILE PROGRAM; it records
# them and refuses a profile that would not compile ({refuse!r} in it)
import json, sys
sys.path.insert(0, {support!r})
from seatbelt_eval import check
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
if len(args) != 3 or args[0] != "-p" or args[2] != "/usr/bin/true":
    sys.exit("sandbox-exec: usage")
try:
    check(args[1])  # balanced, known words, each address * or localhost with a port
except Exception as e:
    sys.exit(f"sandbox-exec: syntax error: {{e}}")
if {refuse!r} in args[1]:
    sys.exit("sandbox-exec: unbound variable: " + {refuse!r})
"""


def fake_sandbox_exec(tmp_path, refuse="never-in-a-profile"):
    """A stand-in for macOS's sandbox-exec, which cannot run here."""
    support = Path(__file__).parent / "support"
    log = tmp_path / "sandbox-exec.log"
    exe = tmp_path / "bin" / "sandbox-exec"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(
        FAKE_SANDBOX_EXEC.format(
            python=sys.executable, support=str(support), log=str(log), refuse=refuse
        )
    )
    exe.chmod(0o755)
    return exe, log


def test_a_run_is_contained_only_under_a_profile_sandbox_exec_took(var_tmp, monkeypatch):
    """Before a Run is called contained, its very profile is compiled and
    applied (``sandbox-exec -p PROFILE /usr/bin/true``), its proxy's port in
    place; a profile macOS refuses leaves the Run uncontained, in its words
    (with mode = "required": not started)."""
    import json

    from owl.engine import containing
    from owl.settings import config
    from owl.settings.paths import Paths

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(seatexec, "probe", lambda fresh=False: None)
    exe, log = fake_sandbox_exec(var_tmp)
    monkeypatch.setattr(seatbelt, "SANDBOX_EXEC", str(exe))
    home = linked_home(var_tmp)
    w = darwin_wrap(var_tmp, home)
    assert w.contained, w.label
    (asked,) = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert asked[1] == seatbelt.with_egress(seatbelt.profile_of(w.argv), 1)
    assert seatbelt.EGRESS_PORT not in asked[1]
    darwin_wrap(var_tmp, home)  # the same profile: not asked again
    assert len(log.read_text().splitlines()) == 1

    worktree = str(var_tmp / "owl" / "worktrees" / "job-1")
    exe, log = fake_sandbox_exec(var_tmp / "refusing", refuse=seatbelt.real(worktree))
    monkeypatch.setattr(seatbelt, "SANDBOX_EXEC", str(exe))
    w = darwin_wrap(var_tmp, home)
    assert not w.contained and w.argv == ["/bin/echo", "hi"]
    assert w.label == (
        "not contained: the Seatbelt profile fails: sandbox-exec: unbound variable: "
        + seatbelt.real(worktree)
    )
    o = var_tmp / "owl"
    paths = Paths(
        o / "config.toml", o / "owl.db", o / "run/s", o / "logs", o / "worktrees", o / "run"
    )
    cfg = config.from_dict({"sandbox": {"mode": "required"}}, "c.toml")
    with pytest.raises(containing.Refusal) as refused:
        containing.wrap(
            cfg, paths, "claude", ["claude"], {"HOME": str(home)}, Path(worktree), var_tmp
        )
    assert "unbound variable" in str(refused.value)


def test_a_runs_temporary_folder_is_its_own_and_never_one_made_by_another(tmp_path):
    """macOS's /private/tmp is writable by every account: ``owl-UID`` (and a
    Job's folder in it) is made 0700, or kept only if it is a folder of this
    account's alone; a link in its place, another account's folder or one
    others may enter is refused in one line naming it. Each Run's folder is
    made afresh."""
    root = tmp_path / "private-tmp"
    root.mkdir()
    slot, tmp = mactemp.make("job-1.claude", str(root))
    top = root / f"owl-{os.getuid()}"
    assert Path(slot) == top / "job-1.claude" and Path(tmp).parent == Path(slot)
    for folder in (top, Path(slot), Path(tmp)):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    assert not any(Path(tmp).iterdir())
    again = mactemp.make("job-1.claude", str(root))
    assert again[0] == slot and again[1] != tmp  # one Job's folder, a new one for each Run
    assert mactemp.make("job 2/../x", str(root))[0] == str(top / "job-2-..-x")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    for how in ("link", "mode", "owner"):
        squat = tmp_path / how
        squat.mkdir()
        place = squat / f"owl-{os.getuid()}"
        if how == "link":
            place.symlink_to(elsewhere)
        else:
            place.mkdir(mode=0o700)
            if how == "mode":
                place.chmod(0o777)
            elif os.getuid() == 0:
                os.chown(place, 65534, 65534)  # another account's
            else:
                continue
        with pytest.raises(mactemp.TempProblem) as refused:
            mactemp.make("job-1.claude", str(squat))
        said = str(refused.value)
        assert str(place) in said and "remove it" in said and "\n" not in said, said
    assert not any(elsewhere.iterdir())  # nothing made through the link
    # the same for a Job's folder in it
    (top / "job-3.claude").symlink_to(elsewhere)
    with pytest.raises(mactemp.TempProblem, match="job-3.claude"):
        mactemp.make("job-3.claude", str(root))
    assert not any(elsewhere.iterdir())


def test_without_its_temporary_folder_a_run_is_not_called_contained(tmp_path, monkeypatch):
    """A ``/private/tmp/owl-UID`` Owl may not use leaves the Run uncontained
    (``mode = "required"``: not started), saying why in one line."""
    mac_on(monkeypatch)
    root = tmp_path / "private-tmp"
    root.mkdir()
    (root / f"owl-{os.getuid()}").symlink_to(tmp_path)
    monkeypatch.setattr(mactemp, "ROOT", str(root))
    w = darwin_wrap(tmp_path, tmp_path / "home")
    assert not w.contained and w.argv == ["/bin/echo", "hi"]
    assert w.label.startswith("not contained: its temporary folder: ") and "remove it" in w.label


def test_codexs_rollout_is_read_from_the_runs_own_state_with_codex_home_outside(
    var_tmp, monkeypatch
):
    """``CODEX_HOME`` outside the home (``/srv/codex``): Seatbelt cannot lay
    Owl's folder there, so the Run is not told it and Codex keeps its state at
    its default, ``~/.codex`` in the Run's own home, a link to Owl's folder.
    Its usage windows are read from that copy, as on Linux, never from the
    person's own Codex home (where an older rollout of theirs may say else)."""
    import json
    import time

    from owl.agents.codex import CodexDriver

    mac_on(monkeypatch)
    home = var_tmp / "home"
    home.mkdir()
    outside = var_tmp / "srv" / "codex"
    outside.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODEX_HOME", str(outside))
    wt = var_tmp / "owl" / "worktrees" / "job-1"
    wt.mkdir(parents=True)
    w = contain.wrap(
        ["/bin/echo", "hi"],
        settings=policy.Settings(),
        agent="codex",
        env={"HOME": str(home), "CODEX_HOME": str(outside), "PATH": "/usr/bin"},
        worktree=str(wt),
        project=str(var_tmp / "project"),
        owl_dirs=[str(var_tmp / "owl")],
    )
    assert w.contained and "CODEX_HOME" not in w.env
    state = Path(os.path.realpath(own_home_of(w) / ".codex"))  # where Codex writes
    assert "/agents/codex-" in str(state)
    thread = "01a24ddd-6d9a-7431-a74a-ea398f3c945f"

    def rollout(codex_home: Path, used: int) -> None:
        day = codex_home / "sessions" / "2026" / "12" / "07"
        day.mkdir(parents=True, exist_ok=True)
        limits = {"primary": {"used_percent": used, "window_minutes": 300, "resets_at": 2e9}}
        event = {"type": "event_msg", "payload": {"type": "token_count", "rate_limits": limits}}
        (day / f"rollout-2026-12-07T00-18-06-{thread}.jsonl").write_text(json.dumps(event))

    rollout(outside, 10)  # the person's own, never the Run's
    rollout(state, 90)
    lines = [json.dumps({"type": "thread.started", "thread_id": thread})]
    rep = CodexDriver().report(lines, 0, resuming=False, now=time.time(), kept=w.kept)
    assert [round(r.used, 2) for r in rep.windows] == [0.9]
    # a Run's own state where none of its places holds it: nothing read at all
    rep = CodexDriver().report(lines, 0, resuming=False, now=time.time(), kept=(("/x", "/y"),))
    assert rep.windows == ()
