"""A support agent: two function tools and an approval rule (refunds wait for a person).

    python examples/support_agent.py "Where is order A-1? Refund it if it is late."

With no ANTHROPIC_API_KEY the offline model plays `support_agent.yaml` (scripted: it looks
the order up, asks for a refund, then answers). The Temporal dev server is started when
none runs. The approval is given here by the program; in real use a person answers it
(`duragent approve`, the API or the web page), hours later if need be.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

import duragent

HERE = Path(__file__).parent


class Order(BaseModel):
    id: str
    status: str
    days_late: int


@duragent.tool(retry_safe=True)
def lookup_order(order_id: Annotated[str, Field(description="An order id, like A-1")]) -> Order:
    """Look up an order: its status and how late it is."""
    return Order(id=order_id, status="in transit", days_late=6)


@duragent.tool
def refund_order(order_id: str, reason: str) -> str:
    """Refund an order in full. Needs a person's approval."""
    return f"Refunded {order_id} ({reason})."


plugin = duragent.Plugin(
    name="support",
    tools=[lookup_order, refund_order],
    system_prompt="You are a support agent. Look orders up before acting on them.",
)

POLICY = duragent.ApprovalPolicy(
    rules=(duragent.ApprovalRule(tool="refund_order", action="ask"),), default="allow"
)


async def main(question: str) -> None:
    settings = duragent.Settings.from_env(offline_script=HERE / "support_agent.yaml")
    # Temporal's dev server, the store, the offline model when there is no key, and a
    # worker serving the plugin, in this process: all of it stops on leaving.
    async with duragent.local(settings, plugins=[plugin]) as client:
        session = await client.sessions.create(name="support")
        await client.approvals.set_policy(session.id, POLICY)
        run = await client.runs.prompt(session.id, question)
        while not (waiting := await client.approvals.pending(session.id)):
            await asyncio.sleep(0.1)
        call = waiting[0]
        print(f"waiting for approval: {call.tool_name} {call.args_preview}")
        await client.approvals.approve(session.id, call.call_id)
        result = await run.result()
    print(f"{result.status}: {result.final_text}")


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Where is order A-1? Refund it if late."))
