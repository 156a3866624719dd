#!/bin/sh
# One daemon per state directory and per runtime directory: a second gloveboxd on the same
# directories refuses to start, naming the running one's pid, and leaves everything of the
# first one alone (its sandboxes, its socket). Directories that sandboxes cannot reach are
# refused at start by name. Two daemons with their own directories never give two sandboxes
# the same host uids.
NAME=single
. "$(dirname "$0")/../lib/daemon.sh"

post() { curl -s --max-time 30 --unix-socket "$S" -X POST --data-binary "$2" "http://glovebox$1"; }
start_daemon

# The event loop's CPU group (cgroup v1 cpu; src/base/sched.c): the main thread and the store
# writer are in <cpu>/<scope>gloveboxd-loop, weighted as nice -10 (9533 shares), the worker
# threads and the sandboxes are not; a stopped daemon removes the group.
CPU=$(awk '$9 == "cgroup" && $NF ~ /(^|,)cpu(,|$)/ { print $5; exit }' /proc/self/mountinfo)
if [ -n "$CPU" ] && [ -e "$CPU/cpu.shares" ]; then
    grp=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}cpu\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' "/proc/$DPID/task/$DPID/cgroup")
    echo "# the loop thread's cpu group: $grp"
    check "the loop thread has its own cpu group" eval "case '$grp' in */*gloveboxd-loop) true ;; *) false ;; esac"
    check "weighted as nice -10 (9533 shares)" [ "$(cat "$CPU$grp/cpu.shares" 2>/dev/null)" = 9533 ]
    # the loop thread and the store writer's (whose write lock the loop waits for), no other
    check "it holds the loop thread and the store writer only" eval \
        "[ \"\$(wc -l < '$CPU$grp/tasks')\" = 2 ] && grep -qx '$DPID' '$CPU$grp/tasks'"
    check "the store writer runs at the loop's priority" eval \
        "[ \"\$(ps -L -o tid=,nice= -p $DPID | awk -v t=\"\$(grep -vx $DPID '$CPU$grp/tasks')\" '\$1 == t { print \$2 }')\" = -10 ]"
    uid=$(post /v1/sandboxes '{}' | python3 -c "import json, sys; print(json.load(sys.stdin)['host_uid'])")
    ipid=$(ps -e -o pid= -o uid= --sort=pid | awk -v u="$uid" '$2 == u { print $1; exit }')
    check "a sandbox's init is not in it" eval "[ -n '$ipid' ] && ! grep -qx '$ipid' '$CPU$grp/tasks'"
    # and the loop's short time slice (EEVDF's custom slice, Linux 6.12 on): its thread only
    slice() { awk '$1 == "se.slice" { print $3 }' "$1" 2>/dev/null; }
    kv=$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')
    if [ "$kv" -ge 6012 ] && [ -n "$(slice /proc/self/sched)" ]; then
        check "the loop thread runs with a 0.1 ms time slice" [ "$(slice "/proc/$DPID/task/$DPID/sched")" = 100000 ]
        others=$(for t in /proc/$DPID/task/*; do [ "$t" = "/proc/$DPID/task/$DPID" ] || slice "$t/sched"; done | sort -u)
        check "no other thread of the daemon does ($others)" eval "[ -n '$others' ] && ! echo '$others' | grep -qx 100000"
        check "nor a sandbox's init" eval "[ -n '$ipid' ] && [ -n \"\$(slice /proc/$ipid/sched)\" ] && [ \"\$(slice /proc/$ipid/sched)\" != 100000 ]"
    else
        echo "# kernel $(uname -r): no custom time slices (6.12 on), the loop has the default one"
    fi
    LOOPGRP="$CPU$grp"
else
    echo "# no cgroup v1 cpu controller: the loop's group is not made (nice only)"
fi
post /v1/sandboxes '{"id":"first"}' > "$T/first.json"
uid=$(python3 -c "import json; print(json.load(open('$T/first.json'))['host_uid'])")

# the same state dir and runtime dir; then the same state dir only; then the runtime dir only
timeout 20 "$D" --state-dir "$STATE" --runtime-dir "$RUN" 2>"$T/second.log"
rc=$?
check "a second daemon on the same directories refuses to start" [ $rc -ne 0 -a $rc -ne 124 ]
check "it names the running daemon's pid" grep -q "another gloveboxd (pid $DPID) is using the state directory" "$T/second.log"
timeout 20 "$D" --state-dir "$STATE" --runtime-dir "$T/run2" 2>"$T/third.log"
check "a daemon on the same state dir alone refuses too" grep -q "pid $DPID" "$T/third.log"
timeout 20 "$D" --state-dir "$T/state2" --runtime-dir "$RUN" 2>"$T/fourth.log"
check "a daemon on the same runtime dir alone refuses too" grep -q "is using the runtime directory '$RUN'" "$T/fourth.log"
check "the first daemon's socket is still there" [ -S "$S" ]
check "the first daemon still answers" [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/v1/sandboxes/first)" = 200 ]
check "its sandbox was not touched" [ -n "$(ps -o pid= -u "$uid")" ]
out=$(curl -s --max-time 30 --unix-socket "$S" -X POST -d '{"cmd":["true"]}' http://glovebox/v1/sandboxes/first/exec)
check "its sandbox still runs commands" sh -c "printf '%s' '$out' | grep -q '\"exit_code\":0'"
check "the refused daemons wrote no sandbox.lost record" \
    sh -c "! grep -q 'did not survive' '$T/second.log' '$T/third.log' '$T/fourth.log'"

# a runtime dir under a directory others cannot search (what mktemp -d makes)
CLOSED=$(mktemp -d)
timeout 20 "$D" --state-dir "$T/state3" --runtime-dir "$CLOSED/run" 2>"$T/closed.log"
rc=$?
check "a runtime dir under a 0700 directory is refused at start" [ $rc -ne 0 -a $rc -ne 124 ]
check "the refusal names the directory and the fix" grep -q "under '$CLOSED', which others cannot search.*chmod o+x $CLOSED" "$T/closed.log"
rm -rf "$CLOSED"

# a second daemon with directories of its own: its sandboxes get other host uids
RUN2="$T/run5"
"$D" --state-dir "$T/state5" --runtime-dir "$RUN2" --kill-on-exit 2>"$T/daemon5.log" &
D2=$!
for i in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$RUN2/api.sock" http://glovebox/healthz)" = 200 ] && break
    sleep 0.05
done
for i in 1 2 3 4 5 6; do
    post /v1/sandboxes '{}' | python3 -c "import json, sys; print(json.load(sys.stdin)['host_uid'])" >> "$T/uids1"
    curl -s --max-time 30 --unix-socket "$RUN2/api.sock" -X POST -d '{}' http://glovebox/v1/sandboxes |
        python3 -c "import json, sys; print(json.load(sys.stdin)['host_uid'])" >> "$T/uids2"
done
echo "$uid" >> "$T/uids1"
check "twelve sandboxes of two daemons were made" [ "$(cat "$T/uids1" "$T/uids2" | wc -l)" -eq 13 ]
check "no host uid range is shared between the two daemons' sandboxes" \
    [ "$(sort "$T/uids1" "$T/uids2" | uniq -d | wc -l)" -eq 0 ]
# each slot is claimed in the one host-wide file, whichever daemon holds it
locked() {
    python3 - "$@" <<'PY'
import fcntl, struct, sys
fd = open("/run/glovebox-uids.lock", "r+b")
for uid in map(int, open(sys.argv[1]).read().split()):
    slot = (uid - 0x20000000) // 65536
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
        sys.exit(1)  # nobody held it
    except OSError:
        pass
PY
}
check "the first daemon's slots are locked in the host-wide file" locked "$T/uids1"
check "the second daemon's slots are locked in the host-wide file" locked "$T/uids2"
kill -TERM "$D2"; wait "$D2"
check "the second daemon stops cleanly" [ $? -eq 0 ]
if [ -n "${LOOPGRP:-}" ]; then
    kill -TERM "$DPID"; wait "$DPID"; DPID=
    check "a stopped daemon removes its loop's cpu group" [ ! -e "$LOOPGRP" ]
fi
summary
