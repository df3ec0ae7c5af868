"""The soak's chaos: at random moments, one service fails and comes back.

- `worker_kill`: SIGKILL a worker's process group (as a machine failure), restart it;
- `worker_pause`: SIGSTOP a worker past its heartbeat timeout, then SIGCONT it (a stalled
  machine that comes back while its work has moved on);
- `temporal_term` / `temporal_kill`: SIGTERM or SIGKILL the dev server, start it again on
  the same file and port;
- `postgres_restart`: stop PostgreSQL at once, start it again.

One failure at a time; each one is undone before the next is drawn, so at the end every
service is up. The first failures are one of each kind, in a random order (then each is
drawn by its weight): even a short soak sees every kind, going on past its time if it must.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter

from soak_stack import Services

KINDS = {
    "worker_kill": 5.0,
    "worker_pause": 2.0,
    "temporal_term": 1.0,
    "temporal_kill": 1.0,
    "postgres_restart": 1.5,
}
"""Each failure's weight in the draw."""


async def chaos(
    services: Services,
    dice: random.Random,
    until: float,
    every_s: float,
    done: Counter[str],
    say: list[str],
) -> None:
    """Draw failures about every `every_s` seconds until `until` (time.monotonic()), and
    at least until one of each kind has happened."""
    began = time.monotonic()
    heartbeat = services.settings.heartbeat_timeout_s
    deck = dice.sample(list(KINDS), len(KINDS))
    while True:
        pause = dice.uniform(0.5, 1.5) * every_s
        if time.monotonic() + pause > until and not deck:
            return
        await asyncio.sleep(pause)  # the schedule of failures, not a wait for a state
        kind = deck.pop() if deck else dice.choices(list(KINDS), weights=list(KINDS.values()))[0]
        host = dice.choice(services.hosts)
        at = time.monotonic() - began
        what = f"{kind} ({host.name})" if kind.startswith("worker") else kind
        try:
            if kind == "worker_kill":
                services.kill_worker(host)
                await asyncio.sleep(dice.uniform(0, 3))  # down a while before it is back
                services.start_worker(host)
            elif kind == "worker_pause":
                services.pause_worker(host)
                await asyncio.sleep(heartbeat + dice.uniform(1, 4))
                services.resume_worker(host)
            elif kind in ("temporal_term", "temporal_kill"):
                how = "term" if kind == "temporal_term" else "kill"
                await services.restart_temporal(how, dice.uniform(1, 5))
            else:
                await services.restart_postgres(dice.uniform(1, 5))
        except Exception as err:
            say.append(f"{at:6.1f} s  {what} went wrong: {type(err).__name__}: {err}")
            raise
        done[kind] += 1
        say.append(f"{at:6.1f} s  {what}, {time.monotonic() - began - at:.1f} s")
