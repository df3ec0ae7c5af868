"""Prometheus metrics of a worker: Temporal's SDK metrics and duragent's own, one endpoint.

Off unless `DURAGENT_WORKER_METRICS` names a `host:port`. Then the worker's Temporal
client runs on a `Runtime` whose telemetry serves Prometheus text at
`http://host:port/metrics` (the SDK's own server: workflow and activity task latencies,
pollers, slots, sticky cache, requests...), and duragent's metrics are recorded through
that runtime's metric meter, so both come from the one endpoint. Off, nothing is
recorded and no interceptor is installed: the cost is nil.

duragent's metrics are read from what activities take and return, by an activity
interceptor, so the activities themselves know nothing of them. An activity counts when
an attempt of it completes on this worker; an attempt that a dead worker never finished
counts nowhere (replaying a workflow runs no activity, so counts nothing again). Names
(docs/ARCHITECTURE.md, "Metrics and traces"):

- `duragent_runs_started_total{kind}`, `duragent_runs_finished_total{status}` (by outcome)
- `duragent_turns_total{model}`: model turns completed
- `duragent_model_tokens_total{model,kind}`: input, output, cache_read, cache_write
- `duragent_model_call_cost_usd{model}`: a histogram; its `_sum` is the dollars spent
  (tokens, cost and durations count compaction and branch summaries' calls too: they
  are paid for like turns, though they are not turns)
- `duragent_model_call_duration_seconds{model}`, `duragent_model_call_failures_total{kind}`
- `duragent_tool_call_duration_seconds{tool,outcome}`: its `_count` counts calls (a
  `delegate` call's, from its sub-agent's start to its answer); outcome ok, error,
  interrupted or refused
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.common import MetricMeter
from temporalio.exceptions import ApplicationError
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from duragent.activities.prices import price_table
from duragent.domain.cost import usage_cost
from duragent.domain.errors import DuragentError
from duragent.domain.messages import Usage
from duragent.domain.prices import PriceTable
from duragent.domain.subagents import FINISH_SUBAGENT, FinishSubagentInput
from duragent.domain.tools import ToolCallRef
from duragent.domain.tree_ops import SUMMARIZE, SummarizeResult
from duragent.domain.turns import (
    FINISH_RUN,
    MODEL_TURN,
    PROVIDER_ERROR,
    RUN_TOOL,
    START_RUN,
    TAKE_TURN,
    FinishRunInput,
    ModelReply,
    StartRunInput,
    ToolCallInput,
    ToolCallOutcome,
    TurnResult,
)
from duragent.settings import Settings

RUNS_STARTED = "duragent_runs_started_total"
RUNS_FINISHED = "duragent_runs_finished_total"
TURNS = "duragent_turns_total"
MODEL_TOKENS = "duragent_model_tokens_total"
MODEL_COST = "duragent_model_call_cost_usd"
MODEL_DURATION = "duragent_model_call_duration_seconds"
MODEL_FAILURES = "duragent_model_call_failures_total"
TOOL_DURATION = "duragent_tool_call_duration_seconds"

# The SDK's default buckets are milliseconds; these are seconds and dollars.
_BUCKETS: Mapping[str, Sequence[float]] = {
    MODEL_COST: (0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
    MODEL_DURATION: (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
    TOOL_DURATION: (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800),
}


def worker_runtime(settings: Settings) -> Runtime | None:
    """The Temporal runtime a worker's client connects with: one serving Prometheus
    metrics at `settings.worker_metrics`, or None (the SDK's default runtime) when that
    is unset.

    Raises:
        DuragentError: the address cannot be bound (in use, not this machine's), naming
            the setting.
    """
    if settings.worker_metrics is None:
        return None
    return _prometheus_runtime(settings.worker_metrics.strip())


@functools.cache
def _prometheus_runtime(address: str) -> Runtime:
    # One per address and process: a second runtime could not bind the port again, and
    # every worker of the process may share the one endpoint.
    try:
        return Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(bind_address=address, histogram_bucket_overrides=_BUCKETS)
            )
        )
    except ValueError as err:  # the SDK's "Failed starting Prometheus exporter: ..."
        raise DuragentError(
            f"DURAGENT_WORKER_METRICS={address}: cannot serve metrics there ({err})"
        ) from None


def worker_interceptors(client: Client, settings: Settings) -> list[Interceptor]:
    """The metrics interceptor when `client`'s runtime records metrics, else none (the
    SDK's default runtime has a no-op meter: nothing would be recorded). Costs are priced
    with the worker's table (`DURAGENT_PRICES_FILE` over the bundled one)."""
    runtime = client.service_client.config.runtime or Runtime.default()
    meter = runtime.metric_meter
    if meter is MetricMeter.noop:
        return []
    return [MetricsInterceptor(WorkerMetrics(meter, price_table(settings.prices_file)))]


class WorkerMetrics:
    """duragent's instruments on a Temporal metric meter, and what each activity adds."""

    def __init__(self, meter: MetricMeter, prices: PriceTable) -> None:
        self._prices = prices
        self.runs_started = meter.create_counter(RUNS_STARTED, "Runs started, by kind.")
        self.runs_finished = meter.create_counter(
            RUNS_FINISHED, "Runs finished, by outcome (status)."
        )
        self.turns = meter.create_counter(TURNS, "Model turns completed, by model.")
        self.tokens = meter.create_counter(
            MODEL_TOKENS, "Tokens of completed model calls, by model and kind.", "tokens"
        )
        self.cost = meter.create_histogram_float(
            MODEL_COST, "US dollars per model call, at the worker's price table.", "USD"
        )
        self.model_duration = meter.create_histogram_float(
            MODEL_DURATION, "Seconds per completed model call (store work included).", "s"
        )
        self.model_failures = meter.create_counter(
            MODEL_FAILURES, "Model calls the provider failed, by kind of failure."
        )
        self.tool_duration = meter.create_histogram_float(
            TOOL_DURATION, "Seconds per tool call, by tool and outcome.", "s"
        )

    def activity_done(self, name: str, args: Sequence[Any], result: Any, seconds: float) -> None:
        data = args[0] if args else None
        if name == MODEL_TURN and isinstance(result, ModelReply):
            self.turns.add(1, {"model": result.model or "unknown"})
            self._model_call(result.model, result.usage, seconds)
        elif name == TAKE_TURN and isinstance(result, TurnResult):
            reply = result.reply
            self.turns.add(1, {"model": reply.model or "unknown"})
            self._model_call(reply.model, reply.usage, result.model_ms / 1000)
            for call, outcome in zip(reply.tool_calls, result.outcomes, strict=False):
                if outcome is not None:
                    self._tool_call(call, outcome)
        elif name == SUMMARIZE and isinstance(result, SummarizeResult):
            self._model_call(result.cost.model if result.cost else None, result.usage, seconds)
        elif name in (RUN_TOOL, FINISH_SUBAGENT) and isinstance(result, ToolCallOutcome):
            # A `delegate` call never reaches the tool activity: its outcome is staged
            # when the sub-agent's run is over, with the call's whole duration.
            if isinstance(data, (ToolCallInput, FinishSubagentInput)):
                self._tool_call(data.call, result)
        elif name == START_RUN and isinstance(data, StartRunInput):
            self.runs_started.add(1, {"kind": data.kind})
        elif name == FINISH_RUN and isinstance(data, FinishRunInput):
            self.runs_finished.add(1, {"status": data.status})

    def activity_failed(self, name: str, error: BaseException) -> None:
        if (
            name in (MODEL_TURN, TAKE_TURN)
            and isinstance(error, ApplicationError)
            and error.type == PROVIDER_ERROR
        ):
            details = error.details[0] if error.details else None
            kind = details.get("kind") if isinstance(details, dict) else None
            self.model_failures.add(1, {"kind": str(kind or "unknown")})

    def _model_call(self, name: str | None, usage: Usage, seconds: float) -> None:
        model = name or "unknown"
        labels = {"model": model}
        for kind, count in _token_kinds(usage):
            if count:
                self.tokens.add(count, {"model": model, "kind": kind})
        self.model_duration.record(seconds, labels)
        price = self._prices.price_of(name)
        if price is not None:  # an unpriced model's cost is unknown: never a guess
            self.cost.record(usage_cost(usage, price), labels)

    def _tool_call(self, call: ToolCallRef, outcome: ToolCallOutcome) -> None:
        if call.refused is not None:
            kind = "refused"
        elif outcome.interrupted:
            kind = "interrupted"
        else:
            kind = "error" if outcome.is_error else "ok"
        self.tool_duration.record(outcome.duration_ms / 1000, {"tool": call.name, "outcome": kind})


def _token_kinds(usage: Usage) -> list[tuple[str, int]]:
    return [
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
        ("cache_read", usage.cache_read_tokens),
        ("cache_write", usage.cache_write_tokens),
    ]


class MetricsInterceptor(Interceptor):
    """Records `WorkerMetrics` from each activity's input and result (or failure)."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self._metrics = metrics

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityMetrics(next, self._metrics)


class _ActivityMetrics(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, metrics: WorkerMetrics) -> None:
        super().__init__(next)
        self._metrics = metrics

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        name = activity.info().activity_type
        started = time.monotonic()
        try:
            result = await super().execute_activity(input)
        except BaseException as error:
            self._metrics.activity_failed(name, error)
            raise
        self._metrics.activity_done(name, input.args, result, time.monotonic() - started)
        return result
