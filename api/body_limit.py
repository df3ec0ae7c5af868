"""A bound on request bodies, applied before they are read.

FastAPI's own `max_body_size` answers a declared oversize body with a plain "Content Too
Large" whatever the app's handlers say; this one answers with JSON naming the limit.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Refuse (413) a request whose body is over `limit` bytes: at once when its
    Content-Length says so, else as soon as the bytes received pass it (raised as an
    `HTTPException` from the body read, which the app's handlers turn into the answer).
    `paths` gives a path a limit and answer of its own (a whole file's, not one text's),
    `prefixes` every path below a prefix (a webhook's body, not one text)."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        detail: str,
        paths: Mapping[str, tuple[int, str]] | None = None,
        prefixes: Mapping[str, tuple[int, str]] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.detail = detail
        self.paths = dict(paths or {})
        self.prefixes = dict(prefixes or {})

    def _bound(self, path: str) -> tuple[int, str]:
        if path in self.paths:
            return self.paths[path]
        below = (bound for prefix, bound in self.prefixes.items() if path.startswith(prefix))
        return next(below, (self.limit, self.detail))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, detail = self._bound(scope["path"])
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            response = JSONResponse({"detail": detail}, status_code=413)
            await response(scope, receive, send)
            return
        received = 0

        async def bounded_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, detail)
            return message

        await self.app(scope, bounded_receive, send)
