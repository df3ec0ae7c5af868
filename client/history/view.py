"""Timelines in a terminal: the history reader's view for people (`duragent history`)."""

from __future__ import annotations

from datetime import datetime

from rich.console import Console
from rich.text import Text

from duragent.client.history.timeline import EPOCH, RunTimeline, TimelineItem
from duragent.client.history.values import duration_text


def render(timelines: list[RunTimeline], console: Console) -> None:
    """Print timelines for people: a header per execution, then one line per item with
    its time relative to the execution's start, its turn, what it was and how long it
    took; a turn's tool calls and the save point its model call carried are indented.

    Nothing is cut. On a terminal a summary too long for the width wraps under itself
    (the columns before it stay clear); piped, every item is one whole line.
    """
    for index, timeline in enumerate(timelines):
        if index:
            console.print()
        header = Text()
        header.append(timeline.workflow_type, style="bold")
        header.append(f"  {timeline.workflow_id} / {timeline.temporal_run_id}")
        if timeline.run_id:
            header.append(f"  run {timeline.run_id}", style="bold")
        if timeline.items:
            header.append(f"  {timeline.items[0].at:%Y-%m-%d %H:%M:%S} UTC", style="dim")
        if timeline.parent_session_id:
            call = f", call {timeline.parent_tool_call_id}" if timeline.parent_tool_call_id else ""
            header.append(f"  sub-agent of session {timeline.parent_session_id}{call}")
        _print_whole(console, header)
        if timeline.web_ui_url:
            _print_whole(console, Text(timeline.web_ui_url, style="dim"))
        start = timeline.items[0].at if timeline.items else EPOCH
        widths = _widths(timeline.items, start)
        for item in timeline.items:
            _print_item(console, _prefix(item, start, widths), Text(item.summary))


SUMMARY_MIN_WIDTH = 30
"""Narrower than this beside the columns, a summary goes on the lines below them."""


def _print_whole(console: Console, line: Text) -> None:
    if console.is_terminal:
        console.print(line, overflow="fold")
    else:
        console.print(line, soft_wrap=True)  # one line, never cut


def _print_item(console: Console, prefix: Text, summary: Text) -> None:
    if not console.is_terminal:
        console.print(prefix + summary, soft_wrap=True)
        return
    indent = prefix.cell_len
    if console.width - indent < SUMMARY_MIN_WIDTH:
        console.print(prefix, soft_wrap=True)
        indent = 4
        lines = list(summary.wrap(console, max(1, console.width - indent), overflow="fold"))
    else:
        lines = list(summary.wrap(console, console.width - indent, overflow="fold"))
        console.print(prefix + (lines.pop(0) if lines else Text()), soft_wrap=True)
    for line in lines:
        console.print(Text(" " * indent) + line, soft_wrap=True)


_LABELS = {
    "run_started": ("run started", "bold"),
    "start_run": ("start run", "dim"),
    "model_call": ("model", "cyan"),
    "summary_call": ("summary", "cyan"),
    "save_point": ("  save point", "green"),
    "tool_call": ("  tool", "yellow"),
    "subagent": ("  sub-agent", "yellow"),
    "retry": ("retry", "red"),
    "signal": ("signal", "magenta"),
    "cancel": ("cancel", "red"),
    "finish_run": ("finish run", "dim"),
    "run_ended": ("run ended", "bold"),
    "continued_as_new": ("continued", "bold"),
}


def _widths(items: list[TimelineItem], start: datetime) -> tuple[int, int]:
    """Widths of the offset and turn columns: as wide as this timeline needs."""
    offsets = [len(f"{(item.at - start).total_seconds():+.3f}") for item in items]
    turns = [len(f"turn {item.turn}") for item in items if item.turn is not None]
    return max(offsets, default=6), max(turns, default=0)


def _prefix(item: TimelineItem, start: datetime, widths: tuple[int, int]) -> Text:
    """The columns before an item's summary: offset, turn, what it is, how long."""
    label, style = _LABELS.get(item.kind, (item.kind.replace("_", " "), ""))
    offset = (item.at - start).total_seconds()
    offset_width, turn_width = widths
    turn = f"turn {item.turn}" if item.turn is not None else ""
    line = Text()
    line.append(f"{offset:+{offset_width}.3f}s  ", style="dim")
    if turn_width:
        line.append(f"{turn:<{turn_width}}  ", style="dim")
    line.append(f"{label:<13}", style=style)
    line.append(f"{duration_text(item.duration_ms):>8}  ", style="dim")
    return line
