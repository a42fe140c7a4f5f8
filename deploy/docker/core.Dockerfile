# syntax=docker/dockerfile:1
# pip's cache is off by default (PIP_NO_CACHE_DIR below, an ARG so that the build script
# can mount the host's cache instead), which hadolint cannot see.
# hadolint global ignore=DL3042
# The core image: the orchestrator API (default command) and the rollout workers
# (`cobalt worker`); the same code, so one image. It holds the cobalt-shared and
# cobalt-orchestrator distributions with their dependencies at the versions of
# requirements/constraints.txt, and nothing of the executor, inference or trainer. Build
# from the repository root:
#   docker build -f deploy/docker/core.Dockerfile -t cobalt/core:0.1.0 .
# `make images` builds it (scripts/build-images.sh); BASE_IMAGE is any Debian 12 image
# with python3 and its venv module (the local mmdebstrap base where registries are
# unreachable).
ARG BASE_IMAGE=python:3.11.13-slim-bookworm

FROM ${BASE_IMAGE} AS build
# scripts/build-images.sh empties this to use the host's pip cache, mounted at build time.
ARG PIP_NO_CACHE_DIR=1
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/cobalt
WORKDIR /src
# The dependencies first, from the distributions' metadata alone (empty src/ folders), so
# that a change to the code does not reinstall them; then the code, without dependencies.
COPY requirements/constraints.txt requirements/
COPY shared/pyproject.toml shared/
COPY services/orchestrator/pyproject.toml services/orchestrator/
RUN mkdir -p shared/src services/orchestrator/src \
 && /opt/cobalt/bin/pip install -c requirements/constraints.txt \
      "./shared[http,reward]" ./services/orchestrator
COPY shared/src shared/src
COPY services/orchestrator/src services/orchestrator/src
# A plain (non-editable) install: the image carries the packages, not the source tree.
RUN /opt/cobalt/bin/pip install --no-deps --force-reinstall ./shared ./services/orchestrator \
 && /opt/cobalt/bin/pip check \
 && /opt/cobalt/bin/pip uninstall -y pip

FROM ${BASE_IMAGE}
COPY --from=build /opt/cobalt /opt/cobalt
RUN useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin cobalt
# Containers log JSON lines and listen on every interface (the defaults are for laptops);
# HOME and matplotlib's cache point at /tmp so a read-only root filesystem works.
ENV PATH=/opt/cobalt/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    COBALT_LOG_JSON=true \
    COBALT_ORCHESTRATOR_HOST=0.0.0.0
USER 10001:10001
EXPOSE 8200
# The worker has no port: compose and Kubernetes turn this check off for it.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8200/healthz', timeout=4)"]
ENTRYPOINT ["cobalt"]
CMD ["orchestrator", "serve"]
