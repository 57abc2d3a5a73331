"""Reviewing a Job costs a bounded amount of memory, whatever its commit holds.

Real git, real `owl` commands in processes of their own, each measured by the
kernel: the largest resident set of the command or of any git it started
(`ru_maxrss` over the children a small parent waited for). An agent's commit
holding a 256 MB sparse file (a few KB in git) or a 40 MB text file of short
lines (git spends about eleven times that to count them), and one of 3,000
files: the page lists the first 1,000 and counts the rest, a hunk of 5,000
lines shows 2,000, big files are summarised by their size, and `owl jobs diff`
still prints every other file's patch exactly as git does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from owl.review import changes, diffs
from owlproc import OWL, make_project

PEAK_MB = 100  # every command's peak; reading the big files whole took 260-480 MB

_MEASURE = (
    "import resource, subprocess, sys\n"
    "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
    "sys.stdout.buffer.write(p.stdout)\n"
    "sys.stderr.buffer.write(p.stderr)\n"
    "sys.stderr.write(f'\\nexit {p.returncode} peak {resource.getrusage("
    "resource.RUSAGE_CHILDREN).ru_maxrss}\\n')\n"
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def job(tmp: Path, repo: Path, base: str) -> dict[str, str]:
    """A Job in review on owl/job-1 in a database of its own; the env to reach it."""
    from owl.store.db import Store

    home = tmp / "home"
    store = Store(home / "owl.db")
    jid = store.add_job("bound", str(repo), "claude", 1)
    store.set_job(jid, state="review", branch="owl/job-1", base=base, base_branch="main")
    store.close()
    assert jid == 1
    return dict(os.environ, OWL_HOME=str(home))


def measured(env: dict[str, str], *args: str) -> tuple[bytes, str, float]:
    """`owl ARGS`: its stdout, its stderr, and the peak MB of it and its gits."""
    p = subprocess.run(
        [sys.executable, "-c", _MEASURE, *OWL, *args], env=env, capture_output=True, timeout=300
    )
    err = p.stderr.decode()
    words = err.rstrip().rsplit("\n", 1)[-1].split()
    assert words[0] == "exit" and words[1] == "0", err
    return p.stdout, err, int(words[3]) / 1024


def branch(tmp: Path) -> tuple[Path, str]:
    repo = make_project(tmp / "proj", {"README": "x\n", "keep.py": "a = 1\n"})
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "switch", "-q", "-c", "owl/job-1")
    return repo, base


@pytest.mark.slow  # real commits of hundreds of MB or thousands of files
def test_a_huge_sparse_file_and_a_huge_text_file_are_summarised_within_the_bound(tmp_path):
    repo, base = branch(tmp_path)
    (repo / "bin").mkdir()
    with open(repo / "bin" / "data.img", "wb") as f:
        f.truncate(256 << 20)
    with open(repo / "gen.txt", "w") as f:  # 41 MB of short lines
        f.write("".join(f"{i}\n" for i in range(5_500_000)))
    (repo / "keep.py").write_text("a = 2\n")
    git(repo, "add", "-A")
    git(repo, "-c", "core.compression=1", "-c", "pack.compression=1", "commit", "-qm", "big")
    env = job(tmp_path, repo, base)

    out, err, peak = measured(env, "jobs", "diff", "1")
    assert peak < PEAK_MB, f"owl jobs diff peaked at {peak:.0f} MB"
    assert "owl: bin/data.img: 256.0 MB, not shown" in err
    assert "owl: gen.txt: 40.9 MB, not shown" in err
    # the rest is git's own patch, byte for byte
    assert (
        out
        == subprocess.run(
            [
                "git",
                "-C",
                str(repo),
                "diff",
                "--no-renames",
                f"{base}...owl/job-1",
                "--",
                "keep.py",
            ],
            capture_output=True,
            check=True,
        ).stdout
    )

    out, err, peak = measured(env, "jobs", "review", "1", "--no-open")
    assert peak < PEAK_MB, f"owl jobs review peaked at {peak:.0f} MB"
    html = Path(out.decode().strip().splitlines()[-1]).read_text()
    assert "256.0 MB, not shown" in html and "40.9 MB, not shown" in html
    assert "Not shown, each over 4.0 MB" in html and "<code>bin/data.img</code>" in html
    assert '<span class="mi">2</span></td>' in html  # the small file's diff is there
    assert "<b>3</b><span>files changed</span>" in html

    # what `owl jobs show` (the daemon's view) and the phone's message after a Run read
    facts = (
        "import sys\n"
        "from owl.notify import events, service\n"
        "from owl.verbs.views import add_git_facts\n"
        "job = dict(project=sys.argv[1], base=sys.argv[2], branch='owl/job-1')\n"
        "view = add_git_facts({}, job)\n"
        "print(view['diffstat'], [(f['path'], f['note']) for f in view['files']])\n"
        "print(service.diffstat(events.RunEnded(1, 1, 'review', **job)))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", _MEASURE, sys.executable, "-c", facts, str(repo), base],
        capture_output=True,
        text=True,
        timeout=300,
    )
    peak = int(p.stderr.rsplit("peak ", 1)[1]) / 1024
    assert peak < PEAK_MB, f"the diffstat and files of `owl jobs show` peaked at {peak:.0f} MB"
    stat = "3 files changed, 1 insertion(+), 1 deletion(-)"
    assert p.stdout.splitlines() == [
        f"{stat} [('bin/data.img', '256.0 MB, not shown'), ('gen.txt', '40.9 MB, not shown'), "
        "('keep.py', None)]",
        stat,
    ]


@pytest.mark.slow  # real commits of hundreds of MB or thousands of files
def test_thousands_of_files_list_the_first_and_count_the_rest(tmp_path):
    repo, base = branch(tmp_path)
    (repo / "d").mkdir()
    for i in range(3000):
        (repo / "d" / f"f{i:04}.txt").write_text(f"file {i}\n")
    (repo / "a-long.txt").write_text("".join(f"line {i}\n" for i in range(5000)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "many")
    env = job(tmp_path, repo, base)

    out, _, _ = measured(env, "jobs", "review", "1", "--no-open")
    page = Path(out.decode().strip().splitlines()[-1])
    html = page.read_text()
    assert "<b>3,001</b><span>files changed</span>" in html
    assert "… and 2,001 more files, not listed here" in html
    assert html.count('<td class="path">') == changes.FILES_MAX
    assert "… 3,000 more lines in this hunk" in html
    assert "<span>lines in the first 1,000 files</span>" in html
    assert html.count('<tr class="add">') <= changes.FILES_MAX + diffs.HUNK_LINES_MAX
    assert page.stat().st_size < 3_000_000

    out, err, _ = measured(env, "jobs", "diff", "1")
    assert out.count(b"diff --git ") == 3001 and b"+line 4999\n" in out


@pytest.mark.slow  # real commits of hundreds of MB or thousands of files
def test_with_one_file_too_big_the_patch_is_asked_for_in_batches_and_is_gits_own(tmp_path):
    """Batches of paths, renames off: every other file's patch as git prints it."""
    repo, base = branch(tmp_path)
    for i in range(2500):
        (repo / f"f{i:04}.txt").write_text(f"file {i}\n")
    (repo / "a b").mkdir()
    (repo / "a b" / "c*[x].txt").write_text("odd name\n")  # pathspec magic taken literally
    (repo / "big.bin").write_bytes(b"\0" * (5 << 20))
    git(repo, "mv", "keep.py", "moved.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "batches")
    env = job(tmp_path, repo, base)
    out, err, _ = measured(env, "jobs", "diff", "1")
    expected = subprocess.run(
        ["git", "-C", str(repo), "diff", "--no-renames", f"{base}...owl/job-1", "--"]
        + [":(exclude)big.bin"],
        capture_output=True,
        check=True,
    ).stdout
    assert out == expected
    assert "owl: big.bin: 5.0 MB, not shown (over 4.0 MB)" in err


def test_a_stream_stopped_early_ends_git(tmp_path):
    from owl.git import workspace

    repo, _ = branch(tmp_path)
    for i in range(200):
        (repo / f"f{i}").write_text("x\n" * 2000)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "lots")
    with workspace.git_stream(repo, "log", "-p") as s:
        first = s.stdout.read(100)
    assert first.startswith(b"commit ") and s.closed_early
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # git opens it and waits for a writer that never comes
    with pytest.raises(workspace.WorkspaceError, match="ran longer than 0.5 s"):
        with workspace.git_stream(repo, "config", "--file", str(fifo), "--list", timeout=0.5) as s:
            assert s.stdout.read() == b""  # the pipe ends when git is ended


def test_sizes_are_said_as_a_person_reads_them():
    assert changes.size_words(812) == "812 bytes"
    assert changes.size_words(5 << 20) == "5.0 MB"
    assert changes.size_words(2 << 30) == "2.0 GB"


def test_a_branch_git_cannot_read_is_an_error_in_gits_words_not_an_empty_listing(tmp_path):
    repo, base = branch(tmp_path)
    with pytest.raises(changes.ChangesError, match="unknown revision"):
        changes.listing(repo, base, "no-such-branch")
    with pytest.raises(changes.ChangesError, match="unknown revision"):
        changes.write_patch(repo, base, "no-such-branch", lambda data: None)
