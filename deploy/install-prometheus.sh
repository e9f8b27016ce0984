#!/usr/bin/env bash
# Installs Prometheus and promtool (Debian package `prometheus`) for the deploy checks of the
# test suite (tests/test_deploy.py, tests/test_prometheus_live.py). Idempotent: does nothing when
# both commands are already on PATH. Needs root or sudo (apt-get).
#
# The tests only run the binaries on loopback ports they choose; the system service that the
# package's post-install script may start (on a machine booted with systemd) is stopped and
# disabled again when this script installed the package.
set -euo pipefail

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "install-prometheus.sh: promtool/prometheus missing and not root (no sudo):" >&2
    echo "  install the Debian package 'prometheus' (apt-get install prometheus)" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-prometheus.sh: no apt-get here; install Prometheus >= 2.37 (prometheus and" >&2
    echo "  promtool on PATH) with this system's package manager" >&2
    exit 1
fi

echo "installing the Debian package 'prometheus' (promtool + server) for the deploy tests"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    "${SUDO[@]}" systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi

command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || {
    echo "install-prometheus.sh: promtool/prometheus still missing after apt-get install" >&2
    exit 1
}
promtool --version 2>&1 | head -n 1
