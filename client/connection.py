"""Connections every process makes: Temporal (with the pydantic converter) and the store."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime

from settings import Settings
from store.db import Database


async def connect_temporal(settings: Settings, *, runtime: Runtime | None = None) -> Client:
    """`runtime`: the Temporal runtime to run on (a worker's may serve metrics); None:
    the SDK's default."""
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
        runtime=runtime,
    )


def open_store(settings: Settings) -> Database:
    return Database(settings.database_url)
