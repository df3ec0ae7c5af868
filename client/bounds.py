"""The one size check on what a client sends, and the wording of refused input."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from duragent.client.errors import InputTooLarge, InvalidPrompt
from duragent.domain.input import MAX_INPUT_BYTES, PromptInput, input_bytes, normalize_prompt_input
from duragent.domain.messages import AgentMessage, UserMessage, text_of
from duragent.store.clock import now_ms


def bounded(what: str, value: object) -> None:
    """The one size check on what a client sends (`MAX_INPUT_BYTES`, measured by
    `input_bytes`: a text as sent, a message as its JSON): `InputTooLarge` naming `what`
    before anything of it is stored or sent."""
    size = input_bytes(value)
    if size > MAX_INPUT_BYTES:
        raise InputTooLarge(what, size, MAX_INPUT_BYTES)


def one_line(error: ValidationError) -> str:
    """A validation error as one line per bad field: which field, the rule, the value."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']} (got {e['input']!r})"
        for e in error.errors(include_url=False)
    )


def first_line(messages: Sequence[AgentMessage]) -> str:
    for message in messages:
        if isinstance(message, UserMessage):
            return text_of(message.content).splitlines()[0][:80] if text_of(message.content) else ""
    return ""


def one_message(message: PromptInput, what: str) -> AgentMessage:
    try:
        messages = normalize_prompt_input(message, now_ms())
    except ValueError as err:
        raise InvalidPrompt(str(err)) from err
    if len(messages) != 1:
        raise InvalidPrompt(f"expected one message, got {len(messages)}")
    bounded(what, message if isinstance(message, str) else messages[0])
    return messages[0]
