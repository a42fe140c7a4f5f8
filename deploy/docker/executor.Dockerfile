# syntax=docker/dockerfile:1
# pip's cache is off by default (PIP_NO_CACHE_DIR below, an ARG so that the build script
# can mount the host's cache instead), which hadolint cannot see.
# hadolint global ignore=DL3042
# The executor: bubblewrap, Debian's python3 for untrusted code, and a venv holding only the
# cobalt-shared[http] and cobalt-executor distributions with their dependencies, at the
# versions of requirements/constraints.txt.
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
# The dependencies first, from the distributions' metadata alone (empty src/ folders), so
# that a change to the code does not reinstall them; then the code, without dependencies.
COPY requirements/constraints.txt requirements/
COPY shared/pyproject.toml shared/
COPY services/executor/pyproject.toml services/executor/
RUN mkdir -p shared/src services/executor/src \
 && /opt/cobalt/bin/pip install -c requirements/constraints.txt \
      "./shared[http]" ./services/executor
COPY shared/src shared/src
COPY services/executor/src services/executor/src
# A plain (non-editable) install: the image carries the packages, not the source tree.
RUN /opt/cobalt/bin/pip install --no-deps --force-reinstall ./shared ./services/executor \
 && /opt/cobalt/bin/pip check \
 && /opt/cobalt/bin/pip uninstall -y pip setuptools

FROM ${BASE_IMAGE}
# Only what runs: the interpreter for tests, bubblewrap and libseccomp (pyseccomp loads it).
# No pip, no network tools. The languages besides Python and the optional Python package
# set are a build argument (docs/executor.md, "Languages"; sizes in docs/deploy.md): empty
# by default (the slim, Python-only image); the full image is
#   --build-arg LANGUAGE_PACKAGES="g++ openjdk-17-jdk-headless nodejs golang-go rustc
#                                  python3-numpy python3-pandas python3-sympy"
# An executor offers exactly the toolchains it finds (GET /v1/info).
ARG LANGUAGE_PACKAGES=""
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 bubblewrap libseccomp2 \
      ${LANGUAGE_PACKAGES} \
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
# The image holds only the executor's distributions, so `cobalt` has exactly its commands
# (`cobalt executor serve`, `cobalt exec`). Options (--slots, ...) follow as arguments.
ENTRYPOINT ["cobalt", "executor", "serve"]
