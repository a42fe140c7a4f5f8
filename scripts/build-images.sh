#!/usr/bin/env bash
# `make images`: builds Cobalt's container images with podman or docker, whichever runs.
#
#   scripts/build-images.sh                  the CPU set: executor, core, inference-cpu, trainer-cpu,
#                                            postgres, redis
#   scripts/build-images.sh executor core    only these
#   scripts/build-images.sh postgres redis   Debian-package stand-ins for the compose stack's
#                                            official postgres and redis images (no registry)
#   scripts/build-images.sh gpu              the CUDA set: inference-cuda, trainer-cuda (needs a registry)
#   scripts/build-images.sh all              both sets
#
# Each Dockerfile takes its base image as the build argument BASE_IMAGE. By default the
# official bases are used (debian:12.11-slim, python:3.11.13-slim-bookworm,
# vllm/vllm-openai:v0.32.0). Where they cannot be pulled (no registry), the CPU images are
# built on one local Debian 12 base made with mmdebstrap and imported once as
# localhost/cobalt-base:bookworm (then reused). COBALT_IMAGE_BASE=official|local forces
# one or the other.
#
# With podman, builds reuse this machine's pip cache and local wheel folder (the CPU torch
# wheel: COBALT_TORCH_WHEEL_DIR, default /opt/wheels) through build-time volumes, trust the
# host's CA bundle, and use the host's network. Nothing of that ends up in an image.
# Prints each image's build time and size at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/container-engine.sh

TAG=${COBALT_IMAGE_TAG:-0.1.0}
WHEELS=${COBALT_TORCH_WHEEL_DIR:-/opt/wheels}
PIP_CACHE=${COBALT_PIP_CACHE:-$(pip cache dir 2>/dev/null || echo "$HOME/.cache/pip")}
CA_BUNDLE=${COBALT_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
LOCAL_BASE=localhost/cobalt-base:bookworm

# name -> Dockerfile, official base, extra build arguments
declare -A FILE=(
  [executor]=executor [core]=core [inference-cpu]=inference-cpu [trainer-cpu]=trainer
  [inference-cuda]=inference [trainer-cuda]=trainer [postgres]=postgres [redis]=redis
)
declare -A OFFICIAL=(
  [executor]=debian:12.11-slim [core]=python:3.11.13-slim-bookworm
  [inference-cpu]=python:3.11.13-slim-bookworm [trainer-cpu]=python:3.11.13-slim-bookworm
  [inference-cuda]=vllm/vllm-openai:v0.32.0 [trainer-cuda]=python:3.11.13-slim-bookworm
  [postgres]=debian:12.11-slim [redis]=debian:12.11-slim
)
declare -A IMAGE=(
  [executor]=cobalt/executor:$TAG [core]=cobalt/core:$TAG
  [inference-cpu]=cobalt/inference:$TAG-cpu [trainer-cpu]=cobalt/trainer:$TAG-cpu
  [inference-cuda]=cobalt/inference:$TAG-cuda [trainer-cuda]=cobalt/trainer:$TAG-cuda
  [postgres]=cobalt/postgres:15-debian [redis]=cobalt/redis:7.0-debian
)
CPU_SET=(executor core inference-cpu trainer-cpu postgres redis)
GPU_SET=(inference-cuda trainer-cuda)

names=()
for arg in "${@:-cpu}"; do
  case "$arg" in
    cpu) names+=("${CPU_SET[@]}") ;;
    gpu) names+=("${GPU_SET[@]}") ;;
    all) names+=("${CPU_SET[@]}" "${GPU_SET[@]}") ;;
    *)
      [ -n "${FILE[$arg]:-}" ] || { echo "unknown image '$arg' (known: ${!FILE[*]}, cpu, gpu, all)" >&2; exit 2; }
      names+=("$arg") ;;
  esac
done

ENGINE=$(container_engine) || exit 1
echo "container engine: $ENGINE"

# The local base: Debian 12 minbase with Debian's python3 and venv (what the Dockerfiles
# need from the official bases), built from Debian's archive with mmdebstrap.
local_base() {
  if "$ENGINE" image inspect "$LOCAL_BASE" >/dev/null 2>&1; then return 0; fi
  command -v mmdebstrap >/dev/null || { echo "mmdebstrap is missing (make setup installs it)" >&2; return 1; }
  local tar started
  tar=$(mktemp --suffix=.tar)
  started=$SECONDS
  echo "building $LOCAL_BASE with mmdebstrap (once; about a minute)"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates,python3,python3-venv \
    --aptopt='Acquire::Retries "3"' bookworm "$tar" http://deb.debian.org/debian
  "$ENGINE" import --change 'CMD ["/bin/bash"]' "$tar" "$LOCAL_BASE" >/dev/null
  rm -f "$tar"
  echo "local base built in $((SECONDS - started)) s"
}

# Official base if present or pullable, else the local one (CUDA images have no local base).
declare -A PULLABLE=()
base_for() {
  local name=$1 official=${OFFICIAL[$1]} mode=${COBALT_IMAGE_BASE:-auto}
  if [ "$mode" != local ]; then
    if [ -z "${PULLABLE[$official]:-}" ]; then
      PULLABLE[$official]=no
      if "$ENGINE" image inspect "$official" >/dev/null 2>&1 \
        || timeout 120 "$ENGINE" pull --quiet "$official" >/dev/null 2>&1; then
        PULLABLE[$official]=yes
      fi
    fi
    if [ "${PULLABLE[$official]}" = yes ]; then echo "$official"; return 0; fi
    if [ "$mode" = official ]; then echo "cannot pull $official" >&2; return 1; fi
  fi
  case "$name" in
    *-cuda) echo "$name needs its official base $official, which cannot be pulled here" >&2; return 1 ;;
  esac
  local_base >&2 && echo "$LOCAL_BASE"
}

build_args() {
  local name=$1
  case "$name" in
    # PyPI's Linux torch is the CUDA build; the CPU build comes from PyTorch's CPU index
    # or, where that is unreachable, from the local wheel folder mounted below.
    trainer-cpu|inference-cpu) echo "--build-arg TORCH_INDEX_URL=${COBALT_TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}" ;;
    trainer-cuda) echo "--build-arg TORCH_INDEX_URL=https://pypi.org/simple" ;;
  esac
}

engine_args=()
if [ "$ENGINE" = podman ]; then
  # Build containers use the host's network, pip cache, CPU torch wheel and CA bundle.
  # PIP_NO_CACHE_DIR empty: pip ignores it, so the mounted cache is used.
  mkdir -p "$PIP_CACHE"
  conf=$(mktemp --suffix=.conf)
  trap 'rm -f "$conf"' EXIT
  printf '[global]\ncert = /run/cobalt-build/ca.crt\n' >"$conf"
  # --format docker: OCI images have no HEALTHCHECK, and compose waits on it.
  engine_args+=(--format docker --network host --build-arg PIP_NO_CACHE_DIR=
    --volume "$PIP_CACHE:/root/.cache/pip"
    --volume "$conf:/etc/pip.conf:ro"
    --volume "$CA_BUNDLE:/run/cobalt-build/ca.crt:ro")
  if [ -d "$WHEELS" ] && [ -z "${COBALT_TORCH_INDEX_URL:-}" ]; then
    printf 'find-links = /run/cobalt-build/wheels\n' >>"$conf"
    engine_args+=(--volume "$WHEELS:/run/cobalt-build/wheels:ro")
    # No route to PyTorch's index here: PyPI plus the wheel folder instead.
    export COBALT_TORCH_INDEX_URL=https://pypi.org/simple
  fi
fi

declare -A SECONDS_TAKEN=()
for name in "${names[@]}"; do
  base=$(base_for "$name")
  started=$SECONDS
  echo "=== ${IMAGE[$name]} (deploy/docker/${FILE[$name]}.Dockerfile on $base)"
  # shellcheck disable=SC2046
  "$ENGINE" build "${engine_args[@]}" --build-arg "BASE_IMAGE=$base" $(build_args "$name") \
    -f "deploy/docker/${FILE[$name]}.Dockerfile" -t "${IMAGE[$name]}" .
  SECONDS_TAKEN[$name]=$((SECONDS - started))
done

echo
printf '%-34s %10s %8s\n' image size "build s"
for name in "${names[@]}"; do
  size=$("$ENGINE" image inspect --format '{{.Size}}' "${IMAGE[$name]}")
  printf '%-34s %7d MB %8s\n' "${IMAGE[$name]}" $((size / 1000000)) "${SECONDS_TAKEN[$name]}"
done
