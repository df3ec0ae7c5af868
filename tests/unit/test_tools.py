"""Built-in tools against a real temporary workspace and real subprocesses."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from duragent.activities.tools import (
    BashTool,
    Tool,
    ToolContext,
    ToolInputError,
    ToolRegistry,
    default_tools,
    process_group_alive,
    running_process_groups,
)
from duragent.activities.tools.environment import tool_environment
from duragent.activities.tools.find import GlobMatcher
from duragent.activities.tools.paths import resolve_in_workspace
from duragent.activities.tools.truncation import truncate_head, truncate_tail
from duragent.domain.messages import ImageContent, TextContent
from duragent.domain.tools import ToolResult, ToolTraits
from duragent.settings import Settings, parse_tool_env

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace.resolve()


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws)


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(default_tools())


def text(result: ToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def run(registry: ToolRegistry, ctx: ToolContext, name: str, **args: Any) -> ToolResult:
    return await registry.run(name, args, ctx)


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


# --- registry ------------------------------------------------------------------------


class _NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _FailingTool(Tool[_NoArgs]):
    name = "failing"
    description = "Always fails."
    args_model = _NoArgs
    traits: ClassVar[ToolTraits] = ToolTraits(execution="sequential")

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def execute(self, args: _NoArgs, ctx: ToolContext) -> ToolResult:
        raise self.exc


async def test_delegate_never_runs_as_a_tool_activity(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    """The workflow answers delegate calls with a sub-agent; a call that reaches the tool
    by mistake fails loudly instead of looking like an answer."""
    result = await run(registry, ctx, "delegate", prompt="do it")
    assert result.is_error
    assert "never as a tool activity" in result.content[0].text  # type: ignore[union-attr]


def test_registry_order_traits_and_duplicates(registry: ToolRegistry) -> None:
    assert registry.names() == [
        *("read", "write", "edit", "bash", "ls", "grep", "find", "delegate", "ask_user")
    ]
    for name in ("read", "ls", "grep", "find"):
        assert registry.traits_of(name) == ToolTraits(retry_safe=True)
    for name in ("write", "edit", "bash"):
        assert registry.traits_of(name) == ToolTraits(retry_safe=False)
    assert registry.traits_of("delegate") == ToolTraits(child_session=True)
    assert registry.traits_of("nope") == ToolTraits(known=False)
    registry.register(_FailingTool(OSError()))
    assert registry.traits_of("failing").execution == "sequential"
    with pytest.raises(ValueError, match="already registered"):
        registry.register(_FailingTool(OSError()))
    assert registry.get("read") is not None and registry.get("nope") is None


def test_api_specs_shapes(registry: ToolRegistry) -> None:
    specs: list[Any] = registry.api_specs(None)  # typed for the SDK; read as plain JSON
    assert [s["name"] for s in specs] == registry.offered(None)
    assert registry.offered(None) == registry.names()[:-1]  # all but the opt-in ask_user
    for spec in specs:
        assert set(spec) == {"name", "description", "input_schema"}
        schema = spec["input_schema"]
        assert schema["type"] == "object"
        assert isinstance(schema["properties"], dict) and isinstance(schema["required"], list)
        dumped = json.dumps(schema)
        assert '"title"' not in dumped and "$defs" not in dumped and "anyOf" not in dumped
        for prop in schema["properties"].values():
            assert prop.get("description"), spec["name"]
    read = specs[0]["input_schema"]
    assert read["required"] == ["path"]
    assert read["properties"]["offset"] == {
        "type": "integer",
        "minimum": 1,
        "description": read["properties"]["offset"]["description"],
    }
    assert read["additionalProperties"] is False
    by_name = {s["name"]: s["input_schema"] for s in specs}
    assert by_name["edit"]["required"] == ["path", "old_text", "new_text"]
    assert by_name["bash"]["properties"]["timeout"]["type"] == "number"
    assert by_name["grep"]["required"] == ["pattern"]
    assert by_name["ls"]["required"] == []
    # Active names filter but keep registry order; unknown names are ignored.
    active = registry.api_specs(["find", "read", "missing"])
    assert [s["name"] for s in active] == ["read", "find"]


async def test_run_unknown_tool(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "fly", to="moon")
    assert result.is_error
    assert text(result) == (
        "Tool 'fly' not found. Available tools: read, write, edit, bash, ls, grep, find, delegate, "
        "ask_user"
    )


async def test_run_invalid_args(registry: ToolRegistry, ctx: ToolContext) -> None:
    missing = await run(registry, ctx, "read")
    assert missing.is_error
    assert text(missing) == "Invalid arguments for tool 'read': path: Field required"
    several = await run(registry, ctx, "read", path="a", offset=0, color="red")
    message = text(several)
    assert message.startswith("Invalid arguments for tool 'read': ")
    assert "offset:" in message and "color: Extra inputs are not permitted" in message
    wrong_type = await run(registry, ctx, "bash", command="true", timeout="soon")
    assert "timeout:" in text(wrong_type)
    not_a_dict = await registry.run("read", ["a"], ctx)  # type: ignore[arg-type]
    assert not_a_dict.is_error and "JSON object" in text(not_a_dict)


async def test_run_turns_failures_into_error_results(ctx: ToolContext) -> None:
    registry = ToolRegistry([_FailingTool(PermissionError(13, "Permission denied", "/x"))])
    result = await registry.run("failing", {}, ctx)
    assert result.is_error and text(result) == "Tool 'failing' failed: Permission denied: /x"
    registry = ToolRegistry([_FailingTool(RuntimeError("boom"))])
    result = await registry.run("failing", {}, ctx)
    assert result.is_error and "RuntimeError: boom" in text(result)
    registry = ToolRegistry([_FailingTool(ToolInputError("bad thing"))])
    result = await registry.run("failing", {}, ctx)
    assert text(result) == "Invalid arguments for tool 'failing': bad thing"


# --- workspace containment -----------------------------------------------------------


def test_resolve_in_workspace(ws: Path, tmp_path: Path) -> None:
    assert resolve_in_workspace(ws, "a/b.txt") == ws / "a" / "b.txt"
    assert resolve_in_workspace(ws, str(ws / "x")) == ws / "x"
    assert resolve_in_workspace(ws, ".") == ws
    assert resolve_in_workspace(ws, "a/../b") == ws / "b"
    with pytest.raises(ToolInputError, match=r"path '\.\./x' is outside the workspace"):
        resolve_in_workspace(ws, "../x")
    with pytest.raises(ToolInputError, match="outside the workspace"):
        resolve_in_workspace(ws, str(tmp_path))
    (ws / "out").symlink_to(tmp_path)
    with pytest.raises(ToolInputError, match="outside the workspace"):
        resolve_in_workspace(ws, "out/secret.txt")


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read", {"path": "../secret.txt"}),
        ("read", {"path": "SECRET_ABS"}),
        ("read", {"path": "link/secret.txt"}),
        ("read", {"path": "file_link"}),
        ("write", {"path": "link/new.txt", "content": "x"}),
        ("write", {"path": "../new.txt", "content": "x"}),
        ("edit", {"path": "file_link", "old_text": "top", "new_text": "x"}),
        ("ls", {"path": "link"}),
        ("grep", {"pattern": "top", "path": "link"}),
        ("find", {"pattern": "*", "path": ".."}),
    ],
)
async def test_paths_cannot_escape(
    registry: ToolRegistry, ctx: ToolContext, ws: Path, tool: str, args: dict[str, Any]
) -> None:
    outside = ws.parent
    (outside / "secret.txt").write_text("top secret\n")
    (ws / "link").symlink_to(outside)
    (ws / "file_link").symlink_to(outside / "secret.txt")
    args = {k: str(outside / "secret.txt") if v == "SECRET_ABS" else v for k, v in args.items()}
    result = await registry.run(tool, args, ctx)
    assert result.is_error
    assert "outside the workspace" in text(result)
    assert "top secret" not in text(result)
    assert not (outside / "new.txt").exists()
    assert (outside / "secret.txt").read_text() == "top secret\n"


# --- read ----------------------------------------------------------------------------


async def test_read_text_and_windows(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    whole = await run(registry, ctx, "read", path="f.txt")
    assert not whole.is_error
    assert text(whole) == "\n".join(f"line {i}" for i in range(1, 11))
    assert whole.details == {
        "path": "f.txt",
        "start_line": 1,
        "end_line": 10,
        "total_lines": 10,
        "truncated": False,
    }
    part = await run(registry, ctx, "read", path=str(ws / "f.txt"), offset=3, limit=2)
    assert text(part) == "line 3\nline 4\n\n[6 more lines in file. Use offset=5 to continue.]"
    tail = await run(registry, ctx, "read", path="f.txt", offset=9)
    assert text(tail) == "line 9\nline 10"
    beyond = await run(registry, ctx, "read", path="f.txt", offset=11)
    assert beyond.is_error and "beyond the end" in text(beyond)


async def test_read_truncates_long_files(
    registry: ToolRegistry, ctx: ToolContext, ws: Path
) -> None:
    (ws / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 3001)))
    result = await run(registry, ctx, "read", path="long.txt")
    body, notice = text(result).split("\n\n")
    assert body.splitlines() == [str(i) for i in range(1, 2001)]
    assert notice == "[Showing lines 1-2000 of 3000. Use offset=2001 to continue.]"
    assert result.details is not None and result.details["truncated"] is True

    (ws / "wide.txt").write_text(("x" * 999 + "\n") * 100)  # 100 KB in 1000-byte lines
    wide = await run(registry, ctx, "read", path="wide.txt")
    body, notice = text(wide).split("\n\n")
    assert len(body.encode()) <= 50 * 1024
    assert notice == "[Showing lines 1-51 of 100 (50 KB limit). Use offset=52 to continue.]"

    (ws / "one.txt").write_text("y" * 60_000 + "\nnext\n")
    one = await run(registry, ctx, "read", path="one.txt")
    assert text(one).startswith("y" * 1000)
    assert "Line 1 is longer than 50 KB" in text(one) and "offset=2" in text(one)


async def test_read_errors_and_special_files(
    registry: ToolRegistry, ctx: ToolContext, ws: Path
) -> None:
    missing = await run(registry, ctx, "read", path="nope.txt")
    assert missing.is_error and text(missing) == "File not found: nope.txt"
    (ws / "d").mkdir()
    assert "is a directory" in text(await run(registry, ctx, "read", path="d"))
    (ws / "bin.dat").write_bytes(b"\x00\x01\x02")
    assert "binary" in text(await run(registry, ctx, "read", path="bin.dat"))
    (ws / "empty.txt").write_text("")
    assert text(await run(registry, ctx, "read", path="empty.txt")) == "(empty file)"
    (ws / "blank.txt").write_text("\n\n")
    assert text(await run(registry, ctx, "read", path="blank.txt")) == "(2 blank lines)"
    (ws / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    assert text(await run(registry, ctx, "read", path="crlf.txt")) == "a\nb"


async def test_read_image(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "dot.PNG").write_bytes(PNG)
    result = await run(registry, ctx, "read", path="dot.PNG")
    assert not result.is_error
    image = result.content[1]
    assert isinstance(image, ImageContent)
    assert image.media_type == "image/png"
    assert base64.b64decode(image.data) == PNG
    assert result.details == {"path": "dot.PNG", "media_type": "image/png", "bytes": len(PNG)}


# --- write and edit ------------------------------------------------------------------


async def test_write(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    result = await run(registry, ctx, "write", path="a/b/c.txt", content="héllo\n")
    assert not result.is_error
    assert text(result) == "Wrote 7 bytes to a/b/c.txt"
    assert result.details == {"path": "a/b/c.txt", "bytes": 7}
    assert (ws / "a/b/c.txt").read_text() == "héllo\n"
    await run(registry, ctx, "write", path="a/b/c.txt", content="new")
    assert (ws / "a/b/c.txt").read_text() == "new"
    on_dir = await run(registry, ctx, "write", path="a", content="x")
    assert on_dir.is_error and "is a directory" in text(on_dir)


async def test_edit(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    path = ws / "m.py"
    path.write_text("def f():\n    return 1\n\ndef g():\n    return 1\n")
    result = await run(
        registry,
        ctx,
        "edit",
        path="m.py",
        old_text="def g():\n    return 1",
        new_text="def g():\n    return 2",
    )
    assert not result.is_error, text(result)
    assert path.read_text() == "def f():\n    return 1\n\ndef g():\n    return 2\n"
    assert result.details is not None
    assert result.details["first_changed_line"] == 4
    diff = result.details["diff"]
    assert diff.startswith("--- a/m.py\n+++ b/m.py\n")
    assert "-    return 1\n+    return 2\n" in diff

    twice = await run(registry, ctx, "edit", path="m.py", old_text="return", new_text="yield")
    assert twice.is_error and "found 2 times" in text(twice) and "context" in text(twice)
    absent = await run(registry, ctx, "edit", path="m.py", old_text="return 3", new_text="x")
    assert absent.is_error and "not found" in text(absent)
    missing = await run(registry, ctx, "edit", path="no.py", old_text="a", new_text="b")
    assert missing.is_error and "File not found" in text(missing)
    empty = await run(registry, ctx, "edit", path="m.py", old_text="", new_text="b")
    assert empty.is_error and "old_text" in text(empty)
    assert path.read_text() == "def f():\n    return 1\n\ndef g():\n    return 2\n"


async def test_edit_keeps_crlf(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = await run(registry, ctx, "edit", path="w.txt", old_text="one\ntwo", new_text="1\n2")
    assert not result.is_error, text(result)
    assert (ws / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


# --- ls, find, grep ------------------------------------------------------------------


async def test_ls(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    for name in ("b.txt", "A.txt", ".env"):
        (ws / name).write_text("")
    (ws / "src").mkdir()
    result = await run(registry, ctx, "ls")
    assert text(result) == ".env\nA.txt\nb.txt\nsrc/"
    limited = await run(registry, ctx, "ls", path=".", limit=2)
    assert (
        text(limited) == ".env\nA.txt\n\n[Showing 2 of 4 entries. Use a larger limit to see more.]"
    )
    assert limited.details is not None and limited.details["truncated"] is True
    assert text(await run(registry, ctx, "ls", path="src")) == "(empty directory)"
    assert (await run(registry, ctx, "ls", path="b.txt")).is_error
    assert (await run(registry, ctx, "ls", path="nope")).is_error


@pytest.fixture
def tree(ws: Path) -> Path:
    files = {
        "README.md": "hello world\n",
        "src/app.py": "import os\n\ndef main():\n    print('Hello')\n    return 0\n",
        "src/util.py": "def helper():\n    return 'hello'\n",
        "src/web/index.ts": "export const hello = 1;\n",
        "src/web/view.tsx": "const Hello = () => null;\n",
        "src/a.ts": "hello.ts\n",
        ".git/config": "hello from git\n",
        "node_modules/pkg/index.js": "hello\n",
        ".venv/lib.py": "hello\n",
    }
    for name, content in files.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(content)
    (ws / "src/blob.bin").write_bytes(b"hello\x00world")
    return ws


async def test_find(registry: ToolRegistry, ctx: ToolContext, tree: Path) -> None:
    assert text(await run(registry, ctx, "find", pattern="*.py")) == "src/app.py\nsrc/util.py"
    assert text(await run(registry, ctx, "find", pattern="src/**/*.ts")) == (
        "src/a.ts\nsrc/web/index.ts"
    )
    assert text(await run(registry, ctx, "find", pattern="*.{ts,tsx}", path="src/web")) == (
        "src/web/index.ts\nsrc/web/view.tsx"
    )
    assert text(await run(registry, ctx, "find", pattern="web")) == "src/web/"
    limited = await run(registry, ctx, "find", pattern="*", limit=3)
    assert len(text(limited).split("\n\n")[0].splitlines()) == 3
    assert "[Stopped after 3 results" in text(limited)
    none = await run(registry, ctx, "find", pattern="*.rs")
    assert not none.is_error and "No files found" in text(none)
    assert (await run(registry, ctx, "find", pattern="*", path="README.md")).is_error


def test_glob_matcher() -> None:
    assert GlobMatcher("*.py").matches("a/b/c.py")
    assert not GlobMatcher("*.py").matches("a/b/c.pyc")
    assert GlobMatcher("src/**/*.ts").matches("src/a.ts")
    assert GlobMatcher("src/**/*.ts").matches("src/x/y/a.ts")
    assert not GlobMatcher("src/**/*.ts").matches("lib/src/a.ts")
    assert GlobMatcher("src/*").matches("src/a") and not GlobMatcher("src/*").matches("src/a/b")
    assert GlobMatcher("**/test_?.py").matches("test_a.py")
    assert GlobMatcher("[!a]*.txt").matches("b.txt") and not GlobMatcher("[!a]*.txt").matches(
        "a.txt"
    )
    assert GlobMatcher("./docs/**").matches("docs/x/y.md")
    assert GlobMatcher("a+b(1).txt").matches("a+b(1).txt")


async def test_grep(registry: ToolRegistry, ctx: ToolContext, tree: Path) -> None:
    result = await run(registry, ctx, "grep", pattern="hello")
    assert text(result) == (
        "README.md:1: hello world\n"
        "src/a.ts:1: hello.ts\n"
        "src/util.py:2:     return 'hello'\n"
        "src/web/index.ts:1: export const hello = 1;"
    )
    assert result.details == {"matches": 4, "files": 4, "truncated": False}
    nocase = await run(registry, ctx, "grep", pattern="hello", ignore_case=True, glob="*.py")
    assert text(nocase) == "src/app.py:4:     print('Hello')\nsrc/util.py:2:     return 'hello'"
    literal = await run(registry, ctx, "grep", pattern="hello.ts", literal=True)
    assert text(literal) == "src/a.ts:1: hello.ts"
    single = await run(registry, ctx, "grep", pattern=r"def \w+", path="src/util.py")
    assert text(single) == "src/util.py:1: def helper():"
    none = await run(registry, ctx, "grep", pattern="absent_thing")
    assert not none.is_error and text(none) == "No matches found."
    bad = await run(registry, ctx, "grep", pattern="(unclosed")
    assert bad.is_error
    assert text(bad).startswith("Invalid arguments for tool 'grep': invalid regular expression")


async def test_grep_context_and_limit(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    (ws / "a.txt").write_text(
        "".join(f"{'hit' if i in (3, 9) else 'x'} {i}\n" for i in range(1, 13))
    )
    (ws / "b.txt").write_text("hit b\n")
    result = await run(registry, ctx, "grep", pattern="hit", context=1)
    assert text(result) == (
        "a.txt-2- x 2\na.txt:3: hit 3\na.txt-4- x 4\n--\n"
        "a.txt-8- x 8\na.txt:9: hit 9\na.txt-10- x 10\n--\n"
        "b.txt:1: hit b"
    )
    limited = await run(registry, ctx, "grep", pattern="hit", limit=1, context=1)
    assert text(limited).startswith("a.txt-2- x 2\na.txt:3: hit 3\na.txt-4- x 4\n\n[Stopped at 1")
    assert limited.details is not None and limited.details["truncated"] is True


async def test_grep_skips_links_out_of_the_workspace(
    registry: ToolRegistry, ctx: ToolContext, ws: Path
) -> None:
    (ws.parent / "secret.txt").write_text("password\n")
    (ws / "leak.txt").symlink_to(ws.parent / "secret.txt")
    (ws / "dir_link").symlink_to(ws.parent)
    (ws / "real.txt").write_text("password here\n")
    (ws / "inside_link.txt").symlink_to(ws / "real.txt")
    result = await run(registry, ctx, "grep", pattern="password")
    assert text(result) == "inside_link.txt:1: password here\nreal.txt:1: password here"


def test_truncate_helpers() -> None:
    text_ = "".join(f"{i}\n" for i in range(10))
    head = truncate_head(text_, max_lines=3)
    assert head.text == "0\n1\n2" and head.truncated_by == "lines" and head.total_lines == 10
    tail = truncate_tail(text_, max_lines=3)
    assert tail.text == "7\n8\n9" and tail.output_lines == 3
    by_bytes = truncate_tail("aaaa\nbbbb\ncccc", max_bytes=10)
    assert by_bytes.text == "bbbb\ncccc" and by_bytes.truncated_by == "bytes"
    partial = truncate_tail("ééééé", max_bytes=5)
    assert partial.text == "éé" and partial.partial_line
    untouched = truncate_head("a\nb\n")
    assert untouched.text == "a\nb\n" and not untouched.truncated


# --- bash ----------------------------------------------------------------------------


async def test_bash_success_and_failure(registry: ToolRegistry, ctx: ToolContext, ws: Path) -> None:
    ok = await run(registry, ctx, "bash", command="pwd; echo err >&2; cat")
    assert not ok.is_error
    assert text(ok) == f"{ws}\nerr"  # cwd is the workspace, stderr merged, stdin empty
    assert ok.details is not None
    assert ok.details["exit_code"] == 0 and ok.details["timed_out"] is False
    assert ok.details["truncated"] is False and isinstance(ok.details["pid"], int)

    failed = await run(registry, ctx, "bash", command="echo oops; exit 3")
    assert failed.is_error
    assert text(failed) == "oops\n\nCommand exited with code 3."
    assert failed.details is not None and failed.details["exit_code"] == 3

    silent = await run(registry, ctx, "bash", command="true")
    assert text(silent) == "(no output)"
    killed = await run(registry, ctx, "bash", command="kill -KILL $$")
    assert killed.is_error and "killed by signal SIGKILL" in text(killed)


async def test_bash_truncates_to_the_tail(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "bash", command="seq 1 5000")
    body, notice = text(result).split("\n\n")
    assert body.splitlines() == [str(i) for i in range(3001, 5001)]
    assert notice.startswith("[Output truncated: showing the last 2000 of 5000 lines")
    assert result.details is not None and result.details["truncated"] is True
    big = await run(registry, ctx, "bash", command="head -c 3000000 /dev/zero | tr '\\0' x")
    assert len(text(big).encode()) < 52 * 1024 and "Output truncated" in text(big)


async def test_bash_streams_updates(registry: ToolRegistry, ws: Path) -> None:
    updates: list[str] = []
    first = asyncio.Event()

    def on_update(chunk: str) -> None:
        updates.append(chunk)
        first.set()

    ctx = ToolContext(workspace=ws, on_update=on_update)
    task = asyncio.create_task(
        registry.run("bash", {"command": "echo one; sleep 0.5; echo two >&2"}, ctx)
    )
    await asyncio.wait_for(first.wait(), timeout=2)
    assert updates == ["one\n"]
    assert not task.done()  # the first chunk arrived while the command was still running
    result = await task
    assert "".join(updates) == "one\ntwo\n"
    assert text(result) == "one\ntwo"


async def test_bash_survives_a_failing_observer(registry: ToolRegistry, ws: Path) -> None:
    def on_update(chunk: str) -> None:
        raise RuntimeError("observer broke")

    result = await registry.run("bash", {"command": "echo hi"}, ToolContext(ws, on_update))
    assert not result.is_error and text(result) == "hi"


async def test_bash_timeout_kills_the_group(registry: ToolRegistry, ctx: ToolContext) -> None:
    started = time.monotonic()
    result = await run(
        registry, ctx, "bash", command="echo start; sleep 30 & sleep 30", timeout=0.5
    )
    assert time.monotonic() - started < 3
    assert result.is_error
    # Output up to the kill is kept (bash may add its own "Terminated" line).
    assert text(result).startswith("start\n")
    assert text(result).endswith("\n\nCommand timed out after 0.5 seconds and was killed.")
    assert result.details is not None and result.details["timed_out"] is True
    pgid = result.details["pid"]
    assert not process_group_alive(pgid)
    assert pgid not in running_process_groups()


async def test_bash_cancellation_kills_the_group(registry: ToolRegistry, ws: Path) -> None:
    updates: list[str] = []
    ctx = ToolContext(workspace=ws, on_update=updates.append)
    before = running_process_groups()
    task = asyncio.create_task(
        registry.run("bash", {"command": "sleep 100 & sleep 100; echo never"}, ctx)
    )
    deadline = time.monotonic() + 5
    while not (running_process_groups() - before) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    (pgid,) = running_process_groups() - before
    await asyncio.sleep(0.2)  # let bash start both sleeps
    assert os.getpgid(pgid) == pgid and not group_gone(pgid)

    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    while not group_gone(pgid) and time.monotonic() - cancelled_at < 1:
        await asyncio.sleep(0.005)
    elapsed = time.monotonic() - cancelled_at
    assert group_gone(pgid), f"process group {pgid} still exists after {elapsed:.2f}s"
    assert elapsed < 1
    assert pgid not in running_process_groups()
    assert "never" not in "".join(updates)


async def test_bash_stops_background_jobs_holding_the_output(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    started = time.monotonic()
    result = await run(registry, ctx, "bash", command="sleep 100 & echo hi")
    assert time.monotonic() - started < 3
    assert not result.is_error
    assert text(result).startswith("hi\n\n[Background processes still held the output open")
    assert result.details is not None
    assert not process_group_alive(result.details["pid"])


async def test_bash_leaves_redirected_background_jobs_running(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await run(registry, ctx, "bash", command="sleep 100 > /dev/null 2>&1 & echo $!")
    assert not result.is_error and text(result).isdigit()
    assert result.details is not None
    pgid = result.details["pid"]
    try:
        os.kill(int(text(result)), 0)  # still running: intentional daemons survive the call
        assert process_group_alive(pgid)
    finally:
        os.killpg(pgid, signal.SIGKILL)


async def test_bash_runs_nothing_until_its_process_is_recorded(ws: Path) -> None:
    """The command waits at the gate while the caller records its group (slowly here)."""
    seen: list[tuple[int, bool]] = []

    def on_process(pgid: int) -> None:
        time.sleep(0.3)  # a slow durable record: the command must not run meanwhile
        seen.append((pgid, (ws / "ran.txt").exists()))

    registry = ToolRegistry([BashTool()])
    result = await registry.run(
        "bash", {"command": "touch ran.txt; cat"}, ToolContext(ws, on_process=on_process)
    )
    assert not result.is_error, text(result)
    assert result.details is not None
    assert seen == [(result.details["pid"], False)]
    assert (ws / "ran.txt").exists()  # and once recorded, it ran, with an empty stdin
    assert text(result) == "(no output)"


async def test_bash_that_cannot_record_its_process_never_runs_it(ws: Path) -> None:
    groups: list[int] = []

    def on_process(pgid: int) -> None:
        groups.append(pgid)
        time.sleep(0.3)
        raise OSError(28, "No space left on device")

    registry = ToolRegistry([BashTool()])
    result = await registry.run(
        "bash", {"command": "touch ran.txt"}, ToolContext(ws, on_process=on_process)
    )
    assert result.is_error and "No space left on device" in text(result)
    (pgid,) = groups
    assert not process_group_alive(pgid)
    assert not (ws / "ran.txt").exists()


async def test_bash_gets_only_an_allow_listed_environment(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    default = await ToolRegistry([BashTool()]).run("bash", {"command": "env"}, ToolContext(ws))
    assert "sk-ant-secret" not in text(default)
    assert "LC_ALL=C.UTF-8" in text(default).splitlines()
    given = ToolRegistry([BashTool(env={"PATH": os.environ["PATH"], "ONLY": "this"})])
    shown = await given.run("bash", {"command": "env"}, ToolContext(ws))
    names = {line.split("=", 1)[0] for line in text(shown).splitlines()}
    assert names - {"PWD", "SHLVL", "_"} == {"PATH", "ONLY"}


def test_tool_environment_allow_list() -> None:
    source = {
        "PATH": "/bin",
        "HOME": "/home/a",
        "LC_TIME": "C",
        "ANTHROPIC_API_KEY": "secret",
        "DURAGENT_DATABASE_URL": "postgresql://u:pw@h/db",
        "PIP_INDEX_URL": "https://pypi.example",
        "GOPATH": "/go",
    }
    assert tool_environment(source=source) == {"PATH": "/bin", "HOME": "/home/a", "LC_TIME": "C"}
    extra = ["GOPATH", "PIP_*", "CI=1", "HOME=/scratch", "MISSING"]
    assert tool_environment(extra, source=source) == {
        "PATH": "/bin",
        "HOME": "/scratch",
        "LC_TIME": "C",
        "GOPATH": "/go",
        "PIP_INDEX_URL": "https://pypi.example",
        "CI": "1",
    }


def test_tool_settings_are_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert parse_tool_env(" GOPATH , CI=1,PIP_*,, ") == ["GOPATH", "CI=1", "PIP_*"]
    for bad in ("1ABC", "A B", "PIP_*=x", "*", "=x"):
        with pytest.raises(ValueError, match=r"DURAGENT_TOOL_ENV: .* is not NAME"):
            parse_tool_env(bad)
    monkeypatch.setenv("DURAGENT_TOOL_ENV", "GOPATH,CI=1")
    monkeypatch.setenv("DURAGENT_TOOL_SANDBOX", "BWRAP")
    settings = Settings.from_env(home=tmp_path)
    assert settings.tool_env == ["GOPATH", "CI=1"] and settings.tool_sandbox == "bwrap"
    monkeypatch.setenv("DURAGENT_TOOL_SANDBOX", "docker")
    with pytest.raises(
        ValueError, match="DURAGENT_TOOL_SANDBOX: 'docker' is not one of none, bwrap"
    ):
        Settings.from_env(home=tmp_path)
