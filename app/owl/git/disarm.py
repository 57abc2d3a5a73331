"""What Owl's git is told, so that it starts no program the repository names.

Apart from running git (``safegit``, ``gitprocess``) because it is pure words:
the settings that turn off every program git could start (``FIXED``), the
blanks for the drivers a config defines (``overrides``), the environment
that carries them (``environment``), the options a diffing command takes
(``argv``), and which commands touch refs and objects only
(``objects_only``).

How the drivers are found, and why so. A driver runs when an attribute
(`filter=x`, `merge=x`) names it and the config gives `filter.x.smudge`
(or `.clean`, `.process`, `merge.x.driver`) a command. Attributes come from
files git 2.39 cannot be told to skip (`info/attributes`, every
`.gitattributes` of the tree being checked out or merged; `--attr-source`
is 2.40+, and leaves `info/attributes` read all the same), so the names an
attribute may use cannot be controlled. The commands can: settings given
in the environment (GIT_CONFIG_COUNT) are read after every file, so a
blank there wins over any file. So every call first lists the config names
git sees (`git config --list --includes`, ``safegit.configured``) *in the
same directory the call runs in*, which is what makes conditional includes
(`includeIf` gitdir:, onbranch:, hasconfig:remote.*.url:), `include.path`
and a worktree's `config.worktree` come out as git itself will read them,
and blanks every driver listed. A driver defined nowhere git reads is no
driver, whatever the attributes say.

The one place where git reads config in another directory than the one it
was started in is a git that starts another git elsewhere: `worktree add`
checks the new tree out from inside it (where `includeIf
"gitdir:**/worktrees/**"` applies and the project's checkout sees nothing),
and `worktree remove` without `--force` runs a `git status` inside the tree.
So `owl.git.workspace` adds worktrees with `--no-checkout` and then checks
out with a call made in the new tree, and removes them with `--force` after
its own look for uncommitted changes there.

Rejected: `GIT_CONFIG_GLOBAL` pointing to a file Owl builds. It leaves the
repository's own config (where an agent plants) read as before, and takes
away the person's name for a merge commit; the person's global file is
listed like the rest, so its drivers are blanked too. Rejected: reading the
config files in Python, since only git knows how git evaluates its
includes. Rejected: blanking every name found in an attributes file: the
`.gitattributes` of every tree git may read would have to be found first,
and a name in an attribute is harmless unless the config gives it a
command, which the listing finds. Rejected for now: closing the race below
by showing git a copy of the config in a mount namespace (Linux only, and
the user namespaces it needs are often turned off). What is left: an agent
that is live in another Run of the same project could add a driver in the
moment between the listing and git's own read of its config. What it
starts then is still ended with git, by the sweeper (``gitprocess``).
"""

from __future__ import annotations

import os
from pathlib import Path

# Settings that would start a program, each set to a value that does not.
FIXED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("core.sshCommand", "false"),
    ("protocol.allow", "never"),
    ("log.showSignature", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("merge.stat", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
    # Attributes name the drivers; the person's (or an agent's) global file is one
    # source fewer to read. The repository's own are read, and their names blanked.
    ("core.attributesFile", os.devnull),
    ("diff.ignoreSubmodules", "all"),
)

# <section>.<name>.<key> settings whose value is a command line.
_DRIVER_KEYS = {
    "filter": ("clean", "smudge", "process"),
    "merge": ("driver",),
    "credential": ("helper",),
}
_DIFFING = {"diff", "log", "show"}
# A submodule is another repository with its own config: never look inside one.
_NO_SUBMODULES = {"diff", "status"}

_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_PROTOCOL_FROM_USER": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "LC_ALL": "C",
}


def overrides(keys: list[str]) -> list[tuple[str, str]]:
    """The fixed settings plus a blank for every command-line driver among `keys`.

    Pure: `keys` are config names as `git config --list --name-only` gives
    them (section and key in lower case, the driver's name as written)."""
    out = list(FIXED)
    for key in keys:
        section, _, rest = key.partition(".")
        name, _, leaf = rest.rpartition(".")
        if not name or section not in _DRIVER_KEYS or leaf not in _DRIVER_KEYS[section]:
            continue
        out.append((key, ""))
        if section == "filter":
            out.append((f"filter.{name}.required", "false"))
    return out


def environment(
    settings: list[tuple[str, str]], extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The daemon's environment without GIT_*, plus `settings` as GIT_CONFIG_* pairs.

    The pairs go through GIT_CONFIG_COUNT/KEY/VALUE rather than `-c`: a
    driver's name may hold `=`, which `-c` would split on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_ENV)
    env.update(extra or {})
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for i, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def argv(cwd: Path | str, args: tuple[str, ...]) -> list[str]:
    """`git --no-pager -C cwd ARGS`, with diff commands told not to run drivers."""
    rest = list(args)
    if rest and rest[0] in _DIFFING:
        rest[1:1] = ["--no-ext-diff", "--no-textconv"]
    if rest and rest[0] in _NO_SUBMODULES:
        rest[1:1] = ["--ignore-submodules=all"]
    return ["git", "--no-pager", "-C", str(cwd), *rest]


# Commands that read or write refs and objects only: no filter or merge driver
# applies to them (the diffs of `log` and `show` are between objects, with
# external diff and textconv off), and whatever else could start a program is
# turned off by FIXED whatever the files say. They need neither the listing
# nor the sweeper, which is what keeps most of Owl's git calls one process.
_OBJECTS_ONLY = frozenset(
    {
        "rev-parse",
        "for-each-ref",
        "update-ref",
        "symbolic-ref",
        "merge-base",
        "rev-list",
        "show-ref",
        "config",
        "log",
        "show",
        "check-attr",
    }
)


def objects_only(args: tuple[str, ...]) -> bool:
    """Whether git ARGS reads or writes refs and objects only (no listing, no sweeper)."""
    if not args:
        return False
    if args[0] == "worktree":
        return len(args) > 1 and args[1] in ("list", "prune")
    if args[0] == "cat-file":  # an object as stored, not through a filter or textconv
        return not any(a.startswith(("--textconv", "--filters", "--path")) for a in args)
    return args[0] in _OBJECTS_ONLY


def drivers(keys: list[str]) -> list[str]:
    """The command-line drivers among config names `keys` (`filter.x.smudge`, …)."""
    return [key for key, _ in overrides(keys)[len(FIXED) :] if not key.endswith(".required")]
