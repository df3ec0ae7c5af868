"""Store growth: the rows and bytes a model call and a tool call leave in a PostgreSQL
store, and what `duragent prune` takes back.

A throwaway PostgreSQL (the machine's binaries), a dev server, the offline model and
`--workers` worker processes. Three phases, each in `--sessions` sessions:

- short replies (after as many again, so that every table has its first pages): `--runs`
  runs of one text reply ("Done.": a model call each);
- tool calls: `--runs` runs of a `read` tool call, then a text reply (two model calls and
  a tool call each);
- long replies: `--runs` runs of one reply of `--reply-chars` characters, against the
  short ones: how many times each character of a reply is stored.

Each phase prints the rows per model call by table, and the bytes: the growth of
`pg_total_relation_size` (table, indexes and TOAST) of every table, after a VACUUM, per
model call. Then `duragent prune --older-than 0s` deletes every session, and the rows
left are counted (PostgreSQL reuses the freed space; only VACUUM FULL gives it back to
the file system).

    python bench/store_growth.py [--runs 200] [--sessions 10] [--workers 2]

Last line: `store_growth: X bytes per model call (short replies)`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from typing import Any

from common import bench_stack, kill, process_env, worker_polling
from postgres_server import PostgresServer, find_binaries, new_database
from processes import WORKER_ARGS, spawn_python
from sqlalchemy import create_engine, text

from duragent.client.retention import Retention
from duragent.store.tables import Base

TABLES = sorted(Base.metadata.tables)


def measure(url: str) -> tuple[dict[str, int], dict[str, int]]:
    """Rows and bytes (table, indexes, TOAST) per table, after a VACUUM."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(text("VACUUM"))
        rows = {t: int(c.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in TABLES}
        size = {
            t: int(c.execute(text(f"SELECT pg_total_relation_size('{t}')")).scalar_one())
            for t in TABLES
        }
    engine.dispose()
    return rows, size


def report(
    title: str,
    before: tuple[dict[str, int], dict[str, int]],
    after: tuple[dict[str, int], dict[str, int]],
    calls: int,
) -> float:
    rows = {t: after[0][t] - before[0][t] for t in TABLES}
    size = {t: after[1][t] - before[1][t] for t in TABLES}
    total = sum(size.values()) / calls
    print(
        f"\n{title}: {calls} model calls, {sum(rows.values()) / calls:.1f} rows and"
        f" {total:,.0f} bytes per model call"
    )
    for table in TABLES:
        if rows[table] or size[table]:
            print(
                f"  {table:<20} {rows[table] / calls:6.2f} rows  {size[table] / calls:9,.0f} bytes"
            )
    return total


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per phase (default 200)")
    parser.add_argument("--sessions", type=int, default=10, help="sessions per phase (default 10)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--reply-chars", type=int, default=4000, help="a long reply's characters (default 4000)"
    )
    args = parser.parse_args()
    binaries = find_binaries()
    if binaries is None:
        raise SystemExit("store_growth needs PostgreSQL (initdb, pg_ctl)")
    postgres = PostgresServer(binaries).start()
    workers: list[Any] = []
    try:
        url = new_database(postgres.url)
        async with bench_stack({"conversations": {"*": []}}, database_url=url) as bench:
            client, model, home = bench.client, bench.model, bench.home
            workers = [spawn_python(WORKER_ARGS, process_env(bench)) for _ in range(args.workers)]
            for worker in workers:
                await worker_polling(bench, worker)
            (home / "notes.txt").write_text("A line to read.\n")

            async def phase(steps: list[dict[str, Any]]) -> None:
                per_session = max(1, args.runs // args.sessions)
                for _ in range(args.sessions):
                    session = await client.sessions.create(workspace=home)
                    model.add_steps(session.id, steps * per_session, replace=True)
                    for _ in range(per_session):
                        await (await client.runs.prompt(session.id, "go")).result()

            runs = max(1, args.runs // args.sessions) * args.sessions
            await phase([{"reply": [{"text": "Done."}]}])  # every table has its pages
            start = measure(url)
            await phase([{"reply": [{"text": "Done."}]}])
            short = measure(url)
            per_call = report("short replies", start, short, runs)
            read = {"tool_use": {"name": "read", "input": {"path": "notes.txt"}}}
            await phase([{"reply": [read]}, {"reply": [{"text": "Done."}]}])
            tools = measure(url)
            report("a tool call and a reply", short, tools, 2 * runs)
            # Letters at random: a repeated one would compress to nothing in TOAST.
            letters = "".join(random.Random(7).choices("abcdefghij klmnopqrst", k=args.reply_chars))
            await phase([{"reply": [{"text": letters}]}])
            long = measure(url)
            long_call = report(f"{args.reply_chars}-character replies", tools, long, runs)
            copies = (long_call - per_call) / args.reply_chars
            print(f"\neach character of a reply: about {copies:.1f} bytes stored")
            pruned = await Retention(client).prune_idle(0)
            left = measure(url)
            print(
                f"\nprune --older-than 0s: {len(pruned.sessions)} sessions,"
                f" {sum(pruned.rows.values()):,} rows in {pruned.transactions} transactions;"
                f" rows left: { ({t: n for t, n in left[0].items() if n}) }"
            )
            print(f"store_growth: {per_call:,.0f} bytes per model call (short replies)")
    finally:
        for worker in workers:
            kill(worker)
        postgres.stop()


if __name__ == "__main__":
    asyncio.run(main())
