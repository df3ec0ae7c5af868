"""Extensions used by the hook tests (the workflow imports the workflow hooks by path)."""

from __future__ import annotations

import time

from duragent.activities.extensions import (
    BlockToolCall,
    Extension,
    ToolCallContext,
    ToolResultOverride,
    TurnContext,
)
from duragent.domain.hooks import NextTurn, TurnSummary, WorkflowHooks
from duragent.domain.messages import AgentMessage, TextContent, user_text
from duragent.domain.tools import ToolResult
from duragent.store.records import SessionRecord


class SwitchModelAfterFirstTurn(WorkflowHooks):
    def prepare_next_turn(self, turn: TurnSummary) -> NextTurn | None:
        return NextTurn(model="claude-after-hook") if turn.turn == 1 else None

    def should_stop_after_turn(self, turn: TurnSummary) -> bool:
        return any("STOP" in tool.preview for tool in turn.tools)


class ReadsTheClock(WorkflowHooks):
    def should_stop_after_turn(self, turn: TurnSummary) -> bool:
        return time.time() > 0  # not deterministic: the sandbox refuses it


class Guard(Extension):
    name = "guard"
    workflow_hooks = "sample_hooks:SwitchModelAfterFirstTurn"

    def __init__(self) -> None:
        self.prompts_made = 0

    def system_prompt(self, current: str, session: SessionRecord) -> str | None:
        self.prompts_made += 1
        return f"{current}\nHouse rule #{self.prompts_made}."

    async def transform_context(
        self, messages: list[AgentMessage], turn: TurnContext
    ) -> list[AgentMessage]:
        return [user_text(f"(turn {turn.turn} of session {turn.session_id[:6]})", 0), *messages]

    async def before_tool_call(self, call: ToolCallContext) -> BlockToolCall | None:
        if call.tool_call.name == "bash" and "rm " in str(call.args.get("command")):
            assert call.session is not None
            await call.session.append_custom_entry("guard", {"blocked": call.args["command"]})
            return BlockToolCall(reason="deleting files is not allowed here")
        return None

    async def after_tool_call(
        self, call: ToolCallContext, result: ToolResult
    ) -> ToolResultOverride | None:
        if call.tool_call.name == "read":
            text = "".join(b.text for b in result.content if isinstance(b, TextContent))
            return ToolResultOverride(
                content=[TextContent(text=text.replace("secret", "[redacted]"))]
            )
        return None


class ClockExtension(Extension):
    workflow_hooks = "sample_hooks:ReadsTheClock"
