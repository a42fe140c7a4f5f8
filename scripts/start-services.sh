#!/usr/bin/env bash
# Starts PostgreSQL and Redis on localhost if they are not already answering.
# The test suite uses real servers (Postgres 127.0.0.1:5432, Redis 127.0.0.1:6379).
set -euo pipefail
if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  for version in $(ls /etc/postgresql 2>/dev/null); do
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  done
fi
for _ in $(seq 50); do
  if (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
    exit 0
  fi
  sleep 0.2
done
echo "warning: PostgreSQL or Redis did not come up on localhost" >&2
