# syntax=docker/dockerfile:1
# pip's cache is off by default (PIP_NO_CACHE_DIR below, an ARG so that the build script
# can mount the host's cache instead), which hadolint cannot see.
# hadolint global ignore=DL3042
# The executor: bubblewrap, Debian's python3 for untrusted code, the service in a venv.
#   docker build -f deploy/docker/executor.Dockerfile -t cobalt/executor:0.1.0 .
# `make images` builds it (scripts/build-images.sh); BASE_IMAGE is any Debian 12 image
# (the local mmdebstrap base where registries are unreachable).
#
# Debian's /usr/bin/python3 (not the python: image's /usr/local one) runs untrusted code:
# its stdlib directory holds no site-packages, so the jail, which binds only the
# interpreter, its stdlib and its shared libraries, sees nothing of the service or its
# dependencies (those live in /opt/cobalt). The running container still needs unprivileged
# user namespaces, mount and an unmasked /proc: docs/deploy.md, "The executor's sandbox".
ARG BASE_IMAGE=debian:12.11-slim

FROM ${BASE_IMAGE} AS build
# scripts/build-images.sh empties this to use the host's pip cache, mounted at build time.
ARG PIP_NO_CACHE_DIR=1
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/cobalt
WORKDIR /src
# Only the executor's own dependencies (the list says why), before the source so that a
# code change does not reinstall them.
COPY deploy/docker/executor-requirements.txt ./
RUN /opt/cobalt/bin/pip install -r executor-requirements.txt
COPY pyproject.toml setup.py README.md ./
COPY services services
COPY shared shared
RUN /opt/cobalt/bin/pip install --no-deps /src \
 && /opt/cobalt/bin/pip uninstall -y pip setuptools

FROM ${BASE_IMAGE}
# Only what runs: the interpreter for tests, bubblewrap and libseccomp (pyseccomp loads it).
# No compiler, no pip, no network tools.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 bubblewrap libseccomp2 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin cobalt
COPY --from=build /opt/cobalt /opt/cobalt
ENV PATH=/opt/cobalt/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    COBALT_EXECUTOR_LOG_JSON=true \
    COBALT_EXECUTOR_HOST=0.0.0.0 \
    COBALT_EXECUTOR_PYTHON=/usr/bin/python3
# Non-root: every slot runs as this uid (per-slot uids need root; docs/executor.md).
USER 10001:10001
EXPOSE 8100
# /readyz runs a canary in a real jail, so an unhealthy container is one whose sandbox fails.
HEALTHCHECK --interval=15s --timeout=12s --start-period=20s --retries=3 \
  CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8100/readyz', timeout=11)"]
# `cobalt executor serve`, but not through the `cobalt` console script: that loads every
# service's command line, and with them the orchestrator's and trainer's packages, which
# this image leaves out. Options (--slots, ...) follow as arguments.
ENTRYPOINT ["python3", "-c", "import typer; from cobalt.executor.cli import serve; typer.run(serve)"]
