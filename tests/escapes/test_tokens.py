"""A token refreshed inside a Run never logs the person's own CLI out.

OAuth providers rotate refresh tokens: a refresh spends the one sent and
hands back a new one, so a Run that refreshed with the person's token (read
from their ``~/.claude/.credentials.json``, ``~/.codex/auth.json``) left the
person's CLI holding a spent one: logged out. Each agent's Run gets a copy of
the person's credentials in its own state, without the refresh token; the
person's files stay as they were, and the token they hold still refreshes.

A headless credential Owl holds (``credentials/claude`` in Owl's config
folder, 0600) reaches the agent as its variable, never as a file in sight."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from escapes.harness import base, daemon, person, project, who
from owlproc import wait_for
from support.need import programs

__all__ = ["base", "who"]


class Rotating:
    """A token endpoint that rotates refresh tokens: each valid one is spent."""

    def __init__(self, valid: set[str]) -> None:
        self.valid = valid
        self.n = 0
        self.lock = threading.Lock()

    def refresh(self, token: str) -> dict | None:
        with self.lock:
            if token not in self.valid:
                return None
            self.valid.discard(token)
            self.n += 1
            new = f"rotated-{self.n}"
            self.valid.add(new)
            return {"access_token": f"access-{self.n}", "refresh_token": new}


@contextmanager
def token_server(rot: Rotating) -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            said = rot.refresh(json.loads(body or b"{}").get("refresh_token") or "")
            data = json.dumps(said or {"error": "invalid_grant"}).encode()
            self.send_response(200 if said else 400)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()


# As an agent refreshing its login would: the refresh token from its own
# credentials file, sent to the provider, the rotated one written back.
REFRESH = r"""
refresh() {  # $1: the credentials file, $2: the JSON path to its refresh token
python3 - "$1" "$2" "$PORT" <<'PY'
import json, os, sys, urllib.request
path, keys, port = os.path.expanduser(sys.argv[1]), sys.argv[2].split("."), sys.argv[3]
try:
    doc = json.load(open(path))
except OSError:
    print(f"no file: {sys.argv[1]}"); sys.exit()
node = doc
for k in keys[:-1]:
    node = node.get(k, {})
print(f"sees access: {node.get('accessToken') or node.get('access_token')}")
token = node.get(keys[-1], "")
req = urllib.request.Request(f"http://127.0.0.1:{port}/token", json.dumps({"refresh_token": token}).encode())
try:
    got = json.load(urllib.request.urlopen(req, timeout=10))
except Exception:
    print(f"refresh refused: {sys.argv[1]}"); sys.exit()
print(f"REFRESHED: {sys.argv[1]}")
node[keys[-1]] = got["refresh_token"]
try:
    json.dump(doc, open(path, "w"))
except OSError:
    pass
PY
}
refresh "~/.claude/.credentials.json" claudeAiOauth.refreshToken
refresh "~/.codex/auth.json" tokens.refresh_token
echo "held: ${CLAUDE_CODE_OAUTH_TOKEN:-none}"
try "see the held credential's file" "grep -rqs HELD-TOKEN ~/ $OWL_DIR"
"""

CLAUDE = {"claudeAiOauth": {"accessToken": "A-claude", "refreshToken": "R-claude", "expiresAt": 1}}
CODEX = {"tokens": {"access_token": "A-codex", "refresh_token": "R-codex"}, "OPENAI_API_KEY": None}


def ended(d, job: int) -> str:
    j = wait_for(
        lambda: (j := d.job(job))["runs"] and j["runs"][-1]["ended_at"] and j,
        300,
        what=f"job {job}'s Run to end",
    )
    return Path(j["runs"][-1]["log"]).read_text(errors="replace")


def test_a_refresh_inside_a_run_never_spends_the_persons_token(base, who):
    programs("bwrap", "pasta")
    home = person(base)
    (home / ".claude").mkdir()
    (home / ".codex").mkdir()
    creds = {
        home / ".claude" / ".credentials.json": CLAUDE,
        home / ".codex" / "auth.json": CODEX,
    }
    for path, doc in creds.items():
        path.write_text(json.dumps(doc))
    before = {p: p.read_bytes() for p in creds}
    rot = Rotating({"R-claude", "R-codex"})
    proj = project(base)
    held = base / "owl" / "credentials"
    held.mkdir(parents=True)
    (held / "claude").write_text("HELD-TOKEN\n")
    (held / "claude").chmod(0o600)
    with token_server(rot) as port:
        # Claude and Codex as the agents they are (their state, their
        # credentials), each a script that refreshes as the CLI would
        script = base / "agent.sh"
        as_agent = {"path": str(script)}
        d = daemon(
            base,
            home,
            REFRESH,
            known={"PORT": port, "OWL_DIR": base / "owl"},
            sandbox={"host_ports": [port]},
            config={
                "jobs": {"attempts": 1},
                "agents": {
                    "shell": {"command": ["bash", str(base / "attack.sh")]},
                    "claude": as_agent,
                    "codex": as_agent,
                },
            },
            who=who,
        )
        script.write_text("#!/bin/bash\n" + (base / "attack.sh").read_text())
        script.chmod(0o755)
        with d:
            logs = {}
            for agent in ("claude", "codex"):
                job = d.add("do the work", proj, "--agent", agent)
                d.ok("start")
                logs[agent] = ended(d, job)
    claude_log, codex_log = logs["claude"], logs["codex"]
    # each agent's Run is logged in (it has the access token) but cannot refresh
    assert "sees access: A-claude" in claude_log, claude_log
    assert "refresh refused: ~/.claude/.credentials.json" in claude_log, claude_log
    assert "sees access: A-codex" in codex_log, codex_log
    assert "refresh refused: ~/.codex/auth.json" in codex_log, codex_log
    # no agent sees another's credentials
    assert "no file: ~/.codex/auth.json" in claude_log, claude_log
    assert "no file: ~/.claude/.credentials.json" in codex_log, codex_log
    assert "REFRESHED" not in claude_log + codex_log
    # the held credential reaches Claude's Run as its variable, not as a file
    assert "held: HELD-TOKEN" in claude_log and "held: none" in codex_log
    assert "refused: see the held credential's file" in claude_log, claude_log
    assert "ESCAPED" not in claude_log + codex_log
    # the person's files are as they were, and their tokens still refresh
    for path, data in before.items():
        assert path.read_bytes() == data, path
    assert rot.refresh("R-claude") is not None and rot.refresh("R-codex") is not None
