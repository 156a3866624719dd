#!/bin/sh
# A hibernate that does not happen loses nothing. CRIU is probed at start and, where it
# cannot work, hibernate says so at once (and why) while pause still works; a dump that
# hangs is stopped at its deadline and the sandbox runs on as it was (processes, memory,
# files, a pause it was in, its network); a delete meanwhile stops the dump and answers
# once the sandbox is gone; two hung dumps starve nobody else's work; a real criu stopped
# at several points of a dump leaves no network lock behind, and the sandbox as the daemon
# says (running, or lost when criu was killed inside init); a daemon killed during a
# hung dump is replaced by one that takes the sandbox back running.
NAME=hibfaults
. "$(dirname "$0")/../lib/daemon.sh"

sh_in() {
    req POST "/v1/sandboxes/$1/exec" "$(python3 -c 'import json,sys; print(json.dumps({"shell":sys.argv[1],"wait":True}))' "$2")"
    out=$(field "j.get('stdout','').rstrip(chr(10))")
}
state_of() { req GET "/v1/sandboxes/$1"; field "j.get('state')"; }
# a counter in memory and a file on disk, in a new sandbox: $SB, $HUID
counting_sandbox() {
    req POST /v1/sandboxes "${1:-{\}}"
    SB=$(field "j['id']")
    HUID=$(field "j['host_uid']")
    sh_in "$SB" 'echo kept > /home/user/file; nohup sh -c "i=0; while :; do i=\$((i+1)); echo \$i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.02; done" >/dev/null 2>&1 & sleep 0.2; cat /tmp/c'
}
runs_on() { # SB: the counter moves, the file is there, new work runs
    sh_in "$1" 'a=$(cat /tmp/c); sleep 0.3; b=$(cat /tmp/c); [ "$b" -gt "$a" ] && cat /home/user/file'
    [ "$code" = 200 ] && [ "$out" = kept ]
}
criu_tables() { # nftables tables of the sandbox's network namespace named CRIU-*
    nsenter -t "$(pgrep -o -u "$1")" -n nft list tables 2>/dev/null | grep -c 'CRIU-'
}
kept_daemon() { # ARGS: a daemon whose sandboxes outlive it
    "$D" --state-dir "$STATE" --runtime-dir "$RUN" "$@" 2>>"$T/daemon-kept.log" &
    DPID=$!
    for i in $(seq 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] && return 0
        sleep 0.05
    done
    echo "gloveboxd did not start"; cat "$T/daemon.log"; exit 1
}
stop_daemon() { kill "$DPID"; wait "$DPID" 2>/dev/null; DPID=; }

# ---- a host where CRIU cannot work ---------------------------------------------------------
GLOVEBOX_CRIU_PROBE_FAIL="criu dump hangs on this test kernel" start_daemon
# (not hibernate_capability: under GLOVEBOX_REQUIRE_CRIU it would fail this very case)
for i in $(seq 400); do
    curl -s --max-time 5 --unix-socket "$S" http://glovebox/healthz | grep -q '"probing"' || break
    sleep 0.1
done
req GET /healthz
check "healthz says hibernate is unavailable, and why" eval "[ \"\$(field \"j['capabilities']['hibernate']['state']\")\" = unavailable ] && field \"j['capabilities']['hibernate']['reason']\" | grep -q 'hangs on this test kernel'"
check "metrics say it too" sh -c "curl -s --unix-socket '$S' http://glovebox/metrics | grep -q '^glovebox_capability_available{capability=\"hibernate\"} 0$'"
check "status says it too" sh -c "GLOVEBOX_RUNTIME_DIR='$RUN' '$BUILD/glovebox' status | grep -q 'hibernate  unavailable: criu dump hangs on this test kernel'"
counting_sandbox
t0=$(date +%s%N)
req POST "/v1/sandboxes/$SB/hibernate" '{}'
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "hibernate answers 503 at once, with the probe's reason" eval "[ '$code' = 503 ] && grep -q 'hangs on this test kernel' '$T/body' && [ $ms -lt 5000 ]"
check "the sandbox runs on" runs_on "$SB"
req POST "/v1/sandboxes/$SB/pause" '{}'
check "pause freezes it in memory instead" [ "$(field "j['state']")" = paused ]
req DELETE "/v1/sandboxes/$SB"
summary_daemon() { kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=; check "the daemon stops cleanly" [ $rc -eq 0 ]; }
summary_daemon

# ---- a dump that hangs -------------------------------------------------------------------
# both of the first two dumps hang (criu replaced by a sleep) until the 2 s deadline
GLOVEBOX_FAULT="hibernate.dump:fail@1,hibernate.dump:fail@2" start_daemon --hibernate-timeout 2s
hibernate_capability
if [ "$CRIU_OK" = 1 ]; then
counting_sandbox
A=$SB; AUID=$HUID
counting_sandbox
B=$SB
req POST /v1/sandboxes '{}'
C=$(field "j['id']")
req POST "/v1/sandboxes/$B/pause" '{}'
curl -s --max-time 30 --unix-socket "$S" -X POST -d '{}' "http://glovebox/v1/sandboxes/$A/hibernate" > "$T/hibA" &
HA=$!
curl -s --max-time 30 --unix-socket "$S" -X POST -d '{}' "http://glovebox/v1/sandboxes/$B/hibernate" > "$T/hibB" &
HB=$!
sleep 0.5
check "while its dump runs, the sandbox is listed as hibernating" [ "$(state_of "$A")" = hibernating ]
t0=$(date +%s%N)
req POST "/v1/sandboxes/$C/snapshots" '{}'
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "two hung dumps do not hold another sandbox's snapshot (${ms} ms)" eval "[ '$code' = 201 ] && [ $ms -lt 1500 ]"
sh_in "$C" 'echo fine'
check "nor its commands" [ "$out" = fine ]
wait "$HA"; wait "$HB"
check "the hung hibernate fails with a clear error" grep -q 'runs on (criu was stopped mid-dump.*did not finish within 2 s' "$T/hibA"
check "the sandbox is running again" [ "$(state_of "$A")" = running ]
check "its processes, memory and files are as they were" runs_on "$A"
check "no network lock is left in it" [ "$(criu_tables "$AUID")" = 0 ]
check "a sandbox that was paused is paused again" [ "$(state_of "$B")" = paused ]
req POST "/v1/sandboxes/$B/resume" '{}'
check "and it resumes as it was" runs_on "$B"
req POST "/v1/sandboxes/$A/snapshots" '{}'
check "its writable layer is reachable again (a snapshot works)" [ "$code" = 201 ]
check "the failure is audited" [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'sandbox.hibernate_failed' and sandbox in ('$A','$B')\").fetchone()[0])")" = 2 ]
req POST "/v1/sandboxes/$A/hibernate" '{}'
check "the next hibernate (criu as it is) works" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = hibernated ]"
req POST "/v1/sandboxes/$A/resume" '{}'
check "and the sandbox wakes from it" runs_on "$A"
for x in "$A" "$B" "$C"; do req DELETE "/v1/sandboxes/$x"; done
fi
summary_daemon

# ---- a delete during a hung dump ---------------------------------------------------------
GLOVEBOX_FAULT="hibernate.dump:fail" start_daemon --hibernate-timeout 60s
hibernate_capability >/dev/null
if [ "$CRIU_OK" = 1 ]; then
counting_sandbox
curl -s --max-time 90 --unix-socket "$S" -X POST -d '{}' "http://glovebox/v1/sandboxes/$SB/hibernate" > "$T/hib" &
H=$!
sleep 0.5
t0=$(date +%s%N)
req DELETE "/v1/sandboxes/$SB"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "a delete during a hung dump answers 204 once it is done (${ms} ms, not the 60 s deadline)" eval "[ '$code' = 204 ] && [ $ms -lt 10000 ]"
check "and it is true: the sandbox's processes are gone" no_procs "$HUID"
req GET "/v1/sandboxes/$SB"
check "and so is the sandbox" [ "$code" = 404 ]
wait "$H"
check "the hibernate says it was cancelled" grep -q 'cancelled' "$T/hib"
fi
summary_daemon

# ---- a real criu stopped at several points of a dump -----------------------------------------
cat > "$T/criu-stop" <<EOF
#!/bin/sh
# criu, frozen \$(cat $T/stop-at) seconds into a sandbox's dump
case "\$*" in *--network-lock*)
    "$(cd "$(dirname "$0")/../.." && pwd)/.deps/criu/bin/criu" "\$@" & C=\$!
    sleep "\$(cat $T/stop-at)"; kill -STOP \$C; wait \$C; exit \$? ;;
esac
exec "$(cd "$(dirname "$0")/../.." && pwd)/.deps/criu/bin/criu" "\$@"
EOF
chmod +x "$T/criu-stop"
if [ -x .deps/criu/bin/criu ]; then
GLOVEBOX_CRIU="$T/criu-stop" kept_daemon --hibernate-timeout 2s
hibernate_capability >/dev/null
if [ "$CRIU_OK" = 1 ]; then
for at in 0.01 0.03 0.05; do
    echo "$at" > "$T/stop-at"
    counting_sandbox
    req POST "/v1/sandboxes/$SB/hibernate" '{}'
    echo "# criu frozen $at s into the dump: $code $(head -c 300 "$T/body")"
    if [ "$code" = 200 ]; then
        echo "# at $at s the dump had finished already"
        req POST "/v1/sandboxes/$SB/resume" '{}'
        check "criu frozen $at s into the dump: the sandbox runs on" runs_on "$SB"
    elif grep -q 'the sandbox is lost' "$T/body"; then
        # criu killed inside a syscall it injected into init: init died on its breakpoint
        check "criu frozen $at s into the dump: a lost sandbox is said to be, with the reason" grep -q 'init died when criu was stopped mid-dump.*did not finish within 2 s' "$T/body"
        check "criu frozen $at s into the dump: and it is gone" eval "no_procs $HUID && req GET /v1/sandboxes/$SB && [ \$code = 404 ]"
    else
        check "criu frozen $at s into the dump: a clear error" grep -q 'runs on (criu was stopped mid-dump.*did not finish within 2 s' "$T/body"
        check "criu frozen $at s into the dump: no network lock left" [ "$(criu_tables "$HUID")" = 0 ]
        # a process criu was working in may have died (the error says so): init answers, new
        # work runs, the files are kept
        check "criu frozen $at s into the dump: the sandbox runs on" eval "sh_in $SB 'cat /home/user/file' && [ \$code = 200 ] && [ \"\$out\" = kept ]"
    fi
    [ "$code" = 200 ] || echo "# then: $code $(head -c 300 "$T/body")"
done
# ---- the daemon killed during a hung dump ------------------------------------------------
stop_daemon
GLOVEBOX_FAULT="hibernate.dump:fail" kept_daemon --hibernate-timeout 60s
counting_sandbox
curl -s --max-time 30 --unix-socket "$S" -X POST -d '{}' "http://glovebox/v1/sandboxes/$SB/hibernate" > /dev/null &
H=$!
sleep 0.5
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
wait "$H"
check "the hung helper died with its daemon" eval "! pgrep -f 'sleep 3600' >/dev/null"
kept_daemon
check "a new daemon takes the sandbox back, running" [ "$(state_of "$SB")" = running ]
check "its processes, memory and files are as they were" runs_on "$SB"
check "the new daemon said what it undid" grep -q "a hibernate that did not finish is undone" "$T/daemon-kept.log"
req POST "/v1/sandboxes/$SB/snapshots" '{}'
check "its snapshot is refused with a clear error (its layer handle went with the old daemon)" eval "[ '$code' != 201 ] && grep -q 'writable layer' '$T/body'"
fi
req GET /v1/sandboxes
for x in $(field "' '.join(s['id'] for s in j['sandboxes'])"); do req DELETE "/v1/sandboxes/$x"; done
fi
[ $fail -eq 0 ] || { echo "# the kept daemons' log ends:"; grep -v "info request" "$T/daemon-kept.log" | tail -n 30 | sed "s/^/#   /"; }
summary
