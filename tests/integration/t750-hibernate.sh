#!/bin/sh
# Hibernate through the daemon: a process holding a counter in memory is checkpointed (its
# processes are gone, its image on disk, the sandbox listed as hibernated and refusing work
# until resumed), woken with the counter continuing, hibernated again and woken by a new
# daemon after the first one was killed; deleting a hibernated sandbox removes its image;
# without CRIU hibernate is a clear 503 and pause still works.
NAME=hibernate
. "$(dirname "$0")/../lib/daemon.sh"
# a daemon that leaves its sandboxes running when stopped (restart checks)
start_kept() {
    "$D" --state-dir "$STATE" --runtime-dir "$RUN" 2>>"$T/daemon.log" &
    DPID=$!
    for i in $(seq 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] && return 0
        sleep 0.05
    done
    echo "gloveboxd did not start"; cat "$T/daemon.log"; exit 1
}
sh_in() {
    req POST "/v1/sandboxes/$1/exec" "$(python3 -c 'import json,sys; print(json.dumps({"shell":sys.argv[1],"wait":True}))' "$2")"
    out=$(field "j.get('stdout','').rstrip(chr(10))")
}
start_kept
hibernate_capability

if [ "$CRIU_OK" = 1 ]; then
req POST /v1/sandboxes '{}'
SB=$(field "j['id']")
HUID=$(field "j['host_uid']")
sh_in "$SB" 'nohup python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1 & echo kept > /home/user/file; nohup sh -c "i=0; while :; do i=\$((i+1)); echo \$i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.02; done" >/dev/null 2>&1 & sleep 0.3; cat /tmp/c'
before=$out
req POST "/v1/sandboxes/$SB/hibernate" '{}'
check "hibernate answers the sandbox, hibernated" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = hibernated ]"
check "its processes are gone from the host" no_procs "$HUID"
check "its image is on disk" [ -d "$STATE/hibernate/$SB" ]
req POST "/v1/sandboxes/$SB/exec" '{"shell":"true","wait":true}'
check "a hibernated sandbox refuses work until resumed (409)" [ "$code" = 409 ]
req GET /v1/sandboxes
check "it is listed as hibernated" [ "$(field "[s['state'] for s in j['sandboxes'] if s['id'] == '$SB'][0]")" = hibernated ]
req POST "/v1/sandboxes/$SB/hibernate" '{}'
check "hibernate again is fine (idempotent)" [ "$code" = 200 ]
req POST "/v1/sandboxes/$SB/resume" '{}'
sed "s/^/# /" "$T/body"; echo
check "resume wakes it" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = running ]"
sleep 0.3
sh_in "$SB" 'cat /tmp/c /home/user/file'
check "the counter held in memory continues ($before -> $(echo "$out" | head -1))" eval "[ \"\$(echo \"\$out\" | head -1)\" -gt '$before' ]"
check "files written before are there" [ "$(echo "$out" | tail -1)" = kept ]
sh_in "$SB" 'python3 -c "import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:8080/\").status)"'
check "a server listening inside (a dev server) answers after the wake" [ "$out" = 200 ]
check "its image is removed once it runs again" eval "for i in \$(seq 50); do [ -d '$STATE/hibernate/$SB' ] || break; sleep 0.05; done; [ ! -d '$STATE/hibernate/$SB' ]"

# across a daemon restart
sh_in "$SB" 'cat /tmp/c'
before=$out
req POST "/v1/sandboxes/$SB/hibernate" '{}'
check "hibernated again" [ "$(field "j['state']")" = hibernated ]
kill -9 "$DPID"; wait "$DPID" 2>/dev/null
start_kept
req GET "/v1/sandboxes/$SB"
check "a new daemon knows it as hibernated" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = hibernated ]"
req POST /v1/sandboxes '{}'
OTHER=$(field "j['id']")
check "new sandboxes do not take its uid range" [ "$(field "j['host_uid']")" != "$HUID" ]
req POST "/v1/sandboxes/$SB/resume" '{}'
sed "s/^/# /" "$T/body"; echo
check "the new daemon wakes it" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = running ]"
sleep 0.3
sh_in "$SB" 'cat /tmp/c'
check "and the counter continues after the restart ($before -> $out)" eval "[ '$out' -gt '$before' ]"

# deleting a hibernated sandbox removes its image
req POST "/v1/sandboxes/$SB/hibernate" '{}'
req DELETE "/v1/sandboxes/$SB"
check "a hibernated sandbox can be deleted" [ "$code" = 204 ]
check "and its image goes" eval "for i in \$(seq 50); do [ -d '$STATE/hibernate/$SB' ] || break; sleep 0.05; done; [ ! -d '$STATE/hibernate/$SB' ]"
req DELETE "/v1/sandboxes/$OTHER"
else
    echo "# only the behaviour without hibernate is checked here"
fi

# without CRIU: a clear error, and pause still works
kill "$DPID"; wait "$DPID" 2>/dev/null
DPID=
GLOVEBOX_CRIU=/nonexistent/criu start_kept
req POST /v1/sandboxes '{}'
SB2=$(field "j['id']")
req POST "/v1/sandboxes/$SB2/hibernate" '{}'
check "without CRIU, hibernate is 503 and says why" eval "[ '$code' = 503 ] && grep -qi criu '$T/body'"
req GET "/v1/sandboxes/$SB2"
check "and the sandbox still runs" [ "$(field "j['state']")" = running ]
req POST "/v1/sandboxes/$SB2/pause" '{}'
check "pause still works" [ "$(field "j['state']")" = paused ]
req DELETE "/v1/sandboxes/$SB2"

# a daemon stopped while it probes CRIU does not wait for the probe (issue 16 #9: up to 15 s
# where dumps hang): a criu whose dump never returns, a fresh state dir (no cached answer)
kill "$DPID"; wait "$DPID" 2>/dev/null
DPID=
FAKE="$T/hang-criu"
printf '#!/bin/sh\ncase "$1" in --version) echo "Version: 4.1" ;; *) exec sleep 601 ;; esac\n' >"$FAKE"
chmod +x "$FAKE"
STATE="$T/state-probe"
mkdir -p "$STATE"
GLOVEBOX_CRIU="$FAKE" start_kept
for i in $(seq 100); do pgrep -fx "sleep 601" >/dev/null && break; sleep 0.05; done
check "the probe's criu is in its dump, which never returns" pgrep -fx "sleep 601"
req GET /healthz
check "hibernate: probing" [ "$(field "j['capabilities']['hibernate']['state']")" = probing ]
kill -TERM "$DPID"
# bounded: the test fails rather than wait the probe's 15 s out
for i in $(seq 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.05; done
check "SIGTERM during the probe: the daemon is gone within 5 s" eval "! kill -0 $DPID 2>/dev/null"
wait "$DPID" 2>/dev/null
DPID=
check "having said 'stopped'" eval "tail -n 1 '$T/daemon.log' | grep -q 'info stopped'"
check "and nothing about hibernate's availability (nothing was found out)" eval "! grep -q 'hibernate: unavailable on this host: not known' '$T/daemon.log'"
check "the probe's criu is gone" eval "! pgrep -fx 'sleep 601' >/dev/null"
check "no answer was kept: the next daemon probes again" eval "[ ! -e '$STATE/criu-probe.conf' ] && ! grep -qs '$FAKE' /run/glovebox-criu-probe.conf"
spec_check
summary
