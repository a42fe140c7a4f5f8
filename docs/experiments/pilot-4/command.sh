#!/bin/bash
# Pilot 4 (AMD EPYC Zen 4, avx512_bf16, 2 vCPUs, 2026-12-07), declared in
# ../generated-declaration.md before it started: config C = the defaults at lr 3e-5, on
# pilot 3's seeds and stores (the base's runs reused; A's results are in ../pilot-3/).
# Held-out split of 1 instance, not read. Figures (PNG) not kept; numbers in results-*.json.
set -u
for seed in 500 501; do
  cobalt experiment --arms base,cobalt --validation 100 --held-out 1 --seed $seed \
    --store sqlite:////work/exp/p3-$seed.db --work-dir /work/exp/p3-$seed --lr 3e-5
done
