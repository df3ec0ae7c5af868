"""The base of every error duragent raises for a user to read (`duragent.DuragentError`)."""

from __future__ import annotations


class DuragentError(Exception):
    """Base class: every duragent error says what went wrong in its message."""
