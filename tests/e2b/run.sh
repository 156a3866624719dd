#!/bin/sh
# test-timeout: 900
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
    { echo "skip: no tests/e2b/node_modules (make test installs it: npm ci)"; exit 77; }
case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac
export BUILD
[ -x "$BUILD/gloveboxd" ] && [ -x "$BUILD/glovebox" ] || { echo "no $BUILD/gloveboxd: run make"; exit 1; }

if [ $# -gt 0 ]; then FILES="$*"; else FILES=$(ls "$HERE"/*.test.mjs 2>/dev/null); fi
[ -n "$FILES" ] || { echo "skip: no tests/e2b/*.test.mjs"; exit 77; }

NAME=e2b
. "$HERE/../lib/node-suite.sh"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
# getHost(port) is "<port>-<id>.localhost:PORT": ingress on the same listener. The suite drives
# many sandboxes at once with one key, faster than the default 100 requests/s on a quick
# machine: the limit has its own tests (t170, t400), so here it is set out of the way.
suite_start_daemon --listen "127.0.0.1:$PORT" --ingress-domain "localhost:$PORT" --rate-limit 5000/10000

export GLOVEBOX_RUNTIME_DIR="$RUN"
KEY=$("$BUILD/glovebox" apikey create e2b-tests --json |
    python3 -c "import json, sys; print(json.load(sys.stdin)['key'])") ||
    { echo "glovebox apikey create failed"; exit 1; }
export E2B_API_URL="http://127.0.0.1:$PORT" E2B_SANDBOX_URL="http://127.0.0.1:$PORT" E2B_API_KEY="$KEY"
unset E2B_DOMAIN E2B_DEBUG E2B_ACCESS_TOKEN

# a file's cleanup sweeps every sandbox of the key: files run one at a time
# shellcheck disable=SC2086
suite_run_files 180000 "${E2B_TEST_FILTER:-}" $FILES
suite_finish
