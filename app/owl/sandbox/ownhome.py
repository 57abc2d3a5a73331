"""A Run's own places: its home, its project's caches, its agent's state.

Why a home of its own. A Run that saw the person's home (read-only, minus a
list of secrets, with caches and agent state writable) could leave code in a
cache that the person's own tools later ran, config the person's CLI later
acted on (MCP servers, hooks), a socket the person's git later talked to, or
a link that widened the next Run's binds; and every credential no list named
was in sight. So a Run's home is a folder of Owl's, bound at the person's
``$HOME`` path (``~/…`` in tools keeps working), into which only what its
tools need of the person's is bound read-only (``policy``).

The units, each chosen for what it shares:
- the home is **per Job** (``sandbox/jobs/job-N/home`` in Owl's data folder):
  the Runs of one Job never run at once, so no other Run can leave a link
  in it while Owl lays a Run's binds, and what a Job leaves there (a shell's
  history, a tool's settings) stays with that Job;
- the caches are **per project** (``sandbox/projects/NAME-HASH/caches``):
  that project's Jobs build alike and share them, and no other project's
  Run reads or plants anything in them; the person's own caches are not in
  sight, so a poisoned cache never reaches the person's tools;
- each agent's state is **per agent and per project**
  (``sandbox/projects/NAME-HASH/agents/AGENT``): its conversations carry on
  between Runs (Owl resumes them), no other agent's Run sees them, and the
  person's own CLI never reads them. The person's config files of that agent
  are copied in afresh at each start, and its credentials without the
  refresh token (``agentstate.Credential``).

No link decides a bind: every folder and file here is made, and every place a
bind is laid inside the Run's home is walked, from a descriptor of the folder
it must stay in, one name at a time, with ``O_NOFOLLOW``; a link or a file
where a folder belongs (the Run's own doing) is removed and a folder made.
The folders above these (Owl's data folder, ``sandbox/``) are not in any
Run's view.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from owl import filesafe

from . import gitconfig
from .agentstate import AgentState, Credential
from .folders import expand, under

READ_MAX = 1 << 20
TOKEN_MAX = 16 * 1024


@dataclass(frozen=True)
class Own:
    """What Owl made for one Run: its home's folder and what is bound into it."""

    home: str
    binds: tuple[tuple[str, str, bool], ...]  # (source, place inside, writable)


def slug(path: str) -> str:
    """A folder's name for a place (``~/.cargo/registry`` -> ``registry-1a2b3c4d``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(path.rstrip("/")) or "root")
    return f"{name.lstrip('.')[:40] or 'x'}-{hashlib.sha256(path.encode()).hexdigest()[:8]}"


def project_key(project: str) -> str:
    return slug(os.path.realpath(project))


# ------------------------------------------------- no link followed, anywhere


@contextlib.contextmanager
def opened(base: str, rel: str = "", make: bool = True) -> Iterator[int]:
    """A descriptor of the folder ``base/rel``, each name below ``base`` made
    when missing and, when not a folder (a link, a file), removed and made."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in [p for p in rel.split("/") if p]:
            if part in (".", ".."):
                raise OSError(f"{part!r} in {rel!r}")
            nxt = _child_dir(fd, part, make)
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def _child_dir(fd: int, name: str, make: bool) -> int:
    try:
        st = os.lstat(name, dir_fd=fd)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        if not make:
            raise OSError(f"{name} is not a folder")
        _remove(fd, name, st)
        st = None
    if st is None:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=fd)
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)


def _remove(fd: int, name: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            for entry in os.listdir(sub):
                _remove(sub, entry, os.lstat(entry, dir_fd=sub))
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=fd)
    else:
        os.unlink(name, dir_fd=fd)


def remove_at(d: int, name: str) -> None:
    """``name`` in the folder open as ``d`` gone, whatever it is (nothing followed)."""
    _remove(d, name, os.lstat(name, dir_fd=d))


def make_dir(base: str, rel: str) -> str:
    """``base/rel`` as a real folder, made or mended (see ``opened``)."""
    with opened(base, rel):
        pass
    return os.path.join(base, rel) if rel else base


def make_file(base: str, rel: str, empty: bytes = b"") -> str:
    """``base/rel`` as a regular file (made holding ``empty`` when missing; a
    link or folder in its place removed first)."""
    folder, name = os.path.split(rel)
    with opened(base, folder) as d:
        try:
            st = os.lstat(name, dir_fd=d)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            _remove(d, name, st)
            st = None
        if st is None:
            _write_at(d, name, empty)
    return os.path.join(base, rel)


def write_file(base: str, rel: str, data: bytes) -> None:
    """``base/rel`` written anew (a file renamed over whatever is there)."""
    folder, name = os.path.split(rel)
    with opened(base, folder) as d:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            st = os.lstat(name, dir_fd=d)
            if stat.S_ISDIR(st.st_mode):
                _remove(d, name, st)
        _write_at(d, name, data)


def remove(base: str, rel: str) -> None:
    """``base/rel`` gone, whatever it is (its folders are not followed)."""
    folder, name = os.path.split(rel)
    try:
        with opened(base, folder, make=False) as d:
            _remove(d, name, os.lstat(name, dir_fd=d))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as e:
        if "is not a folder" not in str(e):
            raise


def _write_at(d: int, name: str, data: bytes) -> None:
    tmp = f".{name}.owl-{os.getpid()}-{threading.get_ident()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=d)
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=d
    )
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.rename(tmp, name, src_dir_fd=d, dst_dir_fd=d)


def read_person(path: str) -> bytes | None:
    """A file of the person's (a link of theirs followed: no Run writes their
    home), when it is a regular file and not too large."""
    return filesafe.read_bounded(path, READ_MAX)


# ------------------------------------------------------------ the Run's places


def make(
    keep: str,
    job: str,
    project: str,
    home: str,
    env: Mapping[str, str],
    caches: Sequence[str],
    agent: str,
    state: AgentState,
) -> Own:
    """Make (or mend) the Run's home, its project's caches and its agent's
    state under ``keep`` (a folder of Owl's no Run sees), the person's config
    and credentials copied in; what is to be bound where."""
    os.makedirs(keep, mode=0o700, exist_ok=True)
    job_dir = make_dir(keep, f"jobs/{slug(job)}")
    own_home = make_dir(job_dir, "home")
    proj = make_dir(keep, f"projects/{project_key(project)}")
    binds: list[tuple[str, str, bool]] = []
    for place in _places(caches, home, env):
        binds.append((make_dir(proj, f"caches/{slug(place)}"), place, True))
    agent_dir = make_dir(proj, f"agents/{slug(agent)}")
    folders = set(_places(state.folders, home, env))
    for place in _places(state.state, home, env):
        rel = slug(place)
        if place in folders:
            source = make_dir(agent_dir, rel)
        else:
            source = make_file(agent_dir, rel, b"{}\n" if place.endswith(".json") else b"")
        binds.append((source, place, True))
    binds += _seed(state, agent_dir, binds, home, env)
    binds += _gitconfig(job_dir, home)
    return Own(own_home, tuple(binds))


def _places(paths: Sequence[str], home: str, env: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        place = expand(p, home, env)
        if place and place != home and place not in out:
            out.append(place)
    return out


def _seed(
    state: AgentState,
    agent_dir: str,
    binds: list[tuple[str, str, bool]],
    home: str,
    env: Mapping[str, str],
) -> list[tuple[str, str, bool]]:
    """The person's config files and credentials of the agent, copied into its
    state (a file no state folder holds: a copy of its own, bound read-only).
    One the person does not have is removed from the state: a Run cannot
    leave one for the next."""
    more: list[tuple[str, str, bool]] = []
    wanted: list[tuple[str, Credential | None]] = [(f, None) for f in state.fixed]
    wanted += [(c.path, c) for c in state.credentials]
    for given, cred in wanted:
        place = expand(given, home, env)
        if not place:
            continue
        data = read_person(place)
        if data is not None and cred is not None:
            data = without(data, cred.drop)
        holder = next(
            ((src, dst) for src, dst, _ in binds if dst != place and under(place, dst)), None
        )
        if holder is not None:
            src, dst = holder
            rel = os.path.relpath(place, dst)
            if data is None:
                remove(src, rel)
            else:
                write_file(src, rel, data)
        elif data is not None:
            copy = f"seed-{slug(place)}"
            write_file(agent_dir, copy, data)
            more.append((os.path.join(agent_dir, copy), place, False))
    return more


def without(data: bytes, drop: Sequence[tuple[str, ...]]) -> bytes:
    """A JSON credential file with the values at ``drop`` removed (a refresh
    token the Run must not spend); a file that is not JSON is left out whole."""
    try:
        doc = json.loads(data)
    except ValueError:
        return b"{}\n"
    for path in drop:
        _drop(doc, path)
    return (json.dumps(doc, indent=2) + "\n").encode()


def _drop(doc: object, path: tuple[str, ...]) -> None:
    if not isinstance(doc, dict) or not path:
        return
    head, rest = path[0], path[1:]
    for key in list(doc) if head == "*" else [head]:
        if key not in doc:
            continue
        if rest:
            _drop(doc[key], rest)
        else:
            del doc[key]


def _gitconfig(job_dir: str, home: str) -> list[tuple[str, str, bool]]:
    """The person's git config, only its harmless keys (``gitconfig``), as
    ``~/.gitconfig``; their ignore and attributes files as they are."""
    texts = [
        (read_person(os.path.join(home, p)) or b"").decode("utf-8", "replace")
        for p in (".gitconfig", ".config/git/config")
    ]
    write_file(job_dir, "gitconfig", gitconfig.sanitized(texts).encode())
    out = [(os.path.join(job_dir, "gitconfig"), os.path.join(home, ".gitconfig"), False)]
    for name in ("ignore", "attributes"):
        path = os.path.join(home, ".config", "git", name)
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.stat(path).st_mode):
                out.append((path, path, False))
    return out


def mend_places(own: Own, home: str, places: Sequence[tuple[str, bool]]) -> None:
    """Every place a bind is laid at inside the Run's home (``places``: path,
    whether a folder), walked from the home's folder (or from the folder of
    Owl's bound over it) without following a link, made or mended: bwrap
    then finds real folders all the way, never a link the Run left."""
    holders = sorted(
        [(own.home, home), *((s, d) for s, d, _ in own.binds if _is_dir(s))],
        key=lambda sd: -len(sd[1]),
    )
    for place, is_dir in places:
        for src, dst in holders:
            if place != dst and under(place, dst):
                rel = os.path.relpath(place, dst)
                if is_dir:
                    make_dir(src, rel)
                else:
                    make_file(src, rel)
                break


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def forget(keep: str, job: str) -> None:
    """A Job's home, gone with the Job (its caches and state stay the project's)."""
    shutil.rmtree(os.path.join(keep, "jobs", slug(job)), ignore_errors=True)


# ------------------------------------------------------ headless credentials


class TokenProblem(ValueError):
    """A held credential that must not be used; str() names the file and why."""


def held_token(folder: str, agent: str) -> str | None:
    """The headless credential Owl holds for ``agent`` (``folder/AGENT``, the
    person's own file: mode 0600 or stricter, theirs), or None when there is none."""
    path = os.path.join(folder, agent)
    try:
        with filesafe.opened(path, follow=False) as (fd, st):
            if st.st_mode & 0o077 or st.st_uid != os.getuid():
                raise TokenProblem(f"{path}: must be yours and private (chmod 600 {path})")
            text = os.read(fd, TOKEN_MAX).decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return None
    except filesafe.NotRegular:
        raise TokenProblem(f"{path}: not a plain file") from None
    except OSError as e:
        raise TokenProblem(f"{path}: cannot be read: {e.strerror or e}") from None
    if not text or any(c.isspace() for c in text):
        raise TokenProblem(f"{path}: must hold the token alone, on one line")
    return text
