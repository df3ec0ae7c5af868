"""`python http_server.py NAME LOG PORT [TOKEN]`: the test MCP server over streamable HTTP.

With TOKEN, every request must carry `Authorization: Bearer TOKEN` (a header from the
client's config), or gets 401.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import uvicorn
from tools import Log, build


def main() -> None:
    name, log, port = sys.argv[1], Log(Path(sys.argv[2])), int(sys.argv[3])
    token = sys.argv[4] if len(sys.argv) > 4 else None
    app = build(name, log).streamable_http_app()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and token is not None:
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
