"""The first hour's small potholes, each through the real `owl` command.

A Job queued with `--no-start` and no daemon waits in the database for the
next daemon; the refusal without `claude` names the way out; `owl jobs show`
shows a command agent's last lines as lines, replies and checks in the one
time style, and one attempt count; the manual machine says what it did;
"did you mean" guesses only a slip of the fingers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from owlproc import OWL, OwlDaemon, make_project

MOMENT = r"\d\d:\d\d \((just now|\d+[smhd] ago)\)"


def test_add_no_start_with_no_daemon_queues_the_job_for_the_next_daemon(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    d = OwlDaemon(tmp_path / "home")
    p = d.owl("add", "--no-start", "--project", str(project), "exit=0")
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
    assert "no daemon is running; job 1 is queued for the next one" in p.stderr
    assert d.owl("status").returncode == 3  # nothing was started
    with d:
        job = d.job(1)
        assert job["state"] == "pending" and job["position"] == 1
        d.machine("idle")
        d.wait_job(1, "review")


def test_with_no_claude_the_refusal_names_the_way_out(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    d = OwlDaemon(
        tmp_path / "home",
        {"agents": {"aider": {"command": ["aider", "{prompt}"]}}},
        agent=False,
        env={"PATH": "/usr/bin:/bin", "OWL_NO_AUTOSTART": "1"},
    )
    d.write_config({"agents": {"aider": {"command": ["aider", "{prompt}"]}}})
    p = d.owl("add", "--project", str(project), "fix it")
    assert p.returncode == 1
    line = p.stderr.strip()
    assert "claude was not found on PATH" in line and line.count("\n") == 0
    assert "--agent NAME" in line and "agent.default" in line and "configured: aider" in line


def test_show_says_lines_as_lines_moments_in_one_style_and_one_attempt_count(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path / "project")
    agent = {
        "command": [sys.executable, "-c", "print('one'); print('two'); print('three')", "{prompt}"]
    }
    with OwlDaemon(
        tmp_path / "home", {"agents": {"lines": agent}, "agent": {"default": "lines"}}
    ) as d:
        job = d.add("say three things", project)
        d.machine("idle")
        d.wait_job(job, "review")
        d.ok("jobs", "reply", str(job), "and again")
        d.wait_job(job, "review")
        text = d.ok("jobs", "show", str(job))
        assert "  agent:    one\n            two\n            three\n" in text, text
        assert "\\n" not in text
        assert re.search(r"  reply     " + MOMENT + r" \(given to run 2\): and again", text), text
        # a reply spends no attempt: both Runs are attempt 1, in show and in the log's header
        assert len(re.findall(r"run \d+ · attempt 1 · succeeded", text)) == 2, text
        assert d.ok("logs", str(job)).splitlines()[0].startswith(f"job {job} · run 2 · attempt 1")


def test_the_manual_machine_says_what_it_did_and_is_in_completion(tmp_path: Path) -> None:
    with OwlDaemon(tmp_path / "home") as d:
        assert "is in use" in d.ok("machine", "input")
        assert "is idle" in d.ok("machine", "idle")
        assert "on battery" in d.ok("machine", "battery")
    completion = subprocess.run(
        [*OWL, "completion", "bash"], capture_output=True, text=True, check=True
    ).stdout
    assert "machine" in completion


def test_did_you_mean_only_for_a_slip_and_autostart_off_takes_service(tmp_path: Path) -> None:
    def owl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*OWL, *args],
            capture_output=True,
            text=True,
            env={
                "OWL_HOME": str(tmp_path / "home"),
                "PATH": "/usr/bin:/bin",
                "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
                "HOME": str(tmp_path),
                "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            },
        )

    bogus = owl("bogus")
    assert bogus.returncode == 2 and "did you mean" not in bogus.stderr
    assert "did you mean 'status'?" in owl("stauts").stderr
    assert "did you mean 'logs'?" in owl("lgos").stderr
    off = owl("autostart", "off", "--service")
    assert off.returncode == 0 and "already off" in off.stdout, off.stderr


def test_the_man_page_builds_from_the_readmes_command(tmp_path: Path) -> None:
    using = (Path(__file__).resolve().parent.parent / "docs" / "using.md").read_text()
    assert "pip install '.[man]'" in using and "python -m owl.cli.docs man" in using
    out = tmp_path / "owl.1"
    subprocess.run([sys.executable, "-m", "owl.cli.docs", "man", str(out)], check=True, timeout=60)
    assert out.read_text().startswith(".TH") and "owl daemon" in out.read_text()


def test_the_readme_is_read_in_five_minutes_and_every_page_it_names_is_there() -> None:
    """At most 200 lines, and each of its links to a page of this checkout leads
    somewhere, as do the docs' own links; every page of docs/ is named."""
    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    assert readme.count("\n") <= 200
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\((?!https?:|#|mailto:)([^)#]+)", page.read_text()):
            assert (page.parent / target).exists(), (page.name, target)
    docs = {f"docs/{p.name}" for p in pages[1:]}
    assert docs <= set(re.findall(r"\]\((docs/[^)#]+)\)", readme)), "a page the README never names"


def _anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_docs_links_to_a_section_find_it_and_no_page_repeats_another() -> None:
    """A page moved out of another says where a section went with a link that
    reaches it (not "above" or "see Configuration"), and says nothing twice:
    no paragraph or long sentence stands in two pages."""
    root = Path(__file__).resolve().parent.parent
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    texts = {p.resolve(): p.read_text() for p in pages}
    anchors = {
        p: {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)} for p, text in texts.items()
    }
    for page, text in texts.items():
        for target, anchor in re.findall(r"\]\((?!https?:|mailto:)([^)#]*)#([^)]+)\)", text):
            where = (page.parent / target).resolve() if target else page
            assert anchor in anchors.get(where, {anchor}), (page.name, target, anchor)
    said: dict[str, str] = {}
    for page, text in texts.items():
        flat = " ".join(text.split())
        pieces = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
        for piece in [*pieces, *re.split(r"(?<=[.!?]) ", flat)]:
            if len(piece) >= 80 and said.setdefault(piece, page.name) != page.name:
                raise AssertionError(f"{page.name} repeats {said[piece]}: {piece[:80]}")
