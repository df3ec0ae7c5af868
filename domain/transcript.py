"""From agent messages to a transcript the model API accepts (convert to the provider's format).

The API demands that every tool call is answered by a tool result in the very next
user turn, and every tool result answers a call of the turn before. `repair_pairing`
makes that true whatever the session holds (an interrupted turn, an aborted batch), so a
session can never be broken by "tool_use ids were found without tool_result blocks".
"""

from __future__ import annotations

from collections.abc import Sequence

from duragent.domain.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

LlmMessage = UserMessage | AssistantMessage | ToolResultMessage

MISSING_RESULT_TEXT = (
    "No result was recorded for this tool call: it was interrupted before it finished."
)


def default_convert_to_llm(messages: Sequence[AgentMessage]) -> list[LlmMessage]:
    """Keep model messages; custom messages meant for the model become user text."""
    out: list[LlmMessage] = []
    for message in messages:
        if isinstance(message, CustomMessage):
            if message.send_to_model:
                out.append(UserMessage(content=message.content, timestamp=message.timestamp))
        else:
            out.append(message)
    return out


def repair_pairing(messages: Sequence[LlmMessage]) -> list[LlmMessage]:
    """Give every tool call exactly one result right after its assistant message.

    Missing results become error results saying the call was interrupted; results that
    answer no pending call (orphans, duplicates) are dropped; results that arrive after
    other user messages are moved up next to their call.
    """
    out: list[LlmMessage] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if isinstance(message, ToolResultMessage):
            continue  # an orphan: its call was handled (or never existed) above
        out.append(message)
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            continue
        pending = {call.id: call for call in message.tool_calls}
        results: dict[str, ToolResultMessage] = {}
        between: list[LlmMessage] = []
        while i < len(messages) and not isinstance(messages[i], AssistantMessage):
            candidate = messages[i]
            i += 1
            if isinstance(candidate, ToolResultMessage):
                if candidate.tool_call_id in pending and candidate.tool_call_id not in results:
                    results[candidate.tool_call_id] = candidate
            else:
                between.append(candidate)
        for call in message.tool_calls:
            out.append(
                results.get(call.id)
                or ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=[TextContent(text=MISSING_RESULT_TEXT)],
                    is_error=True,
                    timestamp=message.timestamp,
                )
            )
        out.extend(between)
    return out


def llm_transcript(messages: Sequence[AgentMessage]) -> list[LlmMessage]:
    """The default convertToLlm followed by pairing repair."""
    return repair_pairing(default_convert_to_llm(messages))
