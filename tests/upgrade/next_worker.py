"""A worker process of the next build: today's worker with `NextSessionRun` in place of
`SessionRun`. Run with tests/ on the path: `from upgrade import next_worker; next_worker.main()`.
"""

from __future__ import annotations

import duragent.client.workers
from upgrade.next_session_run import NextSessionRun


def main() -> None:
    # build_worker registers the workflow its module names: this process is the next build.
    duragent.client.workers.SessionRun = NextSessionRun  # type: ignore[attr-defined]
    from duragent import worker

    worker.main()
