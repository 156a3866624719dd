#!/bin/sh
# glovebox exec and signals: SIGINT, SIGTERM and SIGHUP sent to the CLI go on to the process
# (the CLI streams on and exits with the process's status; a second ^C goes too); a CLI that
# goes away has its process group killed (the API's "kill_on_disconnect", audited as
# exec.kill); --detach leaves the process running; an API client without kill_on_disconnect
# that leaves still leaves its process running.
# test-timeout: 240
set -u
NAME=execsig
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
B=http://glovebox/v1/sandboxes/sg

start_daemon
curl -s -o /dev/null --unix-socket "$S" -X POST -d '{"id":"sg"}' http://glovebox/v1/sandboxes
export GLOVEBOX_RUNTIME_DIR="$RUN"

# wait_for CMD...: until CMD succeeds, for at most 30 s
wait_for() {
    for i in $(seq 300); do "$@" && return 0; sleep 0.1; done
    return 1
}
# proc_of CMD: the handles (glovebox ps) of the running processes whose command line is CMD
proc_of() {
    "$GB" ps sg --json | python3 -c "import json, sys
print(' '.join(str(p['process']) for p in json.load(sys.stdin) if ' '.join(p['cmd']) == sys.argv[1]))" "$1"
}
listed() { [ -n "$(proc_of "$1")" ]; }
not_listed() { [ -z "$(proc_of "$1")" ]; }
# inside CMD: how many processes of the sandbox (not only exec's: their children too) run CMD
inside() {
    "$GB" exec sg -- sh -c 'for f in /proc/[0-9]*/cmdline; do tr "\0" " " < "$f"; echo; done' |
        grep -c "^$1 \$"
}
none_inside() { [ "$(inside "$1")" = 0 ]; }
one_inside() { [ "$(inside "$1")" = 1 ]; }
# audited KIND PROC: the number of KIND records about process PROC
audited() {
    q "print(sum(1 for (d,) in c.execute(\"select detail from audit where kind = '$1'\") if json.loads(d).get('process') == $2))"
}
detach_recorded() { [ "$(audited exec.detach "$1")" = 1 ]; }

# ---- (a) SIGINT, SIGTERM, SIGHUP go on to the process; the CLI ends with its status ----
for case in INT:130 TERM:143 HUP:129; do
    sig=${case%:*}; want=${case#*:}
    cmd="trap 'echo $sig > /tmp/got; echo got $sig; exit $want' $sig; echo ready; while :; do sleep 0.1; done"
    "$GB" exec sg -- sh -c "$cmd" > "$T/out" 2>"$T/err" &
    C=$!
    check "SIG$sig: the process runs (glovebox ps)" wait_for listed "sh -c $cmd"
    check "SIG$sig: its trap is set (its output streams)" wait_for grep -q '^ready$' "$T/out"
    kill -"$sig" $C
    wait $C; rc=$?
    check "SIG$sig to the CLI: it exits with the process's status $want (got $rc)" [ $rc -eq "$want" ]
    check "SIG$sig: the process got it" [ "$("$GB" exec sg -- cat /tmp/got)" = "$sig" ]
    check "SIG$sig: the CLI streamed on after the signal" grep -q "^got $sig\$" "$T/out"
    check "SIG$sig: no error from the CLI" [ "$(grep -c '^glovebox:' "$T/err")" = 0 ]
done

# no trap: the process dies of the signal, the CLI exits 128+N
"$GB" exec sg -- sleep 6000 &
C=$!
wait_for listed "sleep 6000"
kill -INT $C
wait $C; rc=$?
check "^C kills a process without a trap: 130 (got $rc)" [ $rc -eq 130 ]
check "and it is gone" wait_for not_listed "sleep 6000"

# a process that ignores the first ^C: the CLI stays, the second goes on too
cmd='n=0; trap '\''n=$((n + 1)); echo got $n; [ $n -ge 2 ] && exit 7'\'' INT; echo ready; while :; do sleep 0.1; done'
"$GB" exec sg -- sh -c "$cmd" > "$T/out" &
C=$!
wait_for grep -q '^ready$' "$T/out"
kill -INT $C
check "a first ^C the process survives reaches it" wait_for grep -q '^got 1$' "$T/out"
check "and the CLI is still there" kill -0 $C
kill -INT $C
wait $C; rc=$?
check "a second ^C is passed on too: the process's exit status 7 (got $rc)" [ $rc -eq 7 ]

# a process that ignores SIGTERM (an interactive shell does): the first is passed on, a
# second ends the CLI at once, and the daemon kills the process (timeout(1), systemd, a
# supervisor's stop must not hang on it)
"$GB" exec sg -- sh -c 'trap "" TERM; echo ready; exec sleep 6001' > "$T/out" 2> "$T/err" &
C=$!
wait_for grep -q '^ready$' "$T/out"
wait_for listed "sleep 6001"
kill -TERM $C
sleep 0.5
check "a SIGTERM the process ignores: the CLI waits for it" kill -0 $C
kill -TERM $C
wait $C; rc=$?
check "a second SIGTERM ends the CLI: 143 (got $rc)" [ $rc -eq 143 ]
check "and the daemon kills the process" wait_for not_listed "sleep 6001"
# the same without a second signal: after the grace (10 s) the CLI ends on its own
"$GB" exec sg -- sh -c 'trap "" HUP; echo ready; exec sleep 6002' > "$T/out" 2> "$T/err" &
C=$!
wait_for grep -q '^ready$' "$T/out"
kill -HUP $C
wait $C; rc=$?
check "a SIGHUP the process ignores: the CLI ends after the grace, 129 (got $rc)" [ $rc -eq 129 ]
check "saying why" grep -q "did not end within 10 s of SIGHUP" "$T/err"
check "and the process is killed" wait_for not_listed "sleep 6002"

# ---- (b) a CLI that goes away: its process group is killed, and that is audited ---------
"$GB" exec sg -- sh -c 'sleep 6001 & sleep 6002' &
C=$!
check "kill -9: the process runs" wait_for listed "sh -c sleep 6001 & sleep 6002"
check "kill -9: its child runs" wait_for one_inside "sleep 6001"
p=$(proc_of "sh -c sleep 6001 & sleep 6002")
kill -9 $C
wait $C
check "the CLI is gone: so is its process (glovebox ps)" wait_for not_listed "sh -c sleep 6001 & sleep 6002"
check "and the child it started" wait_for none_inside "sleep 6001"
check "and its other child" none_inside "sleep 6002"
check "an exec.kill record for process $p" [ "$(audited exec.kill "$p")" = 1 ]
check "exec.kill says why" [ "$(q "print([json.loads(d)['reason'] for (d,) in c.execute(\"select detail from audit where kind = 'exec.kill'\")][0])")" = "the client went away (kill_on_disconnect)" ]
check "its exec.end says SIGKILL" [ "$(q "print([json.loads(d).get('signal') for (d,) in c.execute(\"select detail from audit where kind = 'exec.end'\") if json.loads(d)['process'] == $p][0])")" = 9 ]
check "no exec.detach for it" [ "$(audited exec.detach "$p")" = 0 ]

# the same through the API: a stream, and a run-and-wait, with kill_on_disconnect
curl -s -N --max-time 1 --unix-socket "$S" -X POST -o /dev/null \
    -d '{"cmd":["sleep","6007"],"kill_on_disconnect":true}' "$B/exec"
check "an API client with kill_on_disconnect that leaves: the process is killed" wait_for not_listed "sleep 6007"
req POST /v1/sandboxes/sg/exec '{"cmd":["true"],"kill_on_disconnect":true,"wait":true}'
check "kill_on_disconnect with wait is 400 (nothing watches a waiting client)" eval '[ "$code" = 400 ] && grep -q "only to a stream" "$T/body"'
req POST /v1/sandboxes/sg/exec '{"cmd":["true"],"kill_on_disconnect":"yes"}'
check "kill_on_disconnect not a boolean is 400" eval '[ "$code" = 400 ] && grep -q "kill_on_disconnect" "$T/body"'
curl -s -N --max-time 30 --unix-socket "$S" -X POST -o "$T/body" \
    -d '{"cmd":["sh","-c","exit 4"],"kill_on_disconnect":true}' "$B/exec"
check "a process that exits first ends as usual" [ "$(tail -n 1 "$T/body")" = '{"type":"exit","exit_code":4}' ]

# ---- (c) --detach: the handle, and the process runs on ---------------------------------
p=$("$GB" exec -d sg -- sleep 6003); rc=$?
check "exec --detach exits 0" [ $rc -eq 0 ]
check "and prints the process handle" eval 'case "$p" in ""|*[!0-9]*) false ;; esac'
check "the detached process runs on after the CLI exited" [ "$(proc_of "sleep 6003")" = "$p" ]
check "its client leaving was recorded as exec.detach" wait_for detach_recorded "$p"
check "and it still runs then" [ "$(proc_of "sleep 6003")" = "$p" ]
curl -s -N --max-time 30 --unix-socket "$S" "$B/processes/$p/stream" -o "$T/att" &
A=$!
check "it can be attached to" wait_for grep -q '"type":"attached"' "$T/att"
req POST "/v1/sandboxes/sg/processes/$p/signal" '{"signal":"TERM"}'
check "and signalled" [ "$code" = 204 ]
wait $A
check "its status is read on the attached stream" [ "$(tail -n 1 "$T/att")" = '{"type":"exit","signal":15}' ]

"$GB" exec --detach --json sg -- sleep 6004 > "$T/det"; rc=$?
check "exec --detach --json: {\"sandbox\",\"proc\"}" eval '[ $rc -eq 0 ] && python3 -c "import json, sys; j = json.load(open(\"$T/det\")); sys.exit(0 if sorted(j) == [\"proc\", \"sandbox\"] and j[\"sandbox\"] == \"sg\" and str(j[\"proc\"]) == \"$(proc_of "sleep 6004")\" else 1)"'
p=$(proc_of "sleep 6004")
req POST "/v1/sandboxes/sg/processes/$p/signal" '{"signal":"KILL"}'
check "which is signalled too" wait_for not_listed "sleep 6004"
"$GB" exec -d -i sg -- cat 2>"$T/err" </dev/null; rc=$?
check "--detach with -i is refused" eval '[ $rc -ne 0 ] && grep -q detach "$T/err"'
"$GB" exec --json sg -- true 2>"$T/err"; rc=$?
check "--json without --detach is refused" eval '[ $rc -ne 0 ] && grep -q "only with --detach" "$T/err"'
check "exec --help says ^C is passed on" sh -c "'$GB' exec --help | grep -q 'passed on to the command'"

# ---- (d) the API's default: a client that leaves leaves its process running -----------
curl -s -N --max-time 1 --unix-socket "$S" -X POST -o /dev/null -d '{"cmd":["sleep","6005"]}' "$B/exec"
p=$(proc_of "sleep 6005")
check "without kill_on_disconnect the client left (exec.detach)" wait_for detach_recorded "$p"
check "and its process runs on" [ "$(proc_of "sleep 6005")" = "$p" ]
req POST "/v1/sandboxes/sg/processes/$p/signal" '{"signal":"KILL"}'

check "exec.kill only for the four processes whose clients left (none for those that exited)" \
    [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'exec.kill'\").fetchone()[0])")" = 4 ]

kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
check "the daemon stops cleanly (no leaks under ASan)" [ $rc -eq 0 ]
spec_check
summary
