"""The ``temporal server start-dev`` command line: which flags, and why each value."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

#: Custom search attributes registered at every start (name -> Temporal type).
#: Registering an attribute that already exists with the same type is a no-op,
#: so restarting on an existing database file is safe.
SEARCH_ATTRIBUTES: dict[str, str] = {
    "DuragentSessionId": "Keyword",
    "DuragentRunId": "Keyword",
    "DuragentKind": "Keyword",
}

#: Dynamic config passed as ``--dynamic-config-value KEY=VALUE`` (values are JSON).
#:
#: The server silently ignores unknown keys, so every key here was checked to be
#: a registered setting of the bundled server (1.32).
DYNAMIC_CONFIG: dict[str, str] = {
    # The history service's queue processors poll their task queues at most 20
    # times per second by default. Every workflow/activity task hand-off waits
    # on the transfer queue's polls, so on an otherwise idle dev server this
    # limit, not CPU or SQLite, dominates latency (measured, one activity round
    # trip: ~37 ms -> ~8 ms). The timer queue (workflow sleeps, timeouts) and
    # visibility queue (list/count freshness) have the same limit.
    "history.transferProcessorMaxPollRPS": "10000",
    "history.timerProcessorMaxPollRPS": "10000",
    "history.visibilityProcessorMaxPollRPS": "10000",
    # Timer tasks (heartbeat timeouts, retry backoffs, workflow sleeps) are read up to
    # this far ahead and fire up to this late; the default second would add a second to
    # every crash recovery and every provider retry.
    "history.timerProcessorMaxTimeShift": '"100ms"',
    # Workflow updates are how the harness steers a running agent; these are
    # already on by default in recent servers and are pinned so that an older
    # binary behaves the same.
    "frontend.enableUpdateWorkflowExecution": "true",
    "frontend.enableUpdateWorkflowExecutionAsyncAccepted": "true",
}

#: SQLite pragmas passed as ``--sqlite-pragma NAME=VALUE``. WAL lets readers
#: (visibility queries) proceed while history writes, and ``synchronous=normal``
#: is the usual durable-enough pairing for WAL: a power loss can drop the last
#: transactions but never corrupts the file, and a process crash loses nothing.
SQLITE_PRAGMAS: dict[str, str] = {
    "journal_mode": "wal",
    "synchronous": "normal",
}


def start_dev_argv(
    binary: Path,
    db_file: Path,
    *,
    port: int,
    ip: str,
    namespace: str,
    ui_port: int | None,
    metrics_port: int | None = None,
) -> list[str]:
    """The argv of a dev server on ``db_file`` serving ``ip:port`` (headless when
    ``ui_port`` is None; Prometheus metrics at ``metrics_port``, when given, else on a
    port of the server's choosing)."""
    argv = [
        str(binary),
        "server",
        "start-dev",
        "--db-filename",
        str(db_file),
        "--port",
        str(port),
        "--ip",
        ip,
    ]
    if namespace != "default":
        argv += ["--namespace", namespace]
    for key, kind in SEARCH_ATTRIBUTES.items():
        argv += ["--search-attribute", f"{key}={kind}"]
    for key, value in DYNAMIC_CONFIG.items():
        argv += ["--dynamic-config-value", f"{key}={value}"]
    for pragma, value in SQLITE_PRAGMAS.items():
        argv += ["--sqlite-pragma", f"{pragma}={value}"]
    # "warn" keeps the log file small; the server is chatty at info level.
    argv += ["--log-level", "warn"]
    if metrics_port is not None:
        argv += ["--metrics-port", str(metrics_port)]
    if ui_port is None:
        argv.append("--headless")
    else:
        argv += ["--ui-port", str(ui_port)]
    return argv


def server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: ours without OpenTelemetry's variables. They are set for
    the processes that start the dev server; the server reads them too, and fails to start
    on an exporter it lacks (``OTEL_TRACES_EXPORTER=console``) or sends its own spans to
    the collector the user meant for theirs."""
    return {key: value for key, value in environ.items() if not key.startswith("OTEL_")}
