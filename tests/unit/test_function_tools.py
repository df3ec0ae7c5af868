"""Tools as functions (`@duragent.tool`): schema, calling, output, errors, cancellation."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

import duragent
from duragent import ToolContext, ToolRegistry, ToolResult, tool
from duragent.activities.tools import default_tools


class Address(BaseModel):
    street: str
    city: str = Field(description="The city's name")


class Order(BaseModel):
    id: str
    total: float


@tool
def lookup_order(
    order_id: Annotated[str, Field(description="The order's id, like A-123")],
    include_items: bool = False,
) -> Order:
    """Look up an order by its id."""
    if order_id == "missing":
        raise LookupError(f"no order {order_id}")
    return Order(id=order_id, total=12.5 if not include_items else 13.0)


MAIN_THREAD = threading.main_thread()
threads: list[threading.Thread] = []


@tool(retry_safe=True)
def where_am_i() -> str:
    """Say which thread runs this."""
    threads.append(threading.current_thread())
    return "here"


@tool(exclusive=True, name="ship-to")
async def ship(ctx: ToolContext, address: Address, copies: int = 1) -> ToolResult:
    """Ship to an address."""
    ctx.print("shipping to", address.city)
    ctx.print(f"session {ctx.session_id} call {ctx.call_id}")
    return ToolResult.text(f"{type(address).__name__} {address.street}, {copies}")


def context(tmp_path: Path, chunks: list[str] | None = None) -> ToolContext:
    on_update = chunks.append if chunks is not None else (lambda chunk: None)
    return ToolContext(tmp_path, on_update, session_id="s1", call_id="toolu_1")


def test_the_schema_comes_from_the_signature_and_the_docstring() -> None:
    registry = ToolRegistry([lookup_order, where_am_i, ship])
    specs = {spec["name"]: spec for spec in registry.api_specs()}
    assert specs["lookup_order"] == {
        "name": "lookup_order",
        "description": "Look up an order by its id.",
        "input_schema": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "description": "The order's id, like A-123"},
                "include_items": {"type": "boolean", "default": False},
            },
            "required": ["order_id"],
            "additionalProperties": False,
        },
    }
    shipping: dict[str, Any] = dict(specs["ship-to"]["input_schema"])
    address = shipping["properties"]["address"]
    assert address["properties"]["city"] == {"type": "string", "description": "The city's name"}
    assert "ctx" not in shipping["properties"]
    assert where_am_i.traits.retry_safe and where_am_i.traits.execution == "parallel"
    assert ship.traits.execution == "sequential" and not ship.traits.retry_safe


async def test_a_sync_function_runs_off_the_event_loop(tmp_path: Path) -> None:
    result = await ToolRegistry([where_am_i]).run("where_am_i", {}, context(tmp_path))
    assert result.content[0].text == "here"  # type: ignore[union-attr]
    assert threads and threads[-1] is not MAIN_THREAD


async def test_returns_become_results_and_raises_become_errors(tmp_path: Path) -> None:
    registry = ToolRegistry([lookup_order])
    found = await registry.run("lookup_order", {"order_id": "A-1"}, context(tmp_path))
    assert not found.is_error
    assert found.content[0].text == '{"id":"A-1","total":12.5}'  # type: ignore[union-attr]
    missing = await registry.run("lookup_order", {"order_id": "missing"}, context(tmp_path))
    assert missing.is_error
    assert missing.content[0].text == "LookupError: no order missing"  # type: ignore[union-attr]
    bad = await registry.run("lookup_order", {"order_id": 5, "x": 1}, context(tmp_path))
    assert bad.is_error
    text = bad.content[0].text  # type: ignore[union-attr]
    assert "Invalid arguments for tool 'lookup_order'" in text
    assert "order_id" in text and "x: Extra inputs are not permitted" in text


async def test_the_context_streams_lines_and_a_model_argument_arrives_as_a_model(
    tmp_path: Path,
) -> None:
    chunks: list[str] = []
    result = await ToolRegistry([ship]).run(
        "ship-to", {"address": {"street": "Main 1", "city": "Bern"}}, context(tmp_path, chunks)
    )
    assert result.content[0].text == "Address Main 1, 1"  # type: ignore[union-attr]
    assert chunks == ["shipping to Bern\n", "session s1 call toolu_1\n"]


async def test_cancellation_reaches_async_and_sync_tools(tmp_path: Path) -> None:
    started = threading.Event()
    saw_cancel = threading.Event()

    @tool
    def spin(ctx: ToolContext) -> str:
        """Spin until cancelled."""
        started.set()
        while not ctx.cancelled:
            saw_cancel.wait(0.01)
        saw_cancel.set()
        return "stopped"

    entered = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        entered.set()
        await asyncio.Event().wait()
        return "never"

    registry = ToolRegistry([spin, wait_forever])
    sync_call = asyncio.create_task(registry.run("spin", {}, context(tmp_path)))
    await asyncio.to_thread(started.wait, 10)
    sync_call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sync_call
    assert await asyncio.to_thread(saw_cancel.wait, 10)

    async_call = asyncio.create_task(registry.run("wait_forever", {}, context(tmp_path)))
    await entered.wait()
    async_call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await async_call


def test_a_decorated_function_can_still_be_called() -> None:
    assert lookup_order(order_id="B-2") == Order(id="B-2", total=12.5)


@pytest.mark.parametrize(
    ("define", "message"),
    [
        ("def f(x: int): return x", "needs a description"),
        ("def f(x):\n    'Doc.'\n    return x", "argument 'x' needs a type hint"),
        ("def f(*args: int):\n    'Doc.'", r"\*args cannot be an argument"),
        ("def f(x: int, ctx: ToolContext):\n    'Doc.'", "must be the first parameter"),
    ],
)
def test_a_function_that_cannot_be_a_tool_is_refused_by_name(define: str, message: str) -> None:
    space: dict[str, object] = {"ToolContext": ToolContext}
    exec(define, space)
    with pytest.raises(TypeError, match=message):
        tool(space["f"])  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="must be 1-64 letters"):
        tool(name="bad name!")(lookup_order.function)


async def test_opt_in_tools_are_offered_only_when_named(tmp_path: Path) -> None:
    registry = ToolRegistry([*default_tools(), lookup_order], opt_in=["lookup_order"])
    assert "lookup_order" not in [spec["name"] for spec in registry.api_specs()]
    assert registry.refusal("lookup_order", None) is not None
    assert registry.refusal("read", None) is None
    named = registry.api_specs(active=["lookup_order"])
    assert [spec["name"] for spec in named] == ["lookup_order"]
    assert registry.refusal("lookup_order", ["lookup_order"]) is None


def test_the_public_api_is_what_all_lists() -> None:
    for name in duragent.__all__:
        assert getattr(duragent, name) is not None, name
    assert duragent.__version__
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        duragent.nothing  # noqa: B018
