#!/bin/sh
# `cobalt inference "$@"` in the inference images. The `cobalt` console script imports
# every service's command line, and with them the executor's and orchestrator's packages,
# which these images leave out (they hold vLLM and what cobalt.inference imports).
exec python3 -c 'from cobalt.inference.cli import inference_app; inference_app(prog_name="cobalt inference")' "$@"
