"""`cobalt experiment`: the pre-declared comparison of training arms (docs/experiments.md).

Its own package in the demo distribution, beside `cobalt demo`, because it drives the same
stack (one vLLM, the executor, the orchestrator API, a trainer process per arm) and the
same orchestrator services; the demo is its short version.
"""
