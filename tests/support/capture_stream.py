"""Capture real stream-json lines from the Claude Code CLI for the render tests.

    .venv/bin/python tests/support/capture_stream.py

Runs the real CLI (see claude.py) against the stub with scripts that touch
each kind of event (init, text, tool_use, ok and failed tool_result, success
and error result) and writes them to stream_json_sample.jsonl beside this
file, exactly as the CLI printed them. Re-run it after a
CLI upgrade to check the renderer against the new output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.anthropic_stub import AnthropicStub, ApiError, Bash, Text, ToolUse  # noqa: E402
from support.claude import find_claude  # noqa: E402

OUT = Path(__file__).with_name("stream_json_sample.jsonl")


def run(claude: str, script: list, workdir: Path, home: Path) -> list[str]:
    with AnthropicStub(script) as stub:
        argv = [
            claude,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Bash,Write,Edit,Read",
            "--",
            "capture",
        ]
        out = subprocess.run(
            argv,
            cwd=workdir,
            env={**os.environ, **stub.env(home)},
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    return out.stdout.splitlines()


def main() -> int:
    claude = find_claude()
    if claude is None:
        print("claude not found: run tools/install-claude.sh", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work, home = Path(tmp, "work"), Path(tmp, "home")
        work.mkdir()
        home.mkdir()
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        lines = run(
            claude,
            [
                (Text("Looking at the tests first."), Bash("echo 3 passed")),
                Bash("ls /nonexistent-owl-capture"),
                ToolUse("Write", {"file_path": str(work / "notes.txt"), "content": "hi\n"}),
                Text("All tests pass.\nCommitted the fix."),
            ],
            work,
            home,
        )
        lines += run(claude, [ApiError(400, "prompt is too long")], work, home)
    OUT.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} lines -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
