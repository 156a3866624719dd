#!/bin/sh
# Run test programs (cmocka binaries and shell scripts) and print one summary line:
# "N passed, N failed, N skipped". A program that exits 77 is a skip (it says why).
set -u
: "${BUILD:=build}"
export BUILD
export GBX_REPO="$(cd "$(dirname "$0")/.." && pwd)"
# leak detection on for sanitized builds; the sandbox children exec and are not tracked
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

pass=0; fail=0; skip=0; failed=""
for t in "$@"; do
    [ -e "$t" ] || continue
    name=$(basename "$t")
    start=$(date +%s.%N)
    case "$t" in
        *.sh) sh "$t" >"$BUILD/test-$name.log" 2>&1 ;;
        *) "$t" >"$BUILD/test-$name.log" 2>&1 ;;
    esac
    rc=$?
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); printf 'PASS %-40s %6ss\n' "$name" "$secs"
    elif [ $rc -eq 77 ]; then
        skip=$((skip + 1)); printf 'SKIP %-40s %s\n' "$name" "$(tail -n 1 "$BUILD/test-$name.log")"
    else
        fail=$((fail + 1)); failed="$failed $name"; printf 'FAIL %-40s (exit %d)\n' "$name" $rc
        sed 's/^/    | /' "$BUILD/test-$name.log" | tail -n 40
    fi
done
echo
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
