"""Run events as lines in a terminal, as they happen."""

from __future__ import annotations

import json
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from duragent.domain.agents import shown_output
from duragent.domain.questions import ASK_USER_TOOL
from duragent.store.records import StoredEvent

FIRST_LINE_CHARS = 100
LIVE_LINES = 5
"""Lines of a running tool's latest output kept on screen (a terminal)."""
PIPED_LINES = 20
"""Lines of a tool's output printed as they come when the output is not a terminal; the
rest is counted, with a progress line at most every `PIPED_PROGRESS_S`."""
PIPED_PROGRESS_S = 10.0
OUTPUT_LINE_CHARS = 200
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
"""Terminal escapes and control characters: a tool's colours and cursor moves would break
the region its output is shown in."""


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return _cut(line, FIRST_LINE_CHARS)


def _cut(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _clean(line: str) -> str:
    return _cut(_CONTROL.sub("", line.expandtabs(4)), OUTPUT_LINE_CHARS)


def _text(content: list[dict[str, Any]]) -> str:
    return "\n".join(block.get("text", "") for block in content if block.get("type") == "text")


@dataclass
class _RunningTool:
    name: str
    started: float = field(default_factory=lambda: time.monotonic())
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=LIVE_LINES))
    partial: str = ""
    printed: int = 0
    held_back: int = 0
    last_progress: float = field(default_factory=lambda: time.monotonic())

    def add(self, chunk: str) -> list[str]:
        """Take a chunk of output; return the lines it completed, cleaned and cut."""
        text = (self.partial + chunk).replace("\r\n", "\n").replace("\r", "\n")
        *complete, self.partial = text.split("\n")
        if len(self.partial) > OUTPUT_LINE_CHARS:  # a line with no end in sight: show it
            complete.append(self.partial)
            self.partial = ""
        lines = [_clean(line) for line in complete]
        self.lines.extend(lines)
        return lines

    def latest(self) -> list[str]:
        partial = self.partial
        return [*self.lines, _clean(partial)] if partial else list(self.lines)


class ToolOutput:
    """The output of running tools while they run.

    On a terminal: a live region under the calls, with each running tool's latest lines
    and how long it has run, gone when the tool ends (its result line stays). Otherwise
    (a pipe, a file): the first `PIPED_LINES` lines of each call as plain lines, then a
    progress line now and then, and at the end how many lines were not shown.
    """

    def __init__(self, console: Console, session_id: str | None = None) -> None:
        self.console = console
        self._session_id = session_id
        self._running: dict[str, _RunningTool] = {}
        self._live: Live | None = None

    def start(self, call_id: str, name: str) -> None:
        self._running[call_id] = _RunningTool(name)
        if self.console.is_terminal and self._live is None:
            self._live = Live(
                console=self.console,
                transient=True,
                refresh_per_second=4,
                get_renderable=self._render,
            )
            self._live.start()

    def update(self, call_id: str, chunk: str) -> None:
        tool = self._running.get(call_id)
        if tool is None:
            return
        completed = tool.add(chunk)
        if self._live is not None:
            self._live.refresh()
            return
        for line in completed:
            self._print_piped(tool, line)

    def end(self, call_id: str) -> None:
        tool = self._running.pop(call_id, None)
        if tool is not None and self._live is None:
            if tool.partial:
                self._print_piped(tool, _clean(tool.partial))
            if tool.held_back:
                where = f": duragent show {self._session_id}" if self._session_id else ""
                self._line(f"… {tool.held_back} more line(s) not shown (all of it{where})")
        if not self._running:
            self.close()
        elif self._live is not None:
            self._live.refresh()

    def close(self) -> None:
        """End the live region (kept state is dropped with it)."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        self._running.clear()

    def _print_piped(self, tool: _RunningTool, line: str) -> None:
        if tool.printed < PIPED_LINES:
            tool.printed += 1
            self._line(line)
            return
        tool.held_back += 1
        now = time.monotonic()
        if now - tool.last_progress >= PIPED_PROGRESS_S:
            tool.last_progress = now
            self._line(f"… {tool.held_back} more line(s) so far; latest: {line}")

    def _line(self, line: str) -> None:
        # Lines are already cut to OUTPUT_LINE_CHARS: a pipe gets them whole.
        self.console.print(Text(f"    │ {line}", style="dim"), soft_wrap=True, highlight=False)

    def _render(self) -> RenderableType:
        # Called from the live region's refresh thread: read each structure once.
        rows: list[Text] = []
        for tool in list(self._running.values()):
            took = time.monotonic() - tool.started
            rows.append(Text(f"  ⋯ {tool.name} ({took:.0f} s)", style="yellow"))
            for line in tool.latest():
                text = Text("    │ ", style="dim") + Text(line, style="dim")
                text.no_wrap, text.overflow = True, "ellipsis"
                rows.append(text)
        return Group(*rows)


class EventPrinter:
    """Prints one event at a time; streamed text is written as it arrives, and a running
    tool's output while it runs (`ToolOutput`)."""

    def __init__(
        self,
        console: Console,
        session_id: str | None = None,
        run_cost: Callable[[str], str] | None = None,
    ) -> None:
        """`run_cost` says what a run (by id) cost, for its closing line; without it the
        line gives the run's tokens."""
        self.console = console
        self._run_cost = run_cost
        self._streaming = False
        self._started: set[str] = set()
        self._tools = ToolOutput(console, session_id)
        self._session = session_id or "SESSION"
        self._budget_seen: set[str] = set()

    def _budget(self, kind: str, payload: dict[str, Any]) -> None:
        """A budget limit reached (the run stops, or waits for a raise), or a raise."""
        if kind == "budget_raised":
            by = f" by {escape(payload['by'])}" if payload.get("by") else ""
            self.console.print(f"  [dim]the {payload['scope']}'s budget was raised{by}[/]")
            return
        if payload["message"] in self._budget_seen:  # one line for limits reached together
            return
        self._budget_seen.add(payload["message"])
        if payload["stopped"]:
            self.console.print(f"  [bold yellow]■ {escape(payload['message'])}[/]")
            return
        self.console.print(f"  [bold yellow]? {escape(payload['message'])}[/]")
        hint = f"raise: duragent raise-budget {self._session} --{payload['limit']} NEW_LIMIT"
        self.console.print(f"    {hint}", soft_wrap=True, highlight=False, markup=False)

    def _question(self, payload: dict[str, Any]) -> None:
        """An `ask_user` question: its text, its choices, and the command that answers."""
        self.console.print(f"  [bold yellow]? the agent asks:[/] {escape(payload['question'])}")
        for number, choice in enumerate(payload.get("choices") or [], 1):
            self.console.print(f"    {number}. {escape(choice)}", highlight=False)
        hint = f'answer: duragent answer {self._session} {payload["call_id"]} "TEXT"'
        self.console.print(f"    {hint}", soft_wrap=True, highlight=False, markup=False)

    def _end_stream(self) -> None:
        if self._streaming:
            self.console.print()
            self._streaming = False

    def close(self) -> None:
        """Finish what is on screen: an unfinished line, the live region."""
        self._end_stream()
        self._tools.close()

    def show(self, event: StoredEvent) -> None:
        payload = event.payload
        kind = event.type
        if kind == "message_update" and payload["kind"] == "text":
            self._tools.close()  # a model call: no tool runs any more
            if not self._streaming:
                self.console.print("[bold cyan]assistant[/] ", end="")
                self._streaming = True
            self.console.out(payload["delta"], end="", highlight=False)
            return
        if kind == "message_update":
            return
        if kind == "tool_execution_update":
            self._tools.update(payload["tool_call_id"], payload["partial"])
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
        elif kind == "tool_execution_start" and payload["tool_name"] == ASK_USER_TOOL:
            pass  # its question_asked says it all, with no running-tool line to wait on
        elif kind == "tool_execution_start":
            shown = _arguments_shown(payload["args"])
            self.console.print(f"  [yellow]→ {payload['tool_name']}[/] {escape(str(shown))}")
            self._tools.start(payload["tool_call_id"], payload["tool_name"])
        elif kind == "tool_execution_end":
            self._tools.end(payload["tool_call_id"])
            result = payload["result"]
            mark = "[red]✗[/]" if result["is_error"] else "[green]✓[/]"
            shown = shown_output(result.get("details")) or _first_line(_text(result["content"]))
            line = escape(shown)
            took = f"{payload['duration_ms']} ms"
            self.console.print(f"  {mark} {payload['tool_name']} ({took}) [dim]{line}[/]")
        elif kind == "approval_requested":
            call = payload["call_id"]
            self.console.print(
                f"  [bold yellow]? {payload['tool_name']} waits for approval[/]"
                f" {escape(payload['args_preview'])}"
            )
            # Commands to copy: never wrapped inside, whatever the terminal's width.
            for hint in (
                f"approve: duragent approve {self._session} {call}  (--always to keep allowing it)",
                f"deny:    duragent deny {self._session} {call} --reason TEXT",
            ):
                self.console.print(f"    {hint}", soft_wrap=True, highlight=False, markup=False)
        elif kind == "approval_decided":
            reason = f": {escape(payload['reason'])}" if payload.get("reason") else ""
            by = f" by {escape(payload['by'])}" if payload.get("by") else ""
            self.console.print(
                f"  [dim]{payload['decision']}{by} for {payload['call_id']}{reason}[/]"
            )
        elif kind == "question_asked":
            self._question(payload)
        elif kind == "question_answered":
            how = {"answered": "answered", "timeout": "no answer in time", "withdrawn": "withdrawn"}
            by = f" by {escape(payload['by'])}" if payload.get("by") else ""
            self.console.print(f"  [dim]{how[payload['status']]}{by}: {payload['call_id']}[/]")
        elif kind in ("budget_reached", "budget_raised"):
            self._budget(kind, payload)
        elif kind == "retry_scheduled":
            self._started.clear()  # the call starts again, and this line says why
            self.console.print(
                f"  [magenta]↻ model call failed ({escape(payload['error'])});"
                f" retrying in {payload['delay_ms'] / 1000:.1f} s[/]"
            )
        elif kind == "agent_end":
            self._tools.close()
            usage = payload.get("usage") or {}
            tokens = sum(v for v in usage.values() if isinstance(v, int))
            spent = f"{tokens} tokens"
            if self._run_cost is not None:
                spent = self._run_cost(payload["run_id"])
            style = "green" if payload["status"] == "completed" else "red"
            error = f": {escape(payload['error'])}" if payload.get("error") else ""
            self.console.print(
                f"[{style}]run {payload['status']}[/] after {payload['turns']} turn(s),"
                f" {escape(spent)}{error}"
            )


ARGS_SHOWN_CHARS = 80


def _arguments_shown(args: dict[str, Any]) -> str:
    """What a call line shows of its arguments: the command, path or pattern of the
    built-in tools; other tools' arguments as compact JSON, cut to one short line."""
    named = args.get("command") or args.get("path") or args.get("pattern")
    if named:
        return str(named)
    if not args:
        return ""
    text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= ARGS_SHOWN_CHARS else text[: ARGS_SHOWN_CHARS - 1] + "…"
