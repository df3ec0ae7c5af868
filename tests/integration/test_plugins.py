"""Plugins in the stock commands: a user's function tools served by `duragent worker`
loaded with `--plugin` and through an entry point, known to `configure --tools`, their live
output shown and their cancellation on abort."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orders_plugin
import pytest
from processes import REPO, spawn_python
from support import Stack, event_seen, eventually

from duragent.client.api import DuragentClient
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, text_of

PLUGINS = REPO / "tests" / "plugins"

LOOKUPS = {
    "conversations": {
        "*": [
            {"reply": [{"tool_use": {"name": "lookup_order", "input": {"order_id": "A-7"}}}]},
            {"reply": [{"tool_use": {"name": "lookup_order", "input": {"order_id": "Z-1"}}}]},
            {"reply": [{"text": "Order A-7 has shipped."}]},
        ]
    }
}


def spawn_stock_worker(stack: Stack, pythonpath: str, *flags: str) -> None:
    """`duragent worker FLAGS` in a process of its own, with `pythonpath` importable."""
    log = open(stack.settings.home / "worker.log", "wb")  # noqa: SIM115
    env = {**stack.env(), "PYTHONPATH": pythonpath}
    stack.processes.append(spawn_python(["-m", "duragent.client.cli", "worker", *flags], env, log))


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in request["messages"]
        if message["role"] == "user"
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


@pytest.mark.script(LOOKUPS)
async def test_the_stock_worker_serves_a_plugin_named_by_flag(stack: Stack) -> None:
    spawn_stock_worker(stack, str(PLUGINS), "--plugin", "orders_plugin:plugin")
    # A client that loads the same plugin: new sessions get its system prompt.
    settings = stack.settings.model_copy(update={"plugins": ["orders_plugin:plugin"]})
    client = DuragentClient(stack.temporal, stack.db, settings)
    session = await client.sessions.create()
    result = await (await client.runs.prompt(session.id, "Where is my order A-7?")).result()
    assert result.status == "completed", result.error
    assert result.final_text == "Order A-7 has shipped."

    first, second, third = (r.body for r in stack.model.requests_for(session.id))
    assert first["system"][0]["text"].startswith("You are the order desk.")
    spec = next(t for t in first["tools"] if t["name"] == "lookup_order")
    assert spec == {
        "name": "lookup_order",
        "description": "Look up an order: its status and total.",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "An order id, like A-1"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
    }
    assert "wait_for_stock" in [t["name"] for t in first["tools"]]
    (found,) = tool_results(second)
    assert json.loads(found["content"][0]["text"]) == {
        "id": "A-7",
        "status": "shipped",
        "total": 42.5,
    }
    assert not found.get("is_error")
    missing = tool_results(third)[-1]
    assert missing["is_error"] is True
    assert missing["content"][0]["text"] == "LookupError: there is no order Z-1"

    # The CLI knows the plugin's tools when it loads the plugin, and only then.
    loaded = {"PYTHONPATH": str(PLUGINS), "DURAGENT_PLUGINS": "orders_plugin:plugin"}
    code, _, err = await stack.cli("configure", session.id, "--tools", "lookup_order,read")
    assert code == 2 and "unknown tool 'lookup_order'" in err
    code, _, err = await stack.cli(
        "configure", session.id, "--tools", "lookup_order,read", env=loaded
    )
    assert code == 0, err
    status = await stack.client.sessions.status(session.id)
    assert status.config.active_tools == ["lookup_order", "read"]


@pytest.mark.script(LOOKUPS)
async def test_an_installed_package_registers_a_plugin_by_entry_point(
    stack: Stack, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    info = site / "orders_desk-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: orders-desk\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[duragent.plugins]\norders = orders_plugin:plugin\n")
    spawn_stock_worker(stack, f"{site}:{PLUGINS}")
    session = await stack.client.sessions.create()
    result = await (await stack.client.runs.prompt(session.id, "A-7?")).result()
    assert result.status == "completed", result.error
    second = stack.model.requests_for(session.id)[1].body
    assert json.loads(tool_results(second)[0]["content"][0]["text"])["status"] == "shipped"


def test_a_bad_plugin_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for spec, words in [
        ("nowhere:plugin", "cannot import nowhere"),
        ("orders_plugin:missing", "orders_plugin has no missing"),
        ("orders_plugin:Order", "not a duragent.Plugin"),
        ("orders_plugin", "give it as module:attribute"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "duragent.client.cli", "worker", "--plugin", spec],
            env={**os.environ, "PYTHONPATH": str(PLUGINS), "DURAGENT_HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"error: plugin {spec!r}") and words in line


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "wait_for_stock", "input": {"item": "widget"}}}]},
                {"reply": [{"text": "Stopped."}]},
            ]
        }
    }
)
async def test_a_function_tools_output_streams_and_abort_cancels_it(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    marker = Path(session.workspace) / "stock.log"
    async with stack.worker(plugins=[orders_plugin.plugin]):
        await stack.client.runs.prompt(session.id, "wait for widgets")
        await eventually(
            lambda: event_seen(
                stack, session.id, "tool_execution_update", partial="checking widget: try 2\n"
            )
        )
        result = await stack.client.runs.abort(session.id)
    assert result.status == "aborted"
    assert marker.read_text() == "cancelled\n"
    results = [
        e.message
        for e in await stack.client.tree.path(session.id)
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]
    assert len(results) == 1 and results[0].is_error
    assert "checking widget: try 1" in text_of(results[0].content)
