"""What a turn costs on Temporal: the dev server's own `action` counter, by action type.

Temporal Cloud bills per Action (a workflow started, an activity scheduled, a signal, a
timer, a batch of local activity markers, every recorded heartbeat); the dev server counts
the same in its Prometheus metric `action` (`temporal server start-dev --metrics-port`).
A scripted session runs `--turns` tool turns (a model call of `--model-s` seconds that
asks for a bash `sleep` of `--tool-s` seconds) and then an answer (one more model call);
the counter is read before and after. A turn is one model call (with its tool call, if
any). The same run is measured again with both durations 0: what a turn costs whatever
its length.

    python bench/actions.py [--model-s 10] [--tool-s 10] [--turns 3]

Last line: `actions: X per turn` (with the given durations). Target: at most 10.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections import Counter

import httpx
from common import Bench, bench_stack

from duragent.worker import build_worker

HEARTBEAT = "grpc_RecordActivityTaskHeartbeat"
_ACTION = re.compile(r"^action\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


async def actions(bench: Bench) -> Counter[str]:
    """The server's action counter of the bench's namespace, by action type."""
    assert bench.metrics_url is not None
    async with httpx.AsyncClient() as http:
        text = (await http.get(bench.metrics_url)).text
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        match = _ACTION.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("namespace") == bench.settings.temporal_namespace:
            counts[labels.get("action_type", "?")] += int(float(match["value"]))
    return counts


def script(turns: int, model_s: float, tool_s: float) -> list[dict[str, object]]:
    delay = int(model_s * 1000)
    bash = {"tool_use": {"name": "bash", "input": {"command": f"sleep {tool_s:g}"}}}
    return [
        *({"delay_ms": delay, "reply": [bash]} for _ in range(turns)),
        {"delay_ms": delay, "reply": [{"text": "Done."}]},
    ]


async def one_run(bench: Bench, turns: int, model_s: float, tool_s: float) -> Counter[str]:
    """The actions one run of `turns` tool turns and an answer cost."""
    session = await bench.client.sessions.create()
    bench.model.add_steps(session.id, script(turns, model_s, tool_s), replace=True)
    before = await actions(bench)
    result = await (await bench.client.runs.prompt(session.id, "work")).result()
    assert result.status == "completed", result.error
    await asyncio.sleep(1.0)  # the run's last workflow task is counted once it is answered
    after = await actions(bench)
    after.subtract(before)
    return +after


def report(label: str, spent: Counter[str], turns: int, running_s: float) -> float:
    per_turn = sum(spent.values()) / (turns + 1)
    print(f"{label}: {sum(spent.values())} actions, {per_turn:.1f} per turn")
    for kind, count in spent.most_common():
        print(f"  {kind:<48} {count:5d}  ({count / (turns + 1):.1f} per turn)")
    if running_s > 0:
        per_minute = spent[HEARTBEAT] / (running_s / 60)
        print(f"  heartbeats per minute of running call: {per_minute:.1f}")
    return per_turn


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-s", type=float, default=10.0)
    parser.add_argument("--tool-s", type=float, default=10.0)
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    async with bench_stack({"conversations": {}}) as bench:
        worker = build_worker(bench.client.temporal, bench.client.db, bench.settings)
        async with worker:
            await one_run(bench, 1, 0, 0)  # warm-up
            instant = await one_run(bench, args.turns, 0, 0)
            timed = await one_run(bench, args.turns, args.model_s, args.tool_s)
    running_s = args.model_s * (args.turns + 1) + args.tool_s * args.turns
    print(
        f"{args.turns} tool turns and an answer; heartbeat timeout "
        f"{bench.settings.heartbeat_timeout_s:g} s"
    )
    report("model and tool 0 s", instant, args.turns, 0)
    per_turn = report(
        f"model {args.model_s:g} s, tool {args.tool_s:g} s", timed, args.turns, running_s
    )
    print(f"actions: {per_turn:.1f} per turn")


if __name__ == "__main__":
    asyncio.run(main())
