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
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_PATH", "NO_DEFAULT_DOCS", "serve_api_docs"]

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
    app.mount(ASSETS_PATH, StaticFiles(packages=[ASSETS_PACKAGE]), name="docs-assets")
