"""`duragent setup-temporal`: prepare a Temporal namespace that is not a dev server."""

from __future__ import annotations

import typer

from duragent.client.cli import command
from duragent.settings import Settings


def setup_temporal(ctx: typer.Context) -> None:
    """Add the search attributes duragent needs to the namespace (once per namespace of a
    Temporal cluster; the dev server has them). Running it again changes nothing.

    Connects as the worker does: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE (or --namespace),
    TEMPORAL_TLS_* and TEMPORAL_API_KEY.
    """
    from duragent.client.connection import connect_temporal
    from duragent.client.errors import TemporalUnreachable
    from duragent.client.temporal_setup import ensure_search_attributes

    settings: Settings = ctx.obj

    async def main() -> None:
        try:
            client = await connect_temporal(settings)
        except RuntimeError as err:  # the SDK's connection error
            raise TemporalUnreachable(settings.temporal_address, str(err)) from err
        result = await ensure_search_attributes(client, settings.temporal_namespace)
        namespace = settings.temporal_namespace
        if result.added:
            typer.echo(f"Namespace {namespace}: added search attributes {', '.join(result.added)}")
        if result.present:
            typer.echo(f"Namespace {namespace}: already has {', '.join(result.present)}")

    command.run(main())
