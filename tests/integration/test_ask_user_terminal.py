"""`duragent run` on a terminal answers the run's `ask_user` question inline: the
question and its choices are printed, and the line typed (a number picks a choice) is
the call's result. A real pseudo-terminal, the real command and its own worker."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from duragent.client.cli.command import store_client
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, text_of
from duragent.settings import Settings
from duragent.temporal_dev import DevServer

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "offline_model" / "scripts" / "ask_user.yaml"


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    server = DevServer(tmp_path_factory.mktemp("temporal") / "temporal.db")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def plain(screen: bytearray) -> str:
    """What the terminal shows, without its colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", screen.decode(errors="replace"))


def read_until(leader: int, screen: bytearray, wanted: bytes, deadline: float) -> None:
    while wanted not in screen:
        assert time.monotonic() < deadline, screen.decode(errors="replace")
        if select.select([leader], [], [], 1)[0]:
            screen += os.read(leader, 65536)


def test_a_question_is_answered_on_the_terminal(tmp_path: Path, temporal: DevServer) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DURAGENT_"))}
    env.pop("COLUMNS", None)
    env.update(
        PYTHONPATH=str(REPO),
        DURAGENT_HOME=str(home),
        DURAGENT_OFFLINE_SCRIPT=str(SCRIPT),
        TEMPORAL_ADDRESS=temporal.address,
        DURAGENT_TASK_QUEUE=f"ask-{uuid.uuid4().hex[:8]}",
        TERM="xterm",
    )
    store = store_client(Settings.from_env(home=home), create=True)
    session = store.sync.sessions.create()
    store.db.dispose()
    configured = subprocess.run(
        [
            sys.executable,
            "-m",
            "duragent.client.cli",
            "configure",
            session.id,
            "--tools",
            "ls,ask_user",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert configured.returncode == 0, configured.stderr
    leader, follower = pty.openpty()
    running = subprocess.Popen(
        [sys.executable, "-m", "duragent.client.cli", "run", "--session", session.id, "go"],
        cwd=REPO,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
    )
    os.close(follower)
    screen = bytearray()
    try:
        deadline = time.monotonic() + 90
        read_until(leader, screen, b"empty line: later):", deadline)
        shown = plain(screen)
        assert "? the agent asks: Which database should the new service use?" in shown
        assert "1. SQLite" in shown and "2. PostgreSQL" in shown
        os.write(leader, b"2\n")  # picks the second choice
        read_until(leader, screen, b"run completed", deadline)
        shown = plain(screen)
        assert re.search(r"answered: call_ask", shown), shown
        assert "✓ ask_user" in shown
        assert running.wait(timeout=30) == 0, shown
    finally:
        running.kill()
        running.wait()
        os.close(leader)
    store = store_client(Settings.from_env(home=home), create=True)
    results = [
        entry.message
        for entry in store.sync.tree.path(session.id)
        if isinstance(entry, MessageEntry) and isinstance(entry.message, ToolResultMessage)
    ]
    store.db.dispose()
    assert [(r.tool_call_id, text_of(r.content), r.is_error) for r in results] == [
        ("call_ask", "PostgreSQL", False)
    ]
