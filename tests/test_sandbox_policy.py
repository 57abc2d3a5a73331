"""The sandbox's policy, pure: what is hidden, writable, dropped, narrowed."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from owl.sandbox import keys
from owl.sandbox.agentstate import AGENTS
from owl.sandbox import policy as P


def facts(**kw):
    base = {
        "home": "/home/me",
        "user_home": "/home/me",
        "worktree": "/home/me/.local/share/owl/worktrees/job-1",
        "git_common": "/home/me/.local/share/owl/worktrees/job-1.git",
        "git_admin": "/home/me/.local/share/owl/worktrees/job-1.git/worktrees/job-1",
        "project_git": "/home/me/code/api/.git",
        "project": "/home/me/code/api",
        "owl_home": ("/home/me/.local/share/owl", "/home/me/.config/owl"),
        "runtime_dir": "/run/user/1000",
        "env": {
            "HOME": "/home/me",
            "DISPLAY": ":0",
            "GITHUB_TOKEN": "t",
            "AWS_PROFILE": "p",
            "MY_API_KEY": "k",
            "ANTHROPIC_API_KEY": "a",
            "OWL_RUN_ID": "7",
            "OWL_HOME": "/x",
            "BUS": "/run/user/1000/bus",
            "PATH": "/usr/bin",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:4123",
        },
    }
    base.update(kw)
    return P.Facts(**base)


OWN = "/home/me/.local/share/owl/sandbox"
OWN_BINDS = (
    (f"{OWN}/projects/api-1/caches/cache-1", "/home/me/.cache", True),
    (f"{OWN}/projects/api-1/agents/claude-1/claude-1", "/home/me/.claude", True),
)


def own(**kw):
    """The facts of a Run with a home of its own (Linux)."""
    return facts(own_home=f"{OWN}/jobs/job-1/home", own_binds=OWN_BINDS, **kw)


def test_the_view_is_an_allow_list_with_a_home_of_its_own():
    pol = P.compute(P.Settings(), AGENTS["claude"], own(programs=("/opt/x", "/srv/tool/bin")))
    assert (pol.read_root, pol.home, pol.own_home) == ("own", "/home/me", f"{OWN}/jobs/job-1/home")
    assert pol.own_binds == OWN_BINDS
    # of the person's home only the toolchains, the project and its git folder
    assert "/home/me" not in pol.readable
    assert {"/home/me/code/api", "/home/me/code/api/.git", "/home/me/.cargo/bin"} <= set(
        pol.readable
    )
    assert "/srv/tool/bin" in pol.readable
    assert not [p for p in pol.readable if p.endswith(".gitconfig") or p.endswith("/git")]
    # hidden only where a folder of the person's in sight holds it: none here
    assert pol.hidden == ()
    assert pol.writable[0] == "/home/me/.local/share/owl/worktrees/job-1"
    store = "/home/me/.local/share/owl/worktrees/job-1.git"
    assert {f"{store}/objects", f"{store}/refs", f"{store}/logs", f"{store}/worktrees/job-1"} <= (
        set(pol.writable)
    )
    assert pol.revealed == (store,)
    # no cache, no agent state of the person's: they are Owl's, bound in
    assert "/home/me/.cache" not in pol.writable and "/home/me/.claude" not in pol.writable
    assert not [p for p in pol.writable if p.startswith("/home/me/code/api")]
    assert pol.readonly_over == ("/home/me/code/api/.git",)


def test_hidden_wins_inside_every_folder_in_sight_and_is_laid_last():
    from owl.sandbox import bwrap as B

    pol = P.compute(
        P.Settings(read=("/home/me/notes",), write=("/home/me/work",), hide=("/home/me/work/s",)),
        AGENTS["claude"],
        own(),
    )
    assert pol.hidden == ("/home/me/work/s",)
    argv = B.argv(pol, ["true"], exists=lambda p: "dir")
    assert argv.index("/home/me/work/s") > argv.index("/home/me/work")
    last_bind = max(
        i for i, a in enumerate(argv) if a in ("--bind", "--ro-bind") and argv[i + 1] != "/dev/null"
    )
    assert argv.index("/home/me/work/s") > last_bind
    # the own home first, then what is bound into it
    assert argv.index(f"{OWN}/jobs/job-1/home") < argv.index(OWN_BINDS[0][0])


def test_one_view_for_both_sandboxes_the_persons_home_is_never_written():
    """Seatbelt's Policy is Linux's (an allow-list): no view of the person's
    home with its caches and agent state writable in place, whatever the facts."""
    for f in (facts(), own()):
        pol = P.compute(P.Settings(read="project"), AGENTS["claude"], f)
        assert pol.read_root == "own" and "/home/me" not in pol.readable
        assert not {"/home/me/.claude", "/home/me/.cache", "/home/me/.claude.json"} & set(
            pol.writable
        )
        assert "/home/me/.claude/settings.json" not in pol.readonly_over
    assert not hasattr(P, "_person_view") and not hasattr(P.Settings(), "read_word")


def test_the_environment_loses_display_owl_and_secrets_but_keeps_the_agents_key():
    pol = P.compute(P.Settings(env_keep=("MY_API_KEY",)), AGENTS["claude"], facts())
    assert set(pol.env_unset) == {"DISPLAY", "GITHUB_TOKEN", "AWS_PROFILE", "OWL_HOME", "BUS"}
    assert ("TMPDIR", "/tmp") in pol.env_set
    assert pol.host_ports == (4123,) and pol.network == "own"


def test_a_project_may_only_narrow():
    s = P.Settings(mode="off").narrowed(
        {"mode": "required", "read": "project", "network": False, "hide": ["~/notes"]}
    )
    assert (s.mode, s.read, s.network, s.hide) == ("off", (), False, ("~/notes",))
    assert P.Settings(read=("/x",)).narrowed({"read": "project"}).read == ()
    assert P.Settings().narrowed({"read": "home", "network": True}) == P.Settings()
    assert P.Settings(network=False).narrowed({"network": True}).network is False


def test_read_as_a_word_still_loads_and_says_what_it_means_now(tmp_path):
    for word in ("home", "project"):
        table = keys.check_table({"read": word}, "sandbox")
        assert keys.settings_from(table).read == ()
        [note] = keys.notes(table)
        assert note.startswith(f'sandbox.read = "{word}": a Run now sees a home of its own')
    table = keys.check_table({"read": [str(tmp_path)], "read_also": [str(tmp_path)]}, "sandbox")
    s = keys.settings_from(table)
    assert s.read == (str(tmp_path),) and s.read_also == (str(tmp_path),)
    pol = P.compute(s, AGENTS["claude"], own())
    assert str(tmp_path) in pol.readable
    with pytest.raises(keys.KeyProblem, match="a project may only narrow"):
        keys.check_table({"read": [str(tmp_path)]}, "sandbox", keys.PROJECT_KEYS)


@pytest.mark.parametrize("key", ["read", "read_also", "write", "caches", "sockets"])
def test_no_configured_path_reveals_a_secret_or_owls_folders(tmp_path, key):
    home = tmp_path / "me"
    owl = home / ".local" / "share" / "owl"
    for folder in (home / ".ssh", owl, home / "code", home / ".local" / "bin"):
        folder.mkdir(parents=True)
    (home / "dotfiles").mkdir()
    (home / "aws-link").symlink_to(home / ".ssh")
    for path, named in (
        ("~", ".ssh"),
        ("~/.ssh/id_ed25519", ".ssh"),
        ("~/.local", ".local/share/keyrings"),
        ("~/.local/share/owl/worktrees", ".local/share/owl"),
        ("~/aws-link", ".ssh"),
        ("~/.pgpass", ".pgpass"),
        ("~/.claude", ".claude/.credentials.json"),
    ):
        with pytest.raises(keys.KeyProblem) as e:
            keys.check_table({key: [path]}, "sandbox", home=str(home), owl=(str(owl),))
        assert e.value.dotted == f"sandbox.{key}" and e.value.value == path
        assert f"{home}/{named}" in e.value.why
    if key not in ("write", "sockets"):
        keys.check_table({key: ["~/code"]}, "sandbox", home=str(home), owl=(str(owl),))
    # hide names anything
    keys.check_table({"hide": ["~", "~/.ssh"]}, "sandbox", home=str(home), owl=(str(owl),))


def test_the_daemons_config_refuses_a_write_that_holds_owls_own_folder(tmp_path, monkeypatch):
    from owl.settings import config

    monkeypatch.setenv("OWL_HOME", str(tmp_path / "owl"))
    (tmp_path / "owl").mkdir()
    with pytest.raises(config.ConfigError) as e:
        config.from_dict({"sandbox": {"write": [str(tmp_path)]}}, "c.toml")
    said = str(e.value)
    assert said.startswith("c.toml: sandbox.write = ") and "\n" not in said
    assert said.endswith(
        f"holds or lies in Owl's own folder {tmp_path / 'owl'}, which a Run never sees"
    )


def test_config_keys_are_checked_with_the_key_named(tmp_path):
    with pytest.raises(keys.KeyProblem) as e:
        keys.check_table({"mode": "sometimes"}, "sandbox")
    assert e.value.dotted == "sandbox.mode"
    with pytest.raises(keys.KeyProblem, match="no such file"):
        keys.check_table({"write": [str(tmp_path / "missing")]}, "sandbox")
    ok = keys.check_table({"write": [str(tmp_path)], "network": False}, "sandbox")
    assert keys.settings_from(ok).write == (str(tmp_path),)


def test_the_config_file_takes_sandbox_tables_and_names_a_bad_key(tmp_path):
    from owl.settings import config

    cfg = config.from_dict(
        {
            "sandbox": {"mode": "required", "write": [str(tmp_path)]},
            "agents": {"claude": {"sandbox": {"env_keep": ["X"]}}},
        },
        "c.toml",
    )
    assert cfg.sandbox["mode"] == "required" and cfg.agent("claude")["sandbox"] == {
        "env_keep": ["X"]
    }
    with pytest.raises(config.ConfigError, match=r"^c\.toml: sandbox\.write = \".*: no such file"):
        config.from_dict({"sandbox": {"write": [str(tmp_path / "missing")]}}, "c.toml")


def test_the_runs_environment_is_the_sandboxs_too_with_its_tag_and_commits_unsigned():
    env = {**facts().env, "OWL_INSTANCE": "abc", "GIT_CONFIG_COUNT": "1"}
    env |= {"GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "Me"}
    pol = P.compute(P.Settings(), AGENTS["claude"], facts(env=env))
    inside = P.agent_env(env, pol)
    assert not {"DISPLAY", "GITHUB_TOKEN", "OWL_HOME", "BUS"} & set(inside)
    assert inside["OWL_INSTANCE"] == "abc" and inside["TMPDIR"] == "/tmp"
    assert inside["GIT_CONFIG_COUNT"] == "3" and inside["GIT_CONFIG_KEY_0"] == "user.name"
    assert (inside["GIT_CONFIG_KEY_1"], inside["GIT_CONFIG_VALUE_1"]) == ("commit.gpgSign", "false")


def test_host_sockets_in_sight_are_masked_but_the_opened_one():
    found = (
        "/run/docker.sock",  # /run is the Run's own
        "/var/lib/lxd/unix.socket",
        "/home/me/.docker/run/docker.sock",  # hidden with ~/.docker
        "/home/me/.local/share/app/app.sock",
        "/home/me/code/api/.git/fsmonitor--daemon.ipc",
        "/srv/podman.sock",
    )
    pol = P.compute(
        P.Settings(sockets=("/srv/podman.sock",)),
        AGENTS["claude"],
        own(private=("/run", "/var"), host_sockets=found),
    )
    # only those in a folder of the host's the Run sees: the project's
    assert pol.masked == ("/home/me/code/api/.git/fsmonitor--daemon.ipc",)
    assert pol.sockets == ("/srv/podman.sock",) and pol.private == ("/run", "/var")


def test_sockets_and_tmp_size_are_checked(tmp_path):
    import socket

    assert keys.check_table({"tmp_size": "512M"}, "sandbox") == {"tmp_size": 512 << 20}
    assert keys.settings_from({}).tmp_size == P.DEFAULT_TMP_SIZE
    for bad in ("lots", "10k", 0, True):
        with pytest.raises(keys.KeyProblem) as e:
            keys.check_table({"tmp_size": bad}, "sandbox")
        assert e.value.dotted == "sandbox.tmp_size"
    with pytest.raises(keys.KeyProblem, match="not a unix socket"):
        keys.check_table({"sockets": [str(tmp_path)]}, "sandbox")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "s.sock"))
        given = [str(tmp_path / "s.sock"), "/run/not-yet.sock"]
        assert keys.settings_from(keys.check_table({"sockets": given}, "sandbox")).sockets == (
            *given,
        )
    assert "sockets" in keys.AGENT_KEYS and "sockets" not in keys.PROJECT_KEYS


def test_sockets_own_is_a_word_and_opens_unix_sockets_as_the_views_say():
    table = keys.check_table({"sockets": ["own", "/run/docker.sock"]}, "sandbox")
    settings = keys.settings_from(table)
    for bad in ("mine", "run/docker.sock", "Own"):
        with pytest.raises(keys.KeyProblem) as e:
            keys.check_table({"sockets": [bad]}, "sandbox")
        assert (e.value.dotted, e.value.value) == ("sandbox.sockets", bad)
        assert str(e.value) == 'must be "own" or a socket\'s absolute path (or start with ~)'
    words = {
        (): ("none", False),
        ("own",): ("own", True),
        ("/run/docker.sock",): ("/run/docker.sock", True),
        ("own", "/run/docker.sock", "~/x.sock"): (
            "own, /run/docker.sock and /home/me/x.sock",
            True,
        ),
    }
    for named, (said, unix) in words.items():
        pol = P.compute(P.Settings(sockets=named), AGENTS["claude"], own())
        assert (pol.sockets_words(), pol.unix) == (said, unix), named
        assert "own" not in pol.sockets  # a word, never a path bound in
    assert settings.sockets == ("own", "/run/docker.sock")


def test_the_bwrap_argv_drops_a_roots_capabilities_bounds_tmp_and_masks_sockets_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from owl.sandbox import bwrap as B

    # the project's folders of this made-up home let root's Run through (on the
    # real machine /home/me does not exist, and bwrap.searchable reads it)
    monkeypatch.setattr(B, "searchable", lambda path: True)

    pol = P.compute(
        P.Settings(tmp_size=8 << 20, sockets=("/srv/podman.sock",)),
        AGENTS["claude"],
        own(
            private=("/run",),
            private_links=(("/run/shm", "/dev/shm"),),
            private_files=("/run/systemd/resolve/stub-resolv.conf",),
            host_sockets=("/home/me/code/api/x.sock",),
        ),
    )

    def exists(path: str) -> str:
        return "file" if path.endswith(".sock") else "dir"

    argv = B.argv(pol, ["true"], exists=exists, root=True)
    assert argv[1:8] == [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--new-session",
        "--unshare-user-try",
        "--cap-drop",
        "ALL",
    ]
    i = argv.index("/tmp")
    assert argv[i - 3 : i] == ["--size", str(8 << 20), "--tmpfs"]
    assert argv[argv.index("/dev/shm") - 3] == "--size"
    assert ["--tmpfs", "/run", "--symlink", "/dev/shm", "/run/shm"] == argv[
        argv.index("/run") - 1 : argv.index("/run") + 4
    ]
    end = argv.index("--chdir")
    assert argv[end - 6 : end] == [
        "--ro-bind",
        "/srv/podman.sock",
        "/srv/podman.sock",
        "--ro-bind",
        "/dev/null",
        "/home/me/code/api/x.sock",
    ]
    assert "--unsetenv" not in argv and "--setenv" not in argv
    assert "--cap-drop" not in B.argv(pol, ["true"], exists=lambda p: "dir", root=False)
    assert "--size" not in B.argv(pol, ["true"], exists=lambda p: "dir", sizes=B.sized("0.4"))


def test_the_hosts_bound_sockets_are_read_from_its_table(tmp_path):
    import socket

    from owl.sandbox import hostsockets

    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "a b.sock"))
        (tmp_path / "plain").write_text("")
        table = tmp_path / "unix"
        table.write_text(
            "Num       RefCount Protocol Flags    Type St Inode Path\n"
            f"0000: 00000002 00000000 00010000 0001 01 1 {tmp_path}/a b.sock\n"
            f"0000: 00000002 00000000 00010000 0001 01 2 {tmp_path}/plain\n"
            "0000: 00000002 00000000 00010000 0001 01 3 @/tmp/.X11-unix/X0\n"
            f"0000: 00000002 00000000 00010000 0001 01 4 {tmp_path}/gone.sock\n"
            "0000: 00000003 00000000 00000000 0001 03 5\n"
        )
        assert hostsockets.host_sockets([str(table)]) == (f"{tmp_path}/a b.sock",)


def test_one_table_of_each_other_network_namespace_is_read_and_no_more_than_most(tmp_path):
    """Grouped by the namespace's inode; a pid that cannot be read is passed
    over; the lowest pids first, and at most ``most`` besides the daemon's own."""
    from owl.sandbox import hostsockets

    def process(name: str, ns: str | None) -> None:
        (tmp_path / name / "ns").mkdir(parents=True)
        if ns is not None:
            (tmp_path / name / "ns" / "net").symlink_to(f"net:[{ns}]")

    process("self", "1")
    for pid, ns in (("7", "1"), ("12", "2"), ("30", "2"), ("9", None), ("100", "3"), ("45", "4")):
        process(pid, ns)
    tables = hostsockets.netns_tables(str(tmp_path), most=2)
    assert tables == (
        f"{tmp_path}/self/net/unix",
        f"{tmp_path}/12/net/unix",
        f"{tmp_path}/45/net/unix",
    )
    assert len(hostsockets.netns_tables(str(tmp_path))) == 4


def test_a_socket_bound_in_another_network_namespace_is_found(tmp_path):
    """/proc/net/unix lists only the daemon's own namespace's sockets; one bound
    by a process of another (a container's) is found through that process's."""
    import socket

    from owl.sandbox import hostsockets
    from support.netns_server import in_own_netns

    path = str(tmp_path / "elsewhere.sock")
    with in_own_netns(path):
        # (asked before a connection from here: the server's end of one is
        # listed, with the path, in the namespace of the side that connected)
        assert path not in hostsockets.host_sockets(["/proc/self/net/unix"])
        with socket.socket(socket.AF_UNIX) as s:  # it answers from here, by its path
            s.connect(path)
            assert s.recv(5) == b"hello"
        assert path in hostsockets.host_sockets()


def test_a_socket_bound_in_a_containers_own_mounts_is_found_where_the_host_has_it(tmp_path):
    """Bound at /VIEW/api.sock by a process whose mounts put the host's
    /SHARE at /VIEW (a container's volume): listed by its path there, found
    at the host's through the mounts of its mount namespace."""
    from owl.sandbox import hostsockets
    from support.netns_server import in_own_netns

    share, view = tmp_path / "share", tmp_path / "view"
    share.mkdir()
    view.mkdir()  # empty on the host
    with in_own_netns(str(view / "api.sock"), volume=(str(share), str(view))) as pid:
        assert (share / "api.sock").is_socket() and not (view / "api.sock").exists()
        assert str(share / "api.sock") in hostsockets.host_sockets()
        theirs = hostsockets.mounts(f"/proc/{pid}")
        ours = hostsockets.mounts("/proc/self")
        assert hostsockets.translated(str(view / "api.sock"), theirs, ours) == [
            str(share / "api.sock")
        ]


def test_a_path_is_translated_through_the_mount_that_holds_it():
    from owl.sandbox import hostsockets as H

    theirs = [("0:1", "/", "/"), ("8:1", "/home/me/code", "/work"), ("8:1", "/srv", "/work/x")]
    ours = [("0:2", "/", "/"), ("8:1", "/", "/home"), ("8:1", "/home/me", "/mnt/me")]
    # /home/me/code/a.sock on 8:1, which the host mounts at /home and, from /home/me, at /mnt/me
    assert H.translated("/work/a.sock", theirs, ours) == [
        "/home/home/me/code/a.sock",
        "/mnt/me/code/a.sock",
    ]
    assert H.translated("/work/x/b.sock", theirs, ours) == ["/home/srv/b.sock"]
    assert H.translated("/etc/c.sock", theirs, ours) == []  # its root is not the host's


def test_a_dev_null_over_a_file_gone_since_the_argv_was_made_is_left_out(tmp_path):
    from owl.sandbox import handoff

    (tmp_path / "here.sock").write_text("")
    argv = ["bwrap", "--ro-bind", "/dev/null", str(tmp_path / "gone.sock")]
    argv += ["--ro-bind", "/dev/null", str(tmp_path / "here.sock"), "--tmpfs", "/x"]
    argv += ["--", "sh", "--ro-bind", "/dev/null", str(tmp_path / "gone.sock")]
    assert handoff.present(argv) == [
        "bwrap",
        "--ro-bind",
        "/dev/null",
        str(tmp_path / "here.sock"),
        "--tmpfs",
        "/x",
        "--",
        "sh",
        "--ro-bind",
        "/dev/null",
        str(tmp_path / "gone.sock"),
    ]


@given(st.integers(min_value=keys.MIN_TMP, max_value=1 << 50))
def test_a_size_shown_reads_back_as_the_same_bytes(n):
    shown = keys.size_words(n)
    assert keys.check_table({"tmp_size": shown}, "sandbox") == {"tmp_size": n}
    assert keys.size_words(1 << 30) == "1G" and keys.size_words(1536 << 20) == "1536M"


def test_the_network_is_own_allow_or_none_and_true_false_load_as_before(tmp_path):
    from owl.settings import config

    def net(value: object, **more: object) -> tuple[str, tuple[str, ...]]:
        s = keys.settings_from(keys.check_table({"network": value, **more}, "sandbox"))
        f = P.Facts(
            home="/h",
            user_home="/h",
            worktree="/w",
            git_common=None,
            git_admin=None,
            project="/p",
            owl_home=(),
            runtime_dir=None,
        )
        pol = P.compute(s, AGENTS["claude"], f)
        # the same with a home of its own (Linux's view)
        mine = P.compute(s, AGENTS["claude"], own())
        assert (mine.network, mine.allow_hosts) == (pol.network, pol.allow_hosts)
        return pol.network, pol.allow_hosts

    assert net(True) == net("own") == ("own", ())
    assert net(False) == net("none") == ("none", ())
    mode, hosts = net("allow")
    assert mode == "allow" and "pypi.org" in hosts and "registry.npmjs.org" in hosts
    assert net("allow", allow_hosts=["pypi.org", ".example.com"]) == (
        "allow",
        ("pypi.org", ".example.com"),
    )
    with pytest.raises(config.ConfigError, match=r'^c\.toml: sandbox\.network = "open": must be'):
        config.from_dict({"sandbox": {"network": "open"}}, "c.toml")
    with pytest.raises(
        config.ConfigError, match=r'^c\.toml: sandbox\.allow_hosts = "https://pypi\.org": must be'
    ):
        config.from_dict(
            {"sandbox": {"network": "allow", "allow_hosts": ["https://pypi.org"]}}, "c.toml"
        )
    # a project narrows an own network to the allow-list, or cuts it; never widens
    assert P.Settings().narrowed({"network": "allow"}).allow is True
    assert P.Settings().narrowed({"network": "none"}).network is False
    assert P.Settings(network=False).narrowed({"network": "allow"}).network is False


def test_the_allow_list_holds_the_agents_own_hosts_and_its_service_urls():
    from owl.sandbox import allowlist

    env = {
        "ANTHROPIC_BASE_URL": "https://gateway.example.com/v1",
        "OPENAI_API_BASE": "http://127.0.0.1:4000",  # its own port, forwarded: not a host
        "DATABASE_URL": "https://db.example.com/x",  # no agent's service
    }
    got = allowlist.hosts("claude", env, ["pypi.org"])
    assert got == (
        "api.anthropic.com",
        "console.anthropic.com",
        "claude.ai",
        "gateway.example.com",
        "pypi.org",
    )
