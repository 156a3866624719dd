#!/bin/sh
# test-timeout: 180
# The cross-tenant matrix (issue 14): every route of the daemon (native /v1, the E2B control
# plane, envd's data plane, the code interpreter's) as its owner (key A, or the admin socket
# for the admin's routes), another key (B), no key, a revoked key (R) and another sandbox's
# E2B access token, held to the expected table tests/security/routes.tsv. The driver
# (matrix.py) also fails when the daemon's routers match a path the table does not list.
NAME=matrix
. "$(dirname "$0")/../lib/daemon.sh"
command -v python3 >/dev/null || { echo "skip: python3 not installed"; exit 77; }
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
# the E2B control plane's per-key rate limit is off: the matrix is not a load test
export GLOVEBOX_E2B_RATE=off
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
start_daemon --listen "127.0.0.1:$PORT" --gc-interval 1h
hibernate_capability
A=$("$GB" apikey create m-team-a 2>/dev/null)
B=$("$GB" apikey create m-team-b 2>/dev/null)
R=$("$GB" apikey create m-revoked 2>/dev/null)
"$GB" apikey revoke m-revoked >/dev/null 2>&1
check "three keys, the third revoked" eval '[ -n "$A" ] && [ -n "$B" ] && [ -n "$R" ] &&
    "$GB" apikey list | grep -q "m-revoked.*revoked"'

T="$T" python3 "$(dirname "$0")/matrix.py" "$(dirname "$0")/routes.tsv" "$(dirname "$0")/../.." \
    "$PORT" "$S" "$A" "$B" "$R" "$CRIU_OK" > "$T/out" 2>&1
rc=$?
cat "$T/out"
pass=$((pass + $(grep -c '^ok - ' "$T/out")))
fail=$((fail + $(grep -c '^not ok - ' "$T/out")))
check "the driver ran to its end" grep -q '^# [0-9]* rows x' "$T/out"
[ $rc -eq 0 ] || [ "$(grep -c '^not ok - ' "$T/out")" -gt 0 ] || no "the driver failed (exit $rc)"
summary
