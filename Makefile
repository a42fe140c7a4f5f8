# Cobalt: two commands do everything on a fresh machine.
#   make setup   create .venv (core: executor, orchestrator, CLI), .venv-inference (vLLM)
#                and install system packages
#   make test    lint + type-check + the whole test suite (starts PostgreSQL/Redis if needed)

PYTHON ?= $(shell scripts/find-python.sh)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
INFERENCE_STAMP := .venv-inference/.installed

.PHONY: setup test lint typecheck pytest services bench clean

setup: $(STAMP) $(INFERENCE_STAMP)

$(STAMP): pyproject.toml setup.py scripts/install-system-packages.sh
	scripts/install-system-packages.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

# vLLM and the model tooling; separate because its pins clash with the trainer's (verl).
$(INFERENCE_STAMP): scripts/setup-inference-venv.sh pyproject.toml setup.py
	scripts/setup-inference-venv.sh

services:
	scripts/start-services.sh

lint: setup
	$(BIN)/ruff check services shared tests bench
	$(BIN)/ruff format --check services shared tests bench

typecheck: setup
	scripts/typecheck.sh

pytest: setup services
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck pytest

bench: setup
	$(BIN)/python bench/executor.py

clean:
	rm -rf $(VENV) .venv-inference .pytest_cache .ruff_cache .mypy_cache
