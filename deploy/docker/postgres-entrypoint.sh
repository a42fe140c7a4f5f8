#!/bin/sh
# First start: create the cluster, the user (POSTGRES_USER, password POSTGRES_PASSWORD)
# and POSTGRES_DB, as the official image does; then serve on every interface with
# password authentication for network clients. The socket goes to $PGHOST (/tmp, a
# tmpfs in the compose file): Debian's /var/run is a link into /run, which a read-only
# container may not let the server write.
set -eu
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
    --encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses='' -c unix_socket_directories=$PGHOST" \
    --wait --silent start
  if [ "$POSTGRES_DB" != postgres ]; then
    createdb --username="$POSTGRES_USER" "$POSTGRES_DB"
  fi
  pg_ctl --pgdata="$PGDATA" --mode=fast --wait --silent stop
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories="$PGHOST"
