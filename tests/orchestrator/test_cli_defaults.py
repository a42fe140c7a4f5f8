"""Every default a command shows or uses is its model's: written once, in the model.

`cobalt train start` leaves unset options to the job's parameters (its options default to
None) and shows the model's default in each option's help; `cobalt run sample` and
`cobalt run refine` default their options to the request models' values.
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import BaseModel

from cobalt.orchestrator.runs.cli import run_app
from cobalt.orchestrator.training.cli import train_app
from cobalt.shared.contracts.runs import RefineRunRequest, SampleRunRequest
from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.contracts.training_params import (
    CommonTrainingParams,
    EpisodeSettings,
    FormatRules,
    VerpoSettings,
)

TRAINING_MODELS: tuple[type[BaseModel], ...] = (
    TrainerHyperparameters,
    CommonTrainingParams,
    FormatRules,
    EpisodeSettings,
    VerpoSettings,
)

RENAMED = {"think_cap": "think_cap_chars"}
"""CLI option -> model field, where the option's name is shorter."""


def command(app: typer.Typer, name: str) -> Any:
    """The click command `name` of `app` (typer's own click)."""
    group: Any = typer.main.get_command(app)
    return group.commands[name]


def model_default(models: tuple[type[BaseModel], ...], name: str) -> tuple[bool, Any]:
    for model in models:
        if name in model.model_fields:
            return True, model.model_fields[name].get_default(call_default_factory=True)
    return False, None


def shown(value: Any) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def test_train_start_shows_each_setting_s_model_default() -> None:
    checked = []
    for param in command(train_app, "start").params:
        assert param.name is not None
        known, default = model_default(TRAINING_MODELS, param.name)
        if not known or default is None:
            continue
        assert param.default is None, f"--{param.name}: unset must leave it to the job"
        help_text = getattr(param, "help", "") or ""
        assert rf"\[{shown(default)}" in help_text, (param.name, default, help_text)
        checked.append(param.name)
    # Every setting with a default the command exposes, so none of them escapes the check.
    assert {"n_samples", "lr", "kl_coef", "temperature", "top_p", "max_staleness"} <= set(checked)
    assert {"turns", "stop_on_pass", "reward_format", "verpo_outcome_weight"} <= set(checked)


def test_run_commands_default_to_their_request_models() -> None:
    # refine leaves decoding unset (None: the sample run's), so only its loop is checked.
    expected = {"sample": {"temperature", "top_p", "turns"}, "refine": {"turns"}}
    for name, model in (("sample", SampleRunRequest), ("refine", RefineRunRequest)):
        checked = []
        for param in command(run_app, name).params:
            assert param.name is not None
            field = RENAMED.get(param.name, param.name)
            known, default = model_default((model,), field)
            if not known or param.default is None:
                continue
            assert param.default == default, (name, param.name, param.default, default)
            checked.append(field)
        assert expected[name] | {"stop_on_pass", "think_cap_chars"} <= set(checked), checked
