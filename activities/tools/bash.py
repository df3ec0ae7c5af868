"""`bash`: run a shell command in the workspace, streaming its output.

Every command runs in its own process group so that a timeout or a cancellation can stop
everything it started, background jobs included, with one signal. The shell starts held
at a gate (reading a line from its stdin) and runs the command only once the caller has
recorded the group (`ToolContext.on_process`), so a worker that dies at any moment
leaves nothing running that a later attempt cannot find: if it dies before the gate
opens, the shell reads end-of-file and exits without running anything.

Commands get an allow-listed environment (`activities.tools.environment`) and, if the
worker asks for it, run inside a bubblewrap sandbox (`activities.tools.sandbox`).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from duragent.activities.tools.contract import Tool, ToolContext
from duragent.activities.tools.environment import tool_environment
from duragent.activities.tools.sandbox import BwrapSandbox
from duragent.activities.tools.truncation import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    format_size,
    truncate_tail,
)
from duragent.domain.tools import ToolResult, ToolTraits

logger = logging.getLogger(__name__)

TERM_GRACE_SECONDS = 0.5
"""How long a group gets to exit after SIGTERM before it is sent SIGKILL."""
KILL_WAIT_SECONDS = 2.0
"""How long to wait for the group to disappear after SIGKILL before giving up."""
PIPE_GRACE_SECONDS = 0.3
"""How long to keep reading after bash exits while background jobs still hold the output."""

_POLL_SECONDS = 0.01

# Run in the shell before the command. On SIGTERM, bash waits for (and so reaps) its
# children, which received the same signal, before exiting. Without this bash dies first
# and its children linger as zombies until init reaps them, which on some systems takes
# seconds, so the group would look alive long after everything in it has stopped.
_TRAP_PREFIX = "trap 'wait; exit 143' TERM; "

# The gate: wait for the caller's go-ahead on stdin, then give the command an empty stdin.
# End-of-file instead (the worker died before recording the group) runs nothing.
_GATE_PREFIX = 'IFS= read -r _gate && [ "$_gate" = go ] || exit 125; unset _gate; exec </dev/null; '
_GO = b"go\n"

_running: set[int] = set()


def running_process_groups() -> frozenset[int]:
    """Process group ids of bash commands currently executing in this process."""
    return frozenset(_running)


class BashArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, description="Bash command (script) to run.")
    timeout: float | None = Field(
        default=None,
        gt=0,
        description="Seconds after which the command and everything it started are killed.",
    )


_DESCRIPTION = (
    "Run a bash command with the workspace root as the working directory. stdin is "
    "empty; stdout and stderr are merged. The result shows the last "
    f"{DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024} KB of output (earlier "
    "output is dropped, so filter large output with grep, head or tail). A non-zero exit "
    "code is reported as an error. Use timeout (seconds) for commands that might hang. "
)
_BACKGROUND_JOBS = (
    "Background jobs that keep the output open are stopped shortly after the command "
    "exits; to leave a server running, redirect its output "
    "(e.g. `nohup server > server.log 2>&1 &`)."
)
_SANDBOXED = (
    "The command runs in a sandbox: only the workspace is writable, there is no network, "
    "and everything it started stops when it exits."
)


class BashTool(Tool[BashArgs]):
    name = "bash"
    description = _DESCRIPTION + _BACKGROUND_JOBS
    args_model = BashArgs
    traits: ClassVar[ToolTraits] = ToolTraits(retry_safe=False)
    process_gate = True

    def __init__(
        self, env: Mapping[str, str] | None = None, sandbox: BwrapSandbox | None = None
    ) -> None:
        """`env`: the whole environment of a command (default: the allow-listed part of
        this process's, see `tool_environment`). `sandbox`: where commands run, if not
        directly on the host."""
        self.env = dict(tool_environment() if env is None else env)
        self.sandbox = sandbox
        if sandbox is not None:
            self.description = _DESCRIPTION + _SANDBOXED

    def _argv(self, command: str, workspace: Path) -> list[str]:
        argv = ["bash", "-c", _GATE_PREFIX + _TRAP_PREFIX + command]
        return argv if self.sandbox is None else self.sandbox.command(workspace, argv)

    async def execute(self, args: BashArgs, ctx: ToolContext) -> ToolResult:
        output = _OutputTail(ctx.on_update)
        loop = asyncio.get_running_loop()
        transport, shell = await loop.subprocess_exec(
            lambda: _ShellProtocol(output),
            *self._argv(args.command, ctx.workspace),
            cwd=ctx.workspace,
            env=self.env,
            stdin=subprocess.PIPE,  # the gate
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # new session => new process group with pgid == pid
        )
        pgid = transport.get_pid()
        _running.add(pgid)
        timed_out = False
        detached = False
        try:
            # Recorded (durably, by the caller) before the command may do anything.
            ctx.on_process(pgid)
            _open_gate(transport)
            try:
                async with asyncio.timeout(args.timeout):
                    await shell.exited.wait()
                    # Background jobs inherit the output pipe; give them a moment to finish.
                    detached = not await _wait_event(shell.output_closed, PIPE_GRACE_SECONDS)
            except TimeoutError:
                timed_out = True
                await stop_process_group(transport, pgid)
            if detached:
                await stop_process_group(transport, pgid)
        except BaseException:
            # Cancellation (the activity was cancelled) or a bug: never leave the group
            # running. SIGTERM goes out before the first await.
            await stop_process_group(transport, pgid)
            raise
        finally:
            _running.discard(pgid)
            output.close()  # no on_update calls after execute returns or raises
            # Frees the pipe even if a process that left the group (e.g. via setsid) holds
            # it; by now bash itself has exited or been killed.
            transport.close()
        return _result(args, transport, output, timed_out=timed_out, detached=detached)


class _ShellProtocol(asyncio.SubprocessProtocol):
    """Feeds output as it arrives and signals exit and end of output separately.

    They are separate because `asyncio.subprocess.Process.wait()` waits for both (before
    Python 3.12), which would hang on a background job holding the output open.
    """

    def __init__(self, output: _OutputTail) -> None:
        self._output = output
        self.exited = asyncio.Event()
        self.output_closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self._output.feed(data if isinstance(data, bytes) else data.encode())

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd != 1:  # stdin (the gate) closes long before the output does
            return
        self._output.finish()
        self.output_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


def _open_gate(transport: asyncio.SubprocessTransport) -> None:
    gate = transport.get_pipe_transport(0)
    assert isinstance(gate, asyncio.WriteTransport)
    # A shell that already exited (a syntax error in the command) leaves nobody to read
    # it; the transport then drops the write and reports the closed pipe to the protocol.
    gate.write(_GO)
    gate.close()


async def _wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait up to `timeout` seconds for `event`; whether it is set."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()


class _OutputTail:
    """Decodes output, streams it to `on_update`, and keeps only what the result can show."""

    def __init__(self, on_update: Callable[[str], None]) -> None:
        self._on_update = on_update
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._chunks: deque[str] = deque()
        self._kept_chars = 0
        self.dropped = False
        self.total_bytes = 0
        self.newlines = 0
        self.ends_with_newline = True
        self._closed = False

    def close(self) -> None:
        """Ignore anything that arrives from now on."""
        self._closed = True

    def feed(self, data: bytes) -> None:
        if self._closed:
            return
        self.total_bytes += len(data)
        self._add(self._decoder.decode(data))

    def finish(self) -> None:
        if self._closed:
            return
        self._add(self._decoder.decode(b"", final=True))

    def _add(self, text: str) -> None:
        if not text:
            return
        self.newlines += text.count("\n")
        self.ends_with_newline = text.endswith("\n")
        self._chunks.append(text)
        self._kept_chars += len(text)
        # Twice the byte budget in characters is always more than the budget in bytes, so
        # `truncate_tail` never needs what is dropped here, and memory stays bounded.
        while self._kept_chars - len(self._chunks[0]) > 2 * DEFAULT_MAX_BYTES:
            self._kept_chars -= len(self._chunks.popleft())
            self.dropped = True
        try:
            self._on_update(text)
        except Exception:
            # A failing observer must not abort the command; the output is still collected.
            logger.exception("bash on_update callback failed")

    @property
    def total_lines(self) -> int:
        return self.newlines + (0 if self.ends_with_newline else 1)

    def text(self) -> str:
        return "".join(self._chunks)


def _result(
    args: BashArgs,
    transport: asyncio.SubprocessTransport,
    output: _OutputTail,
    *,
    timed_out: bool,
    detached: bool,
) -> ToolResult:
    cut = truncate_tail(output.text())
    truncated = cut.truncated or output.dropped
    # The model API rejects blank text blocks.
    parts = [cut.text.rstrip("\n") if cut.text.strip() else "(no output)"]
    if truncated:
        parts.append(
            f"[Output truncated: showing the last {cut.output_lines} of {output.total_lines} "
            f"lines ({format_size(output.total_bytes)} in total). Filter the output with grep, "
            "head or tail to see other parts.]"
        )
    if detached:
        parts.append(
            "[Background processes still held the output open after the command finished, so "
            "its process group was stopped. Redirect the output of background jobs (e.g. "
            "`cmd > cmd.log 2>&1 &`) to keep them running.]"
        )
    exit_code = transport.get_returncode()
    is_error = True
    if timed_out:
        parts.append(f"Command timed out after {args.timeout:g} seconds and was killed.")
    elif exit_code is not None and exit_code < 0:
        parts.append(f"Command was killed by signal {_signal_name(-exit_code)}.")
    elif exit_code:
        parts.append(f"Command exited with code {exit_code}.")
    else:
        is_error = False
    details = {
        "exit_code": exit_code,
        "timed_out": timed_out,
        "truncated": truncated,
        "pid": transport.get_pid(),
    }
    text = "\n\n".join(parts)
    return ToolResult.error(text, **details) if is_error else ToolResult.text(text, **details)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


# --- stopping a process group --------------------------------------------------------


async def stop_process_group(transport: asyncio.SubprocessTransport, pgid: int) -> None:
    """SIGTERM the group now, SIGKILL it after `TERM_GRACE_SECONDS`, wait until it is gone.

    If this wait is itself cancelled, the group gets SIGKILL at once and the cancellation
    propagates. The bash process is always reaped when it dies; other members count as
    gone once they are zombies, because only their parent (often init) can reap them.
    """
    _signal_group(pgid, signal.SIGTERM)
    try:
        if await _wait_gone(transport, pgid, TERM_GRACE_SECONDS):
            return
    except BaseException:
        _signal_group(pgid, signal.SIGKILL)
        raise
    _signal_group(pgid, signal.SIGKILL)
    if not await _wait_gone(transport, pgid, KILL_WAIT_SECONDS):
        logger.warning("process group %d still has live members after SIGKILL", pgid)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # ProcessLookupError: already gone. PermissionError: only members we may not signal
    # are left (e.g. a setuid program); nothing more can be done about them from here.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _wait_gone(transport: asyncio.SubprocessTransport, pgid: int, timeout: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        # Also wait for bash itself to be reaped, so that its exit code is known.
        if transport.get_returncode() is not None and not process_group_alive(pgid):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_POLL_SECONDS)


def process_group_alive(pgid: int) -> bool:
    """Whether any member of the group can still run.

    Zombies cannot run and only their parent (often init) can reap them, so a group of
    zombies counts as gone even though `os.killpg(pgid, 0)` still succeeds for it.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not sys.platform.startswith("linux"):
        return True
    return any(state != "Z" for state in _linux_group_states(pgid))


def _linux_group_states(pgid: int) -> list[str]:
    """Process states (R, S, Z, ...) of the members of a group, from /proc."""
    states = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue  # exited while we were scanning
        # The command name may contain spaces and parentheses; fields resume after the last ")".
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid):
            states.append(fields[0])
    return states
