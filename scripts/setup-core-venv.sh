#!/usr/bin/env bash
# Creates .venv, the core environment: the executor, the orchestrator, the demo, the shared
# code and the `cobalt` command, with the inference distribution's launcher and settings
# (vLLM itself lives in .venv-inference) and the development tools. Every version comes from
# requirements/constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
PYTHON=${PYTHON:-$(scripts/find-python.sh)}

test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/pip" install --quiet --disable-pip-version-check -c requirements/constraints.txt)
# A checkout from before the split installed one `cobalt` distribution; its import hook would
# shadow the new ones.
"$VENV/bin/pip" uninstall --quiet -y cobalt 2>/dev/null || true
"${PIP[@]}" --config-settings editable_mode=compat -r requirements/dev.txt \
  -e "shared[http,reward,trackers]" -e services/executor -e services/orchestrator \
  -e services/inference -e services/trainer -e services/demo
"$VENV/bin/pip" check
touch "$VENV/.installed"
