#!/bin/sh
# gloveboxd survives its own restart: kill -9 it while sandboxes run and a process streams;
# a new daemon adopts the sandboxes (their files and processes intact, new execs work) and
# cleans up the one whose init died meanwhile.
NAME=restart
. "$(dirname "$0")/../lib/daemon.sh"

post() { curl -s --max-time 30 --unix-socket "$S" -X POST --data-binary "$2" "http://glovebox$1"; }
decode_stdout() {
    python3 -c "
import base64, json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e['type'] == 'stdout':
        sys.stdout.write(base64.b64decode(e['data']).decode())"
}

# the first daemon: no --kill-on-exit, sandboxes outlive it
"$D" --state-dir "$STATE" --runtime-dir "$RUN" 2>"$T/daemon1.log" &
DPID=$!
for i in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] && break
    sleep 0.05
done
post /v1/sandboxes '{"id":"keep","memory":"128M","pids":50}' > "$T/keep.json"
post /v1/sandboxes '{"id":"dies"}' > "$T/dies.json"
post /v1/sandboxes/keep/exec '{"shell":"echo persisted > /home/user/f"}' > /dev/null
# a process that is streaming when the daemon dies
curl -s -N --max-time 30 --unix-socket "$S" -X POST \
    -d '{"shell":"for i in $(seq 20); do echo tick $i; sleep 0.1; done > /tmp/ticks"}' \
    http://glovebox/v1/sandboxes/keep/exec > "$T/stream" &
CURL=$!
sleep 0.3
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
wait "$CURL" 2>/dev/null
keep_uid=$(python3 -c "import json; print(json.load(open('$T/keep.json'))['host_uid'])")
dies_uid=$(python3 -c "import json; print(json.load(open('$T/dies.json'))['host_uid'])")
check "the sandboxes run on without their daemon" [ -n "$(ps -o pid= -u "$keep_uid")" ]
# one sandbox dies while no daemon is there
pkill -9 -u "$dies_uid"
sleep 0.3

start_daemon
code=$(curl -s -o "$T/list" -w '%{http_code}' --unix-socket "$S" http://glovebox/v1/sandboxes)
check "the new daemon serves" [ "$code" = 200 ]
check "it lists the surviving sandbox, and only it" \
    [ "$(python3 -c "import json; print([s['id'] for s in json.load(open('$T/list'))['sandboxes']])")" = "['keep']" ]
check "its limits are remembered" \
    [ "$(python3 -c "import json; s = json.load(open('$T/list'))['sandboxes'][0]; print(s['limits']['memory'], s['limits']['pids'])")" = "134217728 50" ]
check "files written before the restart are there" \
    [ "$(post /v1/sandboxes/keep/exec '{"cmd":["cat","/home/user/f"]}' | decode_stdout)" = persisted ]
sleep 2
check "the process that was streaming ran to its end" \
    [ "$(post /v1/sandboxes/keep/exec '{"cmd":["tail","-n","1","/tmp/ticks"]}' | decode_stdout)" = "tick 20" ]
check "the dead sandbox's directory is gone" [ ! -e "$RUN/sandboxes/dies" ]
check "the dead sandbox's cgroups are gone" [ -z "$(find /sys/fs/cgroup -maxdepth 4 -name dies 2>/dev/null)" ]
check "the loss is logged" grep -q "sandbox 'dies' did not survive" "$T/daemon.log"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" -X DELETE http://glovebox/v1/sandboxes/keep)
check "an adopted sandbox can be deleted" [ "$code" = 204 ]
# (an adopted init is not our child: the host's init reaps it, a moment later)
for i in $(seq 40); do [ -z "$(ps -o pid= -u "$keep_uid")" ] && break; sleep 0.05; done
check "and leaves nothing" [ -z "$(ps -o pid= -u "$keep_uid")" ] && [ ! -e "$RUN/sandboxes/keep" ]
python3 -c "
import sqlite3
c = sqlite3.connect('$STATE/glovebox.db')
kinds = [k for (k,) in c.execute('select kind from audit order by seq')]
print(' '.join(k for k in kinds if k.startswith('sandbox.')))" > "$T/kinds"
check "the audit log tells the story" \
    grep -q "sandbox.create sandbox.create sandbox.adopt sandbox.lost sandbox.delete" "$T/kinds"
"$BUILD/glovebox" audit verify --state-dir "$STATE" > /dev/null
check "and its chain is intact" [ $? -eq 0 ]
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
check "the daemon stops cleanly" [ $rc -eq 0 ]
summary
