"""The terminal view of run events: what `duragent run` prints as a run happens."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from client.render import EventPrinter
from store.records import StoredEvent


def printed(*events: tuple[str, dict[str, Any]]) -> str:
    console = Console(record=True, width=100, color_system=None)
    printer = EventPrinter(console)
    for seq, (kind, payload) in enumerate(events, start=1):
        printer.show(
            StoredEvent(
                seq=seq, session_id="s", run_id="r", type=kind, payload=payload, created_at=0
            )
        )
    return console.export_text()


START = ("message_start", {"entry_id": "a1", "message": {"role": "assistant", "content": []}})


def delta(text: str) -> tuple[str, dict[str, Any]]:
    return ("message_update", {"entry_id": "a1", "kind": "text", "delta": text})


def test_streamed_text_and_a_model_call_made_again_after_a_crash() -> None:
    text = printed(START, delta("Hel"), delta("lo"), START, delta("Hello again"))
    assert text.splitlines() == [
        "assistant Hello",
        "  ↻ the model call was interrupted; asking again",
        "assistant Hello again",
    ]


def test_a_provider_retry_is_announced_once() -> None:
    retry = {"turn": 1, "attempt": 1, "delay_ms": 1500, "error": "overloaded"}
    text = printed(START, ("retry_scheduled", retry), START, delta("Fine."))
    assert text.splitlines() == [
        "  ↻ model call failed (overloaded); retrying in 1.5 s",
        "assistant Fine.",
    ]
