"""How fast `owl` answers with a long queue: 10,000 Jobs behind a real daemon.

Measures the wall time of the real `owl status --json` and `owl add` (a new
interpreter each time, as a person or script runs them), and separately the
daemon's own share (the same request sent over the socket from this process),
so that interpreter start-up and daemon work can be told apart. Then shows
what the CLI imports (python -X importtime): nothing that needs a display
(pynput, pystray, GTK, Xlib, Pillow) may be on its path.

The Jobs are written straight into the database before the daemon starts,
in one transaction; the daemon then runs with the machine driven by hand
and in use, so nothing starts.

Bytecode: the package is compiled once into a private cache first (as an
installed package would be); with PYTHONDONTWRITEBYTECODE and no cache,
every call would recompile the cli package (~40 ms more).

Target: median <= 100 ms each for `owl status --json` and `owl add`.

    python bench/cli_speed.py [--jobs 10000] [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The installed `owl` script, as people run it; `python -m owl` adds runpy.
_SCRIPT = Path(sys.executable).with_name("owl")
OWL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "owl"]
DISPLAY_MODULES = ("pynput", "pystray", "gi", "Xlib", "PIL")
TARGET_MS = 100.0


def figures(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p90 = ms[min(len(ms) - 1, int(round(0.9 * (len(ms) - 1))))]
    return f"median {statistics.median(ms):6.1f} ms   p90 {p90:6.1f} ms   max {ms[-1]:6.1f} ms"


def timed(cmd: list[str], env: dict[str, str], runs: int, check: bool = True) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True)
        out.append(time.perf_counter() - t)
        if check and p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode()}")
    return out


def interleaved(cmds: dict[str, tuple[list[str], dict[str, str]]],
                runs: int) -> dict[str, list[float]]:
    """Time each command once per round, round after round, so that every
    command sees the same background load (the figures are compared)."""
    out: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, (cmd, env) in cmds.items():
            out[name] += timed(cmd, env, 1)
    return out


def make_project(path: Path) -> Path:
    path.mkdir(parents=True)
    git = ["git", "-C", str(path), "-c", "user.name=b", "-c", "user.email=b@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README").write_text("bench\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    return path


def fill(db: Path, project: Path, n: int) -> float:
    from owl.store import Store

    t = time.perf_counter()
    store = Store(db)                 # creates and migrates the schema
    first = store.add_job("sleep=60 queued job 0", str(project), "script", 3)
    row = store.db.execute("SELECT sort_key, created_at FROM jobs WHERE id=?",
                           (first,)).fetchone()
    # The rest in one statement, shaped exactly like add_job's rows (Store.add_job
    # reads MAX(sort_key) per Job, which is quadratic-ish at this size).
    with store.tx():
        store.db.executemany(
            "INSERT INTO jobs(prompt, project, agent, state, sort_key, attempts, created_at, "
            "updated_at) VALUES(?, ?, 'script', 'pending', ?, 3, ?, ?)",
            [(f"sleep=60 queued job {i}", str(project), row[0] + i, row[1], row[1])
             for i in range(1, n)])
    store.close()
    return time.perf_counter() - t


def import_report(env: dict[str, str]) -> None:
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "owl", "status", "--json"],
                       env=env, capture_output=True, text=True)
    rows = []                       # (depth, name, self us, cumulative us)
    for line in p.stderr.splitlines():
        parts = line[len("import time:"):].split("|")
        if not line.startswith("import time:") or len(parts) != 3 or "self [us]" in line:
            continue
        raw = parts[2]
        depth = (len(raw) - len(raw.lstrip()) - 1) // 2
        rows.append((depth, raw.strip(), int(parts[0]), int(parts[1])))
    names = {name for _, name, _, _ in rows}
    total = sum(self_us for _, _, self_us, _ in rows)
    print(f"\nimports of `owl status --json`: {len(rows)} modules, {total / 1000:.1f} ms in all")
    for _, name, _, cum in sorted((r for r in rows if r[0] == 0), key=lambda r: -r[3])[:6]:
        print(f"    {cum / 1000:6.1f} ms  {name}")
    print(f"  owl modules: {', '.join(sorted(n for n in names if n.startswith('owl')))}")
    bad = sorted({n.split('.')[0] for n in names} & set(DISPLAY_MODULES))
    print(f"  display toolkits imported: {', '.join(bad) if bad else 'none'}"
          f"   psutil: {'yes' if 'psutil' in names else 'no'}"
          f"   sqlite3: {'yes' if 'sqlite3' in names else 'no'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="owl-cli-bench-"))
    daemon = None
    try:
        home = tmp / "home"
        home.mkdir()
        agent = ROOT / "tests" / "agents" / "agent.py"
        (home / "config.toml").write_text(
            f'[agents.script]\ncommand = ["{sys.executable}", "{agent}", "{{prompt}}"]\n'
            '[agent]\ndefault = "script"\n')
        project = make_project(tmp / "proj")
        env = dict(os.environ, OWL_HOME=str(home), OWL_MACHINE="manual",
                   PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        took = fill(home / "owl.db", project, a.jobs)
        print(f"{a.jobs:,} Jobs written in {took:.2f} s")

        log = open(tmp / "daemon.log", "wb")
        daemon = subprocess.Popen([*OWL, "daemon"], env=env, stdout=log, stderr=log,
                                  stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while subprocess.run([*OWL, "status", "--json"], env=env,
                             capture_output=True).returncode != 0:
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not come up:\n"
                                 f"{(tmp / 'daemon.log').read_text()}")
            time.sleep(0.1)
        timed([*OWL, "--version"], env, 2)           # bytecode compiled, caches warm
        load = os.getloadavg()[0]
        print(f"daemon up (pid {daemon.pid}); load average {load:.2f} on "
              f"{os.cpu_count()} cores\n")

        nocache = dict(os.environ, OWL_HOME=str(home), OWL_MACHINE="manual",
                       PYTHONDONTWRITEBYTECODE="1")
        t = interleaved({
            "status": ([*OWL, "status", "--json"], env),
            "add": ([*OWL, "add", "--project", str(project), "sleep=60 bench"], env),
            "version": ([*OWL, "--version"], env),
            "bare": ([sys.executable, "-c", "pass"], env),
            "cold": ([*OWL, "status", "--json"], nocache),
        }, a.runs)
        st, add, ver, bare, cold = (t[k] for k in ("status", "add", "version", "bare", "cold"))

        sys.path.insert(0, str(ROOT / "app"))
        os.environ["OWL_HOME"] = str(home)
        from owl.control.client import ask
        from owl.paths import get_paths

        sock = get_paths().socket
        inproc_st, inproc_list = [], []
        for _ in range(a.runs):
            t = time.perf_counter()
            doc = ask(sock, "status")
            inproc_st.append(time.perf_counter() - t)
        inproc_add = []
        for _ in range(a.runs):
            t = time.perf_counter()
            ask(sock, "add", {"prompt": "sleep=60 bench", "project": str(project)})
            inproc_add.append(time.perf_counter() - t)
        for _ in range(3):
            t = time.perf_counter()
            jobs = ask(sock, "jobs.list")
            inproc_list.append(time.perf_counter() - t)

        print(f"(`{' '.join(OWL)}`; each command timed once per round, {a.runs} rounds)")
        print(f"owl status --json        {figures(st)}   "
              f"{'ok' if statistics.median(st) * 1000 <= TARGET_MS else 'OVER TARGET'}")
        print(f"owl add                  {figures(add)}   "
              f"{'ok' if statistics.median(add) * 1000 <= TARGET_MS else 'OVER TARGET'}")
        print(f"owl --version            {figures(ver)}   (no daemon asked)")
        print(f"python -c pass           {figures(bare)}")
        print(f"status, no bytecode      {figures(cold)}   (PYTHONDONTWRITEBYTECODE, no cache)")
        print(f"status over the socket   {figures(inproc_st)}   (daemon's share; queue listed: "
              f"{len(doc['queue'])} of {doc['queue_length']:,})")
        print(f"add over the socket      {figures(inproc_add)}   (daemon's share: git checks "
              "the project)")
        print(f"jobs.list over socket    {figures(inproc_list)}   ({len(jobs):,} Jobs)")
        import_report(env)
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(15)
            except subprocess.TimeoutExpired:
                daemon.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
