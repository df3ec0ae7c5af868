"""A transcript carried to another model, as pi's `transform-messages` carries it: what
one model wrote, made into what the target model's API takes back.

A session may change model mid-way, across providers (`duragent config --model`), and
every request sends the whole transcript. What the earlier model wrote is not all valid
for the next one:

- Thinking is signed by the model that thought it (Anthropic's signatures, OpenAI's
  encrypted reasoning): only that model takes it back. Another model's thinking goes as
  plain text; empty or redacted thinking (opaque without its signature) is dropped.
- Tool-call ids follow their API's rules: Anthropic takes `^[a-zA-Z0-9_-]{1,64}$`,
  OpenAI's Chat Completions at most 40 characters. Another model's ids that break the
  target's rule are rewritten (and the results answering them with them), the same way
  every time, never onto an id the transcript already holds.
- A reply that ended in an error or was aborted is an incomplete turn (reasoning without
  its answer, calls cut short): it is left out, as pi leaves it out, and the model goes on
  from the last complete one.
- A call left without a result gets one saying so (`transcript.repair_pairing`, which
  also drops the results whose call was left out).

The target's own messages pass unchanged. Pure and deterministic: it runs before every
request (`activities.model_turn`), whatever the provider.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from duragent.domain.messages import (
    AssistantContent,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)
from duragent.domain.models import DEFAULT_PROVIDER, PROVIDERS, Api, ModelRef
from duragent.domain.transcript import LlmMessage, repair_pairing

ID_LIMITS: dict[Api, int] = {
    "anthropic-messages": 64,
    "openai-chat": 40,
    "openai-responses": 64,
}
"""The longest tool-call id each API takes; all take letters, digits, `_` and `-`."""

_ID_CHARS = re.compile(r"[A-Za-z0-9_-]+")
_NOT_ID_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST = 10
"""Hex digits of the original id added to a rewritten id that would clash."""

_SNAPSHOT = re.compile(r"(?P<family>.+?)[-@](?:\d{8}|\d{4}-\d{2}-\d{2})")
"""A model's dated snapshot: Anthropic's `-20250929`, Vertex's `@20250929`, OpenAI's
`-2025-04-14`."""
_BEDROCK_ID = re.compile(r"(?:[a-z]+(?:-[a-z]+)?\.)?anthropic\.(?P<model>.+?)(?:-v\d+(?::\d+)?)?")
"""Bedrock's id of a Claude model: `us.anthropic.claude-sonnet-4-5-20250929-v1:0`."""


def transform_for(messages: Sequence[LlmMessage], target: ModelRef) -> list[LlmMessage]:
    """`messages` as `target`'s API takes them (see the module's docstring)."""
    taken = {call.id for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls}
    out: list[LlmMessage] = []
    renamed: dict[str, str] = {}  # the last assistant message's rewritten ids: its results follow
    for message in messages:
        if isinstance(message, AssistantMessage):
            renamed = {}
            if message.stop_reason in ("error", "aborted"):
                continue
            if not same_model(message, target):
                message, renamed = _carried(message, target.api, taken)
                if not message.content:
                    continue  # nothing of it is left to send
            out.append(message)
        elif isinstance(message, ToolResultMessage) and message.tool_call_id in renamed:
            out.append(message.model_copy(update={"tool_call_id": renamed[message.tool_call_id]}))
        else:
            out.append(message)
    return repair_pairing(out)


def same_model(message: AssistantMessage, target: ModelRef) -> bool:
    """Whether `target` wrote `message`: the same provider, API and model. A message
    stores the model id the API returned, which may be the dated snapshot of the name
    the session asked for (`claude-sonnet-4-5` answered as `claude-sonnet-4-5-20250929`),
    so both are compared by their model's family. A message stored without provider or
    API is Anthropic's (every message was, before there were others)."""
    provider = message.provider or DEFAULT_PROVIDER
    api = message.api or PROVIDERS[DEFAULT_PROVIDER].api
    return (
        provider == target.provider
        and api == target.api
        and message.model is not None
        and _family(message.model) == _family(target.model)
    )


def _family(model: str) -> str:
    bedrock = _BEDROCK_ID.fullmatch(model)
    if bedrock is not None:
        model = bedrock.group("model")
    snapshot = _SNAPSHOT.fullmatch(model)
    return snapshot.group("family") if snapshot is not None else model


def _carried(
    message: AssistantMessage, api: Api, taken: set[str]
) -> tuple[AssistantMessage, dict[str, str]]:
    """Another model's message for `api`: its thinking as text, its call ids as `api`
    takes them; with the ids rewritten (old -> new)."""
    content: list[AssistantContent] = []
    renamed: dict[str, str] = {}
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.redacted or not block.thinking.strip():
                continue  # opaque without its signature, or nothing to say
            content.append(TextContent(text=block.thinking))
        elif isinstance(block, ToolCall):
            new_id = tool_call_id_for(block.id, api, taken)
            if new_id != block.id:
                renamed[block.id] = new_id
                block = block.model_copy(update={"id": new_id})
            content.append(block)
        else:
            content.append(block)
    return message.model_copy(update={"content": content}), renamed


def tool_call_id_for(call_id: str, api: Api, taken: set[str]) -> str:
    """`call_id` when `api` takes it, else the id it is rewritten to: its characters that
    `api` refuses made `_`, cut to `api`'s length, and, should that clash with an id in
    `taken`, ended with a digest of the original. The new id joins `taken`."""
    limit = ID_LIMITS[api]
    if len(call_id) <= limit and _ID_CHARS.fullmatch(call_id):
        return call_id
    new_id = _NOT_ID_CHAR.sub("_", call_id)[:limit] or "call"
    if new_id in taken:
        digest = hashlib.sha256(call_id.encode()).hexdigest()[:_DIGEST]
        new_id = f"{new_id[: limit - _DIGEST - 1]}_{digest}"
    taken.add(new_id)
    return new_id
