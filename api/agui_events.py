"""A session's run events as AG-UI events (`ag_ui.core`), one AG-UI run at a time.

One AG-UI run is a stretch of the session's runs: from where it begins (a run's start,
or where a client joins) to the end of the run it follows (`api/agui_follow.py`: the run
its input started, the run that takes its queued input, the runs a watch's run chains
into), or to a wait for a person, where it finishes with the interrupt outcome
(`api/agui_waits.py`) and the AG-UI run that answers continues it. What maps where:

- `agent_start` (or joining a run in progress): `RUN_STARTED`, `STATE_SNAPSHOT`;
- an assistant message's text deltas: `TEXT_MESSAGE_START` / `_CONTENT` / `_END` (its
  entry id as the message id);
- its thinking deltas: a reasoning span of one reasoning message, `REASONING_START`,
  `REASONING_MESSAGE_START` / `_CONTENT` / `_END`, `REASONING_END` (both ids
  `<entry id>:reasoning:<block index>`);
- the tool calls of a finished assistant message: `TOOL_CALL_START` / `_ARGS` / `_END`;
- a tool result message: `TOOL_CALL_RESULT` (its entry id as the message id);
- a user message someone else sent (steering, a follow-up, the page's composer): a text
  message of role `user`; one the client sent itself: a `MESSAGES_SNAPSHOT` (below);
- `turn_start`, `phase_changed`, a reply's usage: `STATE_DELTA` of the run header's state
  (`HeaderState`);
- a phase that waits for a person: `RUN_FINISHED` with the interrupt outcome;
- `agent_end`: `RUN_FINISHED` (`success`; `cancelled` when aborted) or `RUN_ERROR`; the
  end of a run the AG-UI run goes on past: `CUSTOM` `duragent.agent_end`;
- the input the AG-UI run follows cancelled before a run took it: `CUSTOM`
  `duragent.input_cancelled` (its item id, `reason` `stopped` or `withdrawn`, a
  `message`), then `RUN_FINISHED` `cancelled`;
- every other event (tools running, retries, guidance, approvals decided, ...): `CUSTOM`
  named `duragent.<type>`, its payload as the value; a resume entry that answered nothing
  is a `CUSTOM` `duragent.warning`.

A tool call's arguments come whole when its message ends: duragent streams them without
the call's id, which every AG-UI tool call event needs.

The conversation itself (`api/agui_messages.py`) is restated as a `MESSAGES_SNAPSHOT`
before every `RUN_FINISHED` or `RUN_ERROR`, and when a message the client sent itself
reaches the transcript. A client adds its own message to its list when it sends it, under
an id of its own, where it sent it; the transcript puts it where a run took it, under the
entry's id (two messages sent while a run was busy, or one sent during a reply, land
after what the run said meanwhile). The snapshot drops the client's copy and appends the
stored one, which at that moment is the transcript's last message: the client's list and
the transcript (`duragent show`) then have the same messages in the same order, and a tool
result that failed or was denied carries AG-UI's `error`, which `TOOL_CALL_RESULT` has no
field for. What the client holds already (its input's messages, what a snapshot gave it)
is never streamed again. A client keeps the messages a snapshot names where it holds
them: when what it holds is out of the transcript's order (a message was told to it
before an older one it lacked, or after its own message that waited), the snapshot is
preceded by one of the transcript up to the first such message, which drops the rest,
so the full one appends them again, in order.

The client's side of that is `api/agui_snapshot.py`; a reply's streamed text and thinking
`api/agui_streams.py`. This module is the AG-UI run: its start and its ends, and what each
kind of stored event becomes.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    Message,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.version import PROTOCOL_VERSION
from pydantic import BaseModel, Field, TypeAdapter

from duragent.api.agui_follow import FINISH, Ending
from duragent.api.agui_messages import as_message
from duragent.api.agui_snapshot import ClientMessages, user_text
from duragent.api.agui_streams import ReplyStream, whole_reasoning, whole_text
from duragent.api.agui_waits import WAIT_PHASES, Ignored, at_position
from duragent.domain.messages import (
    AgentMessage,
    AssistantMessage,
    ThinkingContent,
    ToolResultMessage,
    Usage,
    UserMessage,
    text_of,
)
from duragent.store.records import StoredEvent

CUSTOM_PREFIX = "duragent."
_STORED: TypeAdapter[AgentMessage] = TypeAdapter(AgentMessage)
WARNING = CUSTOM_PREFIX + "warning"
"""The `CUSTOM` event that warns of something the run went on without."""
INPUT_CANCELLED = CUSTOM_PREFIX + "input_cancelled"
"""The `CUSTOM` event that says why the input an AG-UI run followed will not run."""


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
    the duragent run's); `held` are the messages the client sent with its input (what it
    holds): none is streamed to it again, and a stored user message with the text of one
    of its user messages is its own (`MESSAGES_SNAPSHOT` rather than a text message).

    Some events need the conversation from the store: after `translate` or `interrupt`,
    when `wants_messages` is set, the caller reads it and sends `with_messages(...)`."""

    def __init__(
        self,
        thread_id: str,
        state: HeaderState,
        *,
        run_id: str | None = None,
        held: list[Message] | None = None,
        sent: Message | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.state = state
        self.run_id = run_id
        self.started = False
        self.finished = False
        self.waiting: str | None = None
        """A phase of `WAIT_PHASES` the run just entered: the caller lists what waits and
        calls `interrupt`."""
        self.wants_messages = False
        """The caller owes the client the conversation (`with_messages`)."""
        self._messages = ClientMessages(held, sent)
        """What the client holds: its input's messages, what it was told, in its order."""
        self._stream = ReplyStream()
        self._closing: list[BaseEvent] = []
        """The `RUN_FINISHED` or `RUN_ERROR` that follows the conversation."""
        self._held_end: BaseEvent | None = None
        """The end of a run whose successor may yet go on with the AG-UI run."""

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

    def warn(self, ignored: list[Ignored]) -> list[BaseEvent]:
        """A warning for each resume entry that answered nothing: the run went on."""
        return [
            CustomEvent(
                name=WARNING,
                value={"code": "resume_ignored", "interrupt_id": i.interrupt_id, "message": i.why},
            )
            for i in ignored
        ]

    def interrupt(self, interrupts: list[Interrupt], position: int) -> list[BaseEvent]:
        """Finish the AG-UI run: the duragent run waits for these (nothing, when none is
        left to wait for). Each interrupt's id ends with `@position`, the seq of the last
        stored event told: the run that answers it goes on from there, so what happened
        between the two AG-UI runs (calls that needed no approval) is told too. The
        `RUN_FINISHED` follows the conversation (`with_messages`)."""
        self.waiting = None
        if not interrupts:
            return []
        placed = [i.model_copy(update={"id": at_position(i.id, position)}) for i in interrupts]
        self._messages.waits_on = {str((i.metadata or {}).get("message_id")) for i in interrupts}
        return self._close(self._finish(RunFinishedInterruptOutcome(interrupts=placed)))

    def finish_idle(self) -> list[BaseEvent]:
        """Finish an AG-UI run that has nothing to follow (a resume whose run is over and
        told): a success, once the conversation is restated."""
        return self._close(self._finish(RunFinishedSuccessOutcome()))

    @property
    def holding(self) -> bool:
        """A run's end was told as passed, and whether it ends the AG-UI run waits on
        whether the next run starts (`finish_held`)."""
        return self._held_end is not None

    def finish_held(self) -> list[BaseEvent]:
        """Finish with the end of the run last told, after all: no run followed it."""
        held, self._held_end = self._held_end, None
        if held is None or self.finished or self._closing:
            return []
        return self._close(held)

    def cancel_input(self, ending: Ending) -> list[BaseEvent]:
        """Finish, cancelled: the input this AG-UI run followed was cancelled before a run
        took it. The client's copy of it goes (the transcript never has it)."""
        if self.finished or self._closing:
            return []
        self._messages.sent = None
        said = CustomEvent(
            name=INPUT_CANCELLED,
            value={"item_id": ending.item_id, "reason": ending.reason, "message": ending.why},
        )
        closed = self._close(self._finish(RunFinishedCancelledOutcome()))
        return [*closed, said]

    def with_messages(
        self, conversation: list[Message], queued: list[tuple[str, str]]
    ) -> list[BaseEvent]:
        """The conversation as the client is to hold it (`ClientMessages.snapshots` says
        what it holds), then the run's end if it ends. `conversation` is the session's
        transcript (oldest first); `queued` the id and text of each input item waiting for
        a run."""
        self.wants_messages = False
        snapshots = self._messages.snapshots(conversation, queued)
        closing, self._closing = self._closing, []
        if closing:
            self.finished = True
        return [*snapshots, *closing]

    def translate(self, event: StoredEvent, ending: Ending | None = None) -> list[BaseEvent]:
        """The AG-UI events of one stored event (none for what was already told).
        `ending` says what an `agent_end` is to this AG-UI run (`api/agui_follow.py`;
        None: its end)."""
        if self.finished or self._closing or not (self.started or event.run_id):
            return []  # what no run did (a compaction of an idle session) opens no run
        out = self.start(event.run_id)
        p = event.payload
        kind = event.type
        if kind == "agent_start":
            self._held_end = None  # the next run: the AG-UI run goes on into it
            out += self._set(phase="turn", run_id=p["run_id"], turn=0, usage=Usage())
        elif kind == "turn_start":
            out += self._set(turn=p["turn"])
        elif kind == "phase_changed":
            out += self._set(phase=p["phase"])
            if p["phase"] in WAIT_PHASES:
                self.waiting = p["phase"]
        elif kind == "message_start":
            # the call made again
            if self._stream.open and self._stream.open.entry_id == p["entry_id"]:
                out += self._stream.close()
        elif kind == "message_update":
            out += self._stream.delta(p, self._messages)
        elif kind == "message_end":
            out += self._message_end(p["entry_id"], p["message"])
        elif kind == "agent_end":
            out += self._end(p, ending or FINISH, event)
        else:
            out.append(CustomEvent(name=CUSTOM_PREFIX + kind, value=p, timestamp=event.created_at))
        return out

    def _message_end(self, entry_id: str, message: dict[str, Any]) -> list[BaseEvent]:
        if entry_id in self._messages.done:
            return []  # told already (a save point tells a message again)
        self._messages.done.add(entry_id)
        role = message.get("role")
        out: list[BaseEvent] = []
        if (told := as_message(entry_id, _STORED.validate_python(message))) is not None:
            self._messages.told[entry_id] = told
        if role == "assistant":
            reply = AssistantMessage.model_validate(message)
            out += self._stream.close()
            text = text_of(reply.content)
            if entry_id not in self._stream.streamed:  # joined after its deltas
                for index, block in enumerate(reply.content):
                    if isinstance(block, ThinkingContent) and block.thinking:
                        out += whole_reasoning(f"{entry_id}:reasoning:{index}", block.thinking)
                if text:
                    out += whole_text(entry_id, "assistant", text)
                    self._messages.told_new(entry_id)
            if reply.tool_calls:
                # a client makes the calls' message if it has none
                self._messages.told_new(entry_id)
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
            self._messages.told_new(entry_id)
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
            if text in self._messages.held_texts:
                # The client's own: it holds a copy where it sent it, under its own id.
                # The conversation replaces that copy with this one, last, where it is.
                self.wants_messages = True
                if self._messages.sent is not None and text == user_text(
                    self._messages.sent.content
                ):
                    self._messages.sent = None
            elif text:
                out += whole_text(entry_id, "user", text)
                self._messages.told_new(entry_id)
        return out

    def _end(self, p: dict[str, Any], ending: Ending, event: StoredEvent) -> list[BaseEvent]:
        out = self._set(phase="idle", usage=Usage.model_validate(p["usage"]))
        status = p["status"]
        if status == "error":
            ended: BaseEvent = RunErrorEvent(
                message=p.get("error") or "the run failed", code="error"
            )
        elif status == "aborted":
            ended = self._finish(RunFinishedCancelledOutcome())
        else:
            ended = self._finish(RunFinishedSuccessOutcome())
        if ending.kind == "finish":
            return [*self._close(ended), *out]
        # Not this AG-UI run's end: told as what it is, and the AG-UI run goes on.
        passed = CustomEvent(name=CUSTOM_PREFIX + "agent_end", value=p, timestamp=event.created_at)
        out = [*self._stream.close(), *out, passed]
        if ending.kind == "cancelled":
            return [*out, *self.cancel_input(ending)]
        if ending.kind == "hold":
            self._held_end = ended
        return out

    def _close(self, ended: BaseEvent) -> list[BaseEvent]:
        """Close what is open; `ended` follows the conversation (`with_messages`)."""
        self._closing = [ended]
        self.wants_messages = True
        return self._stream.close()

    def _finish(self, outcome: Any) -> RunFinishedEvent:
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
