"""Activities of the structural operations: compaction, branch summaries, navigation.

Planning and committing are local activities (short store transactions). The summary
is a model call: a regular activity that heartbeats and stages its text in the store,
so the commit that follows writes the whole operation at once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session
from temporalio import activity
from temporalio.exceptions import ApplicationError

from duragent.activities.heartbeat import heartbeating
from duragent.activities.models.clients import ModelClients
from duragent.activities.models.seam import ModelFailed, SummaryRequest
from duragent.activities.save_point import save_point
from duragent.activities.store_retry import with_store_retries
from duragent.domain.compaction import (
    compose_summary,
    files_touched,
    merge_files,
    plan_compaction,
    summary_prompt,
    transcript_text,
    turn_prefix_prompt,
)
from duragent.domain.context import derive_path_state, entry_messages
from duragent.domain.cost import turn_cost
from duragent.domain.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    LeafEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.events import BranchSummarized, CompactionEnded
from duragent.domain.messages import (
    AgentMessage,
    CustomMessage,
    TextContent,
    Usage,
    UserMessage,
    text_of,
)
from duragent.domain.models import UnknownModel
from duragent.domain.prices import PriceTable
from duragent.domain.tree_ops import (
    COMMIT_COMPACTION,
    COMMIT_NAVIGATION,
    PLAN_COMPACTION,
    PLAN_NAVIGATION,
    SAVE_TURN,
    SUMMARIZE,
    CommitCompactionInput,
    CommitNavigationInput,
    NavigateInput,
    PlanCompactionInput,
    PlanCompactionResult,
    PlanNavigationResult,
    SaveTurnInput,
    SummarizeInput,
    SummarizeResult,
)
from duragent.domain.turns import PROVIDER_ERROR
from duragent.store import display, entries, events, sessions, staging
from duragent.store.append import append_below, displayed
from duragent.store.db import Database
from duragent.store.errors import EntryNotFound
from duragent.store.events import keyed

BRANCH_PROMPT = (
    "The user left the following branch of the conversation to go another way. Summarise "
    "what was tried on it, what was found and what was decided, in a few short paragraphs, "
    "so the agent can use what was learned without repeating it.\n\n<branch>\n{branch}\n</branch>"
)


class TreeOps:
    def __init__(
        self,
        db: Database,
        models: ModelClients,
        cache: entries.EntryCache,
        prices: PriceTable | None = None,
    ) -> None:
        self._db = db
        self._models = models
        self._cache = cache
        self._prices = prices
        """Prices each summary for a run's budget, as the model turns are priced."""

    @activity.defn(name=PLAN_COMPACTION)
    def plan_compaction(self, data: PlanCompactionInput) -> PlanCompactionResult:
        with self._db.transaction() as db:
            session = sessions.require_session(db, data.session_id)
            # The context's part of the path plans the same cut as the whole path (and
            # its config entries give the same model), however long the session is.
            path = entries.load_context_path(db, data.leaf_id or session.leaf_id, self._cache)
        state = derive_path_state(path, session.config)
        return PlanCompactionResult(
            plan=plan_compaction(path, data.keep_recent_tokens), model=state.model
        )

    @activity.defn(name=SUMMARIZE)
    async def summarize(self, data: SummarizeInput) -> SummarizeResult:
        # The store is read and written in a worker thread, inside heartbeats: a busy
        # store neither blocks the worker's event loop nor looks like a lost worker.
        async with heartbeating():
            summarized, split, previous = await with_store_retries(
                lambda: self._summary_inputs(data), what="reading what to summarize"
            )
            if data.kind == "branch":
                prompt = BRANCH_PROMPT.format(branch=transcript_text(summarized))
                text, usage = await self._ask(data, prompt)
                details: dict[str, object] | None = None
            else:
                text, usage, details = await self._compaction_summary(
                    data, summarized, split, previous
                )
            # The model and usage go with the text: the commit stores them on the summary
            # entry, where the session's cost finds them.
            staged = CustomMessage(
                custom_type=f"{data.kind}_summary",
                content=[TextContent(text=text)],
                display=False,
                details=details,
                timestamp=0,
                model=data.model,
                usage=usage,
            )
            await with_store_retries(
                lambda: self._stage_summary(data, staged), what="staging the summary"
            )
        cost = None if self._prices is None else turn_cost(data.model, usage, self._prices)
        return SummarizeResult(summary_chars=len(text), preview=text[:200], usage=usage, cost=cost)

    async def _compaction_summary(
        self,
        data: SummarizeInput,
        summarized: list[AgentMessage],
        split: list[AgentMessage],
        previous: SessionEntry | None,
    ) -> tuple[str, Usage, dict[str, object]]:
        """The summary updating the previous one, the split turn's own, the files touched."""
        earlier: dict[str, Any] = {}
        if isinstance(previous, CompactionEntry):
            earlier = {"history": previous.summary, **(previous.details or {})}
        prompt = summary_prompt(
            transcript_text(summarized), earlier.get("history"), data.instructions
        )
        history, usage = await self._ask(data, prompt)
        prefix = None
        if split:
            prefix, more = await self._ask(data, turn_prefix_prompt(transcript_text(split)))
            usage = usage.plus(more)
        read, modified = files_touched([*summarized, *split])
        read = merge_files(list(earlier.get("files_read", [])), read)
        modified = merge_files(list(earlier.get("files_modified", [])), modified)
        text = compose_summary(history, prefix, read, modified)
        return text, usage, {"history": history, "files_read": read, "files_modified": modified}

    async def _ask(self, data: SummarizeInput, prompt: str) -> tuple[str, Usage]:
        request = SummaryRequest(
            model=data.model, prompt=prompt, max_tokens=data.max_tokens, session_id=data.session_id
        )
        try:
            return await self._models.for_model(data.model).complete(request)
        except UnknownModel as exc:
            raise ApplicationError(str(exc), type=PROVIDER_ERROR, non_retryable=True) from None
        except ModelFailed as failed:
            failure = failed.failure
            delay = failure.retry_after_ms
            raise ApplicationError(
                failure.message,
                type=PROVIDER_ERROR,
                non_retryable=not failure.retryable,
                next_retry_delay=timedelta(milliseconds=delay) if delay else None,
            ) from failed.__cause__

    def _summary_inputs(
        self, data: SummarizeInput
    ) -> tuple[list[AgentMessage], list[AgentMessage], SessionEntry | None]:
        """The messages to summarize, the split turn's, and the previous summary."""
        with self._db.transaction() as db:
            summarized = self._messages(db, data.entry_ids)
            split = self._messages(db, data.split_turn_ids)
            previous = (
                entries.get_entry(db, data.previous_summary_entry_id)
                if data.previous_summary_entry_id
                else None
            )
        return summarized, split, previous

    def _stage_summary(self, data: SummarizeInput, staged: CustomMessage) -> None:
        with self._db.transaction() as db:
            staging.stage_message(
                db,
                entry_id=data.entry_id,
                session_id=data.session_id,
                run_id=data.op_id,
                message=staged,
            )

    def _messages(self, db: Session, ids: list[str]) -> list[AgentMessage]:
        found = {e.id: e for e in entries.get_entries(db, ids)}
        return [m for i in ids if i in found for m in entry_messages(found[i])]

    @activity.defn(name=COMMIT_COMPACTION)
    def commit_compaction(self, data: CommitCompactionInput) -> str:
        """Append the compaction entry below the compacted leaf and move the leaf there."""
        plan = data.plan
        with self._db.transaction() as db:
            if entries.get_entry(db, data.entry_id) is None:
                staged = staging.staged_message(db, data.entry_id)
                if not isinstance(staged, CustomMessage):
                    raise ApplicationError(
                        f"no staged summary for compaction {data.entry_id}", non_retryable=True
                    )
                entry = CompactionEntry(
                    id=data.entry_id,
                    parent_id=plan.leaf_id,
                    timestamp=staged.timestamp,
                    summary=text_of(staged.content),
                    first_kept_entry_id=plan.first_kept_entry_id,
                    tokens_before=plan.tokens_before,
                    details=staged.details,
                    model=staged.model,
                    usage=staged.usage,
                )
                append_below(
                    db, data.session_id, plan.leaf_id, [entry], run_id=data.op_id, cache=self._cache
                )
                staging.drop_staged(db, [data.entry_id])
                ended = CompactionEnded(
                    entry_id=data.entry_id,
                    tokens_before=plan.tokens_before,
                    summary_chars=len(entry.summary),
                    first_kept_entry_id=plan.first_kept_entry_id,
                )
                events.append_events(
                    db,
                    data.session_id,
                    data.op_id,
                    keyed(f"{data.op_id}/compacted/{data.entry_id}", [ended]),
                )
        return data.entry_id

    @activity.defn(name=PLAN_NAVIGATION)
    def plan_navigation(self, data: NavigateInput) -> PlanNavigationResult:
        with self._db.transaction() as db:
            session = sessions.require_session(db, data.session_id)
            target = entries.get_entry(db, data.target_entry_id)
            if target is None or not entries.belongs_to(db, data.target_entry_id, data.session_id):
                raise ApplicationError(
                    str(EntryNotFound(data.target_entry_id)),
                    type="EntryNotFound",
                    non_retryable=True,
                )
            edit_text = None
            new_leaf: str | None = target.id
            if isinstance(target, MessageEntry) and isinstance(target.message, UserMessage):
                edit_text, new_leaf = text_of(target.message.content), target.parent_id
            old_path = entries.load_path(db, session.leaf_id)
            new_path = entries.load_path(db, new_leaf)
        kept = {e.id for e in new_path}
        abandoned = [e.id for e in old_path if e.id not in kept]
        state = derive_path_state(old_path, session.config)
        return PlanNavigationResult(
            old_leaf_id=session.leaf_id,
            new_leaf_id=new_leaf,
            abandoned_ids=abandoned,
            edit_text=edit_text,
            model=state.model,
        )

    @activity.defn(name=COMMIT_NAVIGATION)
    def commit_navigation(self, data: CommitNavigationInput) -> str:
        """Mark where the old branch was left, add the branch summary, move the leaf."""
        plan = data.plan
        with self._db.transaction() as db:
            new: list[SessionEntry] = []
            if plan.old_leaf_id is not None and plan.old_leaf_id != plan.new_leaf_id:
                new.append(
                    LeafEntry(
                        id=data.marker_id,
                        parent_id=plan.old_leaf_id,
                        timestamp=0,
                        target_id=data.target_entry_id,
                    )
                )
            leaf = plan.new_leaf_id
            if data.summary_entry_id and entries.existing_ids(db, [data.summary_entry_id]):
                # Committed before (a retry): its staged text is gone, the entry stays.
                leaf = data.summary_entry_id
            elif data.summary_entry_id:
                staged = staging.staged_message(db, data.summary_entry_id)
                if isinstance(staged, CustomMessage):
                    new.append(
                        BranchSummaryEntry(
                            id=data.summary_entry_id,
                            parent_id=plan.new_leaf_id,
                            timestamp=0,
                            from_entry_id=plan.old_leaf_id or data.target_entry_id,
                            summary=text_of(staged.content),
                            model=staged.model,
                            usage=staged.usage,
                        )
                    )
                    leaf = data.summary_entry_id
                    summarized = BranchSummarized(
                        entry_id=data.summary_entry_id,
                        from_entry_id=plan.old_leaf_id or "",
                        summary_chars=len(text_of(staged.content)),
                    )
                    events.append_events(
                        db,
                        data.session_id,
                        data.op_id,
                        keyed(f"{data.op_id}/summary", [summarized]),
                    )
            done = entries.existing_ids(db, [e.id for e in new])
            fresh = [e for e in new if e.id not in done]
            entries.insert_entries(db, data.session_id, fresh)
            # The summary's model call, shown hidden: the session's cost counts it.
            display.append_display(db, data.session_id, data.op_id, displayed(fresh))
            if data.summary_entry_id:
                staging.drop_staged(db, [data.summary_entry_id])
            sessions.set_leaf(db, data.session_id, leaf)
        return leaf or ""

    @activity.defn(name=SAVE_TURN)
    def save_turn(self, data: SaveTurnInput) -> str:
        with self._db.transaction() as db:
            return save_point(
                db,
                session_id=data.session_id,
                run_id=data.run_id,
                parent_id=data.parent_id,
                data=data.commit,
                cache=self._cache,
            )
