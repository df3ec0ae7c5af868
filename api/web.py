"""The web page: static files shipped inside the package, served at `/` and `/web/`.

No build step and nothing from another host: the page is plain ES modules and one style
sheet. The Content-Security-Policy allows scripts from this server only and no inline
script, so model output that slipped through the page's markdown renderer still could not
run; `connect-src 'self'` keeps every request on this server.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

WEB_DIR = Path(__file__).parent / "web"

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # A new version of the page is picked up on the next load.
    "Cache-Control": "no-cache",
}


class _PageFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def mount_web(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", headers=SECURITY_HEADERS)

    app.mount("/web", _PageFiles(directory=WEB_DIR), name="web")
