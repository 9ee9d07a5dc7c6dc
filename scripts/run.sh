#!/usr/bin/env bash
# Installs what building and running need (not the test tools: scripts/test.sh installs those), builds
# in release mode and runs Larder with Config/larder.yaml (proxy on 127.0.0.1:3128). Extra arguments
# go to larder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh run
swift build -c release --product larder
exec .build/release/larder --config Config/larder.yaml "$@"
