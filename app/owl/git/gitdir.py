"""Where a project's git folder is, read from the files git itself reads.

Its own module because both the worktrees (`owl.git.workspace`) and the
outside-the-branch snapshot (`owl.git.outside`) need it, and it runs no git.
"""

from __future__ import annotations

from pathlib import Path


def common_dir(project: Path) -> Path:
    """The git folder that a project and all its worktrees share.

    Read from the files git itself reads (`.git`, `gitdir:`, `commondir`),
    so no git runs. Raises OSError if the project is no longer a repository."""
    dotgit = Path(project) / ".git"
    if dotgit.is_dir():
        gitdir = dotgit
    else:
        text = dotgit.read_text(errors="replace").strip()
        if not text.startswith("gitdir:"):
            raise OSError(f"{dotgit} is not a git folder or a gitdir: file")
        gitdir = (Path(project) / text[len("gitdir:") :].strip()).resolve()
    common = gitdir / "commondir"
    if common.is_file():
        gitdir = (gitdir / common.read_text().strip()).resolve()
    if not (gitdir / "HEAD").is_file():
        raise OSError(f"{gitdir} is not a git folder (no HEAD)")
    return gitdir


def store_path(worktree: Path | str) -> Path:
    """The Job's own git store for the worktree at `worktree` (`owl.git.jobstore`):
    beside it, by name alone, so no file a Run writes can move it."""
    w = Path(worktree)
    return w.parent / f"{w.name}.git"
