"""Where the AG-UI endpoint lives (`api/routes_agui.py`), mounted only when the `agui`
extra (the package `ag-ui-protocol`) is installed; otherwise its paths answer 501 saying
what to install, rather than a bare 404."""

from collections.abc import Callable
from importlib.util import find_spec

from fastapi import APIRouter, FastAPI, HTTPException

from duragent.client.api import DuragentClient
from duragent.domain.extras import install_hint

AGUI_PATH = "/api/agui"
AGUI_WATCH_PATH = "/api/sessions/{session_id}/agui"
MAX_AGUI_BYTES = 8 * 1024 * 1024
"""An AG-UI client sends the whole conversation with every run; only its last message is
read (and held to the one text limit)."""
AGUI_TOO_LARGE = (
    f"request body is over {MAX_AGUI_BYTES} bytes, the most an AG-UI run input may be "
    f"({MAX_AGUI_BYTES // (1024 * 1024)} MiB)"
)
NOT_INSTALLED = (
    "the AG-UI endpoint needs the `agui` extra: "
    + install_hint("agui", "ag-ui-protocol")
    + "; then restart the API"
)


def mount_agui(app: FastAPI, client: DuragentClient, current_user: Callable[..., str]) -> None:
    if find_spec("ag_ui") is not None:
        from duragent.api.routes_agui import agui_routes

        app.include_router(agui_routes(client, current_user))
        return
    router = APIRouter()

    @router.post(AGUI_PATH, status_code=501, include_in_schema=False)
    @router.get(AGUI_WATCH_PATH, status_code=501, include_in_schema=False)
    def not_installed() -> None:
        raise HTTPException(501, NOT_INSTALLED)

    app.include_router(router)
