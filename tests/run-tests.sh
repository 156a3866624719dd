#!/bin/sh
# Run test programs (cmocka binaries and shell scripts) and print one summary line:
# "N passed, N failed, N skipped". A program that exits 77 is a skip (it says why).
#
# Each test runs in a session of its own (setsid), with stdin from /dev/null, and is bounded:
# after its limit the whole session gets SIGTERM, then SIGKILL after GBX_TEST_GRACE seconds
# (default 10), and it fails "timed out after N s"; the tests after it still run. Whatever a
# test leaves running in its session is stopped the same way when it ends, and so are the
# sandboxes it left that nobody can reach any more (tests/lib/orphans.py). The limit is 300 s,
# or what a script declares in its first 15 lines as "# test-timeout: SECONDS";
# GBX_TEST_TIMEOUT=SECONDS overrides every limit.
set -u
: "${BUILD:=build}"
export BUILD
export GBX_REPO="$(cd "$(dirname "$0")/.." && pwd)"
# leak detection on for sanitized builds; the sandbox children exec and are not tracked
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
DEFAULT_LIMIT=300
GRACE="${GBX_TEST_GRACE:-10}"
for v in "${GBX_TEST_TIMEOUT:-1}" "$GRACE"; do
    case "$v" in '' | *[!0-9]*) echo "run-tests: GBX_TEST_TIMEOUT and GBX_TEST_GRACE are whole seconds, not '$v'"; exit 2 ;; esac
done
# python3 is the system's (Debian's, from scripts/deps.sh) when there is one: a version
# manager's shim first on PATH (pyenv's) costs about a second a call, and the tests call
# python3 thousands of times (that alone made CI's run of the suite take 25 minutes, not 8)
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
    pybin="$BUILD/test-bin"
    mkdir -p "$pybin" && ln -sf /usr/bin/python3 "$pybin/python3" &&
        PATH="$(cd "$pybin" && pwd):$PATH" && export PATH
fi
command -v setsid >/dev/null && command -v ps >/dev/null ||
    { echo "run-tests: needs setsid (util-linux) and ps (procps): run scripts/deps.sh"; exit 2; }

# limit_of TEST: its time limit in seconds
limit_of() {
    [ -n "${GBX_TEST_TIMEOUT:-}" ] && { echo "$GBX_TEST_TIMEOUT"; return; }
    l=
    case "$1" in
        *.sh) l=$(sed -n '1,15s/^# test-timeout: *\([0-9][0-9]*\).*/\1/p' "$1" | head -n 1) ;;
    esac
    echo "${l:-$DEFAULT_LIMIT}"
}

# members SID: the live processes of session (or process group) SID
members() {
    ps -e -o pid= -o pgid= -o sid= -o stat= |
        awk -v s="$1" '($2 == s || $3 == s) && $4 !~ /^Z/ { print $1 }'
}

# stop SID LOG: SIGTERM every process left in session SID, SIGKILL what is left after the
# grace period; say so in LOG
stop() {
    left=$(members "$1")
    [ -n "$left" ] || return 0
    # shellcheck disable=SC2086
    { echo "run-tests: stopping what is still running:"; ps -o pid=,args= -p "$(echo $left | tr ' ' ',')"; } \
        >>"$2" 2>&1
    # shellcheck disable=SC2086
    kill -TERM $left 2>/dev/null
    i=0
    while [ $i -lt $((GRACE * 10)) ] && [ -n "$(members "$1")" ]; do
        sleep 0.1; i=$((i + 1))
    done
    left=$(members "$1")
    [ -z "$left" ] && return 0
    # shellcheck disable=SC2086
    echo "run-tests: SIGKILL after $GRACE s:" $left >>"$2"
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null
}

pass=0; fail=0; skip=0; failed=""
pid=; wd=; log=
# interrupted: stop the running test's session and its watchdog too
trap '[ -n "$wd" ] && kill -s KILL -- "-$wd" "$wd" 2>/dev/null; [ -n "$pid" ] && stop "$pid" "$log"; exit 130' INT TERM
for t in "$@"; do
    [ -e "$t" ] || continue
    name=$(basename "$t")
    # the node suites are all run.sh: name them by their directory too (e2b/run.sh)
    [ "$name" = run.sh ] && name="$(basename "$(dirname "$t")")/$name"
    log="$BUILD/test-$(echo "$name" | tr / -).log"
    limit=$(limit_of "$t")
    mark="$log.timedout"
    rm -f "$mark"
    start=$(date +%s.%N)
    # Not a process group leader (this shell has no job control), so setsid makes the new
    # session in this very process: its pid is the session's id.
    case "$t" in
        *.sh) setsid sh "$t" >"$log" 2>&1 </dev/null & ;;
        *) setsid "$t" >"$log" 2>&1 </dev/null & ;;
    esac
    pid=$!
    # the watchdog, a session of its own too, so that its sleep goes with it
    # shellcheck disable=SC2016
    setsid sh -c 'sleep "$1"; : >"$2"; kill -s TERM -- "-$3"; sleep "$4"; kill -s KILL -- "-$3"' \
        watchdog "$limit" "$mark" "$pid" "$GRACE" >/dev/null 2>&1 </dev/null &
    wd=$!
    wait "$pid" 2>/dev/null # (no "Terminated" from the shell: the verdict says it)
    rc=$?
    # its session, or itself if it has not made one yet (a test can end that quickly)
    kill -s KILL -- "-$wd" 2>/dev/null
    kill -s KILL "$wd" 2>/dev/null
    wait "$wd" 2>/dev/null
    wd=
    stop "$pid" "$log"
    pid=
    # sandboxes run in sessions of their own: those it left that nobody can reach any more
    # (their daemon and directories gone) are killed, and said so in its log
    command -v python3 >/dev/null && python3 "$GBX_REPO/tests/lib/orphans.py" >>"$log" 2>&1
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    if [ -e "$mark" ]; then
        rm -f "$mark"
        fail=$((fail + 1)); failed="$failed $name"
        printf 'FAIL %-40s (timed out after %d s)\n' "$name" "$limit"
        sed 's/^/    | /' "$log" | tail -n 40
    elif [ $rc -eq 0 ]; then
        pass=$((pass + 1)); printf 'PASS %-40s %6ss\n' "$name" "$secs"
    elif [ $rc -eq 77 ]; then
        skip=$((skip + 1)); printf 'SKIP %-40s %s\n' "$name" "$(tail -n 1 "$log")"
    else
        fail=$((fail + 1)); failed="$failed $name"; printf 'FAIL %-40s (exit %d)\n' "$name" $rc
        sed 's/^/    | /' "$log" | tail -n 40
    fi
done
echo
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
