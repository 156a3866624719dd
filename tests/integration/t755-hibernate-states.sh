#!/bin/sh
# The state a sandbox is in while a hibernate runs, as every view shows it: a criu of the
# test's (it passes the daemon's probe) holds the sandbox's dump until the test says how it
# ends, so the state during the dump is seen without racing it. While dumping: "hibernating"
# in GET /v1/sandboxes/{id}, the list, glovebox ls and info, and "paused" to E2B (which knows
# running and paused only); after a dump that completed: "hibernated" (E2B: paused); after
# one that failed: "running" again, everywhere.
NAME=hibstate
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
U="http://127.0.0.1:$PORT"

# the probe's dump and restore succeed; a sandbox's dump (--network-lock) writes its pid to
# $T/dumping, then waits (30 s at most) for $T/go: "fail" fails it, anything else ends the
# tree as a real dump does and succeeds
FAKE="$T/criu"
cat > "$FAKE" <<EOF
#!/bin/sh
case "\$1" in
--version) echo "Version: 4.1.1"; exit 0 ;;
restore) exit 0 ;;
dump) ;;
*) exit 1 ;;
esac
case "\$*" in *--network-lock*) ;; *) exit 0 ;; esac
echo "\$3" > "$T/dumping.new" && mv "$T/dumping.new" "$T/dumping"
for i in \$(seq 600); do [ -e "$T/go" ] && break; sleep 0.05; done
how=\$(cat "$T/go" 2>/dev/null)
rm -f "$T/go" "$T/dumping"
[ "\$how" = ok ] || exit 1
kill -9 "\$3"
exit 0
EOF
chmod +x "$FAKE"

GLOVEBOX_CRIU="$FAKE" start_daemon --listen "127.0.0.1:$PORT"
hibernate_capability
check "the test's criu passes the probe" [ "$CRIU_OK" = 1 ]
KEY=$("$GB" apikey create team-h --json | python3 -c "import json, sys; print(json.load(sys.stdin)['key'])")

# as the key (so that E2B, which serves keys only, sees the sandbox)
as_key() {
    m=$1; p=$2; shift 2
    code=$(curl -s --max-time 30 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $KEY" \
        -H "X-API-KEY: $KEY" -H 'Content-Type: application/json' -X "$m" "$@" "$U$p")
}
state_of() { req GET "/v1/sandboxes/$1"; field "j.get('state')"; }
listed_state() { req GET /v1/sandboxes; field "[s['state'] for s in j['sandboxes'] if s['id'] == '$1'][0]"; }
ls_state() { "$GB" ls | awk -v id="$1" '$1 == id {print $3}'; }
info_state() { "$GB" info "$1" | python3 -c "import json, sys; print(json.load(sys.stdin)['state'])"; }
e2b_state() { as_key GET "/sandboxes/$1"; field "j.get('state')"; }
e2b_listed() { # STATE: the ids E2B lists in it
    as_key GET "/v2/sandboxes?state=$1"; field "' '.join(s['sandboxID'] for s in j)"
}
# wait_dumping: the test's criu holds a dump (10 s at most)
wait_dumping() {
    for i in $(seq 200); do [ -e "$T/dumping" ] && return 0; sleep 0.05; done
    return 1
}
# every view says STATE (E2B: E2BSTATE) for SB
all_say() {
    sb=$1; st=$2; e=$3
    [ "$(state_of "$sb")" = "$st" ] && [ "$(listed_state "$sb")" = "$st" ] &&
        [ "$(ls_state "$sb")" = "$st" ] && [ "$(info_state "$sb")" = "$st" ] &&
        [ "$(e2b_state "$sb")" = "$e" ] && e2b_listed "$e" | grep -qw "$sb"
}
new_sandbox() { as_key POST /v1/sandboxes -d '{}'; field "j['id']"; }

if [ "$CRIU_OK" = 1 ]; then
# ---- a dump that completes ---------------------------------------------------------------
A=$(new_sandbox)
check "a new sandbox is running in every view (E2B: running)" all_say "$A" running running
rm -f "$T/go"
curl -s --max-time 60 --unix-socket "$S" -X POST -d '{}' -o "$T/hibA" -w '%{http_code}' \
    "http://glovebox/v1/sandboxes/$A/hibernate" > "$T/hibA.code" &
H=$!
check "the dump starts" wait_dumping
check "while its dump runs the sandbox is hibernating in every view (E2B: paused)" \
    all_say "$A" hibernating paused
as_key POST "/v2/sandboxes/$A/connect" -d '{}'
check "E2B connect meanwhile is refused (409), not handed a sandbox being dumped" [ "$code" = 409 ]
echo ok > "$T/go"
wait "$H"
check "the hibernate answers 200, hibernated" eval "[ \"\$(cat '$T/hibA.code')\" = 200 ] && python3 -c \"import json; assert json.load(open('$T/hibA'))['state'] == 'hibernated'\""
check "then it is hibernated in every view (E2B: paused)" all_say "$A" hibernated paused
req DELETE "/v1/sandboxes/$A"

# ---- a dump that fails -------------------------------------------------------------------
B=$(new_sandbox)
curl -s --max-time 60 --unix-socket "$S" -X POST -d '{}' -o "$T/hibB" -w '%{http_code}' \
    "http://glovebox/v1/sandboxes/$B/hibernate" > "$T/hibB.code" &
H=$!
check "a second dump starts" wait_dumping
check "it is hibernating meanwhile" all_say "$B" hibernating paused
echo fail > "$T/go"
wait "$H"
check "the failed hibernate says the sandbox runs on" grep -q 'runs on as it was' "$T/hibB"
check "and it is running again in every view (E2B: running)" all_say "$B" running running
req POST "/v1/sandboxes/$B/exec" '{"shell":"echo alive","wait":true}'
check "and it runs commands" [ "$(field "j['stdout']")" = alive ]
req DELETE "/v1/sandboxes/$B"
fi
spec_check
summary
