"""Runs' and training jobs' parameters are typed in the REST contract (`RunParams`, the
mode's `TrainingParams`): the OpenAPI document shows their fields, and rows stored before
the models (other keys, missing keys, other modes' settings) still read, and so do training
jobs stored before their params JSON named its mode (migration 0015)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import JSON, column, insert, select, table
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.runs.service import run_public
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store import repo_bandit, repo_datasets, repo_training
from cobalt.orchestrator.store.db import (
    alembic_config,
    make_engine,
    make_sessionmaker,
    upgrade_database,
)
from cobalt.orchestrator.training.service import job_public
from cobalt.shared import defaults
from cobalt.shared.contracts.browse import BanditDatasetParams, BanditMix
from cobalt.shared.contracts.training import TrainingMode
from cobalt.shared.contracts.training_params import (
    MODE_PARAMS,
    CobaltParams,
    VerpoParams,
    training_params,
)
from tests.support.databases import empty_database


def _ref(node: dict[str, Any]) -> str:
    return str(node["$ref"]).rsplit("/", 1)[-1]


def test_the_document_types_every_params_field(tmp_path: Any) -> None:
    app = create_app(OrchestratorSettings(database_url=f"sqlite:///{tmp_path}/x.db"))
    components = app.openapi()["components"]["schemas"]
    run_params = components[_ref(components["RunPublic"]["properties"]["params"])]
    assert {"n", "max_tokens", "turns", "limits", "compare", "problems"} <= set(
        run_params["properties"]
    )
    job_params = components["TrainingJobPublic"]["properties"]["params"]
    members = {_ref(member) for member in job_params["oneOf"]}
    assert members == {model.__name__ for model in MODE_PARAMS.values()}
    assert job_params["discriminator"]["propertyName"] == "mode"
    assert "verpo_outcome_weight" in components["VerpoParams"]["properties"]
    assert "turns" not in components["CobaltParams"]["properties"]
    request = components["TrainingJobCreate"]["properties"]["params"]
    request = components[_ref(request)] if "$ref" in request else request
    assert request["title"] == "AnyModeTrainingParams"
    assert {"trainer", "turns", "reward_format", "verpo_outcome_weight"} <= set(
        request["properties"]
    )
    assert request["additionalProperties"] is False


def stored_row(session: Session, table_name: str, **values: Any) -> int:
    """A row as an older version wrote it: its JSON exactly as given, past the models'
    column types (which write only what today's models dump)."""
    columns = [column(name, JSON() if isinstance(v, dict) else None) for name, v in values.items()]
    statement = insert(table(table_name, *columns, column("id"))).values(**values)
    return int(session.execute(statement.returning(column("id"))).scalar_one())


def test_rows_stored_before_the_models_still_read(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="old", source="jsonl")
        run_id = stored_row(
            session, "runs", kind="sample", status="pending", dataset_id=dataset.id,
            base_url="http://m/v1", model="m", params={"n": 2, "turns": 1, "retired_setting": "x"},
            template_name="default", template_sha256="0" * 64, total_trajectories=0,
        )  # fmt: skip
        # Training jobs' JSON as migration 0015 left it: the mode copied into the params.
        job = {"model": "m", "status": "pending", "step": 0, "policy_version": 0}
        mixed_id = stored_row(
            session, "training_jobs", name="mixed", mode="cobalt", **job,
            params={"turns": 3, "verpo_outcome_weight": 0.5, "temperature": 0.3,
                    "trainer": {"n_samples": 4}, "mode": "cobalt"},
        )  # fmt: skip
        verpo_id = stored_row(
            session, "training_jobs", name="verpo", mode="verpo", **job,
            params={"turns": 2, "reward_format": "instruct", "mode": "verpo"},
        )  # fmt: skip
    public = run_public(sessions, run_id)
    assert (public.params.n, public.params.feedback_turns) == (2, 1)
    assert public.params.max_tokens == defaults.MAX_RESPONSE_TOKENS  # the row lacks it
    shown = public.model_dump(mode="json")["params"]
    assert shown["turns"] == 1 and "feedback_turns" not in shown and "retired_setting" not in shown
    cobalt = job_public(sessions, mixed_id).params
    assert isinstance(cobalt, CobaltParams) and cobalt.mode == TrainingMode.COBALT
    assert (cobalt.temperature, cobalt.trainer.n_samples) == (0.3, 4)
    assert "turns" not in cobalt.model_dump()  # another mode's setting, dropped
    episodes = job_public(sessions, verpo_id).params
    assert isinstance(episodes, VerpoParams) and episodes.episode_turns == 2


def test_a_bandit_dataset_stored_before_the_parity_options_reads_with_their_defaults(
    sessions: sessionmaker[Session],
) -> None:
    """A bandit dataset built before `first_stop_turns`, `research_validation` and
    `turn_zero_only` were stored reads as every build was then."""
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="old", source="jsonl")
        run_id = stored_row(
            session, "runs", kind="sample", status="finished", dataset_id=dataset.id,
            base_url="http://m/v1", model="m", params={"n": 2}, template_name="default",
            template_sha256="0" * 64, total_trajectories=0,
        )  # fmt: skip
        first_version = {
            "validation": False, "keep": 4, "context_turns": [1, 2, 3],
            "max_prompt_tokens": 4096, "seed": 1234, "mix": [{"name": "p", "ratio": 0.5}],
            "tokenizer": "/t",
        }  # fmt: skip
        stored_row(
            session, "bandit_datasets", name="old-contexts", source_run_id=run_id,
            split="train", params=first_version, counts={},
        )  # fmt: skip
    with sessions() as session:
        params = repo_bandit.get_bandit_dataset(session, name="old-contexts").params
    assert params == BanditDatasetParams(
        validation=False, keep=4, context_turns=(1, 2, 3), max_prompt_tokens=4096, seed=1234,
        mix=(BanditMix(name="p", ratio=0.5),), tokenizer="/t", first_stop_turns=(0, 1),
    )  # fmt: skip
    assert not params.research_validation and not params.turn_zero_only


def test_a_jobs_params_name_its_mode_and_the_mode_column_follows_them(
    sessions: sessionmaker[Session],
) -> None:
    """The params column stores its mode and reads back as the mode's model; the `mode`
    column (filtered on) is set from the params, and only a mode's model is stored."""
    verpo = training_params(TrainingMode.VERPO, {"turns": 2})
    with sessions.begin() as session:
        job = repo_training.create_job(
            session, name="j", model="m", bandit_dataset_id=None, params=verpo
        )
        job_id = job.id
        assert job.mode == "verpo"
        with pytest.raises(TypeError, match="TrainingParams"):
            job.params = {"mode": "verpo"}  # type: ignore[assignment]
    with sessions() as session:
        stored = table("training_jobs", column("id"), column("params", JSON()))
        raw = session.execute(select(stored.c.params).where(stored.c.id == job_id)).scalar_one()
    assert raw["mode"] == "verpo" and raw["turns"] == 2
    assert job_public(sessions, job_id).params == verpo


@pytest.fixture(params=["postgresql", "sqlite"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of its own, for tests that move the schema up and down."""
    with empty_database(request.param, tmp_path) as url:
        yield url


def test_migration_0015_names_each_jobs_mode_in_its_params_and_downgrade_removes_it(
    fresh_url: str,
) -> None:
    """A job stored before 0015 (params without their mode, other modes' settings beside
    its own) reads as its mode's model after the upgrade; the downgrade restores its JSON."""
    upgrade_database(fresh_url, "0014")
    old_params = {"turns": 3, "verpo_outcome_weight": 0.5, "temperature": 0.3,
                  "trainer": {"n_samples": 4}}  # fmt: skip
    engine = make_engine(fresh_url)
    stored = table("training_jobs", column("id"), column("params", JSON()))
    try:
        with make_sessionmaker(engine).begin() as session:
            job_id = stored_row(
                session, "training_jobs", name="old", mode="cobalt", model="m",
                status="pending", step=0, policy_version=0, params=old_params,
            )  # fmt: skip
        upgrade_database(fresh_url)
        cobalt = job_public(make_sessionmaker(engine), job_id).params
        assert isinstance(cobalt, CobaltParams)
        assert (cobalt.temperature, cobalt.trainer.n_samples) == (0.3, 4)
        assert "turns" not in cobalt.model_dump()  # another mode's setting, dropped
        command.downgrade(alembic_config(fresh_url), "0014")
        with engine.connect() as conn:
            assert conn.execute(select(stored.c.params)).scalar_one() == old_params
    finally:
        engine.dispose()
