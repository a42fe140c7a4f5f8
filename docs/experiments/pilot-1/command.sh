#!/bin/bash
# Pilot 1 (AVX2, 2026-12-06): seed 100 (not a declared seed), held-out 1 (not read), arms base,cobalt
export VLLM_CPU_NUM_OF_RESERVED_CPU=0
exec /work/main/.venv/bin/cobalt experiment --data generated --seed 100 --store sqlite:////work/pilot/store.db \
  --work-dir /work/pilot/p1 --screen-instances 2 --train-instances 64 --validation 100 --held-out 1 \
  --turns 1 --arms base,cobalt --steps 16 --contexts-per-step 4 --group-size 4 --max-tokens 128 --lr 2e-5
