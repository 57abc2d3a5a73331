"""The review's pure parts: control characters shown, the agent's last message
and usage read from a log, the diff parsed and coloured, the page escaped and cut.
Logs here are lines captured from the real Claude Code CLI's stream-json shape."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

from pathlib import Path

from owl.review import diffs, facts, page, text
from owlproc import OWL, make_project, wait_for


def test_control_characters_are_shown_not_obeyed() -> None:
    """The house rule (owl.textsafe): escapes written out, newlines kept in a block."""
    assert text.visible("a\x1b[31mred\x07\r\n") == "a\\x1b[31mred\\x07\n"
    assert text.visible("x\u202eevil\u2066") == "x\\u202eevil\\u2066"
    assert text.visible("\x7f\x9b") == "\\x7f\\x9b"
    assert text.visible("tab\tand\nnewline", keep_newlines=False) == "tab\\tand\\nnewline"
    assert text.visible("héllo → ok") == "héllo → ok"


def _log(*events: dict) -> str:
    return "\n".join(json.dumps(e) for e in events) + "\n"


def test_the_last_message_is_the_result_else_the_last_assistant_text() -> None:
    said = {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "text", "text": "First I looked."},
                {"type": "tool_use", "name": "Bash"},
            ]
        },
    }
    later = {"type": "assistant", "message": {"content": [{"type": "text", "text": "All done."}]}}
    result = {
        "type": "result",
        "subtype": "success",
        "result": "Fixed it: see the diff.",
        "num_turns": 4,
        "duration_ms": 8100,
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 10, "output_tokens": 200, "cache_read_input_tokens": 5},
    }
    assert text.last_message(_log(said, later, result)) == "Fixed it: see the diff."
    assert text.last_message(_log(said, later)) == "All done."  # killed before its result
    assert text.last_message("not json\n" + _log(said)) == "First I looked."
    assert text.usage_from_log(_log(said, result)) == {
        "duration_ms": 8100,
        "num_turns": 4,
        "total_cost_usd": 0.0123,
        "input_tokens": 10,
        "output_tokens": 200,
        "cache_read_input_tokens": 5,
    }
    assert text.usage_from_log(_log(said)) is None


def test_a_command_agents_last_message_is_its_logs_tail() -> None:
    lines = "".join(f"line {i}\n" for i in range(100))
    tail = text.last_message(lines)
    assert tail.splitlines()[0] == "line 70" and tail.splitlines()[-1] == "line 99"
    assert text.last_message("\n\n") is None


DIFF = '''diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,4 +1,4 @@ def main():
 x = """a
-long string"""
+longer string"""
 print(x)
\\ No newline at end of file
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hello
diff --git a/logo.png b/logo.png
new file mode 100644
index 0000000..4444444
Binary files /dev/null and b/logo.png differ
'''


def test_the_diff_is_parsed_and_each_side_coloured_as_code() -> None:
    files = diffs.parse(DIFF)
    assert [(f.path, f.status, f.added, f.removed) for f in files] == [
        ("app.py", "modified", 1, 1),
        ("new.txt", "added", 1, 0),
        ("logo.png", "binary", 0, 0),
    ]
    lines = files[0].hunks[0].lines
    assert [(ln.kind, ln.old, ln.new) for ln in lines] == [
        (" ", 1, 1),
        ("-", 2, None),
        ("+", None, 2),
        (" ", 3, 3),
        ("\\", None, None),
    ]
    diffs.highlight(files[0])
    # the second line is inside a triple-quoted string on both sides: coloured as one
    assert all(cls.startswith("s") for cls, _ in lines[1].tokens)
    assert all(cls.startswith("s") for cls, _ in lines[2].tokens)
    assert ("k", "print") not in lines[3].tokens and lines[3].tokens[0][0] == "nb"


TWO_HUNKS = """diff --git a/x.py b/x.py
--- a/x.py
+++ b/x.py
@@ -1,2 +1,3 @@ def f():
 a
+b
@@ -10 +11,2 @@
-c
+d
+e
@@ not a hunk header @@
 f
"""


def test_each_hunk_header_restarts_the_line_numbers_and_a_malformed_one_is_passed_over() -> None:
    (f,) = diffs.parse(TWO_HUNKS)
    assert [h.header for h in f.hunks] == ["@@ -1,2 +1,3 @@ def f():", "@@ -10 +11,2 @@"]
    assert [(ln.kind, ln.old, ln.new) for ln in f.hunks[0].lines] == [(" ", 1, 1), ("+", None, 2)]
    assert [(ln.kind, ln.old, ln.new, ln.text) for ln in f.hunks[1].lines] == [
        ("-", 10, None, "c"),
        ("+", None, 11, "d"),
        ("+", None, 12, "e"),
        (" ", 11, 13, "f"),
    ]
    assert (f.added, f.removed) == (3, 1)


def _facts(**over) -> dict:
    f = {
        "job": {
            "id": 3,
            "title": "t",
            "prompt": "Do <it>\x1b[2J",
            "state": "review",
            "project": "/p",
            "agent": "claude",
            "branch": "owl/job-3",
            "base": "abc",
            "worktree": None,
            "base_branch": "main",
            "created_at": 0,
        },
        "runs": [],
        "verify": [],
        "commits": [],
        "files": [],
        "diff": DIFF,
        "diff_chars": len(DIFF),
        "diff_cut": False,
        "git_problem": None,
        "worktree_dirty": None,
        "generated_at": 0,
        "last_message": "<script>x</script>\x1b]0;t\x07",
    }
    f.update(over)
    return f


def test_the_page_escapes_what_agents_wrote_and_shows_their_control_characters() -> None:
    html = page.render(_facts())
    assert "<script>" not in html and "&lt;script&gt;x&lt;/script&gt;\\x1b]0;t\\x07" in html
    assert "Do &lt;it&gt;\\x1b[2J" in html
    assert "\x1b" not in html and "\x07" not in html


def test_a_diff_over_the_cap_is_cut_at_a_file_and_the_page_says_so() -> None:
    big = DIFF * 50
    cut, was_cut = facts.cap(big, limit=len(DIFF) * 3 + 40)
    assert was_cut and cut.count("diff --git") == 9 and big.startswith(cut)
    html = page.render(
        _facts(
            diff=cut,
            diff_cut=True,
            diff_chars=len(big),
            files=[{"path": f"f{i}", "added": 1, "removed": 0} for i in range(150)],
        )
    )
    assert "this page shows the first 9 files" in html and "owl jobs diff 3" in html


def test_owl_jobs_diff_pages_in_colour_on_a_terminal_and_is_plain_in_a_pipe(tmp_path) -> None:
    from owl.store.db import Store

    project = make_project(tmp_path / "proj", {"README": "x\n"})
    git = lambda *a: subprocess.run(
        ["git", "-C", str(project), *a],
        check=True,  # noqa: E731
        capture_output=True,
        text=True,
    ).stdout.strip()
    base = git("rev-parse", "HEAD")
    git("switch", "-q", "-c", "owl/job-1")
    (project / "evil.txt").write_text("fine\n\x1b[2Jcleared\n")
    git("add", "-A")
    git("commit", "-q", "-m", "evil")
    home = tmp_path / "home"
    store = Store(home / "owl.db")
    jid = store.add_job("p", str(project), "claude", 1)
    store.set_job(jid, state="review", branch="owl/job-1", base=base)
    store.close()
    env = dict(os.environ, OWL_HOME=str(home))
    plain = subprocess.run([*OWL, "jobs", "diff", str(jid)], env=env, capture_output=True)
    assert plain.returncode == 0 and b"+\x1b[2Jcleared" in plain.stdout  # the patch as is
    pager_out = tmp_path / "paged"
    env["PAGER"] = (
        f"{sys.executable} -c \"import sys; open({str(pager_out)!r}, 'w').write(sys.stdin.read())\""
    )
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(OWL[0], [*OWL, "jobs", "diff", str(jid)], env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    paged = pager_out.read_text()
    assert "\x1b[32m+\\x1b[2Jcleared\x1b[0m" in paged and "\x1b[2J" not in paged.replace(
        "\x1b[32m", ""
    )
    assert "\x1b[1mdiff --git a/evil.txt b/evil.txt" in paged


def test_changes_outside_the_branch_are_shown_in_words() -> None:
    run = {
        "id": 4,
        "attempt": 1,
        "state": "ended",
        "outcome": "succeeded",
        "ended_by": "exit",
        "reason": None,
        "exit_code": 0,
        "started_at": 0,
        "ended_at": 5,
        "duration_s": 5,
        "log": None,
        "last_message": None,
        "usage": None,
        "checks": [],
        "outside": [{"kind": "ref", "name": "refs/heads/main", "from": "a" * 40, "to": "b" * 40}],
    }
    html = page.render(_facts(runs=[run]))
    assert 'id="outside"' in html and "main" in html.split('id="outside"')[1][:600]
    assert 'id="outside"' not in page.render(_facts())


def test_review_and_diff_of_a_job_that_is_not_there_or_never_ran_say_so_in_one_line(tmp_path):
    from owl.store.db import Store

    home = tmp_path / "home"
    store = Store(home / "owl.db")
    project = make_project(tmp_path / "proj")
    fresh = store.add_job("Not run yet", str(project), "claude", 1)
    store.close()
    env = dict(os.environ, OWL_HOME=str(home))
    for verb, jid, words in (
        ("review", 999, "no job 999"),
        ("diff", 999, "no job 999"),
        ("diff", fresh, "has no branch yet"),
    ):
        args = [*OWL, "jobs", verb, str(jid)] + (["--no-open"] if verb == "review" else [])
        p = subprocess.run(args, env=env, capture_output=True, text=True)
        assert p.returncode == 1 and words in p.stderr and p.stderr.count("\n") == 1, p
    p = subprocess.run(
        [*OWL, "jobs", "review", str(fresh), "--no-open"], env=env, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    written = Path(p.stdout.strip().splitlines()[-1])
    html = written.read_text()
    assert "Not run yet" in html and "the Job has not run" in html and "No runs yet." in html
    # without --no-open the desktop's opener gets the page (a stand-in that records it)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opened = tmp_path / "opened"
    (bin_dir / "xdg-open").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1\" > {opened}\n")
    (bin_dir / "xdg-open").chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    p = subprocess.run(
        [*OWL, "jobs", "review", str(fresh)], env=env, capture_output=True, text=True
    )
    assert p.returncode == 0 and p.stdout.strip().splitlines()[-1] == str(written)
    wait_for(opened.exists, what="the page handed to xdg-open")
    wait_for(lambda: opened.read_text().strip() == str(written), what="the page's path")


def test_the_persons_replies_are_on_the_page_with_the_run_they_went_to() -> None:
    html = page.render(
        _facts(
            replies=[
                {"id": 1, "job_id": 3, "text": "also cover the `empty` case", "at": 0, "run_id": 7},
                {"id": 2, "job_id": 3, "text": "<and this>", "at": 0, "run_id": None},
            ]
        )
    )
    assert "The prompt and your 2 replies" in html
    assert "given to run 7" in html and "also cover the <code>empty</code> case" in html
    assert "&lt;and this&gt;" in html and "for the next run" in html


def test_long_lists_fold_and_file_links_point_at_their_diffs() -> None:
    commits = [
        {
            "hash": f"{i:040x}",
            "short": f"{i:07x}",
            "author": "A",
            "at": 0,
            "subject": f"commit {i}",
            "body": "",
        }
        for i in range(30)
    ]
    files = [
        {"path": "logo.png", "added": None, "removed": None},
        {"path": "app.py", "added": 1, "removed": 1},
        {"path": "new.txt", "added": 1, "removed": 0},
    ]
    html = page.render(_facts(commits=commits, files=files))
    assert "10 more commits</summary>" in html
    # app.py is the first file of the diff, new.txt the second: the links say so
    assert 'href="#file-0">app.py</a>' in html and 'href="#file-1">new.txt</a>' in html
    assert 'id="file-0"><span class="path">app.py' in html
