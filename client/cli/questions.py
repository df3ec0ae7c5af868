"""Questions the model asks the user (`ask_user`): list those that wait, answer one."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, TextIO

import typer
from rich.markup import escape

from duragent.client.api import DuragentClient
from duragent.client.cli.command import SessionArg
from duragent.client.cli.views import console
from duragent.client.cli.waits import list_waiting, send_word
from duragent.client.errors import DuragentError
from duragent.domain.questions import PendingQuestion
from duragent.store.records import StoredEvent


def questions(ctx: typer.Context, session: SessionArg) -> None:
    """List the questions of the session's run that wait for an answer (`ask_user`)."""
    list_waiting(
        ctx.obj,
        lambda client: client.questions.pending(session),
        none="no question waits for an answer",
        lines=lambda item: [
            *question_lines(item),
            f'  answer: duragent answer {session} {item.call_id} "TEXT"',
        ],
    )


def answer(
    ctx: typer.Context,
    session: SessionArg,
    call: Annotated[str, typer.Argument(help="A waiting question's call id (duragent questions).")],
    text: Annotated[
        str,
        typer.Argument(
            help="The answer, the call's result as the model reads it (with choices: one of "
            "them, or other text if the question allows it)."
        ),
    ],
) -> None:
    """Answer a question the model asked (`ask_user`). Needs a worker answering for the
    run; a question is answered once (a second answer is refused)."""
    send_word(
        ctx.obj,
        lambda client: client.questions.answer(session, call, text),
        lambda outcome: f"answered: {outcome.call_id}",
    )


def question_lines(item: PendingQuestion) -> list[str]:
    """A waiting question as the terminal shows it: the question, then its choices."""
    lines = [f"{item.call_id}  {item.question}  (turn {item.turn})"]
    for number, choice in enumerate(item.choices or [], 1):
        lines.append(f"  {number}. {choice}")
    if item.choices and not item.allow_other:
        lines.append("  (answer with one of the choices)")
    return lines


class InlineAnswers:
    """`duragent run` on a terminal: a question the run asks is answered right there.

    One question is prompted at a time, in the order asked; a line typed answers it (a
    number picks that choice), an empty line leaves it for later (`duragent answer`).
    A question answered elsewhere (another terminal, the page) stops being prompted.
    Standard input is read only when a line is ready, so the run's events keep coming.
    """

    def __init__(self, client: DuragentClient, session_id: str, stdin: TextIO) -> None:
        self._client = client
        self._session = session_id
        self._stdin = stdin
        self._queue: list[dict[str, Any]] = []
        self._reading = False
        self._tasks: set[asyncio.Task[None]] = set()

    def on_event(self, event: StoredEvent) -> None:
        payload = event.payload
        if event.type == "question_asked":
            self._queue.append(payload)
            if len(self._queue) == 1:
                self._prompt()
        elif event.type == "question_answered":
            first = self._queue[0]["call_id"] if self._queue else None
            self._queue = [q for q in self._queue if q["call_id"] != payload["call_id"]]
            if first == payload["call_id"]:
                self._prompt()

    def close(self) -> None:
        self._queue.clear()
        self._stop_reading()

    def _prompt(self) -> None:
        if not self._queue:
            self._stop_reading()
            return
        question = self._queue[0]
        pick = "a number picks a choice; " if question.get("choices") else ""
        console.print(f"  answer here ({pick}empty line: later):", highlight=False)
        if not self._reading:
            asyncio.get_running_loop().add_reader(self._stdin.fileno(), self._line_ready)
            self._reading = True

    def _stop_reading(self) -> None:
        if self._reading:
            asyncio.get_running_loop().remove_reader(self._stdin.fileno())
            self._reading = False

    def _line_ready(self) -> None:
        line = self._stdin.readline()
        if not self._queue:
            self._stop_reading()
            return
        question = self._queue[0]
        if not line:  # end of input: nothing more will be typed
            self.close()
            return
        text = line.rstrip("\n")
        if not text.strip():
            self._queue.pop(0)
            self._prompt()
            return
        choices: list[str] = question.get("choices") or []
        if text.strip().isdigit() and 1 <= int(text.strip()) <= len(choices):
            text = choices[int(text.strip()) - 1]
        task = asyncio.create_task(self._send(question["call_id"], text))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, call_id: str, text: str) -> None:
        try:
            await self._client.questions.answer(self._session, call_id, text)
        except DuragentError as err:
            console.print(f"  [red]not answered:[/] {escape(str(err))}")
            if self._queue and self._queue[0]["call_id"] == call_id:
                self._prompt()
