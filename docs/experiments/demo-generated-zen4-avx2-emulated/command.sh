#!/bin/bash
# make demo at its defaults (seed 0), the AVX2-only kind emulated on an AMD EPYC Zen 4
# (family 25, model 17, avx512_bf16), 2 vCPUs, 2026-12-07 02:37 UTC, nothing else running,
# after `make setup` (the converted model not cached: a fresh work dir).
/usr/bin/time -v .venv/bin/python bench/as_avx2_kind.py -- \
  make demo DEMO_ARGS="--store sqlite:////work/exp/demo.db --work-dir /work/exp/demo"
# wall 9:23.17, peak resident set 5.66 GB
