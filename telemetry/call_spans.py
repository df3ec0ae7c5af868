"""What duragent adds to Temporal's spans: the run's context on each model call's span, and
a span for each tool call.

A model call's span is the Anthropic SDK's own (the OpenTelemetry GenAI conventions: model,
tokens, cache reads and writes, stop reason, time to first chunk), made inside the
`take_turn` (or `model_turn`) activity's span; `CallContext` adds the session, run, turn
and attempt to it. A tool call's span is made from the `run_tool` activity's input and
result once its attempt has ended, or as each call a `take_turn` activity runs ends
(`activities.take_turn.ON_CALL_ENDED`); a `delegate` call's (which never reaches
`run_tool`) from the `finish_subagent` activity's, spanning the sub-agent's run from its
start to its answer. Either way an attempt whose worker died never ends, so it leaves no
span behind, and its retry leaves its own.

Loaded only when tracing is on (`telemetry.tracing`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Span, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue
from temporalio import activity
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput
from temporalio.worker import Interceptor as WorkerInterceptor

from duragent.activities.take_turn import ON_CALL_ENDED
from duragent.domain.subagents import FINISH_SUBAGENT, FinishSubagentInput
from duragent.domain.tools import ToolCallRef
from duragent.domain.turns import RUN_TOOL, TAKE_TURN, ToolCallInput, ToolCallOutcome

TRACER_NAME = "duragent"
MODEL_SDK_SCOPE = "com.anthropic.sdk"
"""The instrumentation scope of the Anthropic SDK's spans (one per API call)."""

_RUN_CONTEXT: ContextVar[Mapping[str, AttributeValue] | None] = ContextVar(
    "duragent_run_context", default=None
)
"""The session, run, turn and attempt of the activity running in this context."""


class CallContext(SpanProcessor):
    """Adds the session, run, turn and attempt of the activity making it to each span of
    the Anthropic SDK (its model calls), as it starts."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        context = _RUN_CONTEXT.get()
        scope = span.instrumentation_scope
        if context and scope is not None and scope.name.startswith(MODEL_SDK_SCOPE):
            span.set_attributes(context)


class DuragentTracing(TracingInterceptor):
    """Temporal's `TracingInterceptor` on `provider`'s tracers, with the run's context for
    model call spans and a span per tool call inside the activity spans."""

    def __init__(self, provider: TracerProvider) -> None:
        super().__init__(provider.get_tracer("temporalio.contrib.opentelemetry"))
        self._calls = CallSpans(provider)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        inner: ActivityInboundInterceptor = self._calls.intercept_activity(next)
        outer: ActivityInboundInterceptor = super().intercept_activity(inner)
        return outer


class CallSpans(WorkerInterceptor):
    """The run's context for model call spans, and a span for each tool call."""

    def __init__(self, provider: TracerProvider) -> None:
        self._tracer = provider.get_tracer(TRACER_NAME)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _CallSpansInbound(next, self._tracer)


class _CallSpansInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, tracer: Tracer) -> None:
        super().__init__(next)
        self._tracer = tracer

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        data = input.args[0] if input.args else None
        session_id = getattr(data, "session_id", None)
        if not isinstance(session_id, str):
            return await super().execute_activity(input)
        info = activity.info()
        context: dict[str, AttributeValue] = {
            "gen_ai.conversation.id": session_id,
            "duragent.attempt": info.attempt,
        }
        run_id, turn = getattr(data, "run_id", None), getattr(data, "turn", None)
        if isinstance(run_id, str):
            context["duragent.run.id"] = run_id
        if isinstance(turn, int):
            context["duragent.turn"] = turn
        token = _RUN_CONTEXT.set(context)
        try:
            if info.activity_type == FINISH_SUBAGENT and isinstance(data, FinishSubagentInput):
                result = await super().execute_activity(input)
                began, ended = data.started_at_ms * 1_000_000, data.finished_at_ms * 1_000_000
                child = {"duragent.subagent.session.id": data.child_session_id or ""}
                times = (began, ended)
                _tool_span(self._tracer, data.call, result, times, {**context, **child}, None)
                return result
            if info.activity_type == TAKE_TURN:  # a span for each call it runs, as it ends

                def call_span(call: ToolCallRef, outcome: ToolCallOutcome, began: int) -> None:
                    _tool_span(self._tracer, call, outcome, (began, None), context, None)

                told = ON_CALL_ENDED.set(call_span)
                try:
                    return await super().execute_activity(input)
                finally:
                    ON_CALL_ENDED.reset(told)
            if info.activity_type != RUN_TOOL or not isinstance(data, ToolCallInput):
                return await super().execute_activity(input)
            began = time.time_ns()
            try:
                result = await super().execute_activity(input)
            except BaseException as exc:
                _tool_span(self._tracer, data.call, None, (began, None), context, exc)
                raise
            _tool_span(self._tracer, data.call, result, (began, None), context, None)
            return result
        finally:
            _RUN_CONTEXT.reset(token)


def _tool_span(
    tracer: Tracer,
    call: ToolCallRef,
    result: Any,
    times: tuple[int, int | None],
    context: Mapping[str, AttributeValue],
    error: BaseException | None,
) -> None:
    """`execute_tool <name>`: the attempt, with the call's outcome; made once it ended.
    `times`: when it began and ended (None: now), in nanoseconds since the epoch."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
        **context,
    }
    if isinstance(result, ToolCallOutcome):
        outcome = (
            "refused"
            if call.refused is not None
            else "interrupted"
            if result.interrupted
            else "error"
            if result.is_error
            else "ok"
        )
        attributes["duragent.tool.outcome"] = outcome
        attributes["duragent.tool.duration_ms"] = result.duration_ms
        if outcome != "ok":
            attributes["error.type"] = outcome
    elif error is not None:
        attributes["error.type"] = _error_type(error)
    began, ended = times
    span = tracer.start_span(
        f"execute_tool {call.name}", kind=SpanKind.INTERNAL, attributes=attributes, start_time=began
    )
    if "error.type" in attributes:
        description = f"{type(error).__name__}: {error}" if error else str(attributes["error.type"])
        span.set_status(Status(StatusCode.ERROR, description))
    span.end(end_time=ended)


def _error_type(error: BaseException) -> str:
    if isinstance(error, ApplicationError) and error.type:
        return error.type
    return type(error).__qualname__
