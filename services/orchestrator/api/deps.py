"""What routes ask for by type: the store's sessionmaker and the settings (from app.state)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.settings import OrchestratorSettings

__all__ = ["Sessions", "Settings"]


def sessions_of(request: Request) -> sessionmaker[Session]:
    sessions: sessionmaker[Session] = request.app.state.sessions
    return sessions


def settings_of(request: Request) -> OrchestratorSettings:
    settings: OrchestratorSettings = request.app.state.settings
    return settings


Sessions = Annotated[sessionmaker[Session], Depends(sessions_of)]
Settings = Annotated[OrchestratorSettings, Depends(settings_of)]
