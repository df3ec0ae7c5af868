"""A bound on request bodies, applied before they are read.

FastAPI's own `max_body_size` answers a declared oversize body with a plain "Content Too
Large" whatever the app's handlers say; this one answers with JSON naming the limit.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Refuse (413) a request whose body is over `limit` bytes: at once when its
    Content-Length says so, else as soon as the bytes received pass it (raised as an
    `HTTPException` from the body read, which the app's handlers turn into the answer)."""

    def __init__(self, app: ASGIApp, limit: int, detail: str) -> None:
        self.app = app
        self.limit = limit
        self.detail = detail

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            response = JSONResponse({"detail": self.detail}, status_code=413)
            await response(scope, receive, send)
            return
        received = 0

        async def bounded_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise HTTPException(413, self.detail)
            return message

        await self.app(scope, bounded_receive, send)
