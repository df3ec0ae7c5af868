"""The activity of a schedule's firing: it hands the firing to the client's delivery
(`client.schedules`), which sends the prompt as a person's prompt is sent. The client
is a layer above the activities; the worker wiring (`client.workers`) gives it here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import activity

from duragent.domain.schedules import (
    DELIVER_SCHEDULED_PROMPT,
    DeliverScheduledPrompt,
    FiringOutcome,
)

Delivery = Callable[[DeliverScheduledPrompt], Awaitable[FiringOutcome]]


class ScheduledPrompts:
    def __init__(self, deliver: Delivery) -> None:
        self._deliver = deliver

    @activity.defn(name=DELIVER_SCHEDULED_PROMPT)
    async def deliver_scheduled_prompt(self, data: DeliverScheduledPrompt) -> FiringOutcome:
        return await self._deliver(data)
