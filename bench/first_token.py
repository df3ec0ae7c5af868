"""Time to first token: a prompt to the first streamed text a client reads, less the model's own.

A worker process, as deployed, and this process as the client. Each sample is a new
session whose model speaks the sample's protocol. A reader follows the session's events
as the HTTP API's event stream does for the page (`client.events.batches` from the
session's cursor, read every `api.sse.SSE_POLL_S`), started before the run; then the
clock starts, `client.runs.prompt(...)` starts the run, and the clock stops when the
reader has the run's first `message_update` of text.

The offline model answers each request after `--first-byte-ms` (a fast model's time to
its first token) with a reply of a few deltas. Its request log says when it received the
request and when it sent the reply's first delta: that span, the model's own time to its
first token (the scripted delay and what the server itself took), is subtracted. What is
left is duragent's: the run starting (the workflow, the turn's activity, what it reads
from the store), the request going out, the first delta read from the stream, stored and
read by the client. Printed per protocol, besides the median and p95 of that: its two
parts, prompt to the model receiving the request, and the model's first delta to the
client reading it.

The protocols (by default Anthropic's Messages API and OpenAI's Chat Completions, the
offline model playing the same script on each) alternate sample by sample in one run: the
machine is shared and noisy, so they are compared only side by side.

    python bench/first_token.py [--samples 20] [--first-byte-ms 200]
                                [--protocol both|anthropic|openai|openai-responses]

Last line: `first_token: X ms`, the larger of the protocols' medians. Goal: under 60 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, field

from common import Bench, bench_stack, median, p95, spawn, worker_polling
from processes import WORKER_ARGS

from duragent.api.sse import SSE_POLL_S
from duragent.offline_model import WIRE_MODELS

BOTH = ("anthropic", "openai")
"""`--protocol both`: Anthropic's Messages API and OpenAI's Chat Completions."""
REPLY = " ".join(f"word{i:02d}" for i in range(40))  # 280 characters: a few deltas
GOAL_MS = 60


@dataclass
class Sample:
    first_token_ms: float
    """Prompt to the client reading the first text, less the model's own time."""
    start_ms: float
    """Prompt to the model receiving the request."""
    stream_ms: float
    """The model sending the first delta to the client reading it."""
    stored_ms: float
    """Of `stream_ms`, the model sending the first delta to its event being stored (the
    store's clock, in whole milliseconds); the rest is the client's polling."""
    model_ms: float
    """The model's own time to its first delta (subtracted)."""


@dataclass
class Figures:
    protocol: str
    samples: list[Sample] = field(default_factory=list)

    def of(self, part: str) -> list[float]:
        return [getattr(s, part) for s in self.samples]


@dataclass
class Seen:
    read_at: float
    """When the client read the run's first text (wall clock, s)."""
    stored_at: float
    """When that event was stored (its `created_at`, s)."""


async def first_text(bench: Bench, session_id: str, cursor: int) -> Seen | None:
    """Follow the session's events from `cursor` until its run's `agent_end`; the first
    `message_update` of text, when read and stored, None if there was none."""
    seen: Seen | None = None
    async for batch in bench.client.events.batches(session_id, after=cursor, poll_s=SSE_POLL_S):
        now = time.time()
        for event in batch:
            text = event.type == "message_update" and event.payload.get("kind") == "text"
            if text and seen is None:
                seen = Seen(now, event.created_at / 1000)
            if event.type == "agent_end":
                return seen
    return seen


async def one_sample(bench: Bench, protocol: str, first_byte_ms: int) -> Sample:
    client = bench.client
    session = await client.sessions.create(model=WIRE_MODELS[protocol])
    step = {"delay_ms": first_byte_ms, "reply": [{"text": REPLY}], "chunk_delay_ms": 5}
    bench.model.add_steps(session.id, [step], replace=True)
    reader = asyncio.create_task(
        first_text(bench, session.id, await client.events.cursor(session.id))
    )
    await asyncio.sleep(0.1)  # the reader is following before the run starts, as a page is
    began = time.time()
    handle = await client.runs.prompt(session.id, "Say something.")
    result = await handle.result()
    seen = await asyncio.wait_for(reader, timeout=30)
    if result.status != "completed" or seen is None:
        raise SystemExit(f"{protocol}: the run ended {result.status}, its text read: {seen}")
    (request,) = bench.model.requests_for(session.id)
    first_delta = request.deltas_sent_at[0]
    model_s = first_delta - request.received_at
    return Sample(
        first_token_ms=(seen.read_at - began - model_s) * 1000,
        start_ms=(request.received_at - began) * 1000,
        stream_ms=(seen.read_at - first_delta) * 1000,
        stored_ms=(seen.stored_at - first_delta) * 1000,
        model_ms=model_s * 1000,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20, help="per protocol")
    parser.add_argument("--first-byte-ms", type=int, default=200, help="the model's delay")
    parser.add_argument(
        "--protocol",
        choices=["both", *WIRE_MODELS],
        default="both",
        help="the model's wire API; both: anthropic and openai, alternating (default)",
    )
    args = parser.parse_args()
    protocols = BOTH if args.protocol == "both" else (args.protocol,)
    every = [Figures(p) for p in protocols]

    async with bench_stack({"conversations": {}}, protocols[0]) as bench:
        # OpenAI's wires at the offline model too, whatever this shell's OPENAI_* say.
        worker = spawn(bench, *WORKER_ARGS, OPENAI_BASE_URL=bench.model.openai_base_url)
        try:
            await worker_polling(bench, worker)
            for figures in every:  # warm-up: imports, connections, caches
                await one_sample(bench, figures.protocol, args.first_byte_ms)
            for _ in range(args.samples):
                for figures in every:
                    figures.samples.append(
                        await one_sample(bench, figures.protocol, args.first_byte_ms)
                    )
        finally:
            worker.terminate()
            worker.wait(timeout=20)

    print(
        f"{args.samples} samples per protocol, alternating; the model's first byte after"
        f" {args.first_byte_ms} ms (subtracted with the rest of its own time); the client"
        f" reads the events every {SSE_POLL_S * 1000:.0f} ms"
    )
    for figures in every:
        ms = figures.of("first_token_ms")
        print(
            f"{figures.protocol} ({WIRE_MODELS[figures.protocol]}): first token"
            f" median {median(ms):.1f} ms, p95 {p95(ms):.1f} ms;"
            f" prompt to the model's request {median(figures.of('start_ms')):.1f} ms,"
            f" first delta to the client {median(figures.of('stream_ms')):.1f} ms"
            f" (stored after {median(figures.of('stored_ms')):.1f}) (medians);"
            f" the model's own {median(figures.of('model_ms')):.1f} ms"
        )
    if len(every) > 1:
        base, other = every[0], every[1]
        ratio = median(other.of("first_token_ms")) / median(base.of("first_token_ms"))
        print(f"{other.protocol} over {base.protocol}, median: {ratio:.2f}x")
    worst = max(median(f.of("first_token_ms")) for f in every)
    print(f"goal: under {GOAL_MS} ms on every protocol ({'met' if worst < GOAL_MS else 'missed'})")
    print(f"first_token: {worst:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
