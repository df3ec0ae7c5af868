"""The model turn: save the previous turn, take the turn snapshot, stream the reply.

The activity input names a leaf and a snapshot; the conversation itself is read from
the store here, so no workflow payload ever carries it. Deltas go to the run-event side
channel as they arrive; the finished message is staged for the turn's save point.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import anthropic
from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from duragent.activities.anthropic_format import request_params
from duragent.activities.anthropic_stream import Delta, ReplyStream, assistant_message
from duragent.activities.event_sink import EventSink
from duragent.activities.extensions import Extensions, TurnContext
from duragent.activities.heartbeat import heartbeating
from duragent.activities.provider_errors import classify
from duragent.activities.save_point import find_commit, save_point
from duragent.activities.snapshots import SnapshotTaker
from duragent.activities.store_retry import with_store_retries
from duragent.activities.tools import ToolRegistry
from duragent.activities.tools.schema import format_validation_error
from duragent.activities.worker_loss import unstick_after_retry
from duragent.domain.approvals import verdict
from duragent.domain.config import SnapshotRef, TurnSnapshot
from duragent.domain.context import context_messages, derive_path_state
from duragent.domain.cost import turn_cost
from duragent.domain.events import MessageEnd, MessageStart, MessageUpdate
from duragent.domain.messages import AgentMessage, AssistantMessage, ToolCall, text_of
from duragent.domain.prices import PriceTable
from duragent.domain.questions import ASK_USER_TOOL, UserQuestion
from duragent.domain.tools import ToolCallRef
from duragent.domain.transcript import repair_pairing
from duragent.domain.turns import (
    MODEL_TURN,
    PROVIDER_ERROR,
    ModelReply,
    ProviderFailure,
    TurnInput,
)
from duragent.store import entries, events, sessions, snapshots, staging
from duragent.store.db import Database
from duragent.store.statements import Tx

PREVIEW_CHARS = 200
ARGS_PREVIEW_CHARS = 100


class ModelTurns:
    def __init__(
        self,
        db: Database,
        client: anthropic.AsyncAnthropic,
        tools: ToolRegistry,
        extensions: Extensions,
        snapshot_taker: SnapshotTaker,
        cache: entries.EntryCache,
        prices: PriceTable | None = None,
        replies: staging.FinishedReplies | None = None,
    ) -> None:
        self._db = db
        self._prices = prices
        """Prices each turn for the workflow's budget (it never reads prices itself)."""
        self._client = client
        self._tools = tools
        self._extensions = extensions
        self._taker = snapshot_taker
        # Both are immutable once stored: snapshots are content-addressed, entries final.
        self._snapshots: dict[str, TurnSnapshot] = {}
        self._entries = cache
        self._replies = replies or staging.FinishedReplies()
        """Finished replies, for this worker's tool calls (shared with `ToolCalls`)."""

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
        prepared = await with_store_retries(
            lambda: self._prepare(data), what="saving the turn and reading the context"
        )
        snapshot, context, earlier, skeleton, servers, workspace = prepared
        if earlier is not None:  # an earlier attempt got the whole reply: keep it
            self._replies.put(data.entry_id, earlier)
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
        params = request_params(
            snapshot,
            repair_pairing(self._extensions.convert_to_llm(context)),
            self._tools.api_specs(snapshot.active_tools, servers),
            session_id=data.session_id,
        )
        sink = EventSink(self._db, data.session_id, data.run_id)
        started = skeleton.timestamp
        stream = ReplyStream()
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
            reply = await stream.run(self._client, params, on_delta)
        except asyncio.CancelledError:
            aborted = assistant_message(
                stream.so_far, model=snapshot.model, timestamp=started, partial=True
            )
            sink.add(MessageEnd(entry_id=data.entry_id, message=aborted))
            await sink.close((data.entry_id, aborted))
            raise
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            failed = skeleton.model_copy(
                update={"stop_reason": "error", "error_message": failure.message}
            )
            sink.add(MessageEnd(entry_id=data.entry_id, message=failed))
            await sink.close()
            raise _provider_error(failure) from exc
        message = assistant_message(reply, model=snapshot.model, timestamp=started)
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
        self._replies.put(data.entry_id, message)
        return message, raced

    def _result(
        self,
        data: TurnInput,
        snapshot: TurnSnapshot,
        message: AssistantMessage,
        servers: list[str] | None,
    ) -> ModelReply:
        calls = [self._call_ref(call, snapshot, servers) for call in message.tool_calls]
        asks = any(call.approval is not None for call in calls)
        return ModelReply(
            snapshot=None if snapshot.id == data.snapshot.id else SnapshotRef.of(snapshot),
            stop_reason=message.stop_reason,
            usage=message.usage,
            text_preview=text_of(message.content)[:PREVIEW_CHARS],
            tool_calls=calls,
            approval_policy=snapshot.approval_policy if asks else None,
            model=message.model,
            cost=None
            if self._prices is None
            else turn_cost(message.model, message.usage, self._prices),
        )

    def _call_ref(
        self, call: ToolCall, snapshot: TurnSnapshot, servers: list[str] | None
    ) -> ToolCallRef:
        """The call as the workflow sees it: refused if its tool is not active (or its MCP
        server not one the session uses) or the approval policy denies it; marked if the
        policy asks for a decision first."""
        refused = self._tools.refusal(call.name, snapshot.active_tools, servers)
        ask = None
        if refused is None:
            ask, refused = verdict(snapshot.approval_policy, call.name, call.arguments)
        question = None
        if refused is None and call.name == ASK_USER_TOOL:
            question, refused = _question(call.arguments)
            ask = None  # the question itself waits for the person: never approved first
        return ToolCallRef(
            id=call.id,
            name=call.name,
            args_preview=_preview(call.arguments),
            traits=self._tools.traits_of(call.name),
            refused=refused,
            approval=ask,
            question=question,
        )

    def _prepare(self, data: TurnInput) -> _Prepared:
        """Save the previous turn, take this turn's snapshot, read the context; and the
        reply an earlier attempt of this turn finished and staged, if any, the MCP
        servers the session uses (session-wide config, as of this save point) and its
        workspace."""
        with self._db.transaction() as db:
            leaf_id, ref = data.leaf_id, data.snapshot
            earlier: AgentMessage | None = None
            if data.commit is not None:
                # The save point's read also finds an earlier attempt's reply.
                found = find_commit(db, data.session_id, data.commit, staged_too=[data.entry_id])
                earlier = found.staged.get(data.entry_id)
                leaf_id = save_point(
                    db,
                    session_id=data.session_id,
                    run_id=data.run_id,
                    parent_id=data.leaf_id,
                    data=data.commit,
                    cache=self._entries,
                    found=found,
                )
            else:
                earlier = staging.staged_message(db, data.entry_id)
            path = entries.load_context_path(db, leaf_id, self._entries)
            session = sessions.require_session(db, data.session_id)
            if data.commit is not None:
                # Every save point where the loop goes on takes a fresh snapshot.
                ref = self._taker.take(db, session, derive_path_state(path, session.config))
            snapshot = self._snapshots.get(ref.id)
            if snapshot is None:
                snapshot = self._snapshots[ref.id] = snapshots.get_snapshot(db, ref.id)
            finished = (
                earlier
                if isinstance(earlier, AssistantMessage)
                and earlier.stop_reason not in ("aborted", "error")
                else None
            )
            if finished is None and data.override is not None:
                snapshot = snapshot.model_copy(update=data.override.model_dump(exclude_none=True))
            skeleton = AssistantMessage(
                model=snapshot.model, provider="anthropic", timestamp=int(time.time() * 1000)
            )
            if finished is None:
                # The reply's start, stored with the save point (a transaction of its
                # own cost as much as the rest of this one).
                start = MessageStart(entry_id=data.entry_id, message=skeleton)
                events.append_events(db, data.session_id, data.run_id, [start])
        return _Prepared(
            snapshot,
            context_messages(path),
            finished,
            skeleton,
            session.config.mcp_servers,
            session.workspace,
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


class _Prepared(NamedTuple):
    snapshot: TurnSnapshot
    """With the run's override for this turn, unless it was answered already."""
    context: list[AgentMessage]
    earlier: AssistantMessage | None
    skeleton: AssistantMessage
    """The reply as its stored start says it began (unless answered already)."""
    servers: list[str] | None
    workspace: str


def _question(arguments: dict[str, Any]) -> tuple[UserQuestion | None, str | None]:
    """An `ask_user` call's question, or why the call is refused (bad arguments: the model
    reads what was wrong, as for any tool)."""
    try:
        return UserQuestion.model_validate(arguments), None
    except ValidationError as exc:
        return None, f"Invalid arguments for tool '{ASK_USER_TOOL}': {format_validation_error(exc)}"


def _provider_error(failure: ProviderFailure) -> ApplicationError:
    # Non-retryable for Temporal: the workflow decides about retries, visibly.
    return ApplicationError(
        failure.message, failure.model_dump(), type=PROVIDER_ERROR, non_retryable=True
    )


def _preview(arguments: dict[str, object]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= ARGS_PREVIEW_CHARS else text[: ARGS_PREVIEW_CHARS - 1] + "…"
