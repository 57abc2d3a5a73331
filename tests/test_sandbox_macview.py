"""The Run's own home as macOS gets it (`owl.sandbox.macview`), made on a real
filesystem: the places Linux binds are links in it, made again at each start
whatever the Run left; the agent's variables lead into it."""

from __future__ import annotations

import os
from pathlib import Path

from owl.sandbox import macview, ownhome
from owl.sandbox.agentstate import AGENTS


def made(tmp_path: Path, agent: str = "codex", env: dict[str, str] | None = None) -> ownhome.Own:
    home = tmp_path / "Users" / "me"
    home.mkdir(parents=True, exist_ok=True)
    env = env or {"HOME": str(home), "PATH": "/usr/bin"}
    own = ownhome.make(
        str(tmp_path / "keep"),
        "job-1",
        str(tmp_path / "project"),
        str(home),
        env,
        ["~/.cache", "~/Library/Caches"],
        agent,
        AGENTS[agent],
    )
    macview.link_places(own, str(home))
    return own


def test_each_place_is_a_link_to_owls_folder_in_the_runs_home(tmp_path):
    own = made(tmp_path)
    home = Path(own.home)
    for link, source in (
        (".cache", "/caches/cache-"),
        ("Library/Caches", "/caches/Caches-"),
        (".codex", "/agents/codex-"),
        (".gitconfig", "/jobs/job-1"),
    ):
        assert (home / link).is_symlink() and source in os.readlink(home / link), link
    assert (home / "Library").is_dir() and not (home / "Library").is_symlink()
    before = {p: os.lstat(home / p).st_ino for p in (".cache", ".codex")}
    macview.link_places(own, str(tmp_path / "Users" / "me"))  # again: left as it is
    assert before == {p: os.lstat(home / p).st_ino for p in (".cache", ".codex")}


def test_what_the_run_left_in_place_of_a_link_is_replaced_never_followed(tmp_path):
    own = made(tmp_path)
    home = Path(own.home)
    victim = tmp_path / "Users" / "me" / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("the person's\n")
    cache = os.readlink(home / ".cache")
    (home / ".cache").unlink()
    (home / ".cache").symlink_to(victim)
    (home / "Library").rename(tmp_path / "lib-moved")
    (home / "Library").symlink_to(victim)  # a link where a folder on the way belongs
    gitconfig = os.readlink(home / ".gitconfig")
    (home / ".gitconfig").unlink()
    (home / ".gitconfig").write_text("[core]\n\tfsmonitor = /tmp/x\n")  # read-only: not kept
    macview.link_places(own, str(tmp_path / "Users" / "me"))
    assert os.readlink(home / ".cache") == cache
    assert (home / "Library").is_dir() and not (home / "Library").is_symlink()
    assert (home / "Library" / "Caches").is_symlink()
    assert os.readlink(home / ".gitconfig") == gitconfig
    assert "fsmonitor" not in Path(gitconfig).read_text()
    assert [p.name for p in victim.iterdir()] == ["keep.txt"]


def test_a_state_file_saved_over_its_link_is_kept_but_not_a_hard_link(tmp_path):
    """A program that saves by renaming a new file over ``~/.claude.json``
    leaves a plain file where the link was: the agent's newer state, moved
    over Owl's state file. A file with another name elsewhere (a hard link)
    is not taken in: it is replaced by the link."""
    own = made(tmp_path, "claude")
    home = Path(own.home)
    state = os.readlink(home / ".claude.json")
    new = home / ".claude.json.tmp"
    new.write_text('{"numStartups": 3}\n')
    os.replace(new, home / ".claude.json")
    macview.link_places(own, str(tmp_path / "Users" / "me"))
    assert os.readlink(home / ".claude.json") == state
    assert Path(state).read_text() == '{"numStartups": 3}\n'
    (home / ".claude.json").unlink()
    other = tmp_path / "elsewhere.json"
    other.write_text('{"mcpServers": {"x": {}}}\n')
    os.link(other, home / ".claude.json")
    macview.link_places(own, str(tmp_path / "Users" / "me"))
    assert os.readlink(home / ".claude.json") == state
    assert Path(state).read_text() == '{"numStartups": 3}\n'


def test_an_agents_variable_leading_outside_the_home_is_let_go(tmp_path):
    """``CODEX_HOME=/srv/codex``: Seatbelt cannot put Owl's folder there, so
    the agent keeps its state at its default, in the Run's home, linked."""
    home = str(tmp_path / "Users" / "me")
    names = macview.state_vars(AGENTS["codex"].state)
    assert "CODEX_HOME" in names and "XDG_CACHE_HOME" in names
    env = {"HOME": home, "CODEX_HOME": "/srv/codex", "XDG_CONFIG_HOME": f"{home}/.config"}
    assert macview.settled(env, names) == {"HOME": home, "XDG_CONFIG_HOME": f"{home}/.config"}
    own = made(tmp_path, "codex", macview.settled(env, names))
    assert (Path(own.home) / ".codex").is_symlink()
