"""Run events as lines in a terminal, as they happen."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from store.records import StoredEvent

FIRST_LINE_CHARS = 100


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= FIRST_LINE_CHARS else line[: FIRST_LINE_CHARS - 1] + "…"


def _text(content: list[dict[str, Any]]) -> str:
    return "\n".join(block.get("text", "") for block in content if block.get("type") == "text")


class EventPrinter:
    """Prints one event at a time; streamed text is written as it arrives."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._streaming = False
        self._started: set[str] = set()

    def _end_stream(self) -> None:
        if self._streaming:
            self.console.print()
            self._streaming = False

    def show(self, event: StoredEvent) -> None:
        payload = event.payload
        kind = event.type
        if kind == "message_update" and payload["kind"] == "text":
            if not self._streaming:
                self.console.print("[bold cyan]assistant[/] ", end="")
                self._streaming = True
            self.console.out(payload["delta"], end="", highlight=False)
            return
        if kind == "message_update":
            return
        self._end_stream()
        if kind == "message_start" and payload["entry_id"] in self._started:
            self.console.print("  [magenta]↻ the model call was interrupted; asking again[/]")
        elif kind == "message_start":
            self._started.add(payload["entry_id"])
        elif kind == "turn_start" and payload["turn"] > 1:
            self.console.rule(f"turn {payload['turn']}", style="dim")
        elif kind == "message_end" and payload["message"]["role"] == "user":
            text = _text(payload["message"]["content"])
            self.console.print(f"[bold green]you[/] {escape(text)}")
        elif kind == "message_end" and payload["message"]["role"] == "assistant":
            message = payload["message"]
            if message.get("stop_reason") == "error":
                self.console.print(
                    f"[red]model error:[/] {escape(message.get('error_message') or '')}"
                )
        elif kind == "tool_execution_start":
            args = payload["args"]
            shown = args.get("command") or args.get("path") or args.get("pattern") or ""
            self.console.print(f"  [yellow]→ {payload['tool_name']}[/] {escape(str(shown))}")
        elif kind == "tool_execution_end":
            result = payload["result"]
            mark = "[red]✗[/]" if result["is_error"] else "[green]✓[/]"
            line = escape(_first_line(_text(result["content"])))
            took = f"{payload['duration_ms']} ms"
            self.console.print(f"  {mark} {payload['tool_name']} ({took}) [dim]{line}[/]")
        elif kind == "retry_scheduled":
            self._started.clear()  # the call starts again, and this line says why
            self.console.print(
                f"  [magenta]↻ model call failed ({escape(payload['error'])});"
                f" retrying in {payload['delay_ms'] / 1000:.1f} s[/]"
            )
        elif kind == "agent_end":
            usage = payload.get("usage") or {}
            tokens = sum(v for v in usage.values() if isinstance(v, int))
            style = "green" if payload["status"] == "completed" else "red"
            error = f": {escape(payload['error'])}" if payload.get("error") else ""
            self.console.print(
                f"[{style}]run {payload['status']}[/] after {payload['turns']} turn(s),"
                f" {tokens} tokens{error}"
            )
