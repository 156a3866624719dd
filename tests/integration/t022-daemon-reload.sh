#!/bin/sh
# test-timeout: 240
# The daemon's settings live: SIGHUP and `glovebox daemon reload` read the configuration file
# and the flags again; a new TCP listener starts, one no longer listed stops accepting, the
# log level, the warm pool, the egress default and the limits change; a flag still beats the
# file; a setting only a restart can change is reported and not applied; a bad file or an
# address in use changes nothing; `glovebox status` and `daemon config` say what is in force
# and where it came from. The routes are the admin's.
NAME=reload
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
port() { python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }
P1=$(port); P2=$(port); P3=$(port)
CONF="$T/gloveboxd.conf"
printf '# a comment\nlog-level = info\n' > "$CONF"
# healthz over TCP: the HTTP status (000: nothing listens)
tcp() { curl -s --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/healthz"; }
# setting NAME FIELD: a field of one setting in GET /v1/daemon/config
setting() {
    "$GB" daemon config --json | python3 -c "import json, sys; print(json.load(sys.stdin)['settings']['$1'].get('$2'))"
}
# wait_log TEXT: the daemon's log says TEXT within 10 s
wait_log() {
    for i in $(seq 200); do grep -q "$1" "$T/daemon.log" && return 0; sleep 0.05; done
    return 1
}
# metric NAME: a series of /metrics (e.g. 'glovebox_sandboxes{state="pooled"}')
metric() { curl -s --unix-socket "$S" http://glovebox/metrics | awk -v n="$1" '$1 == n {print $2}'; }
# pooled N: the warm pool holds N sandboxes within 30 s
pooled() {
    for i in $(seq 600); do [ "$(metric 'glovebox_sandboxes{state="pooled"}')" = "$1" ] && return 0; sleep 0.05; done
    return 1
}
start_daemon --config "$CONF" --max-conns 500

check "no TCP listener yet" [ "$(tcp "$P1")" = 000 ]
check "status says where the settings came from" sh -c "'$GB' status | grep -q 'settings from $CONF'"
check "a value from the file is marked so" [ "$(setting log-level source)" = file ]
check "a flag is marked so" [ "$(setting max-conns source)" = flag ]
check "a default is marked so" [ "$(setting egress-default source)" = default ]
check "and has its value" [ "$(setting egress-default value)" = policy ]

# SIGHUP: a listener added to the file starts serving; the level changes
printf 'listen = 127.0.0.1:%s\nlog-level = debug\n' "$P1" > "$CONF"
kill -HUP "$DPID"
check "SIGHUP: the log says what changed" wait_log 'reloaded .*"listen"'
check "SIGHUP: the new listener serves" [ "$(tcp "$P1")" = 200 ]
check "and its requests need a key" [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P1/v1/sandboxes")" = 401 ]
check "the log level is debug now" [ "$(setting log-level value)" = debug ]
check "status lists the listener" sh -c "'$GB' status | grep -q 'listening.*127.0.0.1:$P1'"

# glovebox daemon reload: two listeners, then only the second one
printf 'listen = 127.0.0.1:%s, 127.0.0.1:%s\n' "$P1" "$P2" > "$CONF"
"$GB" daemon reload > "$T/out"
check "daemon reload: both listeners" eval '[ "$(tcp "$P1")" = 200 ] && [ "$(tcp "$P2")" = 200 ]'
check "it says what it applied" grep -q 'applied: .*log-level' "$T/out"
printf 'listen = 127.0.0.1:%s\n' "$P2" > "$CONF"
"$GB" daemon reload --json > "$T/r.json"
check "--json names what changed" python3 -c "import json; r = json.load(open('$T/r.json')); assert r['changed'] == ['listen'] and r['restart_needed'] == [], r"
check "the listener no longer listed stops accepting" [ "$(tcp "$P1")" = 000 ]
check "the other goes on" [ "$(tcp "$P2")" = 200 ]

# at most 8 addresses, each once
printf 'listen = %s\n' "$(for i in 1 2 3 4 5 6 7 8 9; do printf '127.0.0.1:%s,' "$((40000 + i))"; done)" > "$CONF"
"$GB" daemon reload 2> "$T/err"
check "nine listen addresses: refused, saying the most" eval 'grep -q "at most 8 addresses" "$T/err"'
printf 'listen = 127.0.0.1:%s, 127.0.0.1:%s\n' "$P2" "$P2" > "$CONF"
"$GB" daemon reload 2> "$T/err"
check "an address listed twice: refused" grep -q "listed twice" "$T/err"
check "and the listener in force still serves" [ "$(tcp "$P2")" = 200 ]

# an address in use: nothing changes
python3 -c "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', $P3)); s.listen(1); open('$T/held', 'w').close(); time.sleep(30)" &
HOLD=$!
for i in $(seq 100); do [ -e "$T/held" ] && break; sleep 0.05; done
printf 'listen = 127.0.0.1:%s,127.0.0.1:%s\nlog-level = warn\n' "$P2" "$P3" > "$CONF"
"$GB" daemon reload 2> "$T/err"
rc=$?
check "an address in use: the reload fails (exit 1) and says why" eval '[ $rc -eq 1 ] && grep -q "cannot listen on .127.0.0.1:'"$P3"'" "$T/err"'
check "nothing changed: the level" [ "$(setting log-level value)" = info ]
check "nothing changed: the listener" [ "$(tcp "$P2")" = 200 ]
check "status says the last reload failed" sh -c "'$GB' status | grep -q 'the last reload failed'"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null

# a file that does not parse: nothing changes, the line is named
printf 'listen = 127.0.0.1:%s\npool = many\n' "$P2" > "$CONF"
"$GB" daemon reload 2> "$T/err"
rc=$?
check "a bad file: exit 1, the line named" eval '[ $rc -eq 1 ] && grep -q "line 2: pool must be a number" "$T/err"'
kill -HUP "$DPID"
check "SIGHUP with a bad file: logged, kept" wait_log 'line 2: pool must be a number.*the settings in force are kept'
check "the listener still serves" [ "$(tcp "$P2")" = 200 ]
printf 'unknown-thing = 1\n' > "$CONF"
"$GB" daemon reload 2> "$T/err"
check "an unknown setting is named" grep -q "unknown setting 'unknown-thing'" "$T/err"

# a flag beats the file, after a reload too; pool, egress default and limits change
printf 'listen = 127.0.0.1:%s\nmax-conns = 10\npool = 2\n' "$P2" > "$CONF"
"$GB" daemon reload > /dev/null
check "the flag's max-conns (500) beats the file's (10)" [ "$(setting max-conns value)" = 500 ]
check "a pool of 2 is filled" pooled 2
printf 'listen = 127.0.0.1:%s\npool = 2\negress-default = none\ndefault-memory = 300M\nmax-pids = 300\n' "$P2" > "$CONF"
"$GB" daemon reload > /dev/null
check "the pool is made again with the new defaults" pooled 2
hits=$(metric 'glovebox_pool_takes_total{result="hit"}')
id=$("$GB" create)
check "a create is served from it" [ "$(metric 'glovebox_pool_takes_total{result="hit"}')" = $((hits + 1)) ]
check "a new sandbox gets the new default memory" sh -c "'$GB' info '$id' | python3 -c 'import json, sys; assert json.load(sys.stdin)[\"limits\"][\"memory\"] == 300 << 20'"
check "and the new egress default" [ "$(curl -s --unix-socket "$S" "http://glovebox/v1/sandboxes/$id/network" | python3 -c 'import json, sys; print(json.load(sys.stdin)["network"]["mode"])')" = none ]
"$GB" create --pids 400 > /dev/null 2> "$T/err"
check "the new maximum holds" grep -q "pids" "$T/err"
"$GB" kill "$id" > /dev/null
printf 'listen = 127.0.0.1:%s\n' "$P2" > "$CONF"
"$GB" daemon reload > /dev/null
check "pool 0: the pooled sandboxes go" pooled 0

# a setting only a restart changes: reported, not applied, shown as pending
printf 'listen = 127.0.0.1:%s\nmax-body = 2M\n' "$P2" > "$CONF"
"$GB" daemon reload --json > "$T/r.json"
check "max-body needs a restart" python3 -c "import json; r = json.load(open('$T/r.json')); assert r['restart_needed'] == ['max-body'], r"
check "the value in force is the old one" [ "$(setting max-body value)" = 1M ]
check "the file's is pending" [ "$(setting max-body pending)" = 2M ]
check "and marked as needing a restart" [ "$(setting max-body reload)" = False ]

# the routes: the admin's; a key is refused, no key is 401; bodies other than {} are refused
printf 'listen = 127.0.0.1:%s\n' "$P2" > "$CONF"
"$GB" daemon reload > /dev/null
key=$("$GB" apikey create ops)
for r in "GET /v1/daemon/config" "POST /v1/daemon/reload"; do
    set -- $r
    c=$(curl -s -o /dev/null -w '%{http_code}' -X "$1" -H "Authorization: Bearer $key" "http://127.0.0.1:$P2$2")
    check "$1 $2 with an API key: 403" [ "$c" = 403 ]
    c=$(curl -s -o /dev/null -w '%{http_code}' -X "$1" "http://127.0.0.1:$P2$2")
    check "$1 $2 without a key: 401" [ "$c" = 401 ]
done
req POST /v1/daemon/reload '{"listen":"0.0.0.0:1"}'
check "a reload with fields: 400" [ "$code" = 400 ]
req GET /v1/daemon/config
check "config: 200" [ "$code" = 200 ]
req POST /v1/daemon/reload '{}'
check "reload: 200" [ "$code" = 200 ]
req POST /v1/daemon/config
check "config takes GET only" [ "$code" = 405 ]
check "each reload is audited" [ "$("$GB" audit log --kind daemon.reload --json | python3 -c 'import sys; print(sum(1 for l in sys.stdin if l.strip()))')" -ge 8 ]
spec_check

# the daemon's own flags: --help lists reload, a bad flag is refused before it starts
"$D" --help | grep -q "glovebox daemon reload"
check "gloveboxd --help explains reloading" [ $? -eq 0 ]
"$D" --pool=x --state-dir "$T/s2" --runtime-dir "$T/r2" 2> "$T/err"
rc=$?
check "a bad flag: exit 2 and why" eval '[ $rc -eq 2 ] && grep -q "pool must be a number" "$T/err"'
summary
