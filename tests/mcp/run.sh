#!/bin/sh
# The MCP suite: the official MCP TypeScript SDK from npm (package-lock.json) drives
# `glovebox mcp` over stdio (its Client with a StdioClientTransport) as node:test files
# (tests/mcp/*.test.mjs), against a private gloveboxd with its own state and runtime dirs.
# Then the daemon is stopped with SIGTERM (it must exit 0) and its log must hold no sanitizer
# report. Exit 77 (a skip, saying why) without root, node, curl, tests/mcp/node_modules, or a
# daemon that serves the session routes (/v1/sessions).
#   tests/mcp/run.sh [FILE.test.mjs ...]     (default: every tests/mcp/*.test.mjs)
#   MCP_TEST_FILTER=REGEX                   only tests whose name matches (--test-name-pattern)
set -u
: "${BUILD:=build}"
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
command -v node >/dev/null || { echo "skip: node not installed (scripts/deps.sh)"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not installed"; exit 77; }
[ -d "$HERE/node_modules/@modelcontextprotocol/sdk" ] ||
    { echo "skip: run npm ci in tests/mcp"; exit 77; }
case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac
export BUILD
[ -x "$BUILD/gloveboxd" ] && [ -x "$BUILD/glovebox" ] || { echo "no $BUILD/gloveboxd: run make"; exit 1; }

if [ $# -gt 0 ]; then FILES="$*"; else FILES=$(ls "$HERE"/*.test.mjs 2>/dev/null); fi
[ -n "$FILES" ] || { echo "skip: no tests/mcp/*.test.mjs"; exit 77; }

T=$(mktemp -d /tmp/gbx-mcp-XXXXXX)
chmod 711 "$T"
STATE="$T/state"
RUN="$T/run"
S="$RUN/api.sock"
DPID=
cleanup() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$BUILD/gloveboxd" --state-dir "$STATE" --runtime-dir "$RUN" --kill-on-exit 2>"$T/daemon.log" &
DPID=$!
up=
for _ in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] &&
        { up=1; break; }
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.05
done
[ -n "$up" ] || { echo "gloveboxd did not start:"; cat "$T/daemon.log"; exit 1; }

# a daemon without the session routes answers "no route for ..." (not a missing session)
curl -s -o "$T/probe" --unix-socket "$S" http://glovebox/v1/sessions/ses-mcp-probe
if grep -q 'no route for' "$T/probe"; then
    echo "skip: this gloveboxd has no session routes (/v1/sessions) yet"
    exit 77
fi

export GLOVEBOX_RUNTIME_DIR="$RUN"

flags=
node -e 'process.exit(process.allowedNodeEnvironmentFlags.has("--test-timeout") ? 0 : 1)' 2>/dev/null &&
    flags="--test-timeout=300000"
[ -n "${MCP_TEST_FILTER:-}" ] && flags="$flags --test-name-pattern=$MCP_TEST_FILTER"

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
echo "mcp: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
