#!/bin/sh
# `pip check` for one environment: PYTHON (first argument) must have every declared
# dependency of every installed package, except those named in the files given after it
# (one name a line, # comments), which the environment removes or leaves out on purpose
# (requirements/inference-removed.txt, requirements/clients-missing.txt say why). Any other
# problem fails, with pip's words.
set -eu
PYTHON=${1:?usage: pip-check.sh PYTHON [ALLOWED-MISSING-FILE...]}
shift
allowed=$(cat "$@" </dev/null | sed -e 's/#.*//' -e 's/[[:space:]]//g' | grep -v '^$' || true)
report=$("$PYTHON" -m pip check --disable-pip-version-check 2>&1) && exit 0
problems=$(printf '%s\n' "$report" | while IFS= read -r line; do
  missing=$(printf '%s\n' "$line" | sed -n 's/.* requires \([^,]*\), which is not installed\.$/\1/p')
  if [ -n "$missing" ] && printf '%s\n' "$allowed" | grep -qixF "$missing"; then continue; fi
  printf '%s\n' "$line"
done)
if [ -n "$problems" ]; then
  printf 'pip check failed for %s:\n%s\n' "$PYTHON" "$problems" >&2
  exit 1
fi
