#!/bin/sh
# A lifecycle that pauses instead of killing (docs/lifecycle.md): --on-timeout pause freezes a
# sandbox at its deadline, with its files and processes kept; --auto-resume thaws it for the
# next request that needs it (native exec and files, ingress, E2B envd), as its owner, audited
# and counted, and its timeout starts again; only a credential that may use it wakes it (other
# keys, no key and revoked keys leave it paused); without auto_resume a paused sandbox answers
# 409 at once instead of hanging; the setting survives a daemon restart; bad values are refused.
NAME=lifecycle
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
start_daemon --listen "127.0.0.1:$PORT"
A=$("$GB" apikey create team-a 2>/dev/null); B=$("$GB" apikey create team-b 2>/dev/null)
R=$("$GB" apikey create gone 2>/dev/null); "$GB" apikey revoke gone > /dev/null
U="http://127.0.0.1:$PORT"
state() { api GET "/v1/sandboxes/$1"; field "j['state']"; }
# wait_paused ID: until its timeout has paused it (at most 10 s)
wait_paused() { for i in $(seq 100); do [ "$(state "$1")" = paused ] && return 0; sleep 0.1; done; return 1; }
metric() { curl -s --unix-socket "$S" http://glovebox/metrics | awk -v m="$1" '$1 == m {print $2}'; }

# ---- bad input ---------------------------------------------------------------------------------
api POST /v1/sandboxes "$A" '{"auto_resume":"yes"}'
check "auto_resume must be a boolean: 400" eval '[ "$code" = 400 ] && grep -q auto_resume "$T/body"'
"$GB" create --on-timeout sleep > /dev/null 2> "$T/err"
check "--on-timeout sleep: refused, saying what it takes" grep -q '"kill" or "pause"' "$T/err"

# ---- on_timeout pause + auto_resume: native exec ---------------------------------------------
api POST /v1/sandboxes "$A" '{"timeout":"1500ms","on_timeout":"pause","auto_resume":true}'
id=$(field "j['id']")
check "create echoes auto_resume and on_timeout" eval "[ \"\$(field \"j['auto_resume'], j['on_timeout']\")\" = 'True pause' ]"
api POST "/v1/sandboxes/$id/exec" "$A" '{"shell":"echo kept > /tmp/f; (sleep 1000 &) ; echo started","wait":true}'
check "a file and a background process before the timeout" eval '[ "$code" = 200 ] && grep -q started "$T/body"'
paused_before=$(metric glovebox_sandboxes_timeout_paused_total)
check "at its timeout it is paused, not killed" wait_paused "$id"
check "the timeout pause is counted" [ "$(metric glovebox_sandboxes_timeout_paused_total)" -gt "${paused_before:-0}" ]
# requests that may not use it do not wake it
api POST "/v1/sandboxes/$id/exec" "$B" '{"argv":["true"],"wait":true}'
check "another key's exec: 404, and it stays paused" eval '[ "$code" = 404 ] && [ "$(state "$id")" = paused ]'
for who in none revoked; do
    k=; [ "$who" = revoked ] && k=$R
    code=$(curl -s --max-time 30 -o "$T/body" -w '%{http_code}' -X POST ${k:+-H "Authorization: Bearer $k"} \
        -H 'Content-Type: application/json' -d '{"argv":["true"],"wait":true}' "$U/v1/sandboxes/$id/exec")
    check "exec with key: $who: 401, and it stays paused" eval '[ "$code" = 401 ] && [ "$(state "$id")" = paused ]'
done
api GET "/v1/sandboxes/$id" "$A"
check "reading its state does not wake it" [ "$(field "j['state']")" = paused ]
resumed_before=$(metric glovebox_sandboxes_auto_resumed_total)
api POST "/v1/sandboxes/$id/exec" "$A" '{"shell":"cat /tmp/f; pgrep -c -x sleep","wait":true}'
check "the owner's exec wakes it and finds its file and its process" python3 -c "
import json; j = json.load(open('$T/body'))
assert '$code' == '200' and j['stdout'] == 'kept\\n1\\n', j"
api GET "/v1/sandboxes/$id" "$A"
check "it runs again, with a new timeout ahead" python3 -c "
import json, datetime; j = json.load(open('$T/body'))
assert j['state'] == 'running', j
e = datetime.datetime.fromisoformat(j['expires_at'].replace('Z', '+00:00'))
assert e > datetime.datetime.now(datetime.timezone.utc), j"
check "the auto-resume is counted" [ "$(metric glovebox_sandboxes_auto_resumed_total)" = $((${resumed_before:-0} + 1)) ]
check "audited: resumed by its owner, reason auto_resume, by api" [ "$(q "print(c.execute(\"select count(*) from audit where kind='sandbox.resume' and sandbox='$id' and actor='team-a' and json_extract(detail,'\$.reason')='auto_resume' and json_extract(detail,'\$.by')='api'\").fetchone()[0])")" = 1 ]

# ---- files wake it too -------------------------------------------------------------------------
check "paused again by its timeout" wait_paused "$id"
code=$(curl -s --max-time 30 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $A" "$U/v1/sandboxes/$id/files?path=/tmp/f")
check "a file read wakes it" eval '[ "$code" = 200 ] && [ "$(cat "$T/body")" = kept ]'

# ---- ingress wakes it --------------------------------------------------------------------------
"$GB" exec "$id" -- sh -c 'mkdir -p /tmp/www && echo hello-awake > /tmp/www/x.txt'
"$GB" exec -d "$id" -- python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/www > /dev/null
for i in $(seq 100); do api GET "/v1/sandboxes/$id/ports/8000/x.txt"; [ "$code" = 200 ] && break; sleep 0.1; done
check "paused again by its timeout (a server inside)" wait_paused "$id"
api GET "/v1/sandboxes/$id/ports/8000/x.txt" "$B"
check "ingress with another key: 404, and it stays paused" eval '[ "$code" = 404 ] && [ "$(state "$id")" = paused ]'
api GET "/v1/sandboxes/$id/ports/8000/x.txt" "$A"
check "ingress with the owner's key wakes it and reaches the server" eval '[ "$code" = 200 ] && [ "$(cat "$T/body")" = hello-awake ]'
check "audited: by ingress" [ "$(q "print(c.execute(\"select count(*) from audit where kind='sandbox.resume' and sandbox='$id' and json_extract(detail,'\$.by')='ingress'\").fetchone()[0])")" = 1 ]

# ---- E2B envd wakes it -------------------------------------------------------------------------
check "paused again by its timeout (E2B)" wait_paused "$id"
tok=$(q "print(c.execute(\"select token from sandboxes where id='$id'\").fetchone()[0])" 2>/dev/null)
[ -n "$tok" ] || tok=$(curl -s -X POST -H "X-API-KEY: $A" -H 'Content-Type: application/json' -d '{}' \
    "$U/sandboxes/$id/connect" | python3 -c "import json,sys; print(json.load(sys.stdin)['envdAccessToken'])")
envd() { # envd PATH TOKEN: an envd file read through the daemon, as the E2B SDK sends it
    code=$(curl -s --max-time 30 -o "$T/body" -w '%{http_code}' -H "E2b-Sandbox-Id: $id" \
        -H "X-Access-Token: $2" "$U$1")
}
if [ "$(state "$id")" = paused ]; then
    envd "/files?path=/tmp/f&username=user" "not-the-token"
    check "envd with a wrong token: refused, and it stays paused" eval '[ "$code" != 200 ] && [ "$(state "$id")" = paused ]'
    envd "/files?path=/tmp/f&username=user" "$tok"
    check "envd with its token wakes it" eval '[ "$code" = 200 ] && [ "$(cat "$T/body")" = kept ]'
    check "audited: by envd" [ "$(q "print(c.execute(\"select count(*) from audit where kind='sandbox.resume' and sandbox='$id' and json_extract(detail,'\$.by')='envd'\").fetchone()[0])")" = 1 ]
else
    no "the sandbox was resumed by the token lookup (connect), not left paused"
fi

# ---- without auto_resume: 409 at once, not a hang ----------------------------------------------
api POST /v1/sandboxes "$A" '{}'
plain=$(field "j['id']")
"$GB" pause "$plain" > /dev/null
api POST "/v1/sandboxes/$plain/exec" "$A" '{"argv":["true"],"wait":true}'
check "exec on a paused sandbox without auto_resume: 409, says so" eval '[ "$code" = 409 ] && grep -q "is paused" "$T/body"'
code=$(curl -s --max-time 30 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $A" "$U/v1/sandboxes/$plain/files?path=/etc/hostname")
check "a file read on it: 409" [ "$code" = 409 ]
api GET "/v1/sandboxes/$plain/ports/8000/" "$A"
check "ingress to it: 409" [ "$code" = 409 ]
check "it is still paused" [ "$(state "$plain")" = paused ]

# ---- a restart keeps the setting -------------------------------------------------------------
"$GB" create --id sb-lc-cli --on-timeout pause --auto-resume > /dev/null
"$GB" pause sb-lc-cli > /dev/null
kill -9 "$DPID"; wait "$DPID" 2>/dev/null
start_daemon --listen "127.0.0.1:$PORT"
"$GB" info sb-lc-cli --json > "$T/info"
check "after a restart: still paused, auto_resume and on_timeout kept" python3 -c "
import json; j = json.load(open('$T/info'))
assert j['state'] == 'paused' and j['auto_resume'] is True and j['on_timeout'] == 'pause', j"
check "and an exec wakes it" "$GB" exec sb-lc-cli -- true
check "running" [ "$("$GB" info sb-lc-cli --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = running ]
"$GB" kill sb-lc-cli "$plain" "$id" > /dev/null
summary
