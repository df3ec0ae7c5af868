"""The `duragent` Typer app and its global options: the settings every command gets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from duragent.client.cli.command import fail
from duragent.settings import Settings

app = typer.Typer(
    help="duragent: a durable, steerable agent harness on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",  # docstring paragraphs wrap to the terminal
)

SETTING_OF_OPTION = {"namespace": "temporal_namespace"}
"""The `Settings` field a global option sets, where its name is not the option's."""


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        typer.echo(f"duragent {version('duragent')}")
        raise typer.Exit()


@app.callback()
def global_options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
    home: Annotated[
        Path | None, typer.Option(help="State directory [env DURAGENT_HOME, default ./.duragent]")
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL of the store [env DURAGENT_DATABASE_URL]")
    ] = None,
    temporal_address: Annotated[
        str | None, typer.Option(help="Temporal frontend host:port [env TEMPORAL_ADDRESS]")
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(help="Temporal namespace [env TEMPORAL_NAMESPACE]")
    ] = None,
    task_queue: Annotated[
        str | None, typer.Option(help="Task queue of the workers [env DURAGENT_TASK_QUEUE]")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model for new sessions [env DURAGENT_MODEL]")
    ] = None,
) -> None:
    # Each option overrides the setting of its name (`ctx.params` holds them all), so an
    # option is added in one place.
    overrides = {
        SETTING_OF_OPTION.get(name, name): value
        for name, value in ctx.params.items()
        if name != "version"
    }
    try:
        ctx.obj = Settings.from_env(**overrides)
    except ValueError as error:  # pydantic's ValidationError is one too
        fail(f"bad setting: {_setting_error(error)}")


def _setting_error(error: ValueError) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e['input']!r})"
            for e in error.errors(include_url=False)
        )
    return str(error)
