"""Wall-clock time for bookkeeping columns (never used for entry timestamps)."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
