#!/bin/sh
# The state directory's file system full (a 32 MiB tmpfs of the test's, filled up): creates,
# snapshots, artifact publishes and session calls fail with a clear error that says so (or
# succeed), nothing half-written remains (no row without its files, no files without their
# row), the daemon stays up and answers /healthz; once space is freed the same operations
# succeed and the invariants hold.
NAME=fdisk
. "$(dirname "$0")/../lib/daemon.sh"
state_on_tmpfs 32m
. "$(dirname "$0")/lib.sh"

fill() { # the file system full: a filler file as large as it will go
    dd if=/dev/zero of="$FS/filler" bs=64k 2>/dev/null
    sync
    [ "$(df --output=avail "$FS" | tail -n 1)" -lt 64 ]
}
unfill() { rm -f "$FS/filler"; }
healthy() {
    [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ]
}
# said_full: the last answer is an error that says the disk is full (and is not a bare 500)
said_full() {
    grep -qiE 'no space|disk is full|needs about [0-9]+ MiB in .*free' "$T/body" &&
        python3 -c "import json; j = json.load(open('$T/body')); assert j.get('error') or j.get('message')" 2>/dev/null
}
# full_or_ok LABEL OKCODE: the operation worked, or failed saying the disk is full
full_or_ok() {
    echo "# $1 with the disk full: $code $(head -c 300 "$T/body")"
    if [ "$code" = "$2" ]; then ok "$1 with the disk full: done ($code)"; return; fi
    check "$1 with the disk full: a clear error ($code), saying the disk is full" said_full
    check "$1 with the disk full: 507, kind storage (not a limit a client retries, not a 500)" \
        eval "[ '$code' = 507 ] && grep -q '\"kind\":\"storage\"' '$T/body'"
}

restart
hibernate_capability
new_sandbox
A=$SB
sh_in "$A" 'echo kept > /home/user/f; head -c 2000000 /dev/urandom > /home/user/big; head -c 300000 /dev/urandom > /tmp/art'
req POST "/v1/sandboxes/$A/snapshots" '{"name":"before"}'
check "a snapshot before the disk fills (201)" [ "$code" = 201 ]
req POST "/v1/sandboxes/$A/artifacts" '{"path":"/home/user/f","name":"before"}'
check "an artifact before the disk fills (201)" [ "$code" = 201 ]
req POST /v1/sessions '{}'
SES=$(field "j['id']")
execute tu-1 'echo one >> runs; wc -l < runs'
check "a session call before the disk fills" eval "[ '$code' = 200 ] && [ \"\$(text)\" = 1 ]"

check "the state dir's file system is full" fill
req POST "/v1/sandboxes/$A/snapshots" '{"name":"full"}'
full_or_ok "a snapshot" 201
req POST "/v1/sandboxes/$A/artifacts" '{"path":"/tmp/art","name":"full"}'
full_or_ok "an artifact publish" 201
execute tu-2 'echo two >> runs; wc -l < runs'
full_or_ok "a session call" 200
SESSION_CALL=$code
if [ "$CRIU_OK" = 1 ]; then
    req POST "/v1/sandboxes/$A/hibernate" '{}'
    full_or_ok "a hibernate" 200
    [ "$code" = 200 ] && req POST "/v1/sandboxes/$A/resume" '{}'
    # (an exec is new work too, refused while the disk is full: the sandbox's state says it)
    req GET "/v1/sandboxes/$A"
    check "the sandbox runs on" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = running ]"
fi
req POST /v1/sandboxes '{}'
full_or_ok "a create" 201
[ "$code" = 201 ] && echo "$(field "j['host_uid']")" >> "$T/uids"
check "the daemon is up and answers /healthz" healthy
invariants "disk full"

unfill
req POST "/v1/sandboxes/$A/snapshots" '{"name":"after"}'
check "space freed: a snapshot works (201)" [ "$code" = 201 ]
req POST "/v1/sandboxes/$A/artifacts" '{"path":"/tmp/art","name":"after"}'
check "space freed: an artifact publish works (201)" [ "$code" = 201 ]
execute tu-2 'echo two >> runs; wc -l < runs'
check "space freed: the session call works (on its retry)" [ "$code" = 200 ]
if [ "$SESSION_CALL" = 200 ]; then
    check "and it had been recorded: it is replayed" grep -qi '^Glovebox-Replayed: true' "$T/headers"
else
    check "and it had not run while it could not be recorded (it ran once)" [ "$(text)" = 2 ]
fi
if [ "$CRIU_OK" = 1 ]; then
    req POST "/v1/sandboxes/$A/hibernate" '{}'
    check "space freed: a hibernate works" [ "$code" = 200 ]
    req POST "/v1/sandboxes/$A/resume" '{}'
    sh_in "$A" 'cat /home/user/f'
    check "and the sandbox wakes" eval "[ '$code' = 200 ] && [ '$out' = kept ]"
fi
new_sandbox
check "space freed: a create works (201)" [ "$code" = 201 ]
req POST "/v1/sandboxes/$SB/exec" '{"cmd":["true"],"wait":true}'
check "and the new sandbox works" [ "$code" = 200 ]
req GET "/v1/sessions/$SES/verify"
check "the session's log verifies" [ "$code" = 200 ]
invariants "space freed"
spec_check
finish
