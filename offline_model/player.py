"""The script player: which step answers each request, the request log and the gates.

Thread-safe: the server's event loop and the test that drives it share one player.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from duragent.offline_model.chaos import Chaos, Roll, roll
from duragent.offline_model.script import TEMPLATE_KEY, Script, Step
from duragent.offline_model.wire import JsonObject

StepInput = Step | dict[str, Any]


class RecordedRequest(BaseModel):
    """One request the server received on a model API path (`path` tells which API).

    `step_index` is the index of the step it consumed within its key's conversation (None for
    invalid requests, token counts and requests past the end of the script). `status` is the
    HTTP status it was answered with, None while it is still held (hang, wait_for, delay).
    `deltas_sent_at` holds when each streamed delta event was handed to the connection.
    """

    path: str
    key: str
    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float
    step_index: int | None = None
    status: int | None = None
    deltas_sent_at: list[float] = []


class ScriptPlayer:
    """The script's playback state and the request log, safe to use from any thread.

    The server thread consumes steps and records requests while test threads read the log and
    queue steps, so every access goes through one lock.
    """

    def __init__(self, script: Script) -> None:
        self.script = script
        """The script it was made with (steps queued later are not in it)."""
        self._lock = threading.Lock()
        self.when_exhausted = script.when_exhausted
        self._template = list(script.conversations.get(TEMPLATE_KEY, []))
        self._steps = {k: list(v) for k, v in script.conversations.items() if k != TEMPLATE_KEY}
        self._played: dict[str, set[int]] = {}
        self._log: list[RecordedRequest] = []
        self._open_gates: set[str] = set()
        self._gate_watchers: list[Callable[[str], None]] = []
        self.chaos: Chaos | None = script.chaos
        self._rolled: dict[str, int] = {}

    def _conversation(self, key: str) -> list[Step]:
        # A key seen for the first time starts its own copy of the template.
        if key not in self._steps:
            self._steps[key] = list(self._template)
        return self._steps[key]

    def take(self, key: str, body: JsonObject | None = None) -> tuple[int, Step] | None:
        """Consume a step of `key` for the request `body`: (its index, the step), or None
        when none is left for it (the script's `when_exhausted` answers).

        The first unplayed step whose `match` finds the request's last user text wins (a
        `repeat` one is never used up). Otherwise the script's `pick` decides, among the
        steps without a `match`:

        - "order": the first one this player has not played, in order.
        - "turn": the one the conversation is at, read from the request: a request whose
          messages hold n assistant turns (`assistant_turns`) plays turn n. The steps are
          cut into turns, each ending with the first step that answers (a reply delivered
          whole: `Step.answers`); the steps before it in its turn fail the request (an
          error, a hang, a cut or stalled stream). A script of replies only: turn n is
          step n. Within its turn a request gets the first failing step this player has
          not played, else the turn's answer. So a retry (the same conversation sent
          again) after a scripted `error: 529` gets the reply that follows it; and an
          answer is never used up: a request of its turn sent again (a retry after its
          reply was lost with its worker) gets it again. Players do not share what they
          played: each process with its own copy of the script fails a turn with its
          failing steps once, on the first requests of that turn it serves. Steps left
          after the last answer are a last turn; past it, none is left. Turns are counted
          over the steps as they stand (`add_steps` adds turns after them). A summary
          request (a compaction's: one user message, no turns) is turn 0: script a
          `match` step for it.
        """
        text = _last_user_text(body or {})
        with self._lock:
            steps = self._conversation(key)
            played = self._played.setdefault(key, set())
            chosen = next(
                (
                    (i, s)
                    for i, s in enumerate(steps)
                    if i not in played and s.match and re.search(s.match, text)
                ),
                None,
            )
            if chosen is None and self.script.pick == "turn":
                chosen = _turn_step(steps, played, assistant_turns(body or {}))
            elif chosen is None:
                chosen = next(
                    ((i, s) for i, s in enumerate(steps) if i not in played and not s.match),
                    None,
                )
            if chosen is not None and not chosen[1].repeat:
                played.add(chosen[0])
            return chosen

    def roll(self, key: str) -> Roll | None:
        """The chaos dice of `key`'s next request; None without chaos."""
        if self.chaos is None:
            return None
        with self._lock:
            number = self._rolled[key] = self._rolled.get(key, -1) + 1
        return roll(self.chaos, key, number)

    def add_steps(self, key: str, steps: Sequence[StepInput], *, replace: bool = False) -> int:
        """Queue `steps` for `key` and return how many of its steps are now unplayed.

        Append adds them after the key's remaining steps; replace discards the remaining steps
        first. Key "*" edits the template that keys not seen yet will copy.
        """
        new = [s if isinstance(s, Step) else Step.model_validate(s) for s in steps]
        with self._lock:
            if key == TEMPLATE_KEY:
                self._template = new if replace else self._template + new
                return len(self._template)
            played = self._played.setdefault(key, set())
            current = self._conversation(key)
            kept = [s for i, s in enumerate(current) if i in played or not replace]
            self._steps[key] = kept + new
            self._played[key] = set(range(len(played))) if replace else played
            return len(self._steps[key]) - len(self._played[key])

    def remaining(self, key: str) -> int:
        """How many of `key`'s steps have not been played yet."""
        with self._lock:
            return len(self._conversation(key)) - len(self._played.get(key, set()))

    def record(self, path: str, key: str, body: JsonObject, headers: dict[str, str]) -> int:
        """Log a received request and return its position in the log."""
        entry = RecordedRequest(
            path=path, key=key, body=body, headers=headers, received_at=time.time()
        )
        with self._lock:
            self._log.append(entry)
            return len(self._log) - 1

    def annotate(self, position: int, **fields: int | None) -> None:
        """Set `step_index` and/or `status` of the logged request at `position`."""
        with self._lock:
            self._log[position] = self._log[position].model_copy(update=fields)

    def note_delta_sent(self, position: int) -> None:
        """Record that the request at `position` was just sent one more streamed delta."""
        with self._lock:
            entry = self._log[position]
            sent = [*entry.deltas_sent_at, time.time()]
            self._log[position] = entry.model_copy(update={"deltas_sent_at": sent})

    def requests(self, key: str | None = None) -> list[RecordedRequest]:
        """A copy of the request log, optionally only the requests of `key`."""
        with self._lock:
            return [r for r in self._log if key is None or r.key == key]

    def open_gate(self, gate: str) -> None:
        """Mark `gate` released; it stays open for every later `wait_for` on it. The
        watchers are told, from the caller's thread."""
        with self._lock:
            self._open_gates.add(gate)
            watchers = list(self._gate_watchers)
        for watcher in watchers:
            watcher(gate)

    def watch_gates(self, watcher: Callable[[str], None]) -> None:
        """Have `watcher(gate)` called each time a gate is released: how replies held on
        another event loop than the releaser's hear of it (`offline_model.in_process`)."""
        with self._lock:
            self._gate_watchers.append(watcher)

    def unwatch_gates(self, watcher: Callable[[str], None]) -> None:
        with self._lock:
            if watcher in self._gate_watchers:
                self._gate_watchers.remove(watcher)

    def gate_open(self, gate: str) -> bool:
        with self._lock:
            return gate in self._open_gates


def _turn_step(steps: list[Step], played: set[int], turn: int) -> tuple[int, Step] | None:
    """The step `turn` is at under `pick: turn` (see `ScriptPlayer.take`)."""
    turns: list[list[int]] = [[]]
    for index, step in enumerate(steps):
        if step.match:
            continue
        turns[-1].append(index)
        if step.answers:
            turns.append([])
    if not turns[-1]:
        turns.pop()
    if turn >= len(turns):
        return None
    for index in turns[turn]:
        step = steps[index]
        if step.answers or index not in played:
            return index, step
    return None  # a last turn of failing steps, all played


_ASSISTANT_ITEMS = ("function_call", "reasoning")
"""The Responses API's input items, besides assistant messages, that the model wrote."""


def assistant_turns(body: JsonObject) -> int:
    """How many assistant turns the conversation of the request `body` holds: its runs of
    consecutive assistant messages (Anthropic's and Chat Completions' `messages`), or of
    consecutive items the model wrote (the Responses API's `input`: assistant messages,
    function calls, reasoning; one reply is several items there). A string input is none.
    """
    messages = body.get("messages")
    if messages is None:
        messages = body.get("input")
    if not isinstance(messages, list):
        return 0
    turns, previous = 0, False
    for message in messages:
        mine = isinstance(message, dict) and (
            message.get("role") == "assistant" or message.get("type") in _ASSISTANT_ITEMS
        )
        turns += mine and not previous
        previous = mine
    return turns


def _last_user_text(body: JsonObject) -> str:
    """The text of the request's last user message (what a step's `match` looks at).

    The messages are Anthropic's and Chat Completions' `messages`, or the Responses API's
    `input` (a string is itself the user's text); content is a string or a list of parts,
    whose `text` counts (Anthropic's and Chat's text parts, Responses' input_text parts).
    """
    messages = body.get("messages")
    if messages is None:
        messages = body.get("input")
        if isinstance(messages, str):
            return messages
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""
