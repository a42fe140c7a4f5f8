"""A training job's parameters: one model per mode, what a mode refuses, stored rows read back."""

from __future__ import annotations

from typing import Any

import pytest

from cobalt.shared.contracts.training import TrainingMode
from cobalt.shared.contracts.training_params import (
    MODE_PARAMS,
    CobaltParams,
    EpisodeParams,
    MultiTurnParams,
    VerpoParams,
    stored_training_params,
    training_params,
)
from cobalt.shared.errors import InvalidInput

EPISODE_ONLY = {"turns": 2, "stop_on_pass": False, "think_cap_chars": 100, "template": "default"}


def test_every_mode_has_its_model_and_the_union_picks_it() -> None:
    assert set(MODE_PARAMS) == set(TrainingMode)
    for mode, model in MODE_PARAMS.items():
        params = training_params(mode, {})
        assert type(params) is model and params.mode == mode
    assert isinstance(training_params(TrainingMode.VERPO, {}), EpisodeParams)
    assert not isinstance(training_params(TrainingMode.SINGLE_TURN, {}), EpisodeParams)


@pytest.mark.parametrize("mode", [TrainingMode.COBALT, TrainingMode.SINGLE_TURN])
@pytest.mark.parametrize("name", sorted(EPISODE_ONLY))
def test_a_single_turn_mode_refuses_each_episode_setting(mode: TrainingMode, name: str) -> None:
    with pytest.raises(InvalidInput, match=f"{name}: multi-turn settings, but the job's mode"):
        training_params(mode, {name: EPISODE_ONLY[name]})


@pytest.mark.parametrize("mode", [m for m in TrainingMode if m != TrainingMode.VERPO])
def test_only_verpo_takes_an_outcome_weight(mode: TrainingMode) -> None:
    with pytest.raises(InvalidInput, match="verpo_outcome_weight: a VeRPO setting"):
        training_params(mode, {"verpo_outcome_weight": 0.3})
    assert training_params(TrainingMode.VERPO, {"verpo_outcome_weight": 0.3}) == VerpoParams(
        verpo_outcome_weight=0.3
    )


def test_verpo_refuses_format_rules_and_a_bad_value_reads_the_same_in_every_mode() -> None:
    with pytest.raises(InvalidInput, match="reward_format: the VeRPO reward reads only"):
        training_params(TrainingMode.VERPO, {"reward_format": "instruct"})
    for mode in TrainingMode:
        with pytest.raises(InvalidInput, match="training parameter turns: "):
            training_params(mode, {"turns": 0})
        with pytest.raises(InvalidInput, match="training parameter bogus: "):
            training_params(mode, {"bogus": 1})


def test_stored_parameters_round_trip_and_old_rows_with_every_setting_still_read() -> None:
    params = training_params(TrainingMode.MULTI_TURN, {"turns": 4, "temperature": 1.0})
    stored = params.model_dump(mode="json", exclude={"mode"})
    assert "mode" not in stored and "verpo_outcome_weight" not in stored
    assert stored_training_params("multi-turn", stored) == params
    # A row written before the per-mode models: every mode's settings, defaults included.
    old: dict[str, Any] = {
        **CobaltParams().model_dump(mode="json", exclude={"mode"}),
        **dict(turns=3, stop_on_pass=True, think_cap_chars=6000, template=None),
        **dict(verpo_outcome_weight=0.5, max_staleness=2),
    }
    assert stored_training_params("cobalt", old) == CobaltParams(max_staleness=2)
    verpo = stored_training_params("verpo", old)
    assert isinstance(verpo, VerpoParams) and verpo.episode_turns == 3 and verpo.max_staleness == 2
    assert isinstance(stored_training_params("multi-turn", old), MultiTurnParams)


@pytest.mark.parametrize("mode", list(TrainingMode))
def test_every_mode_has_an_error_budget_and_judge_retries(mode: TrainingMode) -> None:
    params = training_params(mode, {})
    assert (params.error_budget, params.judge_retries) == (0.05, 2)
    assert training_params(mode, {"error_budget": 0.2}).error_budget == 0.2
    for bad in ({"error_budget": 1.5}, {"error_budget": -0.1}, {"judge_retries": -1}):
        with pytest.raises(InvalidInput, match=f"training parameter {next(iter(bad))}"):
            training_params(mode, bad)
