# syntax=docker/dockerfile:1
# Redis from Debian's packages: the compose stack's queue where the official redis image
# cannot be pulled (REDIS_IMAGE=cobalt/redis:7.0-debian; tests/containers runs it). Like
# the official image: uid 999, data in /data, and protected mode off when started without
# a configuration file (the container's network is the boundary).
ARG BASE_IMAGE=debian:12.11-slim
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN groupadd --system --gid 999 redis \
 && useradd --system --uid 999 --gid 999 --home-dir /data --shell /usr/sbin/nologin redis \
 && apt-get update \
 && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data \
 && chown 999:999 /data
WORKDIR /data
USER 999:999
EXPOSE 6379
HEALTHCHECK --interval=10s --timeout=5s --retries=5 CMD ["redis-cli", "ping"]
# `redis-server ARGS` runs with --protected-mode no added, as the official image's does.
ENTRYPOINT ["/bin/sh", "-c", "if [ \"$1\" = redis-server ]; then shift; exec redis-server --protected-mode no \"$@\"; fi; exec \"$@\"", "redis"]
CMD ["redis-server"]
