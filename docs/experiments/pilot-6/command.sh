#!/bin/bash
# Pilot 6 (AMD EPYC Zen 5, family 26 model 2, as the AVX2 kind: bench/as_avx2_kind.py,
# 2 vCPUs, 2026-12-07), declared in ../generated-declaration.md before it started: the
# demo's sizes through `cobalt experiment`, A = 8 steps at lr 2e-5 (the demo's defaults),
# B = 8 steps at 4e-5, C = 12 steps at 2e-5; the base's runs shared within a seed.
# Held-out split of 1 instance, not read. Figures (PNG) not kept; numbers in results-*.json.
set -u
OUT=${OUT:-$(dirname "$0")}
for seed in 600 601; do
  for config in "A --steps 8 --lr 2e-5" "B --steps 8 --lr 4e-5" "C --steps 12 --lr 2e-5"; do
    set -- $config
    name=$1; shift
    .venv/bin/python bench/as_avx2_kind.py -- .venv/bin/cobalt experiment --arms base,cobalt \
      --train-instances 32 --validation 96 --held-out 1 --seed $seed "$@" \
      --store sqlite:////work/exp/p6-$seed.db --work-dir /work/exp/p6-$seed
    cp /work/exp/p6-$seed/report.md "$OUT/report-$seed-$name.md"
    cp /work/exp/p6-$seed/results.json "$OUT/results-$seed-$name.json"
  done
done
# Seed 600's config C ran to the end, but its report failed to write (a commit merged while
# it ran changed the statistics module under it: ImportError at "writing the report"); the
# same command again reused every run and job of it and wrote the report:
#   .venv/bin/python bench/as_avx2_kind.py -- .venv/bin/cobalt experiment --arms base,cobalt \
#     --train-instances 32 --validation 96 --held-out 1 --seed 600 --steps 12 --lr 2e-5 \
#     --store sqlite:////work/exp/p6-600.db --work-dir /work/exp/p6-600
