"""One part of the client (`client.runs`, `client.inputs`, ...): it reaches the core and
the other parts through the `DuragentClient` it was given (`self._client.db`,
`self._client.sessions.get(...)`), never through a base class."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from duragent.client.api import DuragentClient


class ClientPart:
    """One part of a `DuragentClient`."""

    def __init__(self, client: DuragentClient) -> None:
        self._client = client
