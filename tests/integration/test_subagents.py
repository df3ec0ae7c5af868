"""Sub-agents: a `delegate` call runs a session of its own as a child workflow.

The parent session's model plays steps queued under its session id; every sub-agent's
session (its id is made by the run) plays its own copy of the script's "*" steps, whose
`match` picks the step by the sub-agent's prompt.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import wire
from rich.console import Console
from support import (
    BOTH_PROTOCOLS,
    UNTIL_GO,
    ApiServer,
    Stack,
    assert_valid_pairing,
    event_seen,
    eventually,
    let_go,
    run_finished,
    transcript_roles,
    user_texts,
)

from duragent.activities.tools import process_group_alive
from duragent.client.history import RunTimeline, render, session_timelines
from duragent.domain.approvals import ApprovalPolicy, ApprovalRule
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, Usage, text_of
from duragent.domain.subagents import DELEGATE_TOOL
from duragent.store.records import SessionRecord


def delegate(prompt: str, name: str | None = None, **more: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"prompt": prompt, **more}
    if name is not None:
        args["name"] = name
    return {"tool_use": {"name": DELEGATE_TOOL, "input": args}}


def bash(command: str) -> dict[str, Any]:
    return {"tool_use": {"name": "bash", "input": {"command": command}}}


def usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of a Messages API request's last user message."""
    last = [m for m in body["messages"] if m["role"] == "user"][-1]
    return [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in block["content"])


def tool_names(body: dict[str, Any]) -> list[str]:
    return wire.offered_tools(body)


def children_of(stack: Stack, session_id: str) -> list[SessionRecord]:
    return stack.client.sync.sessions.children(session_id)


async def child_made(stack: Stack, session_id: str, count: int = 1) -> list[SessionRecord]:
    await eventually(lambda: len(children_of(stack, session_id)) >= count)
    return children_of(stack, session_id)


def plays(stack: Stack, session_id: str, steps: list[dict[str, Any]]) -> None:
    """The session's model plays `steps` (not the "*" steps, which are the sub-agents')."""
    stack.model.add_steps(session_id, steps, replace=True)


def delegate_results(stack: Stack, session_id: str) -> list[ToolResultMessage]:
    return [
        e.message
        for e in stack.client.sync.tree.path(session_id)
        if isinstance(e, MessageEntry)
        and isinstance(e.message, ToolResultMessage)
        and e.message.tool_name == DELEGATE_TOOL
    ]


TWO_CHILDREN = {
    "conversations": {
        "*": [
            # Each sub-agent's answer waits until both have asked: they run at once.
            {
                "match": "^Child A",
                "wait_for": "both",
                "usage": usage(7, 3),
                "reply": [{"text": "alpha answer"}],
            },
            {
                "match": "^Child B",
                "wait_for": "both",
                "usage": usage(11, 5),
                "reply": [{"text": "beta answer"}],
            },
        ]
    }
}


@pytest.mark.script(TWO_CHILDREN)
@BOTH_PROTOCOLS
async def test_two_sub_agents_run_in_parallel_and_answer_the_parent(stack: Stack) -> None:
    parent = await stack.client.sessions.create(name="lead")
    plays(
        stack,
        parent.id,
        [
            {
                "usage": usage(100, 10),
                "reply": [
                    delegate("Child A: say alpha", name="alpha"),
                    delegate("Child B: say beta", name="beta", tools=["read", "ls"]),
                ],
            },
            {"usage": usage(200, 20), "reply": [{"text": "Both done."}]},
        ],
    )
    async with stack.worker():
        run = await stack.client.runs.prompt(parent.id, "split the work")
        children = await child_made(stack, parent.id, 2)
        # Both sub-agents asked the model before either was answered: they run in parallel.
        await eventually(lambda: all(stack.model.requests_for(c.id) for c in children))
        stack.model.release("both")
        result = await asyncio.wait_for(run.result(), timeout=60)

    assert result.status == "completed", result.error
    assert result.final_text == "Both done."
    _, second = (r.body for r in stack.model.requests_for(parent.id))
    call_ids = [call_id for call_id, _ in wire.last_calls(second)]
    # At the wire: the parent's next turn carries each sub-agent's answer as its result.
    results = wire.tool_results(second)
    assert [r.call_id for r in results] == call_ids
    assert [r.text for r in results] == ["alpha answer", "beta answer"]
    assert not any(r.is_error for r in results)

    by_name = {c.name or "": c for c in children_of(stack, parent.id)}
    assert sorted(by_name) == ["alpha", "beta"]
    for child, call_id in zip((by_name["alpha"], by_name["beta"]), call_ids, strict=True):
        assert child.parent_session_id == parent.id
        assert child.parent_run_id == run.run_id
        assert child.parent_tool_call_id == call_id
        assert child.workspace == parent.workspace and child.owner == parent.owner
        assert await stack.client.sessions.parent(child.id) == await stack.client.sessions.get(
            parent.id
        )
        (child_run,) = await stack.client.runs.list(child.id)
        assert child_run.status == "completed"
    assert await stack.client.sessions.parent(parent.id) is None
    # The tools given are the sub-agent's; by default it has the parent's.
    beta_request = stack.model.requests_for(by_name["beta"].id)[0].body
    assert tool_names(beta_request) == ["read", "ls"]
    alpha_request = stack.model.requests_for(by_name["alpha"].id)[0].body
    assert DELEGATE_TOOL in tool_names(alpha_request)
    assert user_texts(alpha_request) == ["Child A: say alpha"]

    # The run's usage is its own plus its sub-agents'; the results say each one's.
    record = await stack.client.runs.get(run.run_id)
    assert record is not None
    assert record.usage == Usage(input_tokens=100 + 200 + 7 + 11, output_tokens=10 + 20 + 3 + 5)
    assert result.usage == record.usage
    stored = delegate_results(stack, parent.id)
    assert [m.details and m.details["usage"]["input_tokens"] for m in stored] == [7, 11]
    assert [m.details and m.details["child_session_id"] for m in stored] == [
        by_name["alpha"].id,
        by_name["beta"].id,
    ]
    assert_valid_pairing(await stack.client.tree.path(parent.id))
    assert await event_seen(stack, parent.id, "subagent_started", tool_call_id=call_ids[1])


@pytest.mark.script(
    {
        "conversations": {
            "*": [{"match": "^Child", "reply": [bash("echo $$ > child.pid; sleep 60")]}]
        }
    }
)
async def test_abort_of_the_parent_kills_the_sub_agents_running_tool(stack: Stack) -> None:
    parent = await stack.client.sessions.create()
    plays(stack, parent.id, [{"reply": [delegate("Child: run it", name="runner")]}])
    pid_file = Path(parent.workspace) / "child.pid"
    async with stack.worker():
        run = await stack.client.runs.prompt(parent.id, "go")
        (child,) = await child_made(stack, parent.id)
        await eventually(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        pgid = int(pid_file.read_text())
        assert process_group_alive(pgid)
        result = await stack.client.runs.abort(parent.id)
        assert result.status == "aborted" and result.run_id == run.run_id
        await eventually(lambda: not process_group_alive(pgid), timeout=10)

        (child_run,) = await stack.client.runs.list(child.id)
        assert child_run.status == "aborted"
        child_path = await stack.client.tree.path(child.id)
        assert transcript_roles(child_path)[:3] == ["user", "assistant", "toolResult"]
        cancelled = child_path[2]
        assert isinstance(cancelled, MessageEntry)
        assert "cancelled before it finished" in text_of(cancelled.message.content)
        (answer,) = delegate_results(stack, parent.id)
        assert answer.is_error and "was stopped before it finished" in text_of(answer.content)
        assert child.id in text_of(answer.content)
        assert_valid_pairing(await stack.client.tree.path(parent.id))
        assert_valid_pairing(child_path)


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"match": "^Child", "reply": [bash(UNTIL_GO)]},
                {"reply": [{"text": "checked the tests too"}]},
            ]
        }
    }
)
async def test_a_sub_agent_is_steered_by_its_own_session_id(stack: Stack) -> None:
    parent = await stack.client.sessions.create()
    plays(
        stack,
        parent.id,
        [{"reply": [delegate("Child: wait for go")]}, {"reply": [{"text": "Parent done."}]}],
    )
    async with stack.worker():
        run = await stack.client.runs.prompt(parent.id, "go")
        (child,) = await child_made(stack, parent.id)
        await eventually(lambda: event_seen(stack, child.id, "tool_execution_start"))
        await stack.client.inputs.steer(child.id, "Also check the tests.")
        let_go(stack, child.id)
        result = await asyncio.wait_for(run.result(), timeout=60)

    assert result.status == "completed", result.error
    assert result.final_text == "Parent done."
    after_steer = stack.model.requests_for(child.id)[1].body
    assert "Also check the tests." in user_texts(after_steer)
    parent_last = stack.model.requests_for(parent.id)[-1].body
    assert [result_text(b) for b in tool_results(parent_last)] == ["checked the tests too"]


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"match": "^Level 1", "reply": [delegate("Level 2: go deeper")]},
                {"match": "^Level 2", "reply": [delegate("Level 3: too deep")]},
                {"reply": [{"text": "done here"}]},
            ]
        }
    }
)
async def test_sub_agents_nest_two_deep_at_most(stack: Stack) -> None:
    parent = await stack.client.sessions.create()
    plays(
        stack,
        parent.id,
        [{"reply": [delegate("Level 1: delegate once more")]}, {"reply": [{"text": "ok"}]}],
    )
    async with stack.worker():
        result = await (await stack.client.runs.prompt(parent.id, "go")).result()

    assert result.status == "completed", result.error
    (child,) = children_of(stack, parent.id)
    (grandchild,) = children_of(stack, child.id)
    assert children_of(stack, grandchild.id) == []
    # The deepest sub-agent is not offered the tool, and its call is refused.
    assert DELEGATE_TOOL in tool_names(stack.model.requests_for(child.id)[0].body)
    assert DELEGATE_TOOL not in tool_names(stack.model.requests_for(grandchild.id)[0].body)
    (refused,) = delegate_results(stack, grandchild.id)
    assert refused.is_error and "not active" in text_of(refused.content)
    # Each level answers the one above with its final answer.
    (from_grandchild,) = delegate_results(stack, child.id)
    assert text_of(from_grandchild.content) == "done here"
    (from_child,) = delegate_results(stack, parent.id)
    assert text_of(from_child.content) == "done here"


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"match": "Child: clean up", "reply": [bash("touch removed.txt")]},
                {"reply": [{"text": "could not"}]},
            ]
        }
    }
)
async def test_the_parents_approval_policy_binds_its_sub_agents(stack: Stack) -> None:
    """Delegating is no way around the approval policy: the sub-agent's bash call is
    refused by the parent's rule, and nothing runs."""
    parent = await stack.client.sessions.create()
    plays(
        stack,
        parent.id,
        [{"reply": [delegate("Child: clean up")]}, {"reply": [{"text": "ok"}]}],
    )
    deny_bash = ApprovalPolicy(rules=(ApprovalRule(tool="bash", action="deny"),))
    async with stack.worker():
        await stack.client.approvals.set_policy(parent.id, deny_bash)
        result = await (await stack.client.runs.prompt(parent.id, "go")).result()
    assert result.status == "completed", result.error
    (child,) = children_of(stack, parent.id)
    (refusal,) = tool_results(stack.model.requests_for(child.id)[-1].body)
    assert refusal.get("is_error")
    assert "approval policy denies" in result_text(refusal)
    assert not (Path(child.workspace) / "removed.txt").exists()


@pytest.mark.script({"conversations": {"*": []}})
async def test_a_sub_agent_asked_for_tools_its_parent_lacks_is_refused(stack: Stack) -> None:
    parent = await stack.client.sessions.create()
    plays(
        stack,
        parent.id,
        [
            {"reply": [delegate("Child: write things", tools=["read", "bash"])]},
            {"reply": [{"text": "ok"}]},
        ],
    )
    async with stack.worker():
        await stack.client.config.set_active_tools(parent.id, ["read", DELEGATE_TOOL])
        result = await (await stack.client.runs.prompt(parent.id, "go")).result()
    assert result.status == "completed", result.error
    assert children_of(stack, parent.id) == []
    last = stack.model.requests_for(parent.id)[-1].body
    (refusal,) = tool_results(last)
    assert refusal.get("is_error")
    assert "cannot have 'bash'" in result_text(refusal)
    assert "read, delegate" in result_text(refusal)


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "match": "^Child",
                    "reply": [bash("echo $$ > child.pid; echo go >> runs.txt; sleep 60")],
                },
                {"reply": [{"text": "child recovered"}]},
            ]
        }
    }
)
async def test_a_worker_killed_during_a_sub_agents_tool_call(stack: Stack) -> None:
    """SIGKILL of the only worker while a sub-agent's bash runs: a new worker finishes the
    sub-agent and then the parent, nothing run twice, nothing lost."""
    parent = await stack.client.sessions.create()
    plays(
        stack,
        parent.id,
        [{"reply": [delegate("Child: append and wait")]}, {"reply": [{"text": "Parent done."}]}],
    )
    workspace = Path(parent.workspace)
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(parent.id, "go")
    await eventually(lambda: (workspace / "child.pid").exists(), timeout=40)
    await eventually(lambda: (workspace / "child.pid").read_text().strip() != "")
    pgid = int((workspace / "child.pid").read_text())
    stack.kill(first)
    assert first.returncode is not None
    second = stack.spawn_worker()
    result = await asyncio.wait_for(run.result(), timeout=90)
    stack.kill(second)

    assert result.status == "completed", result.error
    assert result.final_text == "Parent done."
    (child,) = children_of(stack, parent.id)
    # The command ran once; what the first worker left running was stopped.
    assert (workspace / "runs.txt").read_text() == "go\n"
    assert not process_group_alive(pgid)
    child_path = await stack.client.tree.path(child.id)
    assert transcript_roles(child_path) == ["user", "assistant", "toolResult", "assistant"]
    interrupted = child_path[2]
    assert isinstance(interrupted, MessageEntry) and isinstance(
        interrupted.message, ToolResultMessage
    )
    assert interrupted.message.details and interrupted.message.details["interrupted"]
    (answer,) = delegate_results(stack, parent.id)
    assert not answer.is_error and text_of(answer.content) == "child recovered"
    # Each model call was made once, each run ended once.
    assert len(stack.model.requests_for(parent.id)) == 2
    assert len(stack.model.requests_for(child.id)) == 2
    for session_id in (parent.id, child.id):
        ends = [
            e
            async for e in stack.client.events.stream(session_id, follow=False)
            if e.type == "agent_end"
        ]
        assert len(ends) == 1 and ends[0].payload["status"] == "completed"
        assert_valid_pairing(await stack.client.tree.path(session_id))


@pytest.mark.script(
    {"conversations": {"*": [{"match": "^Child", "reply": [{"text": "child answer"}]}]}}
)
async def test_the_api_links_parent_and_sub_agent_for_their_owner_only(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as alice, api.client(ApiServer.OTHER_TOKEN) as bob:
        created = await alice.post("/api/sessions", json={"name": "lead"})
        parent = created.json()["session"]["id"]
        plays(
            stack,
            parent,
            [{"reply": [delegate("Child: answer", name="helper")]}, {"reply": [{"text": "ok"}]}],
        )
        sent = await alice.post(f"/api/sessions/{parent}/input", json={"text": "go"})
        assert sent.status_code == 200, sent.text
        await eventually(lambda: run_finished(stack, parent))
        (child,) = children_of(stack, parent)
        assert child.owner == "alice"

        links = (await alice.get(f"/api/sessions/{parent}/state")).json()["links"]
        assert links["parent"] is None
        assert links["children"] == [
            {
                "session_id": child.id,
                "name": "helper",
                "run_id": child.parent_run_id,
                "tool_call_id": child.parent_tool_call_id,
            }
        ]
        back = (await alice.get(f"/api/sessions/{child.id}/state")).json()["links"]
        assert back["parent"]["session_id"] == parent and back["children"] == []
        listed = (await alice.get("/api/session-summaries")).json()
        (summary,) = [s for s in listed if s["session"]["id"] == child.id]
        assert summary["session"]["parent_session_id"] == parent
        assert summary["session"]["parent_tool_call_id"] == child.parent_tool_call_id
        # The tree shows the call's result as a node that opens the sub-agent.
        tree = (await alice.get(f"/api/sessions/{parent}/tree")).json()
        (node,) = [n for n in tree["nodes"] if n["child_session_id"]]
        assert node["child_session_id"] == child.id and node["kind"] == "tool"
        assert node["preview"] == f"sub-agent {child.id[:8]}: child answer"
        # Another user sees neither.
        assert (await bob.get(f"/api/sessions/{child.id}/state")).status_code == 404
        assert child.id not in str((await bob.get("/api/session-summaries")).json())


@pytest.mark.script(
    {"conversations": {"*": [{"match": "^Child", "reply": [{"text": "child answer"}]}]}}
)
async def test_history_shows_the_sub_agent_run_below_the_call_that_started_it(
    stack: Stack,
) -> None:
    parent = await stack.client.sessions.create()
    plays(
        stack,
        parent.id,
        [{"reply": [delegate("Child: answer", name="helper")]}, {"reply": [{"text": "ok"}]}],
    )
    async with stack.worker():
        run = await stack.client.runs.prompt(parent.id, "go")
        assert (await run.result()).status == "completed"
    (child,) = children_of(stack, parent.id)
    (child_run,) = await stack.client.runs.list(child.id)
    found: list[RunTimeline] = []

    async def both_listed() -> bool:
        nonlocal found
        found = await session_timelines(stack.temporal, parent.id)
        return len(found) == 2

    await eventually(both_listed, timeout=15)
    parent_timeline, child_timeline = found
    assert parent_timeline.run_id == run.run_id and parent_timeline.parent_session_id is None
    (item,) = [i for i in parent_timeline.items if i.kind == "subagent"]
    assert item.details["child_session_id"] == child.id
    assert item.details["child_run_id"] == child_run.run_id
    assert item.details["tool_call_id"] == child.parent_tool_call_id
    assert item.details["status"] == "completed" and item.details["final_text"] == "child answer"
    assert item.turn == 1 and item.duration_ms is not None
    assert child_timeline.run_id == child_run.run_id
    assert child_timeline.workflow_id == f"session-{child.id}"
    assert child_timeline.parent_session_id == parent.id
    assert child_timeline.parent_tool_call_id == child.parent_tool_call_id

    console = Console(record=True, width=200)
    render(found, console)
    text = console.export_text()
    assert f"sub-agent 'helper' for {child.parent_tool_call_id} in session {child.id}" in text
    assert f"sub-agent of session {parent.id}, call {child.parent_tool_call_id}" in text


WAITING_CHILD = {
    "conversations": {
        "*": [
            {"match": "^Child", "reply": [bash(UNTIL_GO)]},
            {"reply": [{"text": "child used the cache"}]},
        ]
    }
}


@pytest.mark.script(WAITING_CHILD)
async def test_guidance_reaches_a_sub_agent_by_its_session_id(stack: Stack) -> None:
    parent = await stack.client.sessions.create()
    plays(
        stack,
        parent.id,
        [{"reply": [delegate("Child: build it")]}, {"reply": [{"text": "Parent done."}]}],
    )
    async with stack.worker():
        run = await stack.client.runs.prompt(parent.id, "go")
        (child,) = await child_made(stack, parent.id)
        await eventually(lambda: event_seen(stack, child.id, "tool_execution_start"))
        await stack.client.inputs.send(
            child.id, "Stop, use the cached build.", guidance=True, intent="interrupt"
        )
        result = await asyncio.wait_for(run.result(), timeout=60)

    assert result.status == "completed", result.error
    guided = stack.model.requests_for(child.id)[1].body
    assert any("Stop, use the cached build." in text for text in user_texts(guided))
    (answer,) = delegate_results(stack, parent.id)
    assert text_of(answer.content) == "child used the cache"


@pytest.mark.script(WAITING_CHILD)
async def test_aborting_a_sub_agent_answers_the_parent_with_an_error_and_it_goes_on(
    stack: Stack,
) -> None:
    parent = await stack.client.sessions.create()
    plays(
        stack,
        parent.id,
        [{"reply": [delegate("Child: build it", name="builder")]}, {"reply": [{"text": "I see."}]}],
    )
    async with stack.worker():
        run = await stack.client.runs.prompt(parent.id, "go")
        (child,) = await child_made(stack, parent.id)
        await eventually(lambda: event_seen(stack, child.id, "tool_execution_start"))
        stopped = await stack.client.runs.abort(child.id)
        assert stopped.status == "aborted"
        result = await asyncio.wait_for(run.result(), timeout=60)

    assert result.status == "completed" and result.final_text == "I see."
    (refusal,) = tool_results(stack.model.requests_for(parent.id)[-1].body)
    assert refusal.get("is_error")
    assert f"The sub-agent 'builder' (session {child.id}) was stopped" in result_text(refusal)


@pytest.mark.script(
    {"conversations": {"*": [{"match": "^Child", "reply": [{"text": "child answer"}]}]}}
)
async def test_duragent_show_names_sub_agents_and_their_parent(stack: Stack) -> None:
    parent = await stack.client.sessions.create()
    plays(
        stack,
        parent.id,
        [{"reply": [delegate("Child: answer", name="helper")]}, {"reply": [{"text": "ok"}]}],
    )
    async with stack.worker():
        await (await stack.client.runs.prompt(parent.id, "go")).result()
    (child,) = children_of(stack, parent.id)

    def show(session_id: str) -> str:
        shown = subprocess.run(
            [sys.executable, "-m", "duragent.client.cli", "show", session_id],
            env=stack.env(),
            capture_output=True,
            text=True,
            check=True,
        )
        return " ".join(shown.stdout.split())

    assert f"sub-agent {child.id} helper for call {child.parent_tool_call_id}" in show(parent.id)
    assert (
        f"sub-agent of session {parent.id} (its call {child.parent_tool_call_id},"
        f" run {child.parent_run_id})" in show(child.id)
    )
