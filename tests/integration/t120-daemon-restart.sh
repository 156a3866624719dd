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

# live_procs UID: the processes of that uid but zombies (an adopted init that ended is the
# host's init's to reap, which it does about once a second here, later under load)
live_procs() { ps -o pid=,stat= -u "$1" | awk '$2 !~ /^Z/ { print $1 }'; }
# the first daemon: no --kill-on-exit, sandboxes outlive it; a warm pool of 3
"$D" --state-dir "$STATE" --runtime-dir "$RUN" --pool 3 2>"$T/daemon1.log" &
DPID=$!
for i in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] && break
    sleep 0.05
done
post /v1/sandboxes '{"id":"keep","memory":"128M","pids":50}' > "$T/keep.json"
post /v1/sandboxes '{"id":"dies"}' > "$T/dies.json"
post /v1/sandboxes '{"id":"orphan"}' > "$T/orphan.json"
post /v1/sandboxes/keep/exec '{"shell":"echo persisted > /home/user/f"}' > /dev/null
# a process that is streaming when the daemon dies
curl -s -N --max-time 30 --unix-socket "$S" -X POST \
    -d '{"shell":"for i in $(seq 20); do echo tick $i; sleep 0.1; done > /tmp/ticks"}' \
    http://glovebox/v1/sandboxes/keep/exec > "$T/stream" &
CURL=$!
# and one that runs until told to stop, to attach to after the restart
curl -s -N --max-time 30 --unix-socket "$S" -X POST \
    -d '{"shell":"while [ ! -e /tmp/stop ]; do echo alive; sleep 0.1; done; echo bye; exit 7"}' \
    http://glovebox/v1/sandboxes/keep/exec > "$T/stream2" &
CURL2=$!
for i in $(seq 100); do
    [ "$(curl -s --unix-socket "$S" http://glovebox/metrics | awk '$1 == "glovebox_sandboxes{state=\"pooled\"}" {print $2}')" = 3 ] && break
    sleep 0.05
done
sleep 0.3
proc2=$(head -n 1 "$T/stream2" | python3 -c "import json, sys; print(json.load(sys.stdin)['process'])")
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
wait "$CURL" 2>/dev/null
wait "$CURL2" 2>/dev/null
keep_uid=$(python3 -c "import json; print(json.load(open('$T/keep.json'))['host_uid'])")
dies_uid=$(python3 -c "import json; print(json.load(open('$T/dies.json'))['host_uid'])")
check "the sandboxes run on without their daemon" [ -n "$(ps -o pid= -u "$keep_uid")" ]
orphan_uid=$(python3 -c "import json; print(json.load(open('$T/orphan.json'))['host_uid'])")
# one sandbox dies while no daemon is there
pkill -9 -u "$dies_uid"
# and one loses its record, as when a daemon dies between creating a sandbox and writing it
python3 -c "
import sqlite3
c = sqlite3.connect('$STATE/glovebox.db')
c.execute(\"delete from sandboxes where id = 'orphan'\")
c.commit()"
# and a hibernate image that no sandbox has (its row removed while no daemon ran)
mkdir -p "$STATE/hibernate/sb-0000ghost000"
head -c 1048576 /dev/zero > "$STATE/hibernate/sb-0000ghost000/pages-1.img"
sleep 0.3

# the next daemon keeps a smaller pool: it adopts two pooled sandboxes and destroys the third
pooled_uids=$(python3 -c "
import sqlite3
print(' '.join(str(u) for (u,) in sqlite3.connect('$STATE/glovebox.db').execute(\"select host_uid from sandboxes where state = 'pooled'\")))")
start_daemon --pool 2
check "the pool's sandboxes were recorded" [ "$(echo $pooled_uids | wc -w)" = 3 ]
for i in $(seq 50); do [ -e "$STATE/hibernate/sb-0000ghost000" ] || break; sleep 0.1; done
check "a hibernate image of no sandbox is removed at start, saying so" eval \
    "[ ! -e '$STATE/hibernate/sb-0000ghost000' ] && grep -q \"hibernate image of 'sb-0000ghost000': no sandbox has it\" '$T/daemon.log'"
# (an adopted init is not our child: the host's init reaps the destroyed one a moment later)
for i in $(seq 200); do
    pooled_left=0
    for u in $pooled_uids; do [ -n "$(live_procs "$u")" ] && pooled_left=$((pooled_left + 1)); done
    [ $pooled_left = 2 ] && break
    sleep 0.05
done
[ $pooled_left = 2 ] ||
    for u in $pooled_uids; do echo "# uid $u: $(ps -o pid=,stat=,comm= -u "$u" | tr '\n' ' ')"; done
check "two pooled sandboxes are adopted, the extra one destroyed" [ $pooled_left = 2 ]
check "the pool counts the adopted ones" \
    [ "$(curl -s --unix-socket "$S" http://glovebox/metrics | awk '$1 == "glovebox_sandboxes{state=\"pooled\"}" {print $2}')" = 2 ]
curl -s -N --max-time 30 --unix-socket "$S" "http://glovebox/v1/sandboxes/keep/processes/$proc2/stream" > "$T/attached" &
CURL3=$!
sleep 0.5
post /v1/sandboxes/keep/exec '{"cmd":["touch","/tmp/stop"]}' > /dev/null
wait "$CURL3"
check "attaching to a process that ran across the restart streams its output" grep -q '"type":"stdout"' "$T/attached"
check "and its exit" [ "$(tail -n 1 "$T/attached")" = '{"type":"exit","exit_code":7}' ]
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
check "the dead sandbox's cgroups are gone" [ -z "$(find /sys/fs/cgroup -maxdepth 4 -name '*dies' 2>/dev/null)" ]
check "the loss is logged" grep -q "sandbox 'dies' did not survive" "$T/daemon.log"
for i in $(seq 200); do [ -z "$(live_procs "$orphan_uid")" ] && break; sleep 0.05; done
[ -z "$(live_procs "$orphan_uid")" ] || echo "# left of 'orphan': $(ps -o pid=,stat=,comm= -u "$orphan_uid" | tr '\n' ' ')"
check "a sandbox without a record is removed" \
    eval '[ -z "$(live_procs "$orphan_uid")" ] && [ ! -e "$RUN/sandboxes/orphan" ]'
check "and that is logged" grep -q "removed sandbox 'orphan': it had no record" "$T/daemon.log"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" -X DELETE http://glovebox/v1/sandboxes/keep)
check "an adopted sandbox can be deleted" [ "$code" = 204 ]
# (an adopted init is not our child: the host's init reaps it, a moment later)
for i in $(seq 200); do [ -z "$(live_procs "$keep_uid")" ] && break; sleep 0.05; done
[ -z "$(live_procs "$keep_uid")" ] || echo "# left of 'keep': $(ps -o pid=,stat=,comm= -u "$keep_uid" | tr '\n' ' ')"
check "and leaves nothing" eval '[ -z "$(live_procs "$keep_uid")" ] && [ ! -e "$RUN/sandboxes/keep" ]'
settle
python3 -c "
import sqlite3
c = sqlite3.connect('$STATE/glovebox.db')
kinds = [k for (k,) in c.execute('select kind from audit order by seq')]
print(' '.join(k for k in kinds if k.startswith('sandbox.')))" > "$T/kinds"
cat "$T/kinds" | sed "s/^/# /"
check "the audit log tells the story" \
    grep -q "sandbox.create sandbox.create sandbox.create sandbox.adopt sandbox.lost sandbox.orphan sandbox.delete" "$T/kinds"
"$BUILD/glovebox" audit verify --state-dir "$STATE" > /dev/null
check "and its chain is intact" [ $? -eq 0 ]
# a graceful stop ends open streams cleanly, saying why and which process to attach to later
post /v1/sandboxes '{"id":"last"}' > /dev/null
curl -s -N --max-time 30 --unix-socket "$S" -X POST -d '{"cmd":["sleep","30"]}' \
    http://glovebox/v1/sandboxes/last/exec > "$T/last" &
CURL4=$!
sleep 0.5
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
wait "$CURL4"
check "a stream open at SIGTERM ends cleanly (the client sees a complete reply)" [ $? -eq 0 ]
check "with an error event naming the process" \
    python3 -c "import json; e = json.loads(open('$T/last').read().splitlines()[-1]); assert e['type'] == 'error' and 'stopping' in e['message'] and e['process'] > 0"
check "the daemon stops cleanly" [ $rc -eq 0 ]
summary
