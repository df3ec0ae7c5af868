"""Each session's usage per run and model, kept up to date by reading only the assistant
messages stored since the last read (`store.usage`): a page that asks for its session's
cost at every turn reads each message once, not the whole session each time."""

from __future__ import annotations

import threading
from collections import OrderedDict

from sqlalchemy.orm import Session

from duragent.domain.cost import ModelUsage
from duragent.store import usage
from duragent.store.usage import RunUsage

SESSIONS_KEPT = 1_000
"""Sessions whose sums are kept (least recently read dropped first): about 200 bytes each
per run and model."""


class UsageTally:
    def __init__(self, sessions_kept: int = SESSIONS_KEPT) -> None:
        self._kept: OrderedDict[str, tuple[int, RunUsage]] = OrderedDict()
        self._limit = sessions_kept
        self._lock = threading.Lock()

    def read(self, db: Session, session_id: str) -> dict[str, list[ModelUsage]]:
        """The session's usage per run and model, as `db` sees it now."""
        with self._lock:
            after, known = self._kept.get(session_id, (0, {}))
        # A copy: another thread may be adding to the kept sums meanwhile.
        sums: RunUsage = {
            run: {model: list(counts) for model, counts in models.items()}
            for run, models in known.items()
        }
        last = usage.usage_after(db, session_id, after, sums)
        with self._lock:
            kept = self._kept.get(session_id)
            if kept is None or kept[0] < last:
                self._kept[session_id] = (last, sums)
            self._kept.move_to_end(session_id)
            while len(self._kept) > self._limit:
                self._kept.popitem(last=False)
        return usage.model_usage(sums)
