"""The soak's verdict: what the store, the workflow histories and the tools' own records
say once every run has ended, against what the soak sent.

Each finding is one line in one of three lists: `lost` (something sent, stored or run is
missing), `doubled` (stored, delivered or run twice) and `failed` (a run that ended in an
error for a reason other than an injected model fault, or whose outcome the soak never
learned). Runs that failed on an injected model fault (retries used up on 529s, 500s and
dropped streams) are listed apart: that is what such a run is meant to do.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checks import model_requests, run_events
from soak_sessions import RunLog, SessionLog
from soak_tools import NOT_RETRY_SAFE, READ
from support import Stack, assert_valid_pairing

from duragent.domain.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.messages import AssistantMessage, ToolResultMessage, UserMessage, text_of
from duragent.domain.runs import session_workflow_id
from duragent.store.records import QueueItem, RunRecord, StoredEvent

INJECTED = ("(chaos)", "overloaded", "dropped", "Overloaded", "Internal server error")
"""Words of the errors the offline model's chaos injects, as a failed run reports them."""


@dataclass
class Verdict:
    runs: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    faulted: list[str] = field(default_factory=list)
    """Runs that failed on an injected model fault."""
    notes: list[str] = field(default_factory=list)
    """What is worth knowing and breaks no promise (compactions refused, ...)."""


# ------------------------------------------------------------------------------ runs


def check_runs(stack: Stack, log: SessionLog, verdict: Verdict) -> None:
    """Every run ended as completed, aborted or failed with a readable reason, once
    (one agent_start and one agent_end), with its prompt stored once; each is the soak's
    own or one that input it sent started (`check_started`)."""
    session_id = log.session.id
    records = {r.run_id: r for r in stack.client.sync.runs.list(session_id)}
    events = run_events(stack, session_id)
    entries = stack.client.sync.tree.entries(session_id)
    items = stack.client.sync.inputs.queue(session_id, status=None)
    check_started(log, records.values(), events, items, verdict)
    for run in log.runs:
        verdict.runs += 1
        where = f"{session_id} run {run.run_id or '?'} ({run.prompt!r})"
        record = records.get(run.run_id or "")
        if run.result is None:
            why = run.client_error or "still open when the soak gave up waiting"
            verdict.failed.append(f"{where}: its outcome never came: {why}")
            verdict.statuses["unknown"] += 1
            continue
        verdict.statuses[run.result.status] += 1
        if record is None:
            verdict.lost.append(f"{where}: no run record in the store")
            continue
        if record.ended_at is None or record.status == "running":
            verdict.lost.append(f"{where}: never ended (store: {record.status})")
            continue
        if record.status != run.result.status:
            verdict.lost.append(f"{where}: ended {run.result.status}, stored as {record.status}")
        if record.usage != run.result.usage:
            verdict.lost.append(f"{where}: used {run.result.usage}, stored {record.usage}")
        if record.status == "error":
            reason = record.error or ""
            if not reason.strip() or "Traceback" in reason or len(reason) > 2000:
                verdict.failed.append(f"{where}: failed with no readable reason: {reason!r}")
            elif any(word in reason for word in INJECTED):
                verdict.faulted.append(f"{where}: {reason}")
            else:
                verdict.failed.append(f"{where}: {reason}")
        for kind in ("agent_start", "agent_end"):
            seen = sum(1 for e in events if e.type == kind and e.payload["run_id"] == record.run_id)
            if seen != 1:
                (verdict.lost if seen == 0 else verdict.doubled).append(
                    f"{where}: {seen} {kind} events"
                )
        if not run.prompt:
            continue  # started by input sent meanwhile: `check_accepted` checks that input
        stored = carrying(entries, run.prompt)
        # A run that failed or was aborted before its start was recorded has no prompt in.
        if stored > 1 or (stored == 0 and record.status == "completed"):
            (verdict.lost if stored == 0 else verdict.doubled).append(
                f"{where}: its prompt stored {stored} times"
            )


def check_started(
    log: SessionLog,
    records: Iterable[RunRecord],
    events: Sequence[StoredEvent],
    items: Sequence[QueueItem],
    verdict: Verdict,
) -> None:
    """Every run the soak did not start with a prompt of its own was started by input it
    sent (`inputs_taken`), and followed: each input starts one run, so a run that took
    none, or only input that an earlier run took (input run twice), is doubled."""
    own = {run.run_id for run in log.runs if run.prompt and run.run_id}
    followed = {run.run_id for run in log.runs if run.run_id}
    taken_by: dict[str, str] = {}
    for record in sorted(records, key=lambda r: (r.started_at, r.run_id)):
        taken = inputs_taken(log, record.run_id, events, items)
        fresh = [what for what in taken if what not in taken_by]
        taken_by.update(dict.fromkeys(fresh, record.run_id))
        if record.run_id in own:
            continue  # it may take input sent as it started: none of that starts a run then
        where = f"{log.session.id}: run {record.run_id} ({record.kind})"
        if not taken:
            verdict.doubled.append(f"{where} that no input the soak sent started")
        elif not fresh:
            verdict.doubled.append(f"{where} for {taken[0]}, which run {taken_by[taken[0]]} took")
        elif record.run_id not in followed:
            # Its driver missed it (started as the driver stopped following, its answer
            # lost with a service): the store's record is its outcome.
            verdict.runs += 1
            if record.ended_at is None or record.status == "running":
                verdict.statuses["unknown"] += 1
                verdict.lost.append(f"{where}, started by {fresh[0]}: never ended")
            else:
                verdict.statuses[record.status] += 1
                missed = f"{where}, started by {fresh[0]}: {record.status} (its driver missed it)"
                if record.status == "error":
                    verdict.failed.append(f"{missed}: {record.error}")
                else:
                    verdict.notes.append(missed)


def inputs_taken(
    log: SessionLog, run_id: str, events: Sequence[StoredEvent], items: Sequence[QueueItem]
) -> list[str]:
    """The input the soak sent that the run took, named as `check_started` reports it:
    a chat or webhook send that started it, input it took (by its text), a firing of the
    session's schedule (by the time it fired for), and queue items that start a run (sent
    while the run before was open, or steering and follow-ups that run never reached)."""
    taken = [
        f"{log.accepted[text]} input {text[:24]!r}"
        for text, started in log.accepted_runs.items()
        if started == run_id
    ]
    for event in events:
        message = event.payload.get("message") or {}
        if event.run_id == run_id and event.type == "message_end" and message.get("role") == "user":
            taken += sent_input(log, message)
    for item in items:
        if item.run_id == run_id and item.status == "consumed" and item.starts_run:
            message = item.message.model_dump(mode="json")
            taken += sent_input(log, message) or [f"queued input {item.id}"]
    return list(dict.fromkeys(taken))


def sent_input(log: SessionLog, message: dict[str, Any]) -> list[str]:
    """The accepted input and the schedule's firing a user message carries."""
    found = [
        f"{channel} input {text[:24]!r}"
        for text, channel in log.accepted.items()
        if text in json.dumps(message)
    ]
    scheduled = message.get("scheduled") or {}
    if log.schedule_id is not None and scheduled.get("schedule_id") == log.schedule_id:
        found.append(f"the firing for {scheduled['scheduled_at']}")
    return found


def carrying(entries: Iterable[SessionEntry], text: str) -> int:
    """How many user or custom messages (steers, guidance, prompts) carry `text`."""
    return sum(
        1
        for e in entries
        if (isinstance(e, MessageEntry) and isinstance(e.message, UserMessage))
        or isinstance(e, CustomMessageEntry)
        if text in json.dumps(e.model_dump(mode="json"))
    )


# ------------------------------------------------------------------------------ the tree


def check_tree(stack: Stack, session_id: str, verdict: Verdict) -> list[SessionEntry]:
    """Every entry stored once, all on one chain; every tool call with exactly one result.
    Returns the session's entries."""
    entries = stack.client.sync.tree.entries(session_id)
    ids = Counter(e.id for e in entries)
    for entry_id, count in ids.items():
        if count > 1:
            verdict.doubled.append(f"{session_id}: entry {entry_id} stored {count} times")
    path = stack.client.sync.tree.path(session_id)
    for parent, child in itertools.pairwise(path):
        if child.parent_id != parent.id:
            verdict.lost.append(f"{session_id}: {child.id} does not follow {parent.id}")
    for entry_id in set(ids) - {e.id for e in path}:
        verdict.lost.append(f"{session_id}: entry {entry_id} is off the session's branch")
    # The display history is the transcript, message for message (and each compaction's
    # summary), as the fault suite's verdict has it.
    shown = [(d.id, d.role) for d in stack.client.sync.display.messages(session_id)]
    expected = [
        (e.id, e.message.role if isinstance(e, MessageEntry) else "custom")
        for e in path
        if isinstance(e, MessageEntry)
        or (isinstance(e, CustomMessageEntry) and e.display)
        or (isinstance(e, CompactionEntry | BranchSummaryEntry) and e.usage is not None)
    ]
    if shown != expected:
        missing = set(expected) - set(shown)
        verdict.lost.append(f"{session_id}: the display history differs; missing {missing}")
    try:
        assert_valid_pairing(path)
    except AssertionError as err:
        verdict.lost.append(f"{session_id}: tool calls and results do not pair: {err}")
    calls = Counter(call.id for call in tool_calls(entries))
    results = Counter(m.tool_call_id for m in tool_results(entries))
    for call_id in calls | results:
        if calls[call_id] > 1:
            verdict.doubled.append(f"{session_id}: tool call {call_id} stored {calls[call_id]}x")
        if calls[call_id] == 0:
            verdict.lost.append(f"{session_id}: a result for tool call {call_id}, not the call")
        elif results[call_id] == 0:
            verdict.lost.append(f"{session_id}: tool call {call_id} has no result")
        elif results[call_id] > 1:
            verdict.doubled.append(f"{session_id}: tool call {call_id}: {results[call_id]} results")
    return entries


def tool_calls(entries: Iterable[SessionEntry]) -> list[ToolCallView]:
    return [
        ToolCallView(call.id, call.name, str(call.arguments.get("command", "")))
        for e in entries
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
        for call in e.message.tool_calls
    ]


@dataclass(frozen=True)
class ToolCallView:
    id: str
    name: str
    command: str


def tool_results(entries: Iterable[SessionEntry]) -> list[ToolResultMessage]:
    return [
        e.message
        for e in entries
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]


# ------------------------------------------------------------------------------ queued input


def check_queue(stack: Stack, log: SessionLog, entries: Sequence[SessionEntry], v: Verdict) -> None:
    """Each steer, follow-up and queue item delivered at most once; delivered when the run
    took it (a completed run took every steer and follow-up it accepted; a consumed item is
    in the session)."""
    session_id = log.session.id
    consumed = Counter(
        e.payload.get("entry_id")
        for e in run_events(stack, session_id)
        if e.type == "queue_consumed"
    )
    for item_id, times in consumed.items():
        if times > 1:
            v.doubled.append(f"{session_id}: queue item {item_id} consumed {times} times")
    for text in log.texts.values():
        stored = carrying(entries, text)
        if stored > 1:
            v.doubled.append(f"{session_id}: queued {text!r} stored {stored} times")
    for run in log.runs:
        check_delivered(log, run, entries, v)
    for item_id in log.items:
        item = stack.client.sync.inputs.item(session_id, item_id)
        stored = carrying(entries, log.texts[item_id])
        if item.status == "consumed" and stored != 1:
            v.lost.append(f"{session_id}: item {item_id} consumed, stored {stored} times")
        if item.status != "consumed" and stored:
            v.doubled.append(f"{session_id}: item {item_id} is {item.status}, yet stored")


def check_delivered(
    log: SessionLog, run: RunLog, entries: Sequence[SessionEntry], v: Verdict
) -> None:
    if run.result is None or run.result.status != "completed":
        return  # an aborted or failed run may drop what it had not taken yet
    for item_id, accepted in {**run.steers, **run.follow_ups}.items():
        text = log.texts[item_id]
        if accepted and not carrying(entries, text):
            v.lost.append(f"{log.session.id}: run {run.run_id} accepted {text!r}, not stored")


def check_accepted(
    stack: Stack, log: SessionLog, entries: Sequence[SessionEntry], v: Verdict
) -> None:
    """Every accepted input ran exactly once (page, API, AG-UI and command line share
    `inputs.send`; webhooks; schedules): stored once, unless a stop cancelled it while it
    waited, or stopped the run it started before that run took it; none is left waiting
    for a run that never comes."""
    session_id = log.session.id
    items = stack.client.sync.inputs.queue(session_id, status=None)
    records = {r.run_id: r for r in stack.client.sync.runs.list(session_id)}
    for text, channel in log.accepted.items():
        stored = carrying(entries, text)
        if stored == 1:
            continue
        where = f"{session_id}: {channel} input {text[:24]!r}"
        if stored > 1:
            v.doubled.append(f"{where} stored {stored} times")
            continue
        cancelled = any(text in i.text and i.status == "cancelled" for i in items)
        started = records.get(log.accepted_runs.get(text, ""))
        if cancelled or (started is not None and started.status == "aborted"):
            continue
        v.lost.append(f"{where} accepted, never run")
    for item in items:
        if item.status == "pending" and item.starts_run:
            v.lost.append(f"{session_id}: item {item.id} waits for a run that never comes")
    check_firings(log, entries, items, v)


def check_firings(
    log: SessionLog, entries: Sequence[SessionEntry], items: Sequence[QueueItem], v: Verdict
) -> None:
    """Each firing of the session's schedule delivered once: no two stored prompts of one
    firing, and no more delivered (stored or cancelled while waiting) than were fired."""
    fired = [
        e.message.scheduled.scheduled_at
        for e in entries
        if isinstance(e, MessageEntry)
        and isinstance(e.message, UserMessage)
        and e.message.scheduled is not None
        and e.message.scheduled.schedule_id == log.schedule_id
    ]
    for at, times in Counter(fired).items():
        if times > 1:
            v.doubled.append(f"{log.session.id}: the firing for {at} stored {times} times")
    cancelled = [
        i
        for i in items
        if i.status == "cancelled"
        and isinstance(i.message, UserMessage)
        and i.message.scheduled is not None
    ]
    if len(fired) + len(cancelled) > log.firings:
        v.doubled.append(
            f"{log.session.id}: {len(fired) + len(cancelled)} firings delivered of "
            f"{log.firings} fired"
        )


# ------------------------------------------------------------------------------ executions


def check_executions(
    stack: Stack, logs: Sequence[SessionLog], executions: Path, verdict: Verdict
) -> None:
    """From the tools' own records, outside the store: no tool that is not retry-safe ran
    twice; every call that ran is in a session; every call whose result says it ran did."""
    ran: Counter[str] = Counter()
    tool_of: dict[str, str] = {}
    if executions.exists():
        for line in executions.read_text().splitlines():
            call_id, tool, _ = line.split()
            ran[call_id] += 1
            tool_of[call_id] = tool
    stored: dict[str, ToolResultMessage | None] = {}
    for log in logs:
        for session_id in [log.session.id, *descendants(stack, log.session.id)]:
            entries = stack.client.sync.tree.entries(session_id)
            results = {m.tool_call_id: m for m in tool_results(entries)}
            for call in tool_calls(entries):
                stored[call.id] = results.get(call.id)
                if call.name == "bash":
                    check_bash(log, call, results.get(call.id), verdict)
    for call_id, times in ran.items():
        if times > 1 and tool_of[call_id] in NOT_RETRY_SAFE:
            verdict.doubled.append(f"{tool_of[call_id]} call {call_id} ran {times} times")
        if call_id not in stored:
            verdict.lost.append(f"{tool_of[call_id]} call {call_id} ran; no session has it")
    for call_id, result in stored.items():
        ours = result is not None and result.tool_name.startswith("soak_")
        if result is not None and ours and says_it_ran(result) and not ran[call_id]:
            verdict.lost.append(
                f"{result.tool_name} call {call_id} has a result, yet it never ran: "
                f"{text_of(result.content)[:200]!r}"
            )
    verdict.notes.append(
        f"{sum(ran.values())} tool executions recorded, "
        f"{sum(t - 1 for c, t in ran.items() if tool_of[c] == READ)} of them retry-safe reruns"
    )


def check_bash(
    log: SessionLog, call: ToolCallView, result: ToolResultMessage | None, verdict: Verdict
) -> None:
    token = next((t for t in log.bash_tokens if t in call.command), None)
    if token is None:
        return
    lines = log.executions_file.read_text().split() if log.executions_file.exists() else []
    times = lines.count(token)
    if times > 1:
        verdict.doubled.append(f"{log.session.id}: bash call {call.id} ({token}) ran {times} times")
    if result is not None and says_it_ran(result) and times == 0:
        verdict.lost.append(f"bash call {call.id} has a result, yet it never ran")


def says_it_ran(result: ToolResultMessage) -> bool:
    """A result that is not an error, nor a call held back for guidance (not an error
    either: the model re-plans)."""
    return not result.is_error and not (result.details or {}).get("runtime_guidance_replan")


def descendants(stack: Stack, session_id: str) -> list[str]:
    found = []
    for child in stack.client.sync.sessions.children(session_id):
        found += [child.id, *descendants(stack, child.id)]
    return found


# ------------------------------------------------------------------------------ usage


def check_usage(stack: Stack, session_id: str, verdict: Verdict) -> None:
    """Each run's usage (as its workflow summed it) is what its stored model calls used,
    its sub-agents' included, and the session's is its runs' together."""
    costs = stack.client.sync.sessions.costs(session_id)
    children = stack.client.sync.sessions.children(session_id)
    total = 0
    for record in stack.client.sync.runs.list(session_id):
        own = costs.of_run(record.run_id).usage
        total += own.total_tokens
        stored = own
        for child in children:
            if child.parent_run_id == record.run_id:
                stored = stored.plus(stack.client.sync.sessions.costs(child.id).session.usage)
        if stored != record.usage:
            verdict.lost.append(
                f"{session_id} run {record.run_id} ({record.status}): usage {record.usage} "
                f"recorded, {stored} stored"
            )
    if total != costs.session.usage.total_tokens:
        verdict.lost.append(
            f"{session_id}: runs' tokens add up to {total}, the session's are "
            f"{costs.session.usage.total_tokens}"
        )


# ------------------------------------------------------------------------------ the rest


def check_model(stack: Stack, logs: Sequence[SessionLog], verdict: Verdict) -> None:
    """The model (which validates requests like the real API) never got a transcript it
    would reject: a broken tool_use/tool_result pairing, an empty message."""
    for log in logs:
        for session_id in [log.session.id, *descendants(stack, log.session.id)]:
            rejected = [r for r in model_requests(stack, session_id) if r.status == 400]
            if rejected:
                verdict.lost.append(f"{session_id}: the model rejected {len(rejected)} requests")


async def check_workflows(stack: Stack, logs: Sequence[SessionLog], verdict: Verdict) -> None:
    """No session's workflow is still open (a run, a compaction)."""
    for log in logs:
        handle = stack.temporal.get_workflow_handle(session_workflow_id(log.session.id))
        description = await handle.describe()
        if description.status is not None and description.status.name == "RUNNING":
            verdict.lost.append(f"{log.session.id}: its workflow is still open")


def processes_left(marks: Sequence[str]) -> list[str]:
    """Processes (other than this one) whose command line names, or whose working folder is
    under, one of `marks` (the soak's folders): what its services and tools left running."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if any(mark in command or cwd.startswith(mark) for mark in marks):
            found.append(f"{pid}: {command.strip()[:120]} (in {cwd})")
    return found
