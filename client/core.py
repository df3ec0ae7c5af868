"""What every part of the client shares: the Temporal client, the store, the settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from temporalio.client import Client

from activities.tools import default_tool_names
from client.connection import connect_temporal, open_store
from client.errors import TemporalUnreachable
from client.prices import price_table
from client.usage_tally import UsageTally
from domain.prices import PriceTable
from settings import Settings
from store.db import Database


class ClientCore:
    """The connections and settings the client's parts work with."""

    def __init__(
        self,
        temporal: Client,
        db: Database,
        settings: Settings,
        *,
        tool_names: Sequence[str] | None = None,
    ) -> None:
        self.temporal = temporal
        self.db = db
        self.settings = settings
        self.tool_names = list(tool_names) if tool_names is not None else default_tool_names()
        """The tools a session's active tools may name: the workers' built-in ones, unless
        the workers register others (`build_worker(tools=...)`): then pass those."""
        self.prices: PriceTable = price_table(settings.prices_file)
        """What the client prices usage with (`client.prices`)."""
        self.usage_tally = UsageTally()
        """Sessions' usage per run and model, read incrementally (`client.usage_tally`)."""

    @classmethod
    async def connect(cls, settings: Settings) -> Self:
        try:
            temporal = await connect_temporal(settings)
        except RuntimeError as err:
            raise TemporalUnreachable(settings.temporal_address, str(err)) from err
        return cls(temporal, open_store(settings), settings)
