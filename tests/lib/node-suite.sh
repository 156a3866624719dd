# Shared by the node:test suites that run against a private gloveboxd (tests/e2b/run.sh,
# tests/mcp/run.sh). Source it after setting NAME (and BUILD, absolute); it makes $T (with
# $STATE, $RUN, $S) and removes it at exit, and defines:
#   suite_start_daemon [ARGS...]   gloveboxd on $STATE/$RUN, ready when /healthz answers ($DPID)
#   suite_run_files TIMEOUT_MS FILTER FILES...
#                                  each file in its own node --test process (a hung one is
#                                  stopped at 10 minutes), tallied in $pass $fail $skip $failed
#   suite_finish                   SIGTERM the daemon (it must exit 0, with no sanitizer
#                                  report in its log), print the tally, return its status
T=$(mktemp -d "/tmp/gbx-$NAME-XXXXXX")
chmod 711 "$T"
STATE="$T/state"
RUN="$T/run"
S="$RUN/api.sock"
DPID=
pass=0; fail=0; skip=0; failed=
suite_cleanup() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$T"
}
trap suite_cleanup EXIT
trap 'exit 130' INT TERM

suite_start_daemon() {
    "$BUILD/gloveboxd" --state-dir "$STATE" --runtime-dir "$RUN" --kill-on-exit "$@" \
        2>"$T/daemon.log" &
    DPID=$!
    up=
    for _ in $(seq 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] &&
            { up=1; break; }
        kill -0 "$DPID" 2>/dev/null || break
        sleep 0.05
    done
    [ -n "$up" ] || { echo "gloveboxd did not start:"; cat "$T/daemon.log"; exit 1; }
}

suite_run_files() {
    timeout_ms=$1; filter=$2; shift 2
    # One file at a time, each in its own node process (what --test-concurrency=1 does on
    # Node 20.10+; Debian's Node 18 has no such flag)
    flags=
    node -e 'process.exit(process.allowedNodeEnvironmentFlags.has("--test-timeout") ? 0 : 1)' \
        2>/dev/null && flags="--test-timeout=$timeout_ms"
    [ -n "$filter" ] && flags="$flags --test-name-pattern=$filter"
    # spec on stdout for people, TAP in a file for the tally
    for f in "$@"; do
        # shellcheck disable=SC2086
        timeout -k 10 600 node --test $flags --test-reporter=spec --test-reporter-destination=stdout \
            --test-reporter=tap --test-reporter-destination="$T/tap" "$f"
        rc=$?
        [ $rc -eq 124 ] && echo "not ok - $(basename "$f") did not finish within 10 minutes"
        p=$(awk '/^# pass / {print $3}' "$T/tap" 2>/dev/null)
        n=$(awk '/^# fail / {print $3}' "$T/tap" 2>/dev/null)
        k=$(awk '/^# (skipped|skip|todo) / {n += $3} END {print n + 0}' "$T/tap" 2>/dev/null)
        p=${p:-0}; n=${n:-0}
        [ $rc -ne 0 ] && [ "$n" -eq 0 ] && n=1   # node itself failed (a file that did not load)
        pass=$((pass + p)); fail=$((fail + n)); skip=$((skip + k))
        [ "$n" -ne 0 ] && failed="$failed $(basename "$f")"
        rm -f "$T/tap"
    done
}

suite_finish() {
    # stop the daemon the way an operator does; a sanitized build reports leaks at exit
    kill -TERM "$DPID" 2>/dev/null
    for _ in $(seq 600); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.05; done
    kill -0 "$DPID" 2>/dev/null &&
        { echo "# gloveboxd still running 30 s after SIGTERM: SIGKILL"; kill -KILL "$DPID"; }
    wait "$DPID"
    drc=$?
    DPID=
    if [ $drc -ne 0 ]; then
        echo "not ok - gloveboxd exited $drc after SIGTERM"; fail=$((fail + 1))
    else
        echo "ok - gloveboxd exited 0 after SIGTERM"; pass=$((pass + 1))
    fi
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/daemon.log"; then
        echo "not ok - sanitizer report in daemon.log"; fail=$((fail + 1))
    else
        echo "ok - no sanitizer report in daemon.log"; pass=$((pass + 1))
    fi
    if [ "$fail" -ne 0 ]; then echo "daemon log:"; tail -n 60 "$T/daemon.log"; fi
    [ -n "$failed" ] && echo "failed:$failed"
    echo "$NAME: $pass passed, $fail failed, $skip skipped"
    [ "$fail" -eq 0 ]
}
