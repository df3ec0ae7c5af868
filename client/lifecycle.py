"""How a command process runs and ends: signals stop what it started, then it leaves.

Ctrl-C (SIGINT), SIGTERM (what process managers send) and SIGHUP (the terminal went away)
cancel the command's coroutine, so every service it started (dev server, offline model,
worker, tool processes) is stopped by the context managers that started it; then the
process ends by that same signal, as the shell and process managers expect (the shell
shows 130 for SIGINT, 143 for SIGTERM).

A command never goes through interpreter teardown: once its services have stopped and its
output is flushed, it leaves with `os._exit`. The Temporal SDK's native (Rust) threads can
call back into Python while the interpreter finalizes, which aborts the process ("Fatal
Python error: PyGILState_Release ... Python runtime state: finalizing", exit 134) after a
command that had succeeded; the SDK has no call that stops those threads first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A stop signal ended the command after its services stopped.

    A BaseException, like KeyboardInterrupt: nothing on the way up may take it for an error.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def run(coro: Coroutine[Any, Any, T], notice: Callable[[str], None] | None = None) -> T:
    """Run `coro` in a new event loop; a stop signal cancels it, then raises `Interrupted`.

    Only the first signal cancels: cleanup (bounded: every service stops within seconds)
    is never cut short by a second Ctrl-C, which only gets a `notice`. A signal the parent
    set to be ignored (a shell's background job ignores SIGINT) stays ignored; off the
    main thread, where signals cannot be handled, the coroutine just runs.
    """
    received: list[int] = []

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(signum: int) -> None:
            if received:
                if notice is not None:
                    notice("still stopping what this command started")
                return
            received.append(signum)
            task.cancel()

        main_thread = threading.current_thread() is threading.main_thread()
        installed = [
            s for s in STOP_SIGNALS if main_thread and signal.getsignal(s) is not signal.SIG_IGN
        ]
        for signum in installed:
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            return await coro
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)

    try:
        result = asyncio.run(main())
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise
    if received:  # the command finished its cleanup without passing the cancellation on
        raise Interrupted(received[0])
    return result


def exit_after(entry: Callable[[], object]) -> NoReturn:
    """Call the command line's `entry`, then leave with its exit status (or its signal)
    without interpreter teardown."""
    try:
        entry()
        code = 0
    except SystemExit as exiting:
        code = _status(exiting.code)
    except Interrupted as stop:
        _flush()
        signal.signal(stop.signum, signal.SIG_DFL)
        signal.raise_signal(stop.signum)
        code = 128 + stop.signum  # not reached: the default action ends the process
    except BaseException:
        sys.excepthook(*sys.exc_info())  # a bug: its traceback, as Python would print it
        code = 1
    _flush()
    os._exit(code)


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _flush() -> None:
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`| head`)
            stream.flush()
