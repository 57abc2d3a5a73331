"""Where Owl keeps its files.

`OWL_HOME=DIR` puts everything under DIR; without it the platform's own
locations (platformdirs) are used. Folders are created private to the user
(0700): prompts, logs and the socket are nobody else's business.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from owl.settings import daemonlock, socketpath


class Paths(NamedTuple):
    """Every place Owl reads or writes.

    A NamedTuple rather than a dataclass: every `owl` call builds one, and
    importing dataclasses (it pulls in inspect and ast) cost more than the
    rest of the CLI's own imports."""

    config: Path
    db: Path
    socket: Path
    logs: Path
    worktrees: Path
    runtime: Path

    @property
    def pidfile(self) -> Path:
        return self.runtime / "owl.pid"

    @property
    def lock(self) -> Path:
        """The one-daemon lock, beside the database (`owl.settings.daemonlock`):
        where the data is, not where the socket is, which moves with the
        environment."""
        return self.db.parent / daemonlock.LOCK_NAME

    @property
    def reviews(self) -> Path:
        """Review pages (`owl jobs review`), beside the database in the data folder."""
        return self.db.parent / "reviews"

    def ensure(self) -> None:
        """Create every folder Owl writes to, mode 0700."""
        for folder in {
            self.config.parent,
            self.db.parent,
            self.logs,
            self.worktrees,
            self.runtime,
            self.socket.parent,
        }:
            make_private_dir(folder)
        fallback = self.runtime.parent  # platformdirs' TMPDIR/runtime-UID, without XDG_RUNTIME_DIR
        if fallback.name == f"runtime-{os.getuid()}" and fallback.stat().st_uid == os.getuid():
            make_private_dir(fallback)  # an earlier Owl may have made it 0755


def make_private_dir(folder: Path) -> None:
    """`folder` and every folder Owl makes on the way to it, mode 0700 (mkdir's
    own `parents` would make those with the umask's mode: platformdirs'
    `/tmp/runtime-UID` fallback came out 0755, which platformdirs then
    complains of)."""
    missing = []
    for parent in (folder, *folder.parents):
        if parent.exists():
            break
        missing.append(parent)
    for new in reversed(missing):
        try:
            new.mkdir(mode=0o700)
        except FileExistsError:
            pass
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        if folder.stat().st_mode & 0o077:
            folder.chmod(0o700)
    except PermissionError:
        pass


def write_atomic(path: Path, data: bytes, *, mode: int = 0o600, sync: bool = False) -> None:
    """Write `data` to `path` so that a reader (or a crash) sees the old file or
    the new one, never half of one: a temp file in the same folder, renamed over
    it. `sync` flushes it to disk first, for a file that must outlive a power cut."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def socket_in(runtime: Path) -> Path:
    """The socket's path under `runtime` (see `socketpath.socket_in`)."""
    return Path(socketpath.socket_in(str(runtime)))


def _runtime_dir(dirs: Any) -> str:
    """platformdirs' runtime folder, without the warning it prints where
    XDG_RUNTIME_DIR is unset (ssh, su, a headless box): its fallback is what
    Owl wants there, and a person's terminal is no place for a Python warning.
    Whatever that place, the one-daemon lock is beside the data (`Paths.lock`)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(dirs.user_runtime_dir)


def get_paths() -> Paths:
    home = os.environ.get("OWL_HOME")
    if home:
        root = Path(socketpath.home_root(home))
        runtime = Path(socketpath.runtime_in(str(root)))
        return Paths(
            config=root / "config.toml",
            db=root / "owl.db",
            socket=socket_in(runtime),
            logs=root / "logs",
            worktrees=root / "worktrees",
            runtime=runtime,
        )
    import platformdirs

    dirs = platformdirs.PlatformDirs("owl", appauthor=False)
    data = Path(dirs.user_data_dir)
    runtime = Path(_runtime_dir(dirs))
    return Paths(
        config=Path(dirs.user_config_dir) / "config.toml",
        db=data / "owl.db",
        socket=socket_in(runtime),
        logs=Path(dirs.user_log_dir),
        worktrees=worktrees_for(data, Path.home()),
        runtime=runtime,
    )


# Where the Jobs' worktrees go when the data folder's path has a space.
SPACELESS = Path(".local") / "share" / "owl" / "worktrees"


def worktrees_for(data: Path, home: Path) -> Path:
    """The Jobs' worktrees: in the data folder, unless its path has a space
    (macOS's ``~/Library/Application Support``), which automake, Bazel and
    many Makefiles cannot build in; then ``~/.local/share/owl/worktrees``, where
    Linux keeps them too (not ``~/Library/Caches``: macOS may purge that). A Job
    keeps the worktree its record names, so those made before stay where they
    are (in the data folder, still Owl's and still hidden from every Run)."""
    if " " not in str(data / "worktrees") or " " in str(home):
        return data / "worktrees"
    return home / SPACELESS
