"""Never silently uncontained: where bwrap cannot make a sandbox, a Run does not
start (the default on Linux); its Job waits with one line saying why and what
fixes it, and starts by itself once bwrap works. Running uncontained is the
person's written choice (`sandbox.mode = "auto"`), and such a Run says so.

bwrap is made unusable for a real daemon the way Ubuntu's AppArmor rule makes
it: a stand-in first on the daemon's PATH that fails as bwrap does there."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from owlproc import OwlDaemon, make_project, wait_for
from support.need import programs

# bwrap on Ubuntu 24.04 with kernel.apparmor_restrict_unprivileged_userns = 1
REFUSED = """#!/bin/sh
echo "bwrap: setting up uid map: Permission denied" >&2
exit 1
"""
WORK = "echo work > done.txt && git add done.txt && git commit -qm 'the work' && echo committed"


def stand_in(folder: Path, text: str) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / "bwrap"
    tmp = folder / "bwrap.new"
    tmp.write_text(text)
    tmp.chmod(0o755)
    tmp.replace(path)  # whole, as a package upgrade lays it


def daemon(tmp_path: Path, bin_dir: Path, sandbox: dict) -> OwlDaemon:
    import os

    return OwlDaemon(
        tmp_path / "owl",
        {
            "sandbox": sandbox,
            "agents": {"shell": {"command": ["sh", "-c", WORK]}},
            "agent": {"default": "shell"},
        },
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "AGENT_PIDS": ""},
    )


def test_a_job_waits_for_its_sandbox_and_starts_by_itself_once_bwrap_works(tmp_path):
    programs("bwrap")
    real = shutil.which("bwrap")
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, REFUSED)
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path, bin_dir, {}) as d:  # the default mode
        job = d.add("do the work", project)
        d.machine("idle")
        st = wait_for(
            lambda: (s := d.status())["waiting"] and "contained" in s["waiting"] and s,
            timeout=15,
            what="the Job to wait for its sandbox",
        )
        assert st["sandbox"]["mode"] == "required" and st["sandbox"]["waits"] is True
        line = st["sandbox"]["line"]
        assert line.startswith("Runs cannot be contained: bwrap cannot make a sandbox here")
        assert "setting up uid map: Permission denied" in line and 'sandbox.mode = "auto"' in line
        assert st["attention"] == line
        assert f"job {job} waits: {line}" == st["waiting"]
        text = d.ok("status")
        assert text.splitlines()[0] == f"sandbox:    {line}", text
        j = d.job(job)
        assert j["state"] == "pending" and j["runs"] == [] and j["attempts_left"] == 3
        assert not (Path(j["worktree"] or tmp_path / "none") / "done.txt").exists()
        # bwrap works again (installed, or its profile loaded): nobody touches Owl
        stand_in(bin_dir, f'#!/bin/sh\nexec {real} "$@"\n')
        j = d.wait_job(job, "review", timeout=30)
        assert j["runs"][0]["contained"].startswith("contained: bwrap"), j["runs"][0]
        st = d.status()
        assert st["sandbox"]["contained"] is True and st["attention"] is None
        assert d.ok("status").splitlines()[0].startswith("sandbox:    Runs are contained")


def test_with_mode_auto_an_uncontained_run_says_so_everywhere(tmp_path):
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, REFUSED)
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path, bin_dir, {"mode": "auto"}) as d:
        assert d.ok("status").startswith("sandbox:    Runs are not contained: bwrap cannot")
        job = d.add("do the work", project)
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=30)
        label = j["runs"][0]["contained"]
        assert label.startswith("not contained: bwrap cannot make a sandbox here"), label
        shown = d.ok("jobs", "show", str(job))
        assert label in shown
        log = Path(j["runs"][0]["log"]).read_text()
        assert log.startswith(f"owl: {label}\n") and "committed" in log
        page = d.ok("jobs", "review", str(job), "--no-open")
        assert "not contained: bwrap cannot make a sandbox here" in Path(page.strip()).read_text()


@pytest.mark.parametrize(
    "release, command",
    [
        ("ID=ubuntu\nID_LIKE=debian\n", "sudo apt install bubblewrap"),
        ('ID="fedora"\n', "sudo dnf install bubblewrap"),
        ('ID=rocky\nID_LIKE="rhel centos fedora"\n', "sudo dnf install bubblewrap"),
        ("ID=arch\n", "sudo pacman -S bubblewrap"),
        ('ID="opensuse-tumbleweed"\nID_LIKE="opensuse suse"\n', "sudo zypper install bubblewrap"),
        ("ID=alpine\n", "sudo apk add bubblewrap"),
        ("", "install the bubblewrap package"),
    ],
)
def test_the_package_to_install_is_the_distribution_s(release, command):
    from owl.sandbox import ready

    why = "bubblewrap is not installed (sudo apt install bubblewrap)"
    assert ready.explain(why, ready.Host(os_release=release)) == (
        f"bubblewrap is not installed ({command})"
    )


def test_ubuntu_s_apparmor_rule_is_named_with_its_own_fix():
    from owl.sandbox import ready

    why = "bwrap cannot make a sandbox here: bwrap: setting up uid map: Permission denied"
    ubuntu = ready.Host(os_release="ID=ubuntu\n", apparmor_userns="1")
    line = ready.explain(why, ubuntu)
    assert "Ubuntu's AppArmor forbids unprivileged user namespaces" in line
    assert "kernel.apparmor_restrict_unprivileged_userns = 1" in line
    assert (
        line.endswith("sudo apparmor_parser -r /etc/apparmor.d/bwrap-userns-restrict")
        and "/usr/share/apparmor/extra-profiles/bwrap-userns-restrict" in line
    )
    # the same error where the rule is off is not blamed on it
    line = ready.explain(why, ready.Host(os_release="ID=ubuntu\n", apparmor_userns="0"))
    assert "AppArmor" not in line and "user namespace" in line
    debian = ready.Host(os_release="ID=debian\n", userns_clone="0")
    assert ready.explain(
        "bwrap cannot make a sandbox here: bwrap: No permissions to create new namespace, "
        "likely because the kernel does not allow non-privileged user namespaces.",
        debian,
    ).endswith("sudo sysctl -w kernel.unprivileged_userns_clone=1")
    other = ready.explain("bwrap cannot make a sandbox here: bwrap: Can't mount proc", ubuntu)
    assert other == "bwrap cannot make a sandbox here: bwrap: Can't mount proc"


def test_the_real_bwrap_here_is_asked_afresh():
    from owl.sandbox import ready

    programs("bwrap")
    assert ready.ask() is None
    answer = ready.last()
    assert answer is not None and answer.problem is None
    assert subprocess.run(["bwrap", "--version"], capture_output=True).returncode == 0


# pasta where /dev/net/tun cannot be opened (a container without it)
NO_TUN = """#!/bin/sh
echo "Failed to open() /dev/net/tun: No such file or directory" >&2
exit 1
"""


def test_a_run_whose_network_helper_failed_is_labelled_with_no_network(tmp_path):
    """The label says what the Run's network is, not what was asked: pasta
    failing leaves the Run without a network (never the host's), and says why."""
    programs("bwrap")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pasta = bin_dir / "pasta"
    pasta.write_text(NO_TUN)
    pasta.chmod(0o755)
    project = make_project(tmp_path / "proj")
    with daemon(tmp_path, bin_dir, {"mode": "required"}) as d:
        job = d.add("do the work", project)
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=30)
        label = j["runs"][0]["contained"]
        assert label.startswith("contained: bwrap "), label
        assert label.endswith(
            ", no network: pasta: Failed to open() /dev/net/tun: No such file or directory"
            "; unix sockets: none"
        ), label
        assert label in d.ok("jobs", "show", str(job))
        assert not list((d.home / "logs").glob("*.net"))
