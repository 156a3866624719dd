#!/bin/sh
# The store busy: another process holds an exclusive transaction on the daemon's database,
# first for less than the daemon's busy timeout (5 s), then for longer. Requests that write
# meanwhile wait and succeed or fail with a clear error, each within curl's --max-time (none
# hangs); the daemon stays up; afterwards everything works, every acknowledged write is
# there, and the audit chain verifies.
NAME=fbusy
. "$(dirname "$0")/../lib/daemon.sh"
. "$(dirname "$0")/lib.sh"

# hold_lock SECONDS: BEGIN EXCLUSIVE on the daemon's database in another process, for SECONDS
hold_lock() {
    rm -f "$T/locked"
    python3 -c "
import sqlite3, sys, time
c = sqlite3.connect('$STATE/glovebox.db', isolation_level=None, timeout=10)
c.execute('BEGIN EXCLUSIVE')
open('$T/locked', 'w').close()
time.sleep(float(sys.argv[1]))
c.execute('COMMIT')" "$1" &
    LOCKER=$!
    for i in $(seq 100); do [ -e "$T/locked" ] && break; sleep 0.05; done
    [ -e "$T/locked" ]
}
# bg NAME METHOD PATH [BODY]: a request in the background, bounded; its answer in $T/NAME
bg() {
    n=$1; m=$2; p=$3; shift 3
    curl -s --max-time 30 -o "$T/$n.body" -w '%{http_code}' --unix-socket "$S" -X "$m" \
        -H 'Content-Type: application/json' ${1+--data-binary "$1"} "http://glovebox$p" \
        > "$T/$n.code" 2>/dev/null &
    echo $! >> "$T/bgpids"
}
bg_wait() { for p in $(cat "$T/bgpids"); do wait "$p"; done; : > "$T/bgpids"; }
# done_or_clear NAME OKCODE: answered in time, with OKCODE or an error that says the store
# was busy (not a bare 500)
done_or_clear() {
    c=$(cat "$T/$1.code")
    echo "# $1 while the store was locked: $c $(head -c 240 "$T/$1.body")"
    [ "$c" = "$2" ] && return 0
    [ "$c" != 000 ] && grep -qiE 'locked|busy' "$T/$1.body"
}
healthy() {
    [ "$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ]
}
: > "$T/bgpids"
: > "$T/acked"

restart
new_sandbox
A=$SB
sh_in "$A" 'echo kept > /home/user/f'
req POST /v1/sessions '{}'
SES=$(field "j['id']")

for secs in 3 8; do
    lbl="locked ${secs} s"
    check "$lbl: another process holds the database" hold_lock "$secs"
    bg create POST /v1/sandboxes '{}'
    bg snapshot POST "/v1/sandboxes/$A/snapshots" "{\"name\":\"s$secs\"}"
    bg artifact POST "/v1/sandboxes/$A/artifacts" "{\"path\":\"/home/user/f\",\"name\":\"a$secs\"}"
    bg pause POST "/v1/sandboxes/$A/pause" '{}'
    curl -s --max-time 30 -o "$T/call.body" -w '%{http_code}' --unix-socket "$S" -X POST \
        -H 'Content-Type: application/json' \
        --data-binary "{\"tool_use_id\":\"t$secs\",\"name\":\"bash\",\"input\":{\"command\":\"echo $secs >> runs\"}}" \
        "http://glovebox/v1/sessions/$SES/execute" > "$T/call.code" &
    echo $! >> "$T/bgpids"
    t0=$(date +%s%N)
    check "$lbl: the daemon answers /healthz meanwhile (within 30 s)" healthy
    echo "# /healthz answered in $(( ($(date +%s%N) - t0) / 1000000 )) ms while the store was locked"
    bg_wait
    check "$lbl: a create succeeds or fails clearly, in time" done_or_clear create 201
    check "$lbl: a snapshot succeeds or fails clearly, in time" done_or_clear snapshot 201
    check "$lbl: an artifact publish succeeds or fails clearly, in time" done_or_clear artifact 201
    check "$lbl: a pause succeeds or fails clearly, in time" done_or_clear pause 200
    check "$lbl: a session call succeeds or fails clearly, in time" done_or_clear call 200
    wait "$LOCKER"
    for n in create snapshot artifact call; do
        [ "$(cat "$T/$n.code")" = 201 ] || [ "$(cat "$T/$n.code")" = 200 ] && echo "$n $secs" >> "$T/acked"
    done
    if [ "$(cat "$T/create.code")" = 201 ]; then
        python3 -c "import json; j = json.load(open('$T/create.body')); print(j['id'], j['host_uid'])" > "$T/created"
        read -r cid cuid < "$T/created"
        echo "$cuid" >> "$T/uids"
        echo "$cid" >> "$T/created-ids"
    fi
    req POST "/v1/sandboxes/$A/resume" '{}'
    check "$lbl: the daemon is up after it" healthy
    sh_in "$A" 'cat /home/user/f'
    check "$lbl: the sandbox works after it" eval "[ '$code' = 200 ] && [ '$out' = kept ]"
    invariants "$lbl"
done

# every acknowledged write is there
req GET /v1/sandboxes
for id in $(cat "$T/created-ids" 2>/dev/null); do
    check "a sandbox whose create was acknowledged is listed ($id)" \
        eval "[ \"\$(field \"'$id' in [s['id'] for s in j['sandboxes']]\")\" = True ]"
    check "and its create is audited" \
        [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'sandbox.create' and sandbox = '$id'\").fetchone()[0])")" = 1 ]
done
req GET /v1/snapshots
for s in 3 8; do
    grep -q "^snapshot $s$" "$T/acked" &&
        check "the snapshot acknowledged while locked $s s is listed" \
            eval "[ \"\$(field \"'s$s' in [x['name'] for x in j['snapshots']]\")\" = True ]"
done
req GET /v1/artifacts
for s in 3 8; do
    grep -q "^artifact $s$" "$T/acked" &&
        check "the artifact acknowledged while locked $s s is listed" \
            eval "[ \"\$(field \"'a$s' in [x['name'] for x in j['artifacts']]\")\" = True ]"
done
runs_of() { execute "$1" 'cat runs'; text | grep -c "^$2$"; }
for s in 3 8; do
    grep -q "^call $s$" "$T/acked" &&
        check "the call acknowledged while locked $s s ran once" [ "$(runs_of "t9$s" "$s")" = 1 ]
    execute "t$s" "echo $s >> runs"
    check "a retry of the call made while locked $s s is answered" [ "$code" = 200 ]
    check "and the call ran exactly once" [ "$(runs_of "t10$s" "$s")" = 1 ]
done

# and everything works again
new_sandbox
check "after the locks: a create works" [ "$code" = 201 ]
req POST "/v1/sandboxes/$A/snapshots" '{"name":"after"}'
check "after the locks: a snapshot works" [ "$code" = 201 ]
req POST "/v1/sandboxes/$A/artifacts" '{"path":"/home/user/f","name":"after"}'
check "after the locks: an artifact publish works" [ "$code" = 201 ]
invariants "after the locks"
spec_check
finish
