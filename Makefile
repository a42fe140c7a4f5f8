# Cobalt: two commands do everything on a fresh machine.
#   make setup   create .venv (core: executor, orchestrator, CLI), .venv-inference (vLLM),
#                .venv-trainer (torch + verl), .venv-clients (other RL stacks' graders) and
#                install system packages
#   make test    lint + type-check + the whole test suite (starts PostgreSQL/Redis if needed)
#   make demo    set-up, then the whole Cobalt loop on embedded defaults and an HTML report
#   make experiment  set-up, then the comparison of training arms and its report (~50 min)
#   make images  the container images (podman or docker; docs/deploy.md)

PYTHON ?= $(shell scripts/find-python.sh)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
INFERENCE_STAMP := .venv-inference/.installed
TRAINER_STAMP := .venv-trainer/.installed
CLIENTS_STAMP := .venv-clients/.installed

.PHONY: setup test lint typecheck pytest services bench bench-trainer clean demo experiment images

setup: $(STAMP) $(INFERENCE_STAMP) $(TRAINER_STAMP) $(CLIENTS_STAMP)

# Each environment is built from the distributions' pyproject.toml files (shared/,
# services/*/) at the versions of requirements/*.txt.
DISTRIBUTIONS := shared/pyproject.toml $(wildcard services/*/pyproject.toml)

$(STAMP): $(DISTRIBUTIONS) requirements/constraints.txt requirements/dev.txt requirements/test.txt \
		scripts/setup-core-venv.sh scripts/install-system-packages.sh
	scripts/install-system-packages.sh
	scripts/setup-core-venv.sh

# vLLM and the model tooling; separate because its pins clash with the trainer's (verl).
$(INFERENCE_STAMP): scripts/setup-inference-venv.sh $(DISTRIBUTIONS) requirements/inference.txt \
		requirements/inference-removed.txt scripts/install-smollm2-gguf.sh scripts/pip-check.sh
	scripts/setup-inference-venv.sh

# GRPO: torch + verl's core_algos + transformers <5.11 (docs/trainer.md).
$(TRAINER_STAMP): scripts/setup-trainer-venv.sh $(DISTRIBUTIONS) requirements/constraints.txt
	scripts/setup-trainer-venv.sh

# tinker-cookbook's and SkyRL's graders, unmodified, for the executor's client tests; apart
# because both declare their training stacks, which the graders never import.
$(CLIENTS_STAMP): scripts/setup-clients-venv.sh requirements/clients.txt \
		requirements/clients-missing.txt scripts/pip-check.sh
	scripts/setup-clients-venv.sh

services:
	scripts/start-services.sh

lint: setup
	$(BIN)/ruff check services shared tests bench
	$(BIN)/ruff format --check services shared tests bench

# Strict mypy over every distribution's src/ folder (pyproject.toml's [tool.mypy]).
typecheck: setup
	$(BIN)/mypy shared/src services/*/src

# The trainer's tests need torch and verl, so they run in .venv-trainer; --confcutdir keeps
# tests/conftest.py (core venv only) out of that run. The 25 slowest tests are printed so
# that a CI log says where its time went.
PYTEST_ARGS ?= --durations=25
pytest: setup services
	$(BIN)/pytest --ignore=tests/trainer $(PYTEST_ARGS)
	.venv-trainer/bin/pytest --confcutdir=tests/trainer tests/trainer

test: lint typecheck pytest

# The whole Cobalt loop on this machine (docs: README "Two commands"); sizes pass through,
# e.g. `make demo PROBLEMS=4 SAMPLES=2 STEPS=1`, any other option in DEMO_ARGS.
demo: setup
	$(BIN)/cobalt demo $(if $(PROBLEMS),--problems $(PROBLEMS)) $(if $(SAMPLES),--samples $(SAMPLES)) \
		$(if $(TURNS),--turns $(TURNS)) $(if $(STEPS),--steps $(STEPS)) $(DEMO_ARGS)

# The pre-declared comparison of training arms (docs/experiments.md; about 47 minutes on 2
# cores, resumable: run it again after an interruption). Options in EXPERIMENT_ARGS.
experiment: setup
	$(BIN)/cobalt experiment $(EXPERIMENT_ARGS)

# The CPU images by default; IMAGES="executor core", IMAGES=gpu or IMAGES=all otherwise.
# Official bases where a registry answers, else a local Debian base (mmdebstrap).
images:
	scripts/install-system-packages.sh
	scripts/build-images.sh $(IMAGES)

bench: setup
	$(BIN)/python bench/executor.py

# Trainer step time and TRL's GRPOTrainer side by side (TRL only for this benchmark).
bench-trainer: setup
	.venv-trainer/bin/pip install --quiet trl==1.16.0
	.venv-trainer/bin/python bench/trainer.py --model tiny --micro-batch-tokens 2048 --trl 2

clean:
	rm -rf $(VENV) .venv-inference .venv-trainer .venv-clients .pytest_cache .ruff_cache .mypy_cache
