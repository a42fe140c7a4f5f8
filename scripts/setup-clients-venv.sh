#!/usr/bin/env bash
# Creates .venv-clients: other RL stacks' graders that call the executor's /run_code
# (tinker-cookbook's, SkyRL's code tool and coder1 verifier), unmodified from PyPI, for
# tests/executor/test_rl_clients.py. Every package at requirements/clients.txt's version,
# installed without dependency resolution: the two clients declare their training stacks
# (torch, transformers, Tinker's client, ...), which their graders never import
# (requirements/clients-missing.txt), so they live here and not in an environment that
# `pip check` must pass whole.
#
# skyrl requires Python >=3.12: the first 3.12+ interpreter found (COBALT_CLIENTS_PYTHON,
# pyenv's, then PATH's) builds the environment; without one it is built on the 3.11 of the
# other environments, without skyrl (its tests then skip and say why).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-clients

find_python() {
  local candidate
  for candidate in "${COBALT_CLIENTS_PYTHON:-}" "$HOME"/.pyenv/versions/3.1[234]*/bin/python3.1[234] \
                   "$(command -v python3.12 || true)" "$(command -v python3.13 || true)" \
                   /usr/bin/python3.12 /usr/bin/python3.13; do
    case "$candidate" in */.pyenv/shims/*) continue ;; esac
    if [ -n "$candidate" ] && [ -x "$candidate" ] \
        && "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      echo "$candidate"; return
    fi
  done
  echo "no Python 3.12+ found: .venv-clients is built on 3.11, without SkyRL" >&2
  scripts/find-python.sh
}

# A venv made by another interpreter than the one found now is made again.
PYTHON=$(find_python)
want=$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')
if [ -x "$VENV/bin/python" ] && [ "$("$VENV/bin/python" -c 'import sys; print(sys.version.split()[0])')" != "$want" ]; then
  rm -rf "$VENV"
fi
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps -r requirements/clients.txt
scripts/pip-check.sh "$VENV/bin/python" requirements/clients-missing.txt
touch "$VENV/.installed"
