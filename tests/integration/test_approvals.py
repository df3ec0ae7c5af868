"""Approval of tool calls: a call the session's policy asks about waits for a decision,
which comes as a Temporal update; what the model then reads is checked at the wire."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from approval_support import (
    ASK_BASH,
    bash_call,
    calls_then_text,
    result_text,
    stored_result,
    tool_results_sent,
    waiting_calls,
)
from support import BOTH_PROTOCOLS, ApiServer, Stack, assert_valid_pairing, event_seen, eventually

from duragent.client.errors import (
    ApprovalNotRecorded,
    ApprovalRefused,
    SessionIdle,
    WorkerNotAnswering,
)
from duragent.domain.approvals import ApprovalPolicy, ApprovalRule
from duragent.domain.fallbacks import ABORTED_TOOL_TEXT, STOPPED_TEXT
from duragent.domain.messages import text_of
from duragent.store import events as stored_events

WRITE = calls_then_text([bash_call("echo ran > out.txt", "call_write")], "All done.")


def events_of(stack: Stack, session_id: str, kind: str) -> list[dict[str, object]]:
    with stack.db.transaction() as db:
        found = stored_events.read_events(db, session_id, after=0, limit=10_000)
    return [e.payload for e in found if e.type == kind]


@pytest.mark.script(WRITE)
@BOTH_PROTOCOLS
async def test_ask_then_approve(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, ASK_BASH)
        run = await stack.client.runs.prompt(session.id, "write it")
        assert await waiting_calls(stack, session.id) == ["call_write"]
        assert (await stack.client.sessions.status(session.id)).phase == "awaiting_approval"
        assert await stack.client.approvals.policy(session.id) == ASK_BASH  # read during a run
        [pending] = await stack.client.approvals.pending(session.id)
        assert pending.tool_name == "bash" and pending.rule == "the default (ask)"
        assert pending.arguments == {"command": "echo ran > out.txt"}
        [requested] = events_of(stack, session.id, "approval_requested")
        assert requested["call_id"] == "call_write" and requested["tool_name"] == "bash"
        assert "echo ran > out.txt" in str(requested["args_preview"])
        assert events_of(stack, session.id, "tool_execution_start") == []  # nothing ran
        with pytest.raises(ApprovalRefused, match="cannot be approved always: its command"):
            await stack.client.approvals.approve(session.id, "call_write", always=True)  # has a `>`
        outcome = await stack.client.approvals.approve(session.id, "call_write")
        assert outcome.decision == "approve"
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert result.final_text == "All done."
    assert (Path(session.workspace) / "out.txt").read_text() == "ran\n"
    [decided] = events_of(stack, session.id, "approval_decided")
    assert decided["decision"] == "approve"
    phases = [e["phase"] for e in events_of(stack, session.id, "phase_changed")]
    assert phases[:2] == ["awaiting_approval", "turn"]
    assert_valid_pairing(await stack.client.tree.path(session.id))


@pytest.mark.script(WRITE)
async def test_deny_with_a_reason_the_model_reads(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, ASK_BASH)
        run = await stack.client.runs.prompt(session.id, "write it")
        await waiting_calls(stack, session.id)
        await stack.client.approvals.deny(session.id, "call_write", "not on a Friday")
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert not (Path(session.workspace) / "out.txt").exists()
    [sent] = tool_results_sent(stack, session.id)
    assert sent["tool_use_id"] == "call_write" and sent["is_error"] is True
    assert result_text(sent) == (
        "The user denied this tool call, so it was not run. Reason: not on a Friday"
    )


@pytest.mark.script(WRITE)
async def test_two_approvers_race_and_one_wins(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, ASK_BASH)
        run = await stack.client.runs.prompt(session.id, "write it")
        await waiting_calls(stack, session.id)
        with pytest.raises(ApprovalRefused, match=r"^no tool call 'nope' is waiting"):
            await stack.client.approvals.approve(session.id, "nope")
        outcomes = await asyncio.gather(
            stack.client.approvals.approve(session.id, "call_write"),
            stack.client.approvals.deny(session.id, "call_write", "no"),
            return_exceptions=True,
        )
        won = [o for o in outcomes if not isinstance(o, BaseException)]
        lost = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(won) == 1 and len(lost) == 1, outcomes
        assert isinstance(lost[0], ApprovalRefused)
        assert "was already decided" in str(lost[0])
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    ran = (Path(session.workspace) / "out.txt").exists()
    assert ran == (won[0].decision == "approve")  # the winner's decision, and only it
    assert len(events_of(stack, session.id, "approval_decided")) == 1


@pytest.mark.script(WRITE)
async def test_abort_while_waiting(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, ASK_BASH)
        await stack.client.runs.prompt(session.id, "write it")
        await waiting_calls(stack, session.id)
        result = await stack.client.runs.abort(session.id)
        assert result.status == "aborted"
        assert await stack.client.approvals.pending(session.id) == []
        with pytest.raises(
            ApprovalRefused, match=r"'call_write' was already decided \(withdrawn\)"
        ):
            await stack.client.approvals.approve(session.id, "call_write")
    assert events_of(stack, session.id, "tool_execution_start") == []
    aborted = stored_result(stack, session.id, "call_write")
    assert aborted.is_error and text_of(aborted.content) == ABORTED_TOOL_TEXT
    assert_valid_pairing(await stack.client.tree.path(session.id))


BATCH = calls_then_text(
    [
        bash_call("echo risky > risky.txt", "call_ask"),
        bash_call("ls -la", "call_free"),
    ],
    "Both done.",
)


@pytest.mark.script(BATCH)
async def test_calls_that_need_no_approval_run_meanwhile(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, ASK_BASH)
        run = await stack.client.runs.prompt(session.id, "both")
        assert await waiting_calls(stack, session.id) == ["call_ask"]
        await eventually(
            lambda: event_seen(stack, session.id, "tool_execution_end", tool_call_id="call_free")
        )
        assert not (Path(session.workspace) / "risky.txt").exists()
        await stack.client.approvals.approve(session.id, "call_ask")
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert (Path(session.workspace) / "risky.txt").exists()
    assert [b["tool_use_id"] for b in tool_results_sent(stack, session.id)] == [
        "call_ask",
        "call_free",
    ]


@pytest.mark.script(WRITE)
async def test_a_timeout_denies_the_call(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    policy = ASK_BASH.model_copy(update={"timeout_s": 1.0})
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, policy)
        run = await stack.client.runs.prompt(session.id, "write it")
        await waiting_calls(stack, session.id)
        result = await asyncio.wait_for(run.result(), timeout=60)
        # The run is over: the store says why the decision comes too late.
        with pytest.raises(ApprovalRefused, match=r"'call_write' was already decided \(timeout\)"):
            await stack.client.approvals.approve(session.id, "call_write")
        with pytest.raises(SessionIdle, match="cannot approve tool call 'nope'"):
            await stack.client.approvals.approve(session.id, "nope")
    assert result.status == "completed", result.error
    assert not (Path(session.workspace) / "out.txt").exists()
    [sent] = tool_results_sent(stack, session.id)
    assert sent["is_error"] is True
    assert "no one approved this call within 1 s" in result_text(sent)
    assert [e["decision"] for e in events_of(stack, session.id, "approval_decided")] == ["timeout"]


SAME_TWICE = {
    "conversations": {
        "*": [
            {"reply": [bash_call("touch a.txt", "call_1")]},
            {"reply": [bash_call("touch a.txt", "call_2")]},
            {"reply": [bash_call("touch b.txt", "call_3")]},
            {"reply": [{"text": "Logged."}]},
        ]
    }
}


@pytest.mark.script(SAME_TWICE)
async def test_approve_always_allows_the_exact_command_from_then_on(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, ASK_BASH)
        run = await stack.client.runs.prompt(session.id, "log")
        await waiting_calls(stack, session.id)
        outcome = await stack.client.approvals.approve(session.id, "call_1", always=True)
        assert outcome.decision == "always"
        always = ApprovalRule(tool="bash", command="touch a.txt", action="allow")
        during = await stack.client.approvals.policy(session.id)  # a pending write so far
        assert during is not None and during.rules == (always, *ASK_BASH.rules)
        # The same command runs without asking; another one asks.
        assert await waiting_calls(stack, session.id) == ["call_3"]
        await stack.client.approvals.approve(session.id, "call_3")
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert (Path(session.workspace) / "a.txt").exists()
    assert (Path(session.workspace) / "b.txt").exists()
    requested = [e["call_id"] for e in events_of(stack, session.id, "approval_requested")]
    assert requested == ["call_1", "call_3"]
    policy = (await stack.client.sessions.status(session.id)).config.approval_policy
    assert policy is not None
    assert policy.rules[0] == ApprovalRule(tool="bash", command="touch a.txt", action="allow")
    assert policy.rules[1:] == ASK_BASH.rules


@pytest.mark.script(WRITE)
async def test_a_denying_policy_refuses_without_asking(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    deny_echo = ApprovalPolicy(rules=(ApprovalRule(tool="bash", command="echo *", action="deny"),))
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, deny_echo)
        result = await (await stack.client.runs.prompt(session.id, "write it")).result()
    assert result.status == "completed", result.error
    [sent] = tool_results_sent(stack, session.id)
    assert sent["is_error"] is True
    assert "rule bash 'echo *' -> deny" in result_text(sent)
    assert events_of(stack, session.id, "approval_requested") == []


@pytest.mark.script(WRITE)
async def test_approve_while_the_worker_is_down_is_refused(stack: Stack) -> None:
    """Decided: with no worker answering, a decision is refused with an error saying it
    was not recorded and how to go on; once a worker is back, approving works."""
    session = await stack.client.sessions.create()
    worker = stack.spawn_worker()
    await stack.client.approvals.set_policy(session.id, ASK_BASH)
    run = await stack.client.runs.prompt(session.id, "write it")
    await waiting_calls(stack, session.id)
    stack.kill(worker)
    with pytest.raises(ApprovalNotRecorded) as refused:
        await stack.client.approvals.approve(session.id, "call_write")
    assert "the decision was not recorded: no worker answers" in str(refused.value)
    assert "duragent worker" in str(refused.value)
    with pytest.raises(WorkerNotAnswering, match="its waiting tool calls cannot be listed"):
        await stack.client.approvals.pending(session.id)
    stack.spawn_worker()

    async def answering() -> bool:
        return bool(await stack.client.sessions.worker_answering(session.id))

    await eventually(answering, timeout=60)
    await stack.client.approvals.approve(session.id, "call_write")
    result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert (Path(session.workspace) / "out.txt").read_text() == "ran\n"


@pytest.mark.script(WRITE)
async def test_api_approvals_and_their_owner(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as alice, api.client(ApiServer.OTHER_TOKEN) as bob:
        created = await alice.post("/api/sessions", json={})
        session_id = created.json()["session"]["id"]
        put = await alice.put(
            f"/api/sessions/{session_id}/approval-policy",
            json={"policy": {"rules": [{"tool": "bash", "action": "maybe"}]}},
        )
        assert put.status_code == 422 and "action" in put.text
        put = await alice.put(
            f"/api/sessions/{session_id}/approval-policy",
            json={"policy": ASK_BASH.model_dump(mode="json")},
        )
        assert put.status_code == 200, put.text
        assert put.json()["policy"]["default"] == "ask"
        sent = await alice.post(f"/api/sessions/{session_id}/input", json={"text": "go"})
        assert sent.status_code in (200, 201, 202), sent.text
        await waiting_calls(stack, session_id)
        listed = await alice.get(f"/api/sessions/{session_id}/approvals")
        assert [p["call_id"] for p in listed.json()] == ["call_write"]
        assert listed.json()[0]["arguments"] == {"command": "echo ran > out.txt"}
        other = await bob.get(f"/api/sessions/{session_id}/approvals")
        assert other.status_code == 404
        other = await bob.post(f"/api/sessions/{session_id}/approvals/call_write/approve")
        assert other.status_code == 404
        unknown = await alice.post(f"/api/sessions/{session_id}/approvals/nope/deny")
        assert unknown.status_code == 409 and "nope" in unknown.json()["detail"]
        done = await alice.post(
            f"/api/sessions/{session_id}/approvals/call_write/deny", json={"reason": "no"}
        )
        assert done.status_code == 200 and done.json()["decision"] == "deny"
        again = await alice.post(f"/api/sessions/{session_id}/approvals/call_write/approve")
        assert again.status_code == 409 and "already decided" in again.json()["detail"]
        await eventually(lambda: event_seen(stack, session_id, "agent_end"))

        async def run_closed() -> bool:
            return await stack.client.workflows.open_run(session_id) is None

        await eventually(run_closed)
        late = await alice.post(f"/api/sessions/{session_id}/approvals/call_write/approve")
        assert late.status_code == 409
        assert "'call_write' was already decided (deny by alice)" in late.json()["detail"]
        unknown = await alice.post(f"/api/sessions/{session_id}/approvals/nope/deny")
        assert unknown.status_code == 409 and "no run in progress" in unknown.json()["detail"]
    [decided] = events_of(stack, session_id, "approval_decided")
    assert decided["by"] == "alice"


@pytest.mark.script(WRITE)
async def test_the_command_line(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    code, _, err = await stack.cli("policy", session.id, "--rule", "maybe:bash")
    assert code == 2 and "must be one of allow, ask, deny (got 'maybe')" in err
    async with stack.worker():
        code, out, err = await stack.cli(
            "policy", session.id, "--rule", "allow:bash:ls *", "--default", "ask"
        )
        assert code == 0, err
        assert out.splitlines() == ["1. allow:bash:ls *", "default: ask; timeout: none"]
        run = await stack.client.runs.prompt(session.id, "write it")
        await waiting_calls(stack, session.id)
        code, out, err = await stack.cli("approvals", session.id)
        assert code == 0, err
        assert 'call_write  bash {"command": "echo ran > out.txt"}' in out
        assert f"approve: duragent approve {session.id} call_write" in out
        code, _, err = await stack.cli("approve", session.id, "nope")
        assert code == 2 and "no tool call 'nope' is waiting" in err
        assert len([line for line in err.splitlines() if line.strip()]) == 1
        code, out, err = await stack.cli("approve", session.id, "call_write")
        assert code == 0 and out.strip() == "approved: call_write", err
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error


@pytest.mark.script(WRITE)
async def test_interrupting_guidance_withdraws_a_waiting_call(stack: Stack) -> None:
    """Decided: guidance that interrupts the batch cancels the wait as it stops a running
    call; the call never runs, and the model reads the guidance after its result."""
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, ASK_BASH)
        run = await stack.client.runs.prompt(session.id, "write it")
        await waiting_calls(stack, session.id)
        await stack.client.inputs.guide_text(
            session.id, "Stop: do not write files.", intent="interrupt"
        )
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert not (Path(session.workspace) / "out.txt").exists()
    assert [e["decision"] for e in events_of(stack, session.id, "approval_decided")] == [
        "withdrawn"
    ]
    [sent] = tool_results_sent(stack, session.id)
    assert sent["is_error"] is True and result_text(sent) == STOPPED_TEXT
    assert "Stop: do not write files." in str(stack.model.requests_for(session.id)[-1].body)
