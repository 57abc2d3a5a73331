"""The sandbox's policy, pure: what is hidden, writable, dropped, narrowed."""

import pytest
from owl.sandbox import keys
from owl.sandbox import policy as P


def facts(**kw):
    base = {
        "home": "/home/me",
        "user_home": "/home/me",
        "worktree": "/home/me/.local/share/owl/worktrees/job-1",
        "git_common": "/home/me/code/api/.git",
        "git_admin": "/home/me/code/api/.git/worktrees/job-1",
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


def test_secrets_owl_and_the_desktop_are_hidden_and_the_worktree_and_commit_parts_writable():
    pol = P.compute(P.Settings(), P.AGENTS["claude"], facts())
    for path in (
        "/home/me/.ssh",
        "/home/me/.gnupg",
        "/home/me/.aws",
        "/home/me/.config/gh",
        "/home/me/.netrc",
        "/home/me/.local/share/keyrings",
        "/home/me/.mozilla",
        "/home/me/.local/share/owl",
        "/home/me/.config/owl",
        "/run/user/1000",
        "/tmp/.X11-unix",
    ):
        assert path in pol.hidden
    assert pol.writable[0] == "/home/me/.local/share/owl/worktrees/job-1"
    for path in (
        "/home/me/code/api/.git/objects",
        "/home/me/code/api/.git/refs",
        "/home/me/code/api/.git/worktrees/job-1",
        "/home/me/.claude",
        "/home/me/.claude.json",
        "/home/me/.cache",
    ):
        assert path in pol.writable
    assert set(pol.readonly_over) == {
        "/home/me/code/api/.git/config",
        "/home/me/code/api/.git/hooks",
        "/home/me/code/api/.git/info",
    }
    assert "/home/me/code/api/.git" not in pol.writable


def test_the_environment_loses_display_owl_and_secrets_but_keeps_the_agents_key():
    pol = P.compute(P.Settings(env_keep=("MY_API_KEY",)), P.AGENTS["claude"], facts())
    assert set(pol.env_unset) == {"DISPLAY", "GITHUB_TOKEN", "AWS_PROFILE", "OWL_HOME", "BUS"}
    assert ("TMPDIR", "/tmp") in pol.env_set
    assert pol.host_ports == (4123,) and pol.network == "own"


def test_a_project_may_only_narrow():
    s = P.Settings(mode="off").narrowed(
        {"mode": "required", "read": "project", "network": False, "hide": ["~/notes"]}
    )
    assert (s.mode, s.read, s.network, s.hide) == ("off", "project", False, ("~/notes",))
    assert P.Settings().narrowed({"read": "home", "network": True}) == P.Settings()
    assert P.Settings(network=False).narrowed({"network": True}).network is False


def test_read_project_keeps_other_repositories_out():
    pol = P.compute(P.Settings(read="project"), P.AGENTS["claude"], facts())
    assert pol.read_root == "project" and "/home/me" not in pol.readable
    assert "/home/me/code/api" in pol.readable


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
