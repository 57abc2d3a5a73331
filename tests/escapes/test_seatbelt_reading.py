"""Every way out of the Linux table ("Ways out, tried" in docs/containment.md),
read against the Seatbelt profile a Run gets on macOS.

No Mac here, so nothing is tried for real: the profile is the one Owl makes
(``containing.wrap`` on "darwin", Owl's records for the Job's git), for a
person laid out on disk as a Mac has it (a home with ``~/.ssh`` and
``~/.gnupg``, a project and another repository with their ``.git``, Owl's
folders under ``~/Library``, a Job's worktree and its own git store, another
Job's), and each attack's operation is decided by Seatbelt's documented rules
(``support/seatbelt_eval.py``: the last matching rule wins). Where macOS has
no such way out (``/proc``, cgroups, user namespaces) the test reads what
stands for it there; where Seatbelt does not stop it (``/tmp`` filling) the
test asserts what the profile does, and the docs say so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from owl.engine import containing
from owl.git import jobstore, storing, workspace
from owl.sandbox import contain, mactemp, raced, seatbelt, seatexec
from owl.settings import config
from owl.settings.paths import Paths, worktrees_for
from support.need import programs
from support.seatbelt_eval import allowed, rules

from owlproc import make_project

DOCS = Path(__file__).resolve().parents[2] / "docs" / "containment.md"
LAUNCHD_SOCK = "/private/tmp/com.apple.launchd.AbCd1234/Listeners"  # the ssh-agent's
TMPDIR = "/private/var/folders/x9/abc123/T"  # the per-user temp folder


@dataclass(repr=False)
class Mac:
    """A person's Mac as a Run sees it through its profile (paths as macOS names them)."""

    home: Path
    project: Path
    other: Path
    paths: Paths
    places: jobstore.Places
    wrapped: contain.Wrapped

    @property
    def text(self) -> str:
        return seatbelt.with_egress(seatbelt.profile_of(self.wrapped.argv), 50123)

    def may(self, op: str, path: Path | str, **kw: object) -> bool:
        return allowed(self.text, op, path=seatbelt.real(str(path)), **kw)

    def reads(self, path: Path | str) -> bool:
        return self.may("file-read-data", path)

    def writes(self, path: Path | str) -> bool:
        """Any of the writes an attack needs: change, create, delete (or rename away)."""
        return any(
            self.may(op, path)
            for op in ("file-write-data", "file-write-create", "file-write-unlink")
        )

    def made(self) -> tuple[Path, Path, Paths, jobstore.Places]:
        return self.home, self.project, self.paths, self.places

    def connects(self, sock: str) -> bool:
        return allowed(self.text, "network-outbound", remote_unix=seatbelt.real(sock))

    @property
    def own(self) -> Path:
        """The Run's own home: what its ``HOME`` says."""
        return Path(self.wrapped.env["HOME"])

    def inside(self, rel: str) -> str:
        """Where the Run's ``~/rel`` leads (through the links in its own home)."""
        return os.path.realpath(self.own / rel)


def person(base: Path) -> tuple[Path, Path, Path, Paths]:
    """A home with its secrets, a project, another repository and Owl's folders
    where platformdirs puts them on macOS."""
    home = base / "Users" / "me"
    for secret, text in (
        (".ssh/id_ed25519", "PRIVATE KEY\n"),
        (".gnupg/private-keys-v1.d/AB12.key", "PRIVATE KEY\n"),
        (".netrc", "machine example.com password hunter2\n"),
        ("Library/Keychains/login.keychain-db", "keys\n"),
        (".docker/run/docker.sock", ""),  # Docker Desktop's socket (a file here)
        # what no list need name: a home of its own holds none of it
        (".pgpass", "db:5432:*:me:pw\n"),
        (".my.cnf", "[client]\npassword=pw\n"),
        (".cargo/credentials.toml", '[registry]\ntoken = "cio_secret"\n'),
        (".config/rclone/rclone.conf", "[s3]\nsecret_access_key = s\n"),
        ("Library/Application Support/1Password/data/1Password.sqlite", "vault\n"),
        # other agents' state, and the person's own caches and Claude's state
        (".codex/auth.json", '{"tokens": {"refresh_token": "rt-codex"}}\n'),
        (".copilot/config.json", '{"logged_in_users": ["me"]}\n'),
        (".claude.json", '{"mcpServers": {}}\n'),
        (".claude/settings.json", '{"theme": "mine"}\n'),
        (
            ".claude/.credentials.json",
            '{"claudeAiOauth": {"accessToken": "at-1", "refreshToken": "rt-person"}}\n',
        ),
        (".npm/_npx/1a2b/node_modules/cowsay/index.js", "module.exports = 1\n"),
        ("Library/Caches/pip/http/x", "cached\n"),
        (".zshrc", "# mine\n"),
        ("notes/todo.txt", "read me\n"),
        ("music/a.mp3", "la\n"),
    ):
        (home / secret).parent.mkdir(parents=True, exist_ok=True)
        (home / secret).write_text(text)
    project = make_project(home / "code" / "api")
    other = make_project(home / "code" / "other")
    lib = home / "Library"
    data = lib / "Application Support" / "owl"
    runtime = lib / "Caches" / "TemporaryItems" / "owl"
    paths = Paths(
        data / "config.toml",
        data / "owl.db",
        runtime / "owl.sock",
        lib / "Logs" / "owl",
        worktrees_for(data, home),  # ~/.local/share/owl/worktrees: no space
        runtime,
    )
    mac_bin = base / "macbin"  # macOS's sw_vers on the PATH: ~/Library/Caches is a cache
    mac_bin.mkdir(exist_ok=True)
    (mac_bin / "sw_vers").write_text("#!/bin/sh\necho macOS\n")
    (mac_bin / "sw_vers").chmod(0o755)
    for folder in (data, paths.logs, paths.worktrees, runtime):
        folder.mkdir(parents=True, exist_ok=True)
    (paths.logs / "owl.log").write_text("every Run's log\n")
    return home, project, other, paths


def environment(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "PATH": f"{home.parents[1] / 'macbin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "TMPDIR": TMPDIR + "/",
        "GITHUB_TOKEN": "ghp_secret",
        "AWS_SECRET_ACCESS_KEY": "aws_secret",
        "ANTHROPIC_API_KEY": "sk-ant-own",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4123",
        "SSH_AUTH_SOCK": LAUNCHD_SOCK,
        "OWL_HOME": str(home / "Library" / "Application Support" / "owl"),
    }


def on_mac(mp: pytest.MonkeyPatch, home: Path) -> None:
    """Owl's wrapping as on macOS: sandbox-exec there and taking the profile,
    and macOS's /private/tmp (where a Run's temporary folder is made) stood
    for by a folder beside the home."""
    mp.setattr(sys, "platform", "darwin")
    mp.setattr(seatexec, "probe", lambda fresh=False: None)
    mp.setattr(seatexec, "compiles", lambda text, sandbox_exec=None: None)
    (home.parents[1] / "private-tmp").mkdir(exist_ok=True)
    mp.setattr(mactemp, "ROOT", str(home.parents[1] / "private-tmp"))


def profile_for(
    home: Path,
    project: Path,
    paths: Paths,
    places: jobstore.Places,
    cfg: dict[str, object] | None = None,
) -> contain.Wrapped:
    """The Run's argv as Owl starts it on macOS: its settings, Owl's folders,
    and the Job's git places from Owl's records (never from the worktree)."""
    with pytest.MonkeyPatch.context() as mp:
        on_mac(mp, home)
        w = containing.wrap(
            config.from_dict(cfg or {}, "config.toml"),
            paths,
            "claude",
            ["/opt/homebrew/bin/claude", "-p", "work"],
            environment(home),
            Path(places.worktree),
            project,
            places=jobstore.places(project, places.worktree),
        )
    assert w.contained and seatbelt.SANDBOX_EXEC in w.argv, w.label
    return w


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """Not under /tmp: the profile refuses macOS's /tmp as a whole but for the
    Run's own temporary folder, so a home there would read as refused for that
    reason alone (as a Linux Run's private /tmp would hide it), proving nothing."""
    path = Path(tempfile.mkdtemp(prefix="owl-seatbelt-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_mac(base: Path, cfg: dict[str, object] | None = None) -> Mac:
    programs("git")
    home, project, other, paths = person(base)
    for job in ("job-1", "job-2"):
        make_branch(project, f"owl/{job}")
        storing.create(project, paths.worktrees / job, f"owl/{job}")
    places = jobstore.places(project, paths.worktrees / "job-1")
    return Mac(home, project, other, paths, places, profile_for(home, project, paths, places, cfg))


def make_branch(project: Path, branch: str) -> None:
    workspace.git(project, "branch", branch)


@pytest.fixture(scope="module")
def mac(base: Path) -> Mac:
    return make_mac(base / "mac")


def test_the_runs_own_work_is_allowed(mac: Mac) -> None:
    """What every row's Linux test also asserts: the Job's work still lands."""
    wt, store = Path(mac.places.worktree), Path(str(mac.places.store))
    assert mac.reads(wt / "README") and mac.writes(wt / "work.txt")
    assert mac.writes(store / "objects" / "ab" / "cdef0123")
    assert mac.writes(store / "refs" / "heads" / "owl" / "job-1")
    assert mac.writes(store / "logs" / "HEAD")
    assert mac.writes(Path(str(mac.places.admin)) / "index")
    assert mac.reads(mac.project / ".git" / "objects" / "info" / "packs")  # its alternate


# --- one test per row of the Linux table, in its order ---------------------------------------


def test_environ(mac: Mac) -> None:
    """Linux: the daemon's secrets in /proc/*/environ. macOS has no /proc: every
    process of the Run starts with the agent's environment (sandbox-exec and env
    exec, none stays with the daemon's), and what stands for /proc/PID/environ,
    ``ps eww`` (the sysctl kern.procargs2), is refused: an outside process's
    arguments and environment, the daemon's among them, are not read."""
    env = mac.wrapped.env
    for secret in ("GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "OWL_HOME", "SSH_AUTH_SOCK"):
        assert secret not in env, secret
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-own"  # the agent's own
    argv = mac.wrapped.argv
    assert argv[argv.index(seatbelt.SANDBOX_EXEC) + 3] == seatbelt.ENV
    assert "-u" in argv and "GITHUB_TOKEN" in argv
    for name in ("kern.procargs2", "kern.procargs"):
        assert not allowed(mac.text, "sysctl-read", sysctl=name), name
    assert allowed(mac.text, "sysctl-read", sysctl="kern.proc")  # ps lists pids and names
    assert not allowed(mac.text, "process-info-pidinfo", same_sandbox=False)
    # a check, started the same way: its environment and its profile alike
    with pytest.MonkeyPatch.context() as mp:
        on_mac(mp, mac.home)
        check = containing.for_checks(
            config.from_dict({}, "config.toml"),
            mac.paths,
            Path(mac.places.worktree),
            mac.project,
            places=mac.places,
        )
        argv, env, _masked = check(["make", "test"], environment(mac.home))
    assert seatbelt.SANDBOX_EXEC in argv and "GITHUB_TOKEN" not in env
    assert "ANTHROPIC_API_KEY" not in env  # not the agent's: a check has none
    assert not allowed(seatbelt.profile_of(argv), "sysctl-read", sysctl="kern.procargs2")


@pytest.mark.parametrize(
    "sock",
    [
        "/var/run/docker.sock",  # Docker's, as root on the machine
        "/var/run/com.docker.vmnetd.sock",
        "/var/run/syslog",
        "~/.docker/run/docker.sock",  # Docker Desktop's, in the home
        "~/.colima/default/docker.sock",
        "~/.orbstack/run/docker.sock",
        "~/.local/share/containers/podman/machine/podman.sock",
        LAUNCHD_SOCK,  # the ssh-agent's
        "/tmp/tmux-501/default",  # the person's tmux, in the shared /tmp
        TMPDIR + "/vscode-ipc-1.sock",  # in the per-user temp folder
        "~/Library/Application Support/owl/worktrees/job-2/.s.sock",  # another Job's
        "~/Library/Caches/TemporaryItems/owl/owl.sock",  # Owl's own
    ],
)
def test_host_unix_sockets(mac: Mac, sock: str) -> None:
    """Linux: a host unix socket in /run, /var/run, the home, the host's /tmp.
    Seatbelt: no unix socket is connected to but the resolver's, those in the
    Run's own folders and those sandbox.sockets names."""
    path = sock.replace("~", str(mac.home), 1)
    assert not mac.connects(path), path


def test_host_unix_sockets_the_resolvers_the_runs_own_and_those_opened(base: Path) -> None:
    m = make_mac(base / "opened", {"sandbox": {"sockets": ["~/.colima/default/docker.sock"]}})
    assert m.connects("/var/run/mDNSResponder")  # name resolution
    assert m.connects(f"{m.places.worktree}/.s.PGSQL.5432")  # a server the Run starts
    assert m.connects(f"{m.home}/.colima/default/docker.sock")  # opened on purpose
    assert not m.connects(f"{m.home}/.docker/run/docker.sock")
    assert not m.connects("/var/run/docker.sock")
    # A socket the host binds in the person's caches is out of reach: the
    # Run's caches are its own (Owl's folders), where no tool of the person's binds.
    assert not m.connects(f"{m.home}/Library/Caches/some-tool/server.sock")
    assert m.connects(m.inside("Library/Caches/some-tool/server.sock"))
    assert not m.inside("Library/Caches").startswith(f"{m.home}/Library/")


def test_sockets_bound_later_in_the_project(mac: Mac) -> None:
    """Linux: a socket bound after the Run started in the project or its .git
    (a dev server's, git's fsmonitor daemon's), a datagram pair aimed at one,
    io_uring: the seccomp filter. Seatbelt decides each connect() by the rule,
    whenever the socket was bound: the project is read, never connected to."""
    for sock in (mac.project / "dev.sock", mac.project / ".git" / "fsmonitor--daemon.ipc"):
        assert mac.reads(str(mac.project)), mac.project
        assert not mac.connects(str(sock)), sock


def test_abstract_sockets(mac: Mac) -> None:
    """Linux: the X server's abstract socket. macOS has no abstract socket
    namespace; XQuartz listens at a launchd socket in /tmp, and its X11 folder is
    hidden: neither is connected to, nor read."""
    for sock in ("/private/tmp/com.apple.launchd.Xq1/org.xquartz:0", "/tmp/.X11-unix/X0"):
        assert not mac.connects(sock) and not mac.reads(sock), sock


def test_forged_lost_starts(mac: Mac) -> None:
    """Linux: bwrap's words for a start lost to a covered host socket going
    away, forged by the agent. Seatbelt covers no socket with a mount, so a
    Run on macOS has none its start could lose, and no start is read as lost."""
    assert mac.wrapped.masked == ()
    assert raced.raced(["bwrap: Can't create file at /x.sock: gone"], mac.wrapped.masked) is None


def test_capabilities_and_mounts(mac: Mac) -> None:
    """Linux: capabilities under a root daemon (umount ~/.ssh, mount, mount --bind /).
    Seatbelt hides by rule, not by mount, and holds for root as for anyone: no
    rule allows mounting or unmounting, and unmounting would reveal nothing."""
    ssh = mac.home / ".ssh"
    for op in ("file-mount", "file-unmount", "file-mount-update"):
        assert not mac.may(op, ssh) and not mac.may(op, "/"), op
    assert not mac.reads(ssh / "id_ed25519")


def test_user_namespaces(mac: Mac) -> None:
    """Linux: a user namespace made inside to unmount or re-bind. macOS has no
    user namespaces; the nearest, chroot(2) into a tree of its own, is refused."""
    assert not mac.may("file-chroot", mac.places.worktree)


def test_setuid(mac: Mac) -> None:
    """Linux: a setuid program to regain root (no_new_privs). Seatbelt lets the
    Run exec one (sudo asks for the person's password, which an agent has not)
    but the profile is inherited by every process the Run starts, root's
    included: it does not depend on who runs. Not refused; nothing gained."""
    assert mac.may("process-exec", "/usr/bin/sudo")
    assert not any(
        r.action == "allow" and not r.filters and "default" in r.ops for r in rules(mac.text)
    )
    assert not mac.reads(mac.home / ".ssh" / "id_ed25519")


@pytest.mark.parametrize(
    "service",
    [
        "com.apple.coreservices.launchservicesd",  # open -a Terminal: an app outside
        "com.apple.coreservices.appleevents",  # osascript -e 'tell app "Terminal" to do script'
        "com.apple.pasteboard.1",  # pbcopy, pbpaste
        "com.apple.windowserver.active",  # the screen, key events
        "com.apple.tccd",
    ],
)
def test_leaving_the_run(mac: Mac, service: str) -> None:
    """Linux: moving itself out of the Run's cgroup. macOS has no cgroups (Owl
    follows a Run by its sessions and groups) and Seatbelt is inherited across
    fork, exec and setsid, so a process leaves the profile only if another starts
    it: LaunchServices and Apple Events, through which it would ask an app
    outside to run it, are not looked up, nor the pasteboard or window server."""
    assert not allowed(mac.text, "mach-lookup", mach=service), service


def test_processes_outside(mac: Mac) -> None:
    """Linux: ptrace or a signal to a process outside. Seatbelt: signals, process
    information and task ports only within the same sandbox."""
    for op in ("signal", "process-info-pidinfo", "process-info-pidfdinfo", "mach-priv-task-port"):
        assert not allowed(mac.text, op, same_sandbox=False), op
        assert allowed(mac.text, op, same_sandbox=True), op


def test_filling_tmp(mac: Mac) -> None:
    """Linux: filling /tmp or /dev/shm (sandbox.tmp_size). NOT bounded on macOS:
    the Run's temporary folder is on the disk and Seatbelt has no word for a
    size; a full disk is the machine's. The shared /tmp and per-user temp
    folder it does not write at all."""
    assert mac.writes(f"{mac.wrapped.env['TMPDIR']}/fill")
    assert not mac.writes("/tmp/fill") and not mac.writes(f"{TMPDIR}/fill")
    assert allowed(mac.text, "ipc-posix-shm")  # POSIX shared memory, unbounded by the profile


def test_a_file_left_in_the_shared_tmp(mac: Mac) -> None:
    """Linux: the Run's /tmp is its own (bwrap's tmpfs), gone with it. macOS's
    /tmp and the per-user folders under /var/folders are every program's: a
    file a Run left there (a config, a script, a socket) would be read by the
    person's tools, and what they leave there read by the Run. Both are
    refused, read and write; its TMPDIR is a folder of its own under
    /private/tmp/owl-UID, 0700, no space in its path, the only one there it
    reaches (another Job's is refused), removed when the Run ends."""
    own = mac.wrapped.env["TMPDIR"]
    for name in ("TMP", "TEMP", "TEMPDIR"):
        assert mac.wrapped.env[name] == own, name
    top = Path(own).parents[1]  # /private/tmp/owl-UID on a Mac
    assert top.name == f"owl-{os.getuid()}" and " " not in own
    assert Path(own).parent.name == "job-1.claude"
    for folder in (top, Path(own).parent, Path(own)):
        st = folder.lstat()
        assert folder.is_dir() and not folder.is_symlink(), folder
        assert (st.st_mode & 0o777, st.st_uid) == (0o700, os.getuid()), folder
    assert mac.reads(f"{own}/x") and mac.writes(f"{own}/x")
    for path in (
        "/tmp/x",  # what a tool of the person's reads later (/tmp/x is /private/tmp/x)
        "/private/tmp/build.sh",
        "/private/tmp/com.apple.launchd.AbCd1234/Listeners",
        f"{TMPDIR}/x",  # the person's TMPDIR
        "/private/var/folders/x9/abc123/C/clang/ModuleCache/x.pcm",  # their caches
        "/var/folders/x9/abc123/0/com.apple.dock/x",
        f"{top}/job-2.claude/0a1b2c3d/x",  # another Job's
        f"{top}/x",
    ):
        assert not mac.reads(path) and not mac.writes(path), path
        assert not allowed(mac.text, "network-bind", local_unix=seatbelt.real(path)), path
    assert allowed(mac.text, "network-bind", local_unix=seatbelt.real(f"{own}/pg.sock"))
    # its Job's folder is written in, never removed or renamed (to leave a link there)
    assert not mac.may("file-write-unlink", Path(own).parent, is_dir=True)
    # the helper outside the Run removes it when the Run has ended
    argv = mac.wrapped.argv
    assert argv[argv.index("--tmp") + 1] == own
    assert argv.index("--tmp") < argv.index(seatbelt.SANDBOX_EXEC)


def test_terminals(mac: Mac) -> None:
    """Linux: TIOCSTI into a terminal, the person's pty. The Run starts in a
    session of its own with no terminal; a pty it opens itself (/dev/ptmx) is
    its own, marked by macOS with the com.apple.sandbox.pty extension; the
    person's terminals (/dev/ttysNNN of Terminal's windows, the same user's)
    are neither opened nor controlled."""
    person_tty = "/dev/ttys003"
    for op in ("file-read-data", "file-write-data", "file-ioctl"):
        assert not allowed(mac.text, op, path=person_tty), op
        own = allowed(
            mac.text, op, path=person_tty, extensions=frozenset({"com.apple.sandbox.pty"})
        )
        assert own, op
    assert allowed(mac.text, "pseudo-tty") and allowed(mac.text, "file-ioctl", path="/dev/ptmx")
    assert not allowed(mac.text, "file-write-data", path="/dev/console")


def test_hard_links(mac: Mac) -> None:
    """Linux: a hard link from the worktree to the key, ~/.bashrc, the project's
    git config, Owl's config. Seatbelt: no rule allows file-link (deny
    default), so none is made, wherever it points; and what it would point at
    is hidden or read only."""
    for target in (
        mac.home / ".ssh" / "id_ed25519",
        mac.home / ".zshrc",
        mac.project / ".git" / "config",
        mac.paths.config,
    ):
        assert not mac.may("file-link", target), target
        assert not mac.writes(target), target
    assert not mac.may("file-link", Path(mac.places.worktree) / "k")
    assert not mac.reads(mac.paths.config)


def test_symlinks(mac: Mac) -> None:
    """Linux: a symlink to a secret, /proc/self/root. Seatbelt decides on the
    path the kernel resolved (and /tmp, /var, /etc by their /private names), so
    a link in the worktree leads to the same refusal; macOS has no /proc."""
    for target in (
        mac.home / ".ssh" / "id_ed25519",
        mac.home / ".gnupg" / "private-keys-v1.d" / "AB12.key",
        mac.home / ".netrc",
        mac.home / "Library" / "Keychains" / "login.keychain-db",
        mac.paths.logs / "owl.log",
        mac.paths.db,
    ):
        assert not mac.reads(target) and not mac.writes(target), target
        assert not mac.may("file-read-metadata", target), target
    assert seatbelt.real("/tmp/x") == "/private/tmp/x"


def test_the_projects_refs(mac: Mac) -> None:
    """Linux: move main, make a tag, move another Job's branch in the project.
    Seatbelt: the project's git folder is only read; another Job's store is
    hidden; the Job's own store's refs are writable (and reported)."""
    git = mac.project / ".git"
    for path in (
        git / "refs" / "heads" / "main",
        git / "refs" / "heads" / "owl" / "job-2",
        git / "refs" / "tags" / "v1",
        git / "HEAD",
        git / "logs" / "refs" / "heads" / "main",
    ):
        assert mac.reads(path) and not mac.writes(path), path
    other_store = mac.paths.worktrees / "job-2.git"
    assert not mac.reads(other_store / "config")
    assert not mac.writes(other_store / "refs" / "heads" / "owl" / "job-2")
    assert mac.writes(Path(str(mac.places.store)) / "refs" / "heads" / "main")  # its own store's


def test_the_projects_history_stays_read_only_inside_a_writable_folder(base: Path) -> None:
    """``sandbox.write = ["~"]`` (or a folder holding the project): the project's
    git folder is laid read only over it, as the agent's own config is."""
    # (`write = ["~"]` itself is refused at load: it holds the home's secrets)
    code = base / "write-home" / "Users" / "me" / "code"  # the home person() makes
    m = make_mac(base / "write-home", {"sandbox": {"write": [str(code)]}})
    assert m.writes(m.home / "code" / "notes.txt")  # what the person opened
    git = m.project / ".git"
    for path in (git / "refs" / "heads" / "main", git / "packed-refs", git / "objects" / "x"):
        assert not m.writes(path), path
    assert not m.writes(git / "objects" / "info" / "alternates")
    assert m.writes(Path(str(m.places.store)) / "refs" / "heads" / "owl" / "job-1")
    assert m.writes(Path(m.places.worktree) / "work.txt")


def test_the_projects_objects(mac: Mac) -> None:
    """Linux: rewrite packed-refs; delete or replace a pack or a loose object;
    add objects/info/alternates. Seatbelt: the same, only read."""
    git = mac.project / ".git"
    for path in (
        git / "packed-refs",
        git / "objects" / "pack" / "pack-1234.pack",
        git / "objects" / "pack" / "pack-1234.idx",
        git / "objects" / "ab" / "cdef0123",
        git / "objects" / "info" / "alternates",
        git / "config",
        git / "hooks" / "pre-commit",
    ):
        assert not mac.writes(path), path
    store = Path(str(mac.places.store))
    for path in (store / "config", store / "packed-refs", store / "hooks" / "post-checkout"):
        assert not mac.writes(path), path


def test_a_planted_commondir(base: Path) -> None:
    """Linux: a commondir (or gitdir, or the worktree's .git) planted through a
    link, to get another repository's .git or Owl's logs/ writable in the next
    Run. Seatbelt: the next Run's profile is made from Owl's records as the
    first's was; it names nothing the planted files point to."""
    m = make_mac(base / "planted")
    admin = Path(str(m.places.admin))
    deep = base / "planted" / "deep" / "a"
    deep.mkdir(parents=True)
    os.symlink(deep, admin / "L")
    up = "../" * len(deep.parts[1:])
    for name, aim in (("other", m.other / ".git"), ("logs", m.paths.logs)):
        (admin / "commondir").write_text(f"L/{up}{str(aim).lstrip('/')}\n")
        (admin / "gitdir").write_text(f"{aim}\n")
        (Path(m.places.worktree) / ".git").write_text(f"gitdir: {aim}\n")
        nxt = Mac(m.home, m.project, m.other, m.paths, m.places, profile_for(*m.made()))
        assert not nxt.writes(m.other / ".git" / "refs" / "heads" / "planted-by-agent")
        assert not nxt.writes(m.other / ".git" / "objects" / "info" / "alternates")
        assert not nxt.reads(m.paths.logs / "owl.log") and not nxt.writes(m.paths.logs / "x")
        assert nxt.text == m.text, name  # the very same profile
    assert [e["name"] for e in jobstore.verify(m.places)] == [".git", "gitdir", "commondir"]


# --- the ways out found since, read against the profile (their Linux rows come with
# their Linux tests; each of these is the macOS cell of one of them) -------------------------


@pytest.mark.parametrize(
    "addr",
    [
        "127.0.0.1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "127.0.0.2",
        "::1",
        "::",
        "192.168.1.23",  # the Mac's own LAN address (a service on 0.0.0.0)
        "169.254.169.254",  # link-local: a cloud's metadata service
        "fe80::1",
    ],
)
def test_the_hosts_services_in_any_spelling(mac: Mac, addr: str) -> None:
    """Linux: a listener on a link-local address, on the host's LAN address,
    on its loopback in another spelling. Seatbelt: no address is reached
    directly but 127.0.0.1/::1 on the agent's ports and on Owl's proxy's
    (which judges each destination by its resolved address and refuses all of
    these: tests/test_seatnet.py runs it)."""
    for port in (5432, 6379, 11434, 443, 80):
        assert not allowed(mac.text, "network-outbound", remote_ip=(addr, port)), (addr, port)
    assert allowed(mac.text, "network-outbound", remote_ip=("127.0.0.1", 4123))  # its provider
    assert allowed(mac.text, "network-outbound", remote_ip=("127.0.0.1", 50123))  # the proxy


def test_a_linked_dotfile_and_a_link_left_in_a_state_folder(base: Path) -> None:
    """Linux: a link left in a state folder widens the next Run; secrets a
    link hides from a list. Seatbelt decides on resolved paths and its rules
    are made from them: ``~/.aws -> ~/dotfiles/aws`` is hidden where it
    leads; a state folder swapped for a link to the home (``~/.cache -> ~``,
    left before) does not take the next Run's rule with it, and no Run can
    leave one now (a writable folder is not removed)."""
    home, project, _other, paths = person(base / "linked")
    dots = home / "dotfiles" / "aws"
    dots.mkdir(parents=True)
    (dots / "credentials").write_text("secret\n")
    (home / ".aws").symlink_to(dots)
    (home / ".cache").symlink_to(home)
    make_branch(project, "owl/job-1")
    storing.create(project, paths.worktrees / "job-1", "owl/job-1")
    places = jobstore.places(project, paths.worktrees / "job-1")
    m = Mac(home, project, _other, paths, places, profile_for(home, project, paths, places))
    assert not m.reads(dots / "credentials") and not m.writes(dots / "credentials")
    for path in (home / ".zshrc", home / "new", home / ".ssh" / "authorized_keys"):
        assert not m.writes(path), path
    caches = seatbelt.real(str(home / "Library" / "Caches"))
    assert not allowed(m.text, "file-write-unlink", path=caches, is_dir=True)
    wt = seatbelt.real(m.places.worktree)
    assert not allowed(m.text, "file-write-unlink", path=wt, is_dir=True)
    assert allowed(m.text, "file-write-unlink", path=f"{wt}/src", is_dir=True)  # inside it


def test_the_run_as_the_persons_socket_server(mac: Mac) -> None:
    """Linux: the Run binds ~/.cache/git/credential/socket and the person's own
    git sends it a token. macOS: the person's home is refused as a whole; the
    Run's ``~/.cache`` is Owl's folder for the project, where a socket it binds
    (a test's database server) is its own and no tool of the person's looks."""
    sock = seatbelt.real(str(mac.home / ".cache" / "git" / "credential" / "socket"))
    assert not allowed(mac.text, "network-bind", local_unix=sock)
    assert not mac.writes(sock)
    own = mac.inside(".cache/git/credential/socket")
    assert allowed(mac.text, "network-bind", local_unix=seatbelt.real(own))
    assert not own.startswith(str(mac.home / ".cache"))


def test_code_planted_in_a_cache(mac: Mac) -> None:
    """Linux: code planted in a cache, or config in an agent's state, that the
    person's tools run later. macOS: the Run writes none of the person's
    caches or agent state; its ``~/.npm``, ``~/Library/Caches``, ``~/.cache``
    and ``~/.claude.json`` are Owl's, per project, read by no tool of theirs."""
    for rel in (
        ".npm/_npx/1a2b/node_modules/cowsay/index.js",
        "Library/Caches/pip/http/x",
        ".cache/copilot/pkg/universal/index.js",
        ".cache/pre-commit/repo/hook.py",
        ".claude.json",
        ".claude/settings.json",
        ".codex/config.toml",
    ):
        assert not mac.writes(mac.home / rel), rel
    for rel in (".npm/_npx/x/index.js", "Library/Caches/pip/x", ".cache/pre-commit/x"):
        own = mac.inside(rel)
        assert mac.writes(own) and not own.startswith(f"{mac.home}/.npm"), rel
    assert mac.writes(mac.inside(".claude.json"))  # the Run's own agent state


# --- every row of the docs' table is read here ------------------------------------------------


def test_kernel_calls(mac: Mac) -> None:
    """Linux: the session keyring, TIOCSTI/TIOCLINUX, bpf, perf_event_open,
    userfaultfd, tracing bwrap's pid 1 (a seccomp filter). macOS has no such
    keyring nor calls; the Keychain is out of every Run's reach (no
    securityd lookup), and process information stays within the Run's sandbox."""
    assert not allowed(mac.text, "mach-lookup", mach="com.apple.SecurityServer")
    assert not mac.reads(mac.home / "Library" / "Keychains" / "login.keychain-db")


def test_unlisted_credentials_on_macos(mac: Mac) -> None:
    """Linux: no credential file of the person's is in sight, listed or not (a
    home of its own). macOS the same: the home is refused as a whole, and the
    Run's own home holds none of them."""
    for rel in (
        ".pgpass",
        ".my.cnf",
        ".cargo/credentials.toml",
        ".config/rclone/rclone.conf",
        "Library/Application Support/1Password/data/1Password.sqlite",
        ".ssh/id_ed25519",
        ".codex/auth.json",
        ".copilot/config.json",
    ):
        assert not mac.reads(mac.home / rel) and not mac.writes(mac.home / rel), rel
        assert not (mac.own / rel).exists(), rel


def test_refresh_tokens_on_macos(mac: Mac) -> None:
    """Linux: a Run gets its agent's credentials without the refresh token.
    macOS the same: the person's file is neither read nor written; the Run's
    own state holds a copy with the access token and no refresh token, so a
    refresh inside never logs the person's own CLI out."""
    person = mac.home / ".claude" / ".credentials.json"
    assert not mac.reads(person) and not mac.writes(person)
    copy = mac.inside(".claude/.credentials.json")
    assert mac.reads(copy) and not copy.startswith(str(mac.home / ".claude"))
    oauth = json.loads(Path(copy).read_text())["claudeAiOauth"]
    assert oauth == {"accessToken": "at-1"}
    assert json.loads(person.read_text())["claudeAiOauth"]["refreshToken"] == "rt-person"


# --- the Run's own home, as the allow-list Linux's Run sees ------------------------------------


def test_the_runs_own_home_caches_state_and_worktree_are_writable(mac: Mac) -> None:
    """The Run is told its home is Owl's folder for the Job (HOME, and
    CFFIXED_USER_HOME for CoreFoundation), with no space in its path; its
    caches and its agent's state are linked in from Owl's folders for the
    project, each written where it leads; its worktree too."""
    env = mac.wrapped.env
    assert env["HOME"] == env["CFFIXED_USER_HOME"] == str(mac.own)
    assert " " not in str(mac.own) and " " not in mac.places.worktree
    assert mac.own.is_dir() and not mac.own.is_symlink()
    assert mac.writes(mac.own / ".zsh_history") and mac.reads(mac.own / ".zsh_history")
    for link in (".cache", ".npm", "Library/Caches", ".claude", ".claude.json"):
        assert (mac.own / link).is_symlink(), link
        assert mac.writes(mac.inside(f"{link}/x" if link != ".claude.json" else link)), link
    assert mac.writes(Path(mac.places.worktree) / "src" / "main.py")
    # the cleaned git config: read, never written
    gitconfig = mac.inside(".gitconfig")
    assert mac.reads(gitconfig) and not mac.writes(gitconfig)
    # and what each is on the host, for the engine to read after the Run
    kept = dict(mac.wrapped.kept)
    assert os.path.realpath(kept[str(mac.home / ".claude")]) == mac.inside(".claude")


def test_the_runs_tools_find_its_own_home_by_its_environment(base: Path) -> None:
    """Run for real, without the profile (no Mac here): the Run's argv from
    ``env`` on, as sandbox-exec would exec it. git reads the cleaned copy of
    the person's ``~/.gitconfig`` through the Run's home (no credential
    helper), Python's ``~`` is the Run's home, and its ``~/.cache`` leads to
    Owl's folder for the project."""
    m = make_mac(base / "tools")
    (m.home / ".gitconfig").write_text("[user]\n\tname = Me\n[credential]\n\thelper = store\n")
    m = Mac(m.home, m.project, m.other, m.paths, m.places, profile_for(*m.made()))
    argv = m.wrapped.argv
    tail = argv[argv.index(seatbelt.ENV) : -3]  # env -u SECRET… NAME=VALUE…
    git = subprocess.run(
        [*tail, "git", "config", "--global", "--list"],
        capture_output=True,
        text=True,
        check=True,
        cwd=m.places.worktree,
    ).stdout
    assert "user.name=Me" in git and "credential" not in git
    py = "import os; print(os.path.expanduser('~')); print(os.path.realpath(os.path.expanduser('~/.cache')))"
    home, cache = subprocess.run(
        [*tail, sys.executable, "-c", py], capture_output=True, text=True, check=True
    ).stdout.split()
    assert home == str(m.own) and cache == m.inside(".cache")
    assert cache.startswith(str(m.paths.worktrees.parent / "sandbox" / "projects"))


def test_another_project_another_agent_and_owls_folders_are_out_of_sight(mac: Mac) -> None:
    """No other project, no other agent's state, nothing of Owl's: its config,
    database, logs, the credentials it holds, another Job's home and worktree,
    another project's caches."""
    keep = mac.paths.worktrees.parent / "sandbox"
    for path in (
        mac.other / "README",
        mac.other / ".git" / "config",
        mac.home / ".codex" / "auth.json",
        mac.home / ".copilot" / "config.json",
        mac.paths.config,
        mac.paths.db,
        mac.paths.logs / "owl.log",
        mac.paths.config.parent / "credentials" / "claude",
        mac.paths.worktrees / "job-2" / "README",
        keep / "jobs" / "job-2" / "home" / ".zsh_history",
        keep / "projects" / "other-1234" / "caches" / "npm" / "x",
    ):
        assert not mac.reads(path) and not mac.writes(path), path
    assert not (mac.own / ".codex").exists() and not (mac.own / ".copilot").exists()


def test_a_symlinked_dotfile_is_denied_at_both_names(base: Path) -> None:
    """``~/.aws -> ~/dotfiles/aws``: Seatbelt decides on the resolved path;
    both names lie in the person's home, which is refused as a whole."""
    m = make_mac(base / "dotfile")
    dots = m.home / "dotfiles" / "aws"
    dots.mkdir(parents=True)
    (dots / "credentials").write_text("secret\n")
    (m.home / ".aws").symlink_to(dots)
    m = Mac(m.home, m.project, m.other, m.paths, m.places, profile_for(*m.made()))
    for path in (m.home / ".aws" / "credentials", dots / "credentials"):
        assert not m.reads(path) and not m.writes(path), path
        assert not m.may("file-read-metadata", path), path


def test_sandbox_read_entries_are_read_only(base: Path) -> None:
    """What ``sandbox.read`` names is read, never written; its neighbours stay out."""
    home = base / "read" / "Users" / "me"
    m = make_mac(base / "read", {"sandbox": {"read": [str(home / "notes")]}})
    assert m.reads(m.home / "notes" / "todo.txt")
    assert not m.writes(m.home / "notes" / "todo.txt") and not m.writes(m.home / "notes" / "x")
    assert not m.reads(m.home / "music" / "a.mp3")


ROWS: dict[str, Callable[..., None]] = {
    "the daemon's secrets": test_environ,
    "a host unix socket": test_host_unix_sockets,
    "an abstract socket": test_abstract_sockets,
    "bwrap's words for a lost start": test_forged_lost_starts,
    "capabilities under a root daemon": test_capabilities_and_mounts,
    "a user namespace made inside": test_user_namespaces,
    "a setuid program": test_setuid,
    "moving itself out of the Run's cgroup": test_leaving_the_run,
    "`ptrace` or a signal": test_processes_outside,
    "filling `/tmp`": test_filling_tmp,
    "a file left in `/tmp`": test_a_file_left_in_the_shared_tmp,
    "`TIOCSTI` into a terminal, a": test_terminals,
    "`TIOCSTI` into a terminal the Run": test_kernel_calls,
    "the daemon's session keyring": test_kernel_calls,
    "bwrap's pid 1 inside": test_kernel_calls,
    "the person's secrets in the environment": test_environ,
    "bwrap failing at its own start": test_forged_lost_starts,
    '`sandbox.write = ["~"]`': test_the_projects_history_stays_read_only_inside_a_writable_folder,
    "every credential file in sight": test_unlisted_credentials_on_macos,
    "code planted in a cache": test_code_planted_in_a_cache,
    "a link left where a state folder was": test_a_linked_dotfile_and_a_link_left_in_a_state_folder,
    "the Run as your socket server": test_the_run_as_the_persons_socket_server,
    "a host socket bound after the Run started": test_host_unix_sockets,
    "a socket bound after the Run started in the project": test_sockets_bound_later_in_the_project,
    "a reflog (or a ref) in the Job's store": test_a_planted_commondir,
    "a refresh token spent inside a Run": test_refresh_tokens_on_macos,
    "a hard link": test_hard_links,
    "a symlink to a secret": test_symlinks,
    "move `main`": test_the_projects_refs,
    "rewrite `packed-refs`": test_the_projects_objects,
    "a `commondir`": test_a_planted_commondir,
    "a link-local address": test_the_hosts_services_in_any_spelling,
}


def table() -> tuple[str, list[list[str]]]:
    """The paragraph above "Ways out, tried" and the table's rows, cell by cell."""
    text = DOCS.read_text()
    start = text.index("**Ways out, tried.**")
    intro, rows = text[start:].split("\n\n", 2)[:2]
    lines = rows.splitlines()
    header = [c.strip() for c in lines[0].split("|")[1:-1]]
    assert header[2] == "macOS (Seatbelt, read from the profile)", header
    return intro, [[c.strip() for c in ln.split("|")[1:-1]] for ln in lines[2:]]


def test_every_row_of_the_ways_out_table_is_read_against_the_profile() -> None:
    """A Linux way out added to the table without its macOS reading fails here."""
    intro, rows = table()
    assert "(../tests/escapes/test_seatbelt_reading.py)" in intro
    assert len(rows) == len(ROWS)
    for cells in rows:
        assert len(cells) == 4, cells
        way, _, macos, _ = cells
        assert sum(way.startswith(k) for k in ROWS) == 1, way
        assert macos, way
