"""Serves the web UI (services/orchestrator/src/cobalt/orchestrator/ui/): static files at /ui, / redirects there.

The UI is plain HTML, CSS and ES modules that read the REST API from the browser, so it
needs no build step and no server of its own (docs/ui.md).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["UI_DIRECTORY", "install_ui"]

UI_DIRECTORY = Path(__file__).resolve().parent.parent / "ui"


def install_ui(app: FastAPI) -> None:
    app.mount("/ui", StaticFiles(directory=UI_DIRECTORY, html=True), name="ui")

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/ui/")
