#!/bin/bash
# Pilot 3 (AMD EPYC Zen 4, avx512_bf16, 2 vCPUs, 2026-12-07), declared in
# ../generated-declaration.md before it started. Config A = the defaults (16 steps x 4
# contexts, lr 2e-5); B = 8 steps x 8 contexts at lr 4e-5 (the same 256 responses).
# The base's runs are shared by A and B on each seed (their keys leave out the training
# options). Held-out split of 1 instance, not read. The reports' figures (PNG) were not
# kept: each run overwrote the last's in the work dir; the numbers are in results-*.json.
set -u
for seed in 500 501; do
  common="--arms base,cobalt --validation 100 --held-out 1 --seed $seed --store sqlite:////work/exp/p3-$seed.db --work-dir /work/exp/p3-$seed"
  cobalt experiment $common                                               # A -> report-$seed-A.md
  cobalt experiment $common --steps 8 --contexts-per-step 8 --lr 4e-5    # B -> report-$seed-B.md
done
