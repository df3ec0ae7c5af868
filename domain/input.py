"""Prompt input normalisation: a string, one message or a list all become messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter

from domain.messages import AgentMessage, user_text

PromptInput = (
    str | AgentMessage | Sequence[AgentMessage] | dict[str, Any] | Sequence[dict[str, Any]]
)

_message_list = TypeAdapter(list[AgentMessage])


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
