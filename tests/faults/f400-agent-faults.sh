#!/bin/sh
# The daemon's side of a sandbox going wrong under a request: its connection to the sandbox's
# init cut while an exec streams (agent.cut) ends the stream with a clear error, not a hang,
# and the sandbox works for the next call (the process runs on and can be attached to); a
# session call cut the same way is answered, and the next call works; a sandbox whose init is
# SIGKILLed mid-exec ends the stream with a clear error, is reported gone, and leaves nothing;
# a new sandbox whose HELLO is lost (create.hello, pool.hello) or never answered (create.silent,
# past --hello-timeout) is torn down and the create answers 503, or the warm pool retries; a
# daemon stopping while a create waits for HELLO stops at once and the create hears why.
NAME=fagent
. "$(dirname "$0")/../lib/daemon.sh"
. "$(dirname "$0")/lib.sh"

# stream ID BODY OUT: an exec whose events are streamed to OUT (bounded); $PID_CURL
stream() {
    curl -s -N --max-time 30 --unix-socket "$S" -X POST -H 'Content-Type: application/json' \
        --data-binary "$2" "http://glovebox/v1/sandboxes/$1/exec" > "$3" 2>/dev/null &
    PID_CURL=$!
}
# ended_with_error OUT WORDS: the stream's last event is an error whose message matches WORDS
ended_with_error() {
    python3 - "$1" "$2" <<'PY'
import json, re, sys
lines = [l for l in open(sys.argv[1]).read().splitlines() if l.strip()]
print('# last event: ' + (lines[-1][:200] if lines else '(none)'))
e = json.loads(lines[-1])
assert e['type'] == 'error' and re.search(sys.argv[2], e['message'], re.I), e
PY
}
# waited PID: the client's request ended by itself (its curl exited before --max-time)
waited() { wait "$1"; rc=$?; [ $rc -eq 0 ] || { echo "# curl exited with $rc"; return 1; }; }

# ---- an exec's connection cut mid-stream ---------------------------------------------------
fault_daemon agent.cut:fail
new_sandbox
A=$SB
stream "$A" '{"shell":"for i in $(seq 40); do echo tick $i; sleep 0.05; done; echo done > /tmp/ran"}' "$T/cut"
check "agent.cut: the stream ends by itself, not at curl's deadline" waited "$PID_CURL"
check "agent.cut: the fault acted" grep -q "fault: 'agent.cut': fail" "$LOG"
check "agent.cut: the stream's last event is a clear error" ended_with_error "$T/cut" 'cut|lost|connection'
PROC=$(head -n 1 "$T/cut" | python3 -c "import json, sys; print(json.load(sys.stdin).get('process', ''))" 2>/dev/null)
sh_in "$A" 'echo fine'
check "agent.cut: the sandbox works for the next call" eval "[ '$code' = 200 ] && [ '$out' = fine ]"
if [ -n "$PROC" ]; then
    curl -s -N --max-time 30 --unix-socket "$S" "http://glovebox/v1/sandboxes/$A/processes/$PROC/stream" > "$T/attached"
    check "agent.cut: the process it streamed ran on: attaching gets its exit" \
        eval "[ \"\$(tail -n 1 '$T/attached')\" = '{\"type\":\"exit\",\"exit_code\":0}' ]"
fi
sh_in "$A" 'cat /tmp/ran'
check "agent.cut: and it ran to its end" eval "[ '$out' = done ]"
invariants agent.cut
stop_daemon

# ---- a session call's connection cut ---------------------------------------------------------
fault_daemon agent.cut:fail
req POST /v1/sessions '{}'
SES=$(field "j['id']")
execute c-1 'for i in 1 2 3; do echo line $i; sleep 0.05; done; echo x >> runs'
echo "# the cut call: $code $(head -c 300 "$T/body")"
check "agent.cut, session: the cut call is answered (200 with is_error, or a clear error)" \
    eval "[ '$code' = 200 ] || grep -qiE 'cut|lost|connection' '$T/body'"
execute c-2 'echo fine'
check "agent.cut, session: the next call works" eval "[ '$code' = 200 ] && [ \"\$(text)\" = fine ]"
req GET "/v1/sessions/$SES/verify"
check "agent.cut, session: its log verifies" [ "$code" = 200 ]
invariants "agent.cut, session"
stop_daemon

# ---- a rollback whose new start fails: the sandbox is gone, and said to be ---------------------
fault_daemon rollback.start:fail
new_sandbox
req POST "/v1/sandboxes/$SB/snapshots" '{"name":"rb"}'
check "rollback.start: a snapshot to roll back to" [ "$code" = 201 ]
req POST "/v1/sandboxes/$SB/rollback" '{"snapshot":"rb"}'
echo "# the rollback: $code $(head -c 300 "$T/body")"
check "rollback.start: the rollback fails with a clear error" eval "[ '$code' = 500 ] && grep -q 'it is gone' '$T/body'"
req GET "/v1/sandboxes/$SB"
check "rollback.start: and it is true: the sandbox is gone" [ "$code" = 404 ]
check "rollback.start: its processes too" no_procs "$HUID"
settle
check "rollback.start: its end is audited" [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'sandbox.delete' and sandbox = '$SB' and detail like '%rollback failed%'\").fetchone()[0])")" = 1 ]
invariants rollback.start
new_sandbox
check "rollback.start: the next create works" [ "$code" = 201 ]
stop_daemon

# ---- the daemon stopping while a session call runs -------------------------------------------
fault_daemon ""
req POST /v1/sessions '{}'
SES=$(field "j['id']")
execute s-0 'echo ready'
curl -s --max-time 60 -o "$T/long" -w '%{http_code}' --unix-socket "$S" -X POST \
    -H 'Content-Type: application/json' -d '{"tool_use_id":"s-1","name":"bash","input":{"command":"sleep 20"}}' \
    "http://glovebox/v1/sessions/$SES/execute" > "$T/long.code" &
C=$!
sleep 0.5
stop_daemon
check "stop during a session call: the daemon stops cleanly" [ $rc = 0 ]
wait "$C"
echo "# the running call: $(cat "$T/long.code") $(head -c 300 "$T/long")"
check "stop during a session call: the call hears the daemon is stopping" eval "[ \"\$(cat '$T/long.code')\" = 503 ] && grep -q 'stopping' '$T/long'"

# ---- the sandbox's init SIGKILLed mid-exec -------------------------------------------------
restart
new_sandbox
B=$SB; BUID=$HUID
new_sandbox
C=$SB # a bystander
stream "$B" '{"shell":"while :; do echo x; sleep 0.05; done"}' "$T/killed"
for i in $(seq 50); do grep -q '"stdout"' "$T/killed" && break; sleep 0.1; done
BINIT=$(q "print(c.execute(\"select init_pid from sandboxes where id = '$B'\").fetchone()[0])")
check "init killed: its host pid is known ($BINIT), it runs as the sandbox's uid" \
    [ "$(stat -c %u "/proc/$BINIT" 2>/dev/null)" = "$BUID" ]
kill -9 "$BINIT"
check "init killed: the stream ends by itself, not at curl's deadline" waited "$PID_CURL"
check "init killed: the stream's last event is a clear error" ended_with_error "$T/killed" 'gone|died|lost|exit|killed|connection'
for i in $(seq 50); do [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' --unix-socket "$S" "http://glovebox/v1/sandboxes/$B")" = 404 ] && break; sleep 0.1; done
req GET "/v1/sandboxes/$B"
check "init killed: the sandbox is reported gone (404)" [ "$code" = 404 ]
check "init killed: the log says why" grep -q "sandbox '$B' is gone" "$LOG"
check "init killed: and the audit log" \
    [ "$(q "print(c.execute(\"select count(*) from audit where sandbox = '$B' and kind in ('sandbox.delete', 'sandbox.lost')\").fetchone()[0])")" -ge 1 ]
check "init killed: nothing of it runs" gone_uid "$BUID"
check "init killed: its runtime dir is gone" [ ! -e "$RUN/sandboxes/$B" ]
sh_in "$C" 'echo fine'
check "init killed: the daemon serves another sandbox" eval "[ '$code' = 200 ] && [ '$out' = fine ]"
invariants "init killed"
new_sandbox
check "init killed: a new sandbox can be made" [ "$code" = 201 ]
stop_daemon

# ---- a new sandbox's HELLO lost: the create's answer, and nothing left -----------------------
# (init's HELLO is awaited on the loop, with the event-driven client; create.hello loses it)
fault_daemon create.hello:fail
req GET /v1/sandboxes
before=$(field 'len(j["sandboxes"])')
req POST /v1/sandboxes '{}'
check "create.hello: the create is answered 503" [ "$code" = 503 ]
check "create.hello: and says why" grep -q 'agent hello' "$T/body"
req GET /v1/sandboxes
check "create.hello: no sandbox is listed for it" [ "$(field 'len(j["sandboxes"])')" = "$before" ]
check "create.hello: its runtime dir is gone" eval '[ -z "$(ls "$RUN/sandboxes" 2>/dev/null)" ]'
invariants create.hello
new_sandbox
check "create.hello: the next create works" [ "$code" = 201 ]
sh_in "$SB" 'echo fine'
check "create.hello: and its sandbox runs" eval "[ '$code' = 200 ] && [ '$out' = fine ]"
stop_daemon

# ---- a new sandbox's init that never answers HELLO: the deadline, then the same ---------------
# (create.silent hands the HELLO to a socket nobody answers; --hello-timeout 1s)
fault_daemon create.silent:fail --hello-timeout 1s
t0=$(date +%s%N)
req POST /v1/sandboxes '{}'
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "create.silent: the fault acted" grep -q "fault: 'create.silent': fail" "$LOG"
check "create.silent: the create is answered 503 at the deadline, not before (${ms} ms)" eval "[ '$code' = 503 ] && [ $ms -ge 900 ]"
check "create.silent: and says why" grep -qi 'hello' "$T/body"
echo "# $(head -c 300 "$T/body")"
invariants create.silent
new_sandbox
check "create.silent: the next create works" [ "$code" = 201 ]
stop_daemon

# ---- the daemon stopping while a create waits for HELLO -------------------------------------------
fault_daemon create.silent:fail --hello-timeout 60s
curl -s --max-time 90 -o "$T/waiting" -w '%{http_code}' --unix-socket "$S" -X POST -d '{}' \
    http://glovebox/v1/sandboxes > "$T/waiting.code" &
C=$!
for i in $(seq 100); do grep -q "fault: 'create.silent': fail" "$LOG" && break; sleep 0.05; done
check "shutdown during HELLO: the create is waiting for it" grep -q "fault: 'create.silent': fail" "$LOG"
t0=$(date +%s%N)
stop_daemon
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "shutdown during HELLO: the daemon stops at once, not at the 60 s deadline (${ms} ms)" eval "[ $rc = 0 ] && [ $ms -lt 10000 ]"
wait "$C"
check "shutdown during HELLO: the create hears the daemon is stopping" eval "[ \"\$(cat '$T/waiting.code')\" = 503 ] && grep -q 'stopping' '$T/waiting'"
check "shutdown during HELLO: its sandbox left nothing (no sandbox cgroup)" [ -z "$(cg_dirs)" ]

# ---- the same for the warm pool: it retries, and fills ----------------------------------------
fault_daemon pool.hello:fail --pool 1
pooled() { req GET /metrics; grep -q '^glovebox_sandboxes{state="pooled"} 1' "$T/body"; }
for i in $(seq 100); do pooled && break; sleep 0.1; done
check "pool.hello: the fault acted" grep -q "fault: 'pool.hello': fail" "$LOG"
check "pool.hello: the log says the pool retries" grep -q 'warm pool: .*agent hello.*retrying' "$LOG"
check "pool.hello: the pool fills on the next try" pooled
# the sandbox whose HELLO was lost is torn down: the pooled one is the only one there is
check "pool.hello: the lost one left nothing (one sandbox cgroup: the pooled one's)" \
    [ "$(cg_dirs | awk '{print $1}' | sort -u | wc -l)" = 1 ]
new_sandbox
check "pool.hello: a create from the pool works" [ "$code" = 201 ]
sh_in "$SB" 'echo fine'
check "pool.hello: and its sandbox runs" eval "[ '$code' = 200 ] && [ '$out' = fine ]"
spec_check
finish
