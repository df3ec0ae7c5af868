"""Models for testing agents offline: a scripted model and a model that is a Python function.

Both are clients at the model seam (`activities.models.seam.ModelClient`): a worker asks
them as it asks a provider, with no network and no key. `model_clients(model)` makes the
worker's clients from one of them, every provider answered by it::

    from duragent import testing

    def model(messages, info):
        if not any(m.role == "toolResult" for m in messages):
            return [testing.text("Looking."), testing.call("ls", {"path": "."})]
        return "Done: the workspace is listed."

    worker = build_worker(client, db, settings, models=testing.model_clients(
        testing.FunctionModel(model)
    ))

- `scripted_model([...])`: the replies of each session's turns, in order, from Python
  values (`text`, `call`, `thinking`, `output`, a string, a list of them, or an offline
  model step such as `{"error": {"status": 529}}`). It is the offline model's own
  `ScriptedModel` playing a script with `pick: turn`: turn n of a session gets reply n,
  whichever worker asks (docs/offline-script.md has what a step can say).
- `FunctionModel(function)`: each reply is what `function(messages, info)` returns
  (sync or async), streamed as a provider's client streams it; what it raises fails the
  turn with a failure that names it.

Importing this module is light (no SDK, no server): the offline model's scripted side is
imported when first used.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import math
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic_core import to_jsonable_python

from duragent.activities.models.clients import ModelClients
from duragent.activities.models.reply_stream import reply_message
from duragent.activities.models.seam import (
    Delta,
    ModelClient,
    ModelFailed,
    ModelRequest,
    SummaryRequest,
)
from duragent.domain.agents import output_tool_name
from duragent.domain.config import ThinkingLevel
from duragent.domain.events import DeltaKind
from duragent.domain.messages import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
    text_of,
)
from duragent.domain.models import PROVIDERS, Api
from duragent.domain.resources import skills_section
from duragent.domain.transcript import LlmMessage
from duragent.domain.turns import ProviderFailure

if TYPE_CHECKING:
    from duragent.client.agent import Agent
    from duragent.client.api import DuragentClient
    from duragent.client.plugins import Plugin
    from duragent.offline_model.in_process import ScriptedModel
    from duragent.offline_model.script import Script, Step

__all__ = [
    "AgentInfo",
    "FunctionModel",
    "ModelFunction",
    "Output",
    "Reply",
    "ReplyPart",
    "Script",
    "ScriptedModel",
    "ScriptedReply",
    "Step",
    "ToolInfo",
    "agent_env",
    "call",
    "model_clients",
    "output",
    "scripted_model",
    "text",
    "thinking",
]

_LAZY = {
    "ScriptedModel": "duragent.offline_model.in_process",
    "Script": "duragent.offline_model.script",
    "Step": "duragent.offline_model.script",
}
"""Names of the offline model's, imported on first use (it brings its SDK and server)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


# -- the parts of a reply


@dataclass(frozen=True)
class Output:
    """An agent's structured output as a reply gives it (`output`): a call of the agent's
    output tool, or the answer's text for an agent whose output is text."""

    value: Any
    agent: str | None = None
    """The agent's name, which names its output tool; None: the tool the request offers."""


ReplyPart: TypeAlias = str | TextContent | ThinkingContent | ToolCall | Output
"""A piece of a reply: text (a `str` or `text`), `thinking`, a tool call (`call`), or an
agent's `output`."""

Reply: TypeAlias = AssistantMessage | ReplyPart | Sequence[ReplyPart]
"""A reply: one part, a list of parts (in order), or a whole `AssistantMessage` (its
stop reason and usage kept when set)."""


def text(value: str) -> TextContent:
    """A text part of a reply."""
    return TextContent(text=value)


def thinking(value: str, *, signature: str | None = None) -> ThinkingContent:
    """A thinking part of a reply (Anthropic's clients send thinking back only when it is
    signed; a scripted model signs it when `signature` is None)."""
    return ThinkingContent(thinking=value, signature=signature)


def call(
    name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None
) -> ToolCall:
    """A tool call part: the tool `name` with its `arguments`; `id` is made when not given
    (`call_` and 24 hex digits, an id every provider's API takes)."""
    return ToolCall(
        id=id or f"call_{uuid.uuid4().hex[:24]}", name=name, arguments=dict(arguments or {})
    )


def output(value: Any, *, agent: str | None = None) -> Output:
    """The run's structured output, as an agent's model gives it: a call of the agent's
    output tool with `value` as its arguments. For an agent whose output is text, a `str`
    is the answer's text.

    The tool takes a pydantic model output type's fields, and any other type's value as
    its `output` field (`activities.tools.output`). A `FunctionModel` finds the output
    tool among the tools the request offers and reads which from its schema. A scripted
    model needs the agent's name (`agent=`, or `scripted_model(..., agent=...)`) and
    goes by the value: a pydantic model or a dict are the fields (a dict is the arguments
    as written), any other value the `output` field."""
    return Output(value, agent)


# -- what the function is told


@dataclass(frozen=True)
class ToolInfo:
    """A tool the model is offered: its name, what it does, its arguments' JSON schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class AgentInfo:
    """What a `FunctionModel`'s function is told besides the messages: the request's
    model, system prompt (as the model is sent it, skills listed), tools, and the rest of
    how it is asked."""

    model: str
    """As the session names it, `provider:model` (a bare name is Anthropic's)."""
    system_prompt: str
    tools: tuple[ToolInfo, ...]
    session_id: str
    thinking_level: ThinkingLevel
    max_tokens: int

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]

    def tool(self, name: str) -> ToolInfo | None:
        """The offered tool `name`, or None."""
        return next((t for t in self.tools if t.name == name), None)

    @property
    def output_tool(self) -> ToolInfo | None:
        """The output tool of the agent whose session asks, when its output is not text."""
        return next((t for t in self.tools if t.name.startswith(_OUTPUT_TOOL_PREFIX)), None)


_OUTPUT_TOOL_PREFIX = output_tool_name("")
"""How every agent's output tool is named (`domain.agents.output_tool_name`)."""


ModelFunction: TypeAlias = Callable[[list[LlmMessage], AgentInfo], Reply | Awaitable[Reply]]
"""`function(messages, info) -> reply`, sync or async."""

SummaryFunction: TypeAlias = Callable[[str], str | Awaitable[str]]
"""`function(prompt) -> summary`, sync or async."""


# -- FunctionModel


class FunctionModel:
    """A `ModelClient` whose replies a Python function computes.

    Each request calls `function(messages, info)`: `messages` are the conversation as the
    model reads it (`domain.messages`: user messages, the assistant's earlier replies,
    tool results; a copy), `info` the `AgentInfo`. An async function is awaited; a sync
    one runs in a thread, so a slow one does not hold up the worker. Its `Reply` is
    streamed as a provider's client streams one: text, thinking and each call's arguments
    (JSON) as `Delta`s of up to 20 characters, then the `AssistantMessage`, stamped with
    the request's provider, wire API and model; its stop reason is "toolUse" with calls,
    else "stop"; its usage about one token per 4 characters (of the request, of the
    reply) unless the function returned a message with usage.

    What the function raises fails the turn for good (a non-retryable `ModelFailed`
    naming the function and the exception, the exception as its cause), and so does a
    reply that is none of the above. A `ModelFailed` it raises passes as it is: a
    provider's failure, retried when `failure.retryable`.

    `summary` answers summary requests (a compaction's, a branch's): a fixed text, or a
    function of the prompt; None asks `function` with the prompt as the one user message
    and no tools, and takes the text of its reply.

    `requests` holds every request it was asked, oldest first.
    """

    def __init__(
        self,
        function: ModelFunction,
        *,
        summary: str | SummaryFunction | None = None,
        api: Api = "anthropic-messages",
    ) -> None:
        self.function = function
        self.summary = summary
        self.api: Api = api
        """The seam's wire API; the messages are stamped with each request's provider's."""
        self.requests: list[ModelRequest] = []

    def ask(self, request: ModelRequest) -> FunctionReply:
        self.requests.append(request)
        return FunctionReply(self, request)

    async def complete(self, request: SummaryRequest) -> tuple[str, Usage]:
        summary = self.summary
        if isinstance(summary, str):
            answer = summary
        elif summary is not None:
            answer = await self._call(summary, request.prompt)
            if not isinstance(answer, str):
                raise self._failed(
                    f"the summary function {_name(summary)} returned {type(answer).__name__}: "
                    "a summary is a str"
                )
        else:
            info = AgentInfo(
                model=request.model,
                system_prompt="",
                tools=(),
                session_id=request.session_id,
                thinking_level="off",
                max_tokens=request.max_tokens,
            )
            prompt = UserMessage(content=[TextContent(text=request.prompt)], timestamp=0)
            reply = await self._call(self.function, [prompt], info)
            answer = text_of(self._content(reply, ()))
        return answer, Usage(input_tokens=_tokens(request.prompt), output_tokens=_tokens(answer))

    async def aclose(self) -> None:
        """Nothing to close."""

    async def _call(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(*args)`: awaited when async, in a thread when not; what it raises
        (but a `ModelFailed` or a cancellation) becomes a failure naming it."""
        try:
            if inspect.iscoroutinefunction(function):
                result = await function(*args)
            else:
                result = await asyncio.to_thread(function, *args)
            if inspect.isawaitable(result):
                result = await result
        except ModelFailed:
            raise
        except Exception as exc:
            failed = self._failed(
                f"the function {_name(function)} raised {type(exc).__name__}: {exc}"
            )
            raise failed from exc
        return result

    def _failed(self, why: str) -> ModelFailed:
        message = f"FunctionModel: {why}"
        return ModelFailed(
            ProviderFailure(kind="other", status=None, message=message, retryable=False)
        )

    def _content(self, reply: Any, tools: Sequence[ToolInfo]) -> list[AssistantContent]:
        """The content blocks of the function's `reply`; a failure saying what a reply is
        when it is not one."""
        if isinstance(reply, AssistantMessage):
            return list(reply.content)
        parts = (
            [reply]
            if isinstance(reply, str | TextContent | ThinkingContent | ToolCall | Output)
            else reply
        )
        if not isinstance(parts, Sequence):
            raise self._not_a_reply(reply)
        content: list[AssistantContent] = []
        for part in parts:
            if isinstance(part, str):
                content.append(TextContent(text=part))
            elif isinstance(part, TextContent | ThinkingContent | ToolCall):
                content.append(part)
            elif isinstance(part, Output):
                content.append(_output_part(part, tools, self._failed))
            else:
                raise self._not_a_reply(part)
        return content

    def _not_a_reply(self, value: object) -> ModelFailed:
        return self._failed(
            f"the function {_name(self.function)} returned {type(value).__name__}: a reply is an "
            "AssistantMessage, a str, text(), thinking(), call() or output() parts, or a "
            "list of them"
        )


class FunctionReply:
    """One request to a `FunctionModel`, streamed once (`ReplyStream`)."""

    def __init__(self, model: FunctionModel, request: ModelRequest) -> None:
        self._model = model
        self._request = request
        self._streamed: list[AssistantContent | None] = []
        """The blocks as far as they were streamed (a call's only once it is whole)."""

    async def reply(self, on_delta: Callable[[Delta], None]) -> AssistantMessage:
        request, model = self._request, self._model
        info = agent_info(request)
        returned = await model._call(model.function, list(request.messages), info)
        content = model._content(returned, info.tools)
        for index, block in enumerate(content):
            self._streamed.append(None)
            name = block.name if isinstance(block, ToolCall) else None
            kind: DeltaKind = "text"
            if isinstance(block, ToolCall):
                kind, whole = "toolCall", json.dumps(block.arguments, ensure_ascii=False)
            elif isinstance(block, ThinkingContent):
                kind, whole = "thinking", block.thinking
            else:
                whole = block.text
            sent = ""
            for piece in _pieces(whole):
                sent += piece
                self._streamed[index] = _partial(block, sent)
                on_delta(Delta(index, kind, piece, tool_name=name))
                await asyncio.sleep(0)  # as a stream does: a cancellation lands here
            self._streamed[index] = block
        stop: StopReason = "toolUse" if any(isinstance(b, ToolCall) for b in content) else "stop"
        prompt = [info.system_prompt, [m.model_dump(mode="json") for m in request.messages]]
        usage = Usage(
            input_tokens=_tokens([*prompt, request.tools]),
            output_tokens=_tokens([b.model_dump(mode="json") for b in content]),
        )
        if isinstance(returned, AssistantMessage):
            stop = returned.stop_reason
            usage = returned.usage if returned.usage.total_tokens else usage
        return self._message(content, partial=False, stop=stop, usage=usage)

    def so_far(self) -> AssistantMessage:
        streamed = [b for b in self._streamed if b is not None]
        return self._message(streamed, partial=True, usage=Usage())

    def _message(
        self,
        content: list[AssistantContent],
        *,
        partial: bool,
        usage: Usage,
        stop: StopReason = "stop",
    ) -> AssistantMessage:
        """Stamped as the request's provider's client stamps it (a partial one as the
        seam's `reply_message` makes it, as every client does)."""
        ref = self._request.ref
        return reply_message(
            content,
            partial=partial,
            stop=stop,
            api=PROVIDERS[ref.provider].api,
            provider=ref.provider,
            model=ref.model,
            usage=usage,
            timestamp=self._request.timestamp,
        )


def _partial(block: AssistantContent, sent: str) -> AssistantContent | None:
    """`block` as far as `sent` of it was streamed (a call is nothing until whole)."""
    if isinstance(block, TextContent):
        return TextContent(text=sent)
    if isinstance(block, ThinkingContent):
        return block.model_copy(update={"thinking": sent})
    return None


def agent_info(request: ModelRequest) -> AgentInfo:
    """What a `FunctionModel`'s function is told of `request`."""
    snapshot = request.snapshot
    skills = [r for r in snapshot.resources if r.kind == "skill"]
    return AgentInfo(
        model=snapshot.model,
        system_prompt=snapshot.system_prompt + skills_section(skills),
        tools=tuple(
            ToolInfo(t["name"], t["description"], dict(t["input_schema"])) for t in request.tools
        ),
        session_id=request.session_id,
        thinking_level=snapshot.thinking_level,
        max_tokens=snapshot.max_tokens,
    )


def _output_part(
    part: Output, tools: Sequence[ToolInfo], failed: Callable[[str], ModelFailed]
) -> AssistantContent:
    """`part` as the request offering `tools` takes it: a call of the output tool (its
    schema says whether the value is its arguments or their `output` field), or the
    text of an agent with no output tool."""
    wanted = None if part.agent is None else output_tool_name(part.agent)
    tool = next(
        (
            t
            for t in tools
            if (t.name == wanted if wanted else t.name.startswith(_OUTPUT_TOOL_PREFIX))
        ),
        None,
    )
    if tool is None:
        if isinstance(part.value, str) and wanted is None:
            return TextContent(text=part.value)
        offered = ", ".join(t.name for t in tools) or "none"
        raise failed(
            f"output({part.value!r}): the request offers no output tool "
            f"{wanted or _OUTPUT_TOOL_PREFIX + '*'} (tools offered: {offered}); an agent "
            "with an output type other than str has one"
        )
    properties = tool.input_schema.get("properties") or {}
    wrapped = set(properties) == {"output"} and not (
        isinstance(part.value, Mapping) and set(part.value) == {"output"}
    )
    try:
        return call(tool.name, _arguments(part.value, wrapped))
    except ValueError as exc:
        raise failed(str(exc)) from None


def _arguments(value: Any, wrapped: bool) -> dict[str, Any]:
    jsonable = to_jsonable_python(value)
    if wrapped:
        return {"output": jsonable}
    if not isinstance(jsonable, dict):
        raise ValueError(
            f"output({value!r}): the output tool takes an object's fields, not "
            f"{type(value).__name__}"
        )
    return jsonable


# -- the scripted model


ScriptedReply: TypeAlias = Reply | Mapping[str, Any]
"""A scripted turn: a `Reply`, or an offline model step as a script writes it (an error,
a delay, a gate, a `match`: docs/offline-script.md)."""


def scripted_model(
    replies: Sequence[ScriptedReply],
    *,
    agent: str | None = None,
    when_exhausted: Literal["reply", "error"] = "reply",
    api: Api = "anthropic-messages",
) -> ScriptedModel:
    """A `ScriptedModel` playing `replies`, one per turn of each session: the reply of a
    request is the one of the turn its session is at (the offline model's `pick: turn`),
    whichever worker asks. A step that fails (`{"error": {"status": 529}}`) fails its turn
    once and the retry gets the turn's reply. `agent` names the output tool of the
    `output` parts that name no agent. Past the last reply a session is answered "(offline
    script finished)", or with a 500 error when `when_exhausted="error"`. Raises
    `ValueError` for a value that is not a reply."""
    from duragent.offline_model.in_process import ScriptedModel
    from duragent.offline_model.script import Script

    steps = [_step(reply, agent, i) for i, reply in enumerate(replies)]
    script = Script.model_validate(
        {"pick": "turn", "when_exhausted": when_exhausted, "conversations": {"*": steps}}
    )
    return ScriptedModel(script, api=api)


_STOP_REASONS: dict[StopReason, str] = {
    "stop": "end_turn",
    "toolUse": "tool_use",
    "length": "max_tokens",
}


def _step(reply: ScriptedReply, agent: str | None, index: int) -> dict[str, Any]:
    """Reply `index` as an offline model step."""
    if isinstance(reply, Mapping):
        return dict(reply)
    step: dict[str, Any] = {}
    if isinstance(reply, AssistantMessage):
        parts: Sequence[Any] = reply.content
        if reply.stop_reason in _STOP_REASONS:
            step["stop_reason"] = _STOP_REASONS[reply.stop_reason]
        if reply.usage.total_tokens:
            step["usage"] = {
                "input_tokens": reply.usage.input_tokens,
                "output_tokens": reply.usage.output_tokens,
                "cache_read_input_tokens": reply.usage.cache_read_tokens,
                "cache_creation_input_tokens": reply.usage.cache_write_tokens,
            }
    elif isinstance(reply, str | TextContent | ThinkingContent | ToolCall | Output):
        parts = [reply]
    else:
        parts = reply
    step["reply"] = [_script_part(part, agent, index) for part in parts]
    return step


def _script_part(part: Any, agent: str | None, index: int) -> dict[str, Any]:
    if isinstance(part, str):
        return {"text": part}
    if isinstance(part, TextContent):
        return {"text": part.text}
    if isinstance(part, ThinkingContent):
        signed = {"signature": part.signature} if part.signature else {}
        return {"thinking": part.thinking, **signed}
    if isinstance(part, ToolCall):
        return {"tool_use": {"name": part.name, "input": part.arguments, "id": part.id}}
    if isinstance(part, Output):
        name = part.agent or agent
        if name is None:
            if isinstance(part.value, str):
                return {"text": part.value}
            raise ValueError(
                f"reply {index}: output({part.value!r}) needs the agent's name, which names "
                "its output tool: output(..., agent=NAME) or scripted_model(..., agent=NAME)"
            )
        # Without the tool's schema, the value decides: a pydantic model's or a dict's
        # fields are the arguments, any other value is the `output` field.
        wrapped = not (hasattr(part.value, "model_dump") or isinstance(part.value, Mapping))
        tool = {"name": output_tool_name(name), "input": _arguments(part.value, wrapped)}
        return {"tool_use": tool}
    raise ValueError(
        f"reply {index}: {type(part).__name__} is not a reply part: a reply is a str, "
        "text(), thinking(), call() or output() parts, a list of them, an AssistantMessage, "
        "or an offline model step (a dict)"
    )


# -- a worker's clients


def model_clients(model: ModelClient) -> ModelClients:
    """A worker's model clients where `model` answers every provider's models:
    `build_worker(client, db, settings, models=testing.model_clients(model))`. A
    `ScriptedModel` is joined by one on its player for each other wire API, so a
    session's messages are stamped with its own provider's API as from a real client."""
    in_process = sys.modules.get("duragent.offline_model.in_process")
    if in_process is not None and isinstance(model, in_process.ScriptedModel):
        clients: ModelClients = in_process.scripted_clients(model)
        return clients
    return ModelClients(given={name: model for name in PROVIDERS})


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", None) or repr(function)


def _pieces(value: str) -> list[str]:
    """`value` cut into the pieces a stream sends it in (20 characters, as the offline
    model's)."""
    return [value[k : k + _CHUNK] for k in range(0, len(value), _CHUNK)]


_CHUNK = 20


def _tokens(value: object) -> int:
    """About one token per 4 characters of `value` (JSON unless a str), at least 1."""
    encoded = (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    )
    return max(1, math.ceil(len(encoded) / 4))


# -- a local duragent for a test


@contextlib.asynccontextmanager
async def agent_env(
    *agents: Agent[Any, Any] | Plugin,
    model: ModelClient,
    home: Path | None = None,
) -> AsyncIterator[DuragentClient]:
    """A duragent of the test's own, offline: a Temporal dev server on free ports (its
    history in the folder), a SQLite store and the sessions' workspaces in a temporary
    folder (or `home`), and a worker in this process serving `agents` (or plugins), whose
    every model call `model` answers (`FunctionModel`, `scripted_model`). Nothing reaches
    a network or needs a key. Where it runs is its own (home, store, Temporal, namespace,
    task queue, no plugins); other `DURAGENT_*` settings of the environment (the default
    model, the tool sandbox...) still apply. Yields the client to run them with::

        async with testing.agent_env(agent, model=testing.FunctionModel(reply)) as client:
            result = await agent.run("...", deps=deps, client=client)

    Everything stops, and the folder is removed (unless given), on leaving. It takes
    about two seconds to start (Temporal's dev server), so a test module that runs many
    agents may hold one for all of them (a module-scoped async fixture)."""
    from duragent.client.api import DuragentClient
    from duragent.client.connection import connect_temporal
    from duragent.client.workers import build_worker
    from duragent.settings import Settings
    from duragent.store.db import Database
    from duragent.temporal_dev import DevServer

    with contextlib.ExitStack() as folders:
        root = home or Path(folders.enter_context(tempfile.TemporaryDirectory(prefix="duragent-")))
        server = DevServer(root / "temporal.db", headless=True)
        async with server:
            settings = Settings.model_validate(
                {
                    "home": root,
                    "database_url": f"sqlite:///{root / 'duragent.db'}",
                    "temporal_address": server.address,
                    "temporal_namespace": "default",
                    "task_queue": f"test-{uuid.uuid4().hex[:12]}",
                    "plugins": [],
                }
            )
            temporal = await connect_temporal(settings)
            db = Database(settings.database_url)
            try:
                async with build_worker(
                    temporal, db, settings, plugins=agents, models=model_clients(model)
                ):
                    yield DuragentClient(temporal, db, settings, plugins=agents)
            finally:
                db.dispose()
