#!/usr/bin/env bash
# Starts PostgreSQL and Redis on localhost if they are not already answering.
# The test suite uses real servers (Postgres 127.0.0.1:5432 user postgres with trust
# auth, Redis 127.0.0.1:6379). On a machine whose own cluster is missing or does not
# start, a throwaway trust-auth cluster is made under /tmp (nothing system-wide changes).
set -euo pipefail
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if ! answers 6379; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
fi

if ! answers 5432; then
  for version in $(ls /etc/postgresql 2>/dev/null); do
    pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || true
  done
fi
for _ in $(seq 25); do answers 5432 && break; sleep 0.2; done

if ! answers 5432; then
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  data=/tmp/cobalt-pg-data
  if [ -z "$bin" ]; then
    echo "PostgreSQL is not installed; run: make setup" >&2
    exit 1
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data" && chown postgres "$data"
    su postgres -s /bin/sh -c "$bin/initdb -D $data -A trust -U postgres" >/dev/null
  fi
  su postgres -s /bin/sh -c "$bin/pg_ctl -D $data -o '-p 5432 -k /tmp -c listen_addresses=127.0.0.1' -l $data/log -w start" >/dev/null
fi

for _ in $(seq 50); do
  if answers 6379 && answers 5432; then exit 0; fi
  sleep 0.2
done
echo "PostgreSQL or Redis did not come up on localhost" >&2
exit 1
