"""The turn's model call: save the previous turn, take the turn snapshot, stream the reply.

Two parts: the store's side of the turn (`activities.turn_store`: the save point, the
snapshot and the context before the call; run events and staging during and after it)
and asking the model (`activities.model`: the provider's API, nothing else). Between
them, here: the context as extensions shape it, the tools offered, the deltas as run
events, and the reply as the workflow sees it (`ModelReply`: its calls checked,
`activities.call_refs`; its cost). The activity input names a leaf and a snapshot; the
conversation itself is read from the store, so no workflow payload ever carries it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple

from temporalio import activity
from temporalio.exceptions import ApplicationError

from duragent.activities.call_refs import call_ref
from duragent.activities.extensions import Extensions, TurnContext
from duragent.activities.heartbeat import heartbeating
from duragent.activities.model import Delta, Model, ModelFailed, ModelRequest
from duragent.activities.tools import ToolRegistry
from duragent.activities.turn_store import TurnStore
from duragent.activities.worker_loss import unstick_after_retry
from duragent.domain.config import SnapshotRef, TurnSnapshot
from duragent.domain.cost import model_name, turn_cost
from duragent.domain.events import MessageEnd, MessageUpdate
from duragent.domain.messages import AgentMessage, AssistantMessage, text_of
from duragent.domain.models import stored_model_ref
from duragent.domain.prices import PriceTable
from duragent.domain.transform_messages import transform_for
from duragent.domain.turns import (
    MODEL_TURN,
    PROVIDER_ERROR,
    ModelReply,
    ProviderFailure,
    TurnInput,
)
from duragent.store.statements import Tx

PREVIEW_CHARS = 200


class ModelTurns:
    def __init__(
        self,
        store: TurnStore,
        model: Model,
        tools: ToolRegistry,
        extensions: Extensions,
        prices: PriceTable | None = None,
    ) -> None:
        self._store = store
        self._model = model
        self._tools = tools
        self._extensions = extensions
        self._prices = prices
        """Prices each turn for the workflow's budget (it never reads prices itself)."""

    @activity.defn(name=MODEL_TURN)
    async def model_turn(self, data: TurnInput) -> ModelReply:
        # Heartbeats cover the whole call, store waits included: a slow store must not
        # look like a dead worker.
        async with heartbeating():
            await unstick_after_retry()
            answer = await self.answer(data)
        return answer.result

    async def answer(
        self, data: TurnInput, with_calls: Callable[[Tx], None] | None = None
    ) -> Answer:
        """Save the previous turn, then the model's reply, staged (see `Answer`).
        `with_calls` runs in the transaction that stages a reply with tool calls (a read
        the turn needs before they run)."""
        snapshot, context, earlier, skeleton, servers, workspace = await self._store.prepare(data)
        if earlier is not None:  # an earlier attempt got the whole reply: keep it
            self._store.finished(data.entry_id, earlier)
            return Answer(self._result(data, snapshot, earlier, servers), True, workspace)
        # Tools listed at run time (MCP servers') are listed anew once per turn.
        await self._tools.refresh(servers)
        message, raced = await self._reply(data, snapshot, context, servers, skeleton, with_calls)
        return Answer(self._result(data, snapshot, message, servers), raced, workspace)

    async def _reply(
        self,
        data: TurnInput,
        snapshot: TurnSnapshot,
        context: list[AgentMessage],
        servers: list[str] | None,
        skeleton: AssistantMessage,
        with_calls: Callable[[Tx], None] | None,
    ) -> tuple[AssistantMessage, bool]:
        """Ask the model, streaming deltas to run events; the reply is staged. True with
        it when another attempt staged its reply first (that one is kept). `skeleton`:
        the reply as its start event (stored already) says it began."""
        turn = TurnContext(
            data.session_id,
            data.run_id,
            data.turn,
            snapshot.model,
            self._extensions.session(data.session_id),
        )
        context = await self._extensions.transform_context(context, turn)
        call = self._model.ask(
            ModelRequest(
                snapshot=snapshot,
                # As the model's API takes it: another model's thinking as text, call
                # ids the API accepts, every call answered (domain.transform_messages).
                messages=transform_for(
                    self._extensions.convert_to_llm(context), stored_model_ref(snapshot.model)
                ),
                tools=self._tools.api_specs(snapshot.active_tools, servers),
                session_id=data.session_id,
                timestamp=skeleton.timestamp,
            )
        )
        sink = self._store.sink(data)
        attempt = activity.info().attempt

        def on_delta(delta: Delta) -> None:
            sink.add(
                MessageUpdate(
                    entry_id=data.entry_id,
                    attempt=attempt,
                    content_index=delta.content_index,
                    kind=delta.kind,
                    delta=delta.text,
                    tool_name=delta.tool_name,
                )
            )

        try:
            message = await call.reply(on_delta)
        except asyncio.CancelledError:
            aborted = call.so_far()
            sink.add(MessageEnd(entry_id=data.entry_id, message=aborted))
            await sink.close((data.entry_id, aborted))
            raise
        except ModelFailed as failed:
            failure = failed.failure
            ended = skeleton.model_copy(
                update={"stop_reason": "error", "error_message": failure.message}
            )
            sink.add(MessageEnd(entry_id=data.entry_id, message=ended))
            await sink.close()
            raise _provider_error(failure) from failed.__cause__
        sink.add(MessageEnd(entry_id=data.entry_id, message=message))
        kept = await sink.close(
            (data.entry_id, message), also=with_calls if message.tool_calls else None
        )
        raced = isinstance(kept, AssistantMessage) and kept != message
        if isinstance(kept, AssistantMessage) and raced:
            # Another attempt finished first (this worker was taken for lost meanwhile):
            # the workflow may have acted on that reply, so this attempt returns it too.
            message = kept
        # Staged and committed: this turn's tool calls read it here, if they run here.
        self._store.finished(data.entry_id, message)
        return message, raced

    def _result(
        self,
        data: TurnInput,
        snapshot: TurnSnapshot,
        message: AssistantMessage,
        servers: list[str] | None,
    ) -> ModelReply:
        calls = [call_ref(call, snapshot, servers, self._tools) for call in message.tool_calls]
        asks = any(call.approval is not None for call in calls)
        return ModelReply(
            snapshot=None if snapshot.id == data.snapshot.id else SnapshotRef.of(snapshot),
            stop_reason=message.stop_reason,
            usage=message.usage,
            text_preview=text_of(message.content)[:PREVIEW_CHARS],
            tool_calls=calls,
            approval_policy=snapshot.approval_policy if asks else None,
            model=model_name(message.provider, message.model),
            cost=None
            if self._prices is None
            else turn_cost(
                model_name(message.provider, message.model), message.usage, self._prices
            ),
        )


class Answer(NamedTuple):
    """A turn's model call, done."""

    result: ModelReply
    raced: bool
    """Another attempt of this turn staged the reply (an earlier one: the model was not
    asked again; or one that raced this one, taken for lost meanwhile): its calls may
    have begun."""
    workspace: str
    """The session's workspace as this turn read it: where the turn's calls run."""


def _provider_error(failure: ProviderFailure) -> ApplicationError:
    # Non-retryable for Temporal: the workflow decides about retries, visibly.
    return ApplicationError(
        failure.message, failure.model_dump(), type=PROVIDER_ERROR, non_retryable=True
    )
