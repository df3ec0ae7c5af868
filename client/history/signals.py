"""Signals and cancellation in a run's history: each signal a client sent, the abort
asked for, and, once the history is read, when each signal's content reached the session
(the save point that carried it) or what became of it."""

from __future__ import annotations

from typing import Any

from temporalio.api.history import v1 as history_v1
from temporalio.api.history.v1 import HistoryEvent

from duragent.client.history.summaries import signal_content
from duragent.client.history.timeline import TimelineItem
from duragent.client.history.values import decode, preview


class Signals:
    """`_Reader`'s handlers for signals and cancellation requests, and the matching of
    signals to the save points that delivered them (it provides `_add` and `items`)."""

    items: list[TimelineItem]

    def _add(self, event: HistoryEvent, kind: str, summary: str, **details: Any) -> TimelineItem:
        raise NotImplementedError

    def _on_workflow_execution_signaled(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionSignaledEventAttributes
    ) -> None:
        name = attrs.signal_name
        payload = decode(attrs.input)
        details: dict[str, Any] = {"signal": name, "identity": attrs.identity or None}
        what, carried = signal_content(payload)
        details.update(carried)
        self._add(event, "signal", f"{name} {what}".rstrip(), **details)

    def _on_workflow_execution_cancel_requested(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionCancelRequestedEventAttributes
    ) -> None:
        reason = f": {attrs.cause}" if attrs.cause else ""
        self._add(
            event,
            "cancel",
            f"cancellation requested (abort){reason}",
            identity=attrs.identity or None,
            reason=attrs.cause or None,
        )

    def _match_deliveries(self) -> None:
        """Say in each steering, follow-up and change signal's item when its content
        reached the session: the first save point that consumed or wrote it."""
        saves = [item for item in self.items if item.kind == "save_point"]
        ended = next((item for item in self.items if item.kind == "run_ended"), None)
        for signal in (item for item in self.items if item.kind == "signal"):
            signal_id = signal.details.get("id")
            if not isinstance(signal_id, str):
                continue
            change = signal.details.get("signal") == "change"
            wanted = {signal_id, *signal.details.get("entry_ids", [])}
            for save in saves:
                if save.at < signal.at:
                    continue
                ids = [e["id"] for e in save.details["entries"]] if change else []
                consumed = [c.get("entry_id") for c in save.details["consumed"]]
                hit = any(i in wanted or str(i).startswith(signal_id + ".") for i in ids)
                if signal_id in consumed or hit or (change and save.details["session_config"]):
                    signal.details.update(
                        delivered_turn=save.turn, delivered_at=save.at.isoformat()
                    )
                    verb = "saved" if change else "delivered"
                    signal.summary += f" → {verb} at turn {save.turn}"
                    break
            else:
                signal.summary += " → " + _undelivered(signal, change, ended)


def _undelivered(signal: TimelineItem, change: bool, ended: TimelineItem | None) -> str:
    """What became of a signal's content that no save point carried."""
    if ended is None:
        return "pending"
    if change:
        return "saved when the run finished"
    cleared = [
        *ended.details.get("cleared_steering", []),
        *ended.details.get("cleared_follow_ups", []),
    ]
    if signal.details.get("text") in [preview(text) for text in cleared]:
        return "dropped by the abort"
    return "kept for the session's next run"
