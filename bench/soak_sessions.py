"""The soak's sessions: each one a user (and a program) working with a session, run after run,
while the services fail under it.

Every run plays a script drawn from the session's seeded dice: tool turns (retry-safe and
not), parallel batches, a bash call, a sub-agent now and then, a call that waits for an
approval now and then; while it works the user steers, follows up, turns queued input into
guidance, approves, and now and then aborts, and input comes in by every channel that
sends it as a chat box does (`inputs.send`, which the page, the API, AG-UI and the command
line call; a signed webhook through a trigger; a schedule's firing): each is taken by the
run it was sent during, or starts the next run when that one ends, or (a firing that
reaches the session only after that run has ended) starts a run itself: the soak follows
those runs too. After its second run a session is compacted.

What the soak sent is written down here (`SessionLog`, `RunLog`): the checks compare it
with what the store and the histories say at the end. A client call that fails because a
service is down is tried again, as a patient user would, with the same ids (a resent steer
carries its first id, so it can only be delivered once).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import random
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from soak_tools import DEPLOY, READ, WRITE
from temporalio.client import ScheduleActionExecutionStartWorkflow, WorkflowFailureError

from duragent.client.api import DuragentClient
from duragent.client.errors import (
    ApprovalRefused,
    QueueItemNotPending,
    SessionBusy,
    SessionIdle,
)
from duragent.client.run_control import RunHandle
from duragent.domain.approvals import ApprovalPolicy, ApprovalRule
from duragent.domain.runs import RunResult
from duragent.domain.subagents import DELEGATE_TOOL
from duragent.domain.trigger_signatures import DeliveryReplayed
from duragent.offline_model import OfflineModelServer
from duragent.store.records import SessionRecord

T = TypeVar("T")

POLICY = ApprovalPolicy(rules=(ApprovalRule(tool=DEPLOY, action="ask"),), default="allow")
"""Deploys wait for the soak's approval; every other call runs."""

SUMMARY_STEPS: list[dict[str, Any]] = [
    # A compaction's (and a split turn's) summary requests, answered whenever they come.
    {"match": "You are compacting", "repeat": True, "reply": [{"text": "## Goal\nSoak."}]},
    {"match": "beginning of a turn", "repeat": True, "reply": [{"text": "Working."}]},
]
SUBAGENT_STEPS: list[dict[str, Any]] = [
    {"reply": [{"text": "Counting."}, {"tool_use": {"name": READ, "input": {"name": "sub"}}}]},
    {"reply": [{"text": "Sub-agent done."}]},
]
"""Every sub-agent's session plays its own copy (the script's "*" steps)."""

SCHEDULED = "Scheduled check-in."
"""The prompt of every session's schedule; each firing is marked with when it fired for."""

FINAL_ERRORS = (
    SessionIdle,
    SessionBusy,
    QueueItemNotPending,
    ApprovalRefused,
    WorkflowFailureError,  # a run's workflow failed: its outcome will not change
)
"""Answers that retrying cannot change: the caller decides what they mean."""


@dataclass
class RunLog:
    prompt: str
    """The soak's prompt ("" for a run the soak did not start: one that input sent while
    the run before was open started)."""
    run_id: str | None = None
    result: RunResult | None = None
    client_error: str | None = None
    """Why the soak never learned the run's outcome (it kept failing to ask)."""
    steers: dict[str, bool] = field(default_factory=dict)
    """Steering item id -> whether the run accepted it (the call returned)."""
    follow_ups: dict[str, bool] = field(default_factory=dict)
    guided: list[str] = field(default_factory=list)
    """Queue items the run accepted as guidance."""
    aborted: bool = False
    """The soak asked for the abort (and the run was still open)."""
    approvals: int = 0


@dataclass
class SessionLog:
    index: int
    session: SessionRecord
    runs: list[RunLog] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    """Text of each queued message (steer, follow-up, next-turn, guidance) by item id."""
    items: list[str] = field(default_factory=list)
    """Input-queue items (next turn, guidance) the soak stored."""
    bash_tokens: list[str] = field(default_factory=list)
    compactions: int = 0
    compaction_errors: list[str] = field(default_factory=list)
    accepted: dict[str, str] = field(default_factory=dict)
    """Input a channel accepted (its unique text -> the channel): each must run once,
    unless an abort cancelled it while it waited."""
    accepted_runs: dict[str, str] = field(default_factory=dict)
    """Accepted input that started a run itself (the session was idle): text -> run id."""
    trigger: tuple[str, str] | None = None
    """The session's webhook trigger: its id and its secret."""
    schedule_id: str | None = None
    firings: int = 0
    """Firings of the session's schedule the soak asked for."""
    firings_delivered: int = 0
    """Of those, how many the soak has seen delivered (`firings_delivered`)."""

    @property
    def executions_file(self) -> Path:
        return Path(self.session.workspace) / "executions.log"


class SessionServices(Protocol):
    """What a session's driver uses of the soak's services (`soak_stack.Services`)."""

    @property
    def client(self) -> DuragentClient: ...

    @property
    def model(self) -> OfflineModelServer: ...


@dataclass
class Driving:
    """What every session driver shares."""

    services: SessionServices
    seed: int
    end: float
    """time.monotonic() after which no run starts."""
    give_up: float
    """time.monotonic() after which a client call is no longer tried again."""
    client_errors: Counter[str] = field(default_factory=Counter)
    """Client calls that failed and were tried again, by what and why."""


async def patiently(driving: Driving, what: str, call: Callable[[], Awaitable[T]]) -> T:
    """`call()`, tried again while a service is down (backing off, up to `give_up`)."""
    delay = 0.5
    while True:
        try:
            return await call()
        except FINAL_ERRORS:
            raise
        except Exception as err:
            driving.client_errors[f"{what}: {type(err).__name__}"] += 1
            if time.monotonic() > driving.give_up:
                raise
        await asyncio.sleep(delay)  # a retry's back-off, not a wait for a state
        delay = min(delay * 2, 5.0)


# ------------------------------------------------------------------------------ scripts


def tool_use(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_use": {"name": tool, "input": arguments}}


def plan_turns(dice: random.Random, log: SessionLog, run: int) -> tuple[list[Any], bool]:
    """The model's replies for one run, and whether one of its calls waits for approval."""
    replies: list[dict[str, Any]] = []
    asks = False
    for turn in range(dice.randint(1, 4)):
        kinds = dice.choices(
            ["write", "read", "bash", "batch", "deploy", "delegate"],
            weights=[3, 3, 2, 3, 1, 1],
        )
        calls: list[dict[str, Any]] = []
        for kind in (
            kinds
            if kinds[0] != "batch"
            else dice.choices(["write", "read", "bash"], k=dice.randint(2, 4))
        ):
            seconds = round(dice.uniform(0.2, 2.5), 2)
            name = f"r{run}t{turn}c{len(calls)}"
            if kind == "write":
                calls.append(tool_use(WRITE, name=name, seconds=seconds))
            elif kind == "read":
                calls.append(tool_use(READ, name=name, seconds=seconds))
            elif kind == "deploy":
                calls.append(tool_use(DEPLOY, target=name, seconds=seconds))
                asks = True
            elif kind == "delegate":
                calls.append(tool_use(DELEGATE_TOOL, prompt=f"Count the records ({name})."))
            else:
                token = f"b{uuid.uuid4().hex[:16]}"
                log.bash_tokens.append(token)
                command = f"echo {token} >> executions.log; sleep {seconds}"
                calls.append(tool_use("bash", command=command))
        delay_ms = dice.randint(100, 1500)
        replies.append({"delay_ms": delay_ms, "reply": [{"text": f"Turn {turn + 1}."}, *calls]})
    replies.append({"reply": [{"text": f"Run {run} done."}]})
    # More replies than the tool turns need: steering and follow-ups add turns, and a
    # retried model call (after a kill) plays the next reply.
    replies += [{"reply": [{"text": "Noted."}]} for _ in range(3)]
    return [*SUMMARY_STEPS, *replies], asks


# ------------------------------------------------------------------------------ a run


async def one_run(driving: Driving, log: SessionLog, dice: random.Random) -> None:
    services, client = driving.services, driving.services.client
    session_id = log.session.id
    await settle(driving, log)  # a run that input sent at the end of the last one started
    number = len(log.runs) + 1
    steps, asks = plan_turns(dice, log, number)
    services.model.add_steps(session_id, steps, replace=True)
    if dice.random() < 0.25:  # input queued while idle: the run takes it first
        text = f"Next-turn note {uuid.uuid4().hex[:8]} for run {number}."
        item = await patiently(
            driving, "next_turn", lambda: client.inputs.next_turn(session_id, text)
        )
        log.items.append(item.id)
        log.texts[item.id] = text
    run = RunLog(prompt=f"Run {number} of session {log.index}: work on part {number}.")
    log.runs.append(run)
    handle: RunHandle | None = None
    try:
        handle = await patiently(
            driving, "prompt", lambda: client.runs.prompt(session_id, run.prompt)
        )
        run.run_id = handle.run_id
    except SessionBusy:
        pass  # an attempt whose answer was lost with the server did start it

    done = asyncio.Event()
    actions = [
        (0.35, steer),
        (0.3, follow_up),
        (0.35, guide),
        (0.1, abort),
        (0.3, chat),
        (0.2, webhook),
        (0.1, fire_schedule),
    ]
    tasks = [
        asyncio.create_task(action(driving, log, run, done, dice.uniform(0.5, 10.0)))
        for chance, action in actions
        if dice.random() < chance
    ]
    if number == 1:
        # The first run of each session sends input at once by one channel, the sessions
        # taking them in turn: even a short soak takes input by every channel.
        channel = CHANNELS[log.index % len(CHANNELS)]
        tasks.append(asyncio.create_task(channel(driving, log, run, done, 0.0)))
    if asks:
        tasks.append(asyncio.create_task(approve(driving, log, run, done)))

    async def outcome() -> RunResult:
        if handle is not None:
            return await handle.result()
        return await client.runs.wait(session_id)

    try:
        run.result = await patiently(driving, "run result", outcome)
        run.run_id = run.result.run_id
    except Exception as err:
        run.client_error = f"{type(err).__name__}: {err}"
    finally:
        done.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    await settle(driving, log)


async def learn_result(driving: Driving, session_id: str, run: RunLog, run_id: str) -> None:
    client = driving.services.client
    try:
        run.result = await patiently(
            driving, "run result", lambda: client.runs.wait(session_id, run_id)
        )
    except Exception as err:
        run.client_error = f"{type(err).__name__}: {err}"


async def settle(driving: Driving, log: SessionLog) -> None:
    """Wait for the runs that input sent meanwhile started (each starts when the one
    before ends, or by itself: a firing delivered once that one had ended), and log them,
    until the session is idle. Their deploys are approved as the soak's own runs' are."""
    done = asyncio.Event()
    approver = asyncio.create_task(approve(driving, log, RunLog(prompt=""), done))
    try:
        await firings_delivered(driving, log)
        await settled(driving, log)
    finally:
        done.set()
        await approver


async def firings_delivered(driving: Driving, log: SessionLog) -> None:
    """Wait until every firing the soak asked for has been delivered (its ScheduledPrompt
    workflow has ended). Triggering only asks the schedule to fire: its workflow starts a
    moment later, so one asked for near the end of a run may reach the session after that
    run has ended, and start a run of its own, which `settled` must then find."""
    if log.schedule_id is None or log.firings <= log.firings_delivered:
        return
    temporal = driving.services.client.temporal
    schedule = temporal.get_schedule_handle(log.schedule_id)
    delay = 0.05
    while True:
        info = (await patiently(driving, "schedule", schedule.describe)).info
        for action in info.running_actions:
            if isinstance(action, ScheduleActionExecutionStartWorkflow):
                firing = temporal.get_workflow_handle(action.workflow_id)
                # A firing whose delivery ran out of time delivered nothing: not waited for.
                with contextlib.suppress(WorkflowFailureError):
                    await patiently(driving, "firing", firing.result)
        # A firing counts once its workflow has started (or the schedule dropped it as an
        # overlap); the ones running when they were counted have ended by now.
        if info.num_actions + info.num_actions_skipped_overlap >= log.firings:
            log.firings_delivered = log.firings
            return
        if time.monotonic() > driving.give_up:
            return
        # Not started yet: the schedule has yet to act on the trigger, and until it does
        # there is nothing to wait on but its count.
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def settled(driving: Driving, log: SessionLog) -> None:
    client, session_id = driving.services.client, log.session.id
    while True:
        records = await patiently(driving, "runs", lambda: client.runs.list(session_id))
        known = {run.run_id for run in log.runs}
        new = [record for record in reversed(records) if record.run_id not in known]
        for record in new:
            run = RunLog(prompt="", run_id=record.run_id)
            log.runs.append(run)
            await learn_result(driving, session_id, run, record.run_id)
        if new:
            continue
        handle = await patiently(driving, "open run", lambda: client.workflows.open_run(session_id))
        if handle is None:
            return
        try:  # a run whose start is under way: once it is stored, it is logged above
            await patiently(driving, "run result", lambda: client.runs.wait(session_id))
        except Exception as err:
            driving.client_errors[f"settle: {type(err).__name__}"] += 1
            if time.monotonic() > driving.give_up:
                return


async def later(done: asyncio.Event, delay: float) -> bool:
    """Wait `delay` seconds into the run; False when the run ended first."""
    try:
        await asyncio.wait_for(done.wait(), delay)
    except TimeoutError:
        return True
    return False


async def steer(
    driving: Driving, log: SessionLog, run: RunLog, done: asyncio.Event, delay: float
) -> None:
    await send_queued(driving, log, run.steers, done, delay, "steer")


async def follow_up(
    driving: Driving, log: SessionLog, run: RunLog, done: asyncio.Event, delay: float
) -> None:
    await send_queued(driving, log, run.follow_ups, done, delay, "follow_up")


async def send_queued(
    driving: Driving,
    log: SessionLog,
    sent: dict[str, bool],
    done: asyncio.Event,
    delay: float,
    kind: str,
) -> None:
    if not await later(done, delay):
        return
    inputs = driving.services.client.inputs
    item_id = uuid.uuid4().hex
    text = f"{kind} {item_id[:8]}: also look at part {len(sent) + 1}."
    log.texts[item_id] = text
    sent[item_id] = False
    send = inputs.steer if kind == "steer" else inputs.follow_up
    try:
        await patiently(driving, kind, lambda: send(log.session.id, text, item_id=item_id))
        sent[item_id] = True
    except SessionIdle:
        pass  # the run ended first: not sent (unless an earlier try got through)


async def guide(
    driving: Driving, log: SessionLog, run: RunLog, done: asyncio.Event, delay: float
) -> None:
    """Input queued while the run works, then turned into guidance for it (as the page's
    引导 chip does). Refused once the run has ended: it stays queued for the next run."""
    if not await later(done, delay):
        return
    inputs, session_id = driving.services.client.inputs, log.session.id
    text = f"Please also keep a note of part {uuid.uuid4().hex[:8]}."
    item = await patiently(driving, "next_turn", lambda: inputs.next_turn(session_id, text))
    log.items.append(item.id)
    log.texts[item.id] = text
    try:
        await patiently(driving, "guide", lambda: inputs.guide(session_id, item.id))
        run.guided.append(item.id)
    except (SessionIdle, QueueItemNotPending):
        pass


async def chat(
    driving: Driving, log: SessionLog, run: RunLog, done: asyncio.Event, delay: float
) -> None:
    """Input sent as a chat box sends it (the page, the API, AG-UI, `duragent send`): the
    open run's successor takes it, or it starts a run itself when the run just ended."""
    if not await later(done, delay):
        return
    text = f"Chat {uuid.uuid4().hex[:12]}: also see to part {len(log.accepted) + 1}."
    inputs, session_id = driving.services.client.inputs, log.session.id
    item_id = uuid.uuid4().hex  # resent with its id: started or queued once
    try:
        sent = await patiently(
            driving, "send", lambda: inputs.start_or_queue(session_id, text, item_id=item_id)
        )
    except SessionBusy:
        return  # busy throughout (with what is no run): refused, nothing accepted
    log.accepted[text] = "chat"
    if isinstance(sent, RunHandle):
        log.accepted_runs[text] = sent.run_id


async def webhook(
    driving: Driving, log: SessionLog, run: RunLog, done: asyncio.Event, delay: float
) -> None:
    """A signed delivery of the session's trigger, as GitHub sends one."""
    if not await later(done, delay) or log.trigger is None:
        return
    trigger_id, secret = log.trigger
    token = f"hook{uuid.uuid4().hex[:12]}"
    body = json.dumps({"token": token}).encode()
    signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "content-type": "application/json",
        "x-github-event": "push",
        "x-github-delivery": token,
        "x-hub-signature-256": f"sha256={signature}",
    }
    triggers = driving.services.client.triggers
    try:
        delivered = await patiently(
            driving, "webhook", lambda: triggers.receive(trigger_id, headers, body)
        )
        if delivered.run_id is not None:
            log.accepted_runs[token] = delivered.run_id
    except DeliveryReplayed:
        pass  # an earlier try got through, its answer lost with a service
    except SessionBusy:
        return
    log.accepted[token] = "webhook"


async def fire_schedule(
    driving: Driving, log: SessionLog, run: RunLog, done: asyncio.Event, delay: float
) -> None:
    """A firing of the session's (paused) schedule, asked for while the run works: the
    worker delivers it as a chat box's input (`busy: queue`)."""
    if not await later(done, delay) or log.schedule_id is None:
        return
    schedules, schedule_id = driving.services.client.schedules, log.schedule_id
    try:
        await patiently(driving, "fire", lambda: schedules.trigger(schedule_id))
        log.firings += 1
    except Exception as err:  # gave up: not fired, or fired with its answer lost
        driving.client_errors[f"fire: {type(err).__name__}"] += 1


CHANNELS = (chat, webhook, fire_schedule)
"""The channels that send input as a chat box does."""


async def abort(
    driving: Driving, log: SessionLog, run: RunLog, done: asyncio.Event, delay: float
) -> None:
    if not await later(done, delay):
        return
    try:
        await patiently(
            driving, "abort", lambda: driving.services.client.runs.abort(log.session.id)
        )
        run.aborted = True
    except SessionIdle:
        pass


async def approve(driving: Driving, log: SessionLog, run: RunLog, done: asyncio.Event) -> None:
    """The person who approves deploys: looks at the waiting calls every second or so."""
    approvals = driving.services.client.approvals
    while not done.is_set():
        try:
            for waiting in await approvals.pending(log.session.id):
                await approvals.approve(log.session.id, waiting.call_id, by="soak")
                run.approvals += 1
        except Exception as err:  # a service is down, or the call was decided already
            driving.client_errors[f"approve: {type(err).__name__}"] += 1
        await later(done, 1.0)


# ------------------------------------------------------------------------------ a session


async def drive(
    driving: Driving, index: int, host: str, workspaces: Path, logs: list[SessionLog]
) -> None:
    """One session, run after run until the soak's time is up; its log joins `logs` as
    soon as the session exists (a driver cancelled at the end leaves what it did)."""
    dice = random.Random(f"{driving.seed}/session/{index}")
    client = driving.services.client
    record = await patiently(
        driving,
        "create",
        lambda: client.sessions.create(host=host, workspace=workspaces / f"s{index}"),
    )
    log = SessionLog(index, record)
    logs.append(log)
    await patiently(driving, "set_policy", lambda: client.approvals.set_policy(record.id, POLICY))
    log.trigger = await session_trigger(driving, record.id, f"soak-{index}")
    log.schedule_id = await session_schedule(driving, record.id)
    while time.monotonic() < driving.end:
        await one_run(driving, log, dice)
        if len(log.runs) == 2:
            await compact(driving, log)
        await asyncio.sleep(dice.uniform(0, 2))  # a person reading the answer


async def session_trigger(driving: Driving, session_id: str, name: str) -> tuple[str, str]:
    """The session's webhook trigger and its secret (a try whose answer was lost made it:
    its secret is rotated, the one time a secret is shown again)."""
    triggers = driving.services.client.triggers

    async def made() -> tuple[str, str]:
        for found in await triggers.list(every=True):
            if found.name == name:
                again = await triggers.rotate_secret(found.id)
                return again.trigger.id, again.secret
        added = await triggers.add(name, "Delivery {token}.", session_id=session_id)
        return added.trigger.id, added.secret

    return await patiently(driving, "trigger", made)


async def session_schedule(driving: Driving, session_id: str) -> str:
    """The session's schedule, paused: the soak fires it now and then."""
    schedules = driving.services.client.schedules

    async def made() -> str:
        for found in await schedules.list(session_id=session_id):
            return found.id
        return (await schedules.add(session_id, SCHEDULED, every="24h", paused=True)).id

    return await patiently(driving, "schedule", made)


async def compact(driving: Driving, log: SessionLog) -> None:
    try:
        await patiently(
            driving, "compact", lambda: driving.services.client.tree.compact(log.session.id)
        )
        log.compactions += 1
    except Exception as err:
        log.compaction_errors.append(f"{type(err).__name__}: {err}")
