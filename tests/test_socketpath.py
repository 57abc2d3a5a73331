"""The socket's place worked out on strings is the place `paths` gives:
under OWL_HOME for any spelling of it, and under a private XDG_RUNTIME_DIR
where platformdirs agrees; anywhere platformdirs sees further, no guess."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
import pytest

from owl.settings import socketpath
from owl.settings.paths import get_paths


@pytest.mark.parametrize(
    "home",
    [
        "{tmp}/home",
        "{tmp}//home/./x/",
        "{tmp}/a/../home",
        "rel/home",
        "~/owl-home",
        "{tmp}/" + "deep/" * 30 + "home",  # past sun_path: the hashed place
    ],
)
def test_under_owl_home_it_is_the_place_paths_gives(home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("OWL_HOME", home.format(tmp=tmp_path))
    assert socketpath.under_home() == str(get_paths().socket)


def test_without_owl_home_there_is_no_home_socket(monkeypatch):
    monkeypatch.delenv("OWL_HOME", raising=False)
    assert socketpath.under_home() is None


def platformdirs_socket() -> str:
    runtime = platformdirs.PlatformDirs("owl", appauthor=False).user_runtime_dir
    return os.path.join(runtime, "owl.sock")


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "rt"
    folder.mkdir(mode=0o700)
    monkeypatch.delenv("OWL_HOME", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    return folder


@pytest.mark.skipif(not os.uname().sysname == "Linux", reason="the guess is Linux's")
def test_a_private_runtime_folder_is_the_place_platformdirs_gives(runtime):
    assert socketpath.likely_default() == platformdirs_socket() == str(get_paths().socket)
    assert socketpath.likely_default() == str(runtime / "owl" / "owl.sock")


def test_a_shared_runtime_folder_is_no_guess(runtime):
    runtime.chmod(0o755)
    assert socketpath.likely_default() is None


def test_a_symlinked_runtime_folder_is_no_guess(runtime, tmp_path, monkeypatch):
    link = tmp_path / "link"
    link.symlink_to(runtime)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(link))
    assert socketpath.likely_default() is None


def test_a_runtime_folder_others_may_rename_is_no_guess(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone may move our folder away
    folder = shared / "rt"
    folder.mkdir(mode=0o700)
    monkeypatch.delenv("OWL_HOME", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    assert socketpath.likely_default() is None
    shared.chmod(0o1777)  # as /tmp: sticky, so only we may
    assert socketpath.likely_default() == str(folder / "owl" / "owl.sock")


@pytest.mark.parametrize("value", ["", "relative/rt", "/no/such/folder"])
def test_an_unset_relative_or_missing_runtime_folder_is_no_guess(value, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", value)
    assert socketpath.likely_default() is None
