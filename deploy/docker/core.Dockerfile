# syntax=docker/dockerfile:1
# The core image: the orchestrator API (default command) and the rollout workers
# (`cobalt worker`); the same code, so one image. Build from the repository root:
#   docker build -f deploy/docker/core.Dockerfile -t cobalt/core:0.1.0 .
FROM python:3.11.13-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/cobalt
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY services services
COPY shared shared
# A plain (non-editable) install: the image carries the package, not the source tree.
RUN /opt/cobalt/bin/pip install /src && /opt/cobalt/bin/pip uninstall -y pip

FROM python:3.11.13-slim-bookworm
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
