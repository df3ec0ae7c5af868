"""What a request to the offline model said, whichever wire it came on (Anthropic's Messages
API, OpenAI's Chat Completions or Responses), read into the same plain pieces, so one
scenario's assertions hold on every protocol (`support.BOTH_PROTOCOLS`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Sent:
    """One message of a request, as the model read it."""

    role: str
    """`system`, `user`, `assistant`, or `tool` (a tool result on OpenAI's wires)."""
    texts: list[str] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(id, name) of each tool call the message holds."""
    results: list[ToolResultSent] = field(default_factory=list)


@dataclass
class ToolResultSent:
    call_id: str
    text: str
    is_error: bool


def wire_of(body: dict[str, Any]) -> str:
    """`anthropic`, `openai` (Chat Completions) or `openai-responses`."""
    if "input" in body:
        return "openai-responses"
    if "max_completion_tokens" in body or any(
        m.get("role") in ("system", "developer", "tool") for m in body.get("messages", [])
    ):
        return "openai"
    return "anthropic"


def offered_tools(body: dict[str, Any]) -> list[str]:
    """The names of the tools the request offered."""
    return [t.get("name") or t["function"]["name"] for t in body.get("tools", [])]


def sent(body: dict[str, Any]) -> list[Sent]:
    """The request's messages in order (results of tool calls in their own entries)."""
    wire = wire_of(body)
    if wire == "anthropic":
        return [_anthropic(m) for m in body["messages"]]
    if wire == "openai":
        return [_chat(m) for m in body["messages"]]
    return [_responses_item(i) for i in body["input"]]


def tool_results(body: dict[str, Any]) -> list[ToolResultSent]:
    """The tool results the request's last turn carries back."""
    found: list[ToolResultSent] = []
    for message in reversed(sent(body)):
        if message.calls:
            break
        found[:0] = message.results
    return found


def last_calls(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(id, name) of the calls of the last assistant message that made some."""
    calls = [m.calls for m in sent(body) if m.calls]
    return calls[-1] if calls else []


def texts(body: dict[str, Any]) -> list[str]:
    """Every text the model was sent, tool results included, in order (the system prompt
    left out)."""
    out: list[str] = []
    for message in sent(body):
        if message.role == "system":
            continue
        out += message.texts + [r.text for r in message.results]
    return out


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text of every user message."""
    return [t for m in sent(body) if m.role == "user" for t in m.texts]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def _anthropic(message: dict[str, Any]) -> Sent:
    out = Sent(message["role"])
    content = message["content"]
    if isinstance(content, str):
        out.texts.append(content)
        return out
    for block in content:
        kind = block.get("type")
        if kind == "text":
            out.texts.append(block["text"])
        elif kind == "tool_use":
            out.calls.append((block["id"], block["name"]))
        elif kind == "tool_result":
            text = _text_of(block.get("content", ""))
            out.results.append(
                ToolResultSent(block["tool_use_id"], text, bool(block.get("is_error")))
            )
    return out


def _chat(message: dict[str, Any]) -> Sent:
    role = message["role"]
    if role == "tool":
        text = _text_of(message.get("content") or "")
        result = ToolResultSent(message["tool_call_id"], text, False)
        return Sent("tool", results=[result])
    out = Sent("system" if role == "developer" else role)
    content = message.get("content")
    if content:
        out.texts += (
            [content]
            if isinstance(content, str)
            else [p["text"] for p in content if p.get("type") == "text"]
        )
    for call in message.get("tool_calls") or []:
        out.calls.append((call["id"], call["function"]["name"]))
    return out


def _responses_item(item: dict[str, Any]) -> Sent:
    kind = item.get("type", "message")
    if kind == "function_call":
        return Sent("assistant", calls=[(item["call_id"], item["name"])])
    if kind == "function_call_output":
        output = item["output"]
        text = output if isinstance(output, str) else json.dumps(output)
        return Sent("tool", results=[ToolResultSent(item["call_id"], text, False)])
    if kind == "reasoning":
        return Sent("assistant")
    content = item.get("content")
    out = Sent(item.get("role", "user"))
    if isinstance(content, str):
        out.texts.append(content)
    else:
        out.texts += [p["text"] for p in content or [] if "text" in p]
    return out
