"""What the chat shows of a session's conversation, as blocks, built as the page builds it:
display messages from the store (what a save point stored) and run events (the part of the
turn in progress that is not stored yet: streamed text, running tools, what waits for a
person). A stored message takes the place of its live version (the same entry id), so
what a reattach shows is what was shown live.

Pure: no Textual, no client. The app feeds it and redraws the blocks it marks changed.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from duragent.domain.agents import shown_output
from duragent.domain.questions import ASK_USER_TOOL
from duragent.store.records import DisplayMessage, StoredEvent

TAIL_LINES = 5
"""Lines of a running tool's latest output kept on screen."""
LINE_CHARS = 200
ARGS_CHARS = 80
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
"""Terminal escapes and control characters of a tool's output: they would move the
screen's cursor or colour it."""

POINT_WORDS = {
    "before_model": "before its next model call",
    "before_tools": "before the tools it had planned ran",
    "during_tool_interrupted": "while a tool ran, and interrupted it",
    "after_tool": "after the running tool finished",
    "before_finish": "as it was about to finish",
}
"""Where guidance reached the agent, in words (the page says the same)."""

ToolState = Literal[
    "planned", "running", "done", "error", "interrupted", "aborted", "skipped", "waiting"
]


def clean(line: str) -> str:
    line = _CONTROL.sub("", line.expandtabs(4))
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def text_of(content: list[dict[str, Any]] | None) -> str:
    return "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def arguments_shown(args: dict[str, Any]) -> str:
    """A call's arguments on one short line: the command, path or pattern of the built-in
    tools, other tools' as compact JSON."""
    named = args.get("command") or args.get("path") or args.get("pattern") or args.get("prompt")
    if isinstance(named, str) and named:
        text = " ".join(named.split())
    elif not args:
        return ""
    else:
        text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= ARGS_CHARS else text[: ARGS_CHARS - 1] + "…"


def first_line(text: str) -> str:
    stripped = text.strip()
    return clean(stripped.splitlines()[0]) if stripped else ""


def tool_state(result: dict[str, Any]) -> ToolState:
    """What became of a call, from its result (as the page reads it)."""
    details = result.get("details") or {}
    text = text_of(result.get("content"))
    if details.get("runtime_guidance_replan") or text.startswith("Not run:"):
        return "skipped"
    if details.get("interrupted"):
        return "interrupted"
    if text.startswith("Aborted by the user"):
        return "aborted"
    if details.get("cancelled") or text.startswith("Stopped because the user sent guidance"):
        return "interrupted"
    return "error" if result.get("is_error") else "done"


@dataclass(eq=False)
class Block:
    id: str
    version: int = 0
    """Bumped on every change: the view redraws a block whose version moved."""
    run_id: str | None = None


@dataclass(eq=False)
class Said(Block):
    """A message of the person's or the assistant's."""

    who: Literal["you", "assistant"] = "assistant"
    text: str = ""
    streaming: bool = False
    stored: bool = False
    """Read from the store: events about it change nothing any more."""
    error: str | None = None


@dataclass(eq=False)
class ToolCard(Block):
    call_id: str = ""
    name: str = ""
    args: str = ""
    state: ToolState = "planned"
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    partial: str = ""
    result: str = ""
    duration_ms: int | None = None
    stored: bool = False
    cancelled: bool = False
    """Its result says it was cancelled: by guidance, or by a stop of its run (then it
    shows as aborted)."""

    def add_output(self, chunk: str) -> None:
        text = (self.partial + chunk).replace("\r\n", "\n").replace("\r", "\n")
        *complete, self.partial = text.split("\n")
        if len(self.partial) > LINE_CHARS:
            complete.append(self.partial)
            self.partial = ""
        self.tail.extend(clean(line) for line in complete)

    def latest(self) -> list[str]:
        return [*self.tail, clean(self.partial)] if self.partial else list(self.tail)


@dataclass(eq=False)
class Note(Block):
    """A line about the run: its end, a retry, guidance that reached the agent, a stop."""

    text: str = ""
    tone: Literal["muted", "good", "warn", "bad"] = "muted"


@dataclass(eq=False)
class Waiting(Block):
    """A call or a run that waits for a person: answered here, or from any client."""

    call_id: str = ""
    waiting: bool = True
    outcome: str = ""
    error: str = ""
    """What the last attempt to answer was told (a refusal, no worker)."""


@dataclass(eq=False)
class ApprovalCard(Waiting):
    tool: str = ""
    args: str = ""
    rule: str = ""


@dataclass(eq=False)
class QuestionCard(Waiting):
    question: str = ""
    choices: list[str] = field(default_factory=list)
    allow_other: bool = True


@dataclass(eq=False)
class BudgetCard(Waiting):
    scope: str = "run"
    limit: str = ""
    message: str = ""


@dataclass(eq=False)
class SubAgentCard(Block):
    call_id: str = ""
    session_id: str = ""
    name: str = ""


class Transcript:
    """The blocks of one session's conversation, in order."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._by_id: dict[str, Block] = {}
        self._anchor: int | None = None
        """Where a block an event makes goes: after the block the last event spoke of
        (None: at the end). Replayed events of stored turns put their notes in place."""
        self.guidance_texts: dict[str, str] = {}
        """Queue item id -> its text, for the note saying where guidance reached the agent."""
        self._notes = 0
        self._aborted_runs: set[str] = set()

    # Reading ----------------------------------------------------------------------

    def get(self, block_id: str) -> Block | None:
        return self._by_id.get(block_id)

    def waiting(self) -> list[Waiting]:
        """The cards that wait for a person now, oldest first."""
        return [b for b in self.blocks if isinstance(b, Waiting) and b.waiting]

    def last_text(self) -> str:
        """The assistant's latest text (what `/export` and tests look for)."""
        said = [b for b in self.blocks if isinstance(b, Said) and b.who == "assistant"]
        return said[-1].text if said else ""

    # Placing --------------------------------------------------------------------------

    def _touch(self, block: Block) -> None:
        block.version += 1

    def _add(self, block: Block, *, after: str | None = None, live: bool = True) -> Block:
        """Put a new block in place: after `after`, or at the anchor (`live`), or at the end."""
        if after is not None and after in self._by_id:
            index = self._index(after) + 1
            while index < len(self.blocks) and self._follows(self.blocks[index], after):
                index += 1
        elif live and self._anchor is not None:
            index = self._anchor
        else:
            index = len(self.blocks)
        self.blocks.insert(index, block)
        self._by_id[block.id] = block
        if live:
            self._anchor = index + 1 if index + 1 < len(self.blocks) else None
        elif self._anchor is not None and index < self._anchor:
            self._anchor += 1
        self._touch(block)
        return block

    def _follows(self, block: Block, owner: str) -> bool:
        """Blocks that belong under `owner` (its calls' cards, what waits on them): a block
        placed after it goes after them."""
        owner_block = self._by_id[owner]
        if isinstance(owner_block, Said) and isinstance(block, ToolCard | Waiting | SubAgentCard):
            return True
        if isinstance(owner_block, ToolCard):
            return (
                isinstance(block, Waiting | SubAgentCard) and block.call_id == owner_block.call_id
            )
        return False

    def _index(self, block_id: str) -> int:
        block = self._by_id[block_id]
        return next(i for i, b in enumerate(self.blocks) if b is block)

    def _at(self, block: Block) -> None:
        """An event spoke of `block`: what it makes next goes after it (and after what
        belongs under it)."""
        index = self._index(block.id) + 1
        while index < len(self.blocks) and self._follows(self.blocks[index], block.id):
            index += 1
        self._anchor = index if index < len(self.blocks) else None

    def note(self, text: str, tone: Literal["muted", "good", "warn", "bad"] = "muted") -> Note:
        """A note of the app's own (a stop, an export), at the end."""
        self._notes += 1
        block = Note(id=f"note:{self._notes}", text=text, tone=tone)
        self._add(block, live=False)
        return block

    def _event_note(
        self, text: str, tone: Literal["muted", "good", "warn", "bad"], run_id: str | None
    ) -> None:
        self._notes += 1
        self._add(Note(id=f"note:{self._notes}", text=text, tone=tone, run_id=run_id))

    # Display messages (stored) ---------------------------------------------------------

    def add_display(self, messages: list[DisplayMessage]) -> None:
        for shown in messages:
            self._stored(shown.id, shown.message, shown.run_id)

    def _stored(self, entry_id: str, message: dict[str, Any], run_id: str | None) -> None:
        role = message.get("role")
        if role == "toolResult":
            card = self._card(message["tool_call_id"], message.get("tool_name", ""), run_id)
            self._result(card, message)
            card.stored = True
            return
        if role == "custom":
            if message.get("custom_type") == "abort" and run_id is not None:
                self._aborted(run_id)
            if not message.get("display", True):
                return
            known = self._by_id.get(entry_id)
            text = text_of(message.get("content")) or message.get("custom_type", "")
            tone: Literal["muted", "warn"] = "warn" if message.get("custom_type") else "muted"
            if isinstance(known, Note):
                known.text = text
                self._touch(known)
            else:
                self._add(Note(id=entry_id, text=text, tone=tone, run_id=run_id), live=False)
            return
        said = self._said(entry_id, "you" if role == "user" else "assistant", run_id, live=False)
        said.text = text_of(message.get("content"))
        said.streaming = False
        said.stored = True
        said.error = message.get("error_message")
        self._touch(said)
        if role == "assistant":
            self._calls(said, message, live=False)

    def _said(self, entry_id: str, who: Literal["you", "assistant"], run_id: str | None, *,
              live: bool = True) -> Said:  # fmt: skip
        known = self._by_id.get(entry_id)
        if isinstance(known, Said):
            return known
        block = Said(id=entry_id, who=who, run_id=run_id)
        self._add(block, live=live)
        return block

    def _calls(self, said: Said, message: dict[str, Any], *, live: bool = True) -> None:
        """Cards for the message's tool calls, under it."""
        previous = said.id
        for part in message.get("content") or []:
            if part.get("type") != "toolCall":
                continue
            card_id = f"call:{part['id']}"
            if card_id not in self._by_id:
                card = ToolCard(
                    id=card_id,
                    call_id=part["id"],
                    name=part.get("name", ""),
                    args=arguments_shown(part.get("arguments") or {}),
                    run_id=said.run_id,
                )
                self._add(card, after=previous, live=live)
            previous = card_id

    def _card(self, call_id: str, name: str, run_id: str | None) -> ToolCard:
        known = self._by_id.get(f"call:{call_id}")
        if isinstance(known, ToolCard):
            return known
        card = ToolCard(id=f"call:{call_id}", call_id=call_id, name=name, run_id=run_id)
        self._add(card)
        return card

    def _result(self, card: ToolCard, result: dict[str, Any]) -> None:
        card.state = tool_state(result)
        card.cancelled = bool((result.get("details") or {}).get("cancelled"))
        if card.cancelled and card.run_id in self._aborted_runs:
            card.state = "aborted"
        card.result = shown_output(result.get("details")) or first_line(
            text_of(result.get("content"))
        )
        card.partial = ""
        self._touch(card)

    # Run events (live) -----------------------------------------------------------------

    def apply(self, event: StoredEvent) -> None:
        p = event.payload
        kind = event.type
        run = event.run_id
        if kind == "message_start":
            self._message_start(p["entry_id"], p["message"], run)
        elif kind == "message_update":
            said = self._by_id.get(p["entry_id"])
            if isinstance(said, Said) and not said.stored and p["kind"] == "text":
                said.text += p["delta"]
                self._touch(said)
        elif kind == "message_end":
            self._message_end(p["entry_id"], p["message"], run)
        elif kind == "tool_execution_start":
            card = self._card(p["tool_call_id"], p["tool_name"], run)
            self._at(card)
            if not card.stored:
                card.args = card.args or arguments_shown(p.get("args") or {})
                card.state = "running"
                self._touch(card)
        elif kind == "tool_execution_update":
            card = self._card(p["tool_call_id"], p["tool_name"], run)
            if not card.stored:
                card.add_output(p["partial"])
                self._touch(card)
        elif kind == "tool_execution_end":
            card = self._card(p["tool_call_id"], p["tool_name"], run)
            self._at(card)
            card.duration_ms = p.get("duration_ms")
            if not card.stored:
                self._result(card, p["result"])
            self._touch(card)
        else:
            self._harness(kind, p, run)

    def _message_start(self, entry_id: str, message: dict[str, Any], run: str | None) -> None:
        role = message.get("role")
        if role == "toolResult":
            return  # its tool_execution_end said it
        if role == "custom":
            return  # shown from its message_end
        said = self._said(entry_id, "you" if role == "user" else "assistant", run)
        self._at(said)
        if not said.stored and role == "assistant":
            if said.text:  # the model call is made again: what it said so far goes
                self._event_note("↻ the model call was interrupted; asking again", "warn", run)
            said.text = ""
            said.streaming = True
            self._touch(said)

    def _message_end(self, entry_id: str, message: dict[str, Any], run: str | None) -> None:
        role = message.get("role")
        if role == "toolResult":
            return
        if role == "custom":
            if message.get("display", True) and entry_id not in self._by_id:
                text = text_of(message.get("content")) or message.get("custom_type", "")
                self._add(Note(id=entry_id, text=text, tone="warn", run_id=run))
            return
        said = self._said(entry_id, "you" if role == "user" else "assistant", run)
        self._at(said)
        if said.stored:
            return
        said.text = text_of(message.get("content"))
        said.streaming = False
        if message.get("stop_reason") == "error":
            said.error = message.get("error_message") or "the model call failed"
        self._touch(said)
        if role == "assistant":
            self._calls(said, message)

    def _harness(self, kind: str, p: dict[str, Any], run: str | None) -> None:
        if kind == "approval_requested":
            self._waiting_card(
                ApprovalCard(
                    id=f"approval:{p['call_id']}",
                    call_id=p["call_id"],
                    tool=p["tool_name"],
                    args=p.get("args_preview", ""),
                    rule=p.get("rule", ""),
                    run_id=run,
                )
            )
        elif kind == "approval_decided":
            by = f" by {p['by']}" if p.get("by") else ""
            reason = f": {p['reason']}" if p.get("reason") else ""
            self._settle(f"approval:{p['call_id']}", f"{p['decision']}{by}{reason}")
        elif kind == "question_asked":
            card = self._card(p["call_id"], ASK_USER_TOOL, run)
            card.state = "waiting"
            self._touch(card)
            self._waiting_card(
                QuestionCard(
                    id=f"question:{p['call_id']}",
                    call_id=p["call_id"],
                    question=p["question"],
                    choices=list(p.get("choices") or []),
                    allow_other=p.get("allow_other", True),
                    run_id=run,
                )
            )
        elif kind == "question_answered":
            by = f" by {p['by']}" if p.get("by") else ""
            how = {"answered": "answered", "timeout": "no answer in time"}
            what = how.get(p["status"], "withdrawn")
            answer = f": {p['answer']}" if p.get("answer") else ""
            self._settle(f"question:{p['call_id']}", f"{what}{by}{answer}")
        elif kind == "budget_reached":
            if p["stopped"]:
                self._event_note(f"■ {p['message']}", "warn", run)
            elif f"budget:{run}:{p['scope']}:{p['limit']}" not in self._by_id:
                self._add(
                    BudgetCard(
                        id=f"budget:{run}:{p['scope']}:{p['limit']}",
                        scope=p["scope"],
                        limit=p["limit"],
                        message=p["message"],
                        run_id=run,
                    )
                )
        elif kind == "budget_raised":
            by = f" by {p['by']}" if p.get("by") else ""
            for block in self.waiting():
                if isinstance(block, BudgetCard) and block.run_id == run:
                    self._settle(block.id, f"raised{by}")
        elif kind == "runtime_guidance_injected":
            where = POINT_WORDS.get(p["point"], "at a safe point")
            texts = [self.guidance_texts[i] for i in p["item_ids"] if i in self.guidance_texts]
            what = f"your guidance “{first_line(' '.join(texts))}”" if texts else "your guidance"
            self._event_note(f"↪ {what} reached the agent {where}", "good", run)
        elif kind == "runtime_guidance_replan_before_tools":
            count = len(p.get("skipped") or [])
            self._event_note(
                f"↪ {count} planned call(s) not run: the agent plans again", "good", run
            )
        elif kind == "retry_scheduled":
            self._event_note(
                f"↻ model call failed ({p['error']}); retrying in {p['delay_ms'] / 1000:.1f} s",
                "warn",
                run,
            )
        elif kind == "run_aborted":
            if run is not None:
                self._aborted(run)
            dropped = [*p.get("cleared_steering", []), *p.get("cleared_follow_ups", [])]
            extra = f"; dropped: {'; '.join(dropped)}" if dropped else ""
            self._event_note(f"■ stopped{extra}", "warn", run)
        elif kind == "compaction_start":
            self._event_note(f"compacting the context ({p['reason']})…", "muted", run)
        elif kind == "compaction_end":
            self._event_note(f"compacted: {p['tokens_before']:,} tokens summarised", "muted", run)
        elif kind == "host_waiting" and p.get("waiting"):
            self._event_note(f"waiting for host {p['host']}", "warn", run)
        elif kind == "subagent_started":
            block_id = f"sub:{p['session_id']}"
            if block_id not in self._by_id:
                after = f"call:{p['tool_call_id']}"
                self._add(
                    SubAgentCard(
                        id=block_id,
                        call_id=p["tool_call_id"],
                        session_id=p["session_id"],
                        name=p.get("name", ""),
                        run_id=run,
                    ),
                    after=after if after in self._by_id else None,
                )
        elif kind == "agent_end":
            self._run_ended(p, run)

    def _waiting_card(self, card: Waiting) -> None:
        if card.id in self._by_id:
            return
        after = f"call:{card.call_id}"
        self._add(card, after=after if after in self._by_id else None)

    def _settle(self, block_id: str, outcome: str) -> None:
        block = self._by_id.get(block_id)
        if isinstance(block, Waiting) and block.waiting:
            block.waiting = False
            block.outcome = outcome
            block.error = ""
            self._touch(block)

    def _aborted(self, run: str) -> None:
        """The run was stopped: its calls cancelled then show as aborted."""
        self._aborted_runs.add(run)
        for block in self.blocks:
            if isinstance(block, ToolCard) and block.run_id == run and block.cancelled:
                block.state = "aborted"
                self._touch(block)

    def _run_ended(self, p: dict[str, Any], run: str | None) -> None:
        if p["status"] == "aborted" and run is not None:
            self._aborted(run)
        for block in self.waiting():
            if block.run_id == run:
                self._settle(block.id, "withdrawn: the run ended")
        for shown in self.blocks:
            if isinstance(shown, ToolCard) and shown.run_id == run and shown.state == "running":
                shown.state = "aborted" if p["status"] == "aborted" else "interrupted"
                self._touch(shown)
            if isinstance(shown, Said) and shown.run_id == run and shown.streaming:
                shown.streaming = False
                self._touch(shown)
        usage = p.get("usage") or {}
        tokens = sum(v for v in usage.values() if isinstance(v, int))
        error = f": {p['error']}" if p.get("error") else ""
        tone: Literal["good", "bad"] = "good" if p["status"] == "completed" else "bad"
        if f"end:{run}" in self._by_id:
            return
        self._add(
            Note(
                id=f"end:{run}",
                text=f"run {p['status']} after {p.get('turns', 0)} turn(s), "
                f"{tokens:,} tokens{error}",
                tone=tone,
                run_id=run,
            )
        )
        self._anchor = None
