"""LoRA adapters as policy versions: checks before vLLM sees a directory, and the swap.

A LoRA training job publishes each step's adapter (a peft directory, megabytes) instead
of the whole model. The control path (`POST /v1/policy/adapter`, control.py) loads it into
the running vLLM under the name `<served name>-v<version>` (vLLM's own adapter registry,
the one its `/v1/load_lora_adapter` route fills), makes it the adapter that requests for
the served name are answered with, and only then unloads the previous one. So:

- a failed load (refused here, or an error from vLLM) changes nothing: the previous
  adapter was never unloaded and keeps serving, the version stays;
- the swap happens with the generation gate closed, like a full-weight load: a request
  runs from start to end with one adapter, and is stamped with its version;
- rollouts keep asking for the served name (the job's `served_model`) and always get the
  current adapter; a client may also ask for an adapter's own name while it is loaded.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ADAPTER_CONFIG", "Adapter", "AdapterSlot", "adapter_name", "adapter_problems"]

logger = logging.getLogger("cobalt.inference")

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")


def adapter_name(served_name: str, version: int) -> str:
    """The name an adapter version serves under (unique per version)."""
    return f"{served_name}-v{version}"


def adapter_problems(path: Path, max_rank: int) -> list[str]:
    """Why `path` cannot be loaded as an adapter on this server (empty: it can)."""
    if not path.is_dir():
        return [f"{path} is not a directory"]
    config_file = path / ADAPTER_CONFIG
    if not config_file.is_file():
        return [f"{path} has no {ADAPTER_CONFIG}: not a peft LoRA adapter"]
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{ADAPTER_CONFIG} is not readable JSON ({exc})"]
    problems = []
    if not isinstance(config, dict):
        return [f"{ADAPTER_CONFIG} is not a JSON object"]
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        problems.append(f"peft_type is {config.get('peft_type')!r}, not LORA")
    rank = config.get("r")
    if not isinstance(rank, int) or rank < 1:
        problems.append(f"rank r={rank!r} is not a positive whole number")
    elif rank > max_rank:
        problems.append(
            f"rank {rank} is over this server's COBALT_INFERENCE_LORA_MAX_RANK={max_rank}"
        )
    if not any((path / name).is_file() for name in ADAPTER_WEIGHTS):
        problems.append(f"no adapter weights ({' or '.join(ADAPTER_WEIGHTS)})")
    return problems


@dataclass(frozen=True, slots=True)
class Adapter:
    """An adapter loaded in vLLM: its name, vLLM's integer id for it, where it came from."""

    name: str
    lora_id: int
    path: str


class AdapterSlot:
    """The adapter being served, over vLLM's serving-models registry and engine client.

    `models` is vLLM's `OpenAIServingModels` (app.state.openai_serving_models): loading
    through it registers the name the chat and completion routes resolve. `engine` is the
    engine client; `remove_lora` frees an unloaded adapter's memory at once (vLLM's own
    unload route only forgets the name).
    """

    def __init__(self) -> None:
        self.current: Adapter | None = None

    async def load(self, models: Any, name: str, path: Path) -> dict[str, Any]:
        """Load `path` as `name` beside the current adapter; the outcome as control.py's
        `_merge` gives it (nothing is unloaded here: that is `commit`)."""
        from vllm.entrypoints.serve.lora.protocol import LoadLoRAAdapterRequest

        try:
            result = await models.load_lora_adapter(
                LoadLoRAAdapterRequest(lora_name=name, lora_path=str(path))
            )
        except Exception as exc:  # vLLM raised rather than answered: nothing was registered
            return {"loaded": False, "broken": False, "error": f"{type(exc).__name__}: {exc}"}
        if not isinstance(result, str):  # vLLM's ErrorResponse
            error = getattr(getattr(result, "error", None), "message", None) or str(result)
            return {"loaded": False, "broken": False, "error": error}
        return {"loaded": True, "broken": False, "error": None}

    async def commit(self, models: Any, engine: Any, name: str, path: Path) -> None:
        """Serve `name` from now on and unload the adapter it replaces."""
        previous = self.current
        request = models.lora_requests[name]
        self.current = Adapter(name=name, lora_id=int(request.lora_int_id), path=str(path))
        if previous is not None:
            await self.unload(models, engine, previous)

    async def unload(self, models: Any, engine: Any, adapter: Adapter) -> None:
        """Forget `adapter`'s name and free it in the engine (a failure is only logged:
        nothing routes to it any more)."""
        from vllm.entrypoints.serve.lora.protocol import UnloadLoRAAdapterRequest

        try:
            await models.unload_lora_adapter(UnloadLoRAAdapterRequest(lora_name=adapter.name))
            await engine.remove_lora(adapter.lora_id)
        except Exception as exc:
            logger.warning("unloading adapter %s failed: %s", adapter.name, exc)

    async def forget(self, models: Any, engine: Any, name: str) -> None:
        """Unload the adapter loaded as `name` that is not (or no longer) served: a load
        the caller was told had failed (it timed out) but that vLLM finished later."""
        request = models.lora_requests.get(name)
        if request is not None and (self.current is None or self.current.name != name):
            await self.unload(models, engine, Adapter(name, int(request.lora_int_id), ""))

    async def drop(self, models: Any, engine: Any) -> None:
        """Serve the base weights alone (after a full-weight load: an adapter trained on
        other base weights must not apply to the new ones)."""
        if self.current is not None:
            previous, self.current = self.current, None
            await self.unload(models, engine, previous)

    def resolve(self, body: bytes, served_name: str) -> bytes:
        """A JSON request body asking for `served_name`, rewritten to ask for the current
        adapter; any other body as it is."""
        if self.current is None or f'"{served_name}"'.encode() not in body:
            return body
        try:
            request = json.loads(body)
        except ValueError:
            return body
        if not isinstance(request, dict) or request.get("model") != served_name:
            return body
        request["model"] = self.current.name
        return json.dumps(request).encode()
