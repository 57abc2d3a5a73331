"""The review page of a Job run by the REAL Claude Code CLI against the stub, and
the same page rendered by real headless Chromium.

What a person sees when they come back: the agent's own last message, the
commits, the files with their counts, the coloured diff, the checks with their
output, each Run. The page must be one file that loads nothing from the
network: checked by reading it, and by pointing Chromium at a proxy that
records every host asked for while it renders.

Screenshots go to test-artifacts/review/ (the README's come from these).
"""

from __future__ import annotations

import ast
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.anthropic_stub import AnthropicStub, Bash, Text
from support.chromium import RecordingProxy, not_blank, screenshot

from owlproc import ROOT, make_project
from test_claude_e2e import claude_daemon

pytestmark = [pytest.mark.claude, pytest.mark.timeout(240)]

ARTIFACTS = ROOT / "test-artifacts" / "review"

CHECKS = (
    "[[checks]]\nname = 'greet'\n"
    'run = "python3 -c \'import hello; assert hello.greet(\\"Owl\\") == \\"Hello, Owl!\\"\' '
    '&& echo greet works"\n'
)
WRITE = (
    'printf \'def greet(name):\\n    """Say hello to someone."""\\n'
    '    return f"Hello, {name}!"\\n\' > hello.py && git add hello.py && '
    "git commit -q -m 'Add greet() to say hello' && echo committed"
)
SAID = (
    'I added `hello.py` with a `greet(name)` function that returns "Hello, NAME!".\n\n'
    "The project's check imports it and calls it; it passes. <b>not bold</b>"
)


class _Loads(HTMLParser):
    """Every tag and every attribute that could make a browser fetch something."""

    FETCHING = {
        "script",
        "link",
        "img",
        "iframe",
        "frame",
        "object",
        "embed",
        "video",
        "audio",
        "source",
        "track",
        "base",
        "form",
        "input",
        "picture",
        "svg",
    }

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        inline = (
            tag == "img"
            and all(n != "src" or (v or "").startswith("data:image/png;base64,") for n, v in attrs)
            and not any(n == "srcset" for n, _ in attrs)
        )
        if tag in self.FETCHING and not inline:
            self.tags.append(tag)
        self._in_style = tag == "style"
        for name, value in attrs:
            if name in (
                "href",
                "src",
                "srcset",
                "action",
                "poster",
                "data",
                "background",
                "formaction",
                "ping",
            ):
                self.urls.append(value or "")
            if name == "style":
                self.styles.append(value or "")

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def assert_loads_nothing(page: str) -> None:
    p = _Loads()
    p.feed(page)
    assert p.tags == [], f"tags that fetch: {p.tags}"
    remote = [
        u
        for u in p.urls
        if not (
            u.startswith("#") or u.startswith("file:///") or u.startswith("data:image/png;base64,")
        )
    ]
    assert remote == [], f"links that are not local files or anchors: {remote}"
    css = "\n".join(p.styles)
    assert "url(" not in css and "@import" not in css and "@font-face" not in css
    assert "default-src 'none'" in page  # and the browser is told so


def _review(d, job: int) -> tuple[Path, str]:
    out = d.ok("jobs", "review", str(job), "--no-open")
    path = Path(out.strip().splitlines()[-1])
    assert path.is_file() and path.parent.name == "reviews"
    assert path.parent.parent == d.home  # Owl's data folder
    return path, path.read_text()


def test_the_page_of_a_claude_job_says_what_it_did_and_loads_nothing(tmp_path):
    project = make_project(tmp_path / "greeter", {"README": "A project.\n", ".owl.toml": CHECKS})
    with AnthropicStub([Bash(WRITE), Text(SAID)]) as stub, claude_daemon(tmp_path, stub) as d:
        job = d.add("Add a greet(name) function in hello.py that says hello.", project)
        d.machine("idle")
        j = d.wait_job(job, "review", timeout=60)
        path, page = _review(d, job)
        show = d.ok("jobs", "show", str(job))
        diff = d.ok("jobs", "diff", str(job))
        # the tray asks the daemon for the same page (written off the engine thread)
        from owl.control.client import ask
        from owl.settings.paths import socket_in

        assert ask(socket_in(d.home / "run"), "review", {"job_id": job}) == {"path": str(path)}
    # the agent's own account, escaped (its <b> is text, not markup)
    assert "I added <code>hello.py</code> with a <code>greet(name)</code> function" in page
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold</b>" not in page
    assert "Add a greet(name) function in hello.py that says hello." in page  # the prompt
    # the commit, the file with its counts, the diff with colour classes
    assert "Add greet() to say hello" in page
    assert re.search(r'href="#file-0">hello\.py</a>.*?\+3</span> <span class="minus">−0', page)
    assert 'class="diff code"' in page
    assert re.search(r'<span class="k">def</span> <span class="nf">greet</span>', page)
    assert (
        '<span class="sd">&quot;&quot;&quot;Say hello to someone.&quot;&quot;&quot;</span>' in page
    )
    # the check, passed, with its output
    assert re.search(r'badge ok">passed</span><b>greet</b>', page)
    assert "greet works" in page
    # the Run: succeeded, with a link to its log; the worktree linked
    run = j["runs"][0]
    assert 'badge ok">succeeded' in page and Path(run["log"]).as_uri() in page
    assert Path(j["worktree"]).as_uri() in page
    assert_loads_nothing(page)
    # the CLI says the same
    assert "agent:    I added `hello.py`" in show and "+3 -0  hello.py" in show
    assert diff.startswith("diff --git a/hello.py b/hello.py") and "+def greet(name):" in diff

    with RecordingProxy() as proxy:
        png = screenshot(path, ARTIFACTS / "small-job.png", height=1180, proxy_port=proxy.port)
    assert proxy.page_hosts() == [], f"the page asked the network for {proxy.page_hosts()}"
    drawn = not_blank(png)
    assert drawn["colours"] > 40 and drawn["drawn"] > 0.2, drawn


def test_the_proxy_sees_a_page_that_does_load_something(tmp_path):
    """The network check can fail: a page with a remote image is caught."""
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><p>hi</p><img src="http://leak.example.invalid/owl.png">')
    with RecordingProxy() as proxy:
        screenshot(page, tmp_path / "leaky.png", width=400, height=300, proxy_port=proxy.port)
    assert "leak.example.invalid" in proxy.page_hosts()


def _strip_docstrings(source: str) -> str:
    """The source with every docstring replaced by a TODO: the 'before' of a large Job."""
    tree = ast.parse(source)
    drop: dict[int, str] = {}
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
            and isinstance(body[0].value.value, str)
            and len(body) > 1
        ):
            first = body[0]
            for i in range(first.lineno, first.end_lineno + 1):
                drop[i] = ""
            if not isinstance(node, ast.Module):
                drop[first.lineno] = " " * first.col_offset + "# TODO: say why\n"
    return "".join(drop.get(i, line) for i, line in enumerate(source.splitlines(True), 1))


LARGE_FILES = [
    "app/owl/tray/menu.py",
    "app/owl/tray/notices.py",
    "app/owl/rules/shifts.py",
    "app/owl/rules/scheduler.py",
    "app/owl/review/merge.py",
    "app/owl/review/diffs.py",
]
LARGE_SAID = (
    "Every public function in the tray, the scheduler, shifts and the review modules now has a "
    "docstring that says why it exists, not only what it does.\n\n"
    "- 6 files, docstrings only: no behaviour changed\n"
    "- `review/text.py` is new: it was referenced but missing on this branch\n"
    "- the checks pass (`python3 -m compileall -q app`)\n\n"
    "I left `menu.build_menu` as it was: its docstring already said enough."
)


def test_a_large_job_renders_well_and_a_huge_diff_is_cut_with_a_note(tmp_path):
    after = tmp_path / "after"
    files = {
        ".gitignore": "__pycache__/\n",
        ".owl.toml": "[[checks]]\nname = 'compiles'\nrun = 'python3 -m compileall -q app'\n",
    }
    for name in LARGE_FILES:
        text = (ROOT / name).read_text()
        files[name] = _strip_docstrings(text)
        (after / name).parent.mkdir(parents=True, exist_ok=True)
        (after / name).write_text(text)
    (after / "app/owl/review").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "app/owl/review/text.py", after / "app/owl/review/text.py")
    project = make_project(tmp_path / "owl", files)
    script = [
        Bash(
            f"cp -r {after}/. . && git add -A && git commit -q -m 'Docstrings that say "
            "why, across the tray, scheduler and review modules' && echo committed"
        ),
        Text(LARGE_SAID),
    ]
    with AnthropicStub(script) as stub, claude_daemon(tmp_path, stub) as d:
        job = d.add(
            "Give every public function in the tray, scheduler, shifts and review "
            "modules a docstring that says why it exists.",
            project,
        )
        d.machine("idle")
        d.wait_job(job, "review", timeout=60)
        path, page = _review(d, job)
        # the same Job with a page cap far below its diff: cut, with a note
        from owl.review import facts, page as pagemod
        from owl.store.db import Store

        store = Store(d.home / "owl.db", readonly=True)
        small = facts.gather(store, job, diff_limit=20_000)
        store.close()
    assert "Docstrings that say why" in page and "7 files changed" not in page
    assert page.count('<div class="file">') == 7
    assert_loads_nothing(page)
    cut = pagemod.render(small)
    assert small["diff_cut"] and small["diff_chars"] > 20_000
    assert "this page shows the first" in cut and f"owl jobs diff {job}" in cut
    assert cut.count('<div class="file">') < 7
    assert re.search(r'id="files".*?<small>7</small>', cut)  # the list still has all
    png = screenshot(path, ARTIFACTS / "large-job.png", height=2200)
    drawn = not_blank(png)
    assert drawn["colours"] > 60 and drawn["drawn"] > 0.3, drawn
    assert sum(drawn["background"]) > 3 * 200  # a light page
    # a desktop that prefers dark gets a dark page
    dark = not_blank(screenshot(path, ARTIFACTS / "large-job-dark.png", height=1600, dark=True))
    assert sum(dark["background"]) < 3 * 60 and dark["colours"] > 60, dark
