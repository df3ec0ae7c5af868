"""Store load: the statements each worker process costs a shared PostgreSQL store.

A throwaway PostgreSQL (the machine's binaries) with `pg_stat_statements` loaded; the
worker processes connect as a role of their own, so the bench's own reads and writes
(making sessions, sending prompts, waiting for results) are not counted. Three phases:

- idle: `--workers` worker processes, nothing to do, for `--idle` seconds;
- model calls: `--runs` prompts answered by one text reply each (one model call: the
  run's start and end counted with it, as a user's one-reply prompt costs);
- tool calls: a prompt whose model asks for `--tools` tool calls one a reply (t + 1
  model calls), and one asking for them all in one reply (2 model calls): their
  difference is t - 1 model calls, which gives the figure per model call, then the
  run's own and the figure per tool call.

The idle background (idle rate x workers x seconds) is taken off the call phases. Each
phase prints its statements by kind (first word and table) and the most frequent ones.

    python bench/store_load.py [--workers 4] [--idle 20] [--runs 5] [--tools 4]

Last line: `store_load: X statements per idle worker-second`. Target: at most 1.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections import Counter
from typing import Any

from common import bench_stack, kill, process_env, worker_polling
from postgres_server import PostgresServer, find_binaries, new_database
from processes import WORKER_ARGS, spawn_python
from sqlalchemy import create_engine, make_url, text

WORKER_ROLE = "duragent_worker"

Stats = dict[str, int]
"""Normalised statement text -> calls."""


def start_postgres() -> PostgresServer:
    binaries = find_binaries()
    if binaries is None:
        raise SystemExit("store_load needs PostgreSQL (initdb, pg_ctl)")
    server = PostgresServer(binaries)
    server.start()
    server.halt()
    conf = server.folder / "data" / "postgresql.conf"
    with conf.open("a") as out:
        out.write(
            "shared_preload_libraries = 'pg_stat_statements'\n"
            "pg_stat_statements.track_utility = on\n"
            "pg_stat_statements.max = 10000\n"
        )
    server.resume()
    return server


def admin(url: str) -> Any:
    return create_engine(url, isolation_level="AUTOCOMMIT")


def reset(url: str) -> None:
    with admin(url).connect() as c:
        c.execute(text("SELECT pg_stat_statements_reset()"))


def snapshot(url: str) -> Stats:
    """The worker role's statements in this database since the last reset."""
    engine = admin(url)
    with engine.connect() as c:
        rows = c.execute(
            text(
                "SELECT s.query, s.calls FROM pg_stat_statements s"
                " JOIN pg_roles r ON r.oid = s.userid"
                " JOIN pg_database d ON d.oid = s.dbid"
                " WHERE r.rolname = :role AND d.datname = current_database()"
            ),
            {"role": WORKER_ROLE},
        ).all()
    engine.dispose()
    stats: Counter[str] = Counter()
    for query, calls in rows:
        stats[normalised(str(query))] += int(calls)
    return dict(stats)


def normalised(query: str) -> str:
    """One text for one statement: pg_stat_statements keeps the text it first saw, with
    its constants as `$n` or, after a reset, as written (`+ 1`, `EPOCH`)."""
    query = " ".join(query.split())
    return re.sub(r"\$\d+|\b\d+\b|\bEPOCH\b", "$", query)


def kind(query: str) -> str:
    """`VERB table` of a statement (BEGIN, COMMIT, LISTEN ... alone)."""
    verb = query.split(" ", 1)[0].upper()
    table = re.search(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+\"?([a-z_]+)", query, re.IGNORECASE)
    return f"{verb} {table.group(1)}" if table and verb not in ("BEGIN", "COMMIT") else verb


def report(title: str, stats: Stats, per: float, unit: str, top: int = 12) -> float:
    total = sum(stats.values())
    print(f"\n{title}: {total} statements, {total / per:.1f} per {unit}")
    kinds: Counter[str] = Counter()
    for query, calls in stats.items():
        kinds[kind(query)] += calls
    for name, calls in kinds.most_common():
        print(f"  {calls / per:8.2f}  {name}")
    print("  most frequent:")
    for query, calls in sorted(stats.items(), key=lambda item: -item[1])[:top]:
        print(f"  {calls / per:8.2f}  {query[:150]}")
    return total / per


def minus(stats: Stats, background: dict[str, float], scale: float) -> Stats:
    """`stats` less `background` x `scale` (the idle rounds during a phase)."""
    return {
        q: max(0, round(n - background.get(q, 0) * scale))
        for q, n in stats.items()
        if n - background.get(q, 0) * scale > 0.5
    }


def tool_script(tools: int, together: bool) -> list[dict[str, Any]]:
    """`tools` tool calls, one a reply or all in one reply; then a text reply."""
    call = {"tool_use": {"name": "read", "input": {"path": "notes.txt"}}}
    steps = [{"reply": [call] * tools}] if together else [{"reply": [call]}] * tools
    return [*steps, {"reply": [{"text": "Done."}]}]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    parser.add_argument("--idle", type=float, default=20, help="idle seconds (default 20)")
    parser.add_argument("--runs", type=int, default=5, help="one-reply prompts (default 5)")
    parser.add_argument("--tools", type=int, default=4, help="tool calls (default 4)")
    parser.add_argument("--sessions", type=int, default=50, help="open idle sessions (default 50)")
    parser.add_argument(
        "--fleet", type=int, default=16, help="worker processes at the end (default 16)"
    )
    parser.add_argument(
        "--stream", type=float, default=4, help="seconds of a streamed reply (default 4)"
    )
    args = parser.parse_args()
    postgres = start_postgres()
    workers: list[Any] = []
    try:
        url = new_database(postgres.url)
        with admin(url).connect() as c:
            c.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
            c.execute(text(f"CREATE ROLE {WORKER_ROLE} LOGIN SUPERUSER"))
        worker_url = make_url(url).set(username=WORKER_ROLE).render_as_string(False)
        # The store migrated by the bench's role: the workers' statements are theirs alone.
        async with bench_stack({"conversations": {"*": []}}, database_url=url) as bench:
            client, model = bench.client, bench.model
            env = {**process_env(bench), "DURAGENT_DATABASE_URL": worker_url}
            workers = [spawn_python(WORKER_ARGS, env) for _ in range(args.workers)]
            for worker in workers:
                await worker_polling(bench, worker)
            await asyncio.sleep(2)  # past the start-up statements

            reset(url)
            began = time.monotonic()
            await asyncio.sleep(args.idle)
            idle = snapshot(url)
            idle_s = time.monotonic() - began
            idle_rate = report(
                f"idle ({args.workers} workers, {idle_s:.0f} s)",
                idle,
                args.workers * idle_s,
                "idle worker-second",
            )
            per_second = {q: n / idle_s for q, n in idle.items()}

            reset(url)
            began = time.monotonic()
            for _ in range(args.runs):
                session = await client.sessions.create()
                model.add_steps(session.id, [{"reply": [{"text": "Hello."}]}], replace=True)
                await (await client.runs.prompt(session.id, "hi")).result()
            calls = minus(snapshot(url), per_second, time.monotonic() - began)
            per_run = report("one-reply runs", calls, args.runs, "run (one model call)", top=40)

            async def one_run(steps: list[dict[str, Any]]) -> Stats:
                reset(url)
                began = time.monotonic()
                session = await client.sessions.create()
                model.add_steps(session.id, steps, replace=True)
                await (await client.runs.prompt(session.id, "read")).result()
                return minus(snapshot(url), per_second, time.monotonic() - began)

            t = args.tools
            serial = await one_run(tool_script(t, together=False))
            serial_n = sum(serial.values())
            together = await one_run(tool_script(t, together=True))
            together_n = sum(together.values())
            # serial: run + (t+1) model + t tool; together: run + 2 model + t tool.
            model_call = (serial_n - together_n) / (t - 1)
            run_base = per_run - model_call
            tool_call = (together_n - run_base - 2 * model_call) / t
            report(f"a run of {t} tool calls in one reply", together, t, "tool call")
            one_call = {
                q: (serial.get(q, 0) - together.get(q, 0)) / (t - 1)
                for q in set(serial) | set(together)
            }
            print(f"\na model call, statement by statement ({model_call:.1f}):")
            for query, calls in sorted(one_call.items(), key=lambda item: -item[1]):
                if abs(calls) >= 0.05:
                    print(f"  {calls:8.2f}  {query[:150]}")

            # The issue's own measure: a run of seven model calls, all in, per call.
            seven = await one_run(tool_script(6, together=False))
            seven_per_call = report("a run of seven model calls", seven, 7, "model call")

            # Streaming: deltas reach readers through the store, one write a flush.
            stream_s = args.stream
            chunks = 40  # the offline model streams 20 characters a delta
            words = [{"text": "word " * (4 * chunks)}]
            streamed = await one_run(
                [{"reply": words, "chunk_delay_ms": int(stream_s * 1000 / chunks)}]
            )
            plain = await one_run([{"reply": words}])
            stream_rate = (sum(streamed.values()) - sum(plain.values())) / stream_s
            report(
                "its stream, on top of the same reply unstreamed",
                minus(streamed, {q: float(n) for q, n in plain.items()}, 1.0),
                stream_s,
                "streamed second",
                top=8,
            )
            print(
                f"\na reply streamed over {stream_s:.0f} s: {sum(streamed.values())}"
                f" statements, {sum(plain.values())} unstreamed:"
                f" {stream_rate:.1f} a streamed second"
            )

            # Open idle sessions: each has run once and waits for its next prompt.
            opened = []
            for _ in range(args.sessions):
                session = await client.sessions.create()
                model.add_steps(session.id, [{"reply": [{"text": "Hi."}]}], replace=True)
                opened.append(await client.runs.prompt(session.id, "hi"))
            for handle in opened:
                await handle.result()
            await asyncio.sleep(2)  # past the runs' ends
            reset(url)
            began = time.monotonic()
            await asyncio.sleep(args.idle)
            waited = time.monotonic() - began
            # The workers' own rounds, by count (a statement's normalised text can
            # differ between two snapshots of pg_stat_statements).
            sessions_stats = snapshot(url)
            background = idle_rate * args.workers * waited
            per_session = max(0.0, sum(sessions_stats.values()) - background) / (
                args.sessions * waited
            )
            print(
                f"\n{args.sessions} open idle sessions, {waited:.0f} s:"
                f" {sum(sessions_stats.values())} statements, the workers' rounds"
                f" {background:.0f}: {per_session:.2f} per open session-second"
            )

            # The fleet: more worker processes on the same store, idle.
            more = [spawn_python(WORKER_ARGS, env) for _ in range(args.fleet - len(workers))]
            workers += more
            for worker in more:
                await worker_polling(bench, worker, timeout=180)
            await asyncio.sleep(2)
            reset(url)
            began = time.monotonic()
            await asyncio.sleep(args.idle)
            fleet_s = time.monotonic() - began
            fleet_rate = report(
                f"idle ({len(workers)} workers, {fleet_s:.0f} s)",
                snapshot(url),
                len(workers) * fleet_s,
                "idle worker-second",
            )
            print(
                f"\n{len(workers)} workers: {fleet_rate:.2f} statements per idle"
                f" worker-second against {idle_rate:.2f} with {args.workers}"
                f" (ratio {fleet_rate / idle_rate:.2f}: 1.00 is linear in the workers)"
            )
            print(
                f"\nper open idle session-second: {per_session:.2f};"
                f" per one-reply run: {per_run:.1f}; per model call: {model_call:.1f};"
                f" per tool call: {tool_call:.1f}; a run's own: {run_base:.1f};"
                f" per model call of a seven-call run, all in: {seven_per_call:.1f};"
                f" a streamed second: {stream_rate:.1f}"
            )
    finally:
        for worker in workers:
            kill(worker)
        postgres.stop()
    print(f"store_load: {idle_rate:.1f} statements per idle worker-second")


if __name__ == "__main__":
    asyncio.run(main())
