"""A Run frozen mid-stream for longer than its agent's stream watchdog, then thawed.

The real daemon runs the REAL agent CLI (OpenCode, Codex, Gemini or Copilot) against
its model stub on 127.0.0.1, contained as a person's Runs are. The stub
streams the reply a word at a time over `--stream` seconds; a few seconds in,
input arrives (the Run is frozen), and after `--freeze` seconds the machine
is idle again (thawed), well inside the grace window. The agent's own stream
watchdog is set to `--watchdog` seconds where the CLI lets it be set
(OpenCode: the provider's `chunkTimeout`, 5 minutes unless set; Codex: the
provider's `stream_idle_timeout_ms`, 5 minutes unless set), so a freeze
longer than it is minutes, not a quarter of an hour (Gemini's and Copilot's
cannot be set: their defaults hold). A retried request is
answered "Done after a retry.".

Per freeze length: how the Run ended, the Job's state, attempts spent, the
model requests made (1 = none extra), and the Run's last message.

    python bench/agent_thaw.py --agent opencode [--freeze 5,40] [--watchdog 15] [--stream 30]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from owlproc import OwlDaemon, make_project, wait_for  # noqa: E402
from support import chat_stub, gemini_stub, responses_stub  # noqa: E402
from support.agent_clis import require  # noqa: E402
from support.scripted_http import Say, Stub  # noqa: E402

TEXT = " ".join(f"word{i}" for i in range(60)) + " All streamed."
AFTER_RETRY = "Done after a retry."


def stub_for(agent: str, stream: float) -> Stub:
    script = [Say(TEXT, over=stream), Say(AFTER_RETRY)]
    if agent in ("opencode", "copilot"):
        return chat_stub.ChatStub(script)
    if agent == "codex":
        return responses_stub.ResponsesStub(script)
    return gemini_stub.GeminiStub(script)


def setup(agent: str, stub: Stub, home: Path, watchdog: float) -> tuple[dict, dict]:
    """(the daemon's environment, the agent's config table) for `agent`."""
    home.mkdir(parents=True, exist_ok=True)
    table: dict[str, Any] = {"path": require(agent)}
    if agent == "copilot":
        env = {
            "HOME": str(home),
            "COPILOT_PROVIDER_BASE_URL": f"{stub.url}/v1",
            "COPILOT_PROVIDER_API_KEY": "test",
            "COPILOT_MODEL": chat_stub.MODEL,
            "COPILOT_OFFLINE": "true",
        }
        return env, table
    if isinstance(stub, chat_stub.ChatStub):
        env = stub.opencode_env(home)
        cfg = stub.opencode_config()
        cfg["provider"]["stub"]["options"]["chunkTimeout"] = int(watchdog * 1000)
        (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(cfg))
        table["args"] = ["--pure"]
        return env, table
    if isinstance(stub, responses_stub.ResponsesStub):
        env = stub.env(home / ".codex")
        config = stub.config() + f"stream_idle_timeout_ms = {int(watchdog * 1000)}\n"
        (home / ".codex" / "config.toml").write_text(config)
        return env, table
    return stub.env(home), table  # type: ignore[attr-defined]


def trial(agent: str, freeze: float, watchdog: float, stream: float, tmp: Path) -> dict:
    project = make_project(tmp / "proj")
    with stub_for(agent, stream) as stub:
        env, table = setup(agent, stub, tmp / "home", watchdog)
        sandbox: dict[str, Any] = {"mode": "required"}
        if agent == "codex":
            sandbox["host_ports"] = [urllib.parse.urlsplit(stub.url).port]
        cfg = {
            "agents": {agent: table},
            "sandbox": sandbox,
            "interruption": {"grace_window": "30m"},
        }
        with OwlDaemon(tmp / "owl", cfg, env=env) as d:
            job = d.add("Say something long.", project, "--agent", agent)
            d.machine("idle")
            wait_for(
                lambda: any(r.turn == Say(TEXT, over=stream) for r in stub.turns()),
                timeout=600,
                what="the slow reply to start",
            )
            time.sleep(min(3.0, stream / 4))
            d.machine("input")
            frozen = time.monotonic()
            d.wait_run(job, "frozen", timeout=30)
            time.sleep(max(0.0, freeze - (time.monotonic() - frozen)))
            d.machine("idle")
            thawed = time.monotonic()
            j = wait_for(
                lambda: (j := d.job(job))["state"] not in ("active", "pending") and j,
                timeout=900,
                what="the Job to end",
            )
            runs = j["runs"]
            return {
                "agent": agent,
                "freeze_s": round(thawed - frozen, 1),
                "watchdog_s": watchdog if agent in ("opencode", "codex") else "its own",
                "state": j["state"],
                "runs": [(r["outcome"], r["reason"]) for r in runs],
                "attempts_spent": j["attempts"] - j["attempts_left"],
                "requests": len(stub.turns()),
                "last_message": (runs[-1]["last_message"] or "")[-40:],
                "after_thaw_s": round(time.monotonic() - thawed, 1),
            }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", choices=("opencode", "codex", "gemini", "copilot"), required=True)
    ap.add_argument("--freeze", default="5,40", help="freeze lengths in seconds, comma-separated")
    ap.add_argument("--watchdog", type=float, default=15.0, help="the agent's stream watchdog, s")
    ap.add_argument("--stream", type=float, default=30.0, help="how long the reply streams, s")
    args = ap.parse_args()
    for freeze in (float(f) for f in args.freeze.split(",")):
        with tempfile.TemporaryDirectory(prefix="owl-thaw-") as tmp:
            got = trial(args.agent, freeze, args.watchdog, args.stream, Path(tmp))
        print(json.dumps(got), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
