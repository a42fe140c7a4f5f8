"""Responses to the same prompt share one forward of that prompt (`share_prompts`).

Every GRPO group is n responses sampled for one context, and the trainer scores each
as prompt + response: the prompt's tokens go through the model n times, with the same
weights and the same result. At the paper's settings (contexts up to 10,240 tokens, 16
responses of up to 6,144) that is most of the step's compute. Here a micro-batch is
instead one packed row of segments, each a prompt followed by the responses to it:

    [ prompt A | response A1 | response A2 | prompt B | response B1 | ... ]

with position ids restarting per segment (the prompt at 0..P-1, every response at
P..P+R-1, as if it followed the prompt alone) and attention that lets each response see
its segment's prompt and its own earlier tokens, nothing else. Every response token thus
has exactly the context it had alone: the log-probabilities and the loss are the
unshared ones, and so is the gradient (the prompt's hidden states receive the sum of what
the n copies received). Packing also removes the padding of the rows' different lengths.

`prompt_sharing_attention` is that attention, registered in transformers' attention
interface (`ATTENTION`), so the model's own layers, rotary embeddings, activation
checkpointing, FSDP2 and peft stay as they are. Per segment it calls the model's
`sdpa` attention on slices: the prompt causally, then each response with keys = the
prompt's and its own, under a lower-right causal mask (R x (P + R) booleans). The
attention FLOPs are what the tokens need (no (L x L) mask over the packed row).
transformers builds no mask for an implementation it has no mask function for, and
this one needs none: the layout travels as the `prompt_sharing` keyword argument from
the model's forward to every attention call, including the recomputation of
checkpointed layers in backward.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

__all__ = [
    "ATTENTION",
    "PackedLayout",
    "Segment",
    "plan_segments",
    "prompt_sharing_attention",
    "shared_prompt_attention",
]

ATTENTION = "cobalt_prompt_sharing"
"""The attention implementation's name in transformers' `AttentionInterface`."""


@dataclass(frozen=True)
class Segment:
    """A prompt and the responses to it, side by side in a packed row."""

    start: int
    """Where the prompt starts in the row."""
    prompt_tokens: int
    responses: tuple[tuple[int, int], ...]
    """(start, end) of each response in the row; the first starts where the prompt ends,
    each next one where the previous ends."""

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1 or not self.responses:
            raise ValueError("a segment needs a prompt and at least one response")
        cursor = self.start + self.prompt_tokens
        for start, end in self.responses:
            if start != cursor or end <= start:
                raise ValueError(f"responses of a segment must follow each other: {self}")
            cursor = end

    @property
    def end(self) -> int:
        return self.responses[-1][1]


@dataclass(frozen=True)
class PackedLayout:
    """The segments of each row of a packed batch (rows are right-padded after their
    last segment; the padding attends to nothing and nothing attends to it)."""

    rows: tuple[tuple[Segment, ...], ...]

    def __post_init__(self) -> None:
        for segments in self.rows:
            cursor = 0
            for segment in segments:
                if segment.start != cursor:
                    raise ValueError("segments of a row must follow each other from 0")
                cursor = segment.end

    def position_ids(self, width: int) -> torch.Tensor:
        """(rows, width) position of each token within its own prompt + response."""
        positions = torch.zeros((len(self.rows), width), dtype=torch.long)
        for row, segments in enumerate(self.rows):
            for segment in segments:
                prompt_end = segment.start + segment.prompt_tokens
                positions[row, segment.start : prompt_end] = torch.arange(segment.prompt_tokens)
                for start, end in segment.responses:
                    positions[row, start:end] = torch.arange(
                        segment.prompt_tokens, segment.prompt_tokens + end - start
                    )
        return positions


def plan_segments(
    prompts: Sequence[Sequence[int]],
    response_lengths: Sequence[int],
    rows: Sequence[int],
    budget: int,
) -> list[list[list[int]]]:
    """`rows` as micro-batches of segments: each segment a list of rows with the same
    prompt (one forward of it), each micro-batch a list of segments packed into one row
    of at most `budget` tokens.

    Rows are grouped by their prompt's token ids (a multi-turn episode's later turns have
    prompts of their own); a group too long for the budget is split into segments,
    longest responses first, each filled while it fits. Segments go into micro-batches
    first-fit, longest first. Deterministic, so every rank and every replay of a step
    plans alike. A single prompt + response over the budget is refused (ValueError).
    """
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for row in rows:
        by_prompt.setdefault(tuple(prompts[row]), []).append(row)
    segments: list[tuple[int, list[int]]] = []  # (tokens, rows)
    for prompt, members in by_prompt.items():
        members = sorted(members, key=lambda row: response_lengths[row], reverse=True)
        tokens, current = len(prompt), list[int]()
        for row in members:
            needed = len(prompt) + response_lengths[row]
            if needed > budget:
                raise ValueError(f"row {row} has {needed} tokens, over {budget}")
            if current and tokens + response_lengths[row] > budget:
                segments.append((tokens, current))
                tokens, current = len(prompt), []
            current.append(row)
            tokens += response_lengths[row]
        segments.append((tokens, current))
    segments.sort(key=lambda segment: segment[0], reverse=True)
    bins: list[tuple[int, list[list[int]]]] = []  # (tokens used, segments)
    for tokens, members in segments:
        for i, (used, held) in enumerate(bins):
            if used + tokens <= budget:
                bins[i] = (used + tokens, [*held, members])
                break
        else:
            bins.append((tokens, [members]))
    return [held for _, held in bins]


def _refuse_unsupported(module: torch.nn.Module, kwargs: dict[str, Any]) -> None:
    if kwargs.get("sliding_window") or getattr(module, "sliding_window", None):
        raise ValueError(
            f"{type(module).__name__} uses sliding-window attention, which prompt sharing "
            "does not implement: set share_prompts false for this model"
        )


def prompt_sharing_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    prompt_sharing: PackedLayout | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention over packed segments: (B, heads, L, D) in, (B, L, heads, D) out.

    Called by the model's attention layers with the layout the trainer passed to the
    model's forward; refuses to run without one (a forward that does not pass the
    layout would otherwise attend across segments without a word).
    """
    if prompt_sharing is None:
        raise ValueError(
            f"attention is set to {ATTENTION!r}, which needs the packed batch's layout: "
            "call the model with prompt_sharing=PackedLayout(...) (cobalt.trainer.step "
            "does), or restore the model's attention implementation"
        )
    _refuse_unsupported(module, kwargs)

    def attend(
        rows: slice, queries: slice, keys: list[slice], mask: torch.Tensor | None
    ) -> torch.Tensor:
        # The model's own sdpa attention (GQA, scaling, dtype) on one slice.
        def joined(states: torch.Tensor) -> torch.Tensor:
            parts = [states[rows, :, part] for part in keys]
            return parts[0] if len(parts) == 1 else torch.cat(parts, dim=2)

        out, _ = sdpa_attention_forward(
            module,
            query[rows, :, queries],
            joined(key),
            joined(value),
            mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=mask is None,
        )
        return out  # (1, length, heads, D)

    width = query.shape[2]
    rows_out = []
    for row, segments in enumerate(prompt_sharing.rows):
        at = slice(row, row + 1)
        pieces = []
        for segment in segments:
            prompt = slice(segment.start, segment.start + segment.prompt_tokens)
            pieces.append(attend(at, prompt, [prompt], None))
            for start, end in segment.responses:
                length = end - start
                # Row j of the response sees the whole prompt and its own tokens 0..j.
                # (torch's causal_lower_right would spare CUDA the mask, but its dispatch
                # refuses the mixed dtypes autocast hands it.)
                mask = torch.ones(
                    (length, segment.prompt_tokens + length),
                    dtype=torch.bool,
                    device=query.device,
                ).tril(diagonal=segment.prompt_tokens)
                pieces.append(attend(at, slice(start, end), [prompt, slice(start, end)], mask))
        used = segments[-1].end if segments else 0
        if used < width:  # padding after the last segment: zeros, never read
            pieces.append(query.new_zeros((1, width - used, query.shape[1], query.shape[3])))
        rows_out.append(torch.cat(pieces, dim=1))
    return torch.cat(rows_out, dim=0), None


AttentionInterface.register(ATTENTION, prompt_sharing_attention)


def _attention_owners(model: torch.nn.Module) -> Iterator[Any]:
    """Every config that picks the attention implementation of `model`'s layers."""
    seen: set[int] = set()
    for module in model.modules():
        config = getattr(module, "config", None)
        if hasattr(config, "_attn_implementation") and id(config) not in seen:
            seen.add(id(config))
            yield config


@contextmanager
def shared_prompt_attention(*models: torch.nn.Module | None) -> Iterator[None]:
    """Within the block, the models' attention layers use `prompt_sharing_attention`
    (forwards and the backward's recomputation alike); restored after."""
    changed: list[tuple[Any, str | None]] = []
    try:
        for model in models:
            if model is None:
                continue
            for config in _attention_owners(model):
                changed.append((config, config._attn_implementation))
                config._attn_implementation_internal = ATTENTION
        yield
    finally:
        for config, before in reversed(changed):
            config._attn_implementation_internal = before
