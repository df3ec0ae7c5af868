"""What a model can reach through its tools, seen where it matters: the tool result the
model gets back in its next request, and the workspace afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import Stack

from duragent.activities.tools import default_tool_names
from duragent.activities.tools.sandbox import BwrapSandbox, SandboxUnavailable
from duragent.domain.questions import ASK_USER_TOOL
from duragent.worker import build_worker, tool_registry


def tool_result_texts(stack: Stack, session_id: str, request: int) -> list[tuple[bool, str]]:
    """(is_error, text) of each tool_result block in the session's `request`th request."""
    body = [r for r in stack.model.requests_for(session_id) if r.path == "/v1/messages"]
    found = []
    for message in body[request].body["messages"]:
        if message["role"] != "user" or not isinstance(message["content"], list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_result":
                content = block.get("content")
                text = (
                    content
                    if isinstance(content, str)
                    else "".join(c.get("text", "") for c in content or [])
                )
                found.append((bool(block.get("is_error")), text))
    return found


def offered_tools(stack: Stack, session_id: str, request: int) -> list[str]:
    body = [r for r in stack.model.requests_for(session_id) if r.path == "/v1/messages"]
    return [tool["name"] for tool in body[request].body.get("tools", [])]


def bash_then_done(command: str) -> dict[str, Any]:
    return {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": command}}}]},
                {"reply": [{"text": "Done."}]},
            ]
        }
    }


@pytest.mark.script(bash_then_done("touch ran.txt; echo ran"))
async def test_a_tool_that_is_not_active_is_refused_and_never_runs(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.config.set_active_tools(session.id, ["read", "grep"])
        result = await (await stack.client.runs.prompt(session.id, "run it")).result()

    assert result.status == "completed", result.error
    assert offered_tools(stack, session.id, 0) == ["read", "grep"]
    # The model called bash anyway; what it got back names the rule and the active tools.
    ((is_error, text),) = tool_result_texts(stack, session.id, 1)
    assert is_error
    assert "'bash' is not active" in text and "was not run" in text
    assert "Active tools: read, grep." in text
    assert not (Path(session.workspace) / "ran.txt").exists()


async def test_active_tools_set_with_a_session_wide_setting_stay_on_their_branch(
    stack: Stack,
) -> None:
    """Active tools are branch-scoped even when one change also sets a session-wide field:
    a branch that never had the change keeps every tool."""
    session = await stack.client.sessions.create()
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "first")).result()
        before_change = (await stack.client.tree.path(session.id))[-1]
        await stack.client.config.update(
            session.id, system_prompt="Be brief.", active_tools=["read"]
        )
        await (await stack.client.runs.prompt(session.id, "second")).result()
        await stack.client.tree.navigate(session.id, before_change.id)
        await (await stack.client.runs.prompt(session.id, "third, on the old branch")).result()

    everything = [name for name in default_tool_names() if name != ASK_USER_TOOL]  # opt-in
    assert offered_tools(stack, session.id, 0) == everything
    assert offered_tools(stack, session.id, 1) == ["read"]
    assert offered_tools(stack, session.id, 2) == everything
    requests = [r for r in stack.model.requests_for(session.id) if r.path == "/v1/messages"]
    assert "Be brief." in str(requests[2].body["system"])  # session-wide: on every branch


SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-secret-key",
    "DURAGENT_API_TOKENS": "secret-token=alice",
    "DURAGENT_DATABASE_URL": "postgresql+psycopg://app:secret-password@db/duragent",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
}


@pytest.mark.script(bash_then_done("env | sort"))
async def test_bash_gets_only_the_allow_listed_environment(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**SECRETS, "PASSED_THROUGH": "yes", "LC_TIME": "C"}.items():
        monkeypatch.setenv(name, value)
    settings = stack.settings.model_copy(update={"tool_env": ["PASSED_THROUGH", "SET_HERE=1"]})
    session = await stack.client.sessions.create()
    async with build_worker(stack.temporal, stack.db, settings):
        result = await (await stack.client.runs.prompt(session.id, "show the environment")).result()

    assert result.status == "completed", result.error
    ((is_error, text),) = tool_result_texts(stack, session.id, 1)
    assert not is_error, text
    names = {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}
    for secret in SECRETS.values():
        assert secret not in text
    assert not names & set(SECRETS)
    assert {"PATH", "HOME", "LC_TIME", "PASSED_THROUGH", "SET_HERE"} <= names
    assert "SET_HERE=1" in text.splitlines() and "PASSED_THROUGH=yes" in text.splitlines()


def _bwrap_unavailable() -> str | None:
    try:
        BwrapSandbox.create([])
    except SandboxUnavailable as exc:
        return str(exc)
    return None


NO_SANDBOX = _bwrap_unavailable()


@pytest.mark.skipif(NO_SANDBOX is not None, reason=f"no sandbox on this machine: {NO_SANDBOX}")
@pytest.mark.script(bash_then_done("echo made > made.txt; ls -A ..; ls -A ../..; ls ~ | wc -l"))
async def test_a_sandboxed_session_sees_its_workspace_only(stack: Stack) -> None:
    other = await stack.client.sessions.create()
    (Path(other.workspace) / "notes.txt").write_text("another user's notes\n")
    session = await stack.client.sessions.create()
    settings = stack.settings.model_copy(update={"tool_sandbox": "bwrap"})
    async with build_worker(stack.temporal, stack.db, settings, tools=tool_registry(settings)):
        result = await (await stack.client.runs.prompt(session.id, "look around")).result()

    assert result.status == "completed", result.error
    ((is_error, text),) = tool_result_texts(stack, session.id, 1)
    assert not is_error, text
    workspace = Path(session.workspace)
    # Neither the other session's workspace nor the database is there; home is empty.
    assert text.splitlines() == [workspace.name, "workspaces", "0"]
    assert (workspace / "made.txt").read_text() == "made\n"


@pytest.mark.script(bash_then_done("touch ran.txt; echo ran"))
async def test_a_workspace_swapped_for_a_symlink_after_its_check_runs_no_tool(
    stack: Stack, tmp_path: Path
) -> None:
    """The workspace was checked when the session was made; a symlink put in its place
    later (by a tool of another session that can write to the folder above) must not lead
    the session's tools out of it."""
    area, elsewhere = tmp_path / "area", tmp_path / "elsewhere"
    elsewhere.mkdir()
    session = await stack.client.sessions.create(workspace=area / "project")
    Path(session.workspace).rmdir()
    Path(session.workspace).symlink_to(elsewhere)
    async with stack.worker():
        result = await (await stack.client.runs.prompt(session.id, "run it")).result()

    assert result.status == "completed", result.error
    ((is_error, text),) = tool_result_texts(stack, session.id, 1)
    assert is_error
    assert f"now leads to {elsewhere}" in text and "tools do not run there" in text
    assert list(elsewhere.iterdir()) == []
