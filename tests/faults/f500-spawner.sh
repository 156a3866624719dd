#!/bin/sh
# The sandbox spawner (src/sandbox/spawner.c) failing: sandboxes are the daemon's own children
# whichever way they were cloned; with the spawner killed, creates go on (the daemon clones
# them itself, and says so once); with the spawner stopped, a create waits for its deadline
# (10 s) and then succeeds the same way. Each sandbox works and is deleted cleanly. A daemon
# killed with SIGKILL takes its spawner with it.
# test-timeout: 180
NAME=fspawn
. "$(dirname "$0")/../lib/daemon.sh"
. "$(dirname "$0")/lib.sh"

spawner_of() { ps -o pid= -o comm= --ppid "$DPID" | awk '$2 == "gbx-spawner" { print $1 }'; }
ppid_of() { ps -o ppid= -p "$1" | tr -d ' '; }
works() { sh_in "$1" 'echo fine'; [ "$code" = 200 ] && [ "$out" = fine ]; }
gone() { req DELETE "/v1/sandboxes/$1"; [ "$code" = 204 ]; }
# init_child SB: its init (found by its uid) is a child of the daemon
init_child() {
    pid=$(ps -e -o pid= -o uid= --sort=pid | awk -v u="$2" '$2 == u { print $1; exit }')
    echo "# sandbox $1: init pid ${pid:-?}, parent $( [ -n "$pid" ] && ppid_of "$pid")"
    [ -n "$pid" ] && [ "$(ppid_of "$pid")" = "$DPID" ]
}

restart
SP=$(spawner_of)
check "the daemon has a spawner" test -n "$SP"
new_sandbox
A=$SB
check "a sandbox cloned by the spawner works" works "$A"
check "and its init is the daemon's child" init_child "$A" "$HUID"

kill -9 "$SP"
new_sandbox
B=$SB
check "spawner killed: a create still succeeds" test -n "$B"
check "spawner killed: that sandbox works" works "$B"
check "spawner killed: its init is the daemon's child" init_child "$B" "$HUID"
check "spawner killed: the daemon says it clones from now on" grep -q "spawner is gone" "$LOG"
check "spawner killed: the sandbox before it still works" works "$A"
check "spawner killed: deletes" eval "gone '$A' && gone '$B'"
invariants "spawner killed"
stop_daemon

restart
SP=$(spawner_of)
kill -STOP "$SP"
t0=$(date +%s)
new_sandbox
C=$SB
t1=$(date +%s)
echo "# a create with the spawner stopped took $((t1 - t0)) s"
check "spawner stopped: a create succeeds after the spawner's deadline" test -n "$C"
check "spawner stopped: the daemon says the spawner did not answer" grep -q "spawner did not answer in time" "$LOG"
check "spawner stopped: that sandbox works" works "$C"
check "spawner stopped: it is put down (no spawner left)" eval "[ -z \"\$(spawner_of)\" ] || ! kill -0 $SP 2>/dev/null || ps -o stat= -p $SP | grep -q Z"
check "spawner stopped: deletes" gone "$C"
invariants "spawner stopped"
stop_daemon

# the spawner dies with its daemon (PR_SET_PDEATHSIG), even one killed with SIGKILL
restart
SP=$(spawner_of)
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
for i in $(seq 50); do kill -0 "$SP" 2>/dev/null || break; sleep 0.1; done
check "daemon killed: its spawner is gone too" eval "[ -n '$SP' ] && ! kill -0 $SP 2>/dev/null"
restart
finish
