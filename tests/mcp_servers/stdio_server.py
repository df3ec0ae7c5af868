"""`python stdio_server.py NAME LOG`: the test MCP server over stdio (see `tools.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

from tools import Log, build

if __name__ == "__main__":
    build(sys.argv[1], Log(Path(sys.argv[2]))).run("stdio")
