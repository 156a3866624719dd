#!/bin/sh
# A restarted daemon takes every sandbox back in the state it was in, and answers at once:
# a paused sandbox stays paused (and resumes where it stopped), one frozen for a snapshot
# when its daemon was killed runs again, one whose init is too slow to answer is kept. The
# API answers while they are adopted; nothing that still runs is removed.
NAME=restart-states
. "$(dirname "$0")/../lib/daemon.sh"

sh_in() {
    req POST "/v1/sandboxes/$1/exec" "$(python3 -c 'import json,sys; print(json.dumps({"shell":sys.argv[1],"wait":True}))' "$2")"
    out=$(field "j.get('stdout','').rstrip(chr(10))")
}
state_of() { req GET "/v1/sandboxes/$1"; field "j.get('state')"; }
counting() { # a new sandbox with a counter in memory and a file: $SB, $HUID
    req POST /v1/sandboxes '{}'
    SB=$(field "j['id']")
    HUID=$(field "j['host_uid']")
    sh_in "$SB" 'echo kept > /home/user/file; nohup sh -c "i=0; while :; do i=\$((i+1)); echo \$i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.02; done" >/dev/null 2>&1 & sleep 0.2'
}
runs_on() {
    sh_in "$1" 'a=$(cat /tmp/c); sleep 0.3; b=$(cat /tmp/c); [ "$b" -gt "$a" ] && cat /home/user/file'
    [ "$code" = 200 ] && [ "$out" = kept ]
}
kept_daemon() {
    "$D" --state-dir "$STATE" --runtime-dir "$RUN" "$@" 2>>"$T/daemon-kept.log" &
    DPID=$!
    t0=$(date +%s%N)
    for i in $(seq 400); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] &&
            { up_ms=$(( ($(date +%s%N) - t0) / 1000000 )); return 0; }
        sleep 0.025
    done
    echo "gloveboxd did not start"; cat "$T/daemon-kept.log"; exit 1
}

kept_daemon
counting; P=$SB
PUID=$HUID
req POST "/v1/sandboxes/$P/pause" '{}'
counter_of() { cat "/proc/$(pgrep -n -u "$1" -f 'i=0; while')/root/tmp/c"; }
pc=$(counter_of "$PUID")
counting; F=$SB
counting; W=$SB; WUID=$HUID
# the daemon stops the way an operator stops it, with one sandbox paused
kill -TERM "$DPID"; wait "$DPID"; DPID=
kept_daemon
check "a daemon restarted with a paused sandbox answers at once (${up_ms} ms)" [ "$up_ms" -lt 5000 ]
check "the paused sandbox is kept, paused" [ "$(state_of "$P")" = paused ]
sleep 0.2
check "its processes are still frozen (counter $pc)" eval "[ -n '$pc' ] && [ \"\$(counter_of $PUID)\" = '$pc' ]"
req POST "/v1/sandboxes/$P/resume" '{}'
check "it resumes where it stopped" runs_on "$P"
check "nothing was reported lost" sh -c "! grep -q 'did not survive' '$T/daemon-kept.log'"

# killed while a snapshot holds a sandbox frozen
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
GLOVEBOX_FAULT=snapshot.copy kept_daemon
curl -s --max-time 30 --unix-socket "$S" -X POST -d '{}' "http://glovebox/v1/sandboxes/$F/snapshots" > /dev/null
wait "$DPID" 2>/dev/null; DPID=
check "the daemon died during the snapshot's copy (the fault point was reached)" grep -q "fault: 'snapshot.copy': kill" "$T/daemon-kept.log"
kept_daemon
check "a new daemon answers at once (${up_ms} ms)" [ "$up_ms" -lt 5000 ]
check "the sandbox frozen for the snapshot is running again" [ "$(state_of "$F")" = running ]
check "its processes, memory and files are as they were" runs_on "$F"
check "the new daemon said why it thawed it" grep -q "thawed (its daemon died while it was frozen for a snapshot)" "$T/daemon-kept.log"
req GET /v1/snapshots
check "the half-taken snapshot is not listed" [ "$(field "len(j['snapshots'])")" = 0 ]

# an init too slow to answer (stopped) when the daemon starts
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
WINIT=$(q "print(c.execute(\"select init_pid from sandboxes where id='$W'\").fetchone()[0])")
kill -STOP "$WINIT"
kept_daemon
check "with an init that does not answer, the daemon answers at once (${up_ms} ms)" [ "$up_ms" -lt 5000 ]
req GET "/v1/sandboxes/$W"
check "that sandbox is kept" [ "$code" = 200 ]
kill -CONT "$WINIT"
check "and works once its init answers again" runs_on "$W"
check "no sandbox was removed at any restart" sh -c "! grep -qE 'did not survive|is gone:' '$T/daemon-kept.log'"

for x in "$P" "$F" "$W"; do req DELETE "/v1/sandboxes/$x"; done
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
check "the daemon stops cleanly" [ $rc -eq 0 ]
check "no sanitizer report in daemon-kept.log" sh -c "! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' '$T/daemon-kept.log'"
summary
