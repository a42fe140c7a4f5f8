# Sourced by the image and container scripts: which container engine to use, and podman's
# settings for this kind of machine.
#
# COBALT_CONTAINER_ENGINE=podman|docker forces one; otherwise podman, then docker, whichever
# answers (a docker CLI without a running daemon does not count).
#
# podman reads deploy/podman/containers.conf (through CONTAINERS_CONF) unless the caller set
# its own, plus default ulimits no higher than this host's: rootful podman asks for
# nofile=1048576, which a host with lower hard limits refuses ("error setting rlimit").
# nproc is capped at 32768 too: on the development machines runc was refused any nproc
# above that although the shell's hard limit was 96365.

if [ -z "${CONTAINERS_CONF:-}" ]; then
  CONTAINERS_CONF="${TMPDIR:-/tmp}/cobalt-containers-$(id -u).conf"
  {
    cat "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/deploy/podman/containers.conf"
    nofile=$(ulimit -Hn)
    nproc=$(ulimit -Hu)
    if [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; then nofile=65536; fi
    if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
    printf '\n[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' \
      "$nofile" "$nofile" "$nproc" "$nproc"
  } >"$CONTAINERS_CONF.$$"
  mv "$CONTAINERS_CONF.$$" "$CONTAINERS_CONF"
  export CONTAINERS_CONF
fi

container_engine() {
  local wanted=${COBALT_CONTAINER_ENGINE:-} engine
  for engine in ${wanted:-podman docker}; do
    # `version` asks the engine too (a docker CLI without its daemon fails it); generous
    # timeout: podman answers only after a running build releases its storage lock.
    if command -v "$engine" >/dev/null && timeout 300 "$engine" version >/dev/null 2>&1; then
      echo "$engine"
      return 0
    fi
  done
  echo "no working container engine (${wanted:-podman or docker}); make setup installs podman on Debian" >&2
  return 1
}
