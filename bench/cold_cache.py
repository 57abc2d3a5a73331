"""What a project's first build costs in a contained Run, cold, against its next, warm.

    .venv/bin/python bench/cold_cache.py [--runs 3] [--tools go,cargo,cargo-target] [--nice 0]

A project's caches are its own, in Owl's keeping (`sandbox/projects/NAME-HASH/
caches`): its first Job finds them empty, every later Job finds what the
first left. Per tool, each round makes a new project (so new, empty caches)
and runs two Jobs of the same work through the real daemon, each in a real
contained Run and a worktree of its own, one after the other:

- go: `go mod tidy` (one dependency from a module proxy that is a folder,
  into ~/go/pkg/mod), `go build`, `go test ./...` (compiled through
  ~/.cache/go-build: the standard library's test packages and vet, cold);
- cargo: `cargo build` of a crate with one git dependency (a local
  repository, cloned into ~/.cargo/git, cold); the worktree's `target/` is
  the Job's own, so the compile itself is never warm;
- cargo-target: the same with `CARGO_TARGET_DIR` in the project's cache
  (~/.cache/target), so that the next Job's compile is warm too.

Printed per tool: the medians, over the rounds, of the build's own time
(measured inside the Run) and the Run's whole (from its start to its end,
containment included), cold and warm. Nothing is fetched from the network: a
real first build adds its download (the dependencies' size over the
network's speed) to the cold figure.

`--nice` is the Runs' priority: 0 by default, as a Run meets an idle laptop;
at Owl's own 10 on a machine others keep busy, a Run gets a tenth of a
core's share against each busy session and the figures measure the load.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from owlproc import OwlDaemon, make_project  # noqa: E402
from test_sandbox_work import APP_MAIN, DEP_LIB, DEP_TOML, shell_daemon  # noqa: E402
from test_sandbox_work_more import GO_MAIN, GO_MOD, GO_TEST, go_proxy  # noqa: E402

STAMP = "start=$(date +%s%N)\n"
DONE = 'echo "build_ms=$(( ($(date +%s%N) - start) / 1000000 ))"\n'
GO = (
    "set -eu\n"
    + STAMP
    + "go mod tidy\ngo build -o probe .\ngo test ./... > gotest.out\n"
    + DONE
    + 'git add go.sum gotest.out && git commit -qm "built"\n'
)
CARGO = (
    "set -eu\n"
    + STAMP
    + "cargo build -q\n"
    + DONE
    + 'git add Cargo.lock && git commit -qm "built"\n'
)


def go_setup(base: Path) -> tuple[Path, str, dict, dict]:
    proxy = go_proxy(base / "goproxy")
    project = make_project(
        base / "proj",
        {"go.mod": GO_MOD, "main.go": GO_MAIN, "main_test.go": GO_TEST, ".gitignore": "/probe\n"},
    )
    env = {
        "GOPROXY": f"file://{proxy}",
        "GOSUMDB": "off",
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
    }
    return project, GO, env, {"read": [str(proxy)]}


def cargo_setup(base: Path) -> tuple[Path, str, dict, dict]:
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    cargo = shutil.which("cargo") or str(home / ".cargo" / "bin" / "cargo")
    dep = make_project(base / "dep", {"Cargo.toml": DEP_TOML, "src/lib.rs": DEP_LIB})
    app_toml = (
        '[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\n\n'
        f'[dependencies]\ndep = {{ git = "file://{dep}" }}\n'
    )
    project = make_project(
        base / "proj",
        {"Cargo.toml": app_toml, "src/main.rs": APP_MAIN, ".gitignore": "target/\n"},
    )
    env = {
        "PATH": f"{Path(cargo).parent}:{os.environ.get('PATH', os.defpath)}",
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME") or str(home / ".rustup"),
    }
    return project, CARGO, env, {"read": [str(dep)]}


def cargo_target_setup(base: Path) -> tuple[Path, str, dict, dict]:
    """cargo with its target folder in the project's cache (~/.cache), so
    that a later Job's compile finds the first's."""
    project, _, env, sandbox = cargo_setup(base)
    script = CARGO.replace("cargo build", 'CARGO_TARGET_DIR="$HOME/.cache/target" cargo build')
    return project, script, env, sandbox


SETUPS = {"go": go_setup, "cargo": cargo_setup, "cargo-target": cargo_target_setup}


def job(d: OwlDaemon, project: Path) -> tuple[float, float]:
    """One Job to review: (the build's own seconds, the Run's whole seconds)."""
    jid = d.add("build", project)
    d.ok("start")
    j = d.wait_job(jid, "review", timeout=600)
    run = j["runs"][-1]
    assert run["contained"].startswith("contained: bwrap"), run["contained"]
    log = Path(run["log"]).read_text(errors="replace")
    m = re.search(r"build_ms=(\d+)", log)
    assert m and len(j["runs"]) == 1, log
    return int(m.group(1)) / 1000, float(run["duration_s"])


def round_of(tool: str, nice: int) -> tuple[tuple[float, float], tuple[float, float]]:
    base = Path(tempfile.mkdtemp(prefix="owl-cold-", dir="/var/tmp"))
    try:
        home = base / "person"
        home.mkdir()
        project, script, env, sandbox = SETUPS[tool](base)
        with shell_daemon(base, home, script, sandbox, env, runs={"nice": nice}) as d:
            return job(d, project), job(d, project)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tools", default="go,cargo,cargo-target")
    ap.add_argument("--nice", type=int, default=0)
    a = ap.parse_args()
    print(
        f"{'':12} {'build cold':>11} {'warm':>7} {'Run cold':>10} {'warm':>7}   (medians of {a.runs})"
    )
    for tool in a.tools.split(","):
        t = time.monotonic()
        rounds = [round_of(tool, a.nice) for _ in range(a.runs)]
        med = [statistics.median(r[i][k] for r in rounds) for i in (0, 1) for k in (0, 1)]
        cold_b, cold_r, warm_b, warm_r = med
        print(
            f"{tool:12} {cold_b:10.1f}s {warm_b:6.1f}s {cold_r:9.1f}s {warm_r:6.1f}s"
            f"   ({time.monotonic() - t:.0f} s in all)"
        )


if __name__ == "__main__":
    main()
