"""tools/install-claude.sh: the pinned version by default, the newest when asked,
and a different version in the same prefix replaced rather than reused.

npm is replaced by a stand-in on PATH that "installs" a claude printing the
version it was asked for, so this runs offline and leaves the real cache alone."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "install-claude.sh"
PINNED = re.search(r"^PINNED=(\S+)$", SCRIPT.read_text(), re.M).group(1)

FAKE_NPM = r"""#!/bin/sh
echo "$*" >> "$NPM_CALLS"
case "$1" in
view) echo 9.9.9 ;;
install)
    prefix=""; spec=""
    while [ $# -gt 0 ]; do
        case "$1" in --prefix) prefix="$2"; shift ;; @anthropic-ai/*) spec="$1" ;; esac
        shift
    done
    mkdir -p "$prefix/bin"
    printf '#!/bin/sh\necho "%s (Claude Code)"\n' "${spec##*@}" > "$prefix/bin/claude"
    chmod +x "$prefix/bin/claude" ;;
esac
"""


def install(tmp_path: Path, version: str | None = None) -> tuple[str, list[str]]:
    bindir = tmp_path / "fakebin"
    bindir.mkdir(exist_ok=True)
    npm = bindir / "npm"
    npm.write_text(FAKE_NPM)
    npm.chmod(0o755)
    calls = tmp_path / "calls"
    env = dict(
        os.environ,
        PATH=f"{bindir}:{os.environ['PATH']}",
        OWL_CLAUDE_PREFIX=str(tmp_path / "prefix"),
        NPM_CALLS=str(calls),
    )
    env.pop("OWL_CLAUDE_VERSION", None)
    if version is not None:
        env["OWL_CLAUDE_VERSION"] = version
    out = subprocess.run(
        ["sh", str(SCRIPT)], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    lines = calls.read_text().splitlines() if calls.exists() else []
    calls.unlink(missing_ok=True)
    return out.stdout.strip(), lines


def version_of(path: str) -> str:
    return subprocess.run([path, "--version"], capture_output=True, text=True).stdout.split()[0]


def test_the_pinned_version_by_default_and_reused_when_it_is_there(tmp_path):
    path, calls = install(tmp_path)
    assert path == str(tmp_path / "prefix" / "bin" / "claude")
    assert version_of(path) == PINNED == "2.1.332"
    assert [c.split()[0] for c in calls] == ["install"]
    assert f"@anthropic-ai/claude-code@{PINNED}" in calls[0]
    assert install(tmp_path) == (path, [])  # nothing to do the second time


def test_latest_replaces_another_version_in_the_same_prefix(tmp_path):
    path, _ = install(tmp_path)
    again, calls = install(tmp_path, "latest")
    assert again == path and version_of(path) == "9.9.9"
    assert [c.split()[0] for c in calls] == ["view", "install"]
    assert install(tmp_path, "latest") == (path, ["view @anthropic-ai/claude-code version"])
    # and back to the pin: replaced again, not reused
    _, calls = install(tmp_path)
    assert version_of(path) == PINNED and [c.split()[0] for c in calls] == ["install"]
