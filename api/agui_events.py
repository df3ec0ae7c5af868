"""A session's run events as AG-UI events (`ag_ui.core`), one AG-UI run at a time.

One AG-UI run is a stretch of one duragent run: from its start (or where a client joins
it) to its end, or to a wait for a person, where it finishes with the interrupt outcome
(`api/agui_waits.py`) and the run that answers continues it. What maps where:

- `agent_start` (or joining a run in progress): `RUN_STARTED`, `STATE_SNAPSHOT`;
- an assistant message's text deltas: `TEXT_MESSAGE_START` / `_CONTENT` / `_END` (its
  entry id as the message id);
- the tool calls of a finished assistant message: `TOOL_CALL_START` / `_ARGS` / `_END`;
- a tool result message: `TOOL_CALL_RESULT` (its entry id as the message id);
- a user message (steering, a follow-up; not the prompt the client sent): a text message
  of role `user`;
- `turn_start`, `phase_changed`, a reply's usage: `STATE_DELTA` of the run header's state
  (`HeaderState`);
- a phase that waits for a person: `RUN_FINISHED` with the interrupt outcome;
- `agent_end`: `RUN_FINISHED` (`success`; `cancelled` when aborted) or `RUN_ERROR`;
- every other event (tools running, retries, guidance, approvals decided, ...): `CUSTOM`
  named `duragent.<type>`, its payload as the value.

A tool call's arguments come whole when its message ends: duragent streams them without
the call's id, which every AG-UI tool call event needs.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.version import PROTOCOL_VERSION
from pydantic import BaseModel, Field

from duragent.api.agui_waits import WAIT_PHASES, at_position
from duragent.domain.messages import (
    AssistantMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
    text_of,
)
from duragent.store.records import StoredEvent

CUSTOM_PREFIX = "duragent."


class HeaderState(BaseModel):
    """The AG-UI state of a session: what the page's run header shows of its run."""

    phase: str = "idle"
    run_id: str | None = None
    turn: int = 0
    usage: Usage = Field(default_factory=Usage)
    """The run's tokens so far."""
    model: str | None = None


class AguiRun:
    """Translates the stored events of one AG-UI run, in `seq` order.

    `thread_id` is the session's id; `run_id` names the AG-UI run (the client's, or else
    the duragent run's); `sent_text` is the prompt the client sent itself: the first user
    message with that text is not echoed back."""

    def __init__(
        self,
        thread_id: str,
        state: HeaderState,
        *,
        run_id: str | None = None,
        sent_text: str | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.state = state
        self.run_id = run_id
        self.started = False
        self.finished = False
        self.waiting: str | None = None
        """A phase of `WAIT_PHASES` the run just entered: the caller lists what waits and
        calls `interrupt`."""
        self._sent_text = sent_text
        self._text_open: str | None = None
        self._streamed: set[str] = set()
        self._done: set[str] = set()

    def start(self, run_id: str | None) -> list[BaseEvent]:
        """`RUN_STARTED` and the state (once)."""
        if self.started:
            return []
        self.started = True
        self.run_id = self.run_id or run_id or self.state.run_id or self.thread_id
        return [
            RunStartedEvent(
                thread_id=self.thread_id, run_id=self.run_id, protocol_version=PROTOCOL_VERSION
            ),
            StateSnapshotEvent(snapshot=self.state.model_dump(mode="json")),
        ]

    def interrupt(self, interrupts: list[Interrupt], position: int) -> list[BaseEvent]:
        """Finish the AG-UI run: the duragent run waits for these (nothing, when none is
        left to wait for). Each interrupt's id ends with `@position`, the seq of the last
        stored event told: the run that answers it goes on from there, so what happened
        between the two AG-UI runs (calls that needed no approval) is told too."""
        self.waiting = None
        if not interrupts:
            return []
        placed = [i.model_copy(update={"id": at_position(i.id, position)}) for i in interrupts]
        return [
            *self._close_text(),
            self._finish(RunFinishedInterruptOutcome(interrupts=placed)),
        ]

    def translate(self, event: StoredEvent) -> list[BaseEvent]:
        """The AG-UI events of one stored event (none for what was already told)."""
        if self.finished or not (self.started or event.run_id):
            return []  # what no run did (a compaction of an idle session) opens no run
        out = self.start(event.run_id)
        p = event.payload
        kind = event.type
        if kind == "agent_start":
            out += self._set(phase="turn", run_id=p["run_id"], turn=0, usage=Usage())
        elif kind == "turn_start":
            out += self._set(turn=p["turn"])
        elif kind == "phase_changed":
            out += self._set(phase=p["phase"])
            if p["phase"] in WAIT_PHASES:
                self.waiting = p["phase"]
        elif kind == "message_start":
            if p["entry_id"] == self._text_open:  # the model call is made again
                out += self._close_text()
        elif kind == "message_update":
            out += self._delta(p)
        elif kind == "message_end":
            out += self._message_end(p["entry_id"], p["message"])
        elif kind == "agent_end":
            out += self._end(p)
        else:
            out.append(CustomEvent(name=CUSTOM_PREFIX + kind, value=p, timestamp=event.created_at))
        return out

    def _delta(self, p: dict[str, Any]) -> list[BaseEvent]:
        if p["kind"] != "text" or not p["delta"]:
            return []  # thinking; tool calls come whole with their message's end
        entry_id = p["entry_id"]
        attempt = p.get("attempt", 1)
        message_id = entry_id if attempt == 1 else f"{entry_id}:{attempt}"
        out: list[BaseEvent] = []
        if self._text_open != message_id:
            out += self._close_text()
            out.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
            self._text_open = message_id
            self._streamed.add(entry_id)
        out.append(TextMessageContentEvent(message_id=message_id, delta=p["delta"]))
        return out

    def _close_text(self) -> list[BaseEvent]:
        if self._text_open is None:
            return []
        ended = TextMessageEndEvent(message_id=self._text_open)
        self._text_open = None
        return [ended]

    def _message_end(self, entry_id: str, message: dict[str, Any]) -> list[BaseEvent]:
        if entry_id in self._done:
            return []  # told already (a save point tells a message again)
        self._done.add(entry_id)
        role = message.get("role")
        out: list[BaseEvent] = []
        if role == "assistant":
            reply = AssistantMessage.model_validate(message)
            out += self._close_text()
            text = text_of(reply.content)
            if entry_id not in self._streamed and text:  # joined after its deltas
                out += _whole_text(entry_id, "assistant", text)
            for call in reply.tool_calls:
                out += [
                    ToolCallStartEvent(
                        tool_call_id=call.id, tool_call_name=call.name, parent_message_id=entry_id
                    ),
                    ToolCallArgsEvent(tool_call_id=call.id, delta=json.dumps(call.arguments)),
                    ToolCallEndEvent(tool_call_id=call.id),
                ]
            out += self._set(usage=self.state.usage.plus(reply.usage))
        elif role == "toolResult":
            result = ToolResultMessage.model_validate(message)
            out.append(
                ToolCallResultEvent(
                    message_id=entry_id,
                    tool_call_id=result.tool_call_id,
                    content=text_of(result.content),
                    role="tool",
                )
            )
        elif role == "user":
            text = text_of(UserMessage.model_validate(message).content)
            if text == self._sent_text:
                self._sent_text = None  # the client has it
            elif text:
                out += _whole_text(entry_id, "user", text)
        return out

    def _end(self, p: dict[str, Any]) -> list[BaseEvent]:
        out = [
            *self._close_text(),
            *self._set(phase="idle", usage=Usage.model_validate(p["usage"])),
        ]
        status = p["status"]
        if status == "error":
            self.finished = True
            out.append(RunErrorEvent(message=p.get("error") or "the run failed", code="error"))
        elif status == "aborted":
            out.append(self._finish(RunFinishedCancelledOutcome()))
        else:
            out.append(self._finish(RunFinishedSuccessOutcome()))
        return out

    def _finish(self, outcome: Any) -> RunFinishedEvent:
        self.finished = True
        return RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id or self.thread_id, outcome=outcome
        )

    def _set(self, **changes: Any) -> list[BaseEvent]:
        """A `STATE_DELTA` replacing what changed of the header state."""
        before = self.state.model_dump(mode="json")
        self.state = self.state.model_copy(update=changes)
        after = self.state.model_dump(mode="json")
        ops = [
            {"op": "replace", "path": f"/{key}", "value": value}
            for key, value in after.items()
            if before[key] != value
        ]
        return [StateDeltaEvent(delta=ops)] if ops else []


def _whole_text(message_id: str, role: Any, text: str) -> list[BaseEvent]:
    return [
        TextMessageStartEvent(message_id=message_id, role=role),
        TextMessageContentEvent(message_id=message_id, delta=text),
        TextMessageEndEvent(message_id=message_id),
    ]
