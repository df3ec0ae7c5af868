"""`GET /metrics`: the API's Prometheus metrics, when `DURAGENT_API_METRICS` is on.

Two kinds (docs/ARCHITECTURE.md, "Metrics and traces"):
- what the store says, counted at each scrape (`store.metrics`, read through the
  client), so every API process reports the same figures whichever worker wrote them:
  `duragent_sessions`, `duragent_runs_in_progress{phase}`,
  `duragent_input_queue_waiting{kind}` (next_turn, guidance) and
  `duragent_approvals_waiting`;
- what this process did: `duragent_api_requests_total{method,route,code}`, by the route's
  template (`/api/sessions/{session_id}/state`), never a path with ids in it.

The endpoint takes no token, as Prometheus endpoints go: it shows counts only (no
session, user, text or id), and the worker's endpoint, which the Temporal SDK serves,
has none either. Off (the default) there is no route: 404.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import get_args

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from duragent import StoreFigures
from duragent.client.api import DuragentClient
from duragent.domain.runs import Phase

PATH = "/metrics"


def mount_metrics(app: FastAPI, client: DuragentClient) -> None:
    """Serve `GET /metrics` on `app` and count its requests, if the settings say so."""
    if not client.settings.api_metrics:
        return
    registry = CollectorRegistry()
    store = StoreCollector()
    registry.register(store)
    requests = Counter(
        "duragent_api_requests",
        "HTTP requests the API answered, by method, route template and status code.",
        ["method", "route", "code"],
        registry=registry,
    )
    app.add_middleware(RequestCounter, counter=requests, routes=app.router.routes)

    @app.get(PATH, include_in_schema=False)
    async def metrics() -> Response:
        # The store is read (on a worker thread) before the registry is: its collectors
        # are synchronous. Nothing is awaited between the two, so a scrape's figures are
        # its own.
        store.figures = await client.sessions.figures()
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


class StoreCollector(Collector):
    """Gauges from the store's figures, read by the route when Prometheus scrapes."""

    def __init__(self) -> None:
        self.figures: StoreFigures | None = None

    def collect(self) -> Iterator[Metric]:
        figures = self.figures
        if figures is None:  # the registry's own description, before any scrape
            return
        yield GaugeMetricFamily("duragent_sessions", "Sessions in the store.", figures.sessions)
        runs = GaugeMetricFamily(
            "duragent_runs_in_progress", "Runs in progress, by phase.", labels=["phase"]
        )
        # Every phase is listed, at zero too: a series that vanishes reads as "no data".
        for phase in _with_known(figures.runs_in_progress, get_args(Phase)):
            runs.add_metric([phase], figures.runs_in_progress.get(phase, 0))
        yield runs
        waiting = GaugeMetricFamily(
            "duragent_input_queue_waiting",
            "Input-queue items waiting for a run, by kind (next_turn, guidance).",
            labels=["kind"],
        )
        for kind in _with_known(figures.input_waiting, figures.input_kinds):
            waiting.add_metric([kind], figures.input_waiting.get(kind, 0))
        yield waiting
        yield GaugeMetricFamily(
            "duragent_approvals_waiting",
            "Tool calls of running runs waiting for a person's decision.",
            figures.approvals_waiting,
        )


def _with_known(found: dict[str, int], known: tuple[str, ...]) -> list[str]:
    return [*known, *sorted(set(found) - set(known))]


class RequestCounter:
    """Counts each HTTP request once it is answered (pure ASGI: a streamed response,
    such as the event stream, passes through untouched)."""

    def __init__(self, app: ASGIApp, counter: Counter, routes: list[BaseRoute]) -> None:
        self._app = app
        self._counter = counter
        self._routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        code = 500  # an app that fails before it answers

        async def answered(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, answered)
        finally:
            route = getattr(scope.get("route"), "path", None) or self._template(scope)
            self._counter.labels(scope["method"], route, str(code)).inc()

    def _template(self, scope: Scope) -> str:
        """The template of the route a request refused before routing (a body over the
        size limit: 413) was for. A path no route matches is counted under one label, so
        ids in paths never become series."""
        for route in self._routes:
            if isinstance(route, Route) and route.matches(scope)[0] is Match.FULL:
                return route.path
        return "unmatched"
