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
cleanup() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$T"
    # the loop cpu groups of daemons this test killed with SIGKILL (a live daemon's holds its
    # loop thread: rmdir refuses it)
    rmdir /sys/fs/cgroup/cpu/g*-gloveboxd-loop 2>/dev/null
    true
}
trap cleanup EXIT

start_daemon() {
    "$D" --state-dir "$STATE" --runtime-dir "$RUN" --kill-on-exit "$@" 2>"$T/daemon.log" &
    DPID=$!
    # ready when /healthz answers (a socket file may be left by a daemon killed earlier);
    # 30 s: a sanitized build on a busy machine starts slowly
    for i in $(seq 600); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] &&
            return 0
        kill -0 "$DPID" 2>/dev/null || break
        sleep 0.05
    done
    echo "gloveboxd did not start:"; cat "$T/daemon.log"; exit 1
}

# hibernate_capability: wait for the running daemon's CRIU probe (GET /healthz), then
# CRIU_OK=1, or CRIU_OK=0 with CRIU_WHY. A host that cannot hibernate skips hibernate's checks,
# saying why, unless GLOVEBOX_REQUIRE_CRIU is set (CI): then the test fails now with the
# probe's reason, except where the probe measured that dumps hang on this kernel (skipped,
# saying so: the host's limit, not a missing CRIU).
hibernate_capability() {
    hstate=
    for i in $(seq 400); do
        curl -s --max-time 5 --unix-socket "$S" http://glovebox/healthz > "$T/health"
        hstate=$(python3 -c "import json; print(json.load(open('$T/health'))['capabilities']['hibernate']['state'])" 2>/dev/null)
        [ "$hstate" = probing ] || break
        sleep 0.1
    done
    CRIU_WHY=$(python3 -c "import json; print(json.load(open('$T/health'))['capabilities']['hibernate'].get('reason', ''))" 2>/dev/null)
    if [ "$hstate" = available ]; then
        CRIU_OK=1
        return 0
    fi
    CRIU_OK=0
    # required (CI) means CRIU is built and runs; a kernel on which the probe measured that
    # dumps hang (issue 13) is the host's limit, said and skipped, not a missing build
    case "${GLOVEBOX_REQUIRE_CRIU:-}:$CRIU_WHY" in
    ?*:*"hangs on this kernel"*)
        echo "# skip: hibernate is required here, but the probe measured that criu dumps hang on this kernel ($CRIU_WHY)"
        return 0 ;;
    esac
    if [ -n "${GLOVEBOX_REQUIRE_CRIU:-}" ]; then
        echo "not ok - hibernate is required here (GLOVEBOX_REQUIRE_CRIU) but the daemon says: ${hstate:-no answer}: $CRIU_WHY"
        exit 1
    fi
    echo "# skip: hibernate is unavailable on this host (${hstate:-no answer}: $CRIU_WHY)"
}

# record METHOD PATH: remember the last exchange ($code, $T/body) for spec_check
record() {
    python3 -c "import json, sys; print(json.dumps({'method': sys.argv[1], 'path': sys.argv[2], 'status': int(sys.argv[3]), 'body': open(sys.argv[4], errors='replace').read()}))" \
        "$1" "$2" "$code" "$T/body" >> "$T/exchanges"
}

# req METHOD PATH [BODY [CURL ARGS...]]: sets $code, writes the body to $T/body, records it
req() {
    m=$1; p=$2; shift 2
    if [ $# -ge 1 ]; then
        b=$1; shift
        code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X "$m" \
            -H 'Content-Type: application/json' --data-binary "$b" "$@" "http://glovebox$p")
    else
        code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X "$m" \
            "http://glovebox$p")
    fi
    record "$m" "$p"
}
# settle: wait until the daemon's store writes are durable (audit records are written behind)
settle() {
    for i in $(seq 200); do
        [ "$(curl -s --max-time 10 --unix-socket "$S" http://glovebox/metrics |
            awk '$1 == "glovebox_store_writes_pending" {print $2}')" = 0 ] && return 0
        sleep 0.02
    done
}
# q CODE: run Python with c = a connection to the daemon's database, once writes are durable
q() {
    [ -n "$DPID" ] && settle
    python3 -c "import sqlite3, json; c = sqlite3.connect('$STATE/glovebox.db'); $1"
}
# api METHOD PATH [KEY] [BODY]: a request on the daemon's TCP listener ($U) with an API key
# (default $A); sets $code, writes the body to $T/body
api() {
    code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer ${3:-$A}" \
        -H 'Content-Type: application/json' ${4:+-d "$4"} "$U$2")
}
# field EXPR: evaluate a Python expression over the JSON body j
# state_on_tmpfs SIZE: the state dir on a tmpfs of the test's ($FS, SIZE big), unmounted when
# the test ends (the disk-full tests); before tests/faults/lib.sh, which reads $STATE
state_on_tmpfs() {
    FS="$T/fs"
    mkdir -p "$FS"
    mount -t tmpfs -o "size=$1,mode=0711" "gbx-$NAME" "$FS" ||
        { echo "skip: cannot mount a tmpfs here"; exit 77; }
    STATE="$FS/state"
    OWN_MOUNT="$FS"
    trap cleanup_fs EXIT
}
cleanup_fs() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    DPID=
    umount "$FS" 2>/dev/null || umount -l "$FS"
    cleanup
}

# no_procs UID: no process (zombies aside) runs as UID, waiting up to 10 s: processes a kill
# or a dump ended may still be exiting, and an orphan's zombie is the host's init's to reap
no_procs() {
    for i in $(seq 200); do
        [ -z "$(ps -o pid=,stat= -u "$1" | awk '$2 !~ /^Z/')" ] && return 0
        sleep 0.05
    done
    echo "# left as uid $1: $(ps -o pid=,stat=,comm= -u "$1" | tr '\n' ' ')"
    return 1
}
field() { python3 -c "import json,sys; j=json.load(open('$T/body')); print($1)"; }

# every recorded response matches docs/api.yaml (skips, saying so, without PyYAML)
spec_check() {
    [ -s "$T/exchanges" ] || return 0
    python3 "$(dirname "$0")/../lib/apicheck.py" "$(dirname "$0")/../../docs/api.yaml" \
        "$T/exchanges" > "$T/spec" 2>&1
    rc=$?
    cat "$T/spec" | sed 's/^/# /'
    [ $rc -eq 77 ] && return 0
    check "every response matches docs/api.yaml" [ $rc -eq 0 ]
}

summary() {
    # stop the daemon the way an operator does; a sanitized build reports leaks at exit
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        kill -TERM "$DPID"
        # bounded: a daemon that does not stop within 60 s fails the test, and is killed
        for i in $(seq 1200); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.05; done
        if kill -0 "$DPID" 2>/dev/null; then
            echo "# gloveboxd still running 60 s after SIGTERM: SIGKILL"
            kill -KILL "$DPID"
        fi
        wait "$DPID"; rc=$?; DPID=
        check "the daemon stops cleanly on SIGTERM" [ $rc -eq 0 ]
    fi
    for log in "$T"/daemon*.log; do
        [ -e "$log" ] || continue
        check "no sanitizer report in $(basename "$log")" \
            sh -c "! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' '$log'"
    done
    if [ $fail -ne 0 ]; then echo "daemon log:"; tail -n 40 "$T/daemon.log"; fi
    echo "$pass passed, $fail failed"
    [ $fail -eq 0 ]
}
