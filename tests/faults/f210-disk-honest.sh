#!/bin/sh
# The state disk short and then full (a 32 MiB tmpfs of the test's): an acknowledged call is
# a recorded call, and space can always be freed through the API.
#  - short (free space below --state-reserve, but some left): creates, execs, session calls,
#    snapshots, publishes, uploads and template imports are refused with 507 (kind storage,
#    the state dir and its free bytes named) before anything runs or is recorded;
#  - full to the last byte while a process runs: its exit is not acknowledged as a success
#    unless its exec.end record is in the audit log;
#  - full: artifact rm, snapshot, session and sandbox deletes succeed (the reserve file is
#    given up for them), their audit rows are written, and they free space;
#  - space freed: everything works again, the reserve file is back, every call that was
#    answered 200 has its records (exec.end rows, tool.call and tool.result events) and the
#    audit chain verifies.
NAME=fhonest
. "$(dirname "$0")/../lib/daemon.sh"
state_on_tmpfs 32m
. "$(dirname "$0")/lib.sh"

avail() { df --output=avail -B1 "$FS" | tail -n 1 | tr -d ' '; }
# short: leave 96 KiB free (below the reserve: 1% of 32 MiB), full: nothing
short() { rm -f "$FS/filler"; fallocate -l $(($(avail) - 98304)) "$FS/filler" && [ "$(avail)" -lt 200000 ]; }
fill() { dd if=/dev/zero of="$FS/filler2" bs=4k 2>/dev/null; sync; [ "$(avail)" -lt 4096 ]; }
unfill() { rm -f "$FS/filler" "$FS/filler2"; }
metric() { curl -s --max-time 10 --unix-socket "$S" http://glovebox/metrics | awk -v m="$1" '$1 == m {print $2}'; }
rows() { q "print(c.execute(\"select count(*) from audit where sandbox = '$1' and kind = '$2'\").fetchone()[0])"; }
events() { # events TOOL_USE_ID: the types of session $SES's events for that call
    curl -s --max-time 10 --unix-socket "$S" "http://glovebox/v1/sessions/$SES/events" |
        python3 -c "
import json, sys
for line in sys.stdin:
    line = line.strip()
    if not line: continue
    j = json.loads(line)
    for e in (j.get('events') if isinstance(j, dict) and 'events' in j else [j]):
        if e.get('tool_use_id') == sys.argv[1]: print(e['type'])" "$1" | sort | tr '\n' ' '
}
# refused LABEL: the last answer is the admission's 507, naming the state dir and its free bytes
refused() {
    echo "# $1: $code $(head -c 400 "$T/body")"
    check "$1 on a short disk: refused, 507 kind storage, saying the disk is full" eval \
        "[ '$code' = 507 ] && grep -q '\"kind\":\"storage\"' '$T/body' && grep -q 'disk is full' '$T/body'"
    check "$1 on a short disk: the error names the state dir and its free bytes (below the reserve)" \
        python3 -c "
import json
e = json.load(open('$T/body'))['error']
assert e['state_dir'] == '$STATE', e
assert 0 <= e['free_bytes'] < e['reserve_bytes'], e"
}
ACK=0 # execs of sandbox A answered 200
exec_a() { sh_in "$A" "$1"; [ "$code" = 200 ] && ACK=$((ACK + 1)); }

restart
new_sandbox
A=$SB
exec_a 'head -c 300000 /dev/urandom > /tmp/art; echo kept > /home/user/f'
check "an exec before the disk fills" [ "$code" = 200 ]
check "the daemon keeps a reserve file in the state dir" [ -f "$STATE/reserve" ]
check "and says so in its metrics" [ "$(metric glovebox_state_reserve_file)" = 1 ]
req POST "/v1/sandboxes/$A/snapshots" '{"name":"s1"}'
SNAP=$(field "j['id']")
req POST "/v1/sandboxes/$A/artifacts" '{"path":"/tmp/art","name":"big"}'
ART=$(field "j['id']")
check "an artifact before the disk fills" [ "$code" = 201 ]
req POST /v1/sessions '{}'
SES=$(field "j['id']")
req POST /v1/sessions '{}'
SES2=$(field "j['id']")
execute tu-1 'echo one >> runs; wc -l < runs'
check "a session call before the disk fills" eval "[ '$code' = 200 ] && [ \"\$(text)\" = 1 ]"
new_sandbox
B=$SB

# ---- short ---------------------------------------------------------------------------------
check "the state dir's file system is short (below the reserve, not full)" short
settle
STARTS=$(rows "$A" exec.start)
req POST /v1/sandboxes '{}'
refused "a create"
sh_in "$A" 'echo ran >> /home/user/short'
refused "an exec"
check "and it did not run (no exec.start record)" [ "$(rows "$A" exec.start)" = "$STARTS" ]
execute tu-2 'echo two >> runs; wc -l < runs'
refused "a session call"
check "and it was not recorded (no tool.call)" [ -z "$(events tu-2)" ]
req POST "/v1/sandboxes/$A/snapshots" '{"name":"short"}'
refused "a snapshot"
req POST "/v1/sandboxes/$A/artifacts" '{"path":"/tmp/art","name":"short"}'
refused "an artifact publish"
code=$(curl -s --max-time 30 -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X PUT \
    --data-binary @/etc/hostname "http://glovebox/v1/sandboxes/$A/files?path=/tmp/up")
refused "a file upload"
req POST /v1/templates '{"name":"imp","source":"debootstrap"}'
refused "a template import"
req POST /v1/sessions '{}'
refused "a session create"
check "refusals are counted" eval "[ \"\$(metric glovebox_state_refused_total)\" -ge 8 ]"
check "reads still work on a short disk" eval "req GET /v1/sandboxes/$A; [ \$code = 200 ]"
check "the daemon answers /healthz" eval "req GET /healthz; [ \$code = 200 ]"

# ---- full while a process runs: its exit is acknowledged only if it is recorded ----------
unfill
# (in the background: its answer lands in $T/late.* once the process exits)
( code=$(curl -s --max-time 60 -o "$T/late.body" -w '%{http_code}' --unix-socket "$S" -X POST \
    -H 'Content-Type: application/json' \
    --data-binary '{"shell":"read x; echo got $x","stdin":true,"wait":true}' \
    "http://glovebox/v1/sandboxes/$A/exec"); echo "$code" > "$T/late.code" ) &
LATE=$!
wait_proc() {
    for i in $(seq 100); do
        req GET "/v1/sandboxes/$A/processes"
        P=$(field "[p['process'] for p in j['processes'] if 'read x' in json.dumps(p)][-1]" 2>/dev/null)
        [ -n "$P" ] && return 0
        sleep 0.1
    done
    return 1
}
check "the process waits for its stdin" wait_proc
check "the state dir's file system is full to the last byte" fill
printf 'go\n' > "$T/go"
curl -s --max-time 10 -o /dev/null --unix-socket "$S" -X POST --data-binary @"$T/go" \
    "http://glovebox/v1/sandboxes/$A/processes/$P/stdin"
curl -s --max-time 10 -o /dev/null --unix-socket "$S" -X POST \
    "http://glovebox/v1/sandboxes/$A/processes/$P/close-stdin"
wait $LATE
LC=$(cat "$T/late.code" 2>/dev/null)
echo "# the exec that ended on a full disk: $LC $(head -c 300 "$T/late.body")"
settle
ENDS_LATE=$(q "print(sum(1 for (d,) in c.execute(\"select detail from audit where sandbox = '$A' and kind = 'exec.end'\") if json.loads(d).get('process') == $P))")
if [ "$LC" = 200 ]; then
    check "its exit was answered 200: its exec.end record is in the audit log" [ "$ENDS_LATE" = 1 ]
    ACK=$((ACK + 1))
else
    check "its exit could not be recorded: the answer says so (not 200)" eval \
        "[ '$LC' = 507 ] || [ '$LC' = 500 ]; grep -q 'could not be written' '$T/late.body'"
    check "and its exec.end record is indeed missing" [ "$ENDS_LATE" = 0 ]
fi

# ---- full: deletes work and free space ------------------------------------------------------
BEFORE=$(avail)
req DELETE "/v1/artifacts/$ART"
check "artifact rm on a full disk: 204" [ "$code" = 204 ]
check "it frees space ($BEFORE -> $(avail) bytes free)" [ "$(avail)" -gt "$BEFORE" ]
check "the reserve file was given up for it" eval "[ ! -e '$STATE/reserve' ] && [ \"\$(metric glovebox_state_reserve_released_total)\" -ge 1 ]"
check "and its audit row was written" [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'artifact.delete' and detail like '%$ART%'\").fetchone()[0])")" = 1 ]
# (what the first delete freed and the reserve held is room for the deletes after it)
req DELETE "/v1/snapshots/$SNAP"
check "snapshot delete on a full disk: 204" [ "$code" = 204 ]
req DELETE "/v1/sessions/$SES2"
check "session delete on a full disk: 204" [ "$code" = 204 ]
req GET "/v1/sessions/$SES2"
check "and it is gone" [ "$code" = 404 ]
BEFORE=$(avail)
req DELETE "/v1/sandboxes/$B"
check "sandbox delete on a full disk: 204" [ "$code" = 204 ]
req GET "/v1/sandboxes/$B"
check "and it is gone" [ "$code" = 404 ]
settle
check "its delete is in the audit log" [ "$(rows "$B" sandbox.delete)" -ge 1 ]
req POST /v1/sandboxes '{}'
check "a create on a full disk is still refused (507)" [ "$code" = 507 ]
check "the daemon is up and answers /healthz" eval "req GET /healthz; [ \$code = 200 ]"
invariants "disk full"

# ---- space freed -------------------------------------------------------------------------
unfill
new_sandbox
check "space freed: a create works (201)" [ "$code" = 201 ]
check "and the reserve file is back" eval "[ -f '$STATE/reserve' ] && [ \"\$(metric glovebox_state_reserve_file)\" = 1 ]"
exec_a 'cat /home/user/f'
check "space freed: an exec works" eval "[ '$code' = 200 ] && [ '$out' = kept ]"
execute tu-2 'echo two >> runs; wc -l < runs'
check "space freed: the session call works, and it had not run before" \
    eval "[ '$code' = 200 ] && [ \"\$(text)\" = 2 ]"
req POST "/v1/sandboxes/$A/snapshots" '{"name":"after"}'
check "space freed: a snapshot works (201)" [ "$code" = 201 ]
settle
check "every exec answered 200 has its exec.end record ($ACK)" [ "$(rows "$A" exec.end)" = "$ACK" ]
check "every session call answered 200 has its tool.call and tool.result (tu-1)" \
    [ "$(events tu-1)" = "tool.call tool.result " ]
check "every session call answered 200 has its tool.call and tool.result (tu-2)" \
    [ "$(events tu-2)" = "tool.call tool.result " ]
req GET "/v1/sessions/$SES/verify"
check "the session's log verifies" [ "$code" = 200 ]
invariants "space freed"
spec_check
finish
