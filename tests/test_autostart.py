"""Start-at-login files: XDG autostart entry and macOS LaunchAgent."""

from __future__ import annotations

import plistlib
import subprocess
import sys
from pathlib import Path

import pytest
from support import need

from owl.autostart import launchd, xdg
from owl.autostart.command import owl_command


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("OWL_HOME", raising=False)
    return tmp_path


def _desktop_keys(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _validate(path: Path) -> None:
    need.programs("desktop-file-validate")
    out = subprocess.run(["desktop-file-validate", str(path)], capture_output=True, text=True)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_the_command_is_this_installed_owl() -> None:
    argv = owl_command()
    here = Path(sys.executable).parent
    assert (
        argv == [str(here / "owl")]
        if (here / "owl").exists()
        else argv == [sys.executable, "-m", "owl"]
    )
    # ...and it really starts Owl.
    assert Path(argv[0]).exists()


@pytest.mark.skipif(sys.platform == "darwin", reason="the XDG module is chosen on Linux")
def test_package_interface_on_linux(home: Path) -> None:
    import owl.autostart as autostart

    assert autostart.status() == (False, home / ".config" / "autostart" / "owl.desktop")
    written = autostart.enable()
    assert autostart.status() == (True, written)
    assert _desktop_keys(written)["Exec"] == xdg.exec_line(owl_command())
    assert autostart.disable() == written and not written.exists()
    assert autostart.status() == (False, written)
    autostart.disable()  # turning it off twice is fine


def test_xdg_enable_disable_status(home: Path) -> None:
    path = xdg.enable(["/opt/owl/bin/owl"])
    assert path == home / ".config" / "autostart" / "owl.desktop"
    assert xdg.status() == (True, path)
    keys = _desktop_keys(path)
    assert (
        keys["Exec"] == "/opt/owl/bin/owl"
        and keys["Type"] == "Application"
        and keys["Name"] == "Owl"
    )
    assert Path(keys["Icon"]).is_file(), "the icon ships inside the package"
    _validate(path)
    xdg.disable()
    assert xdg.status() == (False, path) and not path.exists()


def test_xdg_respects_xdg_config_home(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert xdg.enable(["owl"]) == tmp_path / "cfg" / "autostart" / "owl.desktop"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")  # the spec says: only absolute paths
    assert xdg.path() == home / ".config" / "autostart" / "owl.desktop"


def test_xdg_entry_hidden_or_disabled_counts_as_off(home: Path) -> None:
    path = xdg.enable(["owl"])
    path.write_text(path.read_text() + "Hidden=true\n")
    assert xdg.status() == (False, path)
    path.write_text(
        path.read_text()
        .replace("Hidden=true\n", "")
        .replace("X-GNOME-Autostart-enabled=true", "X-GNOME-Autostart-enabled=false")
    )
    assert xdg.status() == (False, path)


def test_xdg_exec_quotes_awkward_paths_and_carries_owl_home(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OWL_HOME", str(home / "my owl"))
    path = xdg.enable([str(home / "a dir/with $ and 100%/python"), "-m", "owl"])
    _validate(path)
    exec_line = _desktop_keys(path)["Exec"]
    assert exec_line.startswith(f'env "OWL_HOME={home}/my owl" ')
    assert "\\\\$" in exec_line and "100%%" in exec_line and exec_line.endswith(" -m owl")


def test_xdg_quote_rules() -> None:
    assert xdg.quote_exec_arg("owl") == "owl"
    assert xdg.quote_exec_arg("a b") == '"a b"'
    assert xdg.quote_exec_arg('say "hi"') == '"say \\"hi\\""'
    assert xdg.exec_line(["/x y/owl"], {"OWL_HOME": "/h"}) == 'env OWL_HOME=/h "/x y/owl"'


def test_launchd_plist_round_trips(home: Path) -> None:
    argv = ["/Users/me/.local/pipx/venvs/owl/bin/owl"]
    path = launchd.enable(argv)
    assert path == home / "Library" / "LaunchAgents" / "dev.owl.plist"
    doc = plistlib.loads(path.read_bytes())
    assert doc["Label"] == "dev.owl"
    assert doc["ProgramArguments"] == argv
    assert doc["RunAtLoad"] is True and doc["KeepAlive"] is False
    assert doc["LimitLoadToSessionType"] == "Aqua"
    assert "OWL_HOME" not in doc["EnvironmentVariables"]
    assert launchd.status() == (True, path)
    assert launchd.disable() == path and launchd.status() == (False, path)


def test_launchd_carries_owl_home_and_python_m_owl(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OWL_HOME", str(home / "owl"))
    path = launchd.enable([sys.executable, "-m", "owl"])
    doc = plistlib.loads(path.read_bytes())
    assert doc["ProgramArguments"] == [sys.executable, "-m", "owl"]
    assert doc["EnvironmentVariables"]["OWL_HOME"] == str(home / "owl")


def test_launchd_disabled_or_broken_counts_as_off(home: Path) -> None:
    path = launchd.enable(["owl"])
    doc = plistlib.loads(path.read_bytes())
    doc["Disabled"] = True
    path.write_bytes(plistlib.dumps(doc))
    assert launchd.status() == (False, path)
    path.write_text("not a plist")
    assert launchd.status() == (False, path)


def test_packaged_files_validate() -> None:
    root = Path(__file__).resolve().parent.parent
    _validate(root / "packaging" / "owl.desktop")
    _validate(root / "packaging" / "owl-autostart.desktop")
    plistlib.loads((root / "packaging" / "dev.owl.plist").read_bytes())
