"""Where the Jobs' worktrees go: never a path with a space.

macOS's data folder is ``~/Library/Application Support/owl``: a worktree
there has a space in every path, which Make (``include``, ``$(wildcard)``,
targets), automake and Bazel cannot build in. Shown here with the real
``make``, and with the real platformdirs choosing a data folder with a space
(as it does on macOS) through XDG_DATA_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from owl.settings.paths import SPACELESS, worktrees_for
from support.need import programs

MAKEFILE = "include $(CURDIR)/rules.mk\nall: built\n"
RULES = "built:\n\ttouch built\n"


def builds(folder: Path) -> bool:
    folder.mkdir(parents=True)
    (folder / "Makefile").write_text(MAKEFILE)
    (folder / "rules.mk").write_text(RULES)
    done = subprocess.run(["make", "-s"], cwd=folder, capture_output=True, timeout=60)
    return done.returncode == 0 and (folder / "built").exists()


def test_a_makefile_builds_where_worktrees_go_not_in_application_support(tmp_path):
    programs("make")
    home = tmp_path / "Users" / "me"
    data = home / "Library" / "Application Support" / "owl"
    place = worktrees_for(data, home)
    assert place == home / SPACELESS and " " not in str(place)
    assert builds(place / "job-1")
    assert not builds(data / "worktrees" / "job-1")  # what the space did


def test_get_paths_without_owl_home_takes_the_spaceless_place(tmp_path):
    """The real platformdirs, its data folder given a space (as macOS's has);
    Owl's other folders stay where platformdirs puts them."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "OWL_HOME"}
    env.update(HOME=str(home), XDG_DATA_HOME=str(tmp_path / "Application Support"))
    code = (
        "import json; from owl.settings.paths import get_paths; p = get_paths(); "
        "print(json.dumps([str(p.worktrees), str(p.db)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    worktrees, db = json.loads(out.stdout)
    assert worktrees == str(home / ".local" / "share" / "owl" / "worktrees")
    assert db == str(tmp_path / "Application Support" / "owl" / "owl.db")


def test_a_data_folder_without_a_space_keeps_its_worktrees():
    """Linux's, and OWL_HOME's (everything under DIR, as the interface says)."""
    data = Path("/home/me/.local/share/owl")
    assert worktrees_for(data, Path("/home/me")) == data / "worktrees"
    # a home with a space leaves no better place: the data folder's
    spaced = Path("/Users/John Smith/Library/Application Support/owl")
    assert worktrees_for(spaced, Path("/Users/John Smith")) == spaced / "worktrees"
