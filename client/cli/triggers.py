"""`duragent trigger`: webhooks from outside made into prompts (add, list, delete,
rotate-secret). Store-only: they work without Temporal. The command line is the machine's
operator: its triggers have no owner (they are the API's `default` user's), and it sees
and manages every trigger."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from duragent.client.cli.command import client_errors, fail, require_session, store_client
from duragent.client.cli.views import console, say, when
from duragent.client.tables import Column, print_table
from duragent.client.triggers import TriggerWithSecret
from duragent.settings import Settings

app = typer.Typer(
    help="Triggers: a signed webhook (GitHub's, or any program's) made into a prompt "
    "through a template, for a session or a new session per delivery. Deliveries go to "
    "`POST /api/triggers/ID` of `duragent serve`.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

TriggerArg = Annotated[str, typer.Argument(help="Trigger id.")]


@app.command()
def add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A name for people (and the prompt) to know it by.")],
    template: Annotated[
        str | None,
        typer.Option(
            help="The prompt, with fields of the webhook's JSON body by path: "
            "`{pull_request.title}`, `{commits.0.id}`; `{{` and `}}` for braces.",
        ),
    ] = None,
    template_file: Annotated[
        Path | None, typer.Option(help="Read the template from this file.")
    ] = None,
    session: Annotated[str | None, typer.Option(help="The session each delivery goes to.")] = None,
    new_session: Annotated[
        bool, typer.Option("--new-session", help="A new session for each delivery.")
    ] = False,
) -> None:
    """Add a trigger and print its id and secret (shown this once; `rotate-secret` makes a
    new one). A delivery to a busy session waits for its next run, as sent input does."""
    if (template is None) == (template_file is None):
        fail("give the template: --template TEXT or --template-file PATH (one of them)")
    if (session is None) == (not new_session):
        fail("say where deliveries go: --session ID or --new-session (one of them)")
    if template_file is not None:
        try:
            template = template_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            fail(f"cannot read the template file {str(template_file)!r}: {err}")
    assert template is not None
    client = store_client(ctx.obj, create=True)
    if session is not None:
        require_session(client, session)
    with client_errors():
        made = client.sync.triggers.add(name, template, session_id=session)
    _print_secret(made, "added")


@app.command("list")
def list_triggers(ctx: typer.Context) -> None:
    """List every trigger (never their secrets), oldest first."""
    settings: Settings = ctx.obj
    columns = [
        Column("trigger"),
        Column("name", wrap=True),
        Column("owner"),
        Column("deliveries to"),
        Column("secret set", drop=2),
        Column("template", wrap=True, drop=3),
    ]
    rows = [
        [
            t.id,
            t.name,
            t.owner or "(operator)",
            t.session_id or "a new session each",
            when(t.secret_set_at),
            t.template.splitlines()[0][:80] if t.template.strip() else "",
        ]
        for t in store_client(settings).sync.triggers.list(every=True)
    ]
    print_table(console, columns, rows)


@app.command()
def delete(ctx: typer.Context, trigger: TriggerArg) -> None:
    """Delete a trigger: deliveries to it are refused (404) from now on."""
    with client_errors():
        store_client(ctx.obj).sync.triggers.delete(trigger)
    say(Text(f"trigger {trigger} deleted"))


@app.command("rotate-secret")
def rotate_secret(ctx: typer.Context, trigger: TriggerArg) -> None:
    """Give a trigger a new secret and print it (shown this once); the old secret stops
    working at once, so set the new one at the sender (GitHub: the webhook's Secret)."""
    with client_errors():
        made = store_client(ctx.obj).sync.triggers.rotate_secret(trigger)
    _print_secret(made, "has a new secret")


def _print_secret(made: TriggerWithSecret, what: str) -> None:
    trigger = made.trigger
    target = f"session {trigger.session_id}" if trigger.session_id else "a new session per delivery"
    say(Text(f"trigger {trigger.id} ({trigger.name!r}) {what}: deliveries to {target}"))
    say(Text(f"  deliveries: POST /api/triggers/{trigger.id} (on `duragent serve`), signed"))
    say(Text(f"  secret: {made.secret}"))
    say(Text("  (shown this once: give it to the sender now, e.g. GitHub's webhook Secret)"))
