# syntax=docker/dockerfile:1
# pip's cache is off by default (PIP_NO_CACHE_DIR below, an ARG so that the build script
# can mount the host's cache instead), which hadolint cannot see.
# hadolint global ignore=DL3042
# The GRPO trainer: torch, verl (no extras), transformers, peft, and the part of cobalt
# the trainer imports; the same pins as scripts/setup-trainer-venv.sh.
#   GPU: docker build -f deploy/docker/trainer.Dockerfile -t cobalt/trainer:0.1.0-cuda .
#   CPU: docker build -f deploy/docker/trainer.Dockerfile \
#          --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu \
#          -t cobalt/trainer:0.1.0-cpu .
# PyPI's torch wheel for Linux x86_64 is the CUDA build and brings the CUDA runtime as
# wheels, so no CUDA base image is needed: the node's driver comes in through the NVIDIA
# container toolkit.
# `make images` builds both (scripts/build-images.sh); BASE_IMAGE is any Debian 12 image
# with python3 and its venv module (the local mmdebstrap base where registries are
# unreachable).
ARG BASE_IMAGE=python:3.11.13-slim-bookworm
FROM ${BASE_IMAGE}
ARG TORCH_INDEX_URL=https://pypi.org/simple
# scripts/build-images.sh empties this to use the host's pip cache, mounted at build time.
ARG PIP_NO_CACHE_DIR=1
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/cobalt
ENV PATH=/opt/cobalt/bin:$PATH
# torch first and repeated in every call, so nothing swaps it for another build; verl
# without extras (they pin CUDA torch 2.11).
RUN pip install --index-url "$TORCH_INDEX_URL" --extra-index-url https://pypi.org/simple \
      torch==2.13.0 \
 && pip install torch==2.13.0 verl==0.9.1 transformers==5.10.4 peft==0.21.2 \
 && pip install torch==2.13.0 pydantic==2.14.3 pydantic-settings==2.16.3 typer==0.29.2 \
      rich==15.0.0 httpx==0.28.1 prometheus-client==0.26.0 redis==8.1.0
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY services services
COPY shared shared
# /var/lib/cobalt is owned by the service user so Docker's new named volumes mounted
# there (checkpoints, models) start writable.
RUN pip install --no-deps /src \
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
# trainer directly (no re-exec into .venv-trainer). Usage: serve --job ID.
ENTRYPOINT ["python", "-m", "cobalt.trainer"]
CMD ["serve", "--help"]
