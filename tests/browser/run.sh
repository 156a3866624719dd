#!/bin/sh
# test-timeout: 600
# The browser suite: the published playwright-core from npm (package-lock.json; it downloads
# no browser) drives the Chromium inside a sandbox over CDP, through gloveboxd's ingress, as
# node:test files (tests/browser/*.test.mjs) against a private gloveboxd on a TCP port with
# the ingress domain localhost:PORT. GBX_URL = the listener, GBX_KEY = a fresh API key.
# Exit 77 (a skip, saying why) without root, node, tests/browser/node_modules or Debian's
# chromium on the host (scripts/deps.sh installs it; the host template then has it).
#   tests/browser/run.sh [FILE.test.mjs ...]
set -u
: "${BUILD:=build}"
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
command -v node >/dev/null || { echo "skip: node not installed (scripts/deps.sh)"; exit 77; }
[ -d "$HERE/node_modules/playwright-core" ] ||
    { echo "skip: no tests/browser/node_modules (make test installs it: npm ci)"; exit 77; }
[ -x /usr/lib/chromium/chromium ] ||
    { echo "skip: no Debian chromium on the host (scripts/deps.sh installs it)"; exit 77; }
case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac
export BUILD
[ -x "$BUILD/gloveboxd" ] && [ -x "$BUILD/glovebox" ] || { echo "no $BUILD/gloveboxd: run make"; exit 1; }

if [ $# -gt 0 ]; then FILES="$*"; else FILES=$(ls "$HERE"/*.test.mjs 2>/dev/null); fi
[ -n "$FILES" ] || { echo "skip: no tests/browser/*.test.mjs"; exit 77; }

NAME=browser
. "$HERE/../lib/node-suite.sh"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
suite_start_daemon --listen "127.0.0.1:$PORT" --ingress-domain "localhost:$PORT"

export GLOVEBOX_RUNTIME_DIR="$RUN"
GBX_KEY=$("$BUILD/glovebox" apikey create browser-tests --json |
    python3 -c "import json, sys; print(json.load(sys.stdin)['key'])") ||
    { echo "glovebox apikey create failed"; exit 1; }
export GBX_URL="http://127.0.0.1:$PORT" GBX_DOMAIN="localhost:$PORT" GBX_KEY

# shellcheck disable=SC2086
suite_run_files 240000 "" $FILES
suite_finish
