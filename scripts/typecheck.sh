#!/usr/bin/env bash
# Runs strict mypy on the `cobalt` package. mypy cannot follow setup.py's mapping of
# services/ -> cobalt and shared/ -> cobalt.shared, so we lay the same mapping out as a
# tree of symlinks under .typecheck/ and point mypy at it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=.typecheck/cobalt
rm -rf .typecheck && mkdir -p "$root"
for entry in services/*; do
  ln -s "$PWD/$entry" "$root/$(basename "$entry")"
done
ln -s "$PWD/shared" "$root/shared"
MYPYPATH=.typecheck exec .venv/bin/mypy -p cobalt "$@"
