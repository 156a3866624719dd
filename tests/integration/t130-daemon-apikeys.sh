#!/bin/sh
# The TCP listener: every request needs a live API key (stored hashed), and each key sees
# only its own sandboxes; keys are created and revoked on the admin socket.
NAME=keys
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
U="http://127.0.0.1:$PORT"
start_daemon --listen "127.0.0.1:$PORT"

# tcp KEY METHOD PATH [BODY]: sets $code, body in $T/body
tcp() {
    key=$1; m=$2; p=$3; shift 3
    if [ $# -ge 1 ]; then
        code=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $key" -X "$m" --data-binary "$1" "$U$p")
    else
        code=$(curl -s -o "$T/body" -w '%{http_code}' -H "X-API-Key: $key" -X "$m" "$U$p")
    fi
}

a=$("$GB" apikey create team-a 2>/dev/null)
check "apikey create prints a key" [ -n "$a" ]
"$GB" apikey create team-b --json > "$T/b.json"
b=$(python3 -c "import json; print(json.load(open('$T/b.json'))['key'])")
check "apikey create --json prints {\"key\": ...}" [ -n "$b" ]
"$GB" apikey create team-a 2>"$T/err"
rc=$?
check "a duplicate name is refused" eval '[ $rc -ne 0 ] && grep -q "exists" "$T/err"'
check "keys are stored hashed, never in clear" \
    [ "$(python3 -c "import sqlite3; print(sum(1 for (h,) in sqlite3.connect('$STATE/glovebox.db').execute('select hash from api_keys') if h in ('$a', '$b')))")" = 0 ]

check "no key appears anywhere in the database files" sh -c "! grep -q -e '$a' -e '$b' '$STATE'/glovebox.db*"
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/healthz")
check "healthz needs no key" [ "$code" = 200 ]
code=$(curl -s -o "$T/body" -w '%{http_code}' "$U/v1/sandboxes")
check "no key: 401" eval '[ "$code" = 401 ] && grep -q "an API key is needed" "$T/body"'
tcp gbx_0000 GET /v1/sandboxes
check "a wrong key: 401" [ "$code" = 401 ]

tcp "$a" POST /v1/sandboxes '{"id":"of-a"}'
check "key A creates a sandbox" [ "$code" = 201 ]
tcp "$b" POST /v1/sandboxes '{"id":"of-b"}'
check "key B creates one" [ "$code" = 201 ]
tcp "$a" GET /v1/sandboxes
check "A lists only its own" [ "$(python3 -c "import json; print([s['id'] for s in json.load(open('$T/body'))['sandboxes']])")" = "['of-a']" ]
tcp "$a" GET /v1/sandboxes/of-b
check "A cannot see B's sandbox" [ "$code" = 404 ]
tcp "$a" DELETE /v1/sandboxes/of-b
check "A cannot delete B's sandbox" [ "$code" = 404 ]
tcp "$a" POST /v1/sandboxes/of-b/exec '{"cmd":["true"]}'
check "A cannot exec in B's sandbox" [ "$code" = 404 ]
tcp "$a" GET '/v1/sandboxes/of-b/files/stat?path=/etc/passwd'
check "A cannot read B's files" [ "$code" = 404 ]
tcp "$a" GET /v1/sandboxes/of-b/processes
check "A cannot list B's processes" [ "$code" = 404 ]
tcp "$a" POST /v1/sandboxes/of-b/timeout '{"timeout":1}'
check "A cannot move B's timeout" [ "$code" = 404 ]
tcp "$a" GET '/v1/sandboxes?label=x=y'
check "A's filtered list holds none of B's" eval '[ "$code" = 200 ] && [ "$(python3 -c "import json; print(len(json.load(open('\''$T/body'\''))['\''sandboxes'\'']))")" = 0 ]'
tcp "$b" POST /v1/sandboxes '{"idempotency_key":"shared"}'
kb=$(python3 -c "import json; print(json.load(open('$T/body'))['id'])")
tcp "$a" POST /v1/sandboxes '{"idempotency_key":"shared"}'
check "idempotency keys are per API key" eval '[ "$code" = 201 ] && [ "$(python3 -c "import json; print(json.load(open('\''$T/body'\''))['\''id'\''])")" != "$kb" ]'
ka=$(python3 -c "import json; print(json.load(open('$T/body'))['id'])")
tcp "$a" DELETE "/v1/sandboxes/$ka"
tcp "$b" DELETE "/v1/sandboxes/$kb"
tcp "$a" POST /v1/sandboxes '{"id":"of-b"}'
check "A cannot take B's id either" [ "$code" = 409 ]
tcp "$a" POST /v1/sandboxes/of-a/exec '{"shell":"echo mine"}'
check "A execs in its own" eval '[ "$code" = 200 ] && grep -q '\''"exit_code":0'\'' "$T/body"'
# /metrics per key (issue 14 #7): a key sees its own sandboxes' series, none of another
# key's, and none of the daemon's own counters; the admin sees everything
tcp "$a" GET /metrics
check "A's /metrics: 200" [ "$code" = 200 ]
check "A's /metrics has its own sandbox's series" grep -q 'glovebox_sandbox_pids{sandbox="of-a"}' "$T/body"
check "A's /metrics has none of B's" sh -c "! grep -q 'of-b' '$T/body'"
check "A's /metrics counts its own sandboxes only" grep -qx 'glovebox_sandboxes{state="running"} 1' "$T/body"
check "A's /metrics has no daemon-wide counters" sh -c "! grep -qE '^glovebox_(execs_total|sandbox_create_seconds|http_|pool_|egress_)' '$T/body'"
curl -s --max-time 30 --unix-socket "$S" http://glovebox/metrics > "$T/admin.metrics"
check "the admin's /metrics has both sandboxes and the daemon's counters" sh -c \
    "grep -q 'sandbox=\"of-a\"' '$T/admin.metrics' && grep -q 'sandbox=\"of-b\"' '$T/admin.metrics' && grep -q '^glovebox_execs_total' '$T/admin.metrics'"
tcp "$a" POST /v1/apikeys '{"name":"sneaky"}'
check "keys cannot manage keys" [ "$code" = 403 ]
check "the admin sees both" [ "$("$GB" ls --json | python3 -c "import json, sys; print(sorted(s['id'] for s in json.load(sys.stdin)))")" = "['of-a', 'of-b']" ]

"$GB" apikey revoke team-a
check "revoke" [ $? -eq 0 ]
tcp "$a" GET /v1/sandboxes
check "a revoked key is refused at once" [ "$code" = 401 ]
check "apikey list shows the states" sh -c "'$GB' apikey list | grep -q 'team-a.*revoked' && '$GB' apikey list | grep -q 'team-b.*live'"
settle
actors=$(python3 -c "
import sqlite3
c = sqlite3.connect('$STATE/glovebox.db')
print(' '.join(sorted(set(a for (a,) in c.execute(\"select actor from audit where kind in ('sandbox.create', 'exec.start')\")))))")
check "the audit log names the key that acted" [ "$actors" = "team-a team-b" ]
"$GB" kill of-a of-b
summary
