"""Start and stop a real Temporal dev server backed by an SQLite file.

Typical use::

    async with DevServer(Path("state/temporal.db")) as server:
        client = await Client.connect(server.address)
"""

from .server import (
    BINARY_ENV_VAR,
    DYNAMIC_CONFIG,
    SEARCH_ATTRIBUTES,
    SQLITE_PRAGMAS,
    DevServer,
    DevServerError,
    find_temporal_binary,
    is_reachable,
)

__all__ = [
    "BINARY_ENV_VAR",
    "DYNAMIC_CONFIG",
    "SEARCH_ATTRIBUTES",
    "SQLITE_PRAGMAS",
    "DevServer",
    "DevServerError",
    "find_temporal_binary",
    "is_reachable",
]
