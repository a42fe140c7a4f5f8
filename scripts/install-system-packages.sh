#!/usr/bin/env bash
# Installs the Debian packages Cobalt needs, only those missing.
#   bubblewrap  the executor's sandbox
#   libseccomp2 the executor's seccomp filter (loaded through pyseccomp)
#   postgresql, redis-server  the orchestrator's store and queue (tests use real ones)
#   chromium, chromium-driver  headless browser for the web UI's tests (tests/ui)
#   podman, runc, netavark, aardvark-dns, iptables  the container engine of `make images`
#               and of tests/containers (runc: crun refuses hosts with hybrid cgroup v1;
#               netavark and aardvark-dns: the compose stack's networks and service names;
#               netavark sets them up with iptables, which Debian does not pull in with it:
#               without it every `podman run` with a network fails, "netavark: No such
#               file or directory")
#   mmdebstrap  the local Debian base image where registries are unreachable
#   g++, openjdk-17-jdk-headless, nodejs, golang-go, rustc  the executor's languages
#               besides Python (C and C++, Java, JavaScript, Go, Rust; docs/executor.md,
#               "Languages"); an executor offers those whose toolchain it finds
#   python3-numpy, python3-pandas, python3-sympy  the executor's optional package set
#               (COBALT_EXECUTOR_PYTHON_PACKAGES; tests/executor/test_languages.py)
set -euo pipefail
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
ldconfig -p 2>/dev/null | grep -q libseccomp.so.2 || need+=(libseccomp2)
command -v redis-server >/dev/null || need+=(redis-server)
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
/usr/bin/python3 -c 'import sys' 2>/dev/null || need+=(python3)
if ! command -v docker >/dev/null || ! timeout 20 docker info >/dev/null 2>&1; then
  command -v podman >/dev/null || need+=(podman)
  command -v runc >/dev/null || need+=(runc)
  [ -x /usr/lib/podman/netavark ] || need+=(netavark)
  [ -x /usr/lib/podman/aardvark-dns ] || need+=(aardvark-dns)
  command -v iptables >/dev/null || [ -x /usr/sbin/iptables ] || need+=(iptables)
fi
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v g++ >/dev/null || need+=(g++)
command -v javac >/dev/null || need+=(openjdk-17-jdk-headless)
command -v node >/dev/null || need+=(nodejs)
[ -x /usr/bin/go ] || need+=(golang-go)
[ -x /usr/bin/rustc ] || need+=(rustc)
for module in numpy pandas sympy; do
  [ -d /usr/lib/python3/dist-packages/$module ] || need+=(python3-$module)
done
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
echo "installing system packages: ${need[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${need[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
