#!/bin/sh
# gloveboxd's /v1 sandbox routes over the admin socket, with the error contract: a real
# daemon, real sandboxes, curl as the client.
set -u
NAME=api
. "$(dirname "$0")/../lib/daemon.sh"

start_daemon
req GET /healthz
check "healthz answers 200" [ "$code" = 200 ]
check "admin socket is 0600" [ "$(stat -c %a "$S")" = 600 ]
req GET /version
check "version" [ "$(field 'j["agent_protocol"]')" = 1 ]

req POST /v1/sandboxes '{"id":"api-one","memory":"256M","pids":64,"cpus":0.5,"disk":"512M"}'
check "create returns 201" [ "$code" = 201 ]
check "create echoes the id" [ "$(field 'j["id"]')" = api-one ]
check "create reports limits" [ "$(field 'j["limits"]["memory"], j["limits"]["pids"], j["limits"]["cpus"]')" = "268435456 64 0.5" ]
check "the sandbox has a control socket" [ -S "$RUN/sandboxes/api-one/ctl.sock" ]
req POST /v1/sandboxes '{}'
check "create with a generated id" [ "$code" = 201 ]
gen=$(field 'j["id"]')
gen_uid=$(field 'j["host_uid"]')
check "its init runs as its own unprivileged uid" [ -n "$(ps -o pid= -u "$gen_uid")" ]
req GET /v1/sandboxes
check "list has both" [ "$(field 'sorted(s["id"] for s in j["sandboxes"]) == sorted(["api-one", "'"$gen"'"])')" = True ]
req GET /v1/sandboxes/api-one
check "get" eval '[ "$code" = 200 ] && [ "$(field '\''j["state"]'\'')" = running ]'

# metrics, in Prometheus' text format
req GET /metrics
check "metrics answer 200" [ "$code" = 200 ]
check "metrics count the running sandboxes" grep -q '^glovebox_sandboxes{state="running"} 2$' "$T/body"
check "metrics have the create histogram" grep -q '^glovebox_sandbox_create_seconds_count 2$' "$T/body"
check "metrics have per-sandbox memory" grep -q '^glovebox_sandbox_memory_bytes{sandbox="api-one"} [1-9]' "$T/body"
check "every metrics line is well formed" python3 -c "
import re, sys
ok = True
for line in open('$T/body'):
    line = line.rstrip('\n')
    if line.startswith('# HELP ') or line.startswith('# TYPE '):
        continue
    if not re.match(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*=\"[^\"]*\",?)*\})? -?[0-9.e+Inf-]+$', line):
        print('bad line:', line); ok = False
sys.exit(0 if ok else 1)"

# the error contract
req POST /v1/sandboxes '{"id":"api-one"}'
check "duplicate id is 409" [ "$code" = 409 ]
check "409 body names the kind" [ "$(field 'j["error"]["kind"]')" = conflict ]
req POST /v1/sandboxes '{"id":'
check "malformed JSON is 400" [ "$code" = 400 ]
check "400 explains" grep -q "not valid JSON" "$T/body"
req POST /v1/sandboxes '{"memroy":"1G"}'
check "unknown field is 400" eval '[ "$code" = 400 ] && grep -q "unknown field '\''memroy'\''" "$T/body"'
req POST /v1/sandboxes '{"memory":"lots"}'
check "bad memory is 400" [ "$code" = 400 ]
req POST /v1/sandboxes '{"id":"Bad ID"}'
check "bad id is 400" [ "$code" = 400 ]
req POST /v1/sandboxes '[1,2]'
check "a non-object body is 400" [ "$code" = 400 ]
req POST /v1/sandboxes "$(python3 -c 'print("[" * 100 + "]" * 100)')"
check "deep nesting is 400" eval '[ "$code" = 400 ] && grep -q "nests deeper" "$T/body"'
python3 -c 'print("{\"x\":\"" + "a" * 2000000 + "\"}")' > "$T/huge"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" -X POST --data-binary @"$T/huge" http://glovebox/v1/sandboxes)
check "a 2 MB body is 413" [ "$code" = 413 ]
python3 -c 'print("x" * 70000)' > "$T/hdr"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" -H "X-Big: $(cat "$T/hdr")" http://glovebox/healthz)
check "70 KB of headers is 400" [ "$code" = 400 ]
req GET "/v1/sandboxes/$(python3 -c 'print("a" * 2000)')"
check "a 2 KB path is 400" eval '[ "$code" = 400 ] && grep -q "longer than 1024" "$T/body"'
req GET /healthz
check "and the daemon still serves" [ "$code" = 200 ]
req POST /v1/sandboxes '{"template":"no-such"}'
check "unknown template is 404" eval '[ "$code" = 404 ] && grep -q "template '\''no-such'\'' not found" "$T/body"'
req GET /v1/sandboxes/nope
check "unknown sandbox is 404" [ "$code" = 404 ]
req DELETE /v1/sandboxes/nope
check "deleting an unknown sandbox is 404" [ "$code" = 404 ]
req PUT /v1/sandboxes
check "wrong method is 405" [ "$code" = 405 ]
req GET /v1/nothing
check "unknown route is 404" [ "$code" = 404 ]
req GET /healthz
check "the daemon is still up after all that" [ "$code" = 200 ]

# timeouts: the reaper destroys a sandbox when its timeout passes; a timeout can be moved
req POST /v1/sandboxes '{"id":"short","timeout":"1s"}'
check "create with a timeout" eval '[ "$code" = 201 ] && [ "$(field '\''j["expires_at"] is not None'\'')" = True ]'
req POST /v1/sandboxes '{"id":"moved","timeout":1}'
req POST /v1/sandboxes/moved/timeout '{"timeout":"10m"}'
check "a timeout can be moved" [ "$code" = 200 ]
req POST /v1/sandboxes/api-one/timeout '{"timeout":"soon"}'
check "a bad timeout is 400" [ "$code" = 400 ]
req POST /v1/sandboxes '{"timeout":-5}'
check "a negative timeout is 400" [ "$code" = 400 ]
for i in $(seq 60); do
    req GET /v1/sandboxes/short
    [ "$code" = 404 ] && break
    sleep 0.05
done
check "the reaper destroys an expired sandbox" [ "$code" = 404 ]
check "and leaves nothing of it" [ ! -e "$RUN/sandboxes/short" ]
req GET /v1/sandboxes/moved
check "the moved timeout kept the other one" [ "$code" = 200 ]
req POST /v1/sandboxes/moved/timeout '{"timeout":0}'
check "a timeout can be removed" eval '[ "$code" = 200 ] && [ "$(field '\''j["expires_at"]'\'')" = None ]'
req DELETE /v1/sandboxes/moved

req DELETE /v1/sandboxes/api-one
check "delete is 204" [ "$code" = 204 ]
req GET /v1/sandboxes/api-one
check "gone after delete" [ "$code" = 404 ]
check "its control socket is gone" [ ! -e "$RUN/sandboxes/api-one" ]

# the audit log holds the lifecycle and its chain verifies (read with Python's sqlite3)
n=$(q "print(c.execute(\"select count(*) from audit where kind in ('sandbox.create','sandbox.delete')\").fetchone()[0])")
check "audit rows for create and delete" [ "$n" = 6 ]
n=$(q "print(c.execute(\"select count(*) from audit where kind = 'sandbox.expire' and sandbox = 'short'\").fetchone()[0])")
check "the expiry is audited" [ "$n" = 1 ]

# stop with a sandbox still running: --kill-on-exit takes it down, nothing is left
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
check "SIGTERM stops the daemon cleanly" [ $rc -eq 0 ]
check "the admin socket is removed" [ ! -e "$S" ]
left=$(ls "$RUN/sandboxes" 2>/dev/null | wc -l)
check "no sandbox left behind" [ "$left" = 0 ]
check "no process of the last sandbox left" [ -z "$(ps -o pid= -u "$gen_uid")" ]
spec_check
summary
