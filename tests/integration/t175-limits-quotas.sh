#!/bin/sh
# Every sandbox is bounded: a create that asks for nothing gets the daemon's default memory,
# pids, CPU and disk limits (seen from the host's cgroup files and felt from inside: a fork
# bomb stops, a memory hog is killed); a request above a maximum is a 400 naming the field
# and the maximum (native and E2B, sizes that would overflow too); an API key's quotas
# (live sandboxes, their memory, snapshots, sessions, artifacts) answer 429 naming the quota, for
# native and E2B creates, for creates fired at once (no overshoot), and across a restart;
# the admin socket has none; a key's own quota overrides the daemon's.
set -u
NAME=limits
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
U="http://127.0.0.1:$PORT"

# tcp KEY METHOD PATH [BODY]: sets $code, body in $T/body (native API or E2B, by the path)
tcp() {
    key=$1; m=$2; p=$3; shift 3
    code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' -X "$m" -H "X-API-Key: $key" \
        -H 'Content-Type: application/json' ${1:+--data-binary "$1"} "$U$p")
}
msg() { field "j['error']['message']" 2>/dev/null || field "j['message']"; }
# sh_in ID SCRIPT: run a shell script in the sandbox (admin socket), waiting; body: ExecResult
sh_in() {
    req POST "/v1/sandboxes/$1/exec" \
        "$(python3 -c 'import json,sys; print(json.dumps({"shell":sys.argv[1],"wait":True}))' "$2")"
}
# cg_file ID FILE: a control file of the sandbox's cgroup on the host (v1 or v2, wherever the
# daemon's own groups are)
cg_file() {
    for d in $(find /sys/fs/cgroup -maxdepth 8 -type d -name "*-$1" 2>/dev/null); do
        [ -r "$d/$2" ] && { cat "$d/$2"; return 0; }
    done
    echo "(no $2 for $1)"
}
newkey() { "$GB" apikey create "$@" --json | python3 -c "import json, sys; print(json.load(sys.stdin)['key'])"; }
count_codes() { sort "$1" | uniq -c | awk '{printf "%s:%s ", $2, $1}'; }

# ---- the daemon's own settings are checked ---------------------------------------------------
"$D" --state-dir "$T/x" --runtime-dir "$T/xr" --default-memory 16G --max-memory 8G 2>"$T/err"
rc=$?
check "a default above its maximum: the daemon refuses to start, saying which" \
    eval '[ $rc = 2 ] && grep -q "default-memory 16G is above max-memory 8G" "$T/err"'
"$D" --state-dir "$T/x" --runtime-dir "$T/xr" --quota-sandboxes lots 2>"$T/err"
rc=$?
check "a quota that is not a number: refused" eval '[ $rc = 2 ] && grep -q "quota-sandboxes must be" "$T/err"'

metric() { curl -s --max-time 10 --unix-socket "$S" http://glovebox/metrics | awk -v m="$1" '$1 == m {print $2}'; }
pool_full() {
    for i in $(seq 200); do [ "$(metric 'glovebox_sandboxes{state="pooled"}')" = 1 ] && return 0; sleep 0.05; done
    return 1
}
start_daemon --listen "127.0.0.1:$PORT" --quota-sandboxes 3 --max-memory 2G --max-timeout 1h --pool 1

# ---- defaults ----------------------------------------------------------------------------------
check "the warm pool fills" pool_full
req POST /v1/sandboxes '{}'
check "a create that asks for nothing: 201, from the warm pool" \
    eval '[ "$code" = 201 ] && grep -q "created sandbox .* (from the pool)" "$T/daemon.log"'
D1=$(field "j['id']")
check "it says the default limits: memory 512M, pids 256, 1 CPU, disk 1G" \
    [ "$(field "(j['limits']['memory'], j['limits']['pids'], j['limits']['cpus'], j['limits']['disk'])")" = "(536870912, 256, 1.0, 1073741824)" ]
check "and the maximum timeout, as it asked for none" [ "$(field "j['expires_at'] is not None")" = True ]
check "the kernel holds its pids limit (pids.max 256)" [ "$(cg_file "$D1" pids.max)" = 256 ]
mem=$(cg_file "$D1" memory.limit_in_bytes)
case "$mem" in "(no"*) mem=$(cg_file "$D1" memory.max) ;; esac
check "the kernel holds its memory limit (512M)" [ "$mem" = 536870912 ]
# forks until the kernel refuses (children sleep), says how many, kills them
cat > "$T/bomb.sh" <<'EOF'
python3 -c '
import os, signal, time
kids = []
for i in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
print(len(kids))
for k in kids:
    os.kill(k, signal.SIGKILL)
'
EOF
sh_in "$D1" "$(cat "$T/bomb.sh")"
n=$(field "j['stdout'].strip()")
check "a fork bomb inside stops at the default pids limit ($n of 300 forks, fewer than 256)" \
    eval '[ "$code" = 200 ] && [ "$n" -lt 256 ] && [ "$n" -ge 200 ]'
sh_in "$D1" 'python3 -c "b = b\"x\" * (768 << 20); print(len(b))"; echo "rc=$?"'
check "a memory hog inside is killed at the default memory limit" \
    eval '[ "$code" = 200 ] && [ "$(field "j['"'"'stdout'"'"'].strip()")" = rc=137 ]'
req DELETE "/v1/sandboxes/$D1"

# ---- maximums ----------------------------------------------------------------------------------
req POST /v1/sandboxes '{"memory":9223372036854775807}'
check "memory 9223372036854775807: 400 naming the field and the maximum" \
    eval '[ "$code" = 400 ] && [ "$(msg)" = "'"'memory' 9223372036854775807 exceeds this daemon's maximum of 2G"'" ]'
req POST /v1/sandboxes '{"memory":"3G"}'
check "memory 3G above --max-memory 2G: 400" eval '[ "$code" = 400 ] && msg | grep -q "maximum of 2G"'
req POST /v1/sandboxes '{"disk":"1000000T"}'
check "disk 1000000T: 400 naming disk and its maximum (64G)" \
    eval '[ "$code" = 400 ] && [ "$(msg)" = "'"'disk' 1000000T exceeds this daemon's maximum of 64G"'" ]'
req POST /v1/sandboxes '{"disk":"100000000T"}'
check "disk 100000000T (more than 64 bits hold): 400, not a wrapped size" \
    eval '[ "$code" = 400 ] && msg | grep -q "^'"'disk'"' 100000000T is too large"'
req POST /v1/sandboxes '{"memory":"99999999999999999999"}'
check "memory of 20 digits: 400" eval '[ "$code" = 400 ] && msg | grep -q "'"'memory'"'"'
req POST /v1/sandboxes '{"pids":5000}'
check "pids 5000: 400 (maximum 4096)" eval '[ "$code" = 400 ] && msg | grep -q "'"'pids'"' 5000 exceeds this daemon.s maximum of 4096"'
req POST /v1/sandboxes "{\"cpus\":$(($(nproc) + 1))}"
check "more CPUs than the host has: 400" eval '[ "$code" = 400 ] && msg | grep -q "'"'cpus'"'.*maximum of $(nproc)"'
req POST /v1/sandboxes '{"timeout":7200}'
check "a timeout above --max-timeout 1h: 400" eval '[ "$code" = 400 ] && msg | grep -q "'"'timeout'"' 7200s exceeds this daemon.s maximum of 3600s"'
req POST /v1/sandboxes '{"timeout":0}'
check "no timeout at all, with a maximum: 400" eval '[ "$code" = 400 ] && msg | grep -q "no timeout"'
req POST /v1/sandboxes '{"id":"big","memory":"2G","pids":4096,"timeout":3600}'
check "at the maximums: 201" [ "$code" = 201 ]
req POST /v1/sandboxes/big/timeout '{"timeout":"2h"}'
check "a later timeout above the maximum: 400" eval '[ "$code" = 400 ] && msg | grep -q "maximum of 3600s"'
req DELETE /v1/sandboxes/big

A=$(newkey team-a)
B=$(newkey team-b)
tcp "$A" POST /v2/sandboxes '{"templateID":"base","timeout":7200}'
check "E2B create above --max-timeout: 400 in E2B's shape" \
    eval '[ "$code" = 400 ] && [ "$(field "j['"'"'code'"'"']")" = 400 ] && field "j['"'"'message'"'"']" | grep -q "maximum of 3600s"'

# ---- quotas: live sandboxes --------------------------------------------------------------------
for i in 1 2 3; do
    tcp "$A" POST /v1/sandboxes "{\"id\":\"a$i\"}"
    [ "$code" = 201 ] || echo "# a$i: $code $(cat "$T/body")"
done
tcp "$A" POST /v1/sandboxes '{"id":"a4"}'
check "key A's 4th live sandbox (--quota-sandboxes 3): 429 naming the quota, its limit and use" \
    eval '[ "$code" = 429 ] && msg | grep -q "^quota '"'sandboxes'"' of key '"'team-a'"' reached: 3 of 3 live sandboxes"'
tcp "$B" POST /v1/sandboxes '{"id":"b1"}'
check "key B still creates" [ "$code" = 201 ]
req POST /v1/sandboxes '{"id":"adm1"}'
check "the admin socket has no quota" [ "$code" = 201 ]
tcp "$A" POST /v2/sandboxes '{"templateID":"base","timeout":60}'
check "an E2B create over the quota: 429 in E2B's shape" \
    eval '[ "$code" = 429 ] && [ "$(field "j['"'"'code'"'"']")" = 429 ] && field "j['"'"'message'"'"']" | grep -q "quota '"'sandboxes'"'"'
tcp "$A" DELETE /v1/sandboxes/a1
check "deleting one of A's" [ "$code" = 204 ]
tcp "$A" POST /v2/sandboxes '{"templateID":"base","timeout":600}'
check "frees a slot: an E2B create takes it" [ "$code" = 201 ]
E1=$(field "j['sandboxID']")
tcp "$A" POST /v1/sandboxes '{"id":"a5"}'
check "and the E2B sandbox counts: the next native create is 429" [ "$code" = 429 ]

# ---- concurrent creates: reserved at admission, no overshoot ------------------------------------
C=$(newkey team-c --quota sandboxes=3)
"$GB" apikey quota team-c --json > "$T/q.json"
check "a key's own quota is shown (sandboxes 3; the daemon's others)" \
    [ "$(python3 -c "import json; j = json.load(open('$T/q.json')); print(j['own'], j['quota']['sandboxes'], j['quota']['memory'])")" = "sandboxes=3 3 34359738368" ]
: > "$T/codes"
cpids=
for i in $(seq 8); do
    curl -s --max-time 60 -o /dev/null -w '%{http_code}\n' -X POST -H "X-API-Key: $C" \
        -H 'Content-Type: application/json' --data-binary '{}' "$U/v1/sandboxes" >> "$T/codes" &
    cpids="$cpids $!"
done
for p in $cpids; do wait "$p"; done
check "8 creates at once for a quota of 3: three 201, five 429 ($(count_codes "$T/codes"))" \
    [ "$(count_codes "$T/codes")" = "201:3 429:5 " ]
tcp "$C" GET /v1/sandboxes
check "and key C has exactly 3 sandboxes" [ "$(field "len(j['sandboxes'])")" = 3 ]

# ---- quotas: memory, snapshots, sessions (a key's own) -----------------------------------------
M=$(newkey team-m --quota memory=1G,snapshots=1,sessions=1,sandboxes=10,artifacts=1)
tcp "$M" POST /v1/sandboxes '{"id":"m1","memory":"512M"}'
tcp "$M" POST /v1/sandboxes '{"id":"m2","memory":"512M"}'
check "two of 512M fit a memory quota of 1G" [ "$code" = 201 ]
tcp "$M" POST /v1/sandboxes '{"id":"m3","memory":"64M"}'
check "a third: 429 naming the memory quota" \
    eval '[ "$code" = 429 ] && msg | grep -q "^quota '"'memory'"' of key '"'team-m'"' reached: 1G of 1G"'
tcp "$M" POST /v1/sandboxes/m1/snapshots '{}'
check "a snapshot within the quota: 201" [ "$code" = 201 ]
tcp "$M" POST /v1/sandboxes/m2/snapshots '{}'
check "a second snapshot over snapshots=1: 429" eval '[ "$code" = 429 ] && msg | grep -q "quota '"'snapshots'"'"'
tcp "$M" POST /v1/sandboxes/m1/artifacts '{"path":"/etc/passwd"}'
check "an artifact within the quota: 201" [ "$code" = 201 ]
tcp "$M" POST /v1/sandboxes/m1/artifacts '{"path":"/etc/group"}'
check "a second artifact over artifacts=1: 429" eval '[ "$code" = 429 ] && msg | grep -q "quota '"'artifacts'"' of key '"'team-m'"' reached: 1 of 1"'
tcp "$M" DELETE /v1/sandboxes/m2
tcp "$M" POST /v1/sessions '{}'
check "a session within the quota: 201" [ "$code" = 201 ]
tcp "$M" POST /v1/sessions '{}'
check "a second session over sessions=1: 429" eval '[ "$code" = 429 ] && msg | grep -q "quota '"'sessions'"'"'

# ---- across a restart: the counts come from what is kept, not from a counter --------------------
check "a pooled sandbox is there for the next daemon" pool_full
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
mv "$T/daemon.log" "$T/daemon-1.log"
start_daemon --listen "127.0.0.1:$PORT" --quota-sandboxes 3 --max-memory 2G --max-timeout 1h \
    --pool 1 --default-pids 128
check "a pooled sandbox made with other defaults is not handed out: removed at the start" \
    grep -q "pooled sandbox .* has other limits than the defaults: removed" "$T/daemon.log"
check "the pool fills again" pool_full
req POST /v1/sandboxes '{}'
P2=$(field "j['id']")
check "and what it hands out has this daemon's defaults (pids.max 128)" \
    eval '[ "$code" = 201 ] && [ "$(cg_file "$P2" pids.max)" = 128 ] && grep -q "created sandbox '"'$P2'"' (from the pool)" "$T/daemon.log"'
req DELETE "/v1/sandboxes/$P2"

tcp "$A" GET /v1/sandboxes
check "after a restart, key A's 3 sandboxes are back" [ "$(field "len(j['sandboxes'])")" = 3 ]
tcp "$A" POST /v1/sandboxes '{"id":"a6"}'
check "and its 4th create is still 429" [ "$code" = 429 ]
tcp "$C" POST /v1/sandboxes '{}'
check "key C's own quota holds after the restart too" [ "$code" = 429 ]
tcp "$M" POST /v1/sandboxes '{"id":"m4","memory":"600M"}'
check "the memory in use is counted again after the restart (512M + 600M > 1G)" [ "$code" = 429 ]
tcp "$A" DELETE "/v1/sandboxes/$E1"
tcp "$A" POST /v1/sandboxes '{"id":"a7"}'
check "deleting one frees its slot after the restart" [ "$code" = 201 ]
"$GB" apikey quota team-a sandboxes=4 > /dev/null
tcp "$A" POST /v1/sandboxes '{"id":"a8"}'
check "a key's own quota, set later, raises the daemon's for it" [ "$code" = 201 ]
"$GB" apikey quota team-a sandboxes=lots 2>"$T/err"
check "a quota that does not parse is refused, saying why" grep -q "quota sandboxes must be" "$T/err"
req GET /v1/apikeys/team-a/quota
check "a key's quota and use over the API" [ "$(field "(j['own'], j['quota']['sandboxes'], j['use']['sandboxes'])")" = "('sandboxes=4', 4, 4)" ]
req PUT /v1/apikeys/team-a/quota '{"quota":null}'
check "cleared: the daemon's quota again" [ "$(field "(j['own'], j['quota']['sandboxes'])")" = "(None, 3)" ]
req PUT /v1/apikeys/nobody/quota '{"quota":"sandboxes=1"}'
check "the quota of a key that does not exist: 404" [ "$code" = 404 ]
tcp "$A" GET /v1/apikeys/team-a/quota
check "a key cannot read or set quotas" [ "$code" = 403 ]

spec_check
summary
