"""A second user on the machine, and the real daemon run as that user.

For the tests of what Owl does with a process it may not signal: the daemon
runs as an ordinary user, whose agent starts a setuid-root program (as
passwordless ``sudo`` does) that the test compiles with gcc. The test process
itself is root, so it makes the user, owns the helper, and cleans up.

The daemon and the ``owl`` command run from a copy of the package (and the
libraries it imports) in a folder the user can read, with the base
interpreter: the checkout and its venv may sit where only root can enter.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import psutil
import pytest

from owlproc import OWL, OwlDaemon

ROOT = Path(__file__).resolve().parents[2]
# What the daemon imports beyond the standard library.
LIBRARIES = (
    "psutil",
    "platformdirs",
    "tomli_w",
    "jeepney",
    # Apprise, for the channels, and what it imports
    "apprise",
    "requests",
    "urllib3",
    "requests_oauthlib",
    "oauthlib",
    "click",
    "markdown",
    "yaml",
    "certifi",
    "charset_normalizer",
    "idna",
)

SETUID_ROOT = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    /* Become root for good, as sudo does: real, effective and saved uid. */
    if (setresuid(0, 0, 0) != 0) { perror("setresuid"); return 3; }
    sleep(argc > 1 ? atoi(argv[1]) : 600);
    return 0;
}
"""


def need_root_tools() -> None:
    """Fail under CI, skip on a developer's machine, when the test cannot be made."""
    missing = [t for t in ("useradd", "userdel", "gcc") if shutil.which(t) is None]
    why = None
    if os.geteuid() != 0:
        why = "needs root to make a second user and a setuid-root program"
    elif missing:
        why = f"needs {', '.join(missing)}"
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


@contextlib.contextmanager
def second_user(tag: str) -> Iterator[pwd.struct_passwd]:
    """A user made for this test and removed after it (with every process it has)."""
    need_root_tools()
    name = f"owl{tag}{os.getpid() % 100000}"[:30]
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    user = pwd.getpwnam(name)
    try:
        yield user
    finally:
        for proc in psutil.process_iter(["uids"]):
            uids = proc.info["uids"]
            if uids is not None and user.pw_uid in (uids.real, uids.effective):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        subprocess.run(["userdel", name], capture_output=True)


def shared_install(folder: Path) -> Path:
    """Copy the package and its libraries into `folder`, readable by all."""
    folder.mkdir(parents=True, exist_ok=True)
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "app" / "owl", folder / "owl", ignore=skip, dirs_exist_ok=True)
    for name in LIBRARIES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        src = Path(mod.__file__)
        if src.name == "__init__.py":
            shutil.copytree(src.parent, folder / name, ignore=skip, dirs_exist_ok=True)
        else:
            shutil.copy2(src, folder / src.name)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644 | (path.stat().st_mode & 0o111))
    return folder


def setuid_root_helper(folder: Path) -> Path:
    """Compile the helper that becomes root and sleeps; setuid root, 4755."""
    src = folder / "become_root.c"
    out = folder / "become-root"
    src.write_text(SETUID_ROOT)
    subprocess.run(["gcc", "-O0", "-o", str(out), str(src)], check=True, capture_output=True)
    os.chown(out, 0, 0)
    out.chmod(0o4755)
    return out


def chown_tree(path: Path, user: pwd.struct_passwd) -> None:
    for p in [path, *path.rglob("*")]:
        os.lchown(p, user.pw_uid, user.pw_gid)


class UserOwl(OwlDaemon):
    """The real daemon and `owl` command, both run as `user`."""

    def __init__(
        self,
        home: Path,
        user: pwd.struct_passwd,
        shared: Path,
        config: dict | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(home, config, **kw)
        self.user = user
        self.env.update(
            HOME=str(self.home),
            USER=user.pw_name,
            LOGNAME=user.pw_name,
            PYTHONPATH=str(shared),
            PYTHONDONTWRITEBYTECODE="1",
        )
        self.env.pop("XDG_RUNTIME_DIR", None)
        chown_tree(self.home, user)

    def _as_user(self) -> dict[str, Any]:
        return {
            "user": self.user.pw_uid,
            "group": self.user.pw_gid,
            "extra_groups": [],
            "cwd": str(self.home),
        }

    def write_config(self, cfg: dict) -> None:
        super().write_config(cfg)
        if hasattr(self, "user"):
            chown_tree(self.home, self.user)

    def start(self, wait: bool = True) -> "UserOwl":
        logf = open(self.log, "ab")
        os.chown(self.log, self.user.pw_uid, self.user.pw_gid)
        self.proc = subprocess.Popen(
            [sys._base_executable, *OWL[1:], "daemon"],
            env=self.env,
            stdout=logf,
            stderr=logf,
            stdin=subprocess.DEVNULL,
            **self._as_user(),
        )
        logf.close()
        if wait:
            from owlproc import wait_for

            wait_for(
                lambda: self.owl("status", "--json").returncode == 0 or self._died(),
                timeout=60,  # a copy without bytecode, on a busy machine
                what="the daemon to answer",
            )
            if self._died():
                raise AssertionError(f"daemon exited {self.proc.returncode}:\n{self.log_text()}")
        return self

    # The daemon answers only its own user on its socket, so this test process
    # (root) asks through the `owl` command run as that user.

    def status(self) -> dict:
        return self.json("status")

    def job(self, job_id: int) -> dict:
        return self.json("jobs", "show", str(job_id))

    def job_state(self, job_id: int) -> str | None:
        return self.job(job_id)["state"]

    def add(self, prompt: str, project: Path, *extra: str) -> int:
        return int(self.ok("add", "--project", str(project), *extra, "--", prompt).strip())

    def machine(self, event: str) -> None:
        self.ok("machine", event)

    def owl(
        self, *args: str, input: str | None = None, timeout: float = 30.0
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys._base_executable, *OWL[1:], *args],
            env=self.env,
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            **self._as_user(),
        )
