"""The Cobalt method's defaults, each written once (docs/method.md; Chen et al., arXiv 2602.03806).

Contracts, CLIs and services take their defaults from here, so a value the paper fixes
reads the same in `cobalt run sample --help`, the REST schema and a training job.
"""

from __future__ import annotations

TEMPERATURE = 0.6
"""Sampling temperature of rollouts and training (docs/method.md "Rollouts": turn 0 at 0.6)."""

TOP_P = 0.95
"""Nucleus sampling's top_p (docs/method.md "Rollouts": top_p 0.95)."""

MAX_RESPONSE_TOKENS = 6144
"""Longest sampled answer in tokens (docs/method.md "Rollouts": 6144 in the paper)."""

SAMPLES_PER_PROBLEM = 16
"""Turn-0 samples per problem, and the GRPO group size (docs/method.md: n = 16)."""

CONTEXTS_PER_STEP = 128
"""Contexts (GRPO groups) per training step (docs/method.md "Training": 128 contexts)."""

LEARNING_RATE = 1e-6
"""AdamW's constant learning rate (docs/method.md "Training": 1e-6)."""

HISTORY_CAP_CHARS = 6000
"""Characters of an answer the conversation history keeps: the text after the last
`</think>`, its end kept (docs/method.md "Rollouts": capped at 6000 characters)."""

EVALUATION_FEEDBACK_TURNS = 8
"""Feedback turns after turn 0 when evaluating (docs/method.md "Rollouts": 8 at evaluation)."""

COLLECTION_FEEDBACK_TURNS = 2
"""Feedback turns after turn 0 when collecting training trajectories (docs/method.md: 2)."""

VERPO_OUTCOME_WEIGHT = 0.5
"""VeRPO's share of a turn's reward given to the all-tests outcome (alpha); the
difficulty-weighted dense reward has the rest (docs/reward.md)."""
