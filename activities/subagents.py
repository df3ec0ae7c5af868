"""The store steps around a sub-agent (`delegate`) call: make the child session, and stage
the parent's tool result once the child's run has ended.

Both are short transactions, run as local activities, and idempotent: the child session's
id and the result's entry id come from the workflow, and their events carry dedup keys.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session
from temporalio import activity

from duragent.activities.decided_calls import finish_decided_call
from duragent.activities.tools import DelegateTool, ToolInputError, ToolRegistry
from duragent.activities.tools.truncation import truncate_head
from duragent.domain.config import TurnSnapshot
from duragent.domain.events import SubagentStarted, ToolExecutionStart
from duragent.domain.messages import AssistantMessage
from duragent.domain.subagents import (
    DELEGATE_TOOL,
    FINISH_SUBAGENT,
    MAX_DEPTH,
    START_SUBAGENT,
    FinishSubagentInput,
    StartSubagentInput,
    SubagentStart,
)
from duragent.domain.tools import ToolResult
from duragent.domain.turns import ToolCallOutcome
from duragent.store import events, sessions, snapshots, staging
from duragent.store.db import Database
from duragent.store.events import keyed
from duragent.store.records import SessionRecord

TITLE_CHARS = 60


class Subagents:
    def __init__(self, db: Database, registry: ToolRegistry) -> None:
        self._db = db
        self._registry = registry
        self._spec = DelegateTool()

    @activity.defn(name=START_SUBAGENT)
    def start_subagent(self, data: StartSubagentInput) -> SubagentStart:
        """The child session of the call: made below the parent (its workspace, owner and
        config, with the model and tools the call asks for), or why the call is refused."""
        with self._db.transaction() as db:
            staged = staging.staged_message(db, data.assistant_entry_id)
            call = (
                next((c for c in staged.tool_calls if c.id == data.call.id), None)
                if isinstance(staged, AssistantMessage)
                else None
            )
            raw: dict[str, Any] = call.arguments if call is not None else {}
            try:
                args = self._spec.parse_args(raw)
            except ToolInputError as exc:
                return SubagentStart(refused=f"Invalid arguments for tool '{DELEGATE_TOOL}': {exc}")
            made = sessions.get_session(db, data.child_session_id)
            if made is not None:  # a retry: the session is made, its run not yet started
                return SubagentStart(
                    name=made.name or "", prompt=args.prompt, depth=sessions.depth(db, made.id)
                )
            parent = sessions.require_session(db, data.session_id)
            depth = sessions.depth(db, parent.id) + 1
            if depth > MAX_DEPTH:
                return SubagentStart(
                    refused=f"Sub-agents nest at most {MAX_DEPTH} deep: this session is a "
                    f"sub-agent at depth {depth - 1}, so it cannot delegate. Do the work "
                    "yourself."
                )
            snapshot = snapshots.get_snapshot(db, data.snapshot_id)
            allowed = self._allowed(snapshot)
            wanted = args.tools if args.tools is not None else allowed
            refused = [name for name in wanted if name not in allowed]
            if refused:
                return SubagentStart(
                    refused=f"The sub-agent cannot have {', '.join(map(repr, refused))}: a "
                    "sub-agent may use only tools this session may use "
                    f"({', '.join(allowed) or 'none'}). Nothing was started."
                )
            # At the deepest level the tool is not offered at all (and refused if called).
            tools = [name for name in wanted if depth < MAX_DEPTH or name != DELEGATE_TOOL]
            name = args.name or _title(args.prompt)
            self._make_child(db, data, parent, snapshot, name, args.model, tools)
            started = [
                ToolExecutionStart(tool_call_id=data.call.id, tool_name=data.call.name, args=raw),
                SubagentStarted(
                    tool_call_id=data.call.id, session_id=data.child_session_id, name=name
                ),
            ]
            events.append_events(
                db,
                data.session_id,
                data.run_id,
                keyed(f"{data.run_id}/subagent/{data.call.id}/start", started),
            )
        return SubagentStart(name=name, prompt=args.prompt, depth=depth)

    def _allowed(self, snapshot: TurnSnapshot) -> list[str]:
        """The tools the parent's turn may use, in the registry's order (opt-in ones, such
        as `ask_user`, only where the parent's active tools name them)."""
        return self._registry.offered(snapshot.active_tools)

    def _make_child(
        self,
        db: Session,
        data: StartSubagentInput,
        parent: SessionRecord,
        snapshot: TurnSnapshot,
        name: str,
        model: str | None,
        tools: list[str],
    ) -> None:
        # The parent's workspace: the work handed over is work on the same files, and the
        # workspace is one the parent's owner was already allowed. The parent's turn's
        # approval policy goes with it: delegating must be no way around it.
        config = parent.config.model_copy(
            update={
                "model": model or snapshot.model,
                "thinking_level": snapshot.thinking_level,
                "active_tools": tools,
                "approval_policy": snapshot.approval_policy,
                # The parent's budget reaches the child as its run's (what is left of it).
                "budget": None,
            }
        )
        sessions.create_session(
            db,
            session_id=data.child_session_id,
            workspace=parent.workspace,
            config=config,
            name=name,
            owner=parent.owner,
            parent_session_id=parent.id,
            parent_run_id=data.run_id,
            parent_tool_call_id=data.call.id,
            host=parent.host,  # the parent's workspace is on the parent's host
        )

    @activity.defn(name=FINISH_SUBAGENT)
    def finish_subagent(self, data: FinishSubagentInput) -> ToolCallOutcome:
        """Stage the call's result (the child's answer, or what stopped it) and emit its
        end (`finish_decided_call`)."""
        aborted = data.child is not None and data.child.status == "aborted"
        return finish_decided_call(
            self._db,
            data,
            kind="subagent",
            call_id=data.call.id,
            tool_name=data.call.name,
            result=subagent_result(data),
            started_at_ms=data.started_at_ms,
            ended_at_ms=data.finished_at_ms,
            interrupted=aborted,
        )


def subagent_result(data: FinishSubagentInput) -> ToolResult:
    """What the parent's model reads for the call: the child's final answer (cut to the
    tools' output budget), or an error naming the sub-agent and what stopped it."""
    child = data.child
    if data.child_session_id is None:
        return ToolResult.error(data.error or "The sub-agent was not started.")
    who = f"The sub-agent {data.name!r} (session {data.child_session_id})"
    if child is None:
        return ToolResult.error(
            f"{who} failed: {data.error or 'its run ended without a result'}",
            child_session_id=data.child_session_id,
            status="error",
        )
    details: dict[str, Any] = {
        "child_session_id": data.child_session_id,
        "child_run_id": child.run_id,
        "status": child.status,
        "turns": child.turns,
        "usage": child.usage.model_dump(),
    }
    answer = truncate_head(child.final_text)
    text = answer.text
    if answer.truncated:
        text += (
            f"\n\n[Answer cut to its first {answer.output_lines} of {answer.total_lines} "
            f"lines; the whole of it is in session {data.child_session_id}.]"
        )
    if child.status == "completed":
        text = text or "(The sub-agent gave no final answer.)"
        if child.error:  # it stopped early (its budget): the parent's model reads why
            text += f"\n\n[{child.error}]"
        return ToolResult(
            content=ToolResult.text(text).content,
            details=details,
        )
    if child.status == "aborted":
        lines = [f"{who} was stopped before it finished."]
        details["cancelled"] = True
    else:
        lines = [f"{who} failed: {child.error or 'unknown error'}."]
    if text:
        lines.append(f"Its last answer:\n{text}")
    return ToolResult.error("\n".join(lines), **details)


def _title(prompt: str) -> str:
    line = " ".join(prompt.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
