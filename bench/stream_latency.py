"""Streaming latency: a model delta to a client connected to the HTTP API's SSE stream.

The deployment as users run it: a worker process, an API process (`duragent serve`), and
this process as the browser, reading `GET /api/sessions/{id}/events`. The offline model
streams a long text reply one delta every `--chunk-delay-ms` and logs when it sent each;
for every `message_update` the client receives, the latency is from the model sending the
newest delta it carries to the client reading it. That covers the SDK parsing the stream,
the activity's event writer (which batches deltas), the store, and the API's polling.

    python bench/stream_latency.py [--runs 5] [--chunk-delay-ms 100]

Last line: `stream_latency: X ms` (median).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
from common import Bench, bench_stack, median, p95, spawn, spawn_worker

from duragent.offline_model.protocol import CHUNK_CHARS

TOKEN = "bench-token"
API_ENV = {"DURAGENT_API_TOKENS": f"{TOKEN}=bench"}
REPLY = " ".join(f"word{i:03d}" for i in range(100))  # 800 characters: 40 deltas


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def processes(bench: Bench, port: int) -> Iterator[None]:
    """A worker and the HTTP API, each in its own process, as deployed."""
    started = [
        spawn_worker(bench),
        spawn(
            bench,
            "-m",
            "duragent.client.cli",
            "serve",
            "--no-worker",
            "--port",
            str(port),
            **API_ENV,
        ),
    ]
    try:
        yield
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(timeout=20)


async def api_ready(http: httpx.AsyncClient) -> None:
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(httpx.TransportError):
            if (await http.get("/api/sessions")).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise TimeoutError("the HTTP API did not come up")
        await asyncio.sleep(0.1)


async def read_stream(
    http: httpx.AsyncClient, session_id: str, received: list[tuple[float, dict[str, Any]]]
) -> None:
    """Collect (arrival time, stored event) until the run's agent_end."""
    async with http.stream("GET", f"/api/sessions/{session_id}/events") as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            received.append((time.time(), event))
            if event["type"] == "agent_end":
                return


async def one_run(bench: Bench, http: httpx.AsyncClient, delay_ms: int) -> list[float]:
    """Per received text delta: ms from the model sending it to the client reading it."""
    session_id = (await http.post("/api/sessions", json={})).json()["session"]["id"]
    bench.model.add_steps(
        session_id, [{"reply": [{"text": REPLY}], "chunk_delay_ms": delay_ms}], replace=True
    )
    received: list[tuple[float, dict[str, Any]]] = []
    reader = asyncio.create_task(read_stream(http, session_id, received))
    await asyncio.sleep(0.2)  # connected before the run starts, as a browser would be
    await http.post(f"/api/sessions/{session_id}/input", json={"text": "go"})
    await asyncio.wait_for(reader, timeout=120)
    (request,) = bench.model.requests_for(session_id)
    sent = request.deltas_sent_at
    latencies, carried = [], 0
    for arrived, event in received:
        payload = event["payload"]
        if event["type"] != "message_update" or payload["kind"] != "text":
            continue
        carried += len(payload["delta"])
        newest = sent[math.ceil(carried / CHUNK_CHARS) - 1]
        latencies.append((arrived - newest) * 1000)
    if carried != len(REPLY):
        raise AssertionError(f"the client read {carried} of {len(REPLY)} characters")
    return latencies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chunk-delay-ms", type=int, default=100)
    args = parser.parse_args()
    port = free_port()
    async with bench_stack({"conversations": {}}) as bench:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with processes(bench, port):
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60
            ) as http:
                await api_ready(http)
                await one_run(bench, http, args.chunk_delay_ms)  # warm-up
                samples: list[float] = []
                for _ in range(args.runs):
                    samples += await one_run(bench, http, args.chunk_delay_ms)
    print(f"{args.runs} runs, {len(samples)} deltas, one every {args.chunk_delay_ms} ms")
    print(f"model sent → client read: median {median(samples):.1f} ms, p95 {p95(samples):.1f} ms")
    print(f"stream_latency: {median(samples):.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
