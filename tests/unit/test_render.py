"""The terminal view of run events: what `duragent run` prints as a run happens, a running
tool's output included (here as printed when piped: lines as they complete, cleaned,
bounded)."""

from __future__ import annotations

import io
import time
from typing import Any

import pytest
from rich.console import Console

from duragent.client import render
from duragent.client.render import EventPrinter
from duragent.store.records import StoredEvent

pytestmark = pytest.mark.fast


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


def event(kind: str, **payload: Any) -> StoredEvent:
    return StoredEvent(seq=1, session_id="s", run_id="r", type=kind, payload=payload, created_at=0)


def start(call: str = "c1") -> StoredEvent:
    return event("tool_execution_start", tool_call_id=call, tool_name="bash", args={})


def update(text: str, call: str = "c1") -> StoredEvent:
    return event("tool_execution_update", tool_call_id=call, tool_name="bash", partial=text)


def end(call: str = "c1") -> StoredEvent:
    result = {"content": [{"type": "text", "text": "ok"}], "is_error": False}
    return event(
        "tool_execution_end", tool_call_id=call, tool_name="bash", result=result, duration_ms=5
    )


def piped() -> tuple[EventPrinter, io.StringIO]:
    out = io.StringIO()
    return EventPrinter(Console(file=out, width=80), "SESSION"), out


def output_lines(out: io.StringIO) -> list[str]:
    return [line[6:] for line in out.getvalue().splitlines() if line.startswith("    │ ")]


def test_lines_show_once_complete_and_the_rest_when_the_tool_ends() -> None:
    printer, out = piped()
    printer.show(start())
    printer.show(update("one\ntw"))
    assert output_lines(out) == ["one"]
    printer.show(update("o\r\nthree"))
    assert output_lines(out) == ["one", "two"]
    printer.show(end())
    assert output_lines(out) == ["one", "two", "three"]
    assert out.getvalue().splitlines()[-1].startswith("  ✓ bash (5 ms)")


def test_escapes_and_control_characters_are_dropped_and_long_lines_cut() -> None:
    printer, out = piped()
    printer.show(start())
    printer.show(update("\x1b[31mred\x1b[0m\x07 done\n" + "x" * 1000 + "\n"))
    printer.show(end())
    lines = output_lines(out)
    assert lines[0] == "red done"
    assert lines[1] == "x" * (render.OUTPUT_LINE_CHARS - 1) + "…"


def test_a_chatty_tool_prints_a_bounded_head_then_says_how_much_more() -> None:
    printer, out = piped()
    printer.show(start())
    printer.show(update("".join(f"line {i}\n" for i in range(1, 10_001))))
    printer.show(end())
    lines = output_lines(out)
    assert lines[: render.PIPED_LINES] == [f"line {i}" for i in range(1, render.PIPED_LINES + 1)]
    assert lines[-1] == (
        f"… {10_000 - render.PIPED_LINES} more line(s) not shown (all of it: duragent show SESSION)"
    )
    assert len(lines) == render.PIPED_LINES + 1


def test_a_long_quiet_stretch_gets_progress_lines(monkeypatch: Any) -> None:
    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    printer, out = piped()
    printer.show(start())
    printer.show(update("".join(f"line {i}\n" for i in range(1, 31))))
    clock[0] = render.PIPED_PROGRESS_S
    printer.show(update("line 31\n"))
    printer.show(update("line 32\n"))  # within the next interval: counted only
    printer.show(end())
    lines = output_lines(out)
    assert "… 11 more line(s) so far; latest: line 31" in lines
    assert not any("latest: line 32" in line for line in lines)


def test_a_call_line_shows_the_arguments_of_any_tool() -> None:
    def call(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return ("tool_execution_start", {"tool_call_id": name, "tool_name": name, "args": args})

    long_note = "x" * 200
    text = printed(
        call("bash", {"command": "ls -la"}),
        call("ls", {}),
        call("lookup_order", {"order_id": "A-1"}),
        call("note", {"text": long_note}),
    )
    lines = [line.rstrip() for line in text.splitlines()]
    assert lines[:3] == ["  → bash ls -la", "  → ls", '  → lookup_order {"order_id":"A-1"}']
    assert lines[3].startswith('  → note {"text":"xxx') and lines[3].endswith("…")
    assert len(lines[3]) == len("  → note ") + 80
