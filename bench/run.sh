#!/bin/sh
# make bench: every benchmark side by side with its peer in the same run, with ratios.
set -eu
: "${BUILD:=build}"
RUNS="${BENCH_RUNS:-1000}"
HF_RUNS="${BENCH_HF_RUNS:-200}"
API_RUNS="${BENCH_API_RUNS:-300}"        # cold and pooled creates
EXEC_RUNS="${BENCH_API_EXEC_RUNS:-500}"
RT_RUNS="${BENCH_API_RT_RUNS:-200}"       # create + exec + delete, and as many bwrap
IDLE="${GBX_BENCH_IDLE:-1000}"            # live idle sandboxes; 0 skips that step
RATE_SECS="${GBX_BENCH_RATE_SECS:-10}"    # per line of the sustained-create loop
POOL="${GBX_BENCH_POOL:-8}"
E2B_RUNS="${BENCH_E2B_RUNS:-200}"        # E2B SDK: create + run + kill, and as many execs
ONLY="${GBX_BENCH_ONLY:-}"                # "e2b": only the E2B SDK section
T=$(mktemp -d /tmp/gbx-bench-XXXXXX)
chmod 711 "$T"
DPID=
stop_daemon() {
    [ -n "$DPID" ] || return 0
    kill "$DPID" 2>/dev/null || true
    wait "$DPID" 2>/dev/null || true
    DPID=
}
# The runtime dir (control sockets, locks) goes on a tmpfs, as /run is on a systemd host;
# this build machine's /run and /tmp are ext4, where each sandbox's directory and control
# socket cost about 0.6 ms more. GBX_BENCH_RUNTIME_ON=DIR picks another file system
# (GBX_BENCH_RUNTIME_ON= keeps it beside the state dir, on /tmp).
: "${GBX_BENCH_RUNTIME_ON=/dev/shm}"
R=
if [ -n "${GBX_BENCH_RUNTIME_ON:-}" ] && [ -d "$GBX_BENCH_RUNTIME_ON" ]; then
    R=$(mktemp -d "$GBX_BENCH_RUNTIME_ON/gbx-bench-XXXXXX")
    chmod 711 "$R"
fi
trap 'stop_daemon; rm -rf "$T" ${R:+"$R"}' EXIT
export GLOVEBOX_RUNTIME_DIR="${R:-$T}/run"
export GLOVEBOX_STATE_DIR="${GLOVEBOX_STATE_DIR:-$T/state}"

BWRAP='bwrap --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin --proc /proc --dev /dev --unshare-all --die-with-parent /bin/true'
if [ "$ONLY" != e2b ]; then
echo "== glovebox run true vs bwrap vs unshare (hyperfine, $HF_RUNS runs each)"
"$BUILD/glovebox" run -- true   # generate the host template outside the measurement
UNSHARE='unshare --user --map-root-user --pid --mount --net --uts --ipc --fork /bin/true'
hyperfine -N --warmup 10 --runs "$HF_RUNS" --export-json "$T/hf.json" \
    -n 'glovebox run true' "$BUILD/glovebox run -- true" \
    -n 'bwrap true' "$BWRAP" \
    -n 'unshare true' "$UNSHARE" >"$T/hf.txt" 2>&1 || { cat "$T/hf.txt"; exit 1; }
python3 - "$T/hf.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
g, b, u = r["glovebox run true"], r["bwrap true"], r["unshare true"]
for name, x in r.items():
    print("%-18s median %6.2f ms  mean %6.2f ms  min %6.2f ms" % (name, x["median"]*1e3, x["mean"]*1e3, x["min"]*1e3))
ratio = g["median"] / b["median"]
print("glovebox/bwrap   %.2fx (target <= 1.5x: %s)" % (ratio, "met" if ratio <= 1.5 else "MISSED"))
print("glovebox/unshare %.2fx" % (g["median"] / u["median"]))
PY
fi
if [ "$ONLY" != e2b ]; then
echo
echo "== library: create->ready and exec round trip ($RUNS runs each)"
"$BUILD/bench/bench_sandbox" "$RUNS"
fi

# A private gloveboxd (its own state and runtime dirs, like tests/lib/daemon.sh), driven over
# its admin socket by bench_api. The library peers in bench_api use the same dirs, so both
# take uid slots from the same lock file.
start_daemon() {
    "$BUILD/gloveboxd" --state-dir "$GLOVEBOX_STATE_DIR" --runtime-dir "$GLOVEBOX_RUNTIME_DIR" \
        --kill-on-exit "$@" 2>"$T/daemon.log" &
    DPID=$!
    for _ in $(seq 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$GLOVEBOX_RUNTIME_DIR/api.sock" \
            http://glovebox/healthz)" = 200 ] && return 0
        sleep 0.05
    done
    echo "gloveboxd did not start:"; cat "$T/daemon.log"; exit 1
}
bench_api() {
    "$BUILD/bench/bench_api" --socket "$GLOVEBOX_RUNTIME_DIR/api.sock" --pid "$DPID" "$@" ||
        { echo "bench_api failed; the daemon's log ends:"; tail -n 20 "$T/daemon.log"; exit 1; }
}

if [ "$ONLY" != e2b ]; then
echo
echo "== daemon: gloveboxd over its admin socket (bench/bench_api.c: libcurl, one keep-alive connection)"
start_daemon
bench_api --bwrap "$BWRAP" cold="$API_RUNS" exec="$EXEC_RUNS" roundtrip="$RT_RUNS" \
    rate="$RATE_SECS" idle="$IDLE"
stop_daemon

echo
if "$BUILD/gloveboxd" --help 2>&1 | grep -q -- '--pool'; then
    start_daemon --pool "$POOL"
    bench_api --pool "$POOL" pooled="$API_RUNS"
    stop_daemon
else
    echo "== API create->ready, pooled: skipped: --pool not available (gloveboxd --help)"
fi
fi

# The E2B SDK (e2b from tests/e2b's lockfile) against a private gloveboxd on a TCP port with a
# fresh API key, beside the native API on the same listener and bwrap (bench/e2b_bench.mjs).
echo
if ! command -v node >/dev/null || [ ! -d "$(dirname "$0")/../tests/e2b/node_modules/e2b" ]; then
    echo "== E2B SDK: skipped: needs node and tests/e2b/node_modules (npm ci in tests/e2b)"
else
    e2b_bench() {
        port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
        start_daemon --listen "127.0.0.1:$port" "$@"
        key=$("$BUILD/glovebox" apikey create "bench-$port" --json |
            python3 -c "import json, sys; print(json.load(sys.stdin)['key'])")
        E2B_API_URL="http://127.0.0.1:$port" E2B_SANDBOX_URL="http://127.0.0.1:$port" E2B_API_KEY="$key" \
            node "$(dirname "$0")/e2b_bench.mjs" --runs "$E2B_RUNS" --exec-runs "$E2B_RUNS" --bwrap "$BWRAP" \
            --label "gloveboxd${*:+ $*}" ||
            { echo "e2b_bench failed; the daemon's log ends:"; tail -n 20 "$T/daemon.log"; exit 1; }
        stop_daemon
    }
    e2b_bench
    if "$BUILD/gloveboxd" --help 2>&1 | grep -q -- '--pool'; then
        echo
        e2b_bench --pool "$POOL"
    fi
fi
