# syntax=docker/dockerfile:1
# PostgreSQL from Debian's packages: the compose stack's database where the official
# postgres image cannot be pulled (POSTGRES_IMAGE=cobalt/postgres:15-debian; tests/containers
# runs it). Same contract as the official image for what Cobalt uses: POSTGRES_USER,
# POSTGRES_PASSWORD and POSTGRES_DB create the database on first start, uid 999 owns the
# data directory /var/lib/postgresql/data, pg_isready answers on the default socket.
ARG BASE_IMAGE=debian:12.11-slim
FROM ${BASE_IMAGE}
# The user first, with the official image's uid; no default cluster (initdb runs at start).
# hadolint ignore=DL3008
RUN groupadd --system --gid 999 postgres \
 && useradd --system --uid 999 --gid 999 --home-dir /var/lib/postgresql --shell /bin/sh postgres \
 && mkdir -p /etc/postgresql-common \
 && echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf \
 && apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data \
 && chown -R 999:999 /var/lib/postgresql \
 && chmod 700 /var/lib/postgresql/data
COPY --chmod=0755 deploy/docker/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data \
    PGHOST=/tmp
USER 999:999
EXPOSE 5432
HEALTHCHECK --interval=10s --timeout=5s --retries=5 CMD ["pg_isready", "-q"]
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]
