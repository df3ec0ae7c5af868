"""Everything a program needs to run agents on one machine, started for it: Temporal (the
home's dev server, or the one `TEMPORAL_ADDRESS` names), the store the settings name, the
offline model when the default model's provider has no key or address, and a worker in
this process serving the plugins given (an agent's, say) beside those the settings load.

`duragent.Agent.run` uses it when it is given no client; a program that runs many agents
opens it once: `async with duragent.local(plugins=[agent]) as client: ...`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from duragent.client.connection import connect_temporal, open_store
from duragent.client.plugins import Plugin, as_plugin
from duragent.settings import Settings

if TYPE_CHECKING:
    from duragent.activities.models.clients import ModelClients
    from duragent.client.agent import Agent
    from duragent.client.api import DuragentClient

logger = logging.getLogger("duragent")


@contextlib.asynccontextmanager
async def local(
    settings: Settings | None = None,
    *,
    plugins: Sequence[Plugin | Agent[Any, Any]] = (),
    models: ModelClients | None = None,
) -> AsyncIterator[DuragentClient]:
    """A client of the local services, with a worker in this process for `plugins`
    (agents or plugins); all of it stops on leaving. `settings`: default, from the
    environment (`DURAGENT_*`). `models`: the model clients the worker uses (a test's
    `duragent.testing` model); default: each provider's own, or the offline model."""
    from duragent.client.api import DuragentClient
    from duragent.client.services import ensure_model, ensure_temporal
    from duragent.client.workers import build_worker

    settings = settings or Settings()
    given = [as_plugin(item, "local()") for item in plugins]
    async with contextlib.AsyncExitStack() as stack:
        settings = await stack.enter_async_context(ensure_temporal(settings, logger.info))
        if models is None:
            settings = await stack.enter_async_context(ensure_model(settings, logger.info))
        temporal = await connect_temporal(settings)
        db = open_store(settings)
        stack.callback(db.dispose)
        await stack.enter_async_context(
            build_worker(temporal, db, settings, plugins=given, models=models)
        )
        yield DuragentClient(temporal, db, settings, plugins=given)
