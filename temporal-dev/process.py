"""Signalling a server's process group without ever hitting a recycled process id."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Literal


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def wait_unreaped(pid: int, timeout: float) -> Literal["exited", "reaped", "timeout"]:
    """Wait up to ``timeout`` s for child ``pid`` to exit, leaving it a zombie.

    Not reaping (``WNOWAIT``) keeps the PID, and so the process-group id,
    reserved until :meth:`subprocess.Popen.wait`, so a follow-up ``killpg``
    can never hit an unrelated process that was given a recycled id.
    Returns ``"reaped"`` if something else already collected the child, in
    which case that guarantee is gone.
    """
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return "reaped"
        if info is not None:
            return "exited"
        if time.monotonic() >= deadline:
            return "timeout"
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
