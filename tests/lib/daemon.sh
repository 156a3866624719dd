# Shared by the daemon's shell tests: a private gloveboxd with its own state and runtime
# dirs, and TAP-style checks. Source it after setting NAME; it defines:
#   $T (scratch dir), $STATE, $RUN, $S (admin socket), $D (the daemon binary), $DPID
#   check NAME CMD...   start_daemon [ARGS...]   summary (prints the tally, sets the status)
: "${BUILD:=build}"
D="$BUILD/gloveboxd"
T=$(mktemp -d "/tmp/gbx-$NAME-XXXXXX")
chmod 711 "$T"
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl not installed"; exit 77; }
STATE="${GBX_TEST_STATE_DIR:-$T/state}"
RUN="$T/run"
S="$RUN/api.sock"
DPID=
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
no() { fail=$((fail + 1)); echo "not ok - $1"; }
check() { name=$1; shift; if "$@"; then ok "$name"; else no "$name"; fi; }
cleanup() { [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

start_daemon() {
    "$D" --state-dir "$STATE" --runtime-dir "$RUN" --kill-on-exit "$@" 2>"$T/daemon.log" &
    DPID=$!
    # ready when /healthz answers (a socket file may be left by a daemon killed earlier)
    for i in $(seq 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] &&
            return 0
        sleep 0.05
    done
    echo "gloveboxd did not start:"; cat "$T/daemon.log"; exit 1
}

summary() {
    if [ $fail -ne 0 ]; then echo "daemon log:"; tail -n 40 "$T/daemon.log"; fi
    echo "$pass passed, $fail failed"
    [ $fail -eq 0 ]
}
