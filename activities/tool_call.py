"""One tool call as one activity: run it in the session's workspace, stage its result.

A tool that is not retry-safe is never run twice: a second attempt (the first one's
worker died) stops what the first one left running and answers with a result saying the
call was interrupted and what is known of it, and the model decides what to do. What it
must stop is recorded on this machine before it may act (`activities.orphans`).
Cancellation (abort, guidance) kills the tool and still returns a result carrying the
output so far. A call to a tool that is not active in the turn is answered with an error
and never runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from temporalio import activity

from duragent.activities.event_sink import EventSink
from duragent.activities.extensions import Extensions, ToolCallContext
from duragent.activities.heartbeat import heartbeating
from duragent.activities.orphans import (
    CallRecord,
    Fate,
    ProcessRecords,
    process_identity,
    stop_orphan,
)
from duragent.activities.store_retry import with_store_retries
from duragent.activities.tools import ToolContext, ToolRegistry
from duragent.activities.tools.paths import moved_workspace
from duragent.activities.tools.registry import describe_os_error
from duragent.activities.worker_loss import unstick_after_retry
from duragent.domain.events import ToolExecutionStart, ToolExecutionUpdate, tool_call_ended
from duragent.domain.messages import AgentMessage, AssistantMessage, ToolCall, ToolResultMessage
from duragent.domain.tools import ToolResult
from duragent.domain.turns import RUN_TOOL, ToolCallInput, ToolCallOutcome
from duragent.store import sessions, staging
from duragent.store.db import Database

TAIL_CHARS = 2000


class OutputTail:
    """The last `TAIL_CHARS` characters a tool printed: kept in heartbeat details."""

    def __init__(self) -> None:
        self.text = ""

    def add(self, chunk: str) -> None:
        self.text = (self.text + chunk)[-TAIL_CHARS:]


class ToolCalls:
    def __init__(
        self,
        db: Database,
        registry: ToolRegistry,
        extensions: Extensions,
        records: ProcessRecords,
        host: str | None = None,
        replies: staging.FinishedReplies | None = None,
    ) -> None:
        self._db = db
        self._replies = replies or staging.FinishedReplies()
        """The replies this worker's model calls staged (`ModelTurns` fills it)."""
        self._registry = registry
        self._extensions = extensions
        self._records = records
        self._host = host
        """The host this worker runs tools on, named in each call's start event."""

    @activity.defn(name=RUN_TOOL)
    async def run_tool(self, data: ToolCallInput) -> ToolCallOutcome:
        info = activity.info()
        progress = new_progress(info.attempt)
        # Heartbeats (with what is known so far) cover the whole call, staging included.
        async with heartbeating(lambda: progress):
            if info.attempt > 1:
                await unstick_after_retry()
            return await self.call(data, _progress(info), progress)

    async def call(
        self,
        data: ToolCallInput,
        earlier: dict[str, Any],
        progress: dict[str, Any],
        workspace: str | None = None,
    ) -> ToolCallOutcome:
        """Run the call (or, on a later attempt, find or report what an earlier one did)
        and stage its result. `earlier`: what the last attempt's heartbeats said of it;
        `progress`: what this attempt's say (`new_progress`), filled in as it runs;
        `workspace`: the session's, when the caller read it this turn (else it is read)."""
        attempt = int(progress["attempt"])
        sink = EventSink(self._db, data.session_id, data.run_id, interval=0.1)
        if attempt > 1 or data.rescheduled:
            found = await self._earlier_result(data, earlier)
            if found is not None:  # finished before the last attempt was lost
                return await self._finish(data, sink, found, progress, interrupted=False)
            if (
                not data.call.traits.retry_safe
                and data.call.refused is None
                and self._may_have_begun(data, attempt)
            ):
                result = await self._interrupted_by_crash(data, attempt, earlier)
                return await self._finish(data, sink, result, progress, interrupted=True)
        result, interrupted = await self._run(data, sink, progress, workspace)
        # Known before it is stored: a later attempt can store it if this one dies.
        progress["result"] = result.model_dump(mode="json")
        return await self._finish(data, sink, result, progress, interrupted=interrupted)

    async def _earlier_result(
        self, data: ToolCallInput, progress: dict[str, Any]
    ) -> ToolResult | None:
        """The result an earlier attempt staged, or finished and reported in its last
        heartbeat; None if the call never finished."""

        def staged() -> ToolResultMessage | None:
            with self._db.transaction() as db:
                found = staging.staged_message(db, data.result_entry_id)
            return found if isinstance(found, ToolResultMessage) else None

        message = await with_store_retries(staged, what="reading an earlier tool result")
        if message is not None:
            return ToolResult(
                content=message.content, details=message.details, is_error=message.is_error
            )
        if "result" in progress:
            return ToolResult.model_validate(progress["result"])
        return None

    def _may_have_begun(self, data: ToolCallInput, attempt: int) -> bool:
        """An earlier attempt may have started the call: Temporal retried it, or (when
        its host was gone and the call was scheduled anew) this machine recorded it."""
        return attempt > 1 or self._records.read(data.result_entry_id) is not None

    async def _run(
        self,
        data: ToolCallInput,
        sink: EventSink,
        progress: dict[str, Any],
        known_workspace: str | None,
    ) -> tuple[ToolResult, bool]:
        """Hooks around the tool itself; (result, interrupted)."""
        staged = self._replies.get(data.assistant_entry_id)
        if known_workspace is not None and staged is not None:
            # Nothing to read (the turn's reply was staged here): no thread for it (what
            # is left, making sure the workspace exists, is a system call or two).
            loaded = self._load(data, known_workspace, staged)
        else:
            loaded = await with_store_retries(
                lambda: self._load(data, known_workspace, staged), what="loading the tool call"
            )
        workspace, assistant, tool_call = loaded
        args = tool_call.arguments if tool_call else {}
        sink.add(
            ToolExecutionStart(
                tool_call_id=data.call.id,
                tool_name=data.call.name,
                args=args,
                attempt=int(progress["attempt"]),
                host=self._host,
            )
        )
        hook = (
            ToolCallContext(
                data.session_id,
                data.run_id,
                data.turn,
                assistant,
                tool_call,
                args,
                self._extensions.session(data.session_id),
            )
            if assistant is not None and tool_call is not None
            else None
        )
        if data.call.refused is not None:  # not active in the turn: never run, no hooks
            return ToolResult.error(data.call.refused, not_active=True), False
        moved = moved_workspace(workspace)
        if moved is not None:
            return ToolResult.error(moved), False
        blocked = await self._extensions.before_tool_call(hook) if hook else None
        if blocked is not None:
            return ToolResult.error(f"Tool call blocked: {blocked.reason}", blocked=True), False
        result, interrupted = await self._execute(data, args, workspace, sink, progress)
        if hook is not None and not interrupted:
            result = await self._extensions.after_tool_call(hook, result)
        return result, interrupted

    async def _execute(
        self,
        data: ToolCallInput,
        args: dict[str, Any],
        workspace: Path,
        sink: EventSink,
        progress: dict[str, Any],
    ) -> tuple[ToolResult, bool]:
        """Run the tool, its output and processes noted in `progress`; (result, interrupted)."""
        call = data.call
        if "__invalid_json__" in args:
            bad = args["__invalid_json__"]
            return ToolResult.error(
                f"Invalid arguments for tool '{call.name}': not a JSON object: {bad}"
            ), False
        tail = OutputTail()

        def on_update(chunk: str) -> None:
            tail.add(chunk)
            progress["output_tail"] = tail.text
            sink.add(ToolExecutionUpdate(tool_call_id=call.id, tool_name=call.name, partial=chunk))

        # Only what must never run twice is recorded for the next attempt to stop.
        key = data.result_entry_id
        try:
            record = None if call.traits.retry_safe else self._records.begin(key)
        except OSError as exc:
            return ToolResult.error(
                f"Tool '{call.name}' was not run: its progress could not be recorded for "
                f"recovery after a crash ({describe_os_error(exc)})."
            ), False

        def on_process(pgid: int) -> None:
            identity = process_identity(pgid)
            if record is not None:
                self._records.add_process(key, record, identity)
            progress["processes"].append(identity)

        try:
            # The deps in their JSON form: a function tool validates them into the type
            # its `ToolContext[Deps]` names (`activities.tools.function`).
            ctx = ToolContext(
                workspace,
                on_update,
                on_process,
                session_id=data.session_id,
                call_id=call.id,
                deps=data.deps,
            )
            return await self._registry.run(call.name, args, ctx), False
        except asyncio.CancelledError:
            # Returning (not raising) hands the workflow a result for the call:
            # the transcript keeps its pairing and the partial output survives.
            return _cancelled(call.name, tail.text), True

    async def _finish(
        self,
        data: ToolCallInput,
        sink: EventSink,
        result: ToolResult,
        progress: dict[str, Any],
        *,
        interrupted: bool,
    ) -> ToolCallOutcome:
        call = data.call
        duration_ms = int((time.time() - float(progress["started_at"])) * 1000)
        message = result.to_message(call.id, call.name, int(time.time() * 1000))
        attempt = int(progress["attempt"])
        for event in tool_call_ended(data.result_entry_id, result, message, duration_ms, attempt):
            sink.add(event)
        await sink.close((data.result_entry_id, message))
        # Staged: a later attempt finds the result itself, and nothing is left to stop.
        self._records.remove(data.result_entry_id)
        return ToolCallOutcome.of(result, message, duration_ms, interrupted=interrupted)

    async def _interrupted_by_crash(
        self, data: ToolCallInput, attempt: int, progress: dict[str, Any]
    ) -> ToolResult:
        """The result of a call whose earlier attempt was lost with its worker: what it had
        started is stopped first, and the result says what is known."""
        record = self._records.read(data.result_entry_id)
        identities = _identities(record, progress)
        swept = {(i.get("host"), i.get("pgid")) for i in record.swept} if record else set()
        fates: list[tuple[dict[str, Any], Fate]] = [
            (i, "stopped" if (i.get("host"), i.get("pgid")) in swept else await stop_orphan(i))
            for i in identities
        ]
        tool = self._registry.get(data.call.name)
        gated = tool is not None and tool.process_gate
        return _interrupted(data.call.name, attempt, progress, record, fates, gated=gated)

    def _load(
        self, data: ToolCallInput, workspace_path: str | None, staged: AgentMessage | None
    ) -> tuple[Path, AssistantMessage | None, ToolCall | None]:
        """The workspace (`workspace_path`, or the session's), and the call with its full
        arguments from the staged message (`staged`, as this process staged it, when it
        did: `FinishedReplies`; else read). Reads the store only for what is missing."""
        if workspace_path is None or staged is None:
            with self._db.transaction() as db:
                if workspace_path is None:
                    workspace_path = sessions.require_session(db, data.session_id).workspace
                if staged is None:
                    staged = staging.staged_message(db, data.assistant_entry_id)
        assistant = staged if isinstance(staged, AssistantMessage) else None
        call = (
            next((c for c in assistant.tool_calls if c.id == data.call.id), None)
            if assistant
            else None
        )
        workspace = Path(workspace_path)
        with contextlib.suppress(FileExistsError):  # a symlink swapped in: refused in _run
            workspace.mkdir(parents=True, exist_ok=True)
        return workspace, assistant, call


def new_progress(attempt: int) -> dict[str, Any]:
    """What a call's heartbeats report (see `ToolCalls.call`), as it begins."""
    return {"started_at": time.time(), "output_tail": "", "attempt": attempt, "processes": []}


def _progress(info: activity.Info) -> dict[str, Any]:
    details = info.heartbeat_details
    return details[0] if details and isinstance(details[0], dict) else {}


def _identities(record: CallRecord | None, progress: dict[str, Any]) -> list[dict[str, Any]]:
    """The process groups the record and the last heartbeat name, each once."""
    found: dict[tuple[Any, Any], dict[str, Any]] = {}
    for identity in [*(record.processes if record else []), *progress.get("processes", [])]:
        if isinstance(identity, dict):
            found.setdefault((identity.get("host"), identity.get("pgid")), identity)
    return list(found.values())


def _interrupted(
    name: str,
    attempt: int,
    progress: dict[str, Any],
    record: CallRecord | None,
    fates: list[tuple[dict[str, Any], Fate]],
    *,
    gated: bool,
) -> ToolResult:
    lines = [
        f"This `{name}` call was interrupted by a worker failure and was not run again, "
        "because running it twice could repeat its side effects.",
    ]
    began = record.began_at if record else progress.get("started_at")
    if fates and isinstance(fates[0][0].get("at"), (int, float)):
        began = fates[0][0]["at"]  # when its (first) process was let run
    ago = f"about {max(0.0, time.time() - float(began)):.0f} s ago" if began else None
    started: bool | None = None
    if fates:
        started = True
        what = "Its command" if gated else "It"
        lines.append(f"{what} had started {ago or 'before the failure'}.")
    elif record is not None and gated:
        started = False
        lines.append(
            "Its command had not started: the worker failed before letting it run, "
            "so nothing of it ran."
        )
    elif record is not None:
        lines.append(f"It had started {ago}; it may have finished partly or fully.")
    else:
        lines.append(
            "There is no record of it on this machine: it may not have started, may have "
            "finished partly or fully, or, if it ran on another machine, may still be "
            "running there."
        )
    by_fate: dict[Fate, list[str]] = {}
    for identity, fate in fates:
        by_fate.setdefault(fate, []).append(str(identity.get("pgid")))
    if "stopped" in by_fate:
        groups = ", ".join(by_fate["stopped"])
        lines.append(f"The process it had started (group {groups}) was stopped.")
    if "ended" in by_fate:
        groups = ", ".join(by_fate["ended"])
        lines.append(f"Its process (group {groups}) had already ended.")
    if "elsewhere" in by_fate:
        hosts = sorted({str(i.get("host")) for i, fate in fates if fate == "elsewhere"})
        groups = ", ".join(by_fate["elsewhere"])
        lines.append(
            f"Its process (group {groups}) runs on {', '.join(hosts)}, not on this machine; "
            "it could not be stopped from here and may still be running."
        )
    tail = str(progress.get("output_tail") or "")
    lines.append(f"Output before the interruption:\n{tail}" if tail else "No output was recorded.")
    lines.append("Check the current state before deciding whether to run it again.")
    return ToolResult.error(
        "\n".join(lines),
        interrupted=True,
        attempt=attempt,
        started=started,
        stopped=[int(p) for p in by_fate.get("stopped", [])],
    )


def _cancelled(name: str, partial: str) -> ToolResult:
    text = f"The `{name}` call was cancelled before it finished."
    if partial:
        text += f"\nOutput before it was stopped:\n{partial}"
    return ToolResult.error(text, cancelled=True)
