"""Commands that share the local services one of them started (`client.services`).

A second `duragent run` in the same state directory uses the dev server and the worker
the first one started. The first must not stop them while the second still needs them:
stopping the worker would cancel the second run's tool, and stopping the dev server would
leave it with no Temporal at all. So every command that uses local services registers
here (one small file per process in `<home>/commands/`), and a command that started one
waits, before stopping it, until the commands that registered after it have ended.

Only later commands are waited for: one that came earlier cannot be using a service that
did not exist when it started its own, and waiting only one way can never deadlock. A
second Ctrl-C (or SIGTERM) stops the wait: the services stop at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from duragent.activities.orphans import process_start_ticks

WAIT_POLL_S = 0.25
"""How often a waiting command looks whether the later ones have ended."""


@dataclass(frozen=True)
class _User:
    pid: int
    started: int | None
    """The process's start time (clock ticks since boot): a reused pid is not the user."""
    registered: int
    """`time.time_ns()` at registration: the order commands came in."""


def _alive(user: _User) -> bool:
    if user.started is None:  # not Linux: the pid alone says it
        try:
            os.kill(user.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return process_start_ticks(user.pid) == user.started


class ServiceUsers:
    """The commands using the local services of one state directory."""

    def __init__(self, home: Path) -> None:
        self._folder = home / "commands"

    @contextlib.contextmanager
    def registered(self) -> Iterator[None]:
        """This process uses the local services while inside."""
        self._folder.mkdir(parents=True, exist_ok=True)
        path = self._folder / str(os.getpid())
        ticks = process_start_ticks(os.getpid())
        found = self._read(path)
        if found is not None and found.started == ticks:  # registered already: they nest
            yield
            return
        path.write_text(f"{ticks} {time.time_ns()}")  # over a dead process's, if any
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()

    def later(self) -> list[int]:
        """The pids of live commands that registered after this one (the dead ones'
        files are removed on the way)."""
        me = self._read(self._folder / str(os.getpid()))
        if me is None:
            return []
        found = []
        for path in self._folder.glob("*"):
            user = self._read(path)
            if user is None or user.pid == me.pid:
                continue
            if not _alive(user):
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if user.registered > me.registered:
                found.append(user.pid)
        return sorted(found)

    async def wait_for_later(self, what: str, announce: Callable[[str], None]) -> None:
        """Before stopping `what` (which this command started): wait while later
        commands may be using it, saying so once."""
        waiting = self.later()
        if not waiting:
            return
        pids = ", ".join(str(pid) for pid in waiting)
        others = "another command" if len(waiting) == 1 else f"{len(waiting)} other commands"
        announce(
            f"Keeping {what} up for {others} using it (PID {pids}); it stops when they end "
            "(Ctrl-C stops it now)."
        )
        while self.later():
            await asyncio.sleep(WAIT_POLL_S)

    @staticmethod
    def _read(path: Path) -> _User | None:
        try:
            started, registered = path.read_text().split()
            ticks = None if started == "None" else int(started)
            return _User(int(path.name), ticks, int(registered))
        except (OSError, ValueError):
            return None
