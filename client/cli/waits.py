"""What waits for a person in a session's run, on the command line: a tool call waiting on
an approval (`duragent approvals`, `approve`, `deny`) or an `ask_user` question waiting on
an answer (`duragent questions`, `answer`). Listing what waits and sending a person's word
are the same steps for both; each kind says only how it asks and how it shows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from rich.text import Text

from duragent.client.api import DuragentClient
from duragent.client.cli import command
from duragent.client.cli.views import announce, console, say
from duragent.client.services import local_services
from duragent.settings import Settings

PendingT = TypeVar("PendingT")
OutcomeT = TypeVar("OutcomeT")


def list_waiting(
    settings: Settings,
    pending: Callable[[DuragentClient], Awaitable[Sequence[PendingT]]],
    *,
    none: str,
    lines: Callable[[PendingT], list[str]],
) -> None:
    """Print what waits, as `lines` shows each item (`none` when nothing waits)."""

    async def main() -> None:
        async with local_services(settings, announce, worker=False) as ready:
            client = await DuragentClient.connect(ready)
            waiting = await pending(client)
            if not waiting:
                console.print(none)
            for item in waiting:
                for line in lines(item):
                    say(Text(line))

    command.run(main())


def send_word(
    settings: Settings,
    send: Callable[[DuragentClient], Awaitable[OutcomeT]],
    said: Callable[[OutcomeT], str],
) -> None:
    """Send a person's decision or answer, and print what the run took (`said`)."""

    async def main() -> None:
        async with local_services(settings, announce, worker=False) as ready:
            client = await DuragentClient.connect(ready)
            console.print(said(await send(client)))

    command.run(main())
