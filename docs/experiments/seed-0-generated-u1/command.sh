#!/bin/bash
# The declared seeds 0 and 1 at one AdamW update per GRPO step (the default since db60d6f),
# declared in ../generated-declaration.md before either started. AMD EPYC family 25 model
# 17 (Zen 4, avx512_bf16), 2 vCPUs, 23 GB, as the AVX2 kind (bench/as_avx2_kind.py: float32,
# AVX2 kernels), after `make setup` on a fresh clone (~11 min), nothing else running but
# edits, 2026-12-07 22:33-23:47 UTC (/work/exp/run-seeds.sh, which this is).
# seed 0: wall 36:52 (GNU time), peak 5.5 GB; seed 1: 37:34, peak 6.5 GB.
cd "$(dirname "$0")/../../.."
for seed in 0 1; do
  /usr/bin/time -v .venv/bin/python bench/as_avx2_kind.py -- \
    make experiment EXPERIMENT_ARGS="--seed $seed --store sqlite:////work/exp/seed$seed/store.db --work-dir /work/exp/seed$seed/work"
done
