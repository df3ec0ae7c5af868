"""The `duragent with tracing` column of bench/overhead.py: the same stack with tracing on.

Its client, worker and model client trace as a traced deployment's do (`telemetry`), on a
task queue of their own, and the spans go in batches over OTLP/HTTP to a receiver in a
process of its own, which decodes and counts them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator

from common import Bench
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from duragent.activities.models.anthropic_model import AnthropicModel
from duragent.activities.models.clients import ModelClients
from duragent.client.api import DuragentClient
from duragent.telemetry import tracing
from duragent.worker import build_worker, model_clients

RECEIVER = """
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

count = 0
lock = threading.Lock()

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest.FromString(body)
        spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        with lock:
            count += spans
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        body = json.dumps({"spans": count}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@contextlib.asynccontextmanager
async def traced_duragent(bench: Bench) -> AsyncIterator[Bench]:
    """`bench` with a traced client, and a traced worker running for it; on leaving,
    prints how many spans the receiver got."""
    receiver = subprocess.Popen(
        [sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert receiver.stdout is not None
        endpoint = f"http://127.0.0.1:{int(receiver.stdout.readline())}"
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint  # read by the exporter
        provider = tracing.new_tracer_provider(tracing.TracingConfig(("otlp",)))
        settings = bench.settings.model_copy(
            update={"task_queue": bench.settings.task_queue + "-traced"}
        )
        temporal = await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
            interceptors=tracing.client_interceptors(provider),
        )
        made = model_clients(settings)
        claude = made.for_model(settings.model)
        assert isinstance(claude, AnthropicModel)
        model = claude.with_options(
            open_telemetry={**claude.sdk.open_telemetry, "tracer_provider": provider}
        )
        db = bench.client.db
        models = ModelClients(given={"anthropic": model})
        async with build_worker(temporal, db, settings, models=models):
            yield dataclasses.replace(
                bench, settings=settings, client=DuragentClient(temporal, db, settings)
            )
        await made.aclose()
        provider.force_flush()
        with urllib.request.urlopen(endpoint) as answer:
            print(f"spans exported with tracing on: {json.load(answer)['spans']}")
        provider.shutdown()
    finally:
        receiver.kill()
        receiver.wait()
