"""The places of a Run's tools on the host: where its programs live, and which caches it gets.

Apart from the wrapping (``contain``) because it is a question about the
person's machine, the same for either sandbox: which folders outside the
system's hold the programs the Run will start (read-only inside: the
command's own install, the files it names, its PATH), and which of the
default caches a Run is given (only those of a tool on its PATH).
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
from collections.abc import Mapping, Sequence

from . import folders


def wanted_cache(cache: str, env: Mapping[str, str]) -> bool:
    """A default cache only where its tool is on the agent's PATH."""
    tools = CACHE_TOOLS.get(cache)
    return tools is None or any(_on_path(t, env.get("PATH", os.defpath)) for t in tools)


def programs(command: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """The folders outside the system's that the Run's programs live in,
    read-only inside: the command's own (its install: the folder above a
    ``bin``, the package a ``node_modules/.bin`` link leads into), the
    folders of the files it names, and the folders of its PATH. A folder
    that holds a home as a whole (``~/.local``, ``/var/tmp/x`` with the
    person's home in it) is narrowed to the file or the ``bin`` itself."""
    homes = {
        os.path.realpath(os.path.expanduser("~")),
        env.get("HOME", ""),
        pwd.getpwuid(os.getuid()).pw_dir,
    }
    out: list[str] = []

    def add(path: str) -> None:
        if path and path not in out and not folders.system(path) and path != "/":
            if not any(folders.under(h, path) for h in homes if h):
                out.append(path)

    first = command[0] if command else ""
    found = shutil.which(first, path=env.get("PATH")) if first and "/" not in first else first
    for i, arg in enumerate([found or "", *command[1:]]):
        if not arg.startswith("/") or not os.path.exists(arg):
            continue
        for path in dict.fromkeys((os.path.abspath(arg), os.path.realpath(arg))):
            folder = os.path.dirname(path)
            if i == 0:
                top = _install(path)
                if top and not any(folders.under(h, top) for h in homes if h):
                    add(top)
                    continue
            if any(folders.under(h, folder) for h in homes if h) or folder in ("/tmp", "/var/tmp"):
                add(path)
            else:
                add(folder)
    for entry in env.get("PATH", "").split(":"):
        if entry.startswith("/") and os.path.isdir(entry):
            add(os.path.normpath(entry))
    return tuple(out)


def _install(path: str) -> str | None:
    """The folder a program was installed into: above ``node_modules``, or
    above its ``bin``."""
    parts = path.split("/")
    if "node_modules" in parts:
        return "/".join(parts[: parts.index("node_modules")]) or None
    folder = os.path.dirname(path)
    if os.path.basename(folder) == "bin":
        return os.path.dirname(folder)
    return None


# A default cache given to a Run only where its tool is on the agent's PATH
# (no ~/go in the home of someone who has never used Go); one the person names
# in `sandbox.caches` is given anyway, as is ~/.cache.
CACHE_TOOLS = {
    "~/.npm": ("npm",),
    "~/.cargo/registry": ("cargo",),
    "~/.cargo/git": ("cargo",),
    "~/.gradle/caches": ("gradle",),
    "~/.m2/repository": ("mvn",),
    "~/go/pkg/mod": ("go",),
    "~/.local/share/pnpm": ("pnpm",),
    "~/.yarn": ("yarn",),
    "~/Library/Caches": ("sw_vers",),  # macOS's own (sw_vers is too): never made elsewhere
}


@functools.lru_cache(maxsize=64)
def _on_path(tool: str, path: str) -> bool:
    """Whether ``tool`` is on ``path`` (asked once per PATH: a scan of every
    folder on it for each missing cache would be most of a Run's wrapping)."""
    return shutil.which(tool, path=path) is not None
