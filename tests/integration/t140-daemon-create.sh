#!/bin/sh
# gloveboxd's create options and lists: env, metadata and labels at create, the idempotency
# key, list filters and cursor pagination, the warm pool (--pool), the configuration file,
# and per-request metrics and log lines.
set -u
NAME=create
. "$(dirname "$0")/../lib/daemon.sh"

decode_stdout() {
    python3 -c "
import base64, json, sys
for line in open('$T/body'):
    e = json.loads(line)
    if e['type'] == 'stdout':
        sys.stdout.write(base64.b64decode(e['data']).decode())"
}
metric() { curl -s --max-time 10 --unix-socket "$S" http://glovebox/metrics | awk -v m="$1" '$1 == m {print $2}'; }

# settings from a configuration file; a flag overrides the file
cat > "$T/gloveboxd.conf" <<EOF
# test configuration
pool = 5
log-format = "json"
EOF
start_daemon --config "$T/gloveboxd.conf" --pool 2
check "the configuration file is read (JSON logs)" grep -q '^{"ts":' "$T/daemon.log"
# a JSON request line's numbers are JSON numbers (issue 16 #8), its strings strings
check "JSON request lines carry status and ms as numbers" python3 -c "
import json, sys
rs = [j for j in map(json.loads, open('$T/daemon.log')) if j.get('msg') == 'request']
sys.exit(not (rs and all(type(j['status']) is int and type(j['ms']) in (int, float)
                         and type(j['path']) is str and type(j['actor']) is str for j in rs)))"
check "a flag beats the file (pool of 2, not 5)" grep -q 'keeping a warm pool of 2 sandboxes' "$T/daemon.log"
for i in $(seq 100); do [ "$(metric 'glovebox_sandboxes{state="pooled"}')" = 2 ] && break; sleep 0.05; done
check "the pool fills in the background" [ "$(metric 'glovebox_sandboxes{state="pooled"}')" = 2 ]

# env, metadata, labels
req POST /v1/sandboxes '{"id":"a1","env":{"GREETING":"hello","EMPTY":""},"metadata":{"owner":"team a","note":"x"},"labels":{"team":"a","tier":"dev"}}'
check "create with env, metadata and labels" [ "$code" = 201 ]
check "metadata and labels come back" \
    [ "$(field 'j["metadata"]["owner"] + "/" + j["labels"]["team"]')" = "team a/a" ]
# (and the egress CA bundle's variables, which every sandbox gets unless its env sets them)
check "env shows names, not values" [ "$(field 'sorted(j["env"])')" = "['CURL_CA_BUNDLE', 'EMPTY', 'GREETING', 'NODE_EXTRA_CA_CERTS', 'REQUESTS_CA_BUNDLE', 'SSL_CERT_FILE']" ]
req POST /v1/sandboxes/a1/exec '{"shell":"echo $GREETING-$EMPTY-$OTHER"}'
check "processes start with the sandbox's env" [ "$(decode_stdout)" = "hello--" ]
req POST /v1/sandboxes/a1/exec '{"shell":"echo $GREETING","env":{"GREETING":"override"}}'
check "an exec's env wins over the sandbox's" [ "$(decode_stdout)" = "override" ]
req POST /v1/sandboxes '{"env":{"1BAD":"x"}}'
check "a bad env name is 400" eval '[ "$code" = 400 ] && grep -q "'\''env'\''" "$T/body"'
req POST /v1/sandboxes '{"labels":{"team":"Not A Name"}}'
check "a label value that is not a name is 400" [ "$code" = 400 ]
req POST /v1/sandboxes '{"metadata":{"k":1}}'
check "a metadata value that is not a string is 400" [ "$code" = 400 ]
req POST /v1/sandboxes "{\"metadata\":{$(python3 -c 'print(",".join("\"k%d\":\"v\"" % i for i in range(65)))')}}"
check "more than 64 metadata entries is 400" [ "$code" = 400 ]

# the pool: a plain create is served from it; one with limits is not
hits0=$(metric 'glovebox_pool_takes_total{result="hit"}')
req POST /v1/sandboxes '{"labels":{"team":"b"}}'
check "a plain create succeeds" [ "$code" = 201 ]
pooled_id=$(field 'j["id"]')
check "and is served from the pool" [ "$(metric 'glovebox_pool_takes_total{result="hit"}')" = $((hits0 + 1)) ]
req POST /v1/sandboxes/$pooled_id/exec '{"shell":"echo $((6 * 7)) > /tmp/x; cat /tmp/x; hostname"}'
check "a pooled sandbox works" [ "$(decode_stdout | head -n 1)" = 42 ]
req POST /v1/sandboxes '{"id":"b2","memory":"64M","labels":{"team":"b"}}'
check "a create with its own limits" eval '[ "$code" = 201 ] && [ "$(field '\''j["limits"]["memory"]'\'')" = 67108864 ]'
check "is not served from the pool" [ "$(metric 'glovebox_pool_takes_total{result="hit"}')" = $((hits0 + 1)) ]
for i in $(seq 100); do [ "$(metric 'glovebox_sandboxes{state="pooled"}')" = 2 ] && break; sleep 0.05; done
check "the pool refills" [ "$(metric 'glovebox_sandboxes{state="pooled"}')" = 2 ]
req GET /v1/sandboxes
check "pooled sandboxes are not listed" [ "$(field 'len(j["sandboxes"])')" = 3 ]
# a pooled sandbox whose init dies is never handed out: taken out, made again
pooled_pids=$(python3 -c "
import sqlite3
print(' '.join(str(r[0]) for r in sqlite3.connect('$STATE/glovebox.db').execute(\"select init_pid from sandboxes where state = 'pooled'\")))")
check "two pooled inits" [ "$(echo $pooled_pids | wc -w)" = 2 ]
kill -9 $pooled_pids
req POST /v1/sandboxes '{}'
dead_pick=$(field 'j["id"]')
check "a create after the pool's inits died: 201" [ "$code" = 201 ]
req POST "/v1/sandboxes/$dead_pick/exec" '{"shell":"echo alive"}'
check "and its sandbox works" [ "$(decode_stdout | head -n 1)" = alive ]
check "the dead pooled sandboxes were removed, saying so" \
    [ "$(grep -c "pooled sandbox '.*' is gone: its init died" "$T/daemon.log")" = 2 ]
for i in $(seq 100); do [ "$(metric 'glovebox_sandboxes{state="pooled"}')" = 2 ] && break; sleep 0.05; done
check "and the pool is made again" [ "$(metric 'glovebox_sandboxes{state="pooled"}')" = 2 ]
req DELETE "/v1/sandboxes/$dead_pick"

# idempotency: a retried create returns the first sandbox; a different body with the key is 409
req POST /v1/sandboxes '{"labels":{"team":"c"},"idempotency_key":"retry-1"}'
check "create with an idempotency key" [ "$code" = 201 ]
first=$(field 'j["id"]')
req POST /v1/sandboxes '{"labels":{"team":"c"}}' -H 'Idempotency-Key: retry-1'
got=$(field 'j["id"]')
check "the retry (header form) returns the same sandbox with 200" [ "$code:$got" = "200:$first" ]
req POST /v1/sandboxes '{"labels":{"team":"d"},"idempotency_key":"retry-1"}'
check "the key with a different request is 409" eval '[ "$code" = 409 ] && grep -q retry-1 "$T/body"'
# the request is compared as the create spec it parses to, not as the bytes that were sent
req POST /v1/sandboxes '{"memory":"64M","timeout":"2m","idempotency_key":"spelled"}'
spelled=$(field 'j["id"]')
req POST /v1/sandboxes '{"timeout":120,"memory":67108864,"idempotency_key":"spelled"}'
got=$(field 'j["id"]')
check "the same request spelled another way is the same retry (200, same sandbox)" \
    [ "$code:$got" = "200:$spelled" ]
req DELETE "/v1/sandboxes/$spelled"
req POST /v1/sandboxes '{"idempotency_key":"x"}' -H 'Idempotency-Key: y'
check "header and body keys that differ are 400" [ "$code" = 400 ]
req DELETE /v1/sandboxes/$first
req POST /v1/sandboxes '{"labels":{"team":"c"},"idempotency_key":"retry-1"}'
check "after a delete, the key makes a new sandbox" eval '[ "$code" = 201 ] && [ "$(field '\''j["id"]'\'')" != "$first" ]'

# lists: label filters (all must match), template filter, pagination with a cursor
req GET '/v1/sandboxes?label=team=b'
check "filter by a label" [ "$(field 'sorted(s["id"] for s in j["sandboxes"]) == sorted(["b2", "'$pooled_id'"])')" = True ]
req GET '/v1/sandboxes?label=team=a&label=tier=dev'
check "every label filter must match" [ "$(field '[s["id"] for s in j["sandboxes"]]')" = "['a1']" ]
req GET '/v1/sandboxes?label=team=a&label=tier=prod'
check "no match is an empty list" [ "$(field 'len(j["sandboxes"]), j["next_cursor"]')" = "0 None" ]
req GET '/v1/sandboxes?template=host'
check "filter by template" [ "$(field 'len(j["sandboxes"])')" = 4 ]
for i in 1 2 3 4 5 6; do req POST /v1/sandboxes "{\"id\":\"p$i\",\"labels\":{\"page\":\"yes\"}}"; done
req GET '/v1/sandboxes?label=page=yes&limit=4'
check "a page holds limit items, newest first" [ "$(field '[s["id"] for s in j["sandboxes"]]')" = "['p6', 'p5', 'p4', 'p3']" ]
cursor=$(field 'j["next_cursor"]')
req GET "/v1/sandboxes?label=page=yes&limit=4&cursor=$cursor"
check "the cursor gives the rest" [ "$(field '[s["id"] for s in j["sandboxes"]], j["next_cursor"]')" = "['p2', 'p1'] None" ]
req GET '/v1/sandboxes?limit=0'
check "limit 0 is 400" [ "$code" = 400 ]
req GET '/v1/sandboxes?cursor=garbage'
check "a made-up cursor is 400" [ "$code" = 400 ]
req GET '/v1/sandboxes?colour=red'
check "an unknown parameter is 400, named" eval '[ "$code" = 400 ] && grep -q colour "$T/body"'
req GET '/v1/sandboxes?label=nokey'
check "a label filter without '=' is 400" [ "$code" = 400 ]

# per-request metrics and log lines
req GET /metrics
check "request latency by route, method and status" \
    grep -q 'glovebox_http_request_duration_seconds_count{route="/v1/sandboxes",method="POST",status="201"}' "$T/body"
check "routes are templates, not raw paths" \
    grep -q 'route="/v1/sandboxes/{id}/exec",method="POST",status="200"' "$T/body"
check "exec start latency is a histogram" \
    [ "$(awk '$1 == "glovebox_exec_start_seconds_count" {print $2}' "$T/body")" -ge 2 ]
check "no raw sandbox id in a route label" [ -z "$(grep -o 'route="[^"]*a1[^"]*"' "$T/body")" ]
check "one structured log line per request" \
    grep -q '"msg":"request","method":"GET","path":"/v1/sandboxes?colour=red","status":400,"ms":' "$T/daemon.log"

# stopping destroys the pool's sandboxes (they are nobody's)
kill -TERM "$DPID"; wait "$DPID"; DPID=
check "no pooled row is left behind" [ "$(python3 -c "
import sqlite3
print(sqlite3.connect('$STATE/glovebox.db').execute(\"select count(*) from sandboxes where state = 'pooled'\").fetchone()[0])")" = 0 ]
spec_check
summary
