"""Sampling seeds per request, derived from a run's seed and what the request is for.

A run's (or a training job's) `seed` does not go to the model server as it is: sent with
every request, it would give every trajectory's turn-1 request the same random numbers,
tying together samples that should be independent. Each request gets its own seed instead,
a hash of the run's seed and the request's place: the problem, the trajectory (sample
index) and the turn; a training group's also the round.

Two runs with the same seed over the same problems then draw the same random numbers for
the same (problem, sample, turn): common random numbers. A policy that training left
unchanged answers exactly as before, and a changed one mostly where it changed (vLLM
samples a token as the largest of probability / exponential noise, the noise drawn from
the request's seeded generator), so the change between the runs is measured with far less
of the sampling's noise (`analysis.statistics`). Each run's samples are still the policy's
own: the seeds are fixed before anything is sampled and say nothing about the answers.
"""

from __future__ import annotations

import hashlib

__all__ = ["SEED_BITS", "request_seed"]

SEED_BITS = 31
"""Derived seeds are below 2**31: every OpenAI-compatible server we know reads that (vLLM
takes 64 bits, and seeds a request of n choices' children with seed + i)."""


def request_seed(seed: int, *place: str | int) -> int:
    """The seed of one request: `seed` and its `place` (e.g. problem, sample, turn) hashed.

    Stable across processes and Python versions (blake2b of the values' text, not
    `hash`), so a resumed run and a re-run draw the same numbers."""
    text = "\x1f".join(str(part) for part in (seed, *place))
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - SEED_BITS)
