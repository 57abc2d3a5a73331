"""Real bubblewrap: what a process inside a contained Run can and cannot reach."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from owl.sandbox import bwrap as B
from owl.sandbox import contain
from owl.sandbox import policy as P
from support.bwrapped import MINIMAL
from support.need import programs as need


def run_inside(tmp_path: Path, script: str, term_env: str | None = None, **settings):
    need("bwrap")
    home, wt, owl = tmp_path / "home", tmp_path / "owl" / "worktrees" / "job-1", tmp_path / "owl"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".bashrc").write_text("# mine\n")
    (home / "other-repo").mkdir()
    wt.mkdir(parents=True)
    (owl / "config.toml").write_text("secret = 1\n")
    env = {
        "HOME": str(home),
        "PATH": os.environ["PATH"],
        "GITHUB_TOKEN": "ghp_x",
        "DISPLAY": ":0",
        "ANTHROPIC_API_KEY": "kept",
    }
    f = P.Facts(
        home=str(home),
        user_home=str(home),
        worktree=str(wt),
        git_common=None,
        git_admin=None,
        project=str(wt),
        owl_home=(str(owl),),
        runtime_dir=None,
        env=env,
    )
    # the Run's own home and what is bound into it, made as for a Run
    pol = contain.decide(P.Settings(**settings), "claude", env, f, str(owl / "sandbox"))
    done = subprocess.run(
        check=False,
        args=B.ignoring_term(
            B.argv(pol, ["sh", "-c", script], term_env=term_env, root=os.getuid() == 0), term_env
        ),
        env=P.agent_env(env, pol),
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done, home, wt


def test_secrets_home_owl_and_other_pids_are_out_of_reach_the_worktree_is_not(tmp_path):
    owl = tmp_path / "owl"
    done, home, wt = run_inside(
        tmp_path,
        (
            "cat ~/.ssh/id_ed25519 || echo no-key; echo x >> ~/.bashrc || echo no-bashrc; "
            f"echo y > ~/other-repo/f || echo no-repo; cat {owl}/config.toml || echo no-config; "
            f"kill -0 {os.getpid()} || echo no-daemon; echo token=$GITHUB_TOKEN display=$DISPLAY "
            "key=$ANTHROPIC_API_KEY; echo work > done.txt"
        ),
    )
    out = done.stdout
    assert "PRIVATE" not in out and "no-key" in out
    # ~/.bashrc is the Run's own home's: written there, the person's untouched
    assert "no-bashrc" not in out and "no-repo" in out and "no-daemon" in out
    assert "no-config" in out and "secret" not in out
    assert (owl / "config.toml").read_text() == "secret = 1\n"
    assert "token= display= key=kept" in out
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert not (home / "other-repo" / "f").exists()
    assert (wt / "done.txt").read_text() == "work\n"


def test_no_network_means_none(tmp_path):
    done, _, _ = run_inside(tmp_path, "cat /proc/net/dev | grep -c : ", network=False)
    assert done.stdout.strip() == "1"  # lo only


def test_the_sandbox_ignores_term_its_command_does_not(tmp_path):
    """SIGTERM is for the agent: bwrap (here its pid 1, which the outer one
    started) keeps it ignored, the command gets it back at its default."""
    need("bwrap")
    env = B.term_env()
    assert env, "GNU env with --default-signal"
    done, _, _ = run_inside(tmp_path, "grep SigIgn /proc/1/status /proc/self/status", term_env=env)
    masks = {line.split(":")[0]: int(line.split()[-1], 16) for line in done.stdout.splitlines()}
    term = 1 << (15 - 1)
    assert masks["/proc/1/status"] & term, done.stdout
    assert not masks["/proc/self/status"] & term, done.stdout


def test_bwrap_is_found_and_works_here():
    need("bwrap")
    path, version = B.find()
    assert path and version.count(".") == 1
    assert B.probe() is None


NETNS = Path(__file__).resolve().parent.parent / "app" / "owl" / "sandbox" / "netns.py"
PROBE = (
    "import socket,sys\n"
    "s=socket.socket(socket.AF_UNIX); s.settimeout(2)\n"
    "try:\n s.connect('\\0'+sys.argv[1]); print('abstract-reached')\n"
    "except OSError: print('abstract-refused')\n"
    "t=socket.socket(); t.settimeout(2)\n"
    "try:\n t.connect(('127.0.0.1', int(sys.argv[2]))); print('port-reached')\n"
    "except OSError: print('port-refused')\n"
)


# Another pasta to run the same test with (Debian 13's, which closes every
# inherited fd as it starts: `dpkg-deb -x` of trixie's passt, run through
# trixie's ld.so where the host's glibc is older).
PASTAS = ["pasta", *filter(None, [os.environ.get("OWL_TEST_PASTA")])]


@pytest.mark.parametrize("pasta", PASTAS)
def test_own_network_cuts_abstract_sockets_but_keeps_the_named_host_port(tmp_path, pasta):
    """An abstract socket (as the X server's @/tmp/.X11-unix/X0) is out of reach in
    the Run's own namespace; the 127.0.0.1 port pasta forwards is not."""
    import socket
    import sys

    import psutil

    need("bwrap", pasta)
    name = f"owl-test-{os.getpid()}"
    ab = socket.socket(socket.AF_UNIX)
    ab.bind("\0" + name)
    ab.listen(1)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    port = tcp.getsockname()[1]
    inner = [sys.executable, "-I", "-c", PROBE, name, str(port)]
    shared = subprocess.run(
        check=False,
        args=[
            *MINIMAL,
            *inner,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert shared.stdout.split() == ["abstract-reached", "port-reached"]
    helper = subprocess.Popen(
        [sys.executable, "-I", "-S", str(NETNS), pasta, str(port), "--", *MINIMAL, *inner],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = helper.communicate(timeout=30)
    assert out.split() == ["abstract-refused", "port-reached"], err
    ab.close()
    tcp.close()
    # pasta, which stays after the sandbox has ended, was ended with it: none
    # is left that was named its pid file in the helper's own folder
    folder = f"{os.environ.get('TMPDIR') or '/tmp'}/owl-net-{helper.pid}-"
    left = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if any(a.startswith(folder) for a in p.info["cmdline"] or ())
    ]
    assert left == []


def test_slirp4netns_gives_the_sandbox_a_network_of_its_own_and_leaves_with_it(tmp_path):
    """Where pasta is missing: the namespace has its own interface and address,
    the host's abstract sockets and loopback are out of reach, and slirp4netns
    is gone once the sandbox has ended."""
    import socket
    import sys

    import psutil

    need("bwrap", "slirp4netns")
    name = f"owl-test-{os.getpid()}"
    ab = socket.socket(socket.AF_UNIX)
    ab.bind("\0" + name)
    ab.listen(1)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    port = tcp.getsockname()[1]
    probe = PROBE + "print('tap0' if 'tap0:' in open('/proc/net/dev').read() else 'no-tap0')\n"
    own = subprocess.run(
        check=False,
        args=[
            sys.executable,
            "-I",
            "-S",
            str(NETNS),
            shutil.which("slirp4netns") or "slirp4netns",
            "-",
            "--",
            *MINIMAL,
            sys.executable,
            "-I",
            "-c",
            probe,
            name,
            str(port),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    ab.close()
    tcp.close()
    assert own.stdout.split() == ["abstract-refused", "port-refused", "tap0"], own.stderr
    me = psutil.Process()
    assert not [p for p in me.children(recursive=True) if "slirp4netns" in p.name()]
