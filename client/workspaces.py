"""Where a session's workspace may be when the caller is not trusted with the machine.

The HTTP API serves several users from one server, so it decides where their tools run:
each user has an area under the workspaces root (`workspaces/<user>`); a new session works
in `workspaces/<user>/<session id>`, or in a folder of the user's own area they name by a
relative path, or in a folder under a root the operator allows
(`DURAGENT_WORKSPACE_ROOTS`). The local CLI is the machine's own user and names any folder.

A path is judged after `..` and symlinks are resolved, so neither can lead out of what is
allowed; the decision never depends on whether the path exists, so a refusal says nothing
about another user's files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from duragent.client.errors import InvalidWorkspace, WorkspaceNotAllowed
from duragent.settings import Settings

MAX_PATH_BYTES = 4096
"""Linux's PATH_MAX: a longer path cannot be a folder."""
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,99}")


def user_folder(user: str) -> str:
    """The folder name of a user's area: the name itself when it is a plain file name
    (letters, digits, `._@-`, not starting with a dot); otherwise percent-encoded with
    dots encoded too, so `..`, `a/b` or `.` stay one folder inside the root. Encoded names
    contain `%`, which plain names never do, so two users never share a folder."""
    if _PLAIN_NAME.fullmatch(user):
        return user
    return quote(user, safe="").replace(".", "%2E") or "%"


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


@dataclass(frozen=True)
class WorkspacePolicy:
    """What a user of the HTTP API may name as a session's workspace."""

    home: Path
    """The state directory (database, dev server history, the workspaces root)."""
    root: Path
    """The workspaces root: one area per user below it."""
    allowed: tuple[Path, ...] = ()
    """Roots the operator allows besides each user's own area."""

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkspacePolicy:
        return cls(
            home=settings.home.resolve(),
            root=settings.workspaces.resolve(),
            allowed=tuple(root.expanduser().resolve() for root in settings.workspace_roots),
        )

    def area(self, user: str) -> Path:
        """The user's own area (it may not exist yet)."""
        return self.root / user_folder(user)

    def resolve(self, user: str, requested: str | None, session_id: str) -> Path:
        """The folder a new session of `user` works in; `requested` is what the client
        named (None: a fresh folder named after the session). Raises `WorkspaceNotAllowed`
        (the rule) or `InvalidWorkspace`; creates nothing."""
        area = self.area(user)
        named = requested if requested else session_id
        if "\x00" in named:
            raise InvalidWorkspace(named, "contains a NUL byte")
        if len(named.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise InvalidWorkspace(named, f"is longer than {MAX_PATH_BYTES} bytes")
        if named.startswith("~"):
            raise WorkspaceNotAllowed(named, f"is not allowed: '~' is not expanded. {self.rule()}")
        try:
            path = (area / named).resolve()  # an absolute `named` replaces the area
        except (OSError, RuntimeError) as err:  # a symlink loop
            raise InvalidWorkspace(named, f"cannot be resolved ({err})") from err
        if not self._allowed(path, area):
            raise WorkspaceNotAllowed(named, f"is not allowed. {self.rule()}")
        if path.exists() and not path.is_dir():
            raise InvalidWorkspace(named, "is not a folder")
        return path

    def _allowed(self, path: Path, area: Path) -> bool:
        if _inside(path, area):
            return True
        if _inside(path, self.home) or _inside(self.home, path):
            return False  # the store, the root of all areas, another user's area
        return any(_inside(path, root) for root in self.allowed)

    def rule(self) -> str:
        roots = ", ".join(str(root) for root in self.allowed) or "none are set"
        return (
            "A workspace is a folder in your own area, named by a relative path such as "
            "'project' (the default is a new folder for the session), or a folder under a "
            f"root the operator allows with DURAGENT_WORKSPACE_ROOTS ({roots}); "
            "'..' and symlinks may not lead out of them"
        )
