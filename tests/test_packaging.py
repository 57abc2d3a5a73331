"""Owl as a user installs it: a wheel, in a virtual environment of its own.

The wheel is built from a copy of the files the build reads (so the build
leaves nothing in the working tree) and installed, with its dependencies,
into a fresh venv made with `--system-site-packages` — the pipx path, which
lets the tray see the distribution's PyGObject. Everything is then run from
that venv with the source tree nowhere on sys.path: the package must find
its own icon and login-item templates inside itself.

Needs the package index that pip is set up with (dependencies come from
there or from pip's cache) and `desktop-file-validate` (desktop-file-utils).
"""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Iterator

import pytest
from support import need

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parent.parent
#: The interpreter this venv was made from: a venv of a venv would not be fresh.
BASE_PYTHON = getattr(sys, "_base_executable", None) or sys.executable


class Installed:
    """A venv holding nothing of Owl's but the installed wheel."""

    def __init__(self, venv: Path, wheel: Path, work: Path) -> None:
        self.venv, self.wheel, self.work = venv, wheel, work
        self.bin = venv / "bin"
        self.site = Path(
            self.run_python(
                "import sysconfig; print(sysconfig.get_paths()['purelib'])"
            ).stdout.strip()
        )

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "PYTHONPATH",
                "PYTHONHOME",
                "VIRTUAL_ENV",
                "OWL_HOME",
                "DISPLAY",
                "WAYLAND_DISPLAY",
                "XDG_CONFIG_HOME",
                "OWL_MACHINE",
            )
        }
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env.update(extra)
        return env

    def run(self, *argv: str, **extra: str) -> subprocess.CompletedProcess:
        # cwd outside the checkout: nothing of the source can be imported from ''.
        return subprocess.run(
            list(argv),
            cwd=self.work,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def run_python(self, code: str, **extra: str) -> subprocess.CompletedProcess:
        p = self.run(str(self.venv / "bin" / "python"), "-c", code, **extra)
        assert p.returncode == 0, p.stderr
        return p


def _build_wheel(dest: Path, work: Path) -> Path:
    src = work / "src"
    src.mkdir()
    shutil.copytree(
        ROOT / "app",
        src / "app",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest), str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    wheels = list(dest.glob("owl_away-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("packaging")
    wheel = _build_wheel(work / "dist", work)
    venv = work / "venv"
    # --without-pip: ensurepip takes ~20 s; this test's own pip installs into it.
    subprocess.run(
        [BASE_PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=60,
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    yield Installed(venv, wheel, work)


# -------------------------------------------------------------------- tests


def test_the_wheel_carries_the_package_data_and_nothing_else(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for needed in (
        "owl/tray/assets/owl.png",
        "owl/autostart/templates/owl-autostart.desktop",
        "owl/autostart/templates/dev.owl.plist",
        "owl/cli/__init__.py",
        "owl/__main__.py",
    ):
        assert needed in names, f"{needed} is not in the wheel"
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"owl"}, tops  # no tests, no bench
    entry = (
        zipfile.ZipFile(installed.wheel)
        .read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
        .decode()
    )
    assert "owl = owl.cli:main" in entry


def test_owl_runs_from_its_own_venv(installed: Installed) -> None:
    owl = str(installed.bin / "owl")
    p = installed.run(owl, "--version")
    assert p.returncode == 0, p.stderr
    from owl import __version__

    assert p.stdout.strip() == f"owl {__version__}"
    # No display and no daemon: the CLI says so (exit 3) without importing a toolkit.
    p = installed.run(owl, "status", OWL_HOME=str(installed.work / "home"))
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr


def test_the_installed_package_finds_its_own_icon_and_templates(installed: Installed) -> None:
    code = """if True:
        import json, sys
        from importlib.resources import files
        import owl, owl.tray.art
        from owl.autostart import owl_command
        from owl.autostart.command import template
        from PIL import Image
        icon = files("owl.tray").joinpath("assets", "owl.png")
        with Image.open(str(icon)) as im:
            size = im.size
        print(json.dumps({"owl": owl.__file__, "art": owl.tray.art.__file__, "icon": str(icon),
                          "icon_size": size, "command": owl_command(), "path": sys.path,
                          "desktop": template("owl-autostart.desktop").decode(),
                          "plist": template("dev.owl.plist").decode()}))
    """
    # -I: no PYTHONPATH, no user site, no current directory on sys.path.
    p = installed.run(str(installed.venv / "bin" / "python"), "-I", "-c", code)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    for key in ("owl", "art", "icon"):
        assert Path(got[key]).is_relative_to(installed.site), (key, got[key])
    assert not any(entry.startswith(str(ROOT)) for entry in got["path"]), got["path"]
    assert Path(got["icon"]).is_file() and got["icon_size"][0] >= 128, got
    assert got["command"] == [str(installed.bin / "owl")]
    assert "[Desktop Entry]" in got["desktop"] and "Exec=" in got["desktop"]
    assert plistlib.loads(got["plist"].encode())["RunAtLoad"] is True


def test_autostart_from_the_venv_writes_a_valid_login_item(installed: Installed) -> None:
    need.programs("desktop-file-validate")
    config = installed.work / "xdg-config"
    owl = str(installed.bin / "owl")
    p = installed.run(owl, "autostart", "on", XDG_CONFIG_HOME=str(config))
    assert p.returncode == 0, p.stderr
    item = config / "autostart" / "owl.desktop"
    fields = dict(line.split("=", 1) for line in item.read_text().splitlines() if "=" in line)
    assert fields["Exec"] == owl, fields  # this venv's owl, not whatever is on PATH
    assert Path(fields["Icon"]).is_file() and Path(fields["Icon"]).is_relative_to(installed.site)
    check = subprocess.run(["desktop-file-validate", str(item)], capture_output=True, text=True)
    assert check.returncode == 0 and not check.stdout.strip(), check.stdout + check.stderr
    p = installed.run(owl, "autostart", "status", "--json", XDG_CONFIG_HOME=str(config))
    assert json.loads(p.stdout)["on"] is True
    assert installed.run(owl, "autostart", "off", XDG_CONFIG_HOME=str(config)).returncode == 0
    assert not item.exists()


@pytest.mark.parametrize("name", ["owl.desktop", "owl-autostart.desktop"])
def test_desktop_entries_validate(name: str) -> None:
    need.programs("desktop-file-validate")
    p = subprocess.run(
        ["desktop-file-validate", str(ROOT / "packaging" / name)], capture_output=True, text=True
    )
    assert p.returncode == 0 and not p.stdout.strip(), p.stdout + p.stderr
