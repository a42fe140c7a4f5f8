# syntax=docker/dockerfile:1
# The executor: bubblewrap, Debian's python3 for untrusted code, the service in a venv.
#   docker build -f deploy/docker/executor.Dockerfile -t cobalt/executor:0.1.0 .
#
# Debian's /usr/bin/python3 (not the python: image's /usr/local one) runs untrusted code:
# its stdlib directory holds no site-packages, so the jail, which binds only the
# interpreter, its stdlib and its shared libraries, sees nothing of the service or its
# dependencies (those live in /opt/cobalt). The running container still needs unprivileged
# user namespaces, mount and an unmasked /proc: docs/deploy.md, "The executor's sandbox".
FROM debian:12.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/cobalt
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY services services
COPY shared shared
RUN /opt/cobalt/bin/pip install /src && /opt/cobalt/bin/pip uninstall -y pip

FROM debian:12.11-slim
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
ENTRYPOINT ["cobalt", "executor", "serve"]
