"""A Run's own places (`owl.sandbox.ownhome`), made on a real filesystem: no link
a Run leaves is followed, the person's credentials are copied without their
refresh token, their git config keeps only harmless keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from owl.sandbox import bwrap, gitconfig, ownhome, policy
from owl.sandbox.agentstate import AGENTS


def test_a_link_where_a_folder_belongs_is_removed_never_followed(tmp_path):
    base = tmp_path / "own"
    base.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (base / "a").symlink_to(outside)
    (base / "f").write_text("a file where a folder belongs")
    made = ownhome.make_dir(str(base), "a/b/c")
    assert made == f"{base}/a/b/c" and (base / "a").is_dir() and not (base / "a").is_symlink()
    assert list(outside.iterdir()) == []
    ownhome.make_dir(str(base), "f/g")
    assert (base / "f" / "g").is_dir()
    (base / "s").symlink_to(outside / "victim")
    ownhome.make_file(str(base), "s", b"{}")
    assert (base / "s").read_bytes() == b"{}" and not (outside / "victim").exists()
    ownhome.write_file(str(base), "a/b/file", b"x")
    (base / "a" / "b" / "link").symlink_to(outside / "v2")
    ownhome.write_file(str(base), "a/b/link", b"y")
    assert not (outside / "v2").exists() and (base / "a" / "b" / "link").read_bytes() == b"y"
    with pytest.raises(OSError):
        ownhome.make_dir(str(base), "a/../../escape")


def test_the_places_of_binds_in_the_home_are_mended_before_bwrap(tmp_path):
    """A Run left links where the next Run's binds go (its home is per Job,
    another agent's state, a cache of the project): each becomes a folder."""
    keep, home, project = tmp_path / "keep", tmp_path / "home", tmp_path / "home" / "code" / "p"
    project.mkdir(parents=True)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    own = ownhome.make(
        str(keep),
        "job-1",
        str(project),
        str(home),
        env,
        ["~/.cache"],
        "opencode",
        AGENTS["opencode"],
    )
    # the Run's doing, between two Runs: links at the places binds go
    (Path(own.home) / "code").symlink_to("/")
    cache = next(s for s, d, _ in own.binds if d == f"{home}/.cache")
    (Path(cache) / "opencode").symlink_to("..")
    facts = policy.Facts(
        home=str(home),
        user_home=str(home),
        worktree=str(tmp_path / "wt"),
        git_common=None,
        git_admin=None,
        project=str(project),
        owl_home=(str(keep),),
        runtime_dir=None,
        env=env,
        own_home=own.home,
        own_binds=own.binds,
    )
    pol = policy.compute(policy.Settings(), AGENTS["opencode"], facts)
    places = bwrap.places_in(pol, str(home))
    assert (str(project), True) in places
    ownhome.mend_places(own, str(home), places)
    assert (Path(own.home) / "code" / "p").is_dir() and not (Path(own.home) / "code").is_symlink()
    assert (Path(cache) / "opencode").is_dir() and not (Path(cache) / "opencode").is_symlink()
    argv = bwrap.argv(pol, ["true"])
    assert argv[argv.index(own.home) - 1 : argv.index(own.home) + 2] == [
        "--bind",
        own.home,
        str(home),
    ]


def test_credentials_are_copied_without_the_refresh_token_and_config_afresh(tmp_path):
    keep, home = tmp_path / "keep", tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    creds = {"claudeAiOauth": {"accessToken": "A", "refreshToken": "R", "expiresAt": 9}}
    (home / ".claude" / ".credentials.json").write_text(json.dumps(creds))
    (home / ".claude" / "settings.json").write_text('{"env": {"X": "1"}}')
    env = {"HOME": str(home)}
    own = ownhome.make(
        str(keep), "job-1", str(home / "p"), str(home), env, [], "claude", AGENTS["claude"]
    )
    state = Path(next(s for s, d, _ in own.binds if d == f"{home}/.claude"))
    copied = json.loads((state / ".credentials.json").read_text())
    assert copied == {"claudeAiOauth": {"accessToken": "A", "expiresAt": 9}}
    assert (state / "settings.json").read_text() == '{"env": {"X": "1"}}'
    # what the Run changes there lasts to its end; one the person has not is removed
    (state / "settings.json").write_text('{"hooks": {}}')
    (home / ".claude" / "settings.json").unlink()
    ownhome.make(
        str(keep), "job-1", str(home / "p"), str(home), env, [], "claude", AGENTS["claude"]
    )
    assert not (state / "settings.json").exists()
    # ~/.claude.json is Claude's own, per project, never the person's
    dest = {d: s for s, d, _ in own.binds}
    assert dest[f"{home}/.claude.json"].startswith(str(keep / "projects"))
    assert json.loads(Path(dest[f"{home}/.claude.json"]).read_text()) == {}
    for name in ("codex", "gemini", "opencode", "copilot"):
        other = ownhome.make(
            str(keep), "job-1", str(home / "p"), str(home), env, [], name, AGENTS[name]
        )
        assert not [d for _, d, _ in other.binds if ".claude" in d], name
    assert ownhome.without(b"not json", [("a",)]) == b"{}\n"
    assert json.loads(
        ownhome.without(b'{"p": {"refresh": 1, "access": 2}}', [("*", "refresh")])
    ) == {"p": {"access": 2}}


def test_the_git_config_keeps_only_harmless_keys():
    text = (
        '[user]\n\tname = "Ada P."\n\temail = ada@example.invalid ; mail\n\tsigningkey = ~/.ssh/k\n'
        "[credential]\n\thelper = store\n"
        '[credential "https://x"]\n\thelper = cache\n'
        "[core]\n\tsshCommand = ssh -i key\n\tautocrlf = input\n\tfsmonitor = ./x.sh\n"
        "[include]\n\tpath = ~/.secret\n"
        '[includeIf "gitdir:~/w/"]\n\tpath = ~/.w\n'
        '[url "https://tok@github.com/"]\n\tinsteadOf = https://github.com/\n'
        "[http]\n\textraHeader = Authorization: Bearer x\n"
        '[color "diff"]\n\tmeta = yellow\n'
        "[init]\n\tdefaultBranch = trunk\n"
        "[alias]\n\tx = !sh -c evil\n"
    )
    kept = dict(gitconfig.kept([text]))
    assert kept == {
        "user.name": "Ada P.",
        "user.email": "ada@example.invalid",
        "core.autocrlf": "input",
        "color.diff.meta": "yellow",
        "init.defaultbranch": "trunk",
    }
    out = gitconfig.sanitized([text, "[user]\n\tname = Later\n"])
    assert dict(gitconfig.kept([out]))["user.name"] == "Later"
    assert "helper" not in out and "ssh" not in out and "path" not in out


def test_a_held_credential_must_be_private_and_alone(tmp_path):
    assert ownhome.held_token(str(tmp_path), "claude") is None
    path = tmp_path / "claude"
    path.write_text("sk-ant-oat01-abc\n")
    path.chmod(0o644)
    with pytest.raises(ownhome.TokenProblem, match=f"^{path}: must be yours and private"):
        ownhome.held_token(str(tmp_path), "claude")
    path.chmod(0o600)
    assert ownhome.held_token(str(tmp_path), "claude") == "sk-ant-oat01-abc"
    path.write_text("two words\n")
    with pytest.raises(ownhome.TokenProblem, match="alone, on one line"):
        ownhome.held_token(str(tmp_path), "claude")
    (tmp_path / "codex").symlink_to(path)
    with pytest.raises(ownhome.TokenProblem, match="cannot be read"):
        ownhome.held_token(str(tmp_path), "codex")


def test_the_programs_folders_are_read_never_a_folder_holding_the_home(tmp_path):
    from owl.sandbox import toolplaces

    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    pkg = tmp_path / "opt" / "agent"
    (pkg / "lib" / "node_modules" / "x" / "bin").mkdir(parents=True)
    real = pkg / "lib" / "node_modules" / "x" / "bin" / "cli.js"
    real.write_text("")
    (pkg / "bin").mkdir()
    (pkg / "bin" / "agent").symlink_to(real)
    script = tmp_path / "attack.sh"
    script.write_text("")
    (home / "bin" / "key.sh").write_text("")
    env = {"HOME": str(home), "PATH": f"{home / 'bin'}:{tmp_path}:/usr/bin"}
    got = toolplaces.programs([str(pkg / "bin" / "agent"), str(script)], env)
    # the install (the folder above bin, above node_modules), the script alone
    # (its folder holds the home), the PATH's own folder of the home's
    assert set(got) == {str(pkg), str(pkg / "lib"), str(script), str(home / "bin")}
