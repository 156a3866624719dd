#!/bin/sh
# test-timeout: 700
# The Managed Agents worker suite: the official npm @anthropic-ai/sdk EnvironmentWorker
# (sdk_worker.mjs, pinned by package-lock.json) runs scripted scenarios (scenarios/*.json)
# against the fake control plane (fake_cp.mjs), and node:test files (tests/worker/*.test.mjs)
# check the fake's request log and state against the protocol. Needs no daemon and no root.
# Exit 77 (a skip, saying why) without node, npm or tests/worker/node_modules.
#   tests/worker/run.sh [FILE.test.mjs ...]     (default: every tests/worker/*.test.mjs)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "skip: node not installed (scripts/deps.sh)"; exit 77; }
command -v npm >/dev/null || { echo "skip: npm not installed (scripts/deps.sh)"; exit 77; }
[ -d "$HERE/node_modules/@anthropic-ai/sdk/lib/environments" ] ||
    { echo "skip: no tests/worker/node_modules (make test installs it: npm ci)"; exit 77; }
if [ $# -gt 0 ]; then FILES="$*"; else FILES=$(ls "$HERE"/*.test.mjs 2>/dev/null); fi
[ -n "$FILES" ] || { echo "skip: no tests/worker/*.test.mjs"; exit 77; }
# shellcheck disable=SC2086
timeout -k 10 600 node --test $FILES
