"""Asking the model: one request, its reply streamed back as it arrives.

The one place a turn reaches a provider: through the client the worker has for the
model's provider (`activities.models`: the seam, and one module per wire API).
Everything around the call (the save point, the context, run events, staging, the calls'
checks) is the turn's (`activities.model_turn`), in the provider-neutral messages of
`domain.messages`.
"""

from __future__ import annotations

from duragent.activities.models.clients import ModelClients
from duragent.activities.models.seam import (
    Delta,
    FailedReply,
    ModelFailed,
    ModelRequest,
    ReplyStream,
)
from duragent.domain.models import UnknownModel
from duragent.domain.turns import ProviderFailure

__all__ = ["Delta", "Model", "ModelFailed", "ModelRequest", "ReplyStream"]


class Model:
    """Asks the model; holds nothing but the worker's clients."""

    def __init__(self, clients: ModelClients) -> None:
        self._clients = clients

    def ask(self, request: ModelRequest) -> ReplyStream:
        """The request, to be streamed with `ReplyStream.reply`."""
        try:
            client = self._clients.for_model(request.snapshot.model)
        except UnknownModel as exc:  # a retry would not find it either
            failure = ProviderFailure(
                kind="not_found", status=None, message=str(exc), retryable=False
            )
            return FailedReply(request, failure)
        return client.ask(request)
