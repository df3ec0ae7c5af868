"""The CLI's store-side commands as users run them: many at once on a fresh store, bad
input of every kind, long content, narrow terminals and pipes."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from postgres_server import new_database
from sqlalchemy import create_engine
from support import BOTH_STORES, REPO, Stack, eventually, run_finished

from duragent.client.errors import InvalidChange, InvalidPrompt
from duragent.client.history import session_timelines
from duragent.store import events
from duragent.store.db import MIGRATIONS_DIR
from duragent.store.records import StoredEvent

# Each process imports everything, says so, and waits for the go: then all of them open
# the fresh store at the same moment, as `for j in ...; do duragent sessions & done` does.
AT_ONCE = (
    "import os, sys\n"
    "from duragent.client.cli import main\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "sys.argv = ['duragent', 'trigger', 'add', f'at-once-{os.getpid()}', '--new-session',\n"
    "            '--template', 'hello']\n"
    "main()\n"
)
"""A command that stores something, so each of them opens (and migrates) the new store."""


def cli_env(home: Path, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DURAGENT_"))}
    env.update(DURAGENT_HOME=str(home), DURAGENT_DATABASE_URL=database_url, PYTHONPATH=str(REPO))
    return env


def head_revision() -> str:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


@BOTH_STORES
def test_eight_commands_started_at_once_on_a_fresh_store_all_succeed(
    request: pytest.FixtureRequest, tmp_path: Path, database: str
) -> None:
    if database == "postgresql":
        url = new_database(request.getfixturevalue("postgres_server"))
    else:
        url = f"sqlite:///{tmp_path / 'fresh' / 'duragent.db'}"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", AT_ONCE],
            cwd=tmp_path,
            env=cli_env(tmp_path, url),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    try:
        for process in processes:
            assert process.stdout is not None and process.stdout.readline() == "ready\n"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outcomes = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert [code for code, _ in outcomes] == [0] * 8, "\n".join(e for _, e in outcomes)
    engine = create_engine(url)
    with engine.connect() as connection:
        assert MigrationContext.configure(connection).get_current_heads() == (head_revision(),)
    engine.dispose()


# ------------------------------------------------------------------------ running the CLI


@dataclass
class Ran:
    code: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


async def duragent(
    env: dict[str, str], *args: str, columns: int | None = None, tty: bool = False
) -> Ran:
    """The real `duragent` command; on a terminal of `columns` when `tty`, else piped."""
    env = {**env, "COLUMNS": str(columns)} if columns else {k: v for k, v in env.items()}
    if not columns:
        env.pop("COLUMNS", None)
    master, slave = pty.openpty() if tty else (None, None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "duragent.client.cli",
        *args,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=slave if slave is not None else subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        if master is None or slave is None:
            piped, errors = await process.communicate()
            return Ran(await process.wait(), piped.decode(), errors.decode())
        os.close(slave)
        reading = asyncio.create_task(asyncio.to_thread(_read_all, master))
        errors = await process.stderr.read() if process.stderr else b""
        code = await process.wait()
        shown = (await reading).decode(errors="replace")
        return Ran(code, ANSI.sub("", shown).replace("\r\n", "\n"), errors.decode())
    finally:
        if process.returncode is None:  # the test gave up on it: leave nothing running
            process.kill()


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:  # the terminal's other end closed: the command exited
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def unwrapped(text: str) -> str:
    """`text` without any whitespace: a phrase wrapped anywhere on a terminal is found
    in it (without its spaces) just as on one line."""
    return "".join(text.split())


def present(phrase: str, text: str) -> bool:
    return unwrapped(phrase) in unwrapped(text)


# ---------------------------------------------------------------------------- bad input

S = "{session}"
BAD_INPUT = [
    # Unknown session, for every command that takes one.
    (["status", "nope"], "session 'nope' does not exist"),
    (["show", "nope"], "session 'nope' does not exist"),
    (["tree", "nope"], "session 'nope' does not exist"),
    (["history", "nope"], "session 'nope' does not exist"),
    (["queue", "nope"], "session 'nope' does not exist"),
    (["configure", "nope", "--model", "m"], "session 'nope' does not exist"),
    (["compact", "nope"], "session 'nope' does not exist"),
    (["label", "nope", "e", "x"], "session 'nope' does not exist"),
    (["goto", "nope", "e"], "session 'nope' does not exist"),
    (["fork", "nope", "e"], "session 'nope' does not exist"),
    (["guide", "nope", "e"], "session 'nope' does not exist"),
    (["steer", "nope", "x"], "session 'nope' does not exist"),
    (["next-turn", "nope", "x"], "session 'nope' does not exist"),
    # Unknown entries, items and runs.
    (["fork", S, "zzz"], "no entry of session {session} has an id starting 'zzz'"),
    (["label", S, "zzz", "x"], "no entry of session {session} has an id starting 'zzz'"),
    (["goto", S, "zzz"], "no entry of session {session} has an id starting 'zzz'"),
    (["queue", "rm", S, "zzz"], "input 'zzz' does not exist in session {session}"),
    (["history", S, "--run", "zzz"], "run 'zzz' is not a run of session {session}"),
    (["guide", S, "deadbeef"], "input 'deadbeef' does not exist in session {session}"),
    # Option values that parse but are not allowed.
    (
        ["configure", S, "--thinking", "extreme"],
        "--thinking must be one of off, minimal, low, medium, high (got 'extreme')",
    ),
    (
        ["configure", S, "--tools", "read,bogus"],
        "--tools: unknown tool 'bogus'; the tools are read, write, edit, bash, ls, grep, find,"
        " delegate",
    ),
    (
        ["configure", S, "--mcp-servers", "docs"],
        "--mcp-servers: unknown MCP server 'docs'; the servers are none (no MCP config file",
    ),
    (["configure", S, "--steering-mode", "fast"], "--steering-mode must be one of all, one-at"),
    (["configure", S, "--follow-up-mode", "x"], "--follow-up-mode must be one of all, one-at"),
    (["guide", S, "i", "--intent", "now"], "--intent must be one of interrupt, supplement"),
    (["guide", S], "give a queued item's id or --text TEXT"),
    (["guide", S, "i", "--text", "t"], "give a queued item's id or --text TEXT"),
    (["compact", S, "--keep", "-5"], "--keep is a number of tokens, 0 or more (got -5)"),
    (["queue", "a", "b"], "expected `queue SESSION` or `queue rm SESSION ITEM`"),
    # Settings and option values refused before anything is stored or started.
    (["--database-url", "nonsense", "sessions"], "bad setting: database_url: "),
    (["run", "--max-turns", "0", "hi"], "--max-turns is at least 1 (got 0)"),
    # Refused before a run starts, listing what exists.
    (["skill", S, "reviw"], "no skill named 'reviw' in session {session} (available: review;"),
    (["template", S, "x"], "no template named 'x' in session {session} (available: none;"),
]


async def test_every_command_refuses_bad_input_with_one_line_and_exit_2(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    skills = Path(session.workspace) / ".duragent" / "skills"
    skills.mkdir(parents=True)
    (skills / "review.md").write_text("Review the file.\n")
    env = stack.env()
    limit = asyncio.Semaphore(4)

    async def attempt(args: list[str]) -> Ran:
        async with limit:
            return await duragent(env, *(a.format(session=session.id) for a in args))

    results = await asyncio.gather(*(attempt(args) for args, _ in BAD_INPUT))
    wrong = []
    for (args, expected), ran in zip(BAD_INPUT, results, strict=True):
        message = f"error: {expected.format(session=session.id)}"
        lines = ran.error_lines
        # Commands that start services may say so first; the error is the last line.
        if ran.code != 2 or not lines or message not in lines[-1] or "Traceback" in ran.err:
            wrong.append(f"{args}: exit {ran.code}\n{ran.err}")
        elif [line for line in lines if line.startswith("error:")] != lines[-1:]:
            wrong.append(f"{args}: more than one error line\n{ran.err}")
        elif args[0] not in ("skill", "template") and len(lines) != 1:
            wrong.append(f"{args}: not one line\n{ran.err}")
    assert not wrong, "\n\n".join(wrong)
    # Nothing was stored for any of it: no run (not even a failed one), no queued input.
    assert await stack.client.runs.list(session.id) == []
    assert await stack.client.inputs.queue(session.id, status=None) == []


async def test_config_errors_from_the_python_client_are_one_line(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    with pytest.raises(InvalidChange) as thinking:
        await stack.client.config.update(session.id, thinking_level="extreme")  # type: ignore[arg-type]
    assert str(thinking.value) == (
        "thinking_level: Input should be 'off', 'minimal', 'low', 'medium' or 'high'"
        " (got 'extreme')"
    )
    with pytest.raises(InvalidChange) as tools:
        await stack.client.config.set_active_tools(session.id, ["read", "grpe"])
    assert str(tools.value) == (
        "active_tools: unknown tool 'grpe'; the tools are read, write, edit, bash, ls, grep,"
        " find, delegate, ask_user"
    )
    with pytest.raises(InvalidPrompt, match="max_turns must be at least 1"):
        await stack.client.runs.prompt(session.id, "hi", max_turns=0)
    assert await stack.client.runs.list(session.id) == []


# --------------------------------------------------------------------------------- guide

# The tool runs until the test creates `go` in the workspace: the run is busy meanwhile.
WAIT_FOR_GO = "while [ ! -f go ]; do sleep 0.05; done; echo built"


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": WAIT_FOR_GO}}}]},
                {"reply": [{"text": "done"}]},
            ]
        }
    }
)
async def test_guide_takes_a_queued_item_or_text_and_refuses_an_unknown_id(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    env = stack.env()
    async with stack.worker():
        await stack.client.runs.prompt(session.id, "build")
        await eventually(lambda: bool(events_of(stack, session.id, "tool_execution_start")))
        unknown = await duragent(env, "guide", session.id, "deadbeef")
        sent = await duragent(
            env, "guide", session.id, "--text", "use pathlib", "--intent", "supplement"
        )
        queued = await stack.client.inputs.next_turn(session.id, "and log it")
        taken = await duragent(env, "guide", session.id, queued.id)
        (Path(session.workspace) / "go").touch()
        await eventually(lambda: run_finished(stack, session.id))
    assert unknown.code == 2 and unknown.error_lines == [
        f"error: input 'deadbeef' does not exist in session {session.id} "
        "(new text is sent with: duragent guide SESSION --text TEXT)"
    ]
    assert sent.code == 0 and sent.out.startswith("guidance sent: "), sent.err
    assert taken.code == 0 and taken.out.strip() == f"guidance sent: {queued.id}", taken.err
    # The model saw both as guidance, and never the unknown id.
    requests = json.dumps([r.body for r in stack.model.requests_for(session.id)])
    assert "use pathlib" in requests and "and log it" in requests
    assert "deadbeef" not in requests
    items = await stack.client.inputs.queue(session.id, status=None)
    assert sorted(i.text for i in items) == ["and log it", "use pathlib"]
    assert {i.status for i in items} == {"consumed"}


async def test_guide_with_text_on_an_idle_session_keeps_nothing(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    idle = await duragent(stack.env(), "guide", session.id, "--text", "use pathlib")
    assert idle.code == 2 and idle.error_lines == [
        f"error: session {session.id} has no run in progress: cannot take guidance"
    ]
    assert await stack.client.inputs.queue(session.id) == []  # not left for the next run either


def events_of(stack: Stack, session_id: str, event_type: str) -> list[StoredEvent]:
    with stack.db.transaction() as db:
        return [e for e in events.read_events(db, session_id) if e.type == event_type]


# ---------------------------------------------------------------------------------- show

LONG = 250_000


@pytest.mark.timeout(120)  # rendering used to take minutes; it now takes well under a second
@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "y" * LONG}]}]}})
async def test_show_cuts_a_250_kb_unbroken_message_and_full_prints_it(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "x" * LONG)).result()
    env = stack.env()
    for tty in (False, True):
        shown = await duragent(env, "show", session.id, columns=100, tty=tty)
        assert shown.code == 0, shown.err
        assert "x" * 2000 in unwrapped(shown.out) and "x" * 2001 not in unwrapped(shown.out)
        assert present(f"… (+{LONG - 2000:,} characters)", shown.out)
        assert present(f"`duragent show {session.id} --full` prints it whole", shown.out)
    full = await duragent(env, "show", session.id, "--full")
    assert full.code == 0 and "x" * LONG in full.out and "y" * LONG in full.out
    assert "characters)" not in full.out
    as_json = await duragent(env, "show", session.id, "--json")
    assert as_json.code == 0 and "y" * LONG in as_json.out


# --------------------------------------------- history and tables: narrow, wide, piped


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": WAIT_FOR_GO}}}]},
                {"reply": [{"text": "It was interrupted; stopping here."}]},
            ]
        }
    }
)
async def test_history_and_tables_keep_outcome_attempts_and_usage_at_any_width(
    stack: Stack,
) -> None:
    session = await stack.client.sessions.create(name="a session with a long descriptive name")
    worker = stack.spawn_worker()
    try:
        handle = await stack.client.runs.prompt(session.id, "build")
        await eventually(lambda: bool(events_of(stack, session.id, "tool_execution_start")))
        stack.kill(worker)  # the tool call's worker is lost: its lease lapses
        async with stack.worker():
            result = await handle.result()
    finally:
        (Path(session.workspace) / "go").touch()  # a command left running, if any, ends
    (timeline,) = await session_timelines(stack.temporal, session.id)
    calls = [i.details["usage"] for i in timeline.items if i.kind == "model_call"]
    usage = [f"{u['input_tokens']} in / {u['output_tokens']} out tokens" for u in calls]
    total = f"{result.usage.input_tokens} in / {result.usage.output_tokens} out tokens"
    tokens = str(result.usage.total_tokens)
    env = stack.env()
    for columns, tty in ((80, True), (120, True), (80, False), (None, False)):
        where = f"{columns} columns, {'terminal' if tty else 'piped'}"
        history = await duragent(env, "history", session.id, columns=columns, tty=tty)
        assert history.code == 0, history.err
        for phrase in (
            "bash",
            "→ error, interrupted",
            "(2 attempts; the one before: worker lost: ",  # lease or heartbeat timeout
            *usage,
            f"completed: 2 turn(s), {total}",
        ):
            assert present(phrase, history.out), f"{phrase!r} missing at {where}:\n{history.out}"
        assert "http://" not in history.out  # this dev server serves no web UI

        listed = await duragent(env, "sessions", columns=columns, tty=tty)
        shown = await duragent(env, "show", session.id, columns=columns, tty=tty)
        assert listed.code == 0 and shown.code == 0
        for text, phrase in (
            (listed.out, session.id),
            (listed.out, session.config.model),
            (shown.out, result.run_id),
            (shown.out, f"completed {result.turns} {tokens}"),
        ):
            assert present(phrase, text), f"{phrase!r} missing at {where}:\n{text}"
        # A long name wraps within its column: every word of it is there.
        assert all(word in listed.out for word in (session.name or "").split()), listed.out
        if not tty:  # piped: every column, whole, one row a line
            assert f"{session.id}  a session with a long descriptive name" in listed.out
            assert session.workspace in listed.out
            run_line = next(line for line in shown.out.splitlines() if result.run_id in line)
            assert run_line.split()[:4] == [result.run_id, "completed", "2", tokens]


async def test_history_links_the_web_ui_only_where_one_answers(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "hi")).result()
    # Something answering HTTP on the configured UI port (here: the offline model).
    ui_port = stack.model.base_url.rstrip("/").rpartition(":")[2]
    env = {**stack.env(), "DURAGENT_TEMPORAL_UI_PORT": ui_port}
    linked = await duragent(env, "history", session.id)
    assert linked.code == 0, linked.err
    assert f"http://127.0.0.1:{ui_port}/namespaces/default/workflows/session-" in linked.out
    unlinked = await duragent(stack.env(), "history", session.id)
    assert unlinked.code == 0 and "http://" not in unlinked.out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dev_server_started_by_the_cli_serves_its_web_ui_on_the_set_port(
    tmp_path: Path,
) -> None:
    port, ui_port = free_port(), free_port()
    env = {
        **cli_env(tmp_path, f"sqlite:///{tmp_path / 'duragent.db'}"),
        "DURAGENT_TEMPORAL_UI_PORT": str(ui_port),
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "duragent.client.cli",
            f"--temporal-address=127.0.0.1:{port}",
            "dev-server",
        ],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        started = next(line for line in server.stderr if "Started a Temporal dev server" in line)
        assert f"web UI: http://127.0.0.1:{ui_port}" in started
        assert httpx.get(f"http://127.0.0.1:{ui_port}", timeout=30).status_code < 500
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
