"""What the approval tests share: policies, scripts, and waiting for a call to wait."""

from __future__ import annotations

from typing import Any

import wire
from support import Stack, event_seen, eventually

from duragent.domain.approvals import ApprovalPolicy, ApprovalRule
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage

ASK_BASH = ApprovalPolicy(
    rules=(ApprovalRule(tool="bash", command="ls *", action="allow"),), default="ask"
)
"""`ls ...` runs; every other call waits for a decision."""


def bash_call(command: str, call_id: str) -> dict[str, Any]:
    return {"tool_use": {"id": call_id, "name": "bash", "input": {"command": command}}}


def calls_then_text(calls: list[dict[str, Any]], *texts: str) -> dict[str, Any]:
    """A script: one reply with these tool calls, then one reply per text."""
    replies = [{"reply": calls}, *({"reply": [{"text": t}]} for t in texts)]
    return {"conversations": {"*": replies}}


async def waiting_calls(stack: Stack, session_id: str, count: int = 1) -> list[str]:
    """The ids of the calls the run waits on, once `count` of them wait."""
    await eventually(lambda: event_seen(stack, session_id, "approval_requested"))

    async def enough() -> bool:
        return len(await stack.client.approvals.pending(session_id)) >= count

    await eventually(enough)
    return [p.call_id for p in await stack.client.approvals.pending(session_id)]


def tool_results_sent(stack: Stack, session_id: str) -> list[dict[str, Any]]:
    """The tool results of the last request the model received, on any wire, each as
    `{"tool_use_id", "content", "is_error"}` (OpenAI's wires have no error flag: False)."""
    body = stack.model.requests_for(session_id)[-1].body
    return [
        {"tool_use_id": r.call_id, "content": r.text, "is_error": r.is_error}
        for message in wire.sent(body)
        for r in message.results
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def stored_result(stack: Stack, session_id: str, call_id: str) -> ToolResultMessage:
    for entry in stack.client.sync.tree.path(session_id):
        message = entry.message if isinstance(entry, MessageEntry) else None
        if isinstance(message, ToolResultMessage) and message.tool_call_id == call_id:
            return message
    raise AssertionError(f"no result for {call_id}")
