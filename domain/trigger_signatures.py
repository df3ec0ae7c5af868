"""Whether a delivery to a trigger is signed with its secret, fresh, and named: the two
forms a sender may sign in (docs/triggers.md, "A GitHub webhook, end to end"). No I/O: the caller
gives the headers, the body and the time, and remembers delivery ids (`store.triggers`).

- duragent's form: `X-Duragent-Timestamp` (Unix seconds), `X-Duragent-Delivery` (an id
  the sender picks, new for each delivery) and `X-Duragent-Signature: sha256=<hex>`, the
  HMAC-SHA256 under the secret of `<timestamp>.<delivery>.<body>`: all three are signed,
  and a timestamp more than `TIMESTAMP_WINDOW_S` away from the server's clock is refused.
- GitHub's form: `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the body alone,
  with the id GitHub gives each delivery in `X-GitHub-Delivery`. GitHub sends no
  timestamp and does not sign the id, so a replay is told by its id or by its
  signature (the same body under a new id), both remembered for `DELIVERY_MEMORY_S`.

Signatures are compared in constant time (`hmac.compare_digest`), and checked before
anything else in the request is looked at: a sender without the secret learns nothing
but "bad signature".
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from duragent.domain.triggers import TriggerRefused

TIMESTAMP_WINDOW_S = 300
"""How far a signed timestamp may be from the server's clock, either way (clock skew
and transit), in seconds."""
DELIVERY_MEMORY_S = 7 * 24 * 3600
"""How long delivery ids (and signatures) are remembered, far past the timestamp window
and past the 3 days for which GitHub offers to redeliver an event."""
MAX_DELIVERY_ID_CHARS = 200
_DELIVERY_ID = re.compile(r"[A-Za-z0-9._:\-]+")

DURAGENT_SIGNATURE = "x-duragent-signature"
DURAGENT_TIMESTAMP = "x-duragent-timestamp"
DURAGENT_DELIVERY = "x-duragent-delivery"
GITHUB_SIGNATURE = "x-hub-signature-256"
GITHUB_DELIVERY = "x-github-delivery"
GITHUB_EVENT = "x-github-event"

SignatureForm = Literal["duragent", "github"]


class SignatureRefused(TriggerRefused):
    """No signature, or not one made with the trigger's secret."""


class TimestampRefused(TriggerRefused):
    """The signed timestamp is missing, malformed or outside the window."""


class DeliveryIdRefused(TriggerRefused, ValueError):
    """The delivery id is missing or malformed."""


class DeliveryReplayed(TriggerRefused):
    def __init__(self, reason: str) -> None:
        super().__init__(f"replayed delivery: {reason}; nothing was done")


@dataclass(frozen=True)
class SignedDelivery:
    """A delivery whose signature holds: its id, and the signature that says a replay
    of its body under another id (GitHub's form signs no id)."""

    delivery_id: str
    signature: str
    form: SignatureForm


def sign(secret: str, body: bytes, *, timestamp: int, delivery_id: str) -> str:
    """duragent's form: the `X-Duragent-Signature` value for these."""
    return "sha256=" + _hmac(secret, f"{timestamp}.{delivery_id}.".encode() + body)


def sign_github(secret: str, body: bytes) -> str:
    """GitHub's form: the `X-Hub-Signature-256` value for this body."""
    return "sha256=" + _hmac(secret, body)


def _hmac(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def check_delivery(
    secret: str, headers: Mapping[str, str], body: bytes, now_s: float
) -> SignedDelivery:
    """The delivery, if it is signed with `secret` and fresh; else the refusal naming
    what is wrong. `headers` are looked up by lower-case name."""
    if DURAGENT_SIGNATURE in headers:
        timestamp = headers.get(DURAGENT_TIMESTAMP, "")
        delivery_id = headers.get(DURAGENT_DELIVERY, "")
        given = headers[DURAGENT_SIGNATURE]
        expected = sign(secret, body, timestamp=_int_or(timestamp), delivery_id=delivery_id)
        if not timestamp.isdigit() or not _same(given, expected):
            raise SignatureRefused(
                "bad signature: X-Duragent-Signature is not the HMAC-SHA256 of "
                "<X-Duragent-Timestamp>.<X-Duragent-Delivery>.<body> under the trigger's secret"
            )
        skew = now_s - int(timestamp)
        if abs(skew) > TIMESTAMP_WINDOW_S:
            when = "old" if skew > 0 else "in the future"
            raise TimestampRefused(
                f"timestamp {timestamp} is {abs(int(skew))} s {when}; a delivery must be "
                f"signed within {TIMESTAMP_WINDOW_S} s of the server's clock"
            )
        return SignedDelivery(_delivery_id(delivery_id, "X-Duragent-Delivery"), given, "duragent")
    if GITHUB_SIGNATURE in headers:
        given = headers[GITHUB_SIGNATURE]
        if not _same(given, sign_github(secret, body)):
            raise SignatureRefused(
                "bad signature: X-Hub-Signature-256 is not the HMAC-SHA256 of the body "
                "under the trigger's secret"
            )
        delivery_id = _delivery_id(headers.get(GITHUB_DELIVERY, ""), "X-GitHub-Delivery")
        return SignedDelivery(delivery_id, given, "github")
    raise SignatureRefused(
        "no signature: sign the body with the trigger's secret, in X-Hub-Signature-256 "
        "(GitHub's form) or X-Duragent-Signature with X-Duragent-Timestamp"
    )


def _same(given: str, expected: str) -> bool:
    """Constant-time equality (on bytes: a header may hold any character)."""
    return hmac.compare_digest(given.encode(), expected.encode())


def _int_or(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _delivery_id(value: str, header: str) -> str:
    if not value:
        raise DeliveryIdRefused(f"no delivery id: {header} is missing")
    if len(value) > MAX_DELIVERY_ID_CHARS or not _DELIVERY_ID.fullmatch(value):
        raise DeliveryIdRefused(
            f"delivery id in {header} must be 1 to {MAX_DELIVERY_ID_CHARS} letters, digits "
            "and . _ : -"
        )
    return value
