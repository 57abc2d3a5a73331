"""A Run lives in a home of its own: nothing it writes there is read or run by
the person's own tools, and nothing of the person's home is in sight but their
toolchains and what the config names.

Each way out measured against the view that was the person's home minus a
list of secrets, with parts of it writable both ways:

- **hidden lost to writable**: ``sandbox.write = ["~"]`` laid the home
  writable over the hidden secrets (the key, ``~/.netrc``, Owl's own config):
  such a config is now refused, by ``owl config check`` and by the daemon, in
  one line naming the key and the path; a ``hide`` inside a ``write`` folder
  stays hidden;
- **code planted in a cache, config planted in an agent's state**: a Run
  wrote Copilot's unpacked JavaScript, ``~/.npm/_npx``, cargo's registry
  sources, ``~/.claude.json``'s ``mcpServers``, which the person's own tools
  later ran: those places are Owl's now (per project, per agent), and the
  person's stay as they were;
- **the Run as the person's socket server**: it bound git's credential-cache
  socket in the home, which the person's ``git`` then talked to;
- **a link left in a state folder widened the next Run**: ``~/.cache/copilot``
  made a link to ``..`` bound the next Copilot Run to the whole home;
- **every credential file in sight**: the agents' tokens and the files no
  list named (``~/.pgpass``, cargo's, maven's, rclone's, ...).
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
from pathlib import Path

from escapes.harness import (
    BASHRC,
    KEY,
    base,
    daemon,
    done,
    landed,
    owner,
    person,
    project,
    refused,
    who,
)
from support.need import programs

__all__ = ["base", "who"]

# A credential file of every kind the attack read, each holding its secret.
CREDENTIALS = {
    ".claude/.credentials.json": '{"claudeAiOauth": {"accessToken": "SECRET-1"}}',
    ".codex/auth.json": '{"tokens": {"access_token": "SECRET-2"}}',
    ".local/share/opencode/auth.json": '{"openai": {"type": "api", "key": "SECRET-3"}}',
    ".copilot/config.json": '{"copilot_tokens": {"u": "SECRET-4"}}',
    ".config/github-copilot/hosts.json": '{"github.com": {"oauth_token": "SECRET-5"}}',
    ".config/gh/hosts.yml": "github.com:\n  oauth_token: SECRET-6\n",
    ".pgpass": "db:5432:*:me:SECRET-7\n",
    ".my.cnf": "[client]\npassword=SECRET-8\n",
    ".cargo/credentials.toml": '[registry]\ntoken = "SECRET-9"\n',
    ".m2/settings.xml": "<settings><password>SECRET-10</password></settings>\n",
    ".gradle/gradle.properties": "signing.password=SECRET-11\n",
    ".gem/credentials": ":rubygems_api_key: SECRET-12\n",
    ".config/rclone/rclone.conf": "[s3]\nsecret_access_key = SECRET-13\n",
    ".terraform.d/credentials.tfrc.json": '{"credentials": {"app": {"token": "SECRET-14"}}}',
    ".config/1Password/settings/settings.json": '{"k": "SECRET-15"}',
    ".local/share/fish/fish_history": "- cmd: export TOKEN=SECRET-16\n",
    ".thunderbird/p.default/logins.json": '{"logins": [{"encryptedPassword": "SECRET-17"}]}',
    ".docker/config.json": '{"auths": {"x": {"auth": "SECRET-18"}}}',
    ".npmrc": "//registry.npmjs.org/:_authToken=SECRET-19\n",
}

READS = r"""
for f in $CREDENTIALS; do
  try "read ~/$f" "grep -q SECRET ~/$f"
done
try "find a secret anywhere in the home" "grep -rqs SECRET ~/"
try "read the key" "grep -q PRIVATE ~/.ssh/id_ed25519"
try "read Owl's config" "cat $OWL_CONFIG"
try "see Owl's database" "test -e $OWL_DIR/owl.db"
try "see Owl's logs" "ls $OWL_DIR/logs | grep -q ."
try "read another project" "cat $OTHER/secret.txt"
"""


def test_no_credential_of_the_persons_is_in_sight_named_or_not(base, who):
    programs("bwrap")
    home = person(base)
    for rel, text in CREDENTIALS.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    other = base / "other-project"
    other.mkdir()
    (other / "secret.txt").write_text("SECRET of another project\n")
    proj = project(base)
    d = daemon(
        base,
        home,
        READS,
        known={
            "CREDENTIALS": " ".join(CREDENTIALS),
            "OWL_CONFIG": base / "owl" / "config.toml",
            "OWL_DIR": base / "owl",
            "OTHER": other,
        },
        who=who,
    )
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, job)
    refused(
        log,
        *(f"read ~/{rel}" for rel in CREDENTIALS),
        "find a secret anywhere in the home",
        "read the key",
        "read Owl's config",
        "see Owl's database",
        "see Owl's logs",
        "read another project",
    )
    landed(proj, j["branch"])


# What the Run writes in its home (each works: the home is its own); the
# test then looks at the person's.
PLANT = r"""
mkdir -p ~/.cache/copilot/pkg/x && echo PWNED > ~/.cache/copilot/pkg/x/index.js
mkdir -p ~/.npm/_npx/x && echo PWNED > ~/.npm/_npx/x/cli.js
mkdir -p ~/.cargo/registry/src/x && echo PWNED > ~/.cargo/registry/src/x/build.rs
echo '{"mcpServers": {"x": {"command": "/bin/sh"}}}' > ~/.claude.json
mkdir -p ~/.claude && echo '{"hooks": {}}' > ~/.claude/settings.json
echo PWNED >> ~/.bashrc
mkdir -p ~/.cache/git/credential
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' ~/.cache/git/credential/socket
rm -rf ~/.cache/copilot && ln -s .. ~/.cache/copilot
echo planted
"""
PLANTED = (
    ".cache/copilot/pkg/x/index.js",
    ".npm/_npx/x/cli.js",
    ".cargo/registry/src/x/build.rs",
    ".cache/git/credential/socket",
)
FOLLOW = r"""
try "read the key through Copilot's state" "grep -q PRIVATE ~/.cache/copilot/.ssh/id_ed25519"
echo PWNED >> ~/.cache/copilot/.bashrc
"""


def test_nothing_a_run_writes_in_its_home_reaches_the_persons_tools(base, who):
    """Caches, agent state, the rc file, a socket: the Run writes them in a
    home of its own; the person's are untouched, and the next Run (another
    Job, the same project and agent) is not widened by a link the first left."""
    programs("bwrap")
    home = person(base)
    (home / ".claude").mkdir()
    (home / ".claude.json").write_text('{"numStartups": 3}\n')
    (home / ".cache" / "copilot").mkdir(parents=True)
    proj = project(base)
    d = daemon(
        base,
        home,
        PLANT + FOLLOW,
        known={"HOME_REAL": home},
        who=who,
    )
    with d:
        first = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, first)
        refused(log, "read the key through Copilot's state")
        assert "planted" in log, log
        landed(proj, j["branch"])
        second = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, second)
        refused(log, "read the key through Copilot's state")
    for rel in PLANTED:
        assert not (home / rel).exists(), rel
    assert (home / ".claude.json").read_text() == '{"numStartups": 3}\n'
    assert not (home / ".claude" / "settings.json").exists()
    assert (home / ".bashrc").read_text() == BASHRC
    assert (home / ".ssh" / "id_ed25519").read_text() == KEY
    assert stat.S_ISDIR(os.lstat(home / ".cache" / "copilot").st_mode)
    assert not any(p.stat().st_uid != owner(who) for p in home.iterdir())


def test_a_write_that_holds_a_secret_or_owls_folder_is_refused_in_one_line(base, who):
    """``write = ["~"]`` opened the key, ~/.netrc and Owl's config (a Run set
    ``mode = "off"`` for the next): the config is refused, by ``owl config
    check`` and by the daemon, naming the key and the path. ``hide`` inside a
    ``write`` folder stays hidden."""
    programs("bwrap")
    home = person(base)
    (home / "work" / "s").mkdir(parents=True)
    (home / "work" / "s" / "token").write_text("SECRET token\n")
    proj = project(base)
    for bad, named in (
        (["~"], f"{home}/.ssh"),
        (["~/.local"], f"{home}/.local/share/keyrings"),
        ([str(base)], str(base / "owl")),
    ):
        d = daemon(base, home, "", sandbox={"write": bad}, who=who)
        said = d.owl("config", "check")
        assert said.returncode == 1, said
        [line] = said.stderr.strip().splitlines()
        assert "sandbox.write = " in line and line.endswith("which a Run never sees"), line
        assert named in line, line
        started = d.owl("daemon", timeout=60)
        assert started.returncode != 0
        assert "sandbox.write = " in started.stderr + d.log_text()
    d = daemon(
        base,
        home,
        'try "read a hidden file inside a writable folder" "cat ~/work/s/token"\n'
        'try "read the key" "cat ~/.ssh/id_ed25519"\n',
        sandbox={"write": [str(home / "work")], "hide": [str(home / "work" / "s")]},
        who=who,
    )
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, job)
    refused(log, "read a hidden file inside a writable folder", "read the key")
    landed(proj, j["branch"])


def test_the_persons_git_config_reaches_a_run_without_what_reaches_a_secret(base, who):
    """The Run's git has the person's name and e-mail, never their credential
    helper, an included file, ``core.sshCommand`` or signing key."""
    programs("bwrap")
    home = person(base)
    (home / "secret.inc").write_text("[user]\n\tpassword = SECRET-inc\n")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Ada Person\n\temail = ada@example.invalid\n"
        "\tsigningkey = ~/.ssh/id_ed25519\n"
        "[credential]\n\thelper = store --file ~/.git-credentials\n"
        "[core]\n\tsshCommand = ssh -i ~/.ssh/id_ed25519\n\tautocrlf = input\n"
        f"[include]\n\tpath = {home}/secret.inc\n"
    )
    script = (
        'git config --global --list > "$HOME_OUT"\n'
        'try "see the credential helper" "git config --global credential.helper"\n'
        'try "see the included file" "grep -rq SECRET-inc ~/"\n'
        'try "see core.sshCommand" "git config --global core.sshCommand"\n'
        'try "see the signing key" "git config --global user.signingkey"\n'
    )
    proj = project(base)
    d = daemon(base, home, script, known={"HOME_OUT": "gitconfig.txt"}, who=who)
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, job)
        shown = Path(j["worktree"]) / "gitconfig.txt"
        said = shown.read_text()
    refused(
        log,
        "see the credential helper",
        "see the included file",
        "see core.sshCommand",
        "see the signing key",
    )
    assert "user.name=Ada Person" in said and "user.email=ada@example.invalid" in said, said
    assert "core.autocrlf=input" in said, said


def test_a_socket_the_run_binds_in_its_home_never_answers_the_person(base, who):
    """The Run binds git's credential-cache socket in its home; the person's
    own `git credential-cache` looks in the person's home and finds none.
    (Unix sockets of its own opened, `sandbox.sockets = ["own"]`: else it
    could make none at all.)"""
    programs("bwrap")
    home = person(base)
    proj = project(base)
    script = (
        "mkdir -p ~/.cache/git/credential\n"
        "python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])'"
        " ~/.cache/git/credential/socket && echo bound\n"
    )
    own = {"sockets": ["own"]}
    d = daemon(base, home, script, known={"HOME_REAL": home}, sandbox=own, who=who)
    with d:
        job = d.add("do the work", proj)
        d.ok("start")
        j, log = done(d, job)
    refused(log)
    assert "bound" in log, log
    path = home / ".cache" / "git" / "credential" / "socket"
    assert not path.exists()
    with socket.socket(socket.AF_UNIX) as s:
        assert s.connect_ex(str(path)) != 0
    # the person's git asks the cache and gets nothing back
    asked = subprocess.run(
        ["git", "credential-cache", "get"],
        input="protocol=https\nhost=github.com\n\n",
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        timeout=30,
    )
    assert asked.stdout == "", asked
