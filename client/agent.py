"""Agents defined in code: `duragent.Agent`.

An agent is a name, a model, instructions, tools (functions, `Tool`s, or the names of
the workers' tools, built-in ones included), MCP servers, an approval policy, a budget,
an output type and a dependencies type. It is a plugin's (`Plugin(agents=[...])`, or the
agent itself given to `--plugin module:agent`): the workers serve its tools, offered only
to its sessions. A session made from it (`sessions.create(agent=...)`, `duragent run
--agent NAME`, the HTTP API's `agent` field) starts with its model, instructions and
tools; its runs are the same durable workflows as any other.

From code, `await agent.run("...", deps=...)` returns an `AgentRunResult` whose `output`
is of the output type; `agent.run_sync` does it from code that is not async; `async with
agent.session() as s:` holds one session over several runs, with steering, follow-ups,
guidance, abort and its events (`client.agent_session`).

Structured output: for an `output_type` other than `str`, the model answers by calling
the agent's output tool (`activities.tools.output`), whose parameters are the type's
schema; a refused answer is returned to the model, which tries again, `output_retries`
times at most (`workflows.output`). Every provider does it the same way.

Dependencies: `deps` (of `deps_type`: a pydantic model, a dataclass, a TypedDict or any
type pydantic serializes) are dumped to JSON when the run starts, travel in the run's
workflow input, and reach each tool call as `ctx.deps` of a `ToolContext[Deps]`,
validated back into the type the tool's context names. So they are small values (ids,
addresses, settings; at most `domain.agents.MAX_DEPS_BYTES`), never connections or
secrets: they are kept in the run's history.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic

from pydantic import JsonValue, TypeAdapter, ValidationError
from typing_extensions import TypeVar

from duragent.activities.tools import Tool, function_tool
from duragent.activities.tools.output import output_tool
from duragent.client.errors import DuragentError
from duragent.client.plugins import Plugin
from duragent.domain.agents import OutputSpec, check_agent_name, output_tool_name
from duragent.domain.approvals import ApprovalPolicy
from duragent.domain.budgets import Budget
from duragent.domain.config import DEFAULT_SYSTEM_PROMPT, SessionConfig, ThinkingLevel
from duragent.domain.input import PromptInput
from duragent.domain.messages import Usage
from duragent.domain.models import parse_model
from duragent.domain.runs import RunResult

if TYPE_CHECKING:
    from duragent.client.agent_session import AgentSession
    from duragent.client.api import DuragentClient

_NO_DEPS = type(None)
_F = TypeVar("_F", bound=Callable[..., Any])
OutputT = TypeVar("OutputT", default=str)
DepsT = TypeVar("DepsT", default=None)


class AgentRunFailed(DuragentError):
    """An agent's run ended without its output: with an error, aborted, or (for an
    output type) with none the type accepts. `result` is the run's result as it ended."""

    def __init__(self, agent: str, result: RunResult, why: str) -> None:
        super().__init__(f"agent {agent!r}, run {result.run_id}: {why}")
        self.result = result


@dataclass(frozen=True)
class AgentRunResult(Generic[OutputT]):
    """What an agent's run gave: `output`, of the agent's output type, and what it took."""

    output: OutputT
    session_id: str
    run_id: str
    usage: Usage
    cost_usd: float
    """What the run's model calls cost, as the worker priced them."""
    turns: int
    run: RunResult
    """The run's result as the client has it (status, final text, unpriced models...)."""


class Agent(Generic[DepsT, OutputT]):
    """An agent: `Agent("support", model="openai:gpt-4.1", instructions=..., tools=[...],
    output_type=Reply, deps_type=Deps)`. See the module for what each part does."""

    def __init__(
        self,
        name: str,
        *,
        model: str | None = None,
        instructions: str | None = None,
        tools: Sequence[Tool[Any] | Callable[..., Any] | str] = (),
        mcp_servers: Mapping[str, Any] | Sequence[str] = (),
        approval_policy: ApprovalPolicy | None = None,
        budget: Budget | None = None,
        output_type: type[OutputT] = str,  # type: ignore[assignment]
        deps_type: type[DepsT] = _NO_DEPS,  # type: ignore[assignment]
        output_retries: int = 2,
        thinking_level: ThinkingLevel | None = None,
        max_tokens: int | None = None,
    ) -> None:
        """`model`: any `provider:model` (default: the settings' model). `tools`: functions
        (made tools as `@duragent.tool` makes them), `Tool`s, or names of the workers'
        tools (`"read"`, `"bash"`...). `mcp_servers`: servers by name with their config
        (the workers start them), or the names of servers the workers' config lists.
        Raises `ValueError` naming what is wrong."""
        self.name = check_agent_name(name)
        if model is not None:
            parse_model(model)  # UnknownModel (a ValueError) names the providers there are
        self.model = model
        self.instructions = instructions
        self.approval_policy = approval_policy
        self.budget = budget
        self.output_type = output_type
        self.deps_type = deps_type
        self.output_retries = output_retries
        self.thinking_level = thinking_level
        self.max_tokens = max_tokens
        self._tools: list[Tool[Any] | Callable[..., Any] | str] = list(tools)
        self.mcp_definitions: Mapping[str, Any] = (
            dict(mcp_servers) if isinstance(mcp_servers, Mapping) else {}
        )
        self._mcp_names = list(mcp_servers)
        self._output_adapter: TypeAdapter[OutputT] = TypeAdapter(output_type)
        self._deps_adapter: TypeAdapter[DepsT] = TypeAdapter(deps_type)
        self.output = (
            None
            if output_type is str
            else OutputSpec(
                tool=output_tool_name(name),
                type_name=getattr(output_type, "__name__", None) or str(output_type),
                retries=output_retries,
            )
        )

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, model={self.model!r})"

    def tool(self, function: _F) -> _F:
        """Add a function to the agent's tools: `@agent.tool` (before the agent is served);
        the function itself is returned, its signature kept."""
        if "plugin" in self.__dict__ or "_own_tools" in self.__dict__:
            raise RuntimeError(f"agent {self.name!r} is served already: add tools before")
        function_tool(function)  # refused now, with its reason, rather than when served
        self._tools.append(function)
        return function

    @cached_property
    def _own_tools(self) -> list[Tool[Any]]:
        made = [
            item if isinstance(item, Tool) else function_tool(item)
            for item in self._tools
            if not isinstance(item, str)
        ]
        if self.output is not None:
            made.append(output_tool(self.output.tool, self.output_type, self.output.type_name))
        return made

    def own_tools(self) -> list[Tool[Any]]:
        """The tools the agent brings (its functions and `Tool`s, and its output tool)."""
        return list(self._own_tools)

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools its sessions are offered (MCP servers' come on top)."""
        named = [item for item in self._tools if isinstance(item, str)]
        return [*named, *(tool.name for tool in self._own_tools)]

    @cached_property
    def plugin(self) -> Plugin:
        """The plugin that serves this agent alone (what `--plugin module:agent` loads)."""
        return Plugin(name=f"agent:{self.name}", agents=(self,))

    def session_config(self, default_model: str) -> SessionConfig:
        """The config a session made from the agent starts with."""
        servers = [f"{server}__*" for server in self._mcp_names]
        config = SessionConfig(
            model=self.model or default_model,
            system_prompt=self.instructions or DEFAULT_SYSTEM_PROMPT,
            active_tools=[*self.tool_names, *servers],
            mcp_servers=list(self._mcp_names),
            approval_policy=self.approval_policy,
            budget=self.budget,
            agent=self.name,
            output=self.output,
        )
        changes: dict[str, Any] = {}
        if self.thinking_level is not None:
            changes["thinking_level"] = self.thinking_level
        if self.max_tokens is not None:
            changes["max_tokens"] = self.max_tokens
        return config.model_copy(update=changes) if changes else config

    def deps_json(self, deps: DepsT | None) -> JsonValue:
        """`deps` in the JSON form they travel in; `TypeError` when they are not of
        `deps_type` (or not serializable)."""
        if deps is None:
            return None
        try:
            value = self._deps_adapter.validate_python(deps)
            dumped: JsonValue = self._deps_adapter.dump_python(value, mode="json")
        except (ValidationError, TypeError, ValueError) as err:
            raise TypeError(
                f"agent {self.name!r}: deps are not a {self.deps_type}: {err}"
            ) from None
        return dumped

    def result_of(self, result: RunResult) -> AgentRunResult[OutputT]:
        """The typed result of one of the agent's runs; `AgentRunFailed` when it ended
        without an output."""
        if result.status != "completed":
            why = f"ended {result.status}" + (f": {result.error}" if result.error else "")
            raise AgentRunFailed(self.name, result, why)
        raw: object = result.output if self.output is not None else result.final_text
        if self.output is not None and raw is None:
            raise AgentRunFailed(self.name, result, "the run ended without its output")
        try:
            output = self._output_adapter.validate_python(raw)
        except ValidationError as err:  # the type changed since the run validated it
            why = f"its output is no {self.output_type}: {err}"
            raise AgentRunFailed(self.name, result, why) from None
        return AgentRunResult(
            output=output,
            session_id=result.session_id,
            run_id=result.run_id,
            usage=result.usage,
            cost_usd=result.cost_usd,
            turns=result.turns,
            run=result,
        )

    async def run(
        self,
        prompt: PromptInput,
        *,
        deps: DepsT | None = None,
        client: DuragentClient | None = None,
        session_id: str | None = None,
        max_turns: int | None = None,
        budget: Budget | None = None,
    ) -> AgentRunResult[OutputT]:
        """Run the agent on `prompt` in a new session (or `session_id`, one of its own)
        and wait for its output. With no `client`, the local services are started for
        the call (`duragent.local`), with a worker in this process serving the agent."""
        async with self.session(client=client, session_id=session_id) as session:
            return await session.run(prompt, deps=deps, max_turns=max_turns, budget=budget)

    def run_sync(
        self,
        prompt: PromptInput,
        *,
        deps: DepsT | None = None,
        client: DuragentClient | None = None,
        session_id: str | None = None,
        max_turns: int | None = None,
        budget: Budget | None = None,
    ) -> AgentRunResult[OutputT]:
        """`run`, from code that is not async (it runs an event loop of its own)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("run_sync() is for code outside an event loop: await run()")
        return asyncio.run(
            self.run(
                prompt,
                deps=deps,
                client=client,
                session_id=session_id,
                max_turns=max_turns,
                budget=budget,
            )
        )

    @asynccontextmanager
    async def session(
        self, *, client: DuragentClient | None = None, session_id: str | None = None
    ) -> AsyncIterator[AgentSession[DepsT, OutputT]]:
        """One session of the agent (new, or `session_id`) for several runs; with no
        `client`, over local services started for it and stopped on leaving."""
        from duragent.client.agent_session import AgentSession
        from duragent.client.local import local

        if client is None:
            async with local(plugins=[self]) as started:
                yield await AgentSession.open(self, started, session_id)
            return
        yield await AgentSession.open(self, client, session_id)
