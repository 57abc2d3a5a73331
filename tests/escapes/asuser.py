"""An escape test's daemon as root or as an ordinary user, made the same way.

Root's Run gets a user namespace of its own with every capability dropped;
an ordinary user's gets what bwrap gives any user. A way out may hold in one
and not the other, so the tests of the kernel's ways out run in both. The
user's daemon is `support.users.UserOwl` (a user made for the test, the
package copied where it can read it), with the config, the environment and
the attack script `escapes.harness.daemon` made for root's."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from escapes.harness import daemon
from owlproc import OwlDaemon
from support.users import UserOwl, chown_tree, second_user, shared_install

WHO = ("root", "user")


@contextlib.contextmanager
def owl_as(
    who: str, base: Path, home: Path, project: Path, script: str, **kw: Any
) -> Iterator[OwlDaemon]:
    """The harness's daemon (``daemon(base, home, script, **kw)``), run as
    ``who``; for "user", ``home`` and ``project`` become that user's."""
    d = daemon(base, home, script, **kw)
    if who == "root":
        yield d
        return
    with second_user("esc") as user:
        base.chmod(0o755)
        shared = shared_install(base / "lib")
        with open(d.home / "config.toml", "rb") as f:
            cfg = tomllib.load(f)
        env = {k: v for k, v in d.env.items() if os.environ.get(k) != v}
        u = UserOwl(d.home, user, shared, cfg, env=env)
        u.env["HOME"] = str(home)
        for path in (home, project):
            chown_tree(path, user)
        try:
            yield u
        finally:  # the test reads them back as root (git refuses another's repository)
            for path in (home, project):
                for p in [path, *path.rglob("*")]:
                    os.lchown(p, 0, 0)


def compile_probe(base: Path) -> Path:
    """tests/escapes/probe.c, built where a Run (and another user) can run it."""
    out = base / "probe"
    src = Path(__file__).with_name("probe.c")
    subprocess.run(["gcc", "-O1", "-o", str(out), str(src)], check=True, capture_output=True)
    out.chmod(0o755)
    return out
