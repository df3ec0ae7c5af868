"""OpenTelemetry traces: one trace per run, from the client call that starts it through the
workflow to every activity, with a span for each model call (the GenAI semantic
conventions) and each tool call.

Off unless the standard variables turn it on: `OTEL_TRACES_EXPORTER=otlp` (or `console`),
or an OTLP endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
with no exporter named. `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none` keep it
off. Spans go over OTLP/HTTP (protobuf); the exporter and its batching read their own
variables (`OTEL_EXPORTER_OTLP_*`, `OTEL_BSP_*`), the resource `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES` (service name `duragent` when neither names one). Off, nothing
of OpenTelemetry's SDK is loaded and no interceptor is installed: tracing costs nothing.

Temporal's `TracingInterceptor` makes the client, workflow and activity spans and carries
the context in Temporal headers; its workflow spans are made only when the workflow is
not replaying, so a worker that replays a run after another one died adds none twice.
Each model call's span is the Anthropic SDK's own (it traces through the global tracer
provider, set up here), inside the `model_turn` activity's span; `telemetry.call_spans`
adds the run's context to it and a span for each tool call. A span ends with its attempt:
an attempt whose worker died exports nothing, and its retry exports its own.

The trace of a run starts in the process that starts the run (`duragent run`, the API):
turn tracing on there as well as in the workers, or each activity makes a trace of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio.client import Client
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.worker import Interceptor as WorkerInterceptor

from duragent.domain.errors import DuragentError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

SERVICE_NAME = "duragent"
EXPORTERS = ("otlp", "console")
OTLP_PROTOCOL = "http/protobuf"


class TracingConfigError(DuragentError):
    """An `OTEL_*` variable asks for something tracing cannot do; the message names it."""


@dataclass(frozen=True)
class TracingConfig:
    exporters: tuple[str, ...]
    """Where spans go: `otlp` (OTLP over HTTP) and/or `console` (stdout)."""


def tracing_config(environ: Mapping[str, str]) -> TracingConfig | None:
    """What the `OTEL_*` variables in `environ` ask for; None: tracing is off.

    Raises:
        TracingConfigError: an exporter or OTLP protocol that is not supported.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    named = [n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",")]
    named = [n for n in named if n]
    if not named:
        endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        named = ["otlp"] if any(environ.get(v, "").strip() for v in endpoints) else ["none"]
    if named == ["none"]:
        return None
    unknown = [n for n in named if n not in EXPORTERS]
    if unknown:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER: {', '.join(unknown)} is not one of "
            f"{', '.join(EXPORTERS)} or none"
        )
    if "otlp" in named:
        for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            protocol = environ.get(variable, "").strip()
            if protocol:
                if protocol != OTLP_PROTOCOL:
                    raise TracingConfigError(
                        f"{variable}: {protocol!r} is not supported; traces go over "
                        f"OTLP/HTTP ({OTLP_PROTOCOL})"
                    )
                break
    return TracingConfig(tuple(dict.fromkeys(named)))


_provider: TracerProvider | None = None
_configured = False


def process_tracer_provider() -> TracerProvider | None:
    """This process's tracer provider, set up from the environment on the first call
    (and made the global one); None when tracing is off."""
    global _provider, _configured
    if not _configured:
        config = tracing_config(os.environ)
        _provider = None if config is None else _global_provider(config)
        _configured = True
    return _provider


def _global_provider(config: TracingConfig) -> TracerProvider:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # the embedding program set one up: use it
        return current
    provider = new_tracer_provider(config)
    trace.set_tracer_provider(provider)
    return provider


def new_tracer_provider(config: TracingConfig) -> TracerProvider:
    """A tracer provider exporting in batches where `config` says."""
    from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_NAME_KEY
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME_KEY, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME_KEY: SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    from duragent.telemetry.call_spans import CallContext

    provider.add_span_processor(CallContext())  # before the exporters: it adds attributes
    for name in config.exporters:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    return provider


def client_interceptors(provider: TracerProvider | None = None) -> list[ClientInterceptor]:
    """For `Client.connect`: tracing with `provider` (default: the process's, from the
    environment); none when tracing is off. A client's workers inherit it."""
    provider = provider or process_tracer_provider()
    if provider is None:
        return []
    from duragent.telemetry.call_spans import DuragentTracing  # loads OpenTelemetry: only when on

    return [DuragentTracing(provider)]


def worker_interceptors(client: Client) -> list[WorkerInterceptor]:
    """For a worker of `client`: what tracing its client does not bring already (workers
    inherit their client's interceptors; one registered twice would trace twice)."""
    provider = process_tracer_provider()
    if provider is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    from duragent.telemetry.call_spans import CallSpans, DuragentTracing

    from_client = client.config()["interceptors"]
    if any(isinstance(i, DuragentTracing) for i in from_client):
        return []
    if any(isinstance(i, TracingInterceptor) for i in from_client):
        return [CallSpans(provider)]
    return [DuragentTracing(provider)]
