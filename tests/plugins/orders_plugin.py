"""A plugin as a user would write one: two function tools and a default system prompt.

Loaded by the tests through `--plugin orders_plugin:plugin` and through an entry point.
`wait_for_stock` prints lines while it runs and records in its workspace whether it was
cancelled, so a test can see an abort reach it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

import duragent


class Order(BaseModel):
    id: str
    status: str
    total: float


@duragent.tool(retry_safe=True)
def lookup_order(order_id: Annotated[str, Field(description="An order id, like A-1")]) -> Order:
    """Look up an order: its status and total."""
    if not order_id.startswith("A-"):
        raise LookupError(f"there is no order {order_id}")
    return Order(id=order_id, status="shipped", total=42.5)


@duragent.tool
async def wait_for_stock(ctx: duragent.ToolContext, item: str) -> str:
    """Wait until an item is back in stock."""
    marker = Path(ctx.workspace) / "stock.log"
    marker.write_text("waiting\n")
    try:
        for n in range(600):
            ctx.print(f"checking {item}: try {n + 1}")
            await asyncio.sleep(0.1)
    except asyncio.CancelledError:
        marker.write_text("cancelled\n")
        raise
    return "in stock"


plugin = duragent.Plugin(
    name="orders",
    tools=[lookup_order, wait_for_stock],
    system_prompt="You are the order desk. Use lookup_order for any order question.",
)
