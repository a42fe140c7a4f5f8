"""The `cobalt` command: one typer app with a sub-app per service or task."""

from __future__ import annotations

import typer

from cobalt import __version__
from cobalt.demo.cli import demo_command, up_command
from cobalt.executor.cli import exec_app, executor_app
from cobalt.inference.cli import inference_app
from cobalt.orchestrator.analysis.cli import analyze_app
from cobalt.orchestrator.api.cli import orchestrator_app
from cobalt.orchestrator.bandit.cli import bandit_app
from cobalt.orchestrator.cli import data_app
from cobalt.orchestrator.runs.cli import run_app
from cobalt.orchestrator.scoring.cli import reward_app
from cobalt.orchestrator.training.cli import train_app
from cobalt.orchestrator.worker.cli import worker_command
from cobalt.trainer.cli import trainer_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="cobalt",
    help=(
        "Cobalt: train and evaluate LLMs on multi-turn code generation with execution "
        "feedback. Configuration comes from COBALT_* environment variables "
        "(docs/configuration.md lists them all)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(executor_app, name="executor")
app.add_typer(exec_app, name="exec")
app.add_typer(data_app, name="data")
app.add_typer(inference_app, name="inference")
app.add_typer(run_app, name="run")
app.add_typer(orchestrator_app, name="orchestrator")
app.command("worker")(worker_command)
app.add_typer(bandit_app, name="bandit")
app.add_typer(reward_app, name="reward")
app.add_typer(analyze_app, name="analyze")
app.add_typer(train_app, name="train")
app.add_typer(trainer_app, name="trainer")
app.command("demo")(demo_command)
app.command("up")(up_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cobalt {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Cobalt command line."""


def main() -> None:
    """Entry point of the `cobalt` console script."""
    app()
