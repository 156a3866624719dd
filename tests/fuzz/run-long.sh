#!/bin/sh
# SPDX-License-Identifier: MIT
# Run each libFuzzer target for a long while, one after another (make fuzz-long).
#
#   tests/fuzz/run-long.sh SECONDS build-fuzz/fuzz_a build-fuzz/fuzz_b ...
#
# Each target runs alone (one process, niced: the machine is shared) on its working corpus
# build-fuzz/corpus-<target> (new inputs go there) plus the committed tests/fuzz/corpus/<target>,
# with a 10 s per-input timeout and a 2 GiB RSS limit: a slow or huge input is a bug too.
# Crashes, leaks, timeouts and OOMs land in build-fuzz/artifacts-<target>/ and the full log in
# build-fuzz/<target>.long.log. Per target one summary line, from libFuzzer's final stats:
#
#   fuzz_dns: 600s execs 1234567 (2057/s) cov: 312 ft: 1450 corpus: 210 (5231b) crashes: 0 ...
#
# Every target runs even when one fails; the exit status is non-zero if any failed, and for
# each failure the crashing input's path and the report (stack) are printed.
set -u
# UBSan reports come with their stack too
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

time=${1:?usage: run-long.sh SECONDS FUZZER...}
shift
timeout=${FUZZ_TIMEOUT:-10}
rss=${FUZZ_RSS_MB:-2048}
failed=""
summary=""

for bin in "$@"; do
    name=$(basename "$bin")
    work=build-fuzz/corpus-$name
    arts=build-fuzz/artifacts-$name
    log=build-fuzz/$name.long.log
    stamp=build-fuzz/.long-$name.start
    mkdir -p "$work" "$arts"
    touch "$stamp"
    echo "fuzz-long: $name for ${time}s (log $log)"
    start=$(date +%s)
    nice -n 10 "$bin" -max_total_time="$time" -print_final_stats=1 -timeout="$timeout" \
        -rss_limit_mb="$rss" -artifact_prefix="$arts/" "$work" "tests/fuzz/corpus/$name" \
        >"$log" 2>&1
    rc=$?
    ran=$(($(date +%s) - start))

    # the last status line (#N DONE/pulse/NEW... cov: ft: corp: N/Sb ...) and the final stats
    last=$(grep -E '^#[0-9]+[[:space:]]' "$log" | tail -n 1)
    cov=$(printf '%s\n' "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(printf '%s\n' "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(printf '%s\n' "$last" | sed -n 's/.* corp: \([0-9]*\)\/\([0-9a-zA-Z]*\).*/\1 (\2)/p')
    stat() { sed -n "s/^stat::$1:[[:space:]]*//p" "$log" | tail -n 1; }
    execs=$(stat number_of_executed_units)
    eps=$(stat average_exec_per_sec)
    slow=$(stat slowest_unit_time_sec)
    peak=$(stat peak_rss_mb)
    # what this run saved (older artifacts stay for whoever is looking at them)
    arts_n=$(find "$arts" -type f -newer "$stamp" | wc -l)

    line="$name: ${ran}s execs ${execs:-?} (${eps:-?}/s) cov: ${cov:-?} ft: ${ft:-?}"
    line="$line corpus: ${corp:-?} crashes: $arts_n slowest: ${slow:-?}s rss: ${peak:-?}MB"
    echo "fuzz-long: $line"
    summary="$summary$line
"
    if [ "$rc" -ne 0 ] || [ "$arts_n" -ne 0 ]; then
        failed="$failed $name"
        echo "fuzz-long: $name FAILED (exit $rc)"
        # the input libFuzzer saved, then the sanitizer / libFuzzer report with its stack
        grep -E 'Test unit written to|artifact_prefix' "$log" | sed 's/^/  /'
        sed -n '/^==[0-9]*== \{0,1\}\(ERROR\|WARNING\)\|runtime error:\|ALARM: working on the last Unit/,/^SUMMARY:/p' \
            "$log" | head -n 80 | sed 's/^/  /'
    fi
done

echo "fuzz-long: summary (${time}s per target)"
printf '%s' "$summary" | sed 's/^/  /'
if [ -n "$failed" ]; then
    echo "fuzz-long: FAILED:$failed"
    exit 1
fi
echo "fuzz-long: all targets ran clean"
