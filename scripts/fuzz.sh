#!/usr/bin/env bash
# Fuzzes HTTPWire's request and response parsers, chunked decoder and PROXY protocol header with libFuzzer and
# AddressSanitizer. Bounded: by executions (default 10 million) or seconds.
#   bash scripts/fuzz.sh                 # 10,000,000 executions
#   bash scripts/fuzz.sh -runs=200000    # any libFuzzer flags; e.g. -max_total_time=60
# New interesting inputs go to .build/fuzz/corpus (the committed seeds in Tests/Fuzz/corpus are
# only read); a crash leaves its input in .build/fuzz/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.build/fuzz
mkdir -p "$out/corpus"
# Compiled again only when a source (or this script) is newer than the harness, as make would.
if [ ! -x "$out/httpwire-fuzz" ] || [ -n "$(find Sources/HTTPWire Tests/Fuzz/HTTPWireFuzz.swift "$0" \
        -newer "$out/httpwire-fuzz" -print -quit)" ]; then
    swiftc -swift-version 6 -parse-as-library -O -g -sanitize=fuzzer,address -module-name HTTPWireFuzz \
        Sources/HTTPWire/*.swift Tests/Fuzz/HTTPWireFuzz.swift -o "$out/httpwire-fuzz"
fi
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-runs=10000000)
SWIFT_BACKTRACE=enable=no "$out/httpwire-fuzz" -artifact_prefix="$out/" -max_len=4200 -print_final_stats=1 "${args[@]}" \
    "$out/corpus" Tests/Fuzz/corpus
