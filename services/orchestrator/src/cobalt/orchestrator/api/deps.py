"""What routes ask for by type: the store's sessionmaker, the settings, the executor's and
the carrier (from app.state, built once when the app starts), and the bounded path parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.carrier_base import Carrier
from cobalt.shared.clients import ExecutorClientSettings
from cobalt.shared.contracts.bounds import DATASET_NAME_CHARS, INT32_MAX, PROBLEM_ID_CHARS

__all__ = [
    "CarrierDep",
    "DatasetName",
    "ExecutorSettings",
    "ExternalId",
    "JobId",
    "RunId",
    "Sessions",
    "Settings",
    "StepNumber",
    "TurnId",
]


def sessions_of(request: Request) -> sessionmaker[Session]:
    sessions: sessionmaker[Session] = request.app.state.sessions
    return sessions


def settings_of(request: Request) -> OrchestratorSettings:
    settings: OrchestratorSettings = request.app.state.settings
    return settings


def executor_settings_of(request: Request) -> ExecutorClientSettings:
    settings: ExecutorClientSettings = request.app.state.executor_settings
    return settings


def carrier_of(request: Request) -> Carrier:
    carrier: Carrier = request.app.state.carrier
    return carrier


Sessions = Annotated[sessionmaker[Session], Depends(sessions_of)]
Settings = Annotated[OrchestratorSettings, Depends(settings_of)]
ExecutorSettings = Annotated[ExecutorClientSettings, Depends(executor_settings_of)]
CarrierDep = Annotated[Carrier, Depends(carrier_of)]

# Path parameters within what the store's columns hold: beyond them is a 422 here, never
# a database error (ids are PostgreSQL `integer`s).
RunId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a run's id")]
JobId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a training job's id")]
TurnId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a turn's id")]
StepNumber = Annotated[int, Path(ge=0, le=INT32_MAX)]
DatasetName = Annotated[str, Path(min_length=1, max_length=DATASET_NAME_CHARS)]
ExternalId = Annotated[str, Path(min_length=1, max_length=PROBLEM_ID_CHARS)]
