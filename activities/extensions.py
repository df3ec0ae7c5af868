"""Extensions: hooks a worker runs for every session it hosts.

Registered with the worker (`build_worker(..., extensions=[...])`). The methods here run
in activities, so they may do I/O and see the whole context:

| hook | runs in | when |
|---|---|---|
| `system_prompt` (snapshot provider) | the activity taking a turn snapshot | once per snapshot |
| `transform_context` | the model activity | before each model call |
| `convert_to_llm` | the model activity | after `transform_context` |
| `before_tool_call` | the tool activity | before the tool runs; may block it |
| `after_tool_call` | the tool activity | after it ran; may override the result |
| `should_stop_after_turn`, `prepare_next_turn` | the workflow | after each turn |

The last two decide the loop, so they must be deterministic: they live in a
`domain.hooks.WorkflowHooks` subclass named by `workflow_hooks` (an import path), which
the workflow imports inside Temporal's sandbox.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from duragent.domain.messages import AgentMessage, AssistantMessage, ToolCall, ToolResultContent
from duragent.domain.tools import ToolResult
from duragent.domain.transcript import LlmMessage, default_convert_to_llm
from duragent.store.records import SessionRecord


class Session(Protocol):
    """What hooks may do with their session (a `client.facade.SessionFacade`)."""

    async def append_custom_entry(
        self, custom_type: str, data: dict[str, Any] | None = None
    ) -> str: ...

    async def append_custom_message(
        self, custom_type: str, text: str, *, display: bool = True
    ) -> str: ...


@dataclass(frozen=True)
class TurnContext:
    session_id: str
    run_id: str
    turn: int
    model: str
    session: Session | None = None
    """Writes through it are pending until the run's next save point."""


@dataclass(frozen=True)
class ToolCallContext:
    session_id: str
    run_id: str
    turn: int
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: dict[str, Any]
    """As the model sent them; the tool validates them after this hook."""
    session: Session | None = None


class BlockToolCall(BaseModel):
    """Returned by `before_tool_call`: the call does not run; the model gets `reason`."""

    model_config = ConfigDict(extra="forbid")

    reason: str


class ToolResultOverride(BaseModel):
    """Returned by `after_tool_call`: each field that is set replaces the result's."""

    model_config = ConfigDict(extra="forbid")

    content: list[ToolResultContent] | None = None
    details: dict[str, Any] | None = None
    is_error: bool | None = None
    terminate: bool | None = None

    def apply(self, result: ToolResult) -> ToolResult:
        # The fields as they are (not dumped: content blocks must stay models).
        return result.model_copy(update={name: value for name, value in self if value is not None})


class Extension:
    """Override the hooks you need; the defaults change nothing."""

    name = "extension"
    workflow_hooks: str | None = None
    """`"package.module:ClassName"` of a `domain.hooks.WorkflowHooks` subclass, or None."""

    def system_prompt(self, current: str, session: SessionRecord) -> str | None:
        """Provider callback: the system prompt for a new snapshot (None: keep `current`).
        Runs in a worker thread; may block briefly."""
        return None

    async def transform_context(
        self, messages: list[AgentMessage], turn: TurnContext
    ) -> list[AgentMessage]:
        return messages

    def convert_to_llm(self, messages: list[AgentMessage]) -> list[LlmMessage] | None:
        """Map agent messages to model messages (None: the default conversion)."""
        return None

    async def before_tool_call(self, call: ToolCallContext) -> BlockToolCall | None:
        return None

    async def after_tool_call(
        self, call: ToolCallContext, result: ToolResult
    ) -> ToolResultOverride | None:
        return None


class Extensions:
    """The worker's extensions applied in registration order."""

    def __init__(
        self,
        extensions: Sequence[Extension] = (),
        session_for: Callable[[str], Session] | None = None,
    ) -> None:
        self.items = list(extensions)
        self._session_for = session_for

    def session(self, session_id: str) -> Session | None:
        """The facade hooks get for a session (None when the worker has none to give)."""
        return self._session_for(session_id) if self._session_for else None

    @property
    def workflow_hooks(self) -> list[str]:
        return [e.workflow_hooks for e in self.items if e.workflow_hooks]

    def system_prompt(self, configured: str, session: SessionRecord) -> str:
        prompt = configured
        for extension in self.items:
            prompt = extension.system_prompt(prompt, session) or prompt
        return prompt

    async def transform_context(
        self, messages: list[AgentMessage], turn: TurnContext
    ) -> list[AgentMessage]:
        for extension in self.items:
            messages = await extension.transform_context(messages, turn)
        return messages

    def convert_to_llm(self, messages: list[AgentMessage]) -> list[LlmMessage]:
        for extension in self.items:
            converted = extension.convert_to_llm(messages)
            if converted is not None:
                return converted
        return default_convert_to_llm(messages)

    async def before_tool_call(self, call: ToolCallContext) -> BlockToolCall | None:
        for extension in self.items:
            blocked = await extension.before_tool_call(call)
            if blocked is not None:
                return blocked
        return None

    async def after_tool_call(self, call: ToolCallContext, result: ToolResult) -> ToolResult:
        for extension in self.items:
            override = await extension.after_tool_call(call, result)
            if override is not None:
                result = override.apply(result)
        return result
