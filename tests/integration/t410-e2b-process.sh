#!/bin/sh
# envd's process.Process over Connect JSON, at the wire level (shared/protocols/e2b.md §3, §4.2):
# the exact framing of Start (start first, data, end, the 0x02 end-of-stream frame), errors in
# the end-of-stream frame, keepalives under a small Keepalive-Ping-Interval, Connect-Timeout-Ms
# as the process lifetime (even after the client left), a disconnect that leaves the process
# running (its output read and dropped), Connect to it (several clients follow one process, a
# slow one holds the others back), List with config, SendInput, CloseStdin, SendSignal, Update
# on a PTY, users, cwd, envs, big and binary output, the audit records, and SIGTERM with a
# stream open.
NAME=e2bproc
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
U="http://127.0.0.1:$PORT"
start_daemon --listen "127.0.0.1:$PORT"
KEY=$("$GB" apikey create procs --json | python3 -c "import json, sys; print(json.load(sys.stdin)['key'])")

code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' -X POST -H "X-API-KEY: $KEY" \
    -H 'Content-Type: application/json' --data-binary '{"templateID":"base","envVars":{"SBX_VAR":"from-create","OVER":"create"}}' \
    "$U/v2/sandboxes")
[ "$code" = 201 ] || { echo "cannot create a sandbox ($code): $(cat "$T/body")"; exit 1; }
SB=$(python3 -c "import json; print(json.load(open('$T/body'))['sandboxID'])")
TOK=$(python3 -c "import json; print(json.load(open('$T/body'))['envdAccessToken'])")

# The Connect helper: envelope a message, parse a stream's frames.
cat > "$T/c.py" <<'EOF'
import base64, json, struct, sys
def frames(path):
    b = open(path, 'rb').read()
    out, off = [], 0
    while len(b) - off >= 5:
        flags, n = b[off], struct.unpack('>I', b[off + 1:off + 5])[0]
        if len(b) - off - 5 < n:
            break
        out.append((flags, json.loads(b[off + 5:off + 5 + n])))
        off += 5 + n
    return out, len(b) - off
cmd = sys.argv[1]
if cmd == 'env':
    msg = sys.argv[2].encode()
    sys.stdout.buffer.write(bytes([0]) + struct.pack('>I', len(msg)) + msg)
elif cmd == 'frames':  # one line per frame: "FLAGS JSON", then "rest N"
    fs, rest = frames(sys.argv[2])
    for f, m in fs:
        print(f, json.dumps(m, sort_keys=True))
    print('rest', rest)
elif cmd == 'out':  # the concatenated bytes of one output kind
    fs, _ = frames(sys.argv[2])
    for f, m in fs:
        d = m.get('event', {}).get('data', {})
        if sys.argv[3] in d:
            sys.stdout.buffer.write(base64.b64decode(d[sys.argv[3]]))
elif cmd == 'eval':  # a Python expression over fr (the frames: [(flags, msg)]) and rest
    fr, rest = frames(sys.argv[2])
    msgs = [m for f, m in fr if f == 0]
    end = [m for f, m in fr if f == 2]
    print(eval(sys.argv[3]))
EOF
c() { python3 "$T/c.py" "$@"; }

# stream NAME METHOD MSG [CURL ARGS...]: a server stream into $T/NAME.out (headers NAME.hdr)
stream() {
    n=$1; m=$2; msg=$3; shift 3
    c env "$msg" > "$T/$n.req"
    code=$(curl -s -N --max-time 60 -o "$T/$n.out" -D "$T/$n.hdr" -w '%{http_code}' -X POST \
        -H "E2b-Sandbox-Id: $SB" -H 'E2b-Sandbox-Port: 49983' -H "X-Access-Token: $TOK" \
        -H 'Content-Type: application/connect+json' -H 'Connect-Protocol-Version: 1' \
        "$@" --data-binary "@$T/$n.req" "$U/process.Process/$m")
}
# bgstream NAME METHOD MSG [CURL ARGS...]: the same in the background; curl's pid in $bgpid
bgstream() {
    n=$1; m=$2; msg=$3; shift 3
    c env "$msg" > "$T/$n.req"
    : > "$T/$n.out"
    curl -s -N --max-time 120 -o "$T/$n.out" -X POST \
        -H "E2b-Sandbox-Id: $SB" -H 'E2b-Sandbox-Port: 49983' -H "X-Access-Token: $TOK" \
        -H 'Content-Type: application/connect+json' -H 'Connect-Protocol-Version: 1' \
        "$@" --data-binary "@$T/$n.req" "$U/process.Process/$m" &
    bgpid=$!
}
# unary METHOD MSG [CURL ARGS...]: $code, $T/body
unary() {
    m=$1; msg=$2; shift 2
    code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' -X POST \
        -H "E2b-Sandbox-Id: $SB" -H 'E2b-Sandbox-Port: 49983' -H "X-Access-Token: $TOK" \
        -H 'Content-Type: application/json' -H 'Connect-Protocol-Version: 1' \
        "$@" --data-binary "$msg" "$U/process.Process/$m")
}
j() { python3 -c "import json,sys; j=json.load(open('$T/body')); print($1)"; }
ev() { c eval "$T/$1.out" "$2"; }
is() { [ "$(ev "$1" "$2")" = "$3" ]; }
run() { printf '{"process":{"cmd":"/bin/bash","args":["-l","-c","%s"]},"stdin":false}' "$1"; }
until_() {
    d=$1; shift
    for i in $(seq 300); do "$@" && return 0; sleep 0.1; done
    echo "# gave up waiting for $d"; return 1
}
started() { [ "$(ev "$1" "'start' in msgs[0]['event'] if msgs else False" 2>/dev/null)" = True ]; }
pid_of() { ev "$1" "msgs[0]['event']['start']['pid']"; }
has_output() { c out "$T/$1.out" "$2" 2>/dev/null | grep -q "$3"; }
listed() { unary List '{}'; [ "$(j "any(p['pid'] == $1 for p in j['processes'])")" = True ]; }
gone() { ! listed "$1"; }
ended() { [ "$(ev "$1" "len(end) == 1")" = True ]; }
lines() { c out "$T/$1.out" stdout | wc -l; }
more_than() { [ "$(lines "$1")" -gt "$2" ]; }
killed_end() { is "$1" "(msgs[-1]['event']['end'], end)" "({'exitCode': -1, 'exited': False, 'status': 'signal: killed', 'error': 'signal: killed'}, [{}])"; }

# ---- Start: the framing ------------------------------------------------------------------------
stream hi Start "$(run 'echo hi; echo oops >&2')" -H 'Connect-Timeout-Ms: 60000' -H 'Keepalive-Ping-Interval: 50'
check "Start: 200 application/connect+json" eval '[ "$code" = 200 ] && grep -qi "^content-type: application/connect+json" "$T/hi.hdr"'
check "the first message is start{pid}" is hi "sorted(msgs[0]['event']) == ['start'] and msgs[0]['event']['start']['pid'] > 0" True
check "stdout and stderr as base64 data events" eval '[ "$(c out "$T/hi.out" stdout)" = hi ] && [ "$(c out "$T/hi.out" stderr)" = oops ]'
check "then exactly one end: exit status 0" is hi "[m['event']['end'] for m in msgs if 'end' in m['event']]" "[{'exitCode': 0, 'exited': True, 'status': 'exit status 0'}]"
check "end is the last message" is hi "'end' in msgs[-1]['event']" True
check "then the end-of-stream frame {} and nothing else" is hi "(fr[-1], [f for f, m in fr].count(2), rest)" "((2, {}), 1, 0)"

stream bad Start "$(run 'echo out; echo bad >&2; exit 3')"
check "a non-zero exit: exitCode, status and error" is bad "msgs[-1]['event']['end']" "{'exitCode': 3, 'exited': True, 'status': 'exit status 3', 'error': 'exit status 3'}"
check "and a clean end-of-stream frame" is bad "end" "[{}]"

stream sig Start "$(run 'kill -TERM $$')"
check "death by a signal: exitCode -1, Go's 'signal: terminated'" is sig "msgs[-1]['event']['end']" "{'exitCode': -1, 'exited': False, 'status': 'signal: terminated', 'error': 'signal: terminated'}"

# ---- users, cwd, envs ------------------------------------------------------------------------------
stream who Start "$(run 'id -un; pwd; echo $SBX_VAR $OVER $MINE')"
check "default user 'user' in its home; the sandbox's envVars" eval '[ "$(c out "$T/who.out" stdout | tr "\n" " ")" = "user /home/user from-create create " ]'
stream root Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","id -un; pwd; echo $OVER $MINE"],"envs":{"OVER":"request","MINE":"x y"},"cwd":"/tmp"},"stdin":false}' \
    -H 'Authorization: Basic cm9vdDo='
check "Authorization Basic root, cwd, request envs win" eval '[ "$(c out "$T/root.out" stdout | tr "\n" " ")" = "root /tmp request x y " ]'
stream envb Start "$(run 'echo $LANG $HOME $USER $LOGNAME; command -v ls')"
check "the base environment: LANG, HOME, USER, LOGNAME, PATH" eval '[ "$(c out "$T/envb.out" stdout | tr "\n" " ")" = "C.UTF-8 /home/user user user /usr/bin/ls " ]'
stream rel Start '{"process":{"cmd":"pwd","cwd":"~"}}'
check "cwd ~ is the home; cmd without args" eval '[ "$(c out "$T/rel.out" stdout)" = /home/user ]'
stream nocwd Start '{"process":{"cmd":"pwd","cwd":"/nope/x"}}'
check "a missing cwd: 200, no start, invalid_argument in the end-of-stream frame" is nocwd "(len(fr), end)" "(1, [{'error': {'code': 'invalid_argument', 'message': \"cwd '/nope/x' does not exist\"}}])"
LONG=$(python3 -c "print('/' + 'é' * 300)")
stream longcwd Start "{\"process\":{\"cmd\":\"true\",\"cwd\":\"$LONG\"}}"
check "a missing cwd too long for the agent's message: still invalid_argument, valid UTF-8" is longcwd "end[0]['error']['code']" invalid_argument
stream bob Start '{"process":{"cmd":"true"}}' -H 'Authorization: Basic Ym9iOg=='
check "an unknown user: unauthenticated \"invalid username: 'bob'\"" is bob "end" "[{'error': {'code': 'unauthenticated', 'message': \"invalid username: 'bob'\"}}]"
stream nulls Start '{"process":{"cmd":"echo","args":["null","is","default"],"envs":null,"cwd":null},"pty":null,"tag":null,"stdin":null}'
check "explicit nulls are default values" eval '[ "$(c out "$T/nulls.out" stdout)" = "null is default" ]'
stream nocmd Start '{"process":{"args":["x"]}}'
check "no cmd: invalid_argument" is nocmd "end[0]['error']['code']" invalid_argument

# ---- big and binary output ----------------------------------------------------------------
stream big Start "$(run 'head -c 5000000 /dev/urandom > /tmp/big; cat /tmp/big')"
stream bigsum Start "$(run 'sha256sum < /tmp/big')"
check "5 MB of binary stdout arrives intact" eval '[ "$(c out "$T/big.out" stdout | sha256sum)" = "$(c out "$T/bigsum.out" stdout)" ]'
check "in chunks of at most 32 KiB" is big "max(len(m['event']['data']['stdout']) for m in msgs if 'data' in m['event']) <= 4 * 32768 // 3 + 4" True

# ---- keepalive -------------------------------------------------------------------------------
stream ka Start "$(run 'sleep 2.5; echo done')" -H 'Keepalive-Ping-Interval: 1'
check "keepalives when idle (Keepalive-Ping-Interval: 1)" is ka "sum('keepalive' in m['event'] for m in msgs) >= 1" True
check "start still first, end still last" is ka "('start' in msgs[0]['event'], 'end' in msgs[-1]['event'])" "(True, True)"

# ---- Connect-Timeout-Ms: the process lifetime --------------------------------------------------
stream to Start "$(run 'echo before; sleep 30')" -H 'Connect-Timeout-Ms: 500'
check "past Connect-Timeout-Ms: killed, end 'signal: killed'" is to "msgs[-1]['event']['end']['status']" "signal: killed"
check "and deadline_exceeded in the end-of-stream frame" is to "end[0]['error']['code']" deadline_exceeded
bgstream tobg Start "$(run 'sleep 30')" -H 'Connect-Timeout-Ms: 1500'
until_ "the timed process to start" started tobg
P=$(pid_of tobg)
kill $bgpid; wait $bgpid 2>/dev/null
check "the client left: the process is still listed" listed "$P"
check "the timeout still kills it after the client left" until_ "pid $P to go" gone "$P"

# ---- background: stdin, list, connect, signal ---------------------------------------------------
bgstream cat Start '{"process":{"cmd":"/bin/bash","args":["-l","-c","cat"]}}'
until_ "cat to start" started cat
P=$(pid_of cat)
unary List '{}'
check "List: the process with its config" eval '[ "$(j "[(p['\''config'\''], p['\''pid'\'']) for p in j['\''processes'\''] if p['\''pid'\''] == $P]")" = "[({'\''cmd'\'': '\''/bin/bash'\'', '\''args'\'': ['\''-l'\'', '\''-c'\'', '\''cat'\''], '\''envs'\'': {}, '\''cwd'\'': '\''/home/user'\''}, $P)]" ]'
unary SendInput "{\"process\":{\"pid\":$P},\"input\":{\"stdin\":\"$(printf 'line one\n' | base64)\"}}"
check "SendInput: 200 {}" eval '[ "$code" = 200 ] && [ "$(cat "$T/body")" = "{}" ]'
check "cat echoes it" until_ "cat's output" has_output cat stdout "line one"
unary SendInput '{"process":{"pid":999999},"input":{"stdin":"eA=="}}'
check "SendInput to an unknown pid: 404 not_found" eval '[ "$code" = 404 ] && [ "$(j "j['\''code'\'']")" = not_found ]'
unary CloseStdin "{\"process\":{\"pid\":$P}}"
check "CloseStdin: 200 {}" [ "$code" = 200 ]
wait $bgpid
check "cat ends at end of file: exit status 0 and the end-of-stream frame" is cat "(msgs[-1]['event']['end']['status'], end)" "('exit status 0', [{}])"

bgstream sl Start "$(run 'for i in $(seq 1 300); do echo tick $i; sleep 0.2; done')" -H 'Keepalive-Ping-Interval: 1'
until_ "the ticker to start" started sl
P=$(pid_of sl)
kill $bgpid; wait $bgpid 2>/dev/null
check "a disconnect leaves the process running" listed "$P"
bgstream chatty Start "$(run 'sleep 0.5; head -c 3000000 /dev/zero; echo written > /tmp/chatty')" -H 'Connect-Timeout-Ms: 0'
until_ "the chatty process to start" started chatty
Q=$(pid_of chatty)
kill $bgpid; wait $bgpid 2>/dev/null
check "after a disconnect the output is read and dropped: a chatty process does not block" \
    until_ "pid $Q to finish" gone "$Q"
stream chatty2 Start "$(run 'cat /tmp/chatty')"
check "and it ran to its end" eval '[ "$(c out "$T/chatty2.out" stdout)" = written ]'
bgstream con Connect "{\"process\":{\"pid\":$P}}"
conpid=$bgpid
until_ "Connect's start" started con
check "Connect: start{pid} first" is con "msgs[0]['event']" "{'start': {'pid': $P}}"
check "then later output" until_ "output after connect" has_output con stdout "tick"
stream con404 Connect '{"process":{"pid":999999}}'
check "Connect to an unknown pid: not_found in the end-of-stream frame" is con404 "end" "[{'error': {'code': 'not_found', 'message': 'process with pid 999999 not found'}}]"
bgstream con2 Connect "{\"process\":{\"pid\":$P}}"
con2pid=$bgpid
until_ "the second Connect" started con2
check "a second Connect follows along: it gets later output" until_ "output on the second" has_output con2 stdout "tick"
n=$(lines con)
check "and so does the first, still open" until_ "more output on the first" more_than con "$n"
unary SendSignal "{\"process\":{\"pid\":$P},\"signal\":\"SIGNAL_SIGKILL\"}"
check "SendSignal SIGKILL: 200 {}" eval '[ "$code" = 200 ] && [ "$(cat "$T/body")" = "{}" ]'
wait $conpid $con2pid
check "both Connect streams end with 'signal: killed'" eval 'killed_end con && killed_end con2'
check "the pid is gone" gone "$P"
unary SendSignal "{\"process\":{\"pid\":$P},\"signal\":\"SIGNAL_SIGKILL\"}"
check "SendSignal to a finished pid: 404 not_found" eval '[ "$code" = 404 ] && [ "$(j "j['\''code'\'']")" = not_found ]'
unary SendSignal '{"process":{"pid":1},"signal":"SIGNAL_UNSPECIFIED"}'
check "SendSignal without a signal: 400 invalid_argument" [ "$code" = 400 ]
bgstream src2 Start "$(run 'for i in $(seq 1 600); do echo tock $i; sleep 0.1; done')" -H 'Connect-Timeout-Ms: 0'
srcpid=$bgpid
until_ "the second ticker to start" started src2
P=$(pid_of src2)
bgstream sub2 Connect "{\"process\":{\"pid\":$P}}"
until_ "the follower to start" started sub2
kill $srcpid; wait $srcpid 2>/dev/null
n=$(lines sub2)
check "the Start client leaves: a follower still gets the output" until_ "more on the follower" more_than sub2 "$n"
kill $bgpid; wait $bgpid 2>/dev/null
bgstream sub3 Connect "{\"process\":{\"pid\":$P}}"
until_ "another follower to start" started sub3
check "both gone, a new Connect still gets the output" until_ "output on sub3" has_output sub3 stdout tock
unary SendSignal "{\"process\":{\"pid\":$P},\"signal\":\"SIGNAL_SIGTERM\"}"
wait $bgpid
check "and the end" is sub3 "(msgs[-1]['event']['end']['status'], end)" "('signal: terminated', [{}])"
G="/tmp/go-$(basename "$T")"
bgstream fast Start "$(run "head -c 8000000 /dev/urandom > /tmp/r; until [ -e $G ]; do sleep 0.05; done; cat /tmp/r")" -H 'Connect-Timeout-Ms: 0'
fastpid=$bgpid
until_ "the big writer to start" started fast
bgstream slow Connect "{\"process\":{\"pid\":$(pid_of fast)}}" --limit-rate 3M
until_ "the slow follower to start" started slow
stream go Start "$(run "touch $G")"
wait $fastpid $bgpid
stream rsum Start "$(run 'sha256sum < /tmp/r')"
check "8 MB to a fast and a slow (rate-limited) reader: both intact" \
    eval '[ "$(c out "$T/fast.out" stdout | sha256sum)" = "$(c out "$T/rsum.out" stdout)" ] && [ "$(c out "$T/slow.out" stdout | sha256sum)" = "$(c out "$T/rsum.out" stdout)" ]'
bgstream term Start "$(run 'sleep 30')"
until_ "sleep to start" started term
unary SendSignal "{\"process\":{\"pid\":$(pid_of term)},\"signal\":15}"
wait $bgpid
check "SendSignal 15 (a number): 'signal: terminated'" is term "msgs[-1]['event']['end']['status']" "signal: terminated"

# ---- PTY -----------------------------------------------------------------------------------
bgstream pty Start '{"process":{"cmd":"/bin/bash","args":["-i","-l"],"envs":{"TERM":"xterm-256color"}},"pty":{"size":{"cols":80,"rows":24}}}'
until_ "the pty shell to start" started pty
P=$(pid_of pty)
unary SendInput "{\"process\":{\"pid\":$P},\"input\":{\"pty\":\"$(printf 'stty size; echo pty-$((6*7))\n' | base64)\"}}"
check "PTY: output as data.pty" until_ "pty output" has_output pty pty "pty-42"
check "at the requested size" has_output pty pty "24 80"
unary Update "{\"process\":{\"pid\":$P},\"pty\":{\"size\":{\"cols\":100,\"rows\":30}}}"
check "Update (resize): 200 {}" [ "$code" = 200 ]
unary SendInput "{\"process\":{\"pid\":$P},\"input\":{\"pty\":\"$(printf 'stty size\n' | base64)\"}}"
check "the new size holds" until_ "the new size" has_output pty pty "30 100"
check "no stdout or stderr events on a PTY" is pty "any('stdout' in m['event'].get('data', {}) or 'stderr' in m['event'].get('data', {}) for m in msgs)" False
unary Update "{\"process\":{\"pid\":$(pid_of cat 2>/dev/null || echo 1)},\"pty\":{\"size\":{\"cols\":1,\"rows\":1}}}"
unary SendSignal "{\"process\":{\"pid\":$P},\"signal\":\"SIGNAL_SIGKILL\"}"
wait $bgpid
check "kill ends the PTY stream with 'signal: killed'" is pty "msgs[-1]['event']['end']['status']" "signal: killed"

# ---- errors --------------------------------------------------------------------------------
unary Nope '{}'
check "an unknown method: unimplemented" eval '[ "$code" = 501 ] && [ "$(j "j['\''code'\'']")" = unimplemented ]'
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "E2b-Sandbox-Id: $SB" -H 'X-Access-Token: wrong' \
    -H 'Content-Type: application/json' --data-binary '{}' "$U/process.Process/List")
check "a wrong access token: 502, as an unknown sandbox (no existence oracle)" [ "$code" = 502 ]
unary SendInput '{"process":{"tag":"x"},"input":{"stdin":"eA=="}}'
check "a tag selector: invalid_argument" [ "$code" = 400 ]

# ---- audit ----------------------------------------------------------------------------------
check "exec.start and exec.end audited with argv, user and exit" \
    q "import sys; rows = [(k, json.loads(d)) for k, d in c.execute(\"select kind, detail from audit where sandbox = '$SB' and kind in ('exec.start', 'exec.end')\")]; sys.exit(0 if any(k == 'exec.start' and d['cmd'] == ['/bin/bash', '-l', '-c', 'echo hi; echo oops >&2'] and d['user'] == 'user' for k, d in rows) and any(k == 'exec.end' and d.get('exit_code') == 3 for k, d in rows) else 1)"

# ---- the daemon stops: open streams end cleanly, the process goes on --------------------------
bgstream drain Start "$(run 'sleep 600')" -H 'Connect-Timeout-Ms: 0'
until_ "the last stream to start" started drain
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
check "the daemon stops cleanly on SIGTERM with a stream open" [ $rc -eq 0 ]
wait $bgpid
check "the open stream ended with unavailable in its end-of-stream frame" is drain "(len(end), end[0]['error']['code'], rest)" "(1, 'unavailable', 0)"

summary
