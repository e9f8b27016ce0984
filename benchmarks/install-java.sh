#!/usr/bin/env bash
# Installs a Java runtime (Debian package `default-jre-headless`) for MOA's learners, which
# benchmarks/river_suite.py runs through CapyMOA (the `moa` extra; MOA's jar ships inside
# CapyMOA's wheel, JPype starts the JVM in-process) and which its smoke test runs
# (tests/test_river_suite_smoke.py). Idempotent: does nothing when `java` is on PATH or
# JAVA_HOME is set. Needs root or sudo (apt-get). Without Java the suite still runs and prints
# "not run: no Java runtime" in the MOA rows.
set -euo pipefail

if [ -n "${JAVA_HOME:-}" ] || command -v java >/dev/null 2>&1; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "install-java.sh: no java on PATH and not root (no sudo):" >&2
    echo "  install the Debian package 'default-jre-headless' (apt-get install default-jre-headless)" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-java.sh: no apt-get here; install a Java runtime >= 11 (java on PATH, or" >&2
    echo "  JAVA_HOME set) with this system's package manager" >&2
    exit 1
fi

echo "installing the Debian package 'default-jre-headless' (Java runtime) for MOA's learners"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends default-jre-headless >/dev/null

command -v java >/dev/null 2>&1 || {
    echo "install-java.sh: java still missing after apt-get install" >&2
    exit 1
}
java -version 2>&1 | head -n 1
