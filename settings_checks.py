"""The rules of single settings: each function parses or checks the value of one variable
(or of the TLS variables together) and says what is wrong as a `SettingError` naming the
variable and the rule. The `Settings` model (`settings.py`) runs them in its validators;
they are re-exported there, where their users import them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Protocol

from duragent.domain.prices import PriceFileError, PriceTable, parse_price_table

ToolSandbox = Literal["none", "bwrap"]
TOOL_SANDBOXES: tuple[ToolSandbox, ...] = ("none", "bwrap")


class SettingError(ValueError):
    """A setting breaks its rule; the message names the variable and the rule."""


def parse_tokens(spec: str) -> dict[str, str]:
    """`"tok1=alice,tok2=bob"` -> {"tok1": "alice", "tok2": "bob"}; a bare token is user
    `default`."""
    tokens: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        token, _, user = part.partition("=")
        tokens[token] = user or "default"
    return tokens


_TOOL_ENV_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\*|=.*)?", re.DOTALL)
TOOL_ENV_RULE = "NAME (passed through), PREFIX* (every name starting so) or NAME=value"


def parse_tool_env(spec: str) -> list[str]:
    """`"GOPATH,CI=1,PIP_*"` -> ["GOPATH", "CI=1", "PIP_*"] (values cannot hold commas)."""
    entries = [part.strip() for part in spec.split(",") if part.strip()]
    for entry in entries:
        check_tool_env_entry(entry)
    return entries


def check_tool_env_entry(entry: str) -> None:
    if _TOOL_ENV_ENTRY.fullmatch(entry) is None:
        raise SettingError(f"DURAGENT_TOOL_ENV: {entry!r} is not {TOOL_ENV_RULE}")


def parse_tool_sandbox(value: str) -> ToolSandbox:
    """`DURAGENT_TOOL_SANDBOX`: empty or `none`, or `bwrap`."""
    name = value.strip().lower() or "none"
    for sandbox in TOOL_SANDBOXES:
        if name == sandbox:
            return sandbox
    raise SettingError(
        f"DURAGENT_TOOL_SANDBOX: {value!r} is not one of {', '.join(TOOL_SANDBOXES)}"
    )


_BIND_ADDRESS = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})")


def check_bind_address(address: str) -> None:
    """`DURAGENT_WORKER_METRICS`: `host:port` (an IPv6 host in brackets), port 1-65535."""
    match = _BIND_ADDRESS.fullmatch(address.strip())
    if match is None or not 0 < int(match.group(2)) < 65536:
        raise SettingError(
            f"DURAGENT_WORKER_METRICS: {address!r} is not host:port with a port from 1 to "
            "65535 (e.g. 127.0.0.1:9464, or 0.0.0.0:9464 for every interface)"
        )


def read_price_file(path: Path) -> PriceTable:
    """The price table in the file at `path`.

    Raises:
        PriceFileError: it cannot be read, is not TOML, or breaks the table's shape (the
            message names the file and the field).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise PriceFileError(f"{path}: cannot be read ({err})") from None
    return parse_price_table(text, str(path))


_TLS_VARIABLES = {
    "temporal_tls_client_cert": "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "temporal_tls_client_key": "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "temporal_tls_server_ca": "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "temporal_tls_server_name": "TEMPORAL_TLS_SERVER_NAME",
}
"""The TLS settings (field -> its variable); the first three name PEM files."""


class TlsSettings(Protocol):
    """The TLS settings `check_temporal_tls` reads (a `Settings` has them)."""

    temporal_tls: bool | None
    temporal_tls_client_cert: Path | None
    temporal_tls_client_key: Path | None
    temporal_tls_server_ca: Path | None
    temporal_tls_server_name: str | None


def tls_given(settings: TlsSettings) -> list[str]:
    """The variables of the TLS settings that are set."""
    return [var for field, var in _TLS_VARIABLES.items() if getattr(settings, field) is not None]


def check_temporal_tls(settings: TlsSettings) -> None:
    """The TLS files exist and hold PEM, a client certificate comes with its key, and no
    TLS setting is given with TLS turned off: said here, rather than as a failed handshake
    of every connection later.

    Raises:
        SettingError: naming the variable and the rule.
    """
    for field in ("temporal_tls_client_cert", "temporal_tls_client_key", "temporal_tls_server_ca"):
        path: Path | None = getattr(settings, field)
        if path is not None:
            check_pem_file(_TLS_VARIABLES[field], path)
    cert, key = settings.temporal_tls_client_cert, settings.temporal_tls_client_key
    if (cert is None) != (key is None):
        given, missing = ("CERT", "KEY") if key is None else ("KEY", "CERT")
        raise SettingError(
            f"TEMPORAL_TLS_CLIENT_{given}_PATH is set but TEMPORAL_TLS_CLIENT_{missing}_PATH "
            "is not: a client certificate and its key go together"
        )
    if settings.temporal_tls is False and (given_tls := tls_given(settings)):
        raise SettingError(f"TEMPORAL_TLS is false, but {given_tls[0]} is set: unset one of them")


def check_pem_file(variable: str, path: Path) -> None:
    """`path` is a readable file of PEM blocks (`-----BEGIN ...`), as TLS wants."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise SettingError(f"{variable}: {path} cannot be read ({err.strerror})") from None
    if b"-----BEGIN " not in data:
        raise SettingError(f"{variable}: {path} is not a PEM file (no -----BEGIN line)")
