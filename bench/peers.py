"""Side by side with a peer: duragent and pydantic-ai's durable agent on the same Temporal.

The same scripted conversation runs through duragent and through pydantic-ai's Temporal
integration (`pydantic_ai.durable_exec.temporal`: an `Agent` with `TemporalDurability`,
`PydanticAIPlugin` on the client, `AgentPlugin` on the worker; `bench/peer_pydantic_ai.py`).
Both sides share one Temporal dev server (as `bench_stack` starts it) and one offline model
server (each conversation the same script at the same latency), and speak the same wire API
to it, `--protocol`: Anthropic's Messages API (the default; the peer's `AnthropicModel`
through `AnthropicProvider` with `base_url` pointed at the server), OpenAI's Chat
Completions (`openai`: duragent's `openai:` model, the peer's `OpenAIChatModel` through
`OpenAIProvider` at the server's `openai_base_url`) or OpenAI's Responses API
(`openai-responses`, the peer's `OpenAIResponsesModel`). Each side has one worker
process, tuned alike (duragent's "Worker tuning" settings). Every tool turn runs the same
tool: `ls` of the same folder (duragent's built-in, the only tool its sessions are offered
here; the peer's a function doing the same). The bench process is the client of both.

pydantic-ai goes into a virtual environment of its own, made on first use (under
`~/.cache/duragent-bench/`, or `--peer-venv`), with the same `temporalio`, `anthropic` and
`openai` versions as duragent's, so both sides run the same Temporal SDK and model client; its
worker runs with that environment's python. Each side's model client speaks HTTP as the
side ships it: duragent's over aiohttp (`worker.model_clients`), pydantic-ai's over httpx;
`--peer-http aiohttp` gives the peer duragent's transport, to see what the rest of the
two costs. Nothing of duragent imports it. (The
deprecated `TemporalAgent` wrapper schedules the same activities with the same payloads.)

What the two do per turn is not the same work, and the figures say what it costs:
duragent streams the model's reply, while pydantic-ai, given no event stream handler,
asks for it whole (its model activity's non-streaming request: "model requests streamed"
in the report); duragent runs a turn as one activity (the model call, then its tool
calls) where pydantic-ai runs two (the model call, the tool call), and duragent also
writes the session to its store (SQLite here: the messages, every streamed delta as a run
event, the turn's save point), renews its worker lease and passes only ids through
Temporal, while pydantic-ai keeps the conversation in Temporal's history alone and
publishes nothing until a reply has ended.

Measured side by side, alternating (duragent, then the peer, for every figure, `--rounds`
times), so noise on this machine hits both:

- per-turn time: one session of `--turns` tool turns and an answer, the model answering
  in `--latency-ms`; a turn is the time between two model requests of the session as the
  model server received them (model call, tool call and what the harness does between),
  also for the first and the last tenth of the turns (does a turn slow down as the
  conversation grows?);
- throughput: K sessions at once for each K of `--ks` (`--batch-turns` tool turns and an
  answer each, the model answering in `--batch-latency-ms`), as a percentage of the ideal
  (every session's calls back to back at the model's latency), as bench/concurrency.py;
- CPU per model call during those batches: the worker process's and the Temporal
  server's, from /proc;
- Temporal history per turn: the bytes and events of the per-turn session's workflow
  history (fetched from the server) over its model calls, its activities per turn, and its
  largest event (pydantic-ai passes the conversation in each model activity's input, so
  its history grows with the square of the conversation; duragent's passes ids).

    python bench/peers.py [--ks 10,50,100] [--turns 50] [--latency-ms 50] [--rounds 3]
                          [--batch-turns 5] [--batch-latency-ms 1000] [--peer-venv DIR]
                          [--peer-version 2.68.0] [--peer-http httpx|aiohttp]
                          [--protocol anthropic|openai|openai-responses]

The defaults take about 8 minutes on a 2-core machine (the first run a minute more, to
install pydantic-ai).

Last line: `peers: R x`, duragent's throughput over pydantic-ai's at the largest K.
Targets: R at least 2.0, and CPU per model call (worker plus Temporal server) at most 0.5
times pydantic-ai's.
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import contextlib
import importlib.metadata
import itertools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    Bench,
    add_protocol_option,
    bench_stack,
    kill,
    median,
    p95,
    spawn,
    worker_polling,
)
from concurrency import cpu_ms, peak_rss_mb, script
from processes import WORKER_ARGS
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowHistory

from duragent.client.api import DuragentClient
from duragent.client.plugins import Plugin
from duragent.domain.config import SessionConfig
from duragent.domain.models import parse_model

PEER_SCRIPT = ROOT / "bench" / "peer_pydantic_ai.py"
PEER_PACKAGE = "pydantic-ai-slim[temporal,anthropic,openai]"
PROMPT = "Look around."


# ---------------------------------------------------------------------------------------------
# pydantic-ai's virtual environment


def default_venv(version: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "duragent-bench" / f"pydantic-ai-{version}"


def peer_requirements(version: str) -> list[str]:
    """pydantic-ai, with the Temporal SDK and model clients duragent runs on here."""
    same = [
        f"temporalio=={importlib.metadata.version('temporalio')}",
        # [aiohttp]: for --peer-http aiohttp
        f"anthropic[aiohttp]=={importlib.metadata.version('anthropic')}",
        f"openai[aiohttp]=={importlib.metadata.version('openai')}",
    ]
    return [f"{PEER_PACKAGE}=={version}", *same]


def peer_python(venv: Path, version: str) -> Path:
    """The python of pydantic-ai's virtual environment, made on first use (and again when
    the requirements changed)."""
    python = venv / "bin" / "python"
    stamp = venv / "bench-requirements.txt"
    wanted = "\n".join(peer_requirements(version))
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"installing {PEER_PACKAGE}=={version} into {venv} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = [str(python), "-m", "pip", "install", "--quiet", *peer_requirements(version)]
    if subprocess.run(install).returncode != 0:
        raise SystemExit(
            f"could not install {', '.join(peer_requirements(version))} (pip said why)"
        )
    stamp.write_text(wanted)
    return python


# ---------------------------------------------------------------------------------------------
# The two sides


@dataclass
class Outcome:
    key: str
    """The conversation's key at the model server."""
    workflow: WorkflowHandle[Any, Any]
    completed: bool


class Side(abc.ABC):
    """One harness: its worker process, its conversations, its workflows."""

    name: str

    def __init__(self, bench: Bench, workspace: Path) -> None:
        self.bench = bench
        self.workspace = workspace
        self._worker: subprocess.Popen[bytes] | None = None

    @property
    def worker(self) -> subprocess.Popen[bytes]:
        assert self._worker is not None, "not started"
        return self._worker

    @abc.abstractmethod
    async def start(self) -> None:
        """Start the worker process and wait until it polls."""

    @abc.abstractmethod
    def new_conversation(self) -> str:
        """A fresh conversation (its key at the model server), not started."""

    @abc.abstractmethod
    async def run_all(self, keys: list[str]) -> list[Outcome]:
        """Start every conversation's run at once and wait for all of them."""

    def explain(self) -> str:
        """What the worker said, when a run does not end."""
        return ""

    def stop(self) -> None:
        if self._worker is not None:
            kill(self._worker)


class Duragent(Side):
    name = "duragent"

    def __init__(self, bench: Bench, workspace: Path) -> None:
        super().__init__(bench, workspace)
        # Sessions offered `ls` only, as the peer's agent is.
        only_ls = Plugin(name="peers-bench", active_tools=["ls"])
        self.client = DuragentClient(
            bench.client.temporal, bench.client.db, bench.settings, plugins=[only_ls]
        )

    async def start(self) -> None:
        # OpenAI's wires at the offline model too, whatever this shell's OPENAI_* say.
        self._worker = spawn(
            self.bench, *WORKER_ARGS, OPENAI_BASE_URL=self.bench.model.openai_base_url
        )
        await worker_polling(self.bench, self.worker)

    def new_conversation(self) -> str:
        return self.client.sync.sessions.create(workspace=self.workspace).id

    async def run_all(self, keys: list[str]) -> list[Outcome]:
        handles = await asyncio.gather(*(self.client.runs.prompt(k, PROMPT) for k in keys))
        results = await asyncio.gather(*(h.result() for h in handles))
        return [
            Outcome(h.session_id, h.workflow, r.status == "completed")
            for h, r in zip(handles, results, strict=True)
        ]


class PydanticAI(Side):
    name = "pydantic-ai"

    def __init__(
        self, bench: Bench, workspace: Path, python: Path, http: str, protocol: str
    ) -> None:
        super().__init__(bench, workspace)
        self.python = python
        self.http = http
        self.protocol = protocol
        self.queue = f"peer-{uuid.uuid4().hex[:8]}"
        self.log = bench.home / "peer-worker.log"

    async def start(self) -> None:
        settings = self.bench.settings
        model = self.bench.model
        env = dict(
            os.environ,
            PEER_TEMPORAL_ADDRESS=settings.temporal_address,
            PEER_TASK_QUEUE=self.queue,
            PEER_PROTOCOL=self.protocol,
            # The model server as each SDK takes it (OpenAI's ends in /v1).
            PEER_MODEL_URL=model.base_url
            if self.protocol == "anthropic"
            else model.openai_base_url,
            PEER_MODEL=parse_model(settings.model).model,
            PEER_MAX_TOKENS=str(SessionConfig(model=settings.model).max_tokens),
            PEER_SYSTEM_PROMPT=SessionConfig(model=settings.model).system_prompt,
            PEER_WORKSPACE=str(self.workspace),
            PEER_MAX_ACTIVITIES=str(settings.worker_max_activities),
            PEER_MAX_WORKFLOW_TASKS=str(settings.worker_max_workflow_tasks),
            PEER_CACHED_RUNS=str(settings.worker_cached_runs),
            PEER_POLLERS=str(settings.worker_pollers),
            PEER_HTTP=self.http,
        )
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
            env.pop(key, None)
        with self.log.open("wb") as log:
            self._worker = subprocess.Popen(
                [str(self.python), str(PEER_SCRIPT)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            await worker_polling(self.bench, self.worker, self.queue)
        except TimeoutError:
            print(self.explain(), file=sys.stderr)
            raise

    def explain(self) -> str:
        return f"the end of the pydantic-ai worker's output:\n{self.log.read_text()[-4000:]}"

    def new_conversation(self) -> str:
        return uuid.uuid4().hex

    async def run_all(self, keys: list[str]) -> list[Outcome]:
        temporal = self.bench.client.temporal
        handles = await asyncio.gather(
            *(
                temporal.start_workflow(
                    "PeerSession", args=[PROMPT, k], id=f"peer-{k}", task_queue=self.queue
                )
                for k in keys
            )
        )
        done = await asyncio.gather(*(self._completed(h) for h in handles))
        return [Outcome(k, h, ok) for k, h, ok in zip(keys, handles, done, strict=True)]

    @staticmethod
    async def _completed(handle: WorkflowHandle[Any, Any]) -> bool:
        try:
            await handle.result()
        except WorkflowFailureError:
            return False
        return True


# ---------------------------------------------------------------------------------------------
# Figures


def steps(turns: int, latency_ms: int) -> list[dict[str, Any]]:
    """A conversation's script: `turns` turns of one `ls` each, then an answer."""
    conversation: list[dict[str, Any]] = script(turns, latency_ms)["conversations"]["*"]
    return conversation


@dataclass
class HistoryFigures:
    bytes: int
    events: int
    activities: int
    largest: int
    """The largest event's bytes."""

    @staticmethod
    def of(history: WorkflowHistory) -> HistoryFigures:
        scheduled = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        return HistoryFigures(
            bytes=sum(e.ByteSize() for e in history.events),
            events=len(history.events),
            activities=sum(1 for e in history.events if e.event_type == scheduled),
            largest=max((e.ByteSize() for e in history.events), default=0),
        )


@dataclass
class SideFigures:
    turn_ms: list[float] = field(default_factory=list)
    early_ms: list[float] = field(default_factory=list)
    """The first tenth of each per-turn session's turns."""
    late_ms: list[float] = field(default_factory=list)
    """The last tenth."""
    histories: list[HistoryFigures] = field(default_factory=list)
    model_calls: int = 0
    """Model calls of the per-turn sessions (for the history's per-turn figures)."""
    percent: dict[int, list[float]] = field(default_factory=dict)
    """Throughput, % of ideal, by K, one per round."""
    worker_cpu_ms: dict[int, float] = field(default_factory=dict)
    server_cpu_ms: dict[int, float] = field(default_factory=dict)
    batch_calls: dict[int, int] = field(default_factory=dict)
    retried: int = 0
    requests: int = 0
    streamed: int = 0
    """Of the model requests, those that asked for a streamed reply."""
    failed: int = 0
    peak_mb: float = float("nan")


def received_at(bench: Bench, key: str) -> list[float]:
    """When the model server received each answered request of a conversation."""
    return [
        r.received_at
        for r in bench.model.requests_for(key)
        if r.status == 200 and r.step_index is not None
    ]


def count_requests(bench: Bench, outcomes: list[Outcome], calls: int, into: SideFigures) -> None:
    requests = [r for o in outcomes for r in bench.model.requests_for(o.key)]
    into.retried += len(requests) - calls * len(outcomes)
    into.requests += len(requests)
    into.streamed += sum(1 for r in requests if r.body.get("stream") is True)
    into.failed += sum(1 for o in outcomes if not o.completed)


async def one_session(side: Side, turns: int, latency_ms: int, into: SideFigures) -> list[float]:
    """The per-turn run: one session of `turns` tool turns; its turn times (ms)."""
    key = side.new_conversation()
    side.bench.model.add_steps(key, steps(turns, latency_ms), replace=True)
    [outcome] = await side.run_all([key])
    count_requests(side.bench, [outcome], turns + 1, into)
    seen = received_at(side.bench, key)
    times = [(b - a) * 1000 for a, b in itertools.pairwise(seen)]
    into.turn_ms += times
    tenth = max(1, len(times) // 10)
    into.early_ms += times[:tenth]
    into.late_ms += times[-tenth:]
    into.histories.append(HistoryFigures.of(await outcome.workflow.fetch_history()))
    into.model_calls += turns + 1
    return times


async def warm_up(side: Side, timeout_s: float = 120) -> None:
    """One short run (imports, the sandbox, connections); a worker that cannot run the
    conversation fails here, with what it said, rather than leaving the bench waiting."""
    try:
        async with asyncio.timeout(timeout_s):
            await one_session(side, 1, 0, SideFigures())
    except TimeoutError:
        print(side.explain(), file=sys.stderr)
        raise SystemExit(f"{side.name}: a one-turn run did not end in {timeout_s:g} s") from None


async def batch(side: Side, k: int, turns: int, latency_ms: int, into: SideFigures) -> float:
    """K sessions at once; their throughput, % of ideal."""
    keys = [side.new_conversation() for _ in range(k)]
    for key in keys:
        side.bench.model.add_steps(key, steps(turns, latency_ms), replace=True)
    await asyncio.sleep(0.5)
    worker, server = side.worker.pid, side.bench.server_pid
    worker_cpu, server_cpu = cpu_ms(worker), cpu_ms(server)
    began = time.monotonic()
    outcomes = await side.run_all(keys)
    wall = time.monotonic() - began
    calls = k * (turns + 1)
    into.worker_cpu_ms[k] = into.worker_cpu_ms.get(k, 0) + cpu_ms(worker) - worker_cpu
    into.server_cpu_ms[k] = into.server_cpu_ms.get(k, 0) + cpu_ms(server) - server_cpu
    into.batch_calls[k] = into.batch_calls.get(k, 0) + calls
    count_requests(side.bench, outcomes, turns + 1, into)
    percent = 100 * (turns + 1) * latency_ms / 1000 / wall
    into.percent.setdefault(k, []).append(percent)
    return percent


# ---------------------------------------------------------------------------------------------
# The report


Figure = Callable[[SideFigures], float]


def row(label: str, ours: str, theirs: str) -> str:
    return f"{label:<46} {ours:>12} {theirs:>12}"


def cpu_per_call(s: SideFigures, k: int, *, worker: bool = True, server: bool = True) -> float:
    spent = (s.worker_cpu_ms[k] if worker else 0) + (s.server_cpu_ms[k] if server else 0)
    return spent / s.batch_calls[k]


def batch_rows(k: int, both: Callable[[str, Figure, str], None]) -> None:
    """The rows of the batches of K sessions."""
    both(f"  K={k}: throughput (% of ideal, median)", lambda s: median(s.percent[k]), ".0f")
    both("    worker CPU per model call (ms)", lambda s: cpu_per_call(s, k, server=False), ".1f")
    both(
        "    Temporal server CPU per model call (ms)",
        lambda s: cpu_per_call(s, k, worker=False),
        ".1f",
    )
    both("    worker + server (ms)", lambda s: cpu_per_call(s, k), ".1f")


def report(ks: list[int], sides: dict[str, SideFigures], args: argparse.Namespace) -> float:
    """Print every figure, both columns; returns R."""
    ours, theirs = sides["duragent"], sides["pydantic-ai"]

    def both(label: str, figure: Figure, fmt: str) -> None:
        print(row(label, format(figure(ours), fmt), format(figure(theirs), fmt)))

    def per_call(total: Callable[[HistoryFigures], int]) -> Figure:
        return lambda s: sum(total(h) for h in s.histories) / s.model_calls

    print()
    print(", ".join(peer_requirements(args.peer_version)))
    print(f"model API: {args.protocol} ({args.model})")
    print(f"model client HTTP: duragent over aiohttp, pydantic-ai over {args.peer_http}")
    print(row("", "duragent", "pydantic-ai"))
    print(
        f"one session, {args.turns} tool turns and an answer, model latency {args.latency_ms} ms:"
    )
    both("  turn, median (ms)", lambda s: median(s.turn_ms), ".1f")
    both("  turn, p95 (ms)", lambda s: p95(s.turn_ms), ".1f")
    both("  turn, median of the first tenth (ms)", lambda s: median(s.early_ms), ".1f")
    both("  turn, median of the last tenth (ms)", lambda s: median(s.late_ms), ".1f")
    both(
        "  turn minus model latency, median (ms)",
        lambda s: median(s.turn_ms) - args.latency_ms,
        ".1f",
    )
    both("  history bytes per model call", per_call(lambda h: h.bytes), ".0f")
    both("  history events per model call", per_call(lambda h: h.events), ".1f")
    both("  activities per model call", per_call(lambda h: h.activities), ".2f")
    both("  largest history event (bytes)", lambda s: max(h.largest for h in s.histories), ".0f")
    both("  whole history (KB)", lambda s: median([h.bytes / 1024 for h in s.histories]), ".1f")
    print(
        f"K sessions at once, {args.batch_turns} tool turns and an answer each,"
        f" model latency {args.batch_latency_ms} ms, one worker each:"
    )
    for k in ks:
        batch_rows(k, both)
    both("worker peak memory (MB)", lambda s: s.peak_mb, ".0f")
    both("model requests streamed (%)", lambda s: 100 * s.streamed / max(1, s.requests), ".0f")
    both("model calls retried", lambda s: s.retried, "d")
    both("runs not completed", lambda s: s.failed, "d")

    top = ks[-1]
    r = median(ours.percent[top]) / median(theirs.percent[top])
    cpu_ratio = cpu_per_call(ours, top) / cpu_per_call(theirs, top)
    print(f"K={top}: throughput {r:.2f}x pydantic-ai's (target: at least 2.0x)")
    print(
        f"K={top}: CPU per model call, worker + server, {cpu_ratio:.2f}x pydantic-ai's"
        " (target: at most 0.5x)"
    )
    return r


# ---------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="10,50,100", help="sessions at once, comma-separated")
    parser.add_argument("--turns", type=int, default=50, help="tool turns of the per-turn run")
    parser.add_argument("--latency-ms", type=int, default=50, help="of the per-turn run")
    parser.add_argument("--batch-turns", type=int, default=5)
    parser.add_argument("--batch-latency-ms", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peer-version", default="2.68.0", help="of pydantic-ai-slim")
    parser.add_argument("--peer-venv", type=Path, help="pydantic-ai's virtual environment")
    parser.add_argument(
        "--peer-http",
        choices=("httpx", "aiohttp"),
        default="httpx",
        help="the peer's HTTP transport: httpx (as pydantic-ai ships) or aiohttp (duragent's)",
    )
    add_protocol_option(parser)
    return parser.parse_args()


@contextlib.contextmanager
def running(sides: list[Side]) -> Iterator[None]:
    try:
        yield
    finally:
        for side in sides:
            side.stop()


async def main() -> None:
    args = parse_args()
    ks = sorted({int(k) for k in args.ks.split(",") if k.strip()})
    python = peer_python(args.peer_venv or default_venv(args.peer_version), args.peer_version)
    began = time.monotonic()

    async with bench_stack({"conversations": {}}, args.protocol) as bench:
        args.model = bench.settings.model
        workspace = bench.home / "workspace"
        workspace.mkdir()
        for i in range(20):
            (workspace / f"file{i:02d}.txt").write_text("x\n")
            (workspace / f"dir{i:02d}").mkdir()
        sides: list[Side] = [
            Duragent(bench, workspace),
            PydanticAI(bench, workspace, python, args.peer_http, args.protocol),
        ]
        figures = {side.name: SideFigures() for side in sides}
        with running(sides):
            for side in sides:
                await side.start()
                await warm_up(side)
            for round_no in range(1, args.rounds + 1):
                line = [f"round {round_no}: per-turn median"]
                for side in sides:
                    times = await one_session(side, args.turns, args.latency_ms, figures[side.name])
                    line.append(f"{side.name} {median(times):.1f} ms")
                print(" ".join(line), flush=True)
                for k in ks:
                    line = [f"round {round_no}: K={k}"]
                    for side in sides:
                        percent = await batch(
                            side, k, args.batch_turns, args.batch_latency_ms, figures[side.name]
                        )
                        line.append(f"{side.name} {percent:.0f} %")
                    print(" ".join(line), flush=True)
            for side in sides:
                figures[side.name].peak_mb = peak_rss_mb(side.worker.pid)

    r = report(ks, figures, args)
    print(f"{args.rounds} rounds in {time.monotonic() - began:.0f} s")
    print(f"peers: {r:.2f} x")


if __name__ == "__main__":
    asyncio.run(main())
