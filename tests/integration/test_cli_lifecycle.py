"""The command line as a process: how it ends, what it leaves behind, what it shows while
a tool runs. Every command here is a real subprocess, as a user or a process manager runs it."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import functools
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from duragent.client.connection import connect_temporal
from duragent.client.services import has_live_worker
from duragent.settings import Settings
from duragent.temporal_dev import DevServer

REPO = Path(__file__).resolve().parents[2]
SESSION = re.compile(r"Session ([0-9a-f]{32})")
FATAL = "Fatal Python error"


def one_tool_call(command: str, then: str = "done") -> str:
    """A script: one bash call, then a final answer."""
    return (
        "conversations:\n"
        "  '*':\n"
        "    - reply:\n"
        f"        - tool_use: {{name: bash, input: {{command: {command!r}}}}}\n"
        "    - reply:\n"
        f"        - text: {then!r}\n"
    )


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One dev server for the module: each command then starts only its own worker and
    offline model, as with `duragent dev-server` running in another terminal."""
    server = DevServer(tmp_path_factory.mktemp("temporal") / "temporal.db")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def cli_env(home: Path, script: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DURAGENT_"))}
    env.pop("TEMPORAL_ADDRESS", None)
    env.update(PYTHONPATH=str(REPO), DURAGENT_HOME=str(home), COLUMNS="200", **extra)
    if script is not None:
        env["DURAGENT_OFFLINE_SCRIPT"] = str(script)
    return env


def duragent(
    env: dict[str, str], *args: str, timeout: float = 120, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duragent.client.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Command:
    """A command in its own session, as a shell job (Ctrl-C goes to its process group),
    its output read as it comes: select and os.read, so no line waits in a buffer."""

    def __init__(self, env: dict[str, str], *args: str, cwd: Path = REPO) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "duragent.client.cli", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self.out = Output(self.process.stdout.fileno())
        self.err = Output(self.process.stderr.fileno())

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait(self, timeout: float = 60) -> int:
        """The exit status (minus the signal that ended it), once all output is read."""
        code = self.process.wait(timeout=timeout)
        self.out.rest(timeout)
        self.err.rest(timeout)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        assert self.process.stdout is not None and self.process.stderr is not None
        self.process.stdout.close()
        self.process.stderr.close()


class Output:
    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self._checked = 0
        self.closed = False

    def _read(self, timeout: float) -> None:
        if select.select([self._fd], [], [], max(timeout, 0))[0]:
            chunk = os.read(self._fd, 65536)
            self.closed = not chunk
            self.text += self._decoder.decode(chunk, final=self.closed)

    def wait_for(self, pattern: str, timeout: float = 90) -> re.Match[str]:
        """The next match of `pattern` (multiline) in what is read from here on."""
        regex = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while (found := regex.search(self.text, self._checked)) is None:
            if self.closed or time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} in:\n{self.text}")
            self._read(deadline - time.monotonic())
        self._checked = found.end()
        return found

    def rest(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while not self.closed:
            assert time.monotonic() < deadline, f"the pipe stays open:\n{self.text}"
            self._read(deadline - time.monotonic())
        return self.text


# ------------------------------------------------------------------------------------------
# Finding 6: every run exits with its outcome.


def test_two_dozen_runs_with_a_tool_call_each_exit_with_their_outcome(
    tmp_path: Path, temporal: DevServer
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(one_tool_call("echo from the tool"))

    def lane(name: str, runs: int) -> list[subprocess.CompletedProcess[str]]:
        # One task queue per lane: each run's worker has stopped when the next one looks
        # for a worker, and must not be taken for a live one.
        env = cli_env(tmp_path / name, script, TEMPORAL_ADDRESS=temporal.address)
        env["DURAGENT_TASK_QUEUE"] = f"{name}-{uuid.uuid4().hex[:8]}"
        return [duragent(env, "run", "go") for _ in range(runs)]

    # Two lanes of twelve in a row, side by side: the machine's cores, and CI's time (it
    # was forty, the suite's slowest test at two minutes; each run is a whole process).
    with ThreadPoolExecutor(2) as pool:
        lanes = list(pool.map(lane, ["a", "b"], [12, 12]))
    ran = [run for runs in lanes for run in runs]
    assert len(ran) == 24
    for run in ran:
        assert FATAL not in run.stderr, run.stderr
        assert run.returncode == 0, run.stderr
        assert "run completed" in run.stdout and "from the tool" in run.stdout
        assert "Started a worker in this process" in run.stderr
        assert "Warning" not in run.stderr, run.stderr  # nothing but what we say


def test_a_failed_run_exits_1_and_an_aborted_one_130(tmp_path: Path, temporal: DevServer) -> None:
    failing = tmp_path / "failing.yaml"
    failing.write_text(
        "conversations:\n  '*':\n    - error: {status: 400, message: 'bad request on purpose'}\n"
    )
    queue = f"outcomes-{uuid.uuid4().hex[:8]}"
    env = cli_env(
        tmp_path / "home", failing, TEMPORAL_ADDRESS=temporal.address, DURAGENT_TASK_QUEUE=queue
    )
    failed = duragent(env, "run", "go")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "run error" in failed.stdout and FATAL not in failed.stderr

    waiting = tmp_path / "waiting.yaml"
    waiting.write_text(one_tool_call("echo started; sleep 60"))
    env["DURAGENT_OFFLINE_SCRIPT"] = str(waiting)
    running = Command(env, "run", "go")
    try:
        session = running.err.wait_for(SESSION.pattern).group(1)
        wait_for_process(running.pid, "sleep 60")  # the tool runs
        aborted = duragent(env, "abort", session)
        assert aborted.returncode == 0, aborted.stderr
        # The abort used the running command's worker: it started no worker, no model.
        assert "Started a worker" not in aborted.stderr
        assert "offline model" not in aborted.stderr, aborted.stderr
        assert running.wait() == 130
        assert FATAL not in running.err.text
    finally:
        running.kill()


# ------------------------------------------------------------------------------------------
# Finding 13: a running tool's output, live.


def test_a_running_tools_output_shows_while_it_runs_when_piped(
    tmp_path: Path, temporal: DevServer
) -> None:
    go = tmp_path / "go"
    command = f"echo waiting for go; while [ ! -e {go} ]; do sleep 0.05; done; echo going"
    script = tmp_path / "script.yaml"
    script.write_text(one_tool_call(command))
    env = cli_env(
        tmp_path / "home",
        script,
        TEMPORAL_ADDRESS=temporal.address,
        DURAGENT_TASK_QUEUE=f"piped-{uuid.uuid4().hex[:8]}",
    )
    running = Command(env, "run", "go")
    try:
        running.out.wait_for(r"→ bash")
        # The tool is still waiting: its first line is on screen already.
        running.out.wait_for(r"^    │ waiting for go$")
        assert not go.exists()
        go.touch()
        assert running.wait() == 0, running.err.text
        lines = running.out.text.splitlines()
        assert "    │ going" in lines
        assert lines.index("    │ going") < next(
            i for i, line in enumerate(lines) if line.startswith("  ✓ bash")
        )
    finally:
        running.kill()


def test_piped_tool_output_is_bounded(tmp_path: Path, temporal: DevServer) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(one_tool_call("for i in $(seq 1 500); do echo line $i; done"))
    env = cli_env(
        tmp_path / "home",
        script,
        TEMPORAL_ADDRESS=temporal.address,
        DURAGENT_TASK_QUEUE=f"bounded-{uuid.uuid4().hex[:8]}",
    )
    ran = duragent(env, "run", "go")
    assert ran.returncode == 0, ran.stderr
    shown = [line for line in ran.stdout.splitlines() if line.startswith("    │ line ")]
    assert shown == [f"    │ line {i}" for i in range(1, 21)]
    session = SESSION.search(ran.stderr)
    assert session is not None
    assert f"… 480 more line(s) not shown (all of it: duragent show {session.group(1)})" in (
        ran.stdout
    )


def test_a_running_tools_latest_output_is_live_on_a_terminal(
    tmp_path: Path, temporal: DevServer
) -> None:
    go = tmp_path / "go"
    command = (
        f"for i in 1 2 3 4 5 6 7; do echo step $i; done; while [ ! -e {go} ]; do sleep 0.05; done"
    )
    script = tmp_path / "script.yaml"
    script.write_text(one_tool_call(command))
    env = cli_env(
        tmp_path / "home",
        script,
        TEMPORAL_ADDRESS=temporal.address,
        DURAGENT_TASK_QUEUE=f"tty-{uuid.uuid4().hex[:8]}",
        TERM="xterm",
    )
    env.pop("COLUMNS")
    leader, follower = pty.openpty()
    running = subprocess.Popen(
        [sys.executable, "-m", "duragent.client.cli", "run", "go"],
        cwd=REPO,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
    )
    os.close(follower)
    screen = b""
    try:
        deadline = time.monotonic() + 90
        # The live region: the tool's latest lines (the last five) and its running time.
        while not (b"step 7" in screen and b"bash (" in screen):
            assert time.monotonic() < deadline, screen.decode(errors="replace")
            if select.select([leader], [], [], 1)[0]:
                screen += os.read(leader, 65536)
        live = screen[screen.index(b"\xe2\x8b\xaf bash (") :].decode(errors="replace")
        assert "step 3" in live and "step 7" in live
        assert not go.exists()
        go.touch()
        while True:  # until the terminal closes (EIO once the child has gone)
            assert time.monotonic() < deadline, screen.decode(errors="replace")
            try:
                if not select.select([leader], [], [], 1)[0]:
                    continue
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
        assert running.wait(timeout=30) == 0, screen.decode(errors="replace")
        assert b"run completed" in screen
    finally:
        running.kill()
        running.wait()
        os.close(leader)


# ------------------------------------------------------------------------------------------
# Finding 15: what a command started stops with it, on Ctrl-C and on SIGTERM.


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) of a process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], int(fields[19])


def descendants(pid: int) -> dict[int, int]:
    """pid -> start time of every process under `pid`, now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found: dict[int, int] = {}
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        stat = _stat(child)
        if stat is not None:
            found[child] = stat[1]
            todo.extend(children.get(child, []))
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def wait_for_process(pid: int, command: str, timeout: float = 90) -> dict[int, int]:
    """Once a process running `command` is under `pid`: every process under it."""
    deadline = time.monotonic() + timeout
    while True:
        found = descendants(pid)
        if any(command in command_line(child) for child in found):
            return found
        assert time.monotonic() < deadline, f"no {command!r} under {pid}"
        time.sleep(0.05)


def still_running(processes: dict[int, int]) -> list[str]:
    alive = []
    for pid, started in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started and stat[0] != "Z":
            alive.append(f"{pid}: {command_line(pid)}")
    return alive


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(process: Command, signum: signal.Signals) -> None:
    """Ctrl-C as a terminal sends it (to the foreground process group); SIGTERM as a
    process manager does (to the process)."""
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        os.kill(process.pid, signum)


def wait_gone(processes: dict[int, int], timeout: float = 15) -> list[str]:
    """What is left of `processes` once they had `timeout` seconds to end (orphans are
    reaped by init, which takes a moment)."""
    deadline = time.monotonic() + timeout
    while (left := still_running(processes)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


async def polling(address: str, queue: str) -> None:
    """Until a worker polls `queue`."""
    settings = Settings.from_env(home=REPO, temporal_address=address, task_queue=queue)
    client = await connect_temporal(settings)
    async with asyncio.timeout(60):
        while not await has_live_worker(client, settings):
            await asyncio.sleep(0.05)


SIGNALS = [pytest.param(signal.SIGINT, id="ctrl-c"), pytest.param(signal.SIGTERM, id="sigterm")]


@pytest.mark.parametrize("signum", SIGNALS)
def test_run_stops_its_dev_server_worker_model_and_tool(
    tmp_path: Path, signum: signal.Signals
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(one_tool_call("echo started; sleep 300"))
    port = free_port()
    env = cli_env(tmp_path / "home", script, TEMPORAL_ADDRESS=f"127.0.0.1:{port}")
    running = Command(env, "run", "go")
    try:
        running.err.wait_for(r"Started a Temporal dev server")
        session = running.err.wait_for(SESSION.pattern).group(1)
        started = wait_for_process(running.pid, "sleep 300")  # the tool runs
        assert any("start-dev" in command_line(pid) for pid in started)
        stop(running, signum)
        assert running.wait() == -signum, running.err.text
        err = running.err.text
        assert FATAL not in err and "Traceback" not in err, err
        assert f"duragent abort {session}" in err  # what became of the run
        assert wait_gone(started) == []
        assert not port_open(port)
    finally:
        running.kill()


@pytest.mark.parametrize("signum", SIGNALS)
def test_serve_stops_its_dev_server_worker_and_model(
    tmp_path: Path, signum: signal.Signals
) -> None:
    port, http_port = free_port(), free_port()
    env = cli_env(tmp_path / "home", TEMPORAL_ADDRESS=f"127.0.0.1:{port}")
    serving = Command(env, "serve", "--port", str(http_port))
    try:
        serving.err.wait_for(r"Started a Temporal dev server")
        serving.err.wait_for(r"Started a worker")
        serving.err.wait_for(r"Uvicorn running on")  # uvicorn's own line: it listens
        started = descendants(serving.pid)
        assert any("start-dev" in command_line(pid) for pid in started)
        assert port_open(http_port)
        stop(serving, signum)
        assert serving.wait() == -signum, serving.err.text
        err = serving.err.text
        assert FATAL not in err and "Traceback" not in err, err
        assert wait_gone(started) == []
        assert not port_open(port) and not port_open(http_port)
    finally:
        serving.kill()


@pytest.mark.parametrize("signum", SIGNALS)
def test_worker_stops_its_model_and_the_tools_it_runs(
    tmp_path: Path, temporal: DevServer, signum: signal.Signals
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(one_tool_call("echo started; sleep 300"))
    queue = f"worker-{uuid.uuid4().hex[:8]}"
    env = cli_env(
        tmp_path / "home", script, TEMPORAL_ADDRESS=temporal.address, DURAGENT_TASK_QUEUE=queue
    )
    working = Command(env, "worker")
    follower = None
    try:
        working.err.wait_for(r"Worker on task queue")
        asyncio.run(polling(temporal.address, queue))
        # A run for it to work on, followed from another terminal (it starts no worker).
        follower = Command(env, "run", "go")
        started = wait_for_process(working.pid, "sleep 300")  # the worker runs the tool
        assert "Started a worker" not in follower.err.text
        stop(working, signum)
        assert working.wait() == -signum, working.err.text
        err = working.err.text
        assert FATAL not in err and "Traceback" not in err, err
        assert wait_gone(started) == []
    finally:
        working.kill()
        if follower is not None:
            follower.kill()


def test_send_that_starts_a_run_with_its_own_worker_shows_it_to_the_end(
    tmp_path: Path, temporal: DevServer
) -> None:
    """No worker polls: `send` hosts the run's worker, so it must not leave (the run would
    stall until some other worker started); it shows the run and exits with its outcome."""
    script = tmp_path / "script.yaml"
    script.write_text(one_tool_call("echo from the tool", then="all done"))
    queue = f"send-{uuid.uuid4().hex[:8]}"
    env = cli_env(
        tmp_path / "home", script, TEMPORAL_ADDRESS=temporal.address, DURAGENT_TASK_QUEUE=queue
    )
    first = duragent(env, "run", "start")
    assert first.returncode == 0, first.stderr
    session = SESSION.search(first.stderr)
    assert session is not None
    sent = duragent(env, "send", session.group(1), "again")
    assert sent.returncode == 0, sent.stderr
    assert "showing it here" in sent.stderr
    assert "from the tool" in sent.stdout and "run completed" in sent.stdout
    shown = duragent(env, "show", session.group(1))
    assert shown.stdout.count("all done") == 2, shown.stdout


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def test_two_runs_in_one_folder_share_services_until_both_end(tmp_path: Path) -> None:
    """The second `duragent run` uses the dev server and worker the first started; when
    the first's run ends first, it keeps them up until the second's run has ended, instead
    of stopping them under it (which cancelled its tool and left it hanging)."""
    from mcp_support import free_port

    held = "touch started; while [ ! -e go ]; do sleep 0.05; done; echo released"
    script = tmp_path / "script.yaml"
    script.write_text(one_tool_call(held))
    env = cli_env(tmp_path / "home", script, TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}")
    outputs = [tmp_path / "first.out", tmp_path / "second.out"]
    commands = []
    workspaces: list[Path] = []

    def start(out: Path) -> subprocess.Popen[bytes]:
        with out.open("wb") as sink:
            return subprocess.Popen(
                [sys.executable, "-m", "duragent.client.cli", "run", "wait for go"],
                cwd=REPO,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )

    def workspace(out: Path) -> Path | None:
        found = SESSION.search(out.read_text(errors="replace"))
        return tmp_path / "home" / "workspaces" / found.group(1) if found else None

    def has_session(out: Path) -> bool:
        return workspace(out) is not None

    try:
        for out in outputs:
            commands.append(start(out))
            _wait_for(functools.partial(has_session, out), f"{out.name}: a session")
            folder = workspace(out)
            assert folder is not None
            workspaces.append(folder)
            _wait_for((folder / "started").exists, f"{out.name}: its tool running")
        first, second = commands
        (workspaces[0] / "go").touch()
        _wait_for(
            lambda: "Keeping" in outputs[0].read_text(errors="replace"),
            "the first command: waiting for the second",
        )
        assert first.poll() is None  # its services stay up under the second run
        (workspaces[1] / "go").touch()
        assert second.wait(timeout=90) == 0, outputs[1].read_text()
        assert first.wait(timeout=60) == 0, outputs[0].read_text()
    finally:
        for command in commands:
            if command.poll() is None:
                command.kill()
    said_first, said_second = (out.read_text(errors="replace") for out in outputs)
    assert "Started a Temporal dev server" in said_first
    assert "Keeping this worker up for another command using it" in said_first
    assert "Started a Temporal dev server" not in said_second
    assert "already polling task queue" in said_second
    assert "No worker answered" not in said_second
    assert "released" in said_second and "run completed" in said_second
