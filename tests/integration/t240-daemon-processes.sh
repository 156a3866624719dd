#!/bin/sh
# gloveboxd's process routes: stdin, close-stdin, signal, resize, the processes list, attach
# from another connection (a takeover), and the exec options that go with them: timeout,
# run-and-wait with its output caps and binary output, SSE, a client that leaves.
# Then the CLI: glovebox ps, exec --stdin, exec --timeout, exec -it (under script).
set -u
NAME=procs
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
B=http://glovebox/v1/sandboxes/pr

# req METHOD PATH [BODY]: $code, $T/body; recorded for the spec check
req() {
    if [ $# -ge 3 ]; then
        code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X "$1" \
            --data-binary "$3" "$B$2")
    else
        code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X "$1" "$B$2")
    fi
    record "$1" "/v1/sandboxes/pr$2"
}
# raw PATH FILE: POST the file's bytes as they are
raw() {
    code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X POST \
        -H 'Content-Type: application/octet-stream' --data-binary "@$2" "$B$1")
    record POST "/v1/sandboxes/pr$1"
}
# bg NAME BODY: an exec stream into $T/NAME.out, in the background; its curl's pid in $bgpid
bg() {
    curl -s -N --max-time 120 --unix-socket "$S" -X POST --data-binary "$2" "$B/exec" \
        -o "$T/$1.out" &
    bgpid=$!
}
# json EXPR [FILE]: evaluate a python expression over the JSON in FILE ($T/body) as j
json() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($1)" "${2:-$T/body}"; }
# decode NAME TYPE: the concatenated stdout (or stderr) bytes of stream NAME
decode() {
    python3 -c "
import base64, json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e['type'] == sys.argv[2]:
        sys.stdout.buffer.write(base64.b64decode(e['data']))" "$T/$1.out" "$2"
}
last() { tail -n 1 "$T/$1.out"; }
not() { ! "$@"; }
# until_ DESC CMD...: wait (up to 30 s) until CMD succeeds
until_() {
    d=$1; shift
    for i in $(seq 300); do "$@" && return 0; sleep 0.1; done
    echo "# gave up waiting for $d"; return 1
}
started() { [ -s "$T/$1.out" ] && head -n 1 "$T/$1.out" | grep -q '"type":"start"'; }
proc_of() { head -n 1 "$T/$1.out" | python3 -c "import json, sys; print(json.load(sys.stdin)['process'])"; }
has_output() { decode "$1" stdout 2>/dev/null | grep -q "$2"; }
listed() { req GET /processes; is "any(p['process'] == $1 for p in j['processes'])" True; }
# is EXPR VALUE: the python expression over $T/body prints VALUE
is() { [ "$(json "$1")" = "$2" ]; }

start_daemon
curl -s -o /dev/null --unix-socket "$S" -X POST -d '{"id":"pr"}' http://glovebox/v1/sandboxes

# ---- stdin ----
bg cat '{"cmd":["cat"],"stdin":true}'
until_ "cat to start" started cat
p=$(proc_of cat)
printf 'hello\000binary\377\n' > "$T/in"
raw "/processes/$p/stdin" "$T/in"
check "stdin is written (204)" [ "$code" = 204 ]
req POST "/processes/$p/close-stdin"
check "close-stdin (204)" [ "$code" = 204 ]
wait $bgpid
decode cat stdout > "$T/got"
check "the process read every byte of stdin" cmp -s "$T/in" "$T/got"
check "and exited at end of file" [ "$(last cat)" = '{"type":"exit","exit_code":0}' ]

# 100 KiB goes in frames of at most 64 KiB
bg big '{"shell":"wc -c","stdin":true}'
until_ "wc to start" started big
p=$(proc_of big)
head -c 100000 /dev/urandom > "$T/big"
raw "/processes/$p/stdin" "$T/big"
check "100 KiB of stdin (204)" [ "$code" = 204 ]
req POST "/processes/$p/close-stdin"
wait $bgpid
check "all of it arrived" [ "$(decode big stdout | tr -d ' \n')" = 100000 ]

bg sleeper '{"cmd":["sleep","100"]}'
until_ "sleep to start" started sleeper
p=$(proc_of sleeper)
raw "/processes/$p/stdin" "$T/in"
check "stdin to a process started without it is 409" eval '[ "$code" = 409 ] && grep -q "start it with" "$T/body"'

# ---- the processes list ----
req GET /processes
check "ps lists the running process" is "[x['cmd'] for x in j['processes'] if x['process'] == $p]" "[['sleep', '100']]"
check "with its pid, user, cwd and pty" is "[(x['user'], x['cwd'], x['pty'], x['pid'] > 1) for x in j['processes'] if x['process'] == $p]" "[('root', '/root', False, True)]"
check "ps does not list a finished process" [ "$(json "[x for x in j['processes'] if x['cmd'] == ['cat']]")" = "[]" ]
req GET "/processes/$p"
check "one process by its handle" eval '[ "$code" = 200 ] && [ "$(json "j['\''process'\'']")" = "$p" ]'

# ---- signal and resize ----
req POST "/processes/$p/resize" '{"rows":30,"cols":100}'
check "resize of a process without a terminal is 409" [ "$code" = 409 ]
req POST "/processes/$p/signal" '{"signal":"BOGUS"}'
check "an unknown signal name is 400" [ "$code" = 400 ]
req POST "/processes/$p/signal" '{"signal":99}'
check "a signal number out of range is 400" [ "$code" = 400 ]
req POST "/processes/$p/signal" '{"signal":"TERM","colour":1}'
check "an unknown field is 400" eval '[ "$code" = 400 ] && grep -q "colour" "$T/body"'
req POST "/processes/$p/signal" '{"signal":'
check "malformed JSON is 400" [ "$code" = 400 ]
req POST "/processes/$p/signal" '{"signal":"SIGTERM"}'
check "signal TERM (204)" [ "$code" = 204 ]
wait $bgpid
check "the process dies of signal 15" [ "$(last sleeper)" = '{"type":"exit","signal":15}' ]
check "and is no longer listed" not listed "$p"
req POST "/processes/$p/signal" '{"signal":"KILL"}'
check "signal to a finished process is 404" [ "$code" = 404 ]
req POST "/processes/999999/stdin" 'x'
check "stdin to an unknown process is 404" [ "$code" = 404 ]
req GET "/processes/nope"
check "a handle that is not a number is 404" [ "$code" = 404 ]
req GET "/processes/1/signal"
check "GET on signal is 405" [ "$code" = 405 ]

bg tty '{"shell":"stty size; read x; stty size","pty":{"rows":24,"cols":80},"stdin":true}'
until_ "the terminal's first size" has_output tty "24 80"
p=$(proc_of tty)
req POST "/processes/$p/resize" '{"rows":40,"cols":120}'
check "resize (204)" [ "$code" = 204 ]
req POST "/processes/$p/resize" '{"rows":0,"cols":120}'
check "a size out of range is 400" [ "$code" = 400 ]
printf '\n' > "$T/nl"
raw "/processes/$p/stdin" "$T/nl"
wait $bgpid
check "the process on the terminal sees its new size" has_output tty "40 120"
check "and exits 0" [ "$(last tty)" = '{"type":"exit","exit_code":0}' ]

# ---- attach: a takeover from another connection ----
req POST /exec '{"cmd":["rm","-f","/tmp/stop"],"wait":true}'
bg first '{"shell":"i=0; while [ ! -e /tmp/stop ]; do i=$((i+1)); echo tick $i; sleep 0.1; done; echo done; exit 7"}'
until_ "the first ticks" has_output first "tick 1"
p=$(proc_of first)
curl -s -N --max-time 120 --unix-socket "$S" "$B/processes/$p/stream" -o "$T/second.out" &
apid=$!
until_ "the attached stream's ticks" has_output second tick
req POST /exec '{"cmd":["touch","/tmp/stop"],"wait":true}'
wait $apid
wait $bgpid
cp "$T/second.out" "$T/body"; code=200; record GET "/v1/sandboxes/pr/processes/$p/stream"
check "attach starts with an attached event" [ "$(head -n 1 "$T/second.out")" = "{\"type\":\"attached\",\"process\":$p}" ]
check "the attached stream gets the later output" has_output second done
check "and the exit" [ "$(last second)" = '{"type":"exit","exit_code":7}' ]
check "the first stream is told it was taken over" sh -c "tail -n 1 '$T/first.out' | grep -q '\"type\":\"detached\"'"
check "and gets nothing after" not has_output first done
code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$S" "$B/processes/999999/stream")
record GET /v1/sandboxes/pr/processes/999999/stream
check "attach to an unknown process is 404" [ "$code" = 404 ]
code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$S" "$B/processes/$p/stream")
check "attach to a finished process is 404" [ "$code" = 404 ]

# ---- exec options ----
bg timeout '{"cmd":["sleep","100"],"timeout":1}'
wait $bgpid
check "a timeout kills the process and says so" [ "$(last timeout)" = '{"type":"exit","signal":9,"timed_out":true}' ]
cp "$T/timeout.out" "$T/body"; code=200; record POST /v1/sandboxes/pr/exec

req POST /exec '{"shell":"echo hi; echo oops >&2; exit 3","wait":true}'
check "run-and-wait replies 200" [ "$code" = 200 ]
check "with the exit code and the output" [ "$(json "(j['exit_code'], j['stdout'], j['stderr'], j['stdout_truncated'], j['timed_out'], 'stdout_base64' in j)")" = "(3, 'hi\n', 'oops\n', False, False, False)" ]
check "and how long it took" [ "$(json "j['duration_ms'] >= 0")" = True ]
req POST /exec '{"shell":"head -c 3000000 /dev/zero | tr \"\\000\" a; echo done >&2","wait":true,"max_output":1000}'
check "max_output caps the output and says so" [ "$(json "(len(j['stdout']), j['stdout_truncated'], j['stderr'], j['stderr_truncated'])")" = "(1000, True, 'done\n', False)" ]
req POST /exec '{"shell":"printf \"\\377\\376abc\"","wait":true}'
check "output that is not UTF-8 comes as base64 too" is "ascii((j['stdout'], j['stdout_base64']))" "('\ufffd\ufffdabc', '//5hYmM=')"
req POST /exec '{"cmd":["sleep","100"],"wait":true,"timeout":"500ms"}'
check "run-and-wait with a timeout" [ "$(json "(j['signal'], j['timed_out'])")" = "(9, True)" ]
req POST /exec '{"cmd":["true"],"max_output":10}'
check "max_output without wait is 400" [ "$code" = 400 ]
req POST /exec '{"cmd":["true"],"wait":true,"max_output":99999999}'
check "max_output above 16 MiB is 400" [ "$code" = 400 ]
req POST /exec '{"cmd":["true"],"timeout":"soon"}'
check "a bad timeout is 400" [ "$code" = 400 ]
req POST /exec '{"cmd":["true"],"pty":{"rows":5}}'
check "a pty without cols is 400" [ "$code" = 400 ]
req POST /exec '{"cmd":["true"],"stdin":"yes"}'
check "stdin that is not a boolean is 400" [ "$code" = 400 ]
req POST /exec '{"cmd":["true"],"wiat":true}'
check "an unknown exec field is 400, naming it" eval '[ "$code" = 400 ] && grep -q "wiat" "$T/body"'
req POST /exec '{"cmd":["true"'
check "malformed exec JSON is 400" [ "$code" = 400 ]

# the sandbox's environment is the base, the request's goes on top
curl -s -o /dev/null --unix-socket "$S" -X POST -d '{"id":"pe","env":{"A":"1","B":"2"}}' \
    http://glovebox/v1/sandboxes
code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X POST \
    -d '{"shell":"echo $A $B $LANG","wait":true}' http://glovebox/v1/sandboxes/pe/exec)
check "exec gets the sandbox's environment" is "j['stdout']" "1 2 C.UTF-8"
code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X POST \
    -d '{"shell":"echo $A $B","wait":true,"env":{"B":"3"}}' http://glovebox/v1/sandboxes/pe/exec)
check "with the request's env on top" is "j['stdout']" "1 3"

curl -s -N --max-time 30 -H 'Accept: text/event-stream' --unix-socket "$S" -X POST \
    -d '{"shell":"echo sse"}' -D "$T/sse.h" "$B/exec" -o "$T/sse.out"
check "SSE when asked for" grep -qi '^content-type: text/event-stream' "$T/sse.h"
check "SSE has event: and data: lines" sh -c "grep -q '^event: start$' '$T/sse.out' && grep -q '^event: stdout$' '$T/sse.out' && grep -q '^data: {\"type\":\"exit\",\"exit_code\":0}$' '$T/sse.out'"

# a client that leaves mid-stream: the process goes on, the daemon is fine
curl -s -N --max-time 1 --unix-socket "$S" -X POST -d '{"shell":"while :; do echo x; sleep 0.1; done"}' \
    "$B/exec" -o "$T/left.out"
p=$(proc_of left)
check "after its client left, the process still runs" listed "$p"
req POST "/processes/$p/signal" '{"signal":"KILL"}'
check "and can be killed from another request" [ "$code" = 204 ]
curl -s -N --max-time 1 --unix-socket "$S" -X POST -d '{"shell":"echo started; sleep 100","timeout":3}' \
    "$B/exec" -o "$T/left2.out"
p=$(proc_of left2)
check "a process whose client left with a timeout runs on" listed "$p"
check "until its timeout kills it" until_ "the timeout" not listed "$p"
check "the daemon is healthy" [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ]

# ---- the CLI ----
export GLOVEBOX_RUNTIME_DIR="$RUN"
bg cli '{"cmd":["sleep","100"]}'
until_ "sleep to start" started cli
p=$(proc_of cli)
"$GB" ps pr > "$T/ps"
check "glovebox ps: a header" grep -q '^PROC  *PID  *PTY  *USER  *CMD' "$T/ps"
check "glovebox ps: the process" grep -q "^$p .* root  *sleep 100\$" "$T/ps"
check "glovebox ps --json" [ "$("$GB" ps pr --json | json "[x['cmd'] for x in j if x['process'] == $p][0]" /dev/stdin)" = "['sleep', '100']" ]
"$GB" ps nope 2>"$T/err"
check "glovebox ps of an unknown sandbox exits 3" [ $? -eq 3 ]

# ---- the whole tree (?all=true, glovebox ps --all) ----
# an orphan of a finished exec (now init's child), and an API process as user with children
req POST /exec '{"shell":"(sleep 204 &); true","wait":true}'
bg tree '{"cmd":["sh","-c","sleep 201 & sh -c \"sleep 202; true\" & wait"],"user":"user"}'
until_ "the tree to start" started tree
tp=$(proc_of tree)
# tree_has EXPR: ?all=true lists a process for which EXPR holds (x is the process)
tree_has() { req GET "/processes?all=true"; is "any($1 for x in j['processes'])" True; }
until_ "the tree's children" tree_has "x['cmd'] == ['sleep', '202']"
req GET "/processes?all=true"
cp "$T/body" "$T/all.json"
check "?all=true answers every process, with its total" eval "[ '$code' = 200 ] && [ \"\$(json \"(j['total'] >= 6, j['truncated'], j['limit'])\")\" = '(True, False, 1000)' ]"
check "pid 1 is glovebox-init, marked init" is "[(x['ppid'], x['kind'], x['user'], x['process']) for x in j['processes'] if x['pid'] == 1]" "[(0, 'init', 'root', None)]"
check "an API process is marked with its handle, as user" is "[(x['kind'], x['user'], x['uid'], x['ppid']) for x in j['processes'] if x['process'] == $tp]" "[('api', 'user', 1000, 1)]"
check "its children are listed under it, unmarked" is "sorted((x['cmd'][0], x['kind'], x['process']) for x in j['processes'] if x['ppid'] == [y['pid'] for y in j['processes'] if y['process'] == $tp][0])" "[('sh', 'other', None), ('sleep', 'other', None)]"
check "and a grandchild under that" is "[x['ppid'] == [y['pid'] for y in j['processes'] if y['cmd'][:1] == ['sh'] and y['process'] is None][0] for x in j['processes'] if x['cmd'] == ['sleep', '202']]" "[True]"
check "a process no API call started (an orphan: init's child) is listed" is "[(x['ppid'], x['kind'], x['process']) for x in j['processes'] if x['cmd'] == ['sleep', '204']]" "[(1, 'other', None)]"
check "the pids are the sandbox's, in order" is "[x['pid'] for x in j['processes']] == sorted(x['pid'] for x in j['processes']) and all(x['pid'] < 1000 for x in j['processes'])" True
req GET /processes
check "the default list is unchanged: the API's processes only" is "sorted(x['process'] for x in j['processes']) == sorted([$p, $tp]) and 'kind' not in j['processes'][0]" True
check "the pid ?all=true gives an API process is the one the list gives" is "[x['pid'] for x in j['processes'] if x['process'] == $tp] == [x['pid'] for x in json.load(open('$T/all.json'))['processes'] if x['process'] == $tp]" True
req GET "/processes?all=maybe"
check "a bad all= is 400" [ "$code" = 400 ]
"$GB" ps pr --all > "$T/psall"
check "glovebox ps --all: a header" grep -q '^PID  *PPID  *USER  *PROC  *S  *CMD$' "$T/psall"
check "glovebox ps --all: init first, marked" sh -c "sed -n 2p '$T/psall' | grep -q '^1  *0  *root  *init  *[A-Z]  *glovebox-init'"
check "glovebox ps --all: the API process with its handle" grep -q "^[0-9]*  *1  *user  *$tp  *[A-Z]  *.._ sh -c sleep 201" "$T/psall"
# indent COMMAND: where the tree mark of the line showing COMMAND is
indent() { python3 -c "import sys; print([l.index(chr(92) + '_ ') for l in open(sys.argv[1]) if l.rstrip().endswith(sys.argv[2])][0])" "$T/psall" "$1"; }
check "glovebox ps --all: its children indented under it, unmarked" eval "[ \$(( \$(indent 'sleep 201') - \$(indent '& wait') )) = 4 ] && grep -q '^[0-9]*  *[0-9]*  *user  *-  .*sleep 201\$' '$T/psall'"
check "glovebox ps --all: the grandchild one level further" eval "[ \$(( \$(indent 'sleep 202') - \$(indent 'sleep 202; true') )) = 4 ]"
check "glovebox ps --all --json: the whole answer" [ "$("$GB" ps pr --all --json | json "(len(j['processes']) == j['total'], j['truncated'])" /dev/stdin)" = "(True, False)" ]
req POST "/processes/$tp/signal" '{"signal":"KILL"}'
wait $bgpid
orphan=$(json "[x['pid'] for x in j['processes'] if x['cmd'] == ['sleep', '204']][0]" "$T/all.json")
req POST /exec "{\"cmd\":[\"kill\",\"$orphan\"],\"wait\":true}"

# a sandbox with more processes than the list holds: the first 1000, and the count
curl -s -o /dev/null --unix-socket "$S" -X POST -d '{"id":"many","pids":1200}' http://glovebox/v1/sandboxes
code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X POST \
    -d '{"shell":"for i in $(seq 1050); do sleep 300 >/dev/null 2>&1 & done; echo started","wait":true}' http://glovebox/v1/sandboxes/many/exec)
check "1050 processes started" is "j['stdout'].strip()" started
code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$S" "http://glovebox/v1/sandboxes/many/processes?all=true")
record GET /v1/sandboxes/many/processes
check "?all=true lists the first 1000 (init first), says there are more, and how many" is "(len(j['processes']), j['processes'][0]['pid'], j['total'] > 1000, j['truncated'])" "(1000, 1, True, True)"
"$GB" ps many --all > /dev/null 2> "$T/err"
check "glovebox ps --all says so" grep -q 'processes; the first 1000 are shown' "$T/err"
curl -s -o /dev/null --unix-socket "$S" -X DELETE http://glovebox/v1/sandboxes/many
req POST "/processes/$p/signal" '{"signal":"KILL"}'
wait $bgpid
check "glovebox exec --stdin" [ "$(printf 'piped\ninput\n' | "$GB" exec --stdin pr -- sh -c 'cat; echo end')" = "$(printf 'piped\ninput\nend')" ]
head -c 300000 /dev/urandom > "$T/rand"
"$GB" exec pr --stdin -- sha256sum < "$T/rand" > "$T/sum"
check "glovebox exec --stdin: 300 KB intact" [ "$(cut -d' ' -f1 "$T/sum")" = "$(sha256sum < "$T/rand" | cut -d' ' -f1)" ]
"$GB" exec pr --timeout 1s -- sleep 100 2>"$T/err"
check "glovebox exec --timeout exits 124" [ $? -eq 124 ]
if script -qec true /dev/null </dev/null >/dev/null 2>&1; then
    script -qec "$GB exec -it pr -- sh -c 'test -t 0 && echo on-a-tty; stty size; exit 5'" /dev/null \
        </dev/null > "$T/it" 2>&1
    rc=$?
    check "glovebox exec -it runs on a terminal" grep -q on-a-tty "$T/it"
    check "glovebox exec -it passes the exit status" [ $rc -eq 5 ]
    printf 'echo in-$((40+2))\nexit 6\n' | script -qec "$GB exec -it pr -- sh" /dev/null > "$T/it" 2>&1
    rc=$?
    check "glovebox exec -it: an interactive shell reads what is typed" grep -q in-42 "$T/it"
    check "and its exit status comes back" [ $rc -eq 6 ]
else
    echo "# skip: script (util-linux) cannot run here; glovebox exec -it not tested"
fi

kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
check "the daemon stops cleanly (no leaks under ASan)" [ $rc -eq 0 ]
n() { q "print(c.execute(\"select count(*) from audit where kind = '$1'\").fetchone()[0])"; }
check "audit: exec.end counts the bytes written to stdin" [ "$(q "print(json.loads(c.execute(\"select detail from audit where kind = 'exec.end' and detail like '%\\\"cat\\\"%' order by seq limit 1\").fetchone()[0])['stdin_bytes'])")" = 14 ]
check "audit: process.stdin with the byte count" [ "$(q "print(json.loads(c.execute(\"select detail from audit where kind = 'process.stdin' order by seq limit 1\").fetchone()[0])['bytes'])")" = 14 ]
check "audit: process.signal" [ "$(n process.signal)" -ge 3 ]
check "audit: process.close_stdin" [ "$(n process.close_stdin)" -ge 2 ]
check "audit: process.attach" [ "$(n process.attach)" = 1 ]
spec_check
summary
