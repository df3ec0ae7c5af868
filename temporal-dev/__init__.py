"""Start and stop a real Temporal dev server backed by an SQLite file.

Typical use::

    async with DevServer(Path("state/temporal.db")) as server:
        client = await Client.connect(server.address)
"""

from .binary import BINARY_ENV_VAR, find_temporal_binary
from .errors import DevServerError
from .flags import DYNAMIC_CONFIG, SEARCH_ATTRIBUTES, SQLITE_PRAGMAS
from .probe import is_reachable
from .server import DevServer

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
