#!/usr/bin/env bash
# The whole test suite: installs what it needs (the test tools too), then unit tests (swift test), then the
# integration tests against the release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh test
swift build -c release --product larder
swift test
LARDER_BIN="$PWD/.build/release/larder" python3 -m pytest Tests/Integration -q -p no:cacheprovider
