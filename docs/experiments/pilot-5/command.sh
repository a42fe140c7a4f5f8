#!/bin/bash
# Pilot 5 (AMD EPYC Zen 4, family 25 model 17, 2 vCPUs, 2026-12-07), declared in
# ../generated-declaration.md before it started: A = --kl-coef 1e-4 (what every declared
# seed ran), K = the defaults (--kl-coef 0: no reference, settled groups' responses
# skipped), both as the AVX2 kind (bench/as_avx2_kind.py: float32, AVX2 kernels); A then K
# on each seed, the base's runs shared. Held-out split of 1 instance, not read. Figures
# (PNG) not kept; numbers in results-*.json.
set -u
for seed in 500 501; do
  for kl in 1e-4 0; do
    /usr/bin/time -v .venv/bin/python bench/as_avx2_kind.py -- .venv/bin/cobalt experiment \
      --seed $seed --arms base,cobalt --validation 100 --held-out 1 --kl-coef $kl \
      --store sqlite:////work/exp/p5-$seed.db --work-dir /work/exp/p5-$seed
  done
done
