"""The README's main command, as a newcomer runs it: `duragent run "..."` from nothing."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def duragent(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DURAGENT_"))}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "duragent.client.cli", *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_run_starts_everything_it_needs_and_streams_the_demo(tmp_path: Path) -> None:
    address = f"--temporal-address=127.0.0.1:{free_port()}"
    ran = duragent(tmp_path, address, "run", "Write a hello script and run it")
    assert ran.returncode == 0, ran.stderr
    assert "offline model" in ran.stderr and "not Claude" in ran.stderr
    assert "Started a Temporal dev server" in ran.stderr
    assert "→ bash" in ran.stdout and "hello from duragent" in ran.stdout
    assert "run completed after 4 turn(s)" in ran.stdout
    session = re.search(r"duragent show ([0-9a-f]{32})", ran.stderr)
    assert session is not None
    workspace = tmp_path / ".duragent" / "workspaces" / session.group(1)
    assert (workspace / "hello.py").read_text() == "print('hello from duragent')\n"

    listed = duragent(tmp_path, "sessions")
    assert session.group(1) in listed.stdout
    shown = duragent(tmp_path, "show", session.group(1))
    assert shown.returncode == 0 and "completed" in shown.stdout and "hello.py" in shown.stdout
    missing = duragent(tmp_path, "show", "nope")
    assert missing.returncode == 2 and "does not exist" in missing.stderr

    # Nothing is running any more: history starts the dev server on the same file.
    history = duragent(tmp_path, address, "history", session.group(1))
    assert history.returncode == 0, history.stderr
    assert "Started a Temporal dev server" in history.stderr
    assert "turn 4" in history.stdout and "bash" in history.stdout
    assert "run ended" in history.stdout and "completed" in history.stdout
    tree = duragent(tmp_path, "tree", session.group(1))
    assert tree.returncode == 0 and "<- leaf" in tree.stdout


def test_steer_status_and_abort_a_running_session_from_the_command_line(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(
        "conversations:\n"
        "  '*':\n"
        "    - reply:\n"
        "        - tool_use: {name: bash, input: {command: 'echo working; sleep 60'}}\n"
    )
    address = f"--temporal-address=127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DURAGENT_"))}
    env.update(
        DURAGENT_OFFLINE_SCRIPT=str(script), PYTHONPATH=str(Path(__file__).resolve().parents[2])
    )
    running = subprocess.Popen(
        [sys.executable, "-m", "duragent.client.cli", address, "run", "go"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert running.stderr is not None
        session = None
        for line in running.stderr:
            found = re.search(r"Session ([0-9a-f]{32})", line)
            if found:
                session = found.group(1)
                break
        assert session is not None
        deadline = time.monotonic() + 30
        while "turn" not in (shown := duragent(tmp_path, address, "status", session)).stdout:
            assert time.monotonic() < deadline, shown.stdout + shown.stderr
            time.sleep(0.2)
        steered = duragent(tmp_path, address, "steer", session, "please hurry")
        assert steered.returncode == 0 and "steering queued" in steered.stdout
        status = duragent(tmp_path, address, "status", session)
        assert "steering: please hurry" in status.stdout
        aborted = duragent(tmp_path, address, "abort", session)
        assert aborted.returncode == 0, aborted.stderr
        assert "aborted" in aborted.stdout and "dropped: please hurry" in aborted.stdout
        assert running.wait(timeout=30) == 130
        # Its dev server stopped with it: a clear error, not a traceback.
        gone = duragent(tmp_path, address, "steer", session, "anyone?")
        assert gone.returncode == 2 and "is not reachable" in gone.stderr
    finally:
        running.kill()
        running.wait()
