"""A command agent contained in a real Job worktree: it commits on its branch, in
the Job's own store, and a hook or core.fsmonitor planted in the project's git
directory, or its store's, is refused."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from owl.engine import containing
from owl.git import storing
from owl.sandbox import bwrapstart, contain, policy
from support.need import programs as need


def test_a_contained_agent_commits_but_cannot_plant_a_hook_or_fsmonitor(tmp_path):
    need("bwrap", "git")
    project, wt, owl = tmp_path / "proj", tmp_path / "owl" / "worktrees" / "job-1", tmp_path / "owl"
    owl.mkdir()
    (owl / "config.toml").write_text("x = 1\n")
    g = lambda *a, cwd=project: (
        subprocess.run(["git", *a], cwd=cwd, check=True, capture_output=True, text=True).stdout
    )
    project.mkdir()
    g("init", "-q", "-b", "main")
    (project / "README").write_text("x\n")
    g("add", "README")
    g("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "first")
    g("branch", "owl/job-1")
    places = storing.create(project, wt, "owl/job-1")
    env = {
        "HOME": str(tmp_path / "home"),
        "PATH": os.environ["PATH"],
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@b",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@b",
        "OWL_HOME": str(owl),
    }
    (tmp_path / "home").mkdir()
    script = (
        "echo hi > hello.txt && git add hello.txt && git commit -qm hello && echo committed; "
        "git config core.fsmonitor ./evil.sh || echo no-fsmonitor; "
        f"echo evil > {project}/.git/hooks/pre-commit || echo no-hook; "
        f"echo evil > {places.store}/hooks/pre-commit || echo no-store-hook; "
        f"echo evil > {places.store}/config || echo no-store-config; "
        f"git update-ref refs/heads/main HEAD && echo moved-own-main; "
        f"git -C {project} update-ref refs/heads/main HEAD || echo no-main; "
        f"cat {owl}/config.toml || echo no-config"
    )
    w = contain.wrap(
        ["sh", "-c", script],
        settings=policy.Settings(),
        agent="script",
        env=env,
        worktree=str(wt),
        project=str(project),
        owl_dirs=[str(owl)],
        git=containing.git_places(places),
    )
    assert w.contained and w.label.startswith("contained: bwrap 0.")
    done = subprocess.run(
        check=False, args=w.argv, cwd=wt, env=w.env, capture_output=True, text=True, timeout=60
    )
    out = done.stdout
    assert "committed" in out, done.stderr
    assert "no-fsmonitor" in out and "no-hook" in out and "no-config" in out
    assert "no-store-hook" in out and "no-store-config" in out
    assert "no-main" in out and "moved-own-main" in out
    # the store's top is the Run's own scratch (git makes its packed-refs.lock
    # there): whatever it leaves at the top is gone with it, never the host's
    assert "evil" not in Path(places.store, "config").read_text()
    assert not Path(places.store, "hooks", "pre-commit").exists()
    main = g("rev-parse", "main")
    storing.land(project, places, "owl/job-1")
    assert g("log", "--format=%s", "owl/job-1").split() == ["hello", "first"]
    assert g("rev-parse", "main") == main  # moved in the store only
    assert "fsmonitor" not in (project / ".git" / "config").read_text()
    assert not (project / ".git" / "hooks" / "pre-commit").exists()


def test_mode_off_is_not_contained_and_says_so():
    w = contain.wrap(
        [sys.executable, "-c", "pass"],
        settings=policy.Settings(mode="off"),
        agent="x",
        env={},
        worktree="/",
        project="/",
        owl_dirs=[],
    )
    assert not w.contained and w.label == 'not contained: sandbox.mode = "off"'


def test_pasta_first_then_slirp4netns_when_no_host_port_must_be_kept():
    found = {"pasta": "/usr/bin/pasta", "slirp4netns": "/usr/bin/slirp4netns"}
    assert bwrapstart.user_net("-", found.get) == ("/usr/bin/pasta", "")
    assert bwrapstart.user_net("4000", found.get) == ("/usr/bin/pasta", "")
    only_slirp = {"slirp4netns": "/usr/bin/slirp4netns"}.get
    assert bwrapstart.user_net("-", only_slirp) == ("/usr/bin/slirp4netns", "")
    helper, why = bwrapstart.user_net("4000", only_slirp)
    assert helper is None and "cannot forward the host's 127.0.0.1 ports (4000)" in why
    helper, why = bwrapstart.user_net("-", {}.get)
    assert helper is None and why == "no user-mode networking (sudo apt install passt)"


def test_without_pasta_a_run_gets_its_own_network_from_slirp4netns(tmp_path):
    need("bwrap", "slirp4netns")
    wt = tmp_path / "wt"
    wt.mkdir()
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"]}
    w = contain.wrap(
        ["sh", "-c", "grep -o tap0 /proc/net/dev; exit 3"],
        settings=policy.Settings(),
        agent="script",
        env=env,
        worktree=str(wt),
        project=str(wt),
        owl_dirs=[],
        which=lambda name: None if name == "pasta" else shutil.which(name),
    )
    assert w.label.endswith(", own network (slirp4netns); unix sockets: none"), w.label
    done = subprocess.run(w.argv, env=w.env, capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (3, "tap0\n"), done.stderr


def test_an_agents_missing_state_folder_is_made_and_what_it_writes_there_is_kept(tmp_path):
    """A person who never ran the agent has no ~/.claude: the agent's state is
    Owl's, per agent and project, made (as the agent would make it) and bound
    at ~/.claude, and the conversation the agent keeps there outlives the Run
    for the next to resume; the person's home gets nothing."""
    need("bwrap")
    home, wt = tmp_path / "home", tmp_path / "wt"
    home.mkdir()
    wt.mkdir()
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    w = contain.wrap(
        ["sh", "-c", "echo kept > $HOME/.claude/session.jsonl && echo wrote"],
        settings=policy.Settings(network=False),
        agent="claude",
        env=env,
        worktree=str(wt),
        project=str(wt),
        owl_dirs=[],
        keep=str(tmp_path / "keep"),
    )
    assert w.contained
    done = subprocess.run(w.argv, cwd=wt, env=w.env, capture_output=True, text=True, timeout=60)
    assert "wrote" in done.stdout, done.stderr
    [kept] = (tmp_path / "keep" / "projects").glob("*/agents/claude-*/claude-*/session.jsonl")
    assert kept.parent.stat().st_mode & 0o777 == 0o700
    assert kept.read_text() == "kept\n"
    assert not (home / ".claude").exists()


def test_codex_s_own_provider_gives_its_port_and_key_and_a_broken_file_gives_nothing(tmp_path):
    """Read as data from $CODEX_HOME/config.toml: the port goes to the network
    helper's forwards, the key variable is not dropped (its name looks secret)."""
    from owl.sandbox import agentconf

    need("bwrap")
    codex = tmp_path / "codex"
    codex.mkdir()
    env = {"CODEX_HOME": str(codex), "X_API_KEY": "k", "OTHER_API_KEY": "s"}
    (codex / "config.toml").write_text(
        '[model_providers.x]\nbase_url = "http://127.0.0.1:11434/v1"\nenv_key = "X_API_KEY"\n'
        '[model_providers.far]\nbase_url = "https://openrouter.ai/api/v1"\n'
        'env_key = "$(touch /tmp/x)"\n'
    )
    assert agentconf.needs("codex", str(tmp_path), env) == agentconf.Needs((11434,), ("X_API_KEY",))
    assert agentconf.needs("mine", str(tmp_path), env) == agentconf.Needs()
    w = contain.wrap(
        ["true"],
        settings=policy.Settings(),
        agent="codex",
        env=env,
        worktree=str(tmp_path),
        project=str(tmp_path),
        owl_dirs=[],
        which=lambda name: "/usr/bin/pasta" if name == "pasta" else None,
    )
    assert w.contained
    # the sandbox (and so the agent) starts with the key its provider names, not the other
    assert w.env.get("X_API_KEY") == "k" and "OTHER_API_KEY" not in w.env
    assert "OTHER_API_KEY" not in " ".join(w.argv)
    assert w.argv[w.argv.index(bwrapstart.NETNS) + 2] == "11434"
    for broken in (b"[model_providers.x\n", b"\xff\xfe", b"model_providers = 3\n"):
        (codex / "config.toml").write_bytes(broken)
        assert agentconf.needs("codex", str(tmp_path), env) == agentconf.Needs()
    (codex / "config.toml").write_bytes(b"#" * (agentconf.READ_MAX + 1))
    assert agentconf.needs("codex", str(tmp_path), env) == agentconf.Needs()


def test_a_run_cannot_rewrite_the_agent_config_owl_reads_for_the_next_run(tmp_path):
    """What Owl reads to open a port or keep a key is the person's own file,
    which no Run writes: a Codex Run that adds a provider (a port of the host,
    GITHUB_TOKEN as its key) to its config.toml changes its own copy, in
    Owl's keeping; the person's is untouched, Owl reads nothing new, and the
    next Run's copy is the person's again."""
    from owl.sandbox import agentconf

    need("bwrap")
    codex, wt = tmp_path / "codex", tmp_path / "wt"
    codex.mkdir()
    wt.mkdir()
    mine = 'model = "m"\n'
    (codex / "config.toml").write_text(mine)
    env = {"CODEX_HOME": str(codex), "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    plant = '[model_providers.evil]\\nbase_url = "http://127.0.0.1:2375"\\nenv_key = "GITHUB_TOKEN"'
    script = (
        f"grep -q 'model' {codex}/config.toml && echo seeded; "
        f"printf '{plant}' >> {codex}/config.toml && echo appended-own-copy; "
        f"echo ok > {codex}/session.jsonl && echo state-written"
    )

    def run() -> str:
        w = contain.wrap(
            ["sh", "-c", script],
            settings=policy.Settings(network=False),
            agent="codex",
            env=env,
            worktree=str(wt),
            project=str(wt),
            owl_dirs=[],
            keep=str(tmp_path / "keep"),
        )
        assert w.contained, w.label
        return subprocess.run(
            w.argv, cwd=wt, env=w.env, capture_output=True, text=True, timeout=60, check=False
        ).stdout

    for _ in range(2):  # the second Run sees the person's file again, not the plant
        out = run()
        for word in ("seeded", "appended-own-copy", "state-written"):
            assert word in out, out
        assert (codex / "config.toml").read_text() == mine
        assert not (codex / "session.jsonl").exists()
        assert agentconf.needs("codex", str(tmp_path), env) == agentconf.Needs()
    [copy] = (tmp_path / "keep" / "projects").glob("*/agents/codex-*/codex-*/config.toml")
    assert "evil" in copy.read_text() and copy.read_text().startswith(mine)


def test_a_host_socket_gone_before_the_sandbox_starts_does_not_fail_the_run(tmp_path):
    """The sockets to cover are listed when the command is made; one that a
    program closes a moment later is left out when bwrap starts, with no
    network helper as with one, rather than failing the Run."""
    import socket

    need("bwrap")
    home, wt = tmp_path / "home", tmp_path / "wt"
    home.mkdir()
    wt.mkdir()
    where = Path(tempfile.mkdtemp(dir="/var/tmp"))
    path = where / "brief.sock"
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    try:
        for network in (False, True):
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(path))
            server.listen()
            w = contain.wrap(
                ["sh", "-c", "echo started"],
                # a folder of the host's the Run reads: its sockets are covered
                settings=policy.Settings(network=network, read=(str(where),)),
                agent="claude",
                env=env,
                worktree=str(wt),
                project=str(wt),
                owl_dirs=[],
                which=lambda name: shutil.which(name) if network else None,
            )
            assert str(path) in w.argv
            server.close()
            os.unlink(path)  # gone before bwrap starts
            done = subprocess.run(
                w.argv, cwd=wt, env=w.env, capture_output=True, text=True, timeout=60
            )
            assert "started" in done.stdout, (network, done.stderr)
    finally:
        shutil.rmtree(where, ignore_errors=True)
