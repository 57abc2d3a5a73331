"""Agent drivers, the handoff, prompts and log rendering (no real model needed).

The command driver is tested by really starting a stand-in agent
(tests/agents/script_echo_args.py) with the argv it builds, so what is
checked is what a process receives, not what a list contains.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from owl.agents import (
    ClaudeDriver,
    CommandDriver,
    Driver,
    RunContext,
    branch_log,
    build_prompt,
    contract,
    get_driver,
    read_handoff,
)
from owl.agents.command import expand, parse_element
from owl.agents.render import render_line
from support.plaingit import git

ECHO_AGENT = Path(__file__).parent / "agents" / "script_echo_args.py"
SAMPLE = Path(__file__).parent / "support" / "stream_json_sample.jsonl"

NASTY = "fix \"the\" bug; $(rm -rf ~) `id` 'single' --help -rf\nsecond line\t{not a placeholder}"


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A git repo with one commit; returns (path, base sha)."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "commit", "-q", "--allow-empty", "-m", "base")
    return path, git(path, "rev-parse", "HEAD")


def ctx_for(
    worktree: Path,
    base: str = "0" * 40,
    attempt: int = 1,
    prompt: str = "do the thing",
    failure_note: str | None = None,
    agent_config: dict | None = None,
) -> RunContext:
    return RunContext(
        job_id=12,
        run_id=34,
        attempt=attempt,
        job_prompt=prompt,
        worktree=worktree,
        branch="owl/job-12",
        base=base,
        agent_config=agent_config or {},
        failure_note=failure_note,
    )


def run_agent(driver: Driver, ctx: RunContext, out: Path) -> dict:
    """Start the driver's argv for real, the way the engine does (no shell)."""
    env = {**os.environ, **driver.env(ctx), "OWL_TEST_ARGS_OUT": str(out)}
    subprocess.run(
        driver.argv(ctx),
        cwd=ctx.worktree,
        env=env,
        check=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    return json.loads(out.read_text())


# ------------------------------------------------------------ command driver


def test_command_agent_receives_arguments_verbatim(tmp_path: Path) -> None:
    template = [
        sys.executable,
        str(ECHO_AGENT),
        "--task",
        "{prompt}",
        "--message={prompt}",
        "a b 'c' \"d\" $(echo no) ; | & *",
    ]
    driver = get_driver("echo", {"command": template})
    ctx = ctx_for(tmp_path, prompt=NASTY)
    got = run_agent(driver, ctx, tmp_path / "out.json")
    assert got["argv"] == [
        "--task",
        NASTY,
        "--message=" + NASTY,
        "a b 'c' \"d\" $(echo no) ; | & *",
    ]
    assert Path(got["cwd"]) == tmp_path
    assert got["env"]["OWL_RUN_ID"] == "34" and got["env"]["OWL_JOB_ID"] == "12"


def test_placeholders_and_literal_braces(tmp_path: Path) -> None:
    (tmp_path / ".owl").mkdir()
    (tmp_path / ".owl" / "HANDOFF.md").write_text("done: parser\nnext: {tests}\n")
    template = [
        sys.executable,
        str(ECHO_AGENT),
        "{job_id}/{run_id}",
        "{worktree}",
        "{handoff}",
        "{{prompt}}",
        "x{{y}}z",
        "pre-{job_id}-post",
    ]
    got = run_agent(
        CommandDriver("echo", {"command": template}), ctx_for(tmp_path), tmp_path / "o.json"
    )
    assert got["argv"] == [
        "12/34",
        str(tmp_path),
        "done: parser\nnext: {tests}\n",
        "{prompt}",
        "x{y}z",
        "pre-12-post",
    ]


def test_prompt_is_the_persons_words_and_instructions_are_owls(repo: tuple[Path, str]) -> None:
    """{prompt} carries only what the person said (the Job's prompt, then their
    replies); the rules and what earlier Runs left come through {instructions}."""
    path, base = repo
    write_handoff(path, "Done: parser.\n")
    driver = CommandDriver("a", {"command": ["agent", "{prompt}", "{instructions}"]})
    first = driver.argv(ctx_for(path, base=base, prompt="add a test for floats"))
    assert first[1] == "add a test for floats"
    assert "How this run works" in first[2] and contract(ctx_for(path, base=base)) in first[2]
    assert "Attempt" not in first[2] and "Done: parser" not in first[2]
    later = replace(
        ctx_for(
            path,
            base=base,
            attempt=2,
            prompt="add a test for floats",
            failure_note="check unit failed",
        ),
        replies=("also cover NaN",),
    )
    argv = driver.argv(later)
    assert argv[1] == "add a test for floats\n\nalso cover NaN"
    for words in (
        "--- Attempt 2 ---",
        "check unit failed",
        "Done: parser.",
        "(none yet)",
        "How this run works",
    ):
        assert words in argv[2]
    assert "add a test for floats" not in argv[2] and "also cover NaN" not in argv[2]


def test_handoff_placeholder_is_empty_without_a_handoff(tmp_path: Path) -> None:
    assert expand(["{handoff}"], {"handoff": ""}) == [""]
    argv = CommandDriver("a", {"command": ["agent", "{handoff}"]}).argv(ctx_for(tmp_path))
    assert argv == ["agent", ""]


def test_value_with_braces_is_not_expanded_again() -> None:
    assert expand(["{prompt}"], {"prompt": "{job_id} {{x}}"}) == ["{job_id} {{x}}"]


@pytest.mark.parametrize(
    "element",
    ["{nope}", "{prompt!r}", "{prompt:>9}", "{prompt.upper}", "{0}", "{}", "{prompt", "prompt}"],
)
def test_bad_template_element_is_refused(element: str) -> None:
    with pytest.raises(ValueError):
        parse_element(element)
    problem = CommandDriver("mine", {"command": [sys.executable, element]}).problem()
    assert problem is not None and problem.startswith("agents.mine.command:")


def test_command_problem_names_a_missing_executable(tmp_path: Path) -> None:
    assert CommandDriver("x", {"command": [sys.executable, "{prompt}"]}).problem() is None
    missing = CommandDriver("codex", {"command": ["owl-no-such-agent-xyz", "{prompt}"]}).problem()
    assert missing == (
        f"agent codex: owl-no-such-agent-xyz was not found on PATH ({os.environ['PATH']}) "
        "(check agents.codex.command)"
    )
    plain = tmp_path / "agent.sh"
    plain.write_text("#!/bin/sh\n")  # not executable
    assert "is not an executable file" in (
        CommandDriver("x", {"command": [str(plain)]}).problem() or ""
    )
    # Decided per Run: the executable depends on the worktree.
    assert CommandDriver("x", {"command": ["{worktree}/agent.sh"]}).problem() is None
    assert "empty" in (CommandDriver("x", {"command": []}).problem() or "")


# ------------------------------------------------------------- claude driver


def test_a_missing_agent_names_the_path_searched_and_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code's installer puts `claude` in ~/.local/bin, which a service
    manager's PATH lacks: the refusal says which PATH was searched and where
    the program is."""
    local = tmp_path / "home" / ".local" / "bin"
    local.mkdir(parents=True)
    (local / "claude").write_text("#!/bin/sh\n")
    (local / "claude").chmod(0o755)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert ClaudeDriver({}).problem() == (
        f"claude was not found on PATH (/usr/bin:/bin; it is at {local / 'claude'}, outside "
        "it): install Claude Code, or set agents.claude.path"
    )
    mine = CommandDriver("mine", {"command": ["claude", "{prompt}"]}).problem()
    assert mine is not None and f"it is at {local / 'claude'}, outside it" in mine


def test_claude_missing_executable_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert (
        ClaudeDriver({}).problem()
        == f"claude was not found on PATH ({tmp_path}): install Claude Code, or set "
        "agents.claude.path"
    )
    assert (
        ClaudeDriver({"path": str(tmp_path / "nope" / "claude")}).problem()
        == f"claude was not found at {tmp_path / 'nope' / 'claude'} (check agents.claude.path)"
    )
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\n")
    assert "is not executable" in (ClaudeDriver({"path": str(fake)}).problem() or "")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert ClaudeDriver({}).problem() is None  # found on PATH now
    assert ClaudeDriver({}).argv(ctx_for(tmp_path))[0] == str(fake)


def test_claude_argv_shape(tmp_path: Path) -> None:
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    driver = ClaudeDriver(
        {"path": str(fake), "args": ["--model", "opus"], "allowed_tools": ["Bash", "Edit"]}
    )
    ctx = ctx_for(tmp_path, prompt=NASTY)
    argv = driver.argv(ctx)
    assert argv[0] == str(fake) and argv[1] == "-p"
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert "--verbose" in argv
    assert argv[argv.index("--allowedTools") + 1] == "Bash,Edit"
    assert argv[argv.index("--append-system-prompt") + 1] == contract(ctx)
    # The prompt is last, after "--", so nothing in it is read as an option.
    assert argv[-2] == "--" and NASTY in argv[-1]
    assert argv.index("--model") < argv.index("--")
    # The contract is the system prompt; it is not repeated in the prompt.
    assert contract(ctx) not in argv[-1]
    assert "--dangerously-skip-permissions" not in argv
    assert driver.stream_json is True and driver.name == "claude"
    assert driver.env(ctx)["OWL_RUN_ID"] == "34"


def test_claude_default_tools_can_edit_run_and_commit() -> None:
    argv = ClaudeDriver({"path": "/bin/true"}).argv(ctx_for(Path("/tmp")))
    tools = argv[argv.index("--allowedTools") + 1].split(",")
    assert {"Bash", "Edit", "Write", "Read"} <= set(tools)
    assert "WebFetch" not in tools


def test_get_driver_choices() -> None:
    assert isinstance(get_driver("claude", {}), ClaudeDriver)
    assert isinstance(get_driver("claude", None), ClaudeDriver)
    # An explicit command wins, even for the name "claude".
    assert isinstance(get_driver("claude", {"command": ["claude", "{prompt}"]}), CommandDriver)
    d = get_driver("aider", {"command": ["aider", "--message={prompt}"]})
    assert isinstance(d, CommandDriver) and d.name == "aider" and d.stream_json is False
    with pytest.raises(ValueError, match=r"unknown agent 'kodex'.*\[agents\.kodex\]"):
        get_driver("kodex", {})


def test_drivers_satisfy_the_protocol() -> None:
    assert isinstance(ClaudeDriver({}), Driver)
    assert isinstance(CommandDriver("x", {"command": ["x"]}), Driver)


# ------------------------------------------------------------------- handoff


def write_handoff(worktree: Path, text: str | bytes) -> Path:
    (worktree / ".owl").mkdir(exist_ok=True)
    path = worktree / ".owl" / "HANDOFF.md"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_handoff_read(tmp_path: Path) -> None:
    assert read_handoff(tmp_path) is None  # no .owl
    (tmp_path / ".owl").mkdir()
    assert read_handoff(tmp_path) is None  # no file
    write_handoff(tmp_path, "  \n\n")
    assert read_handoff(tmp_path) is None  # nothing in it
    write_handoff(tmp_path, "## Done\n- parser ✓\n")
    assert read_handoff(tmp_path) == "## Done\n- parser ✓\n"
    assert read_handoff(tmp_path / "no-such-worktree") is None


def test_handoff_is_capped(tmp_path: Path) -> None:
    write_handoff(tmp_path, "a" * 5000)
    text = read_handoff(tmp_path, limit=1000)
    assert text is not None and text.startswith("a" * 1000) and "a" * 1001 not in text
    assert "longer than 1000 bytes" in text
    # A multi-byte character split by the cap is dropped, not mangled.
    write_handoff(tmp_path, "é" * 10)  # 2 bytes each
    text = read_handoff(tmp_path, limit=5)
    assert text is not None and text.startswith("éé\n[... cut")
    write_handoff(tmp_path, "x" * 1000)
    assert read_handoff(tmp_path, limit=1000) == "x" * 1000  # exactly at the cap: whole


def test_handoff_symlinked_to_a_secret_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root:x:0:0:secret\n")
    wt = tmp_path / "wt"
    (wt / ".owl").mkdir(parents=True)
    (wt / ".owl" / "HANDOFF.md").symlink_to("/etc/passwd")
    assert read_handoff(wt) is None
    (wt / ".owl" / "HANDOFF.md").unlink()
    (wt / ".owl" / "HANDOFF.md").symlink_to(secret)
    assert read_handoff(wt) is None
    # Even a symlink to a file inside the worktree is refused: any symlink is.
    (wt / "notes.md").write_text("inside")
    (wt / ".owl" / "HANDOFF.md").unlink()
    (wt / ".owl" / "HANDOFF.md").symlink_to(wt / "notes.md")
    assert read_handoff(wt) is None


def test_handoff_dir_symlinked_out_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "HANDOFF.md").write_text("secret from outside\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".owl").symlink_to(outside)
    assert read_handoff(wt) is None
    assert "secret from outside" not in build_prompt(ctx_for(wt, attempt=2))


def test_handoff_that_is_not_a_file_is_refused_without_blocking(tmp_path: Path) -> None:
    (tmp_path / ".owl").mkdir()
    os.mkfifo(tmp_path / ".owl" / "HANDOFF.md")  # opening it to read would block
    assert read_handoff(tmp_path) is None
    os.unlink(tmp_path / ".owl" / "HANDOFF.md")
    (tmp_path / ".owl" / "HANDOFF.md").mkdir()
    assert read_handoff(tmp_path) is None
    (tmp_path / ".owl" / "HANDOFF.md").rmdir()
    (tmp_path / ".owl").rmdir()
    (tmp_path / ".owl").write_text("a file, not a directory")
    assert read_handoff(tmp_path) is None


# ------------------------------------------------------- prompts, branch log


def test_branch_log(repo: tuple[Path, str]) -> None:
    path, base = repo
    assert branch_log(path, base) == ""
    for i in range(3):
        (path / f"f{i}").write_text(str(i))
        git(path, "add", f"f{i}")
        git(path, "commit", "-q", "-m", f"step {i}")
    lines = branch_log(path, base).splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == ["step 2", "step 1", "step 0"]
    assert len(branch_log(path, base, limit=2).splitlines()) == 2
    assert branch_log(path, "f" * 40) == ""  # unknown base: no crash
    with pytest.raises(ValueError):
        branch_log(path, "--output=/tmp/x")


def test_first_prompt_is_job_prompt_and_contract(tmp_path: Path) -> None:
    write_handoff(tmp_path, "stale handoff from somewhere\n")
    ctx = ctx_for(tmp_path, prompt=NASTY)
    prompt = build_prompt(ctx)
    assert prompt.startswith(NASTY)
    assert contract(ctx) in prompt
    assert "stale handoff" not in prompt  # first Run: no handoff quoted
    for words in (
        "No human will answer",
        "owl/job-12",
        "Commit early and often",
        ".owl/HANDOFF.md",
        "stopped at any moment",
    ):
        assert words in prompt
    assert build_prompt(ctx, with_contract=False) == NASTY + "\n"


def test_later_prompt_carries_handoff_commits_and_failure(repo: tuple[Path, str]) -> None:
    path, base = repo
    (path / "a.py").write_text("x = 1\n")
    git(path, "add", "a.py")
    git(path, "commit", "-q", "-m", "Parse the config file")
    write_handoff(path, "Done: parser.\nNext: the tests for durations.\n")
    ctx = ctx_for(
        path, base=base, attempt=3, failure_note="check `pytest` failed:\nE assert 1 == 2"
    )
    prompt = build_prompt(ctx)
    assert prompt.startswith("do the thing\n")
    assert "Attempt 3" in prompt
    assert "Done: parser.\nNext: the tests for durations.\n" in prompt
    assert "Parse the config file" in prompt
    assert "check `pytest` failed:\nE assert 1 == 2" in prompt
    assert contract(ctx) in prompt
    # Order: what the person asked first, then what happened, then the rules.
    assert prompt.index("do the thing") < prompt.index("Done: parser") < prompt.index(contract(ctx))


def test_later_prompt_without_handoff_or_commits(repo: tuple[Path, str]) -> None:
    path, base = repo
    prompt = build_prompt(ctx_for(path, base=base, attempt=2))
    assert "No handoff was written" in prompt
    assert "(none yet)" in prompt
    assert "previous run failed" not in prompt


# ----------------------------------------------------------------- rendering


def sample() -> list[str]:
    """Lines the real CLI printed (tests/support/capture_stream.py made them)."""
    return SAMPLE.read_text().splitlines()


def test_render_captured_stream() -> None:
    rendered = [render_line(line) for line in sample()]
    assert rendered[0] is not None and rendered[0].startswith("● claude 2.1")
    assert ", model " in rendered[0] and ", in /" in rendered[0]
    assert "Looking at the tests first." in rendered
    assert "→ Bash: echo 3 passed" in rendered
    assert "← 3 passed" in rendered
    assert "→ Bash: ls /nonexistent-owl-capture" in rendered
    assert any(r and r.startswith("✗ Exit code 2") and "No such file" in r for r in rendered)
    assert any(r and r.startswith("→ Write: ") and r.endswith("notes.txt") for r in rendered)
    assert "All tests pass. Committed the fix." in rendered
    results = [r for r in rendered if r and "result" in r.split(":")[0]]
    assert results[0].startswith("✓ result: All tests pass. Committed the fix. (4 turns, ")
    assert results[1].startswith("✗ result (error): Prompt is too long")
    assert all(r is None or "\n" not in r for r in rendered)


def test_render_non_json_and_odd_lines() -> None:
    assert render_line("Error: something broke\n") == "Error: something broke"
    assert render_line("  plain text  ") == "  plain text  "
    assert render_line("") is None and render_line("\n") is None
    assert render_line("[1, 2]") == "[1, 2]"  # JSON, but no event
    assert render_line('{"type": "stream_event", "event": {}}') is None
    assert render_line('{"type": "assistant", "message": {"content": 5}}') is None
    assert (
        render_line('{"type": "assistant", "message": {"content": [{"type": "thinking"}]}}') is None
    )
    assert render_line('{"type": "system", "subtype": "hook_response"}') is None


def test_render_shortens_and_summarises_tools() -> None:
    line = json.dumps(
        {
            "type": "assistant",
            "message": {
                "content": [
                    {
                        "type": "tool_use",
                        "name": "Bash",
                        "input": {"command": "pytest -q\n" + "x" * 500},
                    },
                    {
                        "type": "tool_use",
                        "name": "TodoWrite",
                        "input": {"todos": [{"status": "completed"}, {"status": "pending"}]},
                    },
                    {"type": "tool_use", "name": "Mystery", "input": {"b": 1, "a": "z"}},
                ]
            },
        }
    )
    bash, todo, mystery = (render_line(line) or "").split("\n")
    assert bash.startswith("→ Bash: pytest -q xxx") and bash.endswith("…") and len(bash) < 200
    assert todo == "→ TodoWrite: 1/2 done"
    assert mystery == '→ Mystery: {"a": "z", "b": 1}'
    result = json.dumps(
        {
            "type": "user",
            "message": {
                "content": [
                    {"type": "tool_result", "content": [{"type": "text", "text": "ok\nmore"}]},
                    {"type": "tool_result", "content": "", "is_error": True},
                ]
            },
        }
    )
    assert render_line(result) == "← ok more\n✗ (error)"
    err = json.dumps(
        {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 9}
    )
    assert render_line(err) == "✗ result (error_max_turns) (9 turns)"


# ------------------------------------------------------------ setup problems


@pytest.mark.parametrize(
    "line, problem",
    [
        (
            '{"type":"turn.failed","error":{"message":"Missing environment variable: `X_API_KEY`."}}',
            "missing environment variable X_API_KEY",
        ),
        ("Error: connect ECONNREFUSED 127.0.0.1:11434", "could not connect to 127.0.0.1:11434"),
        (
            "request to http://localhost:8080/v1 failed: Connection refused (os error 111) "
            "127.0.0.1:8080",
            "could not connect to 127.0.0.1:8080",
        ),
        ("bwrap: execvp my-agent: No such file or directory", "my-agent was not found"),
        ("/usr/bin/env: ‘/w/my-agent’: No such file or directory", "/w/my-agent was not found"),
        ("Connection refused: api.example.com:443", None),  # a remote service: not setup
        ("all good", None),
    ],
)
def test_a_setup_problem_in_the_agents_last_words(line, problem):
    from owl.agents import setup
    from owl.rules.jobrules import Report

    assert setup.problem(["started", line]) == problem
    report = setup.read(Report(), ["started", line], 1)
    assert report.setup_problem == problem
    assert setup.read(Report(), ["started", line], 0).setup_problem is None
    # said early, then the agent worked on for long: it did start
    assert setup.problem([line, *["working"] * setup.TAIL]) is None
