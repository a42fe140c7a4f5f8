"""Templates a screening by the base model kept, for models screened once and recorded.

A screening is a property of a model and a template set, not of a seed: the demo, whose
budget (15 minutes on 2 cores) leaves no room to screen 48 templates again, draws its
instances from the templates SmolLM2-135M-Instruct passed sometimes in the recorded
screening (docs/experiments/generated-screening-t0.6.json: 0.1 <= p <= 0.9 over 2 train
instances x 4 samples at temperature 0.6, the rule declared before it ran). `cobalt
experiment` screens again with its own candidates unless told to use this record.
"""

from __future__ import annotations

__all__ = ["SMOLLM2_SCREENING", "SMOLLM2_KEPT"]

SMOLLM2_SCREENING = "docs/experiments/generated-screening-t0.6.json"
"""The record the list below is copied from (a test keeps the two equal)."""

SMOLLM2_KEPT: tuple[str, ...] = (
    "times_k",
    "affine",
    "minus_k",
    "square_plus_k",
    "mod_k",
    "weighted_sum",
    "diff_times_k",
    "repeat_k",
    "first_k_chars",
    "last_k_chars",
    "add_prefix",
    "keep_greater",
    "add_each",
    "scale_each",
    "max_plus_k",
    "min_times_k",
    "at_most_k",
    "at_least_k",
    "divisible_by_k",
    "big_or_small",
    "distance_to_k",
    "in_range",
    "larger_plus_k",
    "get_or_k",
    "count_values_over",
    "sum_evens_times_k",
    "squares_plus_k",
    "positive_scaled",
    "upper_repeat",
    "vowels_plus_k",
)
"""SmolLM2-135M-Instruct's kept templates (difficulty 1), in the record's order."""
