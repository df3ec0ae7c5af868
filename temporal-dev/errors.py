"""The errors of starting a dev server."""

from __future__ import annotations


class DevServerError(RuntimeError):
    """The dev server binary is missing, failed to start, or never became ready."""


class PortInUseError(DevServerError):
    """A port we asked the server to bind is taken (retryable if we picked it)."""
