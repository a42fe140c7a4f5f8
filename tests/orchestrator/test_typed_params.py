"""Runs' and training jobs' parameters are typed in the REST contract (`RunParams`, the
mode's `TrainingParams`): the OpenAPI document shows their fields, and rows stored before
the models (other keys, missing keys, other modes' settings) still read."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.runs.service import run_public
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_training
from cobalt.orchestrator.training.service import job_public
from cobalt.shared import defaults
from cobalt.shared.contracts.training import TrainingMode
from cobalt.shared.contracts.training_params import MODE_PARAMS, CobaltParams, VerpoParams


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


def test_rows_stored_before_the_models_still_read(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="old", source="jsonl")
        run = repo_runs.create_run(
            session, kind="sample", dataset_id=dataset.id, base_url="http://m/v1", model="m",
            params={"n": 2, "turns": 1, "retired_setting": "x"}, template_name="default",
            template_sha256="0" * 64, total_trajectories=0,
        )  # fmt: skip
        mixed = repo_training.create_job(
            session, name="mixed", mode="cobalt", model="m", bandit_dataset_id=None,
            params={"turns": 3, "verpo_outcome_weight": 0.5, "temperature": 0.3,
                    "trainer": {"n_samples": 4}},
        )  # fmt: skip
        verpo = repo_training.create_job(
            session, name="verpo", mode="verpo", model="m", bandit_dataset_id=None,
            params={"turns": 2, "reward_format": "instruct"},
        )  # fmt: skip
    public = run_public(sessions, run.id)
    assert (public.params.n, public.params.feedback_turns) == (2, 1)
    assert public.params.max_tokens == defaults.MAX_RESPONSE_TOKENS  # the row lacks it
    shown = public.model_dump(mode="json")["params"]
    assert shown["turns"] == 1 and "feedback_turns" not in shown and "retired_setting" not in shown
    cobalt = job_public(sessions, mixed.id).params
    assert isinstance(cobalt, CobaltParams) and cobalt.mode == TrainingMode.COBALT
    assert (cobalt.temperature, cobalt.trainer.n_samples) == (0.3, 4)
    assert "turns" not in cobalt.model_dump()  # another mode's setting, dropped
    episodes = job_public(sessions, verpo.id).params
    assert isinstance(episodes, VerpoParams) and episodes.episode_turns == 2
