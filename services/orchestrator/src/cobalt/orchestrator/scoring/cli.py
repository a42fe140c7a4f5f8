"""`cobalt reward score`: every reward component of one response, for checking by hand.

Exit statuses are the orchestrator's (`cobalt.orchestrator.console`): 2 for unreadable
or invalid files, a missing tokenizer or bad settings; 3 when the executor cannot be
reached.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import TypeAdapter, ValidationError
from rich.console import Console
from rich.table import Table

from cobalt.orchestrator.console import (
    EXIT_USAGE,
    echo_json,
    fail,
    handled,
    open_executor,
    reward_tokenizer,
)
from cobalt.shared.errors import first_validation_error
from cobalt.shared.reward_format import RewardFormat

# The command imports the scoring, the contracts and the tokenizer when it runs, so that
# `cobalt reward --help` loads neither pydantic's models nor numpy and tokenizers.
if TYPE_CHECKING:
    from cobalt.shared.contracts import StoredTest
    from cobalt.shared.reward import TokenizerCounter

__all__ = ["reward_app"]

reward_app = typer.Typer(
    help="The Cobalt reward (docs/method.md): score a response the way training does.",
    no_args_is_help=True,
)


def _read_tests(path: Path) -> list[StoredTest]:
    from cobalt.shared.contracts import StoredTest

    try:
        tests = TypeAdapter(list[StoredTest]).validate_json(path.read_bytes())
    except OSError as exc:
        raise fail(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        where = first_validation_error(exc, where="the top level")
        raise fail(
            EXIT_USAGE,
            f"{path} is not a JSON list of tests in the executor's format (at {where}); "
            'e.g. [{"stdin": "1 2\\n", "expected_stdout": "3"}]',
        ) from exc
    if not tests:
        raise fail(EXIT_USAGE, f"{path} holds no tests; a response is scored on at least one")
    return tests


def _read_response(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise fail(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise fail(EXIT_USAGE, f"{path} is not UTF-8 text: {exc.reason}") from exc


def _token_counter(tokenizer: Path | None) -> TokenizerCounter:
    found = reward_tokenizer(tokenizer)
    if found is None:
        raise fail(
            EXIT_USAGE,
            "the length terms count tokens with the policy's tokenizer: pass --tokenizer "
            "with the policy model's directory (or set COBALT_POLICY_TOKENIZER)",
        )
    return found[0]


def _shown(value: Any) -> str:
    if value is None:
        return "-"  # not computed (no program)
    if isinstance(value, int):  # bools too
        return str(value)
    if isinstance(value, float):
        return f"{value:+.4f}"
    return json.dumps(value)


@reward_app.command("score")
def score(
    response: Annotated[
        Path, typer.Option("--response", help="The model's whole response, as a text file.")
    ],
    tests: Annotated[
        Path,
        typer.Option("--tests", help="JSON list of tests in the executor's request format."),
    ],
    prev_best: Annotated[
        float,
        typer.Option(
            "--prev-best", min=0.0, max=1.0, help="b: the context's best earlier pass rate."
        ),
    ],
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            "--tokenizer",
            help="The policy model's directory (its tokenizer.json) for the length terms; "
            "default COBALT_REWARD_TOKENIZER, else COBALT_POLICY_TOKENIZER.",
        ),
    ] = None,
    reward_format: Annotated[
        RewardFormat,
        typer.Option(
            "--reward-format",
            help="reasoning: the paper's rules (exactly one </think>, thinking measured); "
            "instruct: for models without a thinking block (no </think> required, T = 0).",
        ),
    ] = RewardFormat.REASONING,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run RESPONSE's program on TESTS (the executor at COBALT_EXECUTOR_URL, else a local
    one) and print every reward component."""
    from cobalt.orchestrator.scoring.score import score_with_executor

    text = _read_response(response)
    test_list = _read_tests(tests)
    counter = _token_counter(tokenizer)
    with open_executor() as executor, handled():
        scored = score_with_executor(
            text,
            test_list,
            prev_best=prev_best,
            executor=executor,
            tokens=counter,
            reward_format=reward_format,
        )
    components = scored.reward.to_dict() | {"verdicts": [str(v) for v in scored.verdicts]}
    if as_json:
        echo_json(components)
        return
    table = Table(title=f"reward of {response.name}")
    table.add_column("component")
    table.add_column("value", justify="right")
    for name, value in components.items():
        table.add_row(name.replace("_", " "), _shown(value))
    Console().print(table)
