#!/usr/bin/env bash
# Runs the integration suite against a sanitizer build of larder (debug, in .build-SANITIZER).
#   bash scripts/sanitize.sh thread     # ThreadSanitizer
#   bash scripts/sanitize.sh address    # AddressSanitizer with LeakSanitizer (leaks checked at every exit)
# Extra arguments go to pytest (e.g. -k cache, or test files to run instead of the whole suite).
# Every report the sanitizer writes fails the larder exit status (and with it the test); reports
# are kept in .build-SANITIZER/reports/ and summarised at the end.
# Tests that bound resident memory are skipped: shadow memory makes their bounds meaningless.
set -uo pipefail
cd "$(dirname "$0")/.."
sanitizer=${1:-}
case "$sanitizer" in
    thread|address) shift ;;
    *) echo "usage: bash scripts/sanitize.sh thread|address [pytest arguments]" >&2; exit 2 ;;
esac
bash scripts/install-deps.sh test || exit 1
scratch=.build-$sanitizer
swift build -c debug --product larder --scratch-path "$scratch" -Xswiftc -sanitize="$sanitizer" \
    -Xcc -DLARDER_PLAIN_MALLOC || exit 1
reports="$PWD/$scratch/reports"
rm -rf "$reports"
mkdir -p "$reports"
export SANITIZER_BUILD=$sanitizer
# The crash tests' backtracer starts a process from a signal handler, which ThreadSanitizer cannot follow.
[ "$sanitizer" = thread ] && export SWIFT_BACKTRACE=enable=no
export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 log_path=$reports/report"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=0:log_path=$reports/report"
# Test files named among the arguments replace the whole suite.
suite=(Tests/Integration)
for a in "$@"; do case "$a" in Tests/*) suite=() ;; esac; done
LARDER_BIN="$PWD/$scratch/debug/larder" python3 -m pytest "${suite[@]}" -q -p no:cacheprovider "$@"
status=$?
count=$(find "$reports" -type f | wc -l)
echo "$sanitizer sanitizer: $count report file(s) in $reports"
for f in "$reports"/*; do
    [ -f "$f" ] && grep -h -m1 "SUMMARY" "$f"
done | sort | uniq -c
[ "$count" -eq 0 ] || status=1
exit $status
