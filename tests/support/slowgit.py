"""A git that is slow where a large checkout or a slow hook makes it slow.

A folder with a `git` that runs the real git and then, while the file
`slow` beside it names a number of seconds, sleeps that long after a
`worktree add` (the worktree and branch are made by then, as a slow
post-checkout hook would leave them), or after the git command `slow(on=)`
names (a `status` in a large checkout). Put the folder first on the daemon's
PATH. With `missing=True` the folder holds links to a few tools and no git
at all once `hide_git()` is called; PATH is then the folder alone.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SHIM = """#!/bin/sh
"{git}" "$@"
rc=$?
on="$(cat "{on}" 2>/dev/null || echo "worktree add")"
case " $* " in
  *" $on "*) [ -s "{slow}" ] && sleep "$(cat "{slow}")" ;;
esac
exit $rc
"""
TOOLS = ("sh", "sleep", "cat", "nice", "ionice", "env")


class SlowGit:
    def __init__(self, folder: Path, *, alone: bool = False) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.slow_file = folder / "slow"
        self.on_file = folder / "slow-on"
        real = shutil.which("git")
        assert real, "git is needed"
        (folder / "git").write_text(SHIM.format(git=real, slow=self.slow_file, on=self.on_file))
        (folder / "git").chmod(0o755)
        self.alone = alone
        if alone:
            for tool in TOOLS:
                found = shutil.which(tool)
                if found and not (folder / tool).exists():
                    (folder / tool).symlink_to(found)

    def path(self) -> str:
        return str(self.folder) if self.alone else f"{self.folder}{os.pathsep}{os.environ['PATH']}"

    def slow(self, seconds: float | None, on: str = "worktree add") -> None:
        self.on_file.write_text(on)
        if seconds is None:
            self.slow_file.unlink(missing_ok=True)
        else:
            self.slow_file.write_text(f"{seconds:g}")

    def hide_git(self) -> None:
        (self.folder / "git").unlink()
