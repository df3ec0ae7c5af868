"""How the commands print: the consoles, one-line notices and errors, and the views of
stored things (transcript entries, tree lines, queued input, a session's config, times).

A run's live events are printed by `client.render`, tables by `client.tables`.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from duragent.domain.agents import shown_output
from duragent.domain.config import SessionConfig
from duragent.domain.cost import Cost, cost_text, rate_text, turn_cost
from duragent.domain.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    LeafEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.messages import AssistantMessage, ToolResultMessage, Usage, text_of
from duragent.domain.prices import PriceTable

console = Console()
err = Console(stderr=True, soft_wrap=True)  # an error is one line, however long


@dataclass(frozen=True)
class ShowLimits:
    """How much of each part of a transcript `show` prints before cutting it."""

    text: int | None = 2_000
    arguments: int | None = 200
    result: int | None = 300


SHOW_LIMITS = ShowLimits()
SHOW_ALL = ShowLimits(text=None, arguments=None, result=None)
QUEUE_TEXT_CHARS = 200


def announce(message: str) -> None:
    """A notice about what the command does (services started, where to look next)."""
    err.print(f"[dim]{escape(message)}[/]")


def print_error(message: str) -> None:
    err.print(f"[red]error:[/] {escape(message)}")


def say(line: Text) -> None:
    """Print a line of content: wrapped on a terminal, whole when piped (content is
    never split by line breaks of ours where a program reads it)."""
    console.print(line, soft_wrap=not console.is_terminal)


def clip(text: str, limit: int | None) -> tuple[str, int]:
    """`text` cut to `limit` characters (None: whole), and how many were left out."""
    if limit is None or len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def _more(left_out: int) -> Text:
    return Text(f" … (+{left_out:,} characters)" if left_out else "", style="dim")


def print_clipped(label: str, text: str, limit: int) -> None:
    shown, more = clip(text, limit)
    say(Text(label) + Text(shown) + _more(more))


def queue_line(item_id: str, kind: str, text: str) -> Text:
    """A pending input on one line, its text cut to `QUEUE_TEXT_CHARS`."""
    shown, more = clip(" ".join(text.split()), QUEUE_TEXT_CHARS)
    line = Text(f"{item_id}  {kind:<9} {shown}")
    if more:
        line.append(f" (+{more:,} characters)", style="dim")
    return line


def print_entry(entry: SessionEntry, limits: ShowLimits, prices: PriceTable | None = None) -> bool:
    """Print one entry of the transcript; True when some of it was cut. With `prices`,
    an assistant message is followed by its model call's model, tokens and cost, and so
    is a compaction or branch summary (the call that wrote it).

    Model output is printed as plain `Text`: no markup parsing and no highlighting, whose
    regular expressions take minutes over a long unbroken string. Wrapping stays linear.
    """
    if not isinstance(entry, MessageEntry):
        kind = f"· {entry.type}"
        summary = entry if isinstance(entry, CompactionEntry | BranchSummaryEntry) else None
        if summary is not None and summary.usage is not None and prices is not None:
            # The summary is a model call of its own: its line says what it cost.
            kind += f" · {call_line(summary.model, summary.usage, prices)}"
        say(Text(kind, style="dim"))
        return False
    message = entry.message
    cut = 0
    if isinstance(message, AssistantMessage):
        text, more = clip(text_of(message.content), limits.text)
        cut += more
        if text:
            say(Text("assistant", style="bold cyan") + Text(f" {text}") + _more(more))
        for call in message.tool_calls:
            arguments, more = clip(json.dumps(call.arguments), limits.arguments)
            cut += more
            line = Text(f"  → {call.name}", style="yellow") + Text(f" {arguments}") + _more(more)
            say(line)
        if message.error_message:
            say(Text("model error:", style="red") + Text(f" {message.error_message}"))
        if prices is not None:
            say(Text(f"  {turn_line(message, prices)}", style="dim"))
    elif isinstance(message, ToolResultMessage):
        mark = Text("✗", style="red") if message.is_error else Text("✓", style="green")
        result = shown_output(message.details) or text_of(message.content).strip()
        text, more = clip(result, limits.result)
        cut += more
        say(
            Text("  ")
            + mark
            + Text(f" {message.tool_name} ")
            + Text(text, style="dim")
            + _more(more)
        )
    else:
        text, more = clip(text_of(message.content), limits.text)
        cut += more
        # A schedule's prompt says so (`duragent schedule`).
        scheduled = getattr(message, "scheduled", None)
        who = Text(message.role, style="bold green")
        if scheduled is not None:
            who += Text(f" (scheduled: {scheduled.schedule_id})", style="dim")
        say(who + Text(f" {text}") + _more(more))
    return cut > 0


def _gist(text: str, limit: int = 70) -> str:
    """The start of `text` on one line (a tree line per entry)."""
    line = " ".join(text[: limit * 4].split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def one_line(entry: SessionEntry) -> str:
    """An entry as `tree` shows it."""
    if isinstance(entry, MessageEntry):
        message = entry.message
        if isinstance(message, AssistantMessage):
            calls = ", ".join(c.name for c in message.tool_calls)
            text = text_of(message.content) or (f"calls {calls}" if calls else message.stop_reason)
            return f"assistant: {_gist(text)}"
        if isinstance(message, ToolResultMessage):
            return f"{message.tool_name} result{' (error)' if message.is_error else ''}"
        return f"{message.role}: {_gist(text_of(message.content))}"
    if isinstance(entry, CompactionEntry):
        return f"compaction (kept from {entry.first_kept_entry_id[:12]})"
    if isinstance(entry, LeafEntry):
        return f"left for {entry.target_id[:12]}"
    return entry.type


def turn_line(message: AssistantMessage, prices: PriceTable) -> str:
    """`claude-x · 1,200 in / 80 out tokens · $0.0042`, with the cache's reads and writes
    when there were any. The model is priced at its provider's price."""
    return call_line(message.model, message.usage, prices, message.provider)


def call_line(
    model: str | None, usage: Usage, prices: PriceTable, provider: str | None = None
) -> str:
    """`turn_line` of any model call (a turn's, a summary's)."""
    tokens = f"{usage.input_tokens:,} in / {usage.output_tokens:,} out"
    if usage.cache_read_tokens or usage.cache_write_tokens:
        tokens += (
            f" / {usage.cache_read_tokens:,} cache read / {usage.cache_write_tokens:,} cache write"
        )
    cost = turn_cost(model, usage, prices, provider)
    return f"{model or 'model'} · {tokens} tokens · {cost.text}"


def cost_line(cost: Cost) -> str:
    """`$0.0123 (1,234 tokens, 80% cache hits)`; per model too when there were several."""
    line = f"{cost.text} ({cost.usage.total_tokens:,} tokens, {rate_text(cost.cache_hit_rate)})"
    if len(cost.by_model) > 1:
        parts = [
            f"{m.model or 'model'} {cost_text(m.cost_usd, [m.model or '(none)'])}"
            for m in cost.by_model
        ]
        line += f": {', '.join(parts)}"
    return line


def prices_line(prices: PriceTable) -> str:
    """The prices' date (`prices of 2026-12-01`), and the override file when one is set."""
    line = f"prices of {prices.as_of.isoformat()}"
    return f"{line}, overridden by {prices.overridden_by}" if prices.overridden_by else line


def config_line(config: SessionConfig) -> str:
    tools = "all" if config.active_tools is None else ",".join(config.active_tools) or "none"
    line = (
        f"model {config.model}, thinking {config.thinking_level}, tools {tools}, "
        f"steering {config.steering_mode}, follow-ups {config.follow_up_mode}"
    )
    if config.mcp_servers is not None:
        line += f", MCP servers {','.join(config.mcp_servers) or 'none'}"
    return line


def when(ms: int) -> str:
    """A stored time (epoch milliseconds) in local time."""
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
