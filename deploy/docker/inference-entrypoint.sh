#!/bin/sh
# Entry point of the inference images: seed the default model, then serve.
#
# The images carry SmolLM2-135M-Instruct (prepared at build) under /opt/cobalt/models.
# The trainer and the inference service must read the policy model at the same path, so
# deployments point COBALT_INFERENCE_MODEL into the shared models volume; when that
# directory is missing and the image holds a model of the same name, it is copied there
# first (to a temporary name, then renamed, so replicas starting together cannot see half
# a model). `--seed-only` stops after that (Kubernetes runs it as an init container).
set -eu
model="${COBALT_INFERENCE_MODEL:-}"
if [ -n "$model" ] && [ ! -e "$model" ]; then
  baked="/opt/cobalt/models/$(basename "$model")"
  if [ -d "$baked" ]; then
    mkdir -p "$(dirname "$model")"
    tmp="$model.seeding.$$"
    cp -R "$baked" "$tmp"
    mv "$tmp" "$model" 2>/dev/null || rm -rf "$tmp"
  fi
fi
if [ "${1:-}" = "--seed-only" ]; then
  exit 0
fi
exec cobalt inference serve "$@"
