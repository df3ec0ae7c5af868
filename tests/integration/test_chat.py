"""`duragent chat`: the terminal app driven as a person would, headless (Textual's Pilot)
against a real stack and worker, and the real command in a pseudo-terminal of 80 by 24:
a run with a tool whose output shows while it runs, a message typed while it works
queued as a chip and sent as guidance, an approval answered inline, Stop, leaving in
the middle of a tool call (the run goes on) and coming back to its end."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from approval_support import ASK_BASH, bash_call, calls_then_text
from support import IN_PROCESS_MODEL, REPO, UNTIL_GO, Stack, eventually, let_go, run_finished
from textual.pilot import Pilot
from textual.widgets import Static

from duragent.client.chat.app import ChatApp, Left
from duragent.client.chat.link import Link
from duragent.client.chat.views import (
    ApprovalView,
    Chip,
    ChipNote,
    ConversationView,
    HeaderBar,
    SubAgentView,
    ToolView,
)

SNAPSHOTS = Path(__file__).resolve().parents[1] / "screenshots" / "chat"
"""Where the screen snapshots go, for a reviewer to look at (git ignores the folder)."""

TOOL_THEN_TEXT: dict[str, Any] = calls_then_text(
    [bash_call(f"echo line-one; echo line-two; {UNTIL_GO}; echo after-go", "call_work")],
    "All done.",
)
"""A run with one bash call that prints two lines, then waits for `let_go`."""


def shown(app: ChatApp, kind: type[Static] = Static) -> str:
    """The text of the app's widgets of `kind`, one a line, as the screen shows them."""
    texts = []
    for widget in app.query(kind):
        content = widget.content
        texts.append(content.plain if hasattr(content, "plain") else str(content))
    return "\n".join(texts)


async def until(pilot: Pilot[Any], check: Callable[[], bool], timeout: float = 30) -> None:
    """Let the app run until `check()` holds (the screen shows something)."""

    async def holds() -> bool:
        await pilot.pause()
        return check()

    await eventually(holds, timeout=timeout)


async def type_text(pilot: Pilot[Any], text: str) -> None:
    await pilot.press(*[" " if c == " " else c for c in text])


pytestmark = IN_PROCESS_MODEL


@pytest.mark.script(TOOL_THEN_TEXT)
async def test_a_run_with_a_tool_shows_its_output_while_it_runs_then_its_end(
    stack: Stack,
) -> None:
    session = await stack.client.sessions.create()
    app = ChatApp(Link(stack.client), session.id)
    async with stack.worker(), app.run_test(size=(80, 24)) as pilot:
        await type_text(pilot, "run the script")
        await pilot.press("enter")
        await until(pilot, lambda: "line-two" in shown(app, ToolView))
        assert "after-go" not in shown(app, ToolView)
        header = shown(app, HeaderBar)
        assert "working" in header and "turn 1" in header, header
        assert "you run the script" in shown(app)
        let_go(stack, session.id)
        await until(pilot, lambda: "run completed after 2 turn(s)" in shown(app))
        assert "All done." in shown(app)
        tool = shown(app, ToolView)
        assert "✓ bash" in tool and "after-go" not in tool.split("\n")[0], tool
        await until(pilot, lambda: " idle " in shown(app, HeaderBar) + " ")


LONG_TOOL: dict[str, Any] = calls_then_text(
    [bash_call(f"echo working; {UNTIL_GO}", "call_long")], "Adjusted as you said.", "Second."
)
"""A bash call that runs until `let_go` (or until it is interrupted), then replies."""


@pytest.mark.script(LONG_TOOL)
async def test_a_message_typed_while_it_works_is_a_chip_then_guidance(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    app = ChatApp(Link(stack.client), session.id)
    async with stack.worker(), app.run_test(size=(80, 24)) as pilot:
        await type_text(pilot, "start")
        await pilot.press("enter")
        await until(pilot, lambda: "working" in shown(app, ToolView))
        await type_text(pilot, "stop and use python instead")
        await pilot.press("enter")  # busy: queued, not sent to the run
        await until(pilot, lambda: len(app.query(Chip)) == 1)
        assert "queued stop and use python instead" in shown(app, Chip)
        assert app.box.text == ""
        [item] = await stack.client.inputs.queue(session.id)
        assert (item.kind, item.text) == ("next_turn", "stop and use python instead")
        await pilot.press("up")  # from the empty box to the chips
        assert isinstance(app.focused, Chip)
        await pilot.press("g")  # guide
        await until(pilot, lambda: "reached the agent" in shown(app))
        note = shown(app)
        assert "your guidance “stop and use python instead” reached the agent" in note, note
        await until(pilot, lambda: "run completed" in shown(app))
        assert "Adjusted as you said." in shown(app)
        assert not app.query(Chip)
    [taken] = await stack.client.inputs.queue(session.id, status=None)
    assert (taken.kind, taken.status) == ("guidance", "consumed")


@pytest.mark.script(calls_then_text([bash_call("echo ran > out.txt", "call_write")], "All done."))
async def test_an_approval_is_answered_in_the_conversation(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    app = ChatApp(Link(stack.client), session.id)
    async with stack.worker(), app.run_test(size=(80, 24)) as pilot:
        await stack.client.approvals.set_policy(session.id, ASK_BASH)
        await type_text(pilot, "write it")
        await pilot.press("enter")
        await until(pilot, lambda: "waits for your approval" in shown(app))
        assert "echo ran > out.txt" in shown(app)
        assert "waiting for approval" in shown(app, HeaderBar)
        await pilot.press("ctrl+r")  # to what waits
        assert app.focused is not None and app.focused.id == "approve"
        await pilot.press("y")
        await until(pilot, lambda: "run completed" in shown(app))
        assert not app.query(ApprovalView).filter(".waiting")
        assert "approve" in shown(app)
    assert (Path(session.workspace) / "out.txt").read_text() == "ran\n"


@pytest.mark.script(LONG_TOOL)
async def test_esc_stops_the_run_its_tool_and_what_was_queued(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    app = ChatApp(Link(stack.client), session.id)
    async with stack.worker(), app.run_test(size=(80, 24)) as pilot:
        await type_text(pilot, "start")
        await pilot.press("enter")
        await until(pilot, lambda: "working" in shown(app, ToolView))
        await type_text(pilot, "later")
        await pilot.press("enter")
        await until(pilot, lambda: len(app.query(Chip)) == 1)
        await pilot.press("escape")
        await until(pilot, lambda: "run aborted" in shown(app))
        await until(pilot, lambda: "cancelled by Stop" in shown(app, ChipNote))
        assert "■ bash" in shown(app, ToolView)
        assert " idle " in shown(app, HeaderBar) + " "
    [run] = await stack.client.runs.list(session.id)
    assert run.status == "aborted"
    [item] = await stack.client.inputs.queue(session.id, status=None)
    assert item.status == "cancelled"


@pytest.mark.script(LONG_TOOL)
async def test_leaving_mid_tool_call_leaves_the_run_going_and_coming_back_shows_its_end(
    stack: Stack,
) -> None:
    session = await stack.client.sessions.create()
    link = Link(stack.client)
    async with stack.worker():
        app = ChatApp(link, session.id)
        async with app.run_test(size=(80, 24)) as pilot:
            await type_text(pilot, "start")
            await pilot.press("enter")
            await until(pilot, lambda: "working" in shown(app, ToolView))
            await pilot.press("ctrl+c", "ctrl+c")  # twice: leave
            await pilot.pause()
        assert app.return_value == Left(session.id, run_open=True)
        [run] = await stack.client.runs.list(session.id)
        assert run.status == "running"  # leaving stopped nothing
        let_go(stack, session.id)
        await eventually(lambda: run_finished(stack, session.id), timeout=60)
        back = ChatApp(link, session.id)
        async with back.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "run completed after 2 turn(s)" in shown(back))
            assert "you start" in shown(back)
            assert "✓ bash" in shown(back, ToolView)
            assert "Adjusted as you said." in shown(back)
            # Another client's input shows here too: the chat and the page stay in step.
            await stack.client.inputs.send(session.id, "from the page")
            await until(pilot, lambda: "you from the page" in shown(back))
            await until(pilot, lambda: shown(back).count("run completed") == 2)
            assert "Second." in shown(back)


def screen_text(app: ChatApp) -> str:
    """The screen as text, line by line (what `save_screenshot` draws, without colours)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), force_terminal=True, record=True
    )
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


@pytest.mark.script(LONG_TOOL)
async def test_the_screen_at_80x24(stack: Stack) -> None:
    """A run at work, its tool's output, a queued message: saved as SVG and text
    (tests/screenshots/chat/) and checked to fit 80 columns with every part on screen."""
    session = await stack.client.sessions.create(name="snapshot")
    app = ChatApp(Link(stack.client), session.id)
    async with stack.worker(), app.run_test(size=(80, 24)) as pilot:
        await type_text(pilot, "start")
        await pilot.press("enter")
        await until(pilot, lambda: "working" in shown(app, ToolView))
        await type_text(pilot, "and then the tests")
        await pilot.press("enter")
        await until(pilot, lambda: len(app.query(Chip)) == 1)
        await until(pilot, lambda: "sent: the run is starting" not in shown(app, ChipNote))
        text = screen_text(app)
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        app.save_screenshot("running-80x24.svg", path=str(SNAPSHOTS))
        (SNAPSHOTS / "running-80x24.txt").write_text(text)
        app.theme = "textual-light"  # a light terminal's (--theme light)
        await pilot.pause()
        app.save_screenshot("running-80x24-light.svg", path=str(SNAPSHOTS))
        let_go(stack, session.id)
        await until(pilot, lambda: shown(app).count("run completed") == 2)
    lines = text.rstrip("\n").split("\n")
    assert len(lines) == 24 and all(len(line) <= 80 for line in lines), text
    assert "snapshot · working · turn 1" in lines[0], lines[0]
    assert "you start" in text and "bash" in text and "│ working" in text
    assert "queued and then the tests" in text
    assert "enter send" in lines[-2] + lines[-1], text


ASKS: dict[str, Any] = {
    "conversations": {
        "*": [
            {
                "reply": [
                    {
                        "tool_use": {
                            "id": "call_ask",
                            "name": "ask_user",
                            "input": {"question": "Which database?", "choices": ["SQLite", "PG"]},
                        }
                    }
                ]
            },
            {"reply": [{"text": "Going with it."}]},
        ]
    }
}


@pytest.mark.script(ASKS)
async def test_a_question_is_answered_in_the_conversation(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    app = ChatApp(Link(stack.client), session.id)
    async with stack.worker(), app.run_test(size=(80, 24)) as pilot:
        await stack.client.config.update(session.id, active_tools=["ls", "ask_user"])
        await type_text(pilot, "pick one")
        await pilot.press("enter")
        await until(pilot, lambda: "the agent asks: Which database?" in shown(app))
        await pilot.press("ctrl+r", "2")  # to the question; the second choice
        await until(pilot, lambda: "run completed" in shown(app))
        assert "answered: PG" in shown(app)
    result = [e for e in await stack.client.tree.path(session.id) if "toolResult" in str(e)]
    assert result, "the answer was stored as the call's result"


@pytest.mark.script(
    {"conversations": {"*": [{"match": "^Child", "reply": [{"text": "child answer"}]}]}}
)
async def test_a_sub_agent_shows_nested_and_collapsible(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    call = {"tool_use": {"name": "delegate", "input": {"prompt": "Child: answer", "name": "kid"}}}
    steps: list[dict[str, Any]] = [{"reply": [call]}, {"reply": [{"text": "Parent done."}]}]
    stack.model.add_steps(session.id, steps, replace=True)
    app = ChatApp(Link(stack.client), session.id)
    async with stack.worker(), app.run_test(size=(80, 24)) as pilot:
        await type_text(pilot, "delegate it")
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query(SubAgentView)))
        [block] = app.query(SubAgentView)
        assert block.title.startswith("sub-agent kid")
        nested = block.query_one(ConversationView)
        await until(pilot, lambda: "child answer" in shown_in(nested))
        await until(pilot, lambda: "run completed" in shown_in(app.conversation, nested=False))
        assert "Parent done." in shown(app)
        app.save_screenshot("subagent-80x24.svg", path=str(SNAPSHOTS))
        block.collapsed = True  # folded: its conversation is hidden, the parent's not
        await pilot.pause()
        assert not nested.display or not block.query_one("Contents").display


def shown_in(view: ConversationView, nested: bool = True) -> str:
    """The text of one conversation (with its sub-agents' unless `nested` is False)."""
    widgets = [
        w
        for w in view.query(Static)
        if nested or not any(isinstance(a, SubAgentView) for a in w.ancestors)
    ]
    return "\n".join(getattr(w.content, "plain", str(w.content)) for w in widgets)


# The real command in a terminal ---------------------------------------------------------

_ESCAPES = re.compile(
    rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-B]|\x1b[=>78]"
)


class Terminal:
    """`python -m duragent ARGS` in a pseudo-terminal of 80 columns by 24 lines."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "duragent", *args],
            cwd=REPO,
            env=env,
            stdin=follower,
            stdout=follower,
            stderr=follower,
            start_new_session=True,
        )
        os.close(follower)
        self.screen = bytearray()

    @property
    def text(self) -> str:
        """All it wrote, without the escapes that move the cursor and colour it."""
        return _ESCAPES.sub(b"", bytes(self.screen)).decode(errors="replace")

    def _read(self) -> None:
        try:
            self.screen += os.read(self.leader, 65536)
        except OSError:  # the other side closed: the command ended
            time.sleep(0.05)

    async def until(self, wanted: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while wanted not in self.text:
            assert time.monotonic() < deadline, f"{wanted!r} not shown:\n{self.text[-3000:]}"
            await asyncio.to_thread(self._read)

    def type(self, keys: str) -> None:
        os.write(self.leader, keys.encode())

    async def ended(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            assert time.monotonic() < deadline, self.text[-3000:]
            await asyncio.to_thread(self._read)
        return self.process.returncode

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        os.close(self.leader)


@pytest.mark.script(TOOL_THEN_TEXT)
async def test_in_a_terminal_leave_in_the_middle_of_a_tool_call_and_come_back(
    stack: Stack,
) -> None:
    """The real command at 80x24 with no worker running: it starts one in the
    background; Ctrl+C twice in the middle of the tool call leaves, the run goes on with
    that worker, and `duragent chat SESSION` in another terminal shows its end."""
    session = await stack.client.sessions.create(name="terminal")
    env = {**stack.env(), "TERM": "xterm-256color"}
    for name in ("COLUMNS", "LINES"):
        env.pop(name, None)
    worker = stack.settings.home.resolve() / "background" / "worker.pid"
    first = Terminal(["chat", session.id], env)
    try:
        await first.until("Message the agent")
        assert "Started a worker in the background" in first.text
        first.type("run the script\r")
        await first.until("line-two")
        first.type("\x03\x03")  # Ctrl+C twice: leave
        assert await first.ended() == 0
        assert f"Left session {session.id}: its run goes on with the workers." in first.text
    finally:
        first.close()
    try:
        [run] = await stack.client.runs.list(session.id)
        assert run.status == "running"
        let_go(stack, session.id)
        await eventually(lambda: run_finished(stack, session.id), timeout=60)
        assert (await stack.client.runs.list(session.id))[0].status == "completed"
        second = Terminal(["chat", session.id], env)
        try:
            await second.until("run completed after 2 turn(s)")
            assert "All done." in second.text and "Using the worker" in second.text
            second.type("\x03\x03")
            assert await second.ended() == 0
        finally:
            second.close()
    finally:
        os.killpg(int(worker.read_text()), signal.SIGKILL)


@pytest.mark.script(calls_then_text([bash_call("echo plain-output", "call_plain")], "Plain."))
async def test_without_a_terminal_it_prints_runs_plain_lines(stack: Stack) -> None:
    """A pipe (or TERM=dumb): each line read is a message, the run is printed as
    `duragent run` prints it, and the exit code is the run's."""
    async with stack.worker():
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "duragent",
            "chat",
            cwd=REPO,
            env={**stack.env(), "TERM": "dumb", "COLUMNS": "200"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(b"say hello\n"), timeout=120)
    text = out.decode()
    assert process.returncode == 0, err.decode()
    assert "you say hello" in text and "plain-output" in text, text
    assert "assistant Plain." in text and "run completed after 2 turn(s)" in text, text
    assert "Using the worker" in err.decode()


async def test_a_closed_terminal_ends_the_chat_not_the_session(stack: Stack) -> None:
    """The terminal goes (a window closed, an SSH connection dropped): the chat ends
    within seconds instead of running on with nobody to draw for."""
    session = await stack.client.sessions.create(name="closed")
    env = {**stack.env(), "TERM": "xterm-256color"}
    terminal = Terminal(["chat", session.id], env)
    worker = stack.settings.home.resolve() / "background" / "worker.pid"
    try:
        await terminal.until("Message the agent")
        os.close(terminal.leader)  # hang up: the terminal is gone
        terminal.leader = os.open(os.devnull, os.O_RDONLY)  # for close()
        await asyncio.to_thread(terminal.process.wait, 15)
        assert terminal.process.returncode is not None
    finally:
        terminal.close()
        if worker.exists():
            os.killpg(int(worker.read_text()), signal.SIGKILL)
