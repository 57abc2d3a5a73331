"""Owl's helpers start inside an app bundle whose interpreter needs its environment.

py2app's `Contents/MacOS/python` finds its standard library only through
PYTHONHOME/PYTHONPATH (the bundle's main executable sets them): `-I` and `-E`
throw them away. Laid out here with the same need: a copy of this Python's
binary in `Owl.app/Contents/MacOS/python`, its standard library moved (bound)
to `Contents/Resources/lib/python3.X`, and the place the binary would look
for it by itself made empty, in a mount namespace of its own (bwrap). In it, a
process playing the daemon (PYTHONHOME and PYTHONPATH set, as the bundle's
stub sets them) starts a Run's reaper through `tree.launch.spawn` and a git
call through `git.safegit`, each of which starts a helper script with the
bundle's interpreter."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from support import need

from owl.tree import pyhelper

APP = str(Path(__file__).resolve().parent.parent / "app")
VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"


def bundle(root: Path) -> tuple[Path, list[str], dict[str, str]]:
    """(the bundle's python, the bwrap prefix that hides the stdlib from it,
    the environment its stub would give it)."""
    need.programs("bwrap")
    app = root / "Owl.app"
    (app / "Contents" / "MacOS").mkdir(parents=True)
    resources = app / "Contents" / "Resources"
    stdlib = resources / "lib" / VERSION
    stdlib.mkdir(parents=True)
    (app / "Contents" / "Info.plist").write_bytes(
        plistlib.dumps({"CFBundleExecutable": "Owl", "CFBundleName": "Owl"})
    )
    python = app / "Contents" / "MacOS" / "python"
    shutil.copy2(os.path.realpath(sys.executable), python)
    real_stdlib = sysconfig.get_paths()["stdlib"]
    prefix = [
        "bwrap", "--dev-bind", "/", "/",
        "--ro-bind", real_stdlib, str(stdlib),
        "--tmpfs", real_stdlib,
        "--",
    ]  # fmt: skip
    site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "PYTHONHOME": str(resources),
        "PYTHONPATH": os.pathsep.join([APP, *site]),
    }
    return python, prefix, env


def test_the_layout_needs_its_environment_as_py2apps_does(tmp_path):
    """What the fix is for: the helper as `python -I -S script` dies at once."""
    python, prefix, env = bundle(tmp_path)
    script = tmp_path / "hello.py"
    script.write_text("print('hello')\n")
    isolated = subprocess.run(
        [*prefix, str(python), "-I", "-S", str(script)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert isolated.returncode != 0 and "encodings" in isolated.stderr, isolated.stderr
    plain = subprocess.run(
        [*prefix, str(python), "-S", str(script)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert plain.stdout == "hello\n", plain.stderr


DAEMON = textwrap.dedent(
    """
    import os, subprocess, sys, tempfile
    from owl.tree import launch, pyhelper
    from owl.git import safegit

    assert pyhelper.in_bundle(), sys.executable
    work = sys.argv[1]
    out = open(os.path.join(work, "agent.out"), "w+b")
    env = {"PATH": os.environ["PATH"], "HOME": work, "PYTHONPATH": "/the/agents/own",
           "PYTHONINSPECT": "1"}
    run = launch.spawn(
        ["/bin/sh", "-c", 'echo "agent ran; home=${PYTHONHOME-none}; path=$PYTHONPATH"'],
        cwd=work, env=env, stdout=out, stderr=out, reaper=True,
    )
    print("reaper", run.wait(30))
    out.seek(0)
    print(out.read().decode().strip())
    done = safegit.run(work, "init", "-q", "repo")
    print("git", done.returncode, done.stderr.strip())
    """
)


def test_a_runs_reaper_and_a_git_call_start_inside_the_bundle(tmp_path):
    python, prefix, env = bundle(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "encodings.py").write_text("raise SystemExit('the worktree was on sys.path')\n")
    done = subprocess.run(
        [*prefix, str(python), "-c", DAEMON, str(work)],
        env=env, capture_output=True, text=True, timeout=120, cwd=work,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert lines[0] == "reaper 0", (lines, done.stderr)
    # the agent has the caller's environment: not the bundle's two, its own PYTHONPATH
    assert lines[1] == "agent ran; home=none; path=/the/agents/own", lines
    assert lines[2] == "git 0 ", lines
    assert (work / "repo" / ".git").is_dir()


def test_outside_a_bundle_helpers_start_isolated():
    argv, env = pyhelper.command("/x/reaper.py", ["3", "-"], {"PYTHONPATH": "/p", "A": "b"})
    assert argv == [sys.executable, "-I", "-S", "/x/reaper.py", "3", "-"]
    assert env == {"PYTHONPATH": "/p", "A": "b"}


def test_inside_a_bundle_only_the_bundles_two_variables_reach_the_interpreter(tmp_path):
    app = tmp_path / "Owl.app"
    (app / "Contents" / "MacOS").mkdir(parents=True)
    (app / "Contents" / "Info.plist").write_bytes(plistlib.dumps({"CFBundleName": "Owl"}))
    exe = str(app / "Contents" / "MacOS" / "python")
    caller = {"PYTHONPATH": "/mine", "PYTHONSTARTUP": "/evil.py", "PATH": "/usr/bin"}
    argv, env = pyhelper.command("/x/sweeper.py", ["42", "git"], caller, exe)
    assert argv[:5] == [exe, "-s", "-S", "-P", "-c"] and "-I" not in argv and "-E" not in argv
    assert argv[6:] == ["2", "PYTHONPATH", "/mine", "PYTHONSTARTUP", "/evil.py",
                        "/x/sweeper.py", "42", "git"]  # fmt: skip
    assert sorted(k for k in env if k.startswith("PYTHON")) == ["PYTHONHOME", "PYTHONPATH"]
    assert env["PATH"] == "/usr/bin" and env["PYTHONPATH"] != "/mine"


def test_the_bundles_own_variables_do_not_reach_the_runs(monkeypatch):
    """What the stub set for the bundle's interpreter is dropped at its entry:
    a Run's environment (made from the daemon's) carries none of it."""
    from owl.cli import bundled

    for name in bundled.BUNDLE_ENV:
        monkeypatch.setenv(name, "/Applications/Owl.app/Contents/Resources")
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    assert bundled.entry(["-m", "this"]) == 0
    assert not [name for name in bundled.BUNDLE_ENV if name in os.environ]
