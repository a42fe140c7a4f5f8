"""How a step's responses become the tensors one forward takes: `Rollouts` (the step's
input), mini-batches (whole groups each), micro-batches within a token budget, and the
packed batch of one micro-batch (one right-padded row per response, or with shared
prompts a prompt and its responses in one row: prompt_sharing.py). `step.py` trains on
what this module packs.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from cobalt.shared.errors import InvalidInput
from cobalt.trainer.distributed import agree_on_counts
from cobalt.trainer.prompt_sharing import PackedLayout, Segment, plan_segments

__all__ = [
    "Micro",
    "PackedBatch",
    "Rollouts",
    "micro_batch_rows",
    "micro_batch_tokens",
    "micro_batches",
    "micro_plans",
    "mini_batches",
    "pack",
    "pack_shared",
    "packed_micro_batch",
    "plan_micro_batches",
    "refuse_rows_over_budget",
]


@dataclass(frozen=True)
class Rollouts:
    """A step's sampled responses, one list entry per response."""

    prompt_ids: Sequence[Sequence[int]]
    response_ids: Sequence[Sequence[int]]
    rewards: Sequence[float]
    group_ids: Sequence[Hashable]
    """The context each response was sampled for; GRPO normalises rewards within it."""
    old_log_probs: Sequence[Sequence[float]] | None = None
    """Log-probability of each response token under the sampling policy. None: computed
    by the policy itself at the start of the step (before any update)."""
    episode_ids: Sequence[Hashable] | None = None
    """The episode each response belongs to (multi-turn: every assistant turn of an
    episode is a response with the episode's reward). GRPO normalises over a group's
    episodes, each counted once, and puts an episode's advantage on all of its turns.
    None: every response is its own episode."""

    def __post_init__(self) -> None:
        sizes = {len(self.prompt_ids), len(self.response_ids), len(self.rewards)}
        sizes.add(len(self.group_ids))
        if self.episode_ids is not None:
            sizes.add(len(self.episode_ids))
        if len(sizes) != 1:
            raise ValueError(
                "prompt_ids, response_ids, rewards, group_ids, episode_ids differ in length"
            )
        if self.episode_ids is not None:
            seen: dict[Hashable, tuple[float, Hashable]] = {}
            for i, episode in enumerate(self.episode_ids):
                first = seen.setdefault(episode, (self.rewards[i], self.group_ids[i]))
                if first != (self.rewards[i], self.group_ids[i]):
                    raise ValueError(f"episode {episode!r}: its turns differ in reward or group")
        for i, response in enumerate(self.response_ids):
            if not response or not self.prompt_ids[i]:
                raise ValueError(f"response {i} has an empty prompt or response")
            if self.old_log_probs is not None and len(self.old_log_probs[i]) != len(response):
                raise ValueError(f"response {i}: old_log_probs and response_ids differ in length")


@dataclass(frozen=True)
class PackedBatch:
    """Prompts and responses as the model reads them, plus where each response sits.

    Either one right-padded row per response (`pack`), or rows of segments in which the
    responses to one prompt follow that prompt (`pack_shared`, `layout` set). Per-token
    tensors (B, T) have one row per response either way.
    """

    input_ids: torch.Tensor  # (S, L) prompt(s) and response(s), then padding
    attention_mask: torch.Tensor  # (S, L) 1 on prompt and response tokens
    response_positions: torch.Tensor  # (B, T) index in its input row of each response token
    response_ids: torch.Tensor  # (B, T) the response tokens (pad_id after the end)
    response_mask: torch.Tensor  # (B, T) 1 on real response tokens
    predicting_positions: torch.Tensor  # (B, T) the position whose output predicts each token
    response_rows: torch.Tensor  # (B,) the input row each response sits in
    position_ids: torch.Tensor | None = None  # (S, L) with `layout`; else the model's own
    layout: PackedLayout | None = None  # segments of a shared-prompt batch

    def to(self, device: torch.device) -> PackedBatch:
        def moved(value: torch.Tensor | None) -> torch.Tensor | None:
            return None if value is None else value.to(device)

        return PackedBatch(
            input_ids=self.input_ids.to(device),
            attention_mask=self.attention_mask.to(device),
            response_positions=self.response_positions.to(device),
            response_ids=self.response_ids.to(device),
            response_mask=self.response_mask.to(device),
            predicting_positions=self.predicting_positions.to(device),
            response_rows=self.response_rows.to(device),
            position_ids=moved(self.position_ids),
            layout=self.layout,
        )


def _response_tensors(
    responses: Sequence[Sequence[int]],
    starts: Sequence[int],
    prompt_ends: Sequence[int],
    pad_id: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, T) positions, token ids, mask and predicting positions of responses that start
    at `starts` in their rows, each after a prompt ending at `prompt_ends`."""
    batch, longest = len(responses), max(len(r) for r in responses)
    positions = torch.zeros((batch, longest), dtype=torch.long)
    response_ids = torch.full((batch, longest), pad_id, dtype=torch.long)
    response_mask = torch.zeros((batch, longest), dtype=torch.float32)
    for i, (response, start) in enumerate(zip(responses, starts, strict=True)):
        positions[i, : len(response)] = torch.arange(start, start + len(response))
        response_ids[i, : len(response)] = torch.tensor(list(response))
        response_mask[i, : len(response)] = 1.0
    # The output at p - 1 predicts the token at p; a response's first token is predicted
    # by its prompt's last token, wherever the response sits.
    predicting = (positions - 1).clamp(min=0)
    predicting[:, 0] = torch.tensor(prompt_ends, dtype=torch.long) - 1
    return positions, response_ids, response_mask, predicting


def pack(rollouts: Rollouts, pad_id: int, rows: Sequence[int] | None = None) -> PackedBatch:
    """Right-pad prompt + response of every row (or of `rows`, in that order) into a batch."""
    chosen = list(range(len(rollouts.response_ids))) if rows is None else list(rows)
    prompts = [rollouts.prompt_ids[row] for row in chosen]
    responses = [rollouts.response_ids[row] for row in chosen]
    width = max(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
    input_ids = torch.full((len(chosen), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(chosen), width), dtype=torch.long)
    for row, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        end = len(prompt) + len(response)
        input_ids[row, :end] = torch.tensor([*prompt, *response])
        attention_mask[row, :end] = 1
    prompt_ends = [len(p) for p in prompts]
    positions, response_ids, response_mask, predicting = _response_tensors(
        responses, prompt_ends, prompt_ends, pad_id
    )
    return PackedBatch(
        input_ids,
        attention_mask,
        positions,
        response_ids,
        response_mask,
        predicting,
        torch.arange(len(chosen)),
    )


def pack_shared(rollouts: Rollouts, pad_id: int, segments: Sequence[Sequence[int]]) -> PackedBatch:
    """One row of segments: each segment's rows share its first row's prompt, written
    once, followed by their responses (prompt_sharing.py). Responses come out in the
    order of the segments and of the rows within them."""
    tokens: list[int] = []
    placed: list[Segment] = []
    responses, starts, prompt_ends = [], [], []
    for members in segments:
        prompt = list(rollouts.prompt_ids[members[0]])
        if any(list(rollouts.prompt_ids[row]) != prompt for row in members):
            raise ValueError(f"rows {list(members)} do not share one prompt")
        start = len(tokens)
        tokens += prompt
        spans = []
        for row in members:
            response = rollouts.response_ids[row]
            spans.append((len(tokens), len(tokens) + len(response)))
            starts.append(len(tokens))
            prompt_ends.append(start + len(prompt))
            responses.append(response)
            tokens += response
        placed.append(Segment(start=start, prompt_tokens=len(prompt), responses=tuple(spans)))
    layout = PackedLayout(rows=(tuple(placed),))
    input_ids = torch.tensor([tokens], dtype=torch.long)
    positions, response_ids, response_mask, predicting = _response_tensors(
        responses, starts, prompt_ends, pad_id
    )
    return PackedBatch(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        response_positions=positions,
        response_ids=response_ids,
        response_mask=response_mask,
        predicting_positions=predicting,
        response_rows=torch.zeros(len(responses), dtype=torch.long),
        position_ids=layout.position_ids(len(tokens)),
        layout=layout,
    )


def micro_batches(lengths: Sequence[int], rows: Sequence[int], budget: int) -> list[list[int]]:
    """`rows` packed by length into micro-batches of at most `budget` padded tokens.

    Longest first, each micro-batch filled while (its rows + 1) x its longest row fits:
    neighbours in length share a micro-batch, so padding stays small, and a micro-batch
    costs what the budget allows. Deterministic (a stable sort), so every rank and every
    replay of a step packs the same way. A row longer than `budget` is refused.
    """
    ordered = sorted(rows, key=lambda row: lengths[row], reverse=True)
    if ordered and lengths[ordered[0]] > budget:
        raise ValueError(f"row {ordered[0]} has {lengths[ordered[0]]} tokens, over {budget}")
    packed: list[list[int]] = []
    for row in ordered:
        if packed and (len(packed[-1]) + 1) * lengths[packed[-1][0]] <= budget:
            packed[-1].append(row)
        else:
            packed.append([row])
    return packed


def mini_batches(group_ids: Sequence[Hashable], count: int) -> list[list[int]]:
    """Row indices of `count` mini-batches; a group never straddles two of them."""
    groups = list(dict.fromkeys(group_ids))
    per_batch = math.ceil(len(groups) / count)
    batches = []
    for first in range(0, len(groups), per_batch):
        chosen = set(groups[first : first + per_batch])
        batches.append([i for i, g in enumerate(group_ids) if g in chosen])
    return batches


def refuse_rows_over_budget(lengths: Sequence[int], budget: int) -> None:
    longest = max(range(len(lengths)), key=lengths.__getitem__)
    if lengths[longest] > budget:
        raise InvalidInput(
            f"response {longest} has {lengths[longest]} prompt + response tokens, more than "
            f"the micro-batch budget of {budget}: set micro_batch_tokens to at least "
            f"{lengths[longest]} (`cobalt train start --micro-batch-tokens`, or "
            "COBALT_TRAINER_MICRO_BATCH_TOKENS on the trainer), or lower the job's "
            "max_prompt_tokens / max_response_tokens"
        )


Micro = list[list[int]]
"""A micro-batch: segments of rows, each segment the rows that share one prompt's forward
(one row each without prompt sharing)."""


def plan_micro_batches(
    rollouts: Rollouts, rows: Sequence[int], budget: int, *, share_prompts: bool
) -> list[Micro]:
    """`rows` as micro-batches of at most `budget` tokens in one forward: segments packed
    into one row (`prompt_sharing.plan_segments`), or rows packed by length, padding
    included (`micro_batches`)."""
    if share_prompts:
        lengths = [len(response) for response in rollouts.response_ids]
        return plan_segments(rollouts.prompt_ids, lengths, rows, budget)
    lengths = [
        len(p) + len(r) for p, r in zip(rollouts.prompt_ids, rollouts.response_ids, strict=True)
    ]
    return [[[row] for row in micro] for micro in micro_batches(lengths, rows, budget)]


def micro_batch_tokens(rollouts: Rollouts, micro: Micro, *, share_prompts: bool) -> int:
    """Tokens of one forward of `micro`, padding included: what the budget bounds."""
    if share_prompts:
        return sum(
            len(rollouts.prompt_ids[segment[0]])
            + sum(len(rollouts.response_ids[row]) for row in segment)
            for segment in micro
        )
    rows = micro_batch_rows(micro)
    return len(rows) * max(
        len(rollouts.prompt_ids[r]) + len(rollouts.response_ids[r]) for r in rows
    )


def micro_plans(
    rollouts: Rollouts, shards: Sequence[Sequence[int]], budget: int, *, share_prompts: bool
) -> list[list[Micro | None]]:
    """Each mini-batch's share of this rank, packed into micro-batches, padded with idle
    ones (None) to the count of the rank that needs most: every rank must run as many
    forward/backward passes as the others, or FSDP's collectives wait for ever."""
    plans: list[list[Micro | None]] = [
        list(plan_micro_batches(rollouts, shard, budget, share_prompts=share_prompts))
        for shard in shards
    ]
    # At least one pass per mini-batch: one whose every row was skipped
    # (`rows_with_gradient`) still takes its AdamW update, which needs a gradient (of zeros,
    # from an idle pass) on every parameter; AdamW passes over parameters without one.
    counts = [max(count, 1) for count in agree_on_counts([len(plan) for plan in plans])]
    return [plan + [None] * (count - len(plan)) for plan, count in zip(plans, counts, strict=True)]


def packed_micro_batch(
    rollouts: Rollouts, micro: Micro | None, pad_id: int, *, shared: bool
) -> PackedBatch:
    """A micro-batch's rows; an idle one is a single two-token row that weighs nothing."""
    if micro is None:
        idle = Rollouts(
            prompt_ids=[[pad_id]], response_ids=[[pad_id]], rewards=[0.0], group_ids=[0]
        )
        return pack_shared(idle, pad_id, [[0]]) if shared else pack(idle, pad_id)
    if shared:
        return pack_shared(rollouts, pad_id, micro)
    return pack(rollouts, pad_id, micro_batch_rows(micro))


def micro_batch_rows(micro: Micro | None) -> list[int]:
    """The rows of a micro-batch in the order its packed batch holds their responses."""
    return [row for segment in micro or [] for row in segment]
