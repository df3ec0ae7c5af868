"""Random latency and random faults on top of a script, for soak runs.

A script's `chaos` makes every Messages request roll dice before it is played: a random
delay before the response headers (and now and then a much longer one, a slow first byte),
then, with the given chances, a 529 overloaded error, a 500 api_error, or a stream dropped
after its first delta. A fault consumes no step of the script: the retry that follows gets
the step the faulted request would have had, so a conversation plays the same with or
without chaos, only slower.

The dice are seeded by (`seed`, conversation key, the key's request number): a soak run
replays the same faults for the same requests of a conversation.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Fault = Literal["overloaded", "server_error", "dropped"]


class Chaos(BaseModel):
    """What each request may suffer; every chance is per request, from 0 to 1."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    latency_ms: tuple[int, int] = (0, 0)
    """The delay before the headers: uniform between these bounds, in milliseconds."""
    slow_first_byte: float = Field(default=0.0, ge=0, le=1)
    slow_first_byte_ms: int = Field(default=5000, ge=0)
    """Added to the delay of a request that gets a slow first byte."""
    overloaded: float = Field(default=0.0, ge=0, le=1)
    server_error: float = Field(default=0.0, ge=0, le=1)
    dropped: float = Field(default=0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _sane(self) -> Chaos:
        low, high = self.latency_ms
        if not 0 <= low <= high:
            raise ValueError("latency_ms: two bounds, 0 <= low <= high")
        if self.overloaded + self.server_error + self.dropped > 1:
            raise ValueError("the fault chances add up to more than 1")
        return self


class Roll(BaseModel):
    """The dice of one request: how long to wait before answering, and its fault."""

    delay_ms: int
    fault: Fault | None


def roll(chaos: Chaos, key: str, number: int) -> Roll:
    """The dice of the `number`-th request (from 0) of conversation `key`."""
    dice = random.Random(f"{chaos.seed}/{key}/{number}")  # a str seed hashes stably
    low, high = chaos.latency_ms
    delay = dice.randint(low, high)
    if dice.random() < chaos.slow_first_byte:
        delay += chaos.slow_first_byte_ms
    pick = dice.random()
    fault: Fault | None = None
    chances: list[tuple[Fault, float]] = [
        ("overloaded", chaos.overloaded),
        ("server_error", chaos.server_error),
        ("dropped", chaos.dropped),
    ]
    for name, chance in chances:
        if pick < chance:
            fault = name
            break
        pick -= chance
    return Roll(delay_ms=delay, fault=fault)
