"""Every default a command shows or uses is its model's: written once, in the model.

The options of `cobalt train start`, `cobalt run sample` and `cobalt run refine` are
generated from the models (`cobalt.orchestrator.options`): `train start` leaves unset
options to the job's parameters (its options default to None) and shows the model's
default in each option's help; `run sample` defaults its options to the request model's
values; `run refine` sends only the options given, showing `[inherited]` for those its
sample run then supplies and the model's default for its own. Every field is an option, so
none of them escapes the check.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import typer
from pydantic import BaseModel, Field
from typer._click.core import Context
from typer.testing import CliRunner

from cobalt.orchestrator.options import (
    SHOWN_INHERITED,
    OptionGroup,
    model_options,
    shown_default,
)
from cobalt.shared.commands import app as cobalt_app
from cobalt.shared.contracts.runs import (
    INHERITED_BY_REFINE,
    REFINE_OWN_SETTINGS,
    RefineRunRequest,
    SampleRunRequest,
)
from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.contracts.training_params import AnyModeTrainingParams
from tests.support.cli import cobalt_here

TRAINING_MODELS: tuple[type[BaseModel], ...] = (TrainerHyperparameters, AnyModeTrainingParams)
DECLARED = {"trainer", "report_to", "api_key", "limits"}
"""Fields that are no generated option: a nested model, or an option of its own."""


def command(group: str, name: str) -> Any:
    """The click command `cobalt GROUP NAME` as the root assembles it (typer's own click)."""
    root: Any = typer.main.get_command(cobalt_app)
    context = Context(root)
    return root.get_command(context, group).get_command(context, name)


def model_default(models: tuple[type[BaseModel], ...], name: str) -> tuple[bool, Any]:
    for model in models:
        if name in model.model_fields:
            info = model.model_fields[name]
            return True, None if info.is_required() else info.get_default(call_default_factory=True)
    return False, None


def fields(*models: type[BaseModel]) -> set[str]:
    return {name for model in models for name in model.model_fields} - DECLARED


def field_options(
    group: str, name: str, models: tuple[type[BaseModel], ...]
) -> Iterator[tuple[Any, Any]]:
    """Each option of `cobalt GROUP NAME` that is a field of `models`, with the field's
    default."""
    for param in command(group, name).params:
        assert param.name is not None
        known, default = model_default(models, param.name)
        if known:
            yield param, default


def test_train_start_shows_each_setting_s_model_default() -> None:
    checked, options = [], set()
    for param, default in field_options("train", "start", TRAINING_MODELS):
        options.add(param.name)
        assert param.default is None, f"--{param.name}: unset must leave it to the job"
        if default is None:
            continue
        help_text = getattr(param, "help", "") or ""
        assert shown_default(default) in help_text, (param.name, default, help_text)
        checked.append(param.name)
    assert options - DECLARED == fields(*TRAINING_MODELS)  # every setting is an option
    assert {"n_samples", "lr", "kl_coef", "temperature", "top_p", "max_staleness"} <= set(checked)
    assert {"episode_turns", "stop_on_pass", "reward_format", "verpo_outcome_weight"} <= set(
        checked
    )


def test_run_sample_defaults_to_its_request_model() -> None:
    checked, options = [], set()
    for param, default in field_options("run", "sample", (SampleRunRequest,)):
        options.add(param.name)
        assert param.default == default, (param.name, param.default, default)
        checked.append(param.name)
    assert options - DECLARED == fields(SampleRunRequest)
    assert {"temperature", "top_p", "feedback_turns", "stop_on_pass", "think_cap_chars"} <= set(
        checked
    ), checked


def test_run_refine_sends_only_what_was_given() -> None:
    """Unset, an inherited option is the sample run's ([inherited] in its help), an own one
    the model's default (shown in its help, so a drift from the model shows there)."""
    inherited, own, options = set(), set(), set()
    for param, default in field_options("run", "refine", (RefineRunRequest,)):
        options.add(param.name)
        help_text = getattr(param, "help", "") or ""
        if param.name == "from_run":
            assert param.required, "--from names the sample run: no default"
            continue
        assert param.default is None, f"--{param.name}: unset must leave it to the service"
        if param.name in INHERITED_BY_REFINE:
            assert SHOWN_INHERITED in help_text and shown_default(default) not in help_text
            inherited.add(param.name)
        elif default is not None:
            assert shown_default(default) in help_text, (param.name, default, help_text)
            own.add(param.name)
    assert options - DECLARED == fields(RefineRunRequest)
    assert {"temperature", "top_p", "seed", "max_tokens", "think_cap_chars"} <= inherited
    assert inherited == INHERITED_BY_REFINE and own == set(REFINE_OWN_SETTINGS)


def test_run_refine_help_says_unset_options_are_inherited() -> None:
    shown = CliRunner().invoke(cobalt_app, ["run", "refine", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    rows = {row.split()[1]: row for row in shown.output.splitlines() if "  --" in row}
    assert "[inherited]" in rows["--temperature"] and "0.6" not in rows["--temperature"]
    assert "[inherited]" in rows["--max-tokens"]
    turns = f"[{RefineRunRequest.model_fields['feedback_turns'].default}]"
    assert turns in rows["--feedback-turns"] and "[inherited]" not in rows["--feedback-turns"]
    assert "sample run's unless given" in " ".join(shown.output.split())
    missing = CliRunner().invoke(cobalt_app, ["run", "refine", "--temperature", "0.2"])
    assert missing.exit_code == 2 and "--from" in missing.output


def test_the_old_turns_option_still_reads_with_a_warning(tmp_path: Path) -> None:
    env = {"COBALT_DATABASE_URL": f"sqlite:///{tmp_path}/store.db", "PATH": os.environ["PATH"]}
    refined = cobalt_here(env, "run", "refine", "--from", "41", "--turns", "2")
    assert refined.returncode == 2 and "41" in refined.stderr  # read, then the run is missing
    assert "--turns is deprecated; use --feedback-turns" in refined.stderr
    started = cobalt_here(env, "train", "start", "--contexts", "c", "--model", ".", "--turns", "2")
    assert "--turns is deprecated; use --episode-turns" in started.stderr
    assert started.returncode == 2 and "turns: multi-turn settings" in started.stderr


class _Toy(BaseModel):
    name: str = Field(description="required")
    level: Literal["low", "high"] = "low"
    tags: list[str] | None = None
    on: bool = True
    extra: dict[str, int] = Field(default_factory=dict)


def test_a_generated_command_hands_over_what_was_given() -> None:
    app = typer.Typer()
    seen: list[dict[str, Any]] = []

    @app.command()
    @model_options(OptionGroup(_Toy, into="settings"))
    def run(settings: dict[str, Any], loud: bool = False) -> None:
        seen.append({**settings, "loud": loud})

    runner = CliRunner()
    given = runner.invoke(app, ["--name", "a", "--tags", "x", "--tags", "y", "--no-on", "--loud"])
    assert given.exit_code == 0, given.output
    assert seen.pop() == {"name": "a", "tags": ["x", "y"], "on": False, "loud": True}
    assert runner.invoke(app, ["--name", "a"]).exit_code == 0
    assert seen.pop() == {"name": "a", "loud": False}  # unset: the model's defaults apply
    assert runner.invoke(app, ["--extra", "1"]).exit_code == 2  # a mapping is no option
    assert "(one of low, high)" in runner.invoke(app, ["--help"]).output
