# syntax=docker/dockerfile:1
# pip's cache is off by default (PIP_NO_CACHE_DIR below, an ARG so that the build script
# can mount the host's cache instead), which hadolint cannot see.
# hadolint global ignore=DL3042
# The GRPO trainer: the cobalt-shared and cobalt-trainer[train] distributions (torch, verl
# without extras, transformers, peft) at the versions of requirements/constraints.txt, as
# scripts/setup-trainer-venv.sh installs them.
#   CPU: docker build -f deploy/docker/trainer.Dockerfile -t cobalt/trainer:0.1.0-cpu .
#   GPU: docker build -f deploy/docker/trainer.Dockerfile \
#          --build-arg TORCH_INDEX_URL=https://pypi.org/simple -t cobalt/trainer:0.1.0-cuda .
# PyPI's torch wheel for Linux x86_64 is the CUDA build and brings the CUDA runtime as
# wheels, so no CUDA base image is needed: the node's driver comes in through the NVIDIA
# container toolkit.
# `make images` builds both (scripts/build-images.sh); BASE_IMAGE is any Debian 12 image
# with python3 and its venv module (the local mmdebstrap base where registries are
# unreachable).
ARG BASE_IMAGE=python:3.11.13-slim-bookworm
FROM ${BASE_IMAGE}
# The lines from here to torch's install are the same in inference-cpu.Dockerfile, so the
# engine's layer cache builds the torch layer once for both CPU images.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# scripts/build-images.sh empties this to use the host's pip cache, mounted at build time.
ARG PIP_NO_CACHE_DIR=1
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/cobalt
ENV PATH=/opt/cobalt/bin:$PATH
WORKDIR /src
COPY requirements/constraints.txt requirements/
# torch alone first, at its pin, from TORCH_INDEX_URL (the CPU or CUDA build), so that
# nothing later can swap it for another build.
RUN pip install --index-url "$TORCH_INDEX_URL" --extra-index-url https://pypi.org/simple \
      -c requirements/constraints.txt torch
# The dependencies from the distributions' metadata alone (empty src/ folders), so that a
# change to the code does not reinstall them; verl without extras (they pin CUDA torch 2.11).
COPY shared/pyproject.toml shared/
COPY services/trainer/pyproject.toml services/trainer/
RUN mkdir -p shared/src services/trainer/src \
 && pip install -c requirements/constraints.txt ./shared "./services/trainer[train]"
COPY shared/src shared/src
COPY services/trainer/src services/trainer/src
# /var/lib/cobalt is owned by the service user so Docker's new named volumes mounted
# there (checkpoints, models) start writable.
RUN pip install --no-deps --force-reinstall ./shared ./services/trainer \
 && pip check \
 && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin cobalt \
 && mkdir -p /var/lib/cobalt/checkpoints /var/lib/cobalt/models \
 && chown -R 10001:10001 /var/lib/cobalt
WORKDIR /tmp
ENV HOME=/tmp \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    COBALT_TRAINER_LOG_JSON=true \
    COBALT_TRAINER_METRICS_PORT=9400
USER 10001:10001
EXPOSE 9400
# The trainer has no HTTP API; its Prometheus endpoint answers while the process lives.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9400/metrics', timeout=4)"]
# In this image torch and verl are importable, so `python -m cobalt.trainer` runs the
# trainer directly (no re-exec into .venv-trainer); torchrun starts its ranks the same way
# (the gpu overlay). Usage: serve --job ID.
ENTRYPOINT ["python", "-m", "cobalt.trainer"]
CMD ["serve", "--help"]
