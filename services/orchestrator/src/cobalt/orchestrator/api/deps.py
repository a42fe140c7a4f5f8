"""What routes ask for by type: the store's sessionmaker, the settings and the executor's
(from app.state, built once when the app starts)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.shared.clients import ExecutorClientSettings

__all__ = ["ExecutorSettings", "Sessions", "Settings"]


def sessions_of(request: Request) -> sessionmaker[Session]:
    sessions: sessionmaker[Session] = request.app.state.sessions
    return sessions


def settings_of(request: Request) -> OrchestratorSettings:
    settings: OrchestratorSettings = request.app.state.settings
    return settings


def executor_settings_of(request: Request) -> ExecutorClientSettings:
    settings: ExecutorClientSettings = request.app.state.executor_settings
    return settings


Sessions = Annotated[sessionmaker[Session], Depends(sessions_of)]
Settings = Annotated[OrchestratorSettings, Depends(settings_of)]
ExecutorSettings = Annotated[ExecutorClientSettings, Depends(executor_settings_of)]
