"""`cobalt reward score`: every reward component of one response, for checking by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import TypeAdapter, ValidationError
from rich.console import Console
from rich.table import Table

from cobalt.orchestrator.console import EXIT_USAGE, echo_json, fail, handled, open_executor
from cobalt.orchestrator.scoring.score import score_with_executor
from cobalt.shared.contracts import StoredTest
from cobalt.shared.reward import TokenizerCounter

__all__ = ["reward_app"]

reward_app = typer.Typer(
    help="The Cobalt reward (METHOD.md): score a response the way training does.",
    no_args_is_help=True,
)

_TESTS = TypeAdapter(list[StoredTest])


def _tests(path: Path) -> list[StoredTest]:
    try:
        tests = _TESTS.validate_json(path.read_bytes())
    except OSError as exc:
        raise fail(EXIT_USAGE, f"cannot read {path}: {exc.strerror}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise fail(
            EXIT_USAGE,
            f"{path} is not a JSON list of tests in the executor's format (at {where or 'top'}:"
            f' {first["msg"]}); e.g. [{{"stdin": "1 2", "expected_stdout": "3"}}]',
        ) from exc
    if not tests:
        raise fail(EXIT_USAGE, f"{path} holds no tests")
    return tests


@reward_app.command("score")
def score(
    response: Annotated[Path, typer.Option("--response", help="The model's response (text).")],
    tests: Annotated[
        Path, typer.Option("--tests", help="JSON list of tests in the executor's format.")
    ],
    prev_best: Annotated[
        float, typer.Option("--prev-best", min=0.0, max=1.0, help="The context's prev_best.")
    ] = 0.0,
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            "--tokenizer",
            envvar="COBALT_POLICY_TOKENIZER",
            help="The policy model's directory (tokenizer.json) for the length terms.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run RESPONSE's program on TESTS (COBALT_EXECUTOR_URL, else a local executor) and
    print every reward component."""
    if tokenizer is None:
        raise fail(
            EXIT_USAGE,
            "the length terms count tokens with the policy's tokenizer: pass --tokenizer "
            "DIR or set COBALT_POLICY_TOKENIZER",
        )
    try:
        text = response.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(EXIT_USAGE, f"cannot read {response} as UTF-8 text: {exc}") from exc
    test_list = _tests(tests)
    with handled():
        counter = TokenizerCounter.from_dir(tokenizer)
    with open_executor() as executor, handled():
        scored = score_with_executor(
            text, test_list, prev_best=prev_best, executor=executor, tokens=counter
        )
    components = scored.reward.as_dict() | {"verdicts": scored.verdicts}
    if as_json:
        echo_json(components)
        return
    table = Table(title=f"reward of {response.name}")
    table.add_column("component")
    table.add_column("value", justify="right")
    for name, value in components.items():
        shown = f"{value:+.4f}" if isinstance(value, float) else json.dumps(value)
        table.add_row(name.replace("_", " "), shown)
    Console().print(table)
