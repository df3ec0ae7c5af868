"""Connections every process makes: Temporal (with the pydantic converter) and the store."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from settings import Settings
from store.db import Database
from telemetry import tracing


async def connect_temporal(settings: Settings) -> Client:
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
        # Traces when the OTEL_* variables ask for them; none at all otherwise.
        interceptors=tracing.client_interceptors(),
    )


def open_store(settings: Settings) -> Database:
    return Database(settings.database_url)
