"""What clients send: prompt input normalisation, and the one size limit on all of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pydantic_core
from pydantic import TypeAdapter

from duragent.domain.messages import AgentMessage, user_text

PromptInput = (
    str | AgentMessage | Sequence[AgentMessage] | dict[str, Any] | Sequence[dict[str, Any]]
)

MAX_INPUT_BYTES = 256 * 1024
"""The one limit on every text a client sends: prompts, queued input, steering,
follow-ups, guidance, config strings, names, labels, custom messages. Each enters a
workflow's history or the store as it is; Temporal warns above 256 KB per payload, and a
session whose inputs are bounded keeps its pages bounded."""

MAX_PENDING_INPUT = 100
"""How many items a session's input queue holds pending at most: input waits there for a
person to send, guide or delete it, so a hundred is more than anyone reads, and it keeps
what every page load and run start reads bounded."""

_message_list = TypeAdapter(list[AgentMessage])


def input_bytes(value: object) -> int:
    """The size of something a client sent: a string's UTF-8 bytes; anything else (a
    message, a list, a dict) the bytes of its compact JSON."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return len(pydantic_core.to_json(value))


def normalize_prompt_input(prompt: PromptInput, timestamp: int) -> list[AgentMessage]:
    """Turn what a caller passed as a prompt into agent messages.

    A string becomes one user message; a message (or its dict form) becomes a list of
    one; a list is validated as it is. Raises `ValueError` naming what was wrong.
    """
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError("prompt is empty")
        return [user_text(prompt, timestamp)]
    items: list[Any] = [prompt] if not isinstance(prompt, Sequence) else list(prompt)
    if not items:
        raise ValueError("prompt is an empty list of messages")
    raw = [item.model_dump() if hasattr(item, "model_dump") else item for item in items]
    try:
        return _message_list.validate_python(raw)
    except Exception as exc:
        raise ValueError(f"prompt is not a valid message list: {exc}") from exc
