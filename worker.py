"""The duragent worker: hosts the session workflows and every activity they call.

Run it with `duragent worker` (or `python -m duragent.worker`); run as many as you like, on as
many machines as share the Temporal cluster and the database. The wiring is
`client.workers`, imported here under the names embedders use (`worker.build_worker`).
"""

from __future__ import annotations

import asyncio

from duragent.client.workers import (
    build_worker,
    model_clients,
    private_paths,
    run_worker,
    settle_worker_process,
    tool_registry,
)
from duragent.client.workflow_runner import workflow_runner
from duragent.settings import Settings

__all__ = [
    "build_worker",
    "main",
    "model_clients",
    "private_paths",
    "run_worker",
    "tool_registry",
    "workflow_runner",
]


def main() -> None:
    settle_worker_process()
    asyncio.run(run_worker(Settings.from_env()))


if __name__ == "__main__":
    main()
