#!/bin/bash
# Pilot 8 (Intel Xeon, family 6 model 167, avx512_bf16, 2 vCPUs, 2026-12-07), declared in
# ../generated-declaration.md before it started: U = --updates-per-step 1 only, arms base,
# cobalt, shuffled, on unseen pilot seeds. Float32 as on the AVX2 kind: COBALT_CPUINFO is
# /proc/cpuinfo without its AVX-512 and AMX flags, which the dtype rule of vLLM and the
# trainer reads. Held-out split of 1 instance, not read. Figures (PNG) not kept; numbers in
# results-*.json.
set -u
OUT=${OUT:-$(dirname "$0")}
SCRATCH=${SCRATCH:-/work/exp}
mkdir -p "$SCRATCH"
sed -E '/^flags/s/ (avx512|amx)[a-z0-9_]*//g' /proc/cpuinfo >"$SCRATCH/cpuinfo-float32"
export COBALT_CPUINFO=$SCRATCH/cpuinfo-float32
for seed in 702 703; do
  /usr/bin/time -v .venv/bin/cobalt experiment --arms base,cobalt,shuffled \
    --validation 100 --held-out 1 --seed $seed --updates-per-step 1 \
    --store sqlite:///$SCRATCH/p8-$seed.db --work-dir $SCRATCH/p8-$seed \
    2>"$SCRATCH/p8-$seed-U.time"
  cp $SCRATCH/p8-$seed/report.md "$OUT/report-$seed-U.md"
  cp $SCRATCH/p8-$seed/results.json "$OUT/results-$seed-U.json"
done
