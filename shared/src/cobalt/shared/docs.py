"""The API documentation pages of every Cobalt server, served from the server itself.

FastAPI's `/docs` and `/redoc` load Swagger UI and ReDoc from a CDN, so on an offline GPU
cluster they are blank pages. Here their assets come from the `fastapi-offline` package
(which ships them; pinned in requirements/constraints.txt) under `/docs-assets`, and the
OpenAPI document is built once and its JSON kept: `/openapi.json` needs no token, so
asking for it must cost nothing but the send.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "ASSETS_PATH",
    "MAX_ASSET_DOWNLOADS",
    "NO_DEFAULT_DOCS",
    "AtMostAtOnce",
    "serve_api_docs",
]

NO_DEFAULT_DOCS: dict[str, Any] = {"docs_url": None, "redoc_url": None, "openapi_url": None}
"""`FastAPI(**NO_DEFAULT_DOCS)`: leave the documentation routes to `serve_api_docs`."""

ASSETS_PATH = "/docs-assets"
ASSETS_PACKAGE = ("fastapi_offline", "static")


def serve_api_docs(app: FastAPI) -> None:
    """Add `/openapi.json` (built once, on first request), `/docs` (Swagger UI) and
    `/redoc` (ReDoc) to `app`, with every asset served locally. Call it last, after every
    route and every change to `app.openapi`."""
    title = app.title
    cache: dict[str, bytes] = {}

    async def openapi_json(request: Request) -> Response:
        if "json" not in cache:
            cache["json"] = json.dumps(app.openapi(), separators=(",", ":")).encode()
        return Response(cache["json"], media_type="application/json")

    swagger = get_swagger_ui_html(
        openapi_url="/openapi.json",
        title=f"{title} - Swagger UI",
        swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
    ).body
    redoc = get_redoc_html(
        openapi_url="/openapi.json",
        title=f"{title} - ReDoc",
        redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
        with_google_fonts=False,
    ).body

    async def swagger_page(request: Request) -> HTMLResponse:
        return HTMLResponse(swagger)

    async def redoc_page(request: Request) -> HTMLResponse:
        return HTMLResponse(redoc)

    app.add_route("/openapi.json", openapi_json, include_in_schema=False)
    app.add_route("/docs", swagger_page, include_in_schema=False)
    app.add_route("/redoc", redoc_page, include_in_schema=False)
    assets = StaticFiles(packages=[ASSETS_PACKAGE])
    app.mount(ASSETS_PATH, AtMostAtOnce(assets, MAX_ASSET_DOWNLOADS), name="docs-assets")


MAX_ASSET_DOWNLOADS = 8
"""Asset downloads served at once. Each holds an open file until its (anonymous, maybe
slow) client has read it: unbounded, 1,470 of them took every descriptor of a 512-fd
executor. More at once get 503 with Retry-After; a browser loads four."""


class AtMostAtOnce:
    """An ASGI app that runs `app` for at most `limit` HTTP requests at once and answers
    the rest 503 (Retry-After: 1) at once, holding nothing for them."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.running = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.running >= self.limit:
            busy = PlainTextResponse(
                "too many downloads at once; retry shortly", 503, {"Retry-After": "1"}
            )
            await busy(scope, receive, send)
            return
        self.running += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.running -= 1
