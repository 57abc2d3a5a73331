"""The folders a Run's policy names, and how a path written in the config becomes one.

The home's lists: its secrets (hidden), its caches (writable, made when
missing) and its toolchains (readable with ``read = "project"``); the system's
own folders kept readable with ``read = "project"``, and the X11 sockets'.
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

# Caches a build or an installer writes; writable when they exist (`sandbox.caches`).
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
# With read = "project": toolchains in the home the Run still needs to read.
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
    "~/.gitconfig",
    "~/.config/git",
)
# With read = "project": the system's own top-level folders that stay readable.
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
    "/var",
    "/srv",
    "/nix",
    "/snap",
    "/run",
    "/sys",
)


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
