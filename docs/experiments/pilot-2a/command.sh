#!/bin/bash
# Pilot 2a (Zen 5, 2026-12-06): the demo's sizes, judged on validation only. Seed 300 (no
# declared run uses it), held-out 1 (not read), arms base,cobalt; helpers' tests beside it.
exec /work/main/.venv/bin/cobalt experiment --arms base,cobalt --train-instances 32 --held-out 1 \
  --validation 64 --steps 8 --seed 300 --store sqlite:////work/exp/pilot2.db --work-dir /work/exp/pilot-2a
