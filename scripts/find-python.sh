#!/usr/bin/env bash
# Prints a Python 3.11 interpreter to build the virtual environments with.
# Prefers a real binary over a pyenv shim (shims add ~100 ms to every start).
set -euo pipefail
for candidate in "${COBALT_PYTHON:-}" "$HOME/.pyenv/versions/3.11.7/bin/python3.11" \
                 "$(command -v python3.11 || true)" /usr/bin/python3.11; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "$candidate"; exit 0
  fi
done
echo "no usable Python 3.11 found (install python3.11 and python3.11-venv)" >&2
exit 1
