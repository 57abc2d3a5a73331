"""The folders a Run's policy names, and how a path written in the config becomes one.

A Run's view is an allow-list (``policy``): the system's own folders
(``SYSTEM_READ``), read-only; a home of its own; of the person's home only
the toolchains (``HOME_TOOLCHAINS``) and what ``sandbox.read`` adds. The
home's secrets (``HOME_SECRETS``) are therefore out of sight whether or not
they are listed: the list is what a configured path may not reveal
(``keys``) and what stays hidden inside a folder a Run may see.
Pure: data, and the expansion of ``~`` and ``$VAR|fallback`` in a path.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

# Under every home the Run may see: hidden (an empty folder, or /dev/null for a file).
HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".netrc",
    ".docker",
    ".kube",
    ".local/share/keyrings",
    ".password-store",
    ".pki",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/Code/User/globalStorage",
    ".git-credentials",
    ".config/git/credentials",
    ".pypirc",
    ".npmrc",
    ".config/hub",
    ".vault-token",
    ".bash_history",
    ".zsh_history",
)
# Credential files no tool of a Run needs: out of sight in a Run's own home
# whether named or not; named so that no `read` or `write` entry may hold one.
HOME_CREDENTIALS = (
    ".pgpass",
    ".my.cnf",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".gem/credentials",
    ".config/rclone",
    ".terraform.d",
    ".config/1Password",
    ".local/share/fish",
    ".thunderbird",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".local/share/opencode/auth.json",
    ".copilot",
    ".config/github-copilot",
)
# macOS's own secret places under a home (absent on Linux, where bwrap skips them).
MACOS_HOME_SECRETS = (
    "Library/Keychains",
    "Library/Cookies",
    "Library/HTTPStorages",
    "Library/Mail",
    "Library/Messages",
    "Library/Safari",
    "Library/Accounts",
    "Library/Calendars",
    "Library/Application Support/AddressBook",
    "Library/Application Support/com.apple.TCC",
    "Library/Containers/com.apple.Safari",
    "Library/Containers/com.apple.mail",
    "Library/Group Containers/group.com.apple.notes",
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Chromium",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
    "Library/Application Support/Microsoft Edge",
    "Library/Application Support/Arc",
    "Library/Application Support/Code/User/globalStorage",
    "Library/Application Support/1Password",
    "Library/Group Containers/2BUA8C4S2C.com.1password",
)
# Outside any home: the X11 sockets (the private /tmp hides them too; named for Seatbelt).
SYSTEM_HIDDEN = ("/tmp/.X11-unix", "/tmp/.ICE-unix")

# Caches a build or an installer writes (`sandbox.caches`): each a folder of
# Owl's per project, bound writable at its place in the Run's own home.
DEFAULT_CACHES = (
    "~/.cache",
    "~/.npm",
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/.gradle/caches",
    "~/.m2/repository",
    "~/go/pkg/mod",
    "~/.local/share/pnpm",
    "~/.yarn",
    "~/Library/Caches",  # macOS's (pip, go-build, Homebrew); Owl's own in it stays hidden
)
# Toolchains in the person's home a Run reads (read-only, where they exist).
HOME_TOOLCHAINS = (
    "~/.local/bin",
    "~/.local/lib",
    "~/.cargo/bin",
    "~/.rustup",
    "~/.nvm",
    "~/.pyenv",
    "~/.volta",
    "~/.deno",
    "~/.bun",
    "~/go/bin",
    "~/.sdkman",
    "~/.local/share/mise",
    "~/.asdf",
)
# The system's own top-level folders a Run reads (/var, /run and /tmp are its own).
SYSTEM_READ = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix",
    "/snap",
    "/sys",
)
# Folders of the system a Run has its own, empty ones of (but for their links).
SYSTEM_OWN = ("/var",)


def expand(path: str, home: str, env: Mapping[str, str] | None = None) -> str:
    """``~`` and ``$VAR|fallback`` in a path, made absolute and normal."""
    if path.startswith("$"):
        var, _, fallback = path[1:].partition("|")
        name, slash, rest = var.partition("/")
        value = (env or {}).get(name)
        if value:
            path = value + (slash + rest if slash else "")
        elif fallback:
            path = fallback
        else:
            return ""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    return posixpath.normpath(path) if path.startswith("/") else ""


def under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies in it (by name: no link followed)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def system(path: str) -> bool:
    """Whether ``path`` lies in one of the system's own folders a Run reads."""
    return any(under(path, top) for top in SYSTEM_READ)


def overlaps(path: str, other: str) -> bool:
    """Whether one of the two holds the other (or they are the same)."""
    return under(path, other) or under(other, path)
