"""The chat's keys, in one table: the footer lists them, `/help` and the docs say them.

Only keys every terminal sends alike (over SSH too): Enter, Escape, Tab, the arrows and
Ctrl with a letter. Ctrl+S and Ctrl+Q stop a terminal's output where flow control is on,
so neither is needed for anything.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    keys: str
    """As Textual names them (`ctrl+g`)."""
    shown: str
    """As the footer shows them (`^G`)."""
    what: str


COMPOSER_KEYS = (
    Key("enter", "enter", "send (idle: run; busy: queue)"),
    Key("ctrl+g", "^G", "guide now"),
    Key("ctrl+t", "^T", "steer"),
    Key("ctrl+f", "^F", "follow-up"),
    Key("ctrl+j", "^J", "new line"),
    Key("up", "↑", "queued"),
    Key("ctrl+r", "^R", "answer what waits"),
    Key("escape", "esc", "stop"),
    Key("ctrl+c", "^C ^C", "leave"),
)
"""The message box's keys (`up` reaches the queued messages when the box is empty)."""

CHIP_KEYS = (
    Key("e", "e", "edit"),
    Key("g", "g", "guide"),
    Key("d", "d", "delete"),
    Key("escape", "esc", "back to the box"),
)
"""A queued message's keys (its chip has the focus)."""

APPROVAL_KEYS = (
    Key("y", "y", "approve"),
    Key("a", "a", "always"),
    Key("n", "n", "deny (with a reason)"),
    Key("escape", "esc", "back"),
)

QUESTION_KEYS = (
    Key("1-9", "1-9", "pick a choice"),
    Key("enter", "enter", "answer"),
    Key("escape", "esc", "back"),
)

BUDGET_KEYS = (
    Key("enter", "enter", "raise to the number typed"),
    Key("escape", "esc", "back"),
)

DOUBLE_PRESS_S = 1.0
"""Ctrl+C twice within this leaves (the run goes on); once stops the run after it."""


def footer(keys: tuple[Key, ...]) -> str:
    return " · ".join(f"{key.shown} {key.what}" for key in keys)
