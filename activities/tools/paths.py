"""Paths in a session's workspace: every path a tool takes is resolved inside it."""

from __future__ import annotations

from pathlib import Path

from duragent.activities.tools.contract import ToolInputError

SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv"})
"""Directories that recursive tools (grep, find) never descend into."""


def moved_workspace(workspace: Path) -> str | None:
    """Why tools may not run in `workspace`, or None: a session's workspace is stored as a
    real path, so one that now resolves elsewhere had a symlink put in its path after it
    was checked (by anyone who can write to a folder above it: a tool of another session
    in the same area). Tools would follow it out of what the session was allowed."""
    try:
        real = workspace.resolve(strict=True)
    except (OSError, RuntimeError) as err:
        return f"the workspace {workspace} cannot be resolved ({err})"
    if real != workspace:
        return (
            f"the workspace {workspace} now leads to {real} (a symlink was put in its "
            "path): tools do not run there"
        )
    return None


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Resolve `path` (relative to the workspace, or absolute) to a real path inside it.

    Symlinks are resolved before the check, so a link pointing outside the workspace is
    rejected just like `..`. The path need not exist.
    """
    root = workspace.resolve()
    try:
        candidate = Path(path)
        resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        # RuntimeError: symlink loop; ValueError: embedded NUL byte.
        raise ToolInputError(f"invalid path '{path}': {exc}") from None
    if not resolved.is_relative_to(root):
        raise ToolInputError(f"path '{path}' is outside the workspace")
    return resolved


def display_path(workspace: Path, path: Path) -> str:
    """`path` relative to the workspace in POSIX form ("." for the workspace itself)."""
    root = workspace.resolve()
    try:
        relative = path.relative_to(root)
    except ValueError:
        return path.as_posix()
    return relative.as_posix() or "."
