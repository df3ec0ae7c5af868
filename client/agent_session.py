"""One session of an agent held from code (`async with agent.session() as s:`): runs
that return the agent's typed output, and the words a person has for a run at work
(steer, follow up, guide, abort), and its events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Generic

from duragent.client.agent import AgentRunResult, DepsT, OutputT
from duragent.client.errors import InvalidChange
from duragent.domain.budgets import Budget
from duragent.domain.input import PromptInput
from duragent.domain.runs import RunResult
from duragent.store.records import QueueItem, StoredEvent

if TYPE_CHECKING:
    from duragent.client.agent import Agent
    from duragent.client.api import DuragentClient, RunHandle


class AgentSession(Generic[DepsT, OutputT]):
    """A session of `agent`; `id` is the session's id (for `duragent show`, the page)."""

    def __init__(self, agent: Agent[DepsT, OutputT], client: DuragentClient, id: str) -> None:
        self.agent = agent
        self.client = client
        self.id = id

    @classmethod
    async def open(
        cls, agent: Agent[DepsT, OutputT], client: DuragentClient, session_id: str | None
    ) -> AgentSession[DepsT, OutputT]:
        """A new session of `agent`, or `session_id` when it is one of the agent's
        (`InvalidChange` if it is another's)."""
        if session_id is None:
            made = await client.sessions.create(agent=agent)
            return cls(agent, client, made.id)
        session = await client.sessions.get(session_id)
        if session.config.agent != agent.name:
            raise InvalidChange(
                f"session {session_id} is not a session of agent {agent.name!r} "
                f"(its agent: {session.config.agent or 'none'})"
            )
        return cls(agent, client, session_id)

    async def start(
        self,
        prompt: PromptInput,
        *,
        deps: DepsT | None = None,
        max_turns: int | None = None,
        budget: Budget | None = None,
    ) -> RunHandle:
        """Start a run (`SessionBusy` if one is open); `result(handle)` waits for it."""
        return await self.client.runs.prompt(
            self.id, prompt, deps=self.agent.deps_json(deps), max_turns=max_turns, budget=budget
        )

    async def result(self, handle: RunHandle) -> AgentRunResult[OutputT]:
        """The typed result of the run `handle` started, once it has ended."""
        return self.agent.result_of(await handle.result())

    async def run(
        self,
        prompt: PromptInput,
        *,
        deps: DepsT | None = None,
        max_turns: int | None = None,
        budget: Budget | None = None,
    ) -> AgentRunResult[OutputT]:
        """Start a run and wait for its typed result (`AgentRunFailed` without one)."""
        handle = await self.start(prompt, deps=deps, max_turns=max_turns, budget=budget)
        return await self.result(handle)

    async def steer(self, message: PromptInput) -> str:
        """Reaches the model after the current turn's tool calls (the item's id)."""
        return await self.client.inputs.steer(self.id, message)

    async def follow_up(self, message: PromptInput) -> str:
        """Reaches the model when the agent would otherwise stop (the item's id)."""
        return await self.client.inputs.follow_up(self.id, message)

    async def guide(self, text: str) -> QueueItem:
        """Guidance for the run at work, taken at its nearest safe point."""
        return await self.client.inputs.guide_text(self.id, text)

    async def abort(self) -> RunResult:
        """Stop the run at work; what it did is kept."""
        return await self.client.runs.abort(self.id)

    async def events(self, *, after: int = 0, follow: bool = True) -> AsyncIterator[StoredEvent]:
        """The session's events after `after`; with `follow`, live until a run ends."""
        async for event in self.client.events.stream(self.id, after=after, follow=follow):
            yield event

    def __repr__(self) -> str:
        return f"AgentSession({self.agent.name!r}, id={self.id!r})"
