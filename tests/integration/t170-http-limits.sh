#!/bin/sh
# The HTTP front door (src/http/gate.c): a request without a credential never gets its body
# read (anonymous 60 MB uploads neither wait for their bodies nor grow the daemon), a head or
# body that does not come is closed after its timeout, an idle keep-alive connection too, the
# TCP listener caps connections in all and per address, and every API key has a request rate
# (429 with Retry-After) that does not touch another key's. The checks run from raw sockets on
# loopback (t170-http-limits.py).
NAME=httplim
. "$(dirname "$0")/../lib/daemon.sh"
export PATH=/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin:$PATH
GB="$BUILD/glovebox"
PY="$(dirname "$0")/t170-http-limits.py"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
U="http://127.0.0.1:$PORT"

# drive PHASE: the driver's TAP lines count as this test's checks
drive() {
    python3 "$PY" "$1" "$PORT" "$DPID" "$a" "$b" lim > "$T/$1.tap" 2>&1
    cat "$T/$1.tap"
    pass=$((pass + $(grep -c '^ok - ' "$T/$1.tap")))
    fail=$((fail + $(grep -c '^not ok - ' "$T/$1.tap")))
    grep -q '^Traceback' "$T/$1.tap" && no "the $1 driver ran to its end"
    true
}

start_daemon --listen "127.0.0.1:$PORT" --header-timeout 1s --body-timeout 1s --idle-timeout 2s \
    --body-min-rate 64K
a=$("$GB" apikey create lim-a 2>/dev/null)
b=$("$GB" apikey create lim-b 2>/dev/null)
check "two API keys" eval '[ -n "$a" ] && [ -n "$b" ]'
code=$(curl -s -o "$T/body" -w '%{http_code}' -H "X-API-Key: $a" -X POST --data-binary '{"id":"lim"}' "$U/v1/sandboxes")
check "key A creates its sandbox" [ "$code" = 201 ]
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/healthz")
check "healthz needs no key" [ "$code" = 200 ]
code=$(curl -s -o "$T/body" -w '%{http_code}' "$U/v1/sandboxes")
check "no key: 401 as before" eval '[ "$code" = 401 ] && grep -q "an API key is needed" "$T/body"'
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary '{}' "$U/healthz")
check "even healthz takes no body without a key (answered, not read)" [ "$code" = 405 ]
code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X PUT --data-binary 'admin' "http://glovebox/v1/sandboxes/lim/files?path=/tmp/admin")
check "the admin socket's uploads need no key" [ "$code" = 200 -o "$code" = 201 -o "$code" = 204 ]

drive anon
drive timeouts
drive big
code=$(curl -s -o "$T/body" -w '%{http_code}' -H "X-API-Key: $a" "$U/v1/sandboxes/lim/files/stat?path=/tmp/big")
check "the big upload is all there" eval '[ "$code" = 200 ] && grep -q "\"size\": *60000000" "$T/body"'
# metric NAME: its value on the admin socket's /metrics
metric() { curl -s --unix-socket "$S" http://glovebox/metrics | awk -v n="$1" '$1 == n {print $2}'; }
check "/metrics counts the requests answered from their head alone" \
    [ "$(metric 'glovebox_http_head_only_total{listener="tcp"}')" -ge 8 ]
check "/metrics counts the timeouts by phase" eval \
    '[ "$(metric "glovebox_http_timeouts_total{listener=\"tcp\",phase=\"header\"}")" -ge 3 ] &&
     [ "$(metric "glovebox_http_timeouts_total{listener=\"tcp\",phase=\"body\"}")" -ge 1 ] &&
     [ "$(metric "glovebox_http_timeouts_total{listener=\"tcp\",phase=\"idle\"}")" -ge 1 ]'
check "slow clients' closes are logged (at most one line a second)" \
    grep -q "closing the connection from '127.0.0.1' in its header: the request head did not arrive in time" "$T/daemon.log"

# caps and rate limits: small ones
kill "$DPID"; wait "$DPID" 2>/dev/null; DPID=
start_daemon --listen "127.0.0.1:$PORT" --max-conns 6 --max-conns-per-ip 3 --rate-limit 5/5
drive caps
check "/metrics counts the refused connections" [ "$(metric 'glovebox_http_refused_total{listener="tcp"}')" -ge 2 ]
check "connections over a cap are logged" grep -q "refused a connection from '127.0.0.1': too many open connections from this address" "$T/daemon.log"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)
check "the admin socket is not capped" [ "$code" = 200 ]
drive rate

# GLOVEBOX_E2B_RATE is an alias of --rate-limit
kill "$DPID"; wait "$DPID" 2>/dev/null; DPID=
GLOVEBOX_E2B_RATE=2:2 start_daemon --listen "127.0.0.1:$PORT"
codes=
for i in 1 2 3 4 5 6; do
    codes="$codes $(curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $a" "$U/v1/sandboxes")"
done
check "GLOVEBOX_E2B_RATE=2:2 limits the native API too ($codes)" eval 'echo "$codes" | grep -q 429'

summary
