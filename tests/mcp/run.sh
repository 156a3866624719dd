#!/bin/sh
# test-timeout: 600
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
    { echo "skip: no tests/mcp/node_modules (make test installs it: npm ci)"; exit 77; }
case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac
export BUILD
[ -x "$BUILD/gloveboxd" ] && [ -x "$BUILD/glovebox" ] || { echo "no $BUILD/gloveboxd: run make"; exit 1; }

if [ $# -gt 0 ]; then FILES="$*"; else FILES=$(ls "$HERE"/*.test.mjs 2>/dev/null); fi
[ -n "$FILES" ] || { echo "skip: no tests/mcp/*.test.mjs"; exit 77; }

NAME=mcp
. "$HERE/../lib/node-suite.sh"
suite_start_daemon

# a daemon without the session routes answers "no route for ..." (not a missing session)
curl -s -o "$T/probe" --unix-socket "$S" http://glovebox/v1/sessions/ses-mcp-probe
if grep -q 'no route for' "$T/probe"; then
    echo "skip: this gloveboxd has no session routes (/v1/sessions) yet"
    exit 77
fi

export GLOVEBOX_RUNTIME_DIR="$RUN"
# shellcheck disable=SC2086
suite_run_files 300000 "${MCP_TEST_FILTER:-}" $FILES
suite_finish
