"""Start, probe and stop a real Temporal dev server (``temporal server start-dev``).

The dev server is a single binary that bundles the frontend, history, matching
and worker services on top of an SQLite file. Pointing ``--db-filename`` at a
file (instead of the default in-memory database) is what makes workflow
executions survive a restart, which is the whole point of a durable harness.

Only Linux (and other POSIX systems) are supported: the server runs in its own
process group so that shutdown signals reach it and anything it spawned, and
never reach it by accident from the terminal of the parent.

The pieces, each in a module of its own: where the binary is (``binary``), its command
line (``flags``), addresses and free ports (``ports``), the readiness probe (``probe``)
and signalling the process group (``process``). Temporal's own
``WorkflowEnvironment.start_local`` starts the same binary but runs it in the caller's
process group (Ctrl-C in the terminal reaches it), exposes no process to kill hard (the
fault tests' crash), keeps no log file to quote when a start fails, and counts a server as
ready once a client connects, before its namespace answers; this module does those four.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, TypeVar

from .binary import find_temporal_binary
from .errors import DevServerError, PortInUseError
from .flags import server_environment, start_dev_argv
from .ports import connect_host, free_port
from .probe import PROBE_RPC_TIMEOUT, probe, tcp_open, tcp_open_sync
from .process import signal_group, wait_unreaped

_T = TypeVar("_T")

#: How many log lines are quoted in a DevServerError.
_LOG_TAIL_LINES: Final = 25

#: Start attempts when automatically picked ports turn out to be taken.
_PORT_ATTEMPTS: Final = 3


class DevServer:
    """A ``temporal server start-dev`` child process backed by an SQLite file.

    Construction is cheap and starts nothing; call :meth:`start` /
    :meth:`astart` or use the object as a (sync or async) context manager.
    Ports are chosen at construction (a free one is picked when ``None``), so
    :attr:`address` is known up front. Only if an automatically picked port
    turns out to be taken during the *first* start is another one picked;
    after a successful start the address never changes, so clients holding
    it can reconnect after a restart.

    Restarting on the same ``db_file`` (with this or a new object) keeps all
    workflow executions and their histories.

    Args:
        db_file: SQLite database file; created (with parent directories) if missing.
        port: frontend gRPC port; ``None`` picks a free one.
        ui_port: Web UI port when not headless; ``None`` picks a free one.
        headless: run without the Web UI.
        namespace: namespace to create at launch and to probe for readiness
            (``default`` always exists).
        ip: address the frontend (and UI) bind to.
        log_file: where the server's stdout/stderr are appended; defaults to
            ``db_file`` with the suffix ``.log``.
        binary: the ``temporal`` binary; ``None`` means :func:`find_temporal_binary`
            at start time.
        metrics_port: where the server serves Prometheus metrics (``/metrics``: its
            ``action`` counter says what a workload costs on Temporal Cloud); ``None``:
            a port of the server's choosing, not told.

    Not thread-safe: drive one instance from one thread (or one event loop).
    """

    def __init__(
        self,
        db_file: Path,
        *,
        port: int | None = None,
        ui_port: int | None = None,
        headless: bool = True,
        namespace: str = "default",
        ip: str = "127.0.0.1",
        log_file: Path | None = None,
        binary: Path | None = None,
        metrics_port: int | None = None,
    ) -> None:
        for name, value in (("port", port), ("ui_port", ui_port)):
            if value is not None and not 0 < value < 65536:
                raise ValueError(f"{name} must be in 1..65535, got {value}")
        self.db_file: Final = Path(db_file)
        self.ip: Final = ip
        self.namespace: Final = namespace
        self.headless: Final = headless
        self.log_file: Final = Path(log_file) if log_file else self.db_file.with_suffix(".log")
        self._fixed_port = port
        self._fixed_ui_port = ui_port
        self._port, self._ui_port = self._pick_ports()
        self._ever_ready = False
        self._binary = binary
        self.metrics_port: Final = metrics_port
        self._proc: subprocess.Popen[bytes] | None = None
        self._command: list[str] = []
        # Byte offset where this run's output starts in the (appended) log
        # file, so errors quote this run and not an earlier one.
        self._log_offset = 0

    # ------------------------------------------------------------------ info

    @property
    def port(self) -> int:
        """Frontend gRPC port."""
        return self._port

    @property
    def ui_port(self) -> int | None:
        """Web UI port, or ``None`` when headless."""
        return self._ui_port

    @property
    def address(self) -> str:
        """``host:port`` for :meth:`temporalio.client.Client.connect`."""
        return f"{connect_host(self.ip)}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """Web UI URL, or ``None`` when headless."""
        if self.ui_port is None:
            return None
        return f"http://{connect_host(self.ip)}:{self.ui_port}"

    @property
    def pid(self) -> int | None:
        """PID (and process-group id) of the server while it runs, else ``None``."""
        return self._proc.pid if self.is_running() and self._proc else None

    def is_running(self) -> bool:
        """Whether the server process has been started and has not exited."""
        return self._proc is not None and self._proc.poll() is None

    def command(self, binary: Path | None = None) -> list[str]:
        """The argv used to start the server (the binary resolved if not given)."""
        exe = binary or self._binary or find_temporal_binary()
        return start_dev_argv(
            exe,
            self.db_file,
            port=self.port,
            ip=self.ip,
            namespace=self.namespace,
            ui_port=self.ui_port,
            metrics_port=self.metrics_port,
        )

    # ----------------------------------------------------------------- start

    def start(self, timeout: float = 30.0) -> None:
        """Spawn the server and block until it serves :attr:`namespace`.

        Safe to call from inside a running event loop (the readiness probe
        then runs on a helper thread), but that blocks the loop; async code
        should prefer :meth:`astart`.

        Raises:
            DevServerError: already running, binary missing, port taken, the
                process exited, or not ready within ``timeout`` seconds. The
                message quotes the end of the log. The process is stopped
                before raising.
        """
        _run_blocking(self.astart(timeout))

    async def astart(self, timeout: float = 30.0) -> None:
        """Async :meth:`start`: spawn the server and await readiness.

        Raises:
            DevServerError: as :meth:`start`.
        """
        # Checked before the try below, whose error path would stop the
        # already running server.
        if self.is_running():
            raise DevServerError(f"dev server already running at {self.address}")
        deadline = time.monotonic() + timeout
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                self._spawn()
                await self._wait_ready(deadline, timeout)
            except PortInUseError:
                self.stop(timeout=5.0)
                if self._ever_ready or attempt == _PORT_ATTEMPTS:
                    raise
                picked = self._pick_ports()
                if picked == (self._port, self._ui_port):
                    raise  # the taken port was given explicitly: nothing to re-pick
                self._port, self._ui_port = picked
            except BaseException:
                # Also on cancellation: a half-started server must not outlive
                # us. Blocking the loop briefly on this error path is acceptable.
                self.stop(timeout=5.0)
                raise
            else:
                self._ever_ready = True
                return

    def _pick_ports(self) -> tuple[int, int | None]:
        port = self._fixed_port if self._fixed_port is not None else free_port(self.ip)
        if self.headless:
            return port, None
        if self._fixed_ui_port is not None:
            return port, self._fixed_ui_port
        ui_port = free_port(self.ip)
        while ui_port == port:
            ui_port = free_port(self.ip)
        return port, ui_port

    def _spawn(self) -> None:
        binary = self._binary or find_temporal_binary()
        # Another server answering on our port would make the readiness probe
        # succeed against the wrong process, so refuse up front.
        if tcp_open_sync(connect_host(self.ip), self.port, 0.2):
            raise PortInUseError(f"{self.address} is already in use by another process")
        self._command = self.command(binary)
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        # Append (O_APPEND) so earlier runs' logs survive restarts and so our
        # header and the child's writes interleave safely.
        with self.log_file.open("ab") as log:
            self._log_offset = log.tell()
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            log.write(f"--- {stamp} starting: {shlex.join(self._command)}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(
                    self._command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    # Own session/process group: Ctrl-C in the parent's terminal
                    # does not hit the server mid-write, and stop()/kill() can
                    # signal the whole group.
                    start_new_session=True,
                    close_fds=True,
                    env=server_environment(os.environ),
                )
            except OSError as exc:
                self._proc = None
                raise DevServerError(f"could not execute {binary}: {exc}") from exc
        # The child holds its own copy of the log descriptor; ours is closed by
        # the with-block so nothing leaks however the server ends.

    async def _wait_ready(self, deadline: float, timeout: float) -> None:
        host = connect_host(self.ip)
        last_error: BaseException | None = None
        while True:
            self._raise_if_exited()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                detail = f" (last probe error: {last_error!r})" if last_error else ""
                raise DevServerError(
                    f"dev server at {self.address} not ready after {timeout:g}s{detail}"
                    f"{self._log_excerpt()}"
                )
            # The TCP check is cheap and avoids building a client every few
            # milliseconds while the binary is still initialising.
            if not await tcp_open(host, self.port, min(0.5, remaining)):
                await asyncio.sleep(0.05)
                continue
            try:
                async with asyncio.timeout(remaining):
                    await probe(
                        self.address,
                        self.namespace,
                        rpc_timeout=min(PROBE_RPC_TIMEOUT, remaining),
                    )
            except Exception as exc:
                last_error = exc
                await asyncio.sleep(0.1)
                continue
            # A probe can only succeed against our process (the port was free
            # before spawning), but re-check in case it died right after.
            self._raise_if_exited()
            return

    def _raise_if_exited(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            excerpt = self._log_excerpt()
            # The server binds several listeners (gRPC, UI, HTTP, metrics and
            # internal ones); any of them can lose a race for a port.
            error = PortInUseError if "address already in use" in excerpt else DevServerError
            raise error(
                f"dev server exited with code {proc.returncode} before becoming ready "
                f"(command: {shlex.join(self._command)}){excerpt}"
            )

    def _log_excerpt(self) -> str:
        tail = self.log_tail()
        if not tail:
            return f"\n(log file {self.log_file} is empty)"
        return f"\nlast lines of {self.log_file}:\n{tail}"

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines this run wrote to :attr:`log_file`."""
        try:
            with self.log_file.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                # Bound the read: a long-running server's log can be large.
                start = max(self._log_offset, size - 64 * 1024)
                log.seek(start)
                data = log.read()
        except OSError:
            return ""
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])

    # ------------------------------------------------------------------ stop

    def stop(self, timeout: float = 10.0) -> None:
        """Stop gracefully: SIGTERM the process group, SIGKILL after ``timeout``.

        Idempotent, and a no-op if never started. Blocks until the process is
        reaped. A graceful stop lets SQLite checkpoint and close cleanly,
        although the database also survives :meth:`kill`.
        """
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        pid = proc.pid
        signal_group(pid, signal.SIGTERM)
        if wait_unreaped(pid, timeout) != "reaped":
            # Either escalate (still running after the grace period) or sweep
            # up whatever the exited leader left in its group (e.g. when the
            # binary is a wrapper script). Safe because the leader is not
            # reaped yet, so its process-group id cannot have been recycled.
            signal_group(pid, signal.SIGKILL)
        proc.wait()

    async def astop(self, timeout: float = 10.0) -> None:
        """Async :meth:`stop` that waits on a worker thread, not the loop."""
        await asyncio.to_thread(self.stop, timeout)

    def kill(self) -> None:
        """SIGKILL the whole process group at once and reap it (simulates a crash).

        Idempotent, and a no-op if never started or already stopped.
        """
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait()

    # ------------------------------------------------------- context managers

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await self.astart()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"DevServer({str(self.db_file)!r}, address={self.address!r}, {state})"


def _run_blocking(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion from synchronous code.

    ``asyncio.run`` cannot nest inside a running loop, so when called from a
    coroutine (e.g. a sync ``start()`` inside async code) it runs on a
    private thread with its own loop instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
