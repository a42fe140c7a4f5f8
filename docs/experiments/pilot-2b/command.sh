#!/bin/bash
# Pilot 2b (Zen 5, 2026-12-06): half the steps at twice the learning rate, else as 2a.
exec /work/main/.venv/bin/cobalt experiment --arms base,cobalt --train-instances 32 --held-out 1 \
  --validation 64 --steps 4 --lr 4e-5 --seed 300 --store sqlite:////work/exp/pilot2.db --work-dir /work/exp/pilot-2b
