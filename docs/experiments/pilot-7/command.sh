#!/bin/bash
# Pilot 7 (Intel Xeon, family 6 model 167, avx512_bf16, 2 vCPUs, 2026-12-07), declared in
# ../generated-declaration.md before it started: A = today's defaults (2 AdamW updates per
# GRPO step), U = --updates-per-step 1; arms base, cobalt, shuffled; the base's runs shared
# within a seed. Float32 as on the AVX2 kind: COBALT_CPUINFO is /proc/cpuinfo without its
# AVX-512 and AMX flags, which the dtype rule of vLLM and the trainer reads. Held-out split
# of 1 instance, not read. Figures (PNG) not kept; numbers in results-*.json.
set -u
OUT=${OUT:-$(dirname "$0")}
SCRATCH=${SCRATCH:-/work/exp}
mkdir -p "$SCRATCH"
sed -E '/^flags/s/ (avx512|amx)[a-z0-9_]*//g' /proc/cpuinfo >"$SCRATCH/cpuinfo-float32"
export COBALT_CPUINFO=$SCRATCH/cpuinfo-float32
for seed in 700 701; do
  for config in "A" "U --updates-per-step 1"; do
    set -- $config
    name=$1; shift
    /usr/bin/time -v .venv/bin/cobalt experiment --arms base,cobalt,shuffled \
      --validation 100 --held-out 1 --seed $seed "$@" \
      --store sqlite:///$SCRATCH/p7-$seed.db --work-dir $SCRATCH/p7-$seed \
      2>"$SCRATCH/p7-$seed-$name.time"
    cp $SCRATCH/p7-$seed/report.md "$OUT/report-$seed-$name.md"
    cp $SCRATCH/p7-$seed/results.json "$OUT/results-$seed-$name.json"
  done
done
