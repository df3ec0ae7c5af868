"""Nothing lost under sustained chaos: sessions at work while every process fails at random.

Three worker processes as three hosts, the store on PostgreSQL, the Temporal dev server and
the offline model answering with random latency and random faults (529, 500, a stream
dropped part-way, a slow first byte). `--sessions` sessions work at once for `--minutes`,
each run a mix of tool turns (retry-safe and not), parallel batches, bash, a sub-agent now
and then, an approval now and then (given by the soak), steering, follow-ups and queued
input turned into guidance, an abort now and then, and a compaction per session. Meanwhile,
about every `--chaos-every` seconds, one service fails: a worker SIGKILLed (and restarted)
or SIGSTOPped past its heartbeat timeout (and continued), the dev server SIGTERMed or
SIGKILLed (and started again on the same file and port), PostgreSQL stopped at once (and
started again).

Then, with every service up, the soak waits for the runs to end and checks, from the store,
the workflow histories and the tools' own records of what they ran (a file outside the
store): every run ended (completed, aborted, or failed with a reason a person can read); no
entry lost or stored twice; every tool call with exactly one result; no tool that is not
retry-safe run twice; every queued message delivered at most once; every input accepted by
a channel (chat, webhook, schedule) run exactly once, none left waiting, and no run but the
soak's own and those its input started; runs' usage adds up to what their stored model calls
used, and sessions' to their runs'; no process left behind.

    python bench/soak.py [--sessions 30] [--minutes 10] [--seed N] [--chaos-every 20]

Last line: `soak: L lost, D doubled, F failed of R runs, K kills`. Target: 0 lost, 0
doubled, 0 failed (runs that fail on an injected model fault are listed apart), at least
100 runs and 10 kills with the defaults. A failing soak replays with its `--seed` (the same
scripts, model faults and failure schedule; the timing between processes is the machine's).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "faults")]  # the stack's processes and the checks

from soak_chaos import chaos  # noqa: E402
from soak_checks import (  # noqa: E402
    Verdict,
    check_accepted,
    check_executions,
    check_model,
    check_queue,
    check_runs,
    check_tree,
    check_usage,
    check_workflows,
    descendants,
    processes_left,
)
from soak_sessions import SUBAGENT_STEPS, Driving, SessionLog, drive  # noqa: E402
from soak_stack import Services, soak_services  # noqa: E402
from support import Stack  # noqa: E402

from duragent.offline_model import Chaos, Script  # noqa: E402

DRIVER_STOP_S = 60.0
"""How long a session's driver may take to stop once cancelled."""


@dataclass
class SoakOptions:
    sessions: int = 30
    minutes: float = 10.0
    seed: int = 0
    chaos_every_s: float = 20.0
    heartbeat_timeout_s: float = 5.0
    drain_s: float = 300.0
    """How long the runs open at the end may take to end, every service up."""
    model_faults: float = 0.09
    """The chance of a fault (529, 500 or a dropped stream, a third each) per model call."""
    keep: bool = False
    """Keep the soak's folder (the workers' logs, the workspaces, the dev server's file)
    and PostgreSQL's (start it with `pg_ctl -D FOLDER/data start` to read the store)."""


@dataclass
class SoakReport:
    options: SoakOptions
    verdict: Verdict
    kills: Counter[str] = field(default_factory=Counter)
    chaos_log: list[str] = field(default_factory=list)
    client_errors: Counter[str] = field(default_factory=Counter)
    left_behind: list[str] = field(default_factory=list)
    worker_exits: list[str] = field(default_factory=list)
    """Workers that exited by themselves (started again, as a supervisor would)."""
    killed_on_stop: list[str] = field(default_factory=list)
    """Workers that did not stop on SIGTERM within 30 s."""
    compactions: int = 0
    accepted: Counter[str] = field(default_factory=Counter)
    """Input the channels accepted, by channel (and the schedule's firings)."""
    queued_runs: int = 0
    """Runs that input sent while the run before was open started."""
    seconds: float = 0.0

    @property
    def summary(self) -> str:
        v = self.verdict
        return (
            f"soak: {len(v.lost)} lost, {len(v.doubled)} doubled, {len(v.failed)} failed "
            f"of {v.runs} runs, {sum(self.kills.values())} kills"
        )


def offline_script(options: SoakOptions) -> Script:
    fault = options.model_faults / 3
    return Script(
        conversations={"*": SUBAGENT_STEPS},  # parent sessions get their steps per run
        chaos=Chaos(
            seed=options.seed,
            latency_ms=(20, 400),
            slow_first_byte=0.03,
            slow_first_byte_ms=4000,
            overloaded=fault,
            server_error=fault,
            dropped=fault,
        ),
    )


async def soak(options: SoakOptions, say: Callable[[str], None] = print) -> SoakReport:
    began = time.monotonic()
    say(f"soak: seed {options.seed} (replay with --seed {options.seed})")
    marks: list[str] = []
    script = offline_script(options)
    async with soak_services(script, options.heartbeat_timeout_s, options.keep) as services:
        if options.keep:
            say(f"soak: its folder is {services.home}, the store's {services.postgres.folder}")
        marks = [str(services.home), str(services.postgres.folder)]
        report = SoakReport(options, Verdict())
        start = time.monotonic()
        end = start + options.minutes * 60
        driving = Driving(services, options.seed, end, end + options.drain_s)
        logs: list[SessionLog] = []
        drivers = [
            asyncio.create_task(drive(driving, i, host.name, host.workspaces, logs))
            for i in range(options.sessions)
            for host in [services.hosts[i % len(services.hosts)]]
        ]
        dice = random.Random(f"{options.seed}/chaos")
        supervising = asyncio.Event()
        supervisor = asyncio.create_task(services.supervise(supervising, start))
        await chaos(services, dice, end, options.chaos_every_s, report.kills, report.chaos_log)
        say(f"soak: {time.monotonic() - start:.0f} s of chaos over; waiting for the runs to end")
        _, stuck = await asyncio.wait(
            drivers, timeout=max(0.0, driving.give_up - time.monotonic()) + 30
        )
        for task in stuck:
            task.cancel()
        # A driver blocked where a cancel cannot reach (a store call in a thread that never
        # returns) is reported with where it is, not waited for forever.
        _, hung = await asyncio.wait(drivers, timeout=DRIVER_STOP_S)
        for task in hung:
            where = "".join(f"\n    {frame}" for frame in task.get_stack(limit=8))
            report.verdict.failed.append(f"a session's driver did not stop:{where}")
        supervising.set()
        await supervisor
        report.worker_exits = services.exits
        for task in drivers:
            if task.done() and not task.cancelled() and task.exception() is not None:
                report.verdict.failed.append(f"a session's driver failed: {task.exception()!r}")
        report.client_errors = driving.client_errors
        report.compactions = sum(log.compactions for log in logs)
        for log in logs:
            report.accepted.update(log.accepted.values())
            report.accepted["schedule firing"] += log.firings
            report.queued_runs += sum(1 for run in log.runs if not run.prompt)
        await verdict_of(services, logs, report.verdict)
        report.killed_on_stop = services.stop_workers()
    report.left_behind = processes_left(marks)
    for line in report.left_behind:
        report.verdict.lost.append(f"process left behind: {line}")
    report.seconds = time.monotonic() - began
    return report


async def verdict_of(services: Services, logs: list[SessionLog], verdict: Verdict) -> None:
    stack = Stack(
        settings=services.settings,
        db=services.db,
        temporal=services.client.temporal,
        model=services.model,
        client=services.client,
    )
    for log in logs:
        for session_id in [log.session.id, *descendants(stack, log.session.id)]:
            entries = check_tree(stack, session_id, verdict)
            check_usage(stack, session_id, verdict)
            if session_id == log.session.id:
                check_runs(stack, log, verdict)
                check_queue(stack, log, entries, verdict)
                check_accepted(stack, log, entries, verdict)
    check_executions(stack, logs, services.executions, verdict)
    check_model(stack, logs, verdict)
    await check_workflows(stack, logs, verdict)


def print_report(report: SoakReport) -> None:
    v, o = report.verdict, report.options
    print(
        f"{o.sessions} sessions for {o.minutes:g} min, 3 hosts, PostgreSQL store, "
        f"heartbeat timeout {o.heartbeat_timeout_s:g} s, a failure about every "
        f"{o.chaos_every_s:g} s, model faults {o.model_faults:.0%} of calls "
        f"(and slow first bytes); {report.seconds:.0f} s in all"
    )
    print("failures injected:")
    for line in report.chaos_log:
        print(f"  {line}")
    if report.worker_exits:
        print("workers that exited by themselves (started again):")
        for line in report.worker_exits:
            print(f"  {line}")
    print("kills by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(report.kills.items())))
    print("runs by outcome: " + ", ".join(f"{k} {n}" for k, n in sorted(v.statuses.items())))
    print(f"compactions: {report.compactions}")
    accepted = ", ".join(f"{kind} {n}" for kind, n in sorted(report.accepted.items()))
    print(f"input accepted while busy: {accepted}; runs it started: {report.queued_runs}")
    if report.client_errors:
        print("client calls tried again while a service was down:")
        for what, count in report.client_errors.most_common():
            print(f"  {count:4d}  {what}")
    for note in v.notes:
        print(note)
    if report.killed_on_stop:
        print(f"workers that needed SIGKILL to stop: {', '.join(report.killed_on_stop)}")
    for title, lines in (
        ("failed on an injected model fault (meant to)", v.faulted),
        ("LOST", v.lost),
        ("DOUBLED", v.doubled),
        ("FAILED", v.failed),
    ):
        if lines:
            print(f"{title} ({len(lines)}):")
            for line in lines[:30]:
                print(f"  {line}")
    print(report.summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = SoakOptions()
    parser.add_argument("--sessions", type=int, default=defaults.sessions)
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--chaos-every", type=float, default=defaults.chaos_every_s)
    parser.add_argument("--heartbeat-timeout", type=float, default=defaults.heartbeat_timeout_s)
    parser.add_argument("--model-faults", type=float, default=defaults.model_faults)
    parser.add_argument("--keep", action="store_true", help="keep the logs and workspaces")
    args = parser.parse_args()
    options = SoakOptions(
        sessions=args.sessions,
        minutes=args.minutes,
        seed=args.seed if args.seed is not None else random.randrange(1_000_000),
        chaos_every_s=args.chaos_every,
        heartbeat_timeout_s=args.heartbeat_timeout,
        model_faults=args.model_faults,
        keep=args.keep,
    )
    report = asyncio.run(soak(options))
    print_report(report)
    verdict = report.verdict
    # A script or an operator's loop can tell a clean soak from one that lost something.
    sys.exit(1 if verdict.lost or verdict.doubled or verdict.failed else 0)


if __name__ == "__main__":
    main()
