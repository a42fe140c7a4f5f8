#!/usr/bin/env bash
# bench/gpu_trainer.py on the GPU machine, and the wheels it needs there (docs/development.md).
#
#   bench/gpu_trainer.sh wheels        here, with network: bench/gpu_trainer_wheels.txt into
#                                      .whl/ (git-ignored), cp312 manylinux x86-64, ray slimmed;
#                                      prints their size (the device's tree travels <= 64 MiB)
#   bench/gpu_trainer.sh run [ARGS]    there: installs .whl/ into /tmp/site, runs the script with
#                                      the sources on PYTHONPATH, an 8-minute hard stop
#                                      (timeout) over its 7-minute time guard (--budget-s 420),
#                                      the JSON and the log into $OUT (or test-output/)
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=${COBALT_GPU_WHEELS:-.whl}
LIST=bench/gpu_trainer_wheels.txt
PYTHON=${PYTHON:-python3}

fetch_wheels() {
  rm -rf "$WHEELS" && mkdir -p "$WHEELS"
  local binary=() built=()
  while IFS= read -r line; do
    local requirement=${line%%#*}
    requirement=${requirement//[[:space:]]/}
    [ -n "$requirement" ] || continue
    if [[ $line == *"# sdist"* ]]; then built+=("$requirement"); else binary+=("$requirement"); fi
  done <"$LIST"
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$WHEELS" "${binary[@]}"
  # No wheel on PyPI: a pure-Python wheel built from the sdist installs anywhere.
  "$PYTHON" -m pip wheel --quiet --no-deps -w "$WHEELS" "${built[@]}"
  "$PYTHON" bench/slim_wheel.py "$WHEELS"/ray-*.whl ray/jars/ ray/core/src/ray/gcs/gcs_server \
    ray/core/src/ray/raylet/raylet ray/dashboard/client/build/
  local count
  count=$(find "$WHEELS" -name '*.whl' | wc -l)
  echo "$count wheels in $WHEELS: $(du -sh "$WHEELS" | cut -f1) (the tree that travels: <= 64 MiB)"
}

run_there() {
  local out=${OUT:-test-output}
  mkdir -p "$out"
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site "$WHEELS"/*.whl
  fi
  PYTHONPATH=shared/src:services/trainer/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH} \
    PYTHONUNBUFFERED=1 timeout 480 "$PYTHON" bench/gpu_trainer.py --budget-s 420 \
    --out "$out/gpu_trainer.json" "$@" 2>&1 | tee "$out/gpu_trainer.log"
}

case "${1:-}" in
  wheels) fetch_wheels ;;
  run) shift; run_there "$@" ;;
  *) echo "usage: bench/gpu_trainer.sh wheels | run [bench/gpu_trainer.py options]" >&2; exit 2 ;;
esac
