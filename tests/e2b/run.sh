#!/bin/sh
# The E2B compatibility suite: the unmodified E2B SDKs from npm (package-lock.json) run as
# node:test files (tests/e2b/*.test.mjs) against a private gloveboxd on a TCP port, with
# E2B_API_URL = E2B_SANDBOX_URL = the listener and E2B_API_KEY = a fresh Glovebox API key.
# Then the daemon is stopped with SIGTERM (it must exit 0) and its log must hold no sanitizer
# report. Exit 77 (a skip, saying why) without root, node or tests/e2b/node_modules.
#   tests/e2b/run.sh [FILE.test.mjs ...]     (default: every tests/e2b/*.test.mjs)
#   E2B_TEST_FILTER=REGEX                   only tests whose name matches (--test-name-pattern)
set -u
: "${BUILD:=build}"
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
command -v node >/dev/null || { echo "skip: node not installed (scripts/deps.sh)"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not installed"; exit 77; }
[ -d "$HERE/node_modules/e2b" ] && [ -d "$HERE/node_modules/@e2b/code-interpreter" ] ||
    { echo "skip: run npm ci in tests/e2b"; exit 77; }
case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac
export BUILD
[ -x "$BUILD/gloveboxd" ] && [ -x "$BUILD/glovebox" ] || { echo "no $BUILD/gloveboxd: run make"; exit 1; }

if [ $# -gt 0 ]; then FILES="$*"; else FILES=$(ls "$HERE"/*.test.mjs 2>/dev/null); fi
[ -n "$FILES" ] || { echo "skip: no tests/e2b/*.test.mjs"; exit 77; }

T=$(mktemp -d /tmp/gbx-e2b-XXXXXX)
chmod 711 "$T"
STATE="$T/state"
RUN="$T/run"
DPID=
cleanup() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$BUILD/gloveboxd" --state-dir "$STATE" --runtime-dir "$RUN" --listen "127.0.0.1:$PORT" \
    --kill-on-exit 2>"$T/daemon.log" &
DPID=$!
up=
for _ in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz")" = 200 ] && { up=1; break; }
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.05
done
[ -n "$up" ] || { echo "gloveboxd did not start:"; cat "$T/daemon.log"; exit 1; }

export GLOVEBOX_RUNTIME_DIR="$RUN"
KEY=$("$BUILD/glovebox" apikey create e2b-tests --json |
    python3 -c "import json, sys; print(json.load(sys.stdin)['key'])") ||
    { echo "glovebox apikey create failed"; exit 1; }
export E2B_API_URL="http://127.0.0.1:$PORT" E2B_SANDBOX_URL="http://127.0.0.1:$PORT" E2B_API_KEY="$KEY"
unset E2B_DOMAIN E2B_DEBUG E2B_ACCESS_TOKEN

# One file at a time, each in its own node process (what --test-concurrency=1 does on Node
# 20.10+; Debian's Node 18 has no such flag): a file's cleanup sweeps every sandbox of the key.
flags=
node -e 'process.exit(process.allowedNodeEnvironmentFlags.has("--test-timeout") ? 0 : 1)' 2>/dev/null &&
    flags="--test-timeout=180000"
[ -n "${E2B_TEST_FILTER:-}" ] && flags="$flags --test-name-pattern=$E2B_TEST_FILTER"

# spec on stdout for people, TAP in a file for the tally; a hung file is stopped at 10 minutes
pass=0; fail=0; skip=0; failed=
for f in $FILES; do
    # shellcheck disable=SC2086
    timeout -k 10 600 node --test $flags --test-reporter=spec --test-reporter-destination=stdout \
        --test-reporter=tap --test-reporter-destination="$T/tap" "$f"
    rc=$?
    [ $rc -eq 124 ] && echo "not ok - $(basename "$f") did not finish within 10 minutes"
    p=$(awk '/^# pass / {print $3}' "$T/tap" 2>/dev/null)
    n=$(awk '/^# fail / {print $3}' "$T/tap" 2>/dev/null)
    k=$(awk '/^# (skipped|skip|todo) / {n += $3} END {print n + 0}' "$T/tap" 2>/dev/null)
    p=${p:-0}; n=${n:-0}
    [ $rc -ne 0 ] && [ "$n" -eq 0 ] && n=1   # node itself failed (a file that did not load, ...)
    pass=$((pass + p)); fail=$((fail + n)); skip=$((skip + k))
    [ "$n" -ne 0 ] && failed="$failed $(basename "$f")"
    rm -f "$T/tap"
done

# stop the daemon the way an operator does; a sanitized build reports leaks at exit
kill -TERM "$DPID" 2>/dev/null
for _ in $(seq 600); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$DPID" 2>/dev/null && { echo "# gloveboxd still running 30 s after SIGTERM: SIGKILL"; kill -KILL "$DPID"; }
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
echo "e2b: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
