"""A reply's tool calls as the workflow sees them (`ToolCallRef`): refused (a tool that
is not active, an MCP server the session does not use, a policy that denies it), waiting
for a person's approval first, a question for the user (`ask_user`), or free to run. The
full arguments stay in the staged reply; the workflow gets a preview.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from duragent.activities.tools import ToolRegistry
from duragent.activities.tools.schema import format_validation_error
from duragent.domain.approvals import verdict
from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import ToolCall
from duragent.domain.questions import ASK_USER_TOOL, UserQuestion
from duragent.domain.tools import ToolCallRef

ARGS_PREVIEW_CHARS = 100


def call_ref(
    call: ToolCall, snapshot: TurnSnapshot, servers: list[str] | None, tools: ToolRegistry
) -> ToolCallRef:
    """The call as the workflow sees it: refused if its tool is not active (or its MCP
    server not one the session uses) or the approval policy denies it; marked if the
    policy asks for a decision first."""
    refused = tools.refusal(call.name, snapshot.active_tools, servers)
    ask = None
    if refused is None:
        ask, refused = verdict(snapshot.approval_policy, call.name, call.arguments)
    question = None
    if refused is None and call.name == ASK_USER_TOOL:
        question, refused = _question(call.arguments)
        ask = None  # the question itself waits for the person: never approved first
    return ToolCallRef(
        id=call.id,
        name=call.name,
        args_preview=_preview(call.arguments),
        traits=tools.traits_of(call.name),
        refused=refused,
        approval=ask,
        question=question,
    )


def _question(arguments: dict[str, Any]) -> tuple[UserQuestion | None, str | None]:
    """An `ask_user` call's question, or why the call is refused (bad arguments: the model
    reads what was wrong, as for any tool)."""
    try:
        return UserQuestion.model_validate(arguments), None
    except ValidationError as exc:
        return None, f"Invalid arguments for tool '{ASK_USER_TOOL}': {format_validation_error(exc)}"


def _preview(arguments: dict[str, object]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= ARGS_PREVIEW_CHARS else text[: ARGS_PREVIEW_CHARS - 1] + "…"
