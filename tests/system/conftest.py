"""The system tier: tests that run inside a person's desktop machine.

A Debian 13 machine under qemu (`tools/desktop-vm`): systemd as pid 1, logind,
a user manager whose user@1000.service is delegated (cgroup v2: cpu, memory,
pids), swap, systemd-resolved's stub resolver, and an ordinary user `dev` (sudo,
lingering) who set Owl up from a copy of this checkout with the README's own
command. Each test drives it over ssh as dev, in dev's own login session.

Only with `-m system` (`tools/test --system`, and the last step of `tools/test`):
booting the machine costs minutes under qemu's TCG, so a plain pytest run leaves
these out. `OWL_VM_RUN=DIR` reuses a machine `tools/desktop-vm boot DIR` booted.
Where no machine can be built or booted, each test fails under CI=true, saying
why, and is skipped elsewhere.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from support import need

ROOT = Path(__file__).resolve().parents[2]
VM = ROOT / "tools" / "desktop-vm"
HERE = Path(__file__).resolve().parent
SYSTEM_TIMEOUT = 3600


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "system: runs inside a Debian 13 desktop machine under qemu (-m system)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this folder's tests `system`; leave them out unless `-m` asks for them."""
    asked = "system" in (config.option.markexpr or "") and "not system" not in (
        config.option.markexpr or ""
    )
    keep, drop = [], []
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.system)
            # the first one boots the machine: minutes under TCG on a busy host
            item.add_marker(pytest.mark.timeout(SYSTEM_TIMEOUT))
            (keep if asked else drop).append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


SPENT: list[tuple[float, str]] = []  # every command run in the machine: (seconds, what)
READY: list[str] = []  # how the machine came up, and in how long


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Where the tier's time went: the commands run in the machine, the slowest named."""
    w = terminalreporter.write_line
    for line in READY:
        w(line)
    if not SPENT:
        return
    w(f"system tier: {len(SPENT)} commands in the machine took {sum(s for s, _ in SPENT):.0f} s")
    for took, what in sorted(SPENT, reverse=True)[:12]:
        w(f"  {took:6.1f} s  {what}")


@dataclass
class Desktop:
    """The booted machine; `sh` runs a bash script as dev over ssh."""

    run: Path
    spent: list[tuple[float, str]] = field(default_factory=lambda: SPENT)  # (seconds, what)

    def sh(self, script: str, timeout: float = 300.0, check: bool = True) -> str:
        p = self.run_sh(script, timeout)
        if check and p.returncode != 0:
            raise AssertionError(
                f"exit {p.returncode} in the machine:\n{script}\n--- stdout\n{p.stdout[-3000:]}"
                f"\n--- stderr\n{p.stderr[-3000:]}"
            )
        return p.stdout

    def run_sh(self, script: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        began = time.monotonic()
        try:
            return subprocess.run(
                [str(VM), "ssh", str(self.run), "bash -c " + shlex.quote(script)],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        finally:
            self.spent.append((time.monotonic() - began, " ".join(script.split())[:100]))

    def wait(self, script: str, what: str, timeout: float = 120.0) -> str:
        """Until `script` exits 0 in the machine; its output then. Polled in the
        machine itself (one ssh command), every half second."""
        loop = (
            f"end=$((SECONDS + {int(timeout)})); "
            f"until out=$({script}\n); do "
            '[ $SECONDS -ge $end ] && { printf %s "$out"; exit 99; }; sleep 0.5; done; '
            'printf %s "$out"'
        )
        p = self.run_sh(loop, timeout=timeout + 120)
        if p.returncode != 0:
            raise AssertionError(f"timed out waiting for {what}: {p.stdout}{p.stderr}")
        return p.stdout


def _problem() -> str | None:
    missing = [t for t in ("qemu-system-x86_64", "qemu-img", "ssh") if shutil.which(t) is None]
    if missing:
        return f"the system tier needs {', '.join(missing)} (tools/setup.sh --test installs them)"
    return None


@pytest.fixture(scope="session")
def desktop() -> Iterator[Desktop]:
    given = os.environ.get("OWL_VM_RUN")
    if given:
        yield Desktop(Path(given))
        return
    why = _problem()
    if why:
        need.missing(why)
    run = Path(tempfile.mkdtemp(prefix="owl-desktop-vm-"))
    began = time.monotonic()
    p = subprocess.run([str(VM), "boot", str(run)], capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        subprocess.run([str(VM), "stop", str(run)], capture_output=True, timeout=120)
        need.missing(
            f"the desktop machine did not boot: {(p.stderr.strip().splitlines() or ['?'])[-1]}"
        )
    said = [line.removeprefix("desktop-vm: ").split(";")[0] for line in p.stderr.splitlines()]
    READY.append(
        f"system tier: the machine was ready in {time.monotonic() - began:.0f} s ("
        + "; ".join(line for line in said if " in " in line and " s" in line)
        + ")"
    )
    try:
        yield Desktop(run)
    finally:
        subprocess.run([str(VM), "stop", str(run)], capture_output=True, timeout=180)
        shutil.rmtree(run, ignore_errors=True)


OWL = "~/owl/.venv/bin/owl"


@pytest.fixture
def owl_home(desktop: Desktop, request: pytest.FixtureRequest) -> Iterator[str]:
    """An OWL_HOME of the test's own in dev's home, and a project there; what was
    started for it is stopped after."""
    name = f"h-{request.node.name[:40]}"
    desktop.sh(
        f"rm -rf ~/{name} && mkdir -p ~/{name}/proj && cd ~/{name}/proj && git init -q && "
        "git -c user.name=dev -c user.email=dev@owl commit -q --allow-empty -m init"
    )
    yield f"$HOME/{name}"
    desktop.sh(
        f"OWL_HOME=$HOME/{name} {OWL} autostart off >/dev/null 2>&1; "
        f"OWL_HOME=$HOME/{name} {OWL} daemon stop >/dev/null 2>&1; true",
        check=False,
    )
