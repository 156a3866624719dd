#!/bin/sh
# test-timeout: 240
# GET /v1/audit and `glovebox audit log` (issue 16 #8): the admin reads every record, an API
# key its own and those about its sandboxes, never another key's; each filter narrows to the
# records it names; after/limit pages through every record exactly once; bad query input is
# a 400; no key and a revoked key get 401; the CLI prints JSON lines and -f follows new
# records until SIGINT, exiting 0.
NAME=audit
. "$(dirname "$0")/../lib/daemon.sh"
command -v python3 >/dev/null || { echo "skip: python3 not installed"; exit 77; }
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
U="http://127.0.0.1:$PORT"
start_daemon --listen "127.0.0.1:$PORT"

# tcp KEY METHOD PATH [BODY]: as req, over TCP with an API key
tcp() {
    key=$1; m=$2; p=$3; shift 3
    code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $key" \
        -X "$m" ${1:+--data-binary "$1"} "$U$p")
    record "$m" "$p"
}
# py EXPR: a Python expression over the last body's records (rs) and the body (j)
py() { python3 -c "import json; j = json.load(open('$T/body')); rs = j.get('records', []); print($1)"; }

A=$("$GB" apikey create team-a 2>/dev/null)
B=$("$GB" apikey create team-b 2>/dev/null)
R=$("$GB" apikey create team-r 2>/dev/null)
"$GB" apikey revoke team-r >/dev/null 2>&1
check "three keys, one revoked" eval '[ -n "$A" ] && [ -n "$B" ] && [ -n "$R" ]'

tcp "$A" POST /v1/sandboxes '{"id":"au-a"}'
check "A creates au-a" [ "$code" = 201 ]
tcp "$B" POST /v1/sandboxes '{"id":"au-b"}'
check "B creates au-b" [ "$code" = 201 ]
req POST /v1/sandboxes '{"id":"au-adm"}'
check "the admin creates au-adm" [ "$code" = 201 ]
tcp "$A" POST /v1/sandboxes/au-a/exec '{"cmd":["/bin/true"],"wait":true}'
check "A execs in au-a" [ "$code" = 200 ]
req POST /v1/sandboxes/au-a/timeout '{"timeout":3600}'
check "the admin moves au-a's timeout" [ "$code" = 200 ]
tcp "$A" POST /v1/sessions '{}'
ses=$(py "j['id']")
check "A makes a session" eval '[ "$code" = 201 ] && [ -n "$ses" ]'
tcp "$A" DELETE "/v1/sessions/$ses"
check "and deletes it" [ "$code" = 204 ]
settle

req GET '/v1/audit?limit=1000'
check "the admin reads the log: 200" [ "$code" = 200 ]
cp "$T/body" "$T/all.json"
check "the admin sees every actor's records" \
    [ "$(py "sorted({r['actor'] for r in rs} & {'team-a', 'team-b', 'admin'})")" = "['admin', 'team-a', 'team-b']" ]
check "the admin sees the three creates" \
    [ "$(py "sorted(r['sandbox'] for r in rs if r['kind'] == 'sandbox.create' and r['sandbox'].startswith('au-'))")" = "['au-a', 'au-adm', 'au-b']" ]
check "records carry seq, time, an object detail and a hash" \
    [ "$(py "all(isinstance(r['seq'], int) and r['time'].endswith('Z') and isinstance(r['detail'], dict) and len(r['hash']) == 64 for r in rs) and len(rs) > 5")" = True ]
check "next_after is the last record's seq" [ "$(py "j['next_after'] == rs[-1]['seq']")" = True ]
tmo=$(py "[r['kind'] for r in rs if r['sandbox'] == 'au-a' and r['actor'] == 'admin'][0]")
check "the admin's record about au-a is there ($tmo)" [ -n "$tmo" ]

tcp "$A" GET '/v1/audit?limit=1000'
check "A reads the log: 200" [ "$code" = 200 ]
check "A sees only its own records and those about its sandboxes" \
    [ "$(py "all(r['actor'] == 'team-a' or r['sandbox'] == 'au-a' for r in rs) and len(rs) > 0")" = True ]
check "A sees its create, its exec, its session and the admin's $tmo of au-a" \
    [ "$(py "({r['kind'] for r in rs} >= {'sandbox.create', 'exec.start', 'session.create', 'session.delete', '$tmo'} and [r['sandbox'] for r in rs if r['kind'] == 'sandbox.create'].count('au-a') == 1)")" = True ]
check "A sees none of B's or the admin's own" sh -c "! grep -q -e au-b -e au-adm -e team-b '$T/body'"
tcp "$B" GET '/v1/audit?limit=1000'
check "B sees its create and nothing of A's" \
    [ "$(py "[r['sandbox'] for r in rs if r['kind'] == 'sandbox.create'] == ['au-b'] and all(r['actor'] == 'team-b' or r['sandbox'] == 'au-b' for r in rs)")" = True ]
check "B's view names neither au-a nor A's session" sh -c "! grep -q -e au-a -e '$ses' -e team-a '$T/body'"
tcp "$B" GET '/v1/audit?sandbox=au-a'
check "B asking for au-a's records gets none" eval '[ "$code" = 200 ] && [ "$(py "len(rs)")" = 0 ]'
code=$(curl -s -o "$T/body" -w '%{http_code}' "$U/v1/audit")
check "no key: 401" [ "$code" = 401 ]
tcp "$R" GET /v1/audit
check "a revoked key: 401" [ "$code" = 401 ]

# filters, each against the admin's whole list
want() { python3 -c "import json; rs = json.load(open('$T/all.json'))['records']; print([r['seq'] for r in rs if $1])"; }
got() { py "[r['seq'] for r in rs]"; }
req GET '/v1/audit?sandbox=au-a&limit=1000'
check "sandbox=au-a: exactly au-a's records" eval '[ "$(got)" = "$(want "r['\''sandbox'\''] == '\''au-a'\''")" ] && [ "$(py "rs[0]['\''kind'\'']")" = sandbox.create ]'
req GET '/v1/audit?key=team-b&limit=1000'
check "key=team-b: exactly B's records" eval '[ "$(got)" = "$(want "r['\''actor'\''] == '\''team-b'\''")" ] && [ "$(py "[r['\''sandbox'\''] for r in rs if r['\''kind'\''] == '\''sandbox.create'\'']")" = "['\''au-b'\'']" ]'
req GET '/v1/audit?kind=sandbox.create&limit=1000'
check "kind=sandbox.create: exactly the creates" eval '[ "$(got)" = "$(want "r['\''kind'\''] == '\''sandbox.create'\''")" ] && [ "$(py "len(rs) >= 3")" = True ]'
req GET '/v1/audit?kind=sandbox.&limit=1000'
check "kind is exact without a '*'" eval '[ "$code" = 200 ] && [ "$(py "len(rs)")" = 0 ]'
req GET '/v1/audit?kind=exec.*&limit=1000'
check "kind=exec.*: exactly the exec records" eval '[ "$(got)" = "$(want "r['\''kind'\''].startswith('\''exec.'\'')")" ] && [ "$(py "len(rs) > 0")" = True ]'
req GET "/v1/audit?session=$ses&limit=1000"
check "session=ID: its create, its delete and its sandbox's delete" \
    [ "$(py "[r['kind'] for r in rs]")" = "['session.create', 'session.delete', 'sandbox.delete']" ]
tcp "$A" GET "/v1/audit?kind=sandbox.create&sandbox=au-a"
check "A's filters combine with its view" [ "$(py "[(r['kind'], r['sandbox']) for r in rs]")" = "[('sandbox.create', 'au-a')]" ]
# time: records before a second boundary, then one made after it
sleep 1.1
mark=$(date +%s)
sleep 1.1
req POST /v1/sandboxes '{"id":"au-late"}'
settle
req GET "/v1/audit?since=$mark&limit=1000"
check "since=unix seconds: only what came after" \
    [ "$(py "sorted({r['sandbox'] for r in rs})")" = "['au-late']" ]
iso=$(date -u -d "@$mark" +%Y-%m-%dT%H:%M:%SZ)
req GET "/v1/audit?until=$iso&limit=1000"
check "until=RFC 3339: only what came before" \
    eval '[ "$code" = 200 ] && [ "$(py "len(rs) > 5 and all(r['\''sandbox'\''] != '\''au-late'\'' for r in rs)")" = True ]'
req GET "/v1/audit?since=$iso&kind=sandbox.create"
check "since=RFC 3339 with kind: the one create" [ "$(py "[r['sandbox'] for r in rs]")" = "['au-late']" ]

# paging: limit 2 with the after cursor, every record once
req GET '/v1/audit?limit=1000'
cp "$T/body" "$T/all.json"
after=0; : > "$T/pages"
for i in $(seq 200); do
    req GET "/v1/audit?after=$after&limit=2"
    n=$(py "len(rs)")
    [ "$n" = 0 ] && break
    py "'\n'.join(str(r['seq']) for r in rs)" >> "$T/pages"
    after=$(py "j['next_after']")
done
check "after/limit pages through every record exactly once" \
    [ "$(tr '\n' ' ' < "$T/pages")" = "$(python3 -c "import json; print(' '.join(str(r['seq']) for r in json.load(open('$T/all.json'))['records']) + ' ')")" ]
check "a page past the end is empty, next_after unchanged" [ "$(py "j['next_after']")" = "$after" ]

# bad input: 400, naming what is wrong
req GET '/v1/audit?bogus=1'
check "an unknown parameter: 400 naming it" eval '[ "$code" = 400 ] && grep -q "bogus" "$T/body"'
req GET '/v1/audit?since=yesterday'
check "a time that is not one: 400" eval '[ "$code" = 400 ] && grep -q "since" "$T/body" && grep -q "RFC 3339" "$T/body"'
req GET '/v1/audit?until=2026-12-03T19:00:00'
check "an RFC 3339 time without a zone: 400" [ "$code" = 400 ]
req GET '/v1/audit?limit=0'
check "limit=0: 400" eval '[ "$code" = 400 ] && grep -q "limit" "$T/body"'
req GET '/v1/audit?limit=1001'
check "limit=1001: 400" [ "$code" = 400 ]
req GET '/v1/audit?after=-1'
check "a negative cursor: 400" [ "$code" = 400 ]
req GET "/v1/audit?since=$mark&until=$mark"
check "until not after since: 400" [ "$code" = 400 ]
req POST /v1/audit '{}'
check "POST: 405" [ "$code" = 405 ]

# the CLI
"$GB" audit log --json --sandbox au-a > "$T/cli.json"
check "audit log --json: au-a's records, one JSON object a line" \
    python3 -c "import json, sys; rs = [json.loads(l) for l in open('$T/cli.json')]; sys.exit(not (rs and all(r['sandbox'] == 'au-a' for r in rs) and rs[0]['kind'] == 'sandbox.create'))"
"$GB" audit log --kind 'sandbox.*' --limit 3 > "$T/cli.txt"
check "audit log: one line a record, --limit bounds them" \
    eval '[ "$(wc -l < "$T/cli.txt")" = 3 ] && grep -q "sandbox.create" "$T/cli.txt"'
check "the human line names time, actor, kind and sandbox" \
    grep -qE '^20[0-9-]+T[0-9:.]+Z +team-a +sandbox.create +au-a' "$T/cli.txt"
"$GB" audit log --since yesterday > /dev/null 2> "$T/cli.err"
rc=$?
check "audit log with a bad time fails with the daemon's message" eval '[ $rc = 1 ] && grep -q since "$T/cli.err"'
"$GB" audit log --help > /dev/null
check "audit log --help: 0" [ $? = 0 ]
"$GB" audit --help > "$T/help"
check "audit --help documents log and verify" eval 'grep -q "audit log" "$T/help" && grep -q "audit verify" "$T/help"'
"$GB" audit log -f --json --kind sandbox.create > "$T/follow" 2> "$T/follow.err" &
FPID=$!
sleep 1
req POST /v1/sandboxes '{"id":"au-follow"}'
sleep 2
kill -INT "$FPID"
wait "$FPID"
rc=$?
check "audit log -f: SIGINT ends it with 0" [ $rc = 0 ]
check "audit log -f printed the earlier creates and the new one" \
    python3 -c "import json, sys; ids = [json.loads(l)['sandbox'] for l in open('$T/follow')]; sys.exit(not ('au-a' in ids and ids[-1] == 'au-follow' and ids.count('au-follow') == 1))"
[ -s "$T/follow.err" ] && sed 's/^/# follow stderr: /' "$T/follow.err"

spec_check
summary
