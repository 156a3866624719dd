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
ONLY="${GBX_BENCH_ONLY:-}"                # "e2b", "egress", "sessions", "state", "load", "flood" or "adopt": only that section
EG_N="${BENCH_EGRESS_N:-2000}"            # egress: sequential requests per path
EG_BULK="${BENCH_EGRESS_BULK:-1073741824}" # egress: bytes of one bulk download
EG_BULK_RUNS="${BENCH_EGRESS_BULK_RUNS:-5}" # egress: bulk downloads per path (the median counts)
SES_RUNS="${BENCH_SESSION_RUNS:-1000}"    # sessions: execute round trips (bash, replay, read)
SES_IMAGE_RUNS="${BENCH_SESSION_IMAGE_RUNS:-100}" # sessions: reads of the 1 MiB image
SES_REPLACE_RUNS="${BENCH_SESSION_REPLACE_RUNS:-20}" # sessions: replacements per variant
ST_RUNS="${BENCH_STATE_RUNS:-200}"        # state: pause/resume, clone and rollback runs
ST_SNAP_RUNS="${BENCH_STATE_SNAP_RUNS:-30}" # state: snapshots of 10 MB changed
ST_HIB_RUNS="${BENCH_STATE_HIB_RUNS:-5}"  # state: hibernate + restore cycles per size (0: skip)
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
PEERS=  # egress: the upstream and tinyproxy
stop_peers() {
    for p in $PEERS; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    PEERS=
}
trap 'stop_daemon; stop_peers; rm -rf "$T" ${R:+"$R"}' EXIT
export GLOVEBOX_RUNTIME_DIR="${R:-$T}/run"
export GLOVEBOX_STATE_DIR="${GLOVEBOX_STATE_DIR:-$T/state}"

BWRAP='bwrap --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin --proc /proc --dev /dev --unshare-all --die-with-parent /bin/true'
if [ -z "$ONLY" ]; then
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
if [ -z "$ONLY" ]; then
echo
echo "== library: create->ready and exec round trip ($RUNS runs each)"
"$BUILD/bench/bench_sandbox" "$RUNS"
fi

# A private gloveboxd (its own state and runtime dirs, like tests/lib/daemon.sh), driven over
# its admin socket by bench_api. The library peers in bench_api use the same dirs, so both
# take uid slots from the same lock file.
start_daemon() {
    ${DAEMON_SESSION:-} "$BUILD/gloveboxd" --state-dir "$GLOVEBOX_STATE_DIR" --runtime-dir "$GLOVEBOX_RUNTIME_DIR" \
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

if [ -z "$ONLY" ]; then
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
if [ -z "$ONLY" ] || [ "$ONLY" = e2b ]; then
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
fi

# Sessions (src/session/sessions.c): execute round trips of the tools against the native API doing
# the same work (exec with wait, the files download), idempotent replay, and the replacement of
# a deleted sandbox (create + workspace restore + run) against a plain create, on a private
# gloveboxd; bench/bench_session.c says what each line times.
if [ -z "$ONLY" ] || [ "$ONLY" = sessions ]; then
echo
echo "== sessions: gloveboxd over its admin socket (bench/bench_session.c: libcurl, one keep-alive connection)"
start_daemon
"$BUILD/bench/bench_session" --socket "$GLOVEBOX_RUNTIME_DIR/api.sock" --runs "$SES_RUNS" \
    --image-runs "$SES_IMAGE_RUNS" --replace-runs "$SES_REPLACE_RUNS" ||
    { echo "bench_session failed; the daemon's log ends:"; tail -n 20 "$T/daemon.log"; exit 1; }
stop_daemon
fi

# State (src/core/snapshots.c, hibernate.c): pause/resume beside the kernel's own freezer, a
# snapshot of 10 MB changed beside cp -a of the same files, clone and rollback beside a fresh
# create, hibernate and restore of 16 and 256 MiB beside writing and reading that memory;
# bench/bench_state.c says what each line times. Hibernate needs CRIU (scripts/criu.sh).
if [ -z "$ONLY" ] || [ "$ONLY" = state ]; then
echo
echo "== state: gloveboxd over its admin socket (bench/bench_state.c: libcurl, one keep-alive connection)"
HIB="$ST_HIB_RUNS"
if [ ! -x .deps/criu/bin/criu ] && [ -z "${GLOVEBOX_CRIU:-}" ]; then
    echo "  (no CRIU: hibernate skipped; scripts/criu.sh builds it)"
    HIB=0
fi
start_daemon
"$BUILD/bench/bench_state" --socket "$GLOVEBOX_RUNTIME_DIR/api.sock" --state-dir "$GLOVEBOX_STATE_DIR" \
    --runs "$ST_RUNS" --snap-runs "$ST_SNAP_RUNS" --hib-runs "$HIB" ||
    { echo "bench_state failed; the daemon's log ends:"; tail -n 20 "$T/daemon.log"; exit 1; }
stop_daemon
fi

# The egress gateway (src/egress): HTTP and HTTPS from sandboxes through the daemon's proxy,
# spliced (mode=splice) and intercepted (a secret attached: TLS terminated, a header injected,
# mode=tls), beside a direct loopback connection and tinyproxy doing the same allowlist job.
# bench/egress_upstream.c serves 127.0.0.1 (HTTP and HTTPS with a test CA made here);
# bench/egress_client.c runs on the host and, copied in, inside the sandboxes: one keep-alive
# connection, EG_N sequential GETs, per-request latency; --bulk: one big download. Nothing
# leaves this machine: the daemon's --egress-hosts pins api.bench and bulk.bench to 127.0.0.1,
# and tinyproxy runs in a private mount namespace whose /etc/hosts does the same (the host's
# file is not touched), so it filters and resolves the same names.
if [ -z "$ONLY" ] || [ "$ONLY" = egress ]; then
echo
echo "== egress gateway: sandbox -> daemon proxy -> 127.0.0.1 upstream, vs direct and tinyproxy ($EG_N requests per path)"
E="$T/egress"
mkdir -p "$E"
chmod 755 "$E"
free_port() {
    python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
}
# a test CA and a server certificate for api.bench and bulk.bench
{
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -keyout "$E/ca.key" -out "$E/ca.pem" -subj "/CN=glovebox egress bench CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$E/srv.key" -out "$E/srv.csr" -subj "/CN=api.bench" &&
    printf '%s\n' "subjectAltName=DNS:api.bench,DNS:bulk.bench" "basicConstraints=CA:FALSE" \
        "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"$E/ext.cnf" &&
    openssl x509 -req -in "$E/srv.csr" -CA "$E/ca.pem" -CAkey "$E/ca.key" -CAcreateserial \
        -days 2 -extfile "$E/ext.cnf" -out "$E/srv.pem"
} >"$E/openssl.log" 2>&1 || { cat "$E/openssl.log"; exit 1; }
chmod 644 "$E/ca.pem"

HTTP_PORT=$(free_port)
TLS_PORT=$(free_port)
"$BUILD/bench/egress_upstream" "$HTTP_PORT" "$TLS_PORT" "$E/srv.pem" "$E/srv.key" >"$E/upstream.log" 2>&1 &
PEERS="$PEERS $!"
TP_PORT=$(free_port)
printf '127.0.0.1 localhost\n127.0.0.1 api.bench bulk.bench\n' >"$E/hosts"
printf '%s\n' '^api\.bench$' '^bulk\.bench$' >"$E/filter"
printf '%s\n' "Port $TP_PORT" "Listen 127.0.0.1" "Timeout 600" "MaxClients 100" "LogLevel Warning" \
    "DisableViaHeader Yes" "FilterType ere" "Filter \"$E/filter\"" "FilterDefaultDeny Yes" >"$E/tinyproxy.conf"
unshare --mount --propagation private sh -c \
    'mount --bind "$1" /etc/hosts && exec tinyproxy -d -c "$2"' sh "$E/hosts" "$E/tinyproxy.conf" \
    >"$E/tinyproxy.log" 2>&1 &
PEERS="$PEERS $!"
for _ in $(seq 100); do
    grep -q ready "$E/upstream.log" && curl -s -o /dev/null -x "http://127.0.0.1:$TP_PORT" \
        "http://api.bench:$HTTP_PORT/" && break
    sleep 0.05
done
grep -q ready "$E/upstream.log" || { echo "egress_upstream did not start:"; cat "$E/upstream.log"; exit 1; }
[ "$(curl -s -x "http://127.0.0.1:$TP_PORT" "http://api.bench:$HTTP_PORT/")" = 0123456789abcdef ] ||
    { echo "tinyproxy does not pass api.bench:"; cat "$E/tinyproxy.log"; exit 1; }
[ "$(curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$TP_PORT" "http://localhost:$HTTP_PORT/")" = 403 ] ||
    { echo "tinyproxy's filter lets localhost through"; exit 1; }

start_daemon --egress-hosts "api.bench=127.0.0.1 bulk.bench=127.0.0.1" --egress-extra-ca "$E/ca.pem"
gbx_api() { # METHOD PATH [JSON]
    curl -fsS --unix-socket "$GLOVEBOX_RUNTIME_DIR/api.sock" -X "$1" "http://glovebox$2" ${3:+-d "$3"} \
        -o /dev/null || { echo "$1 $2 failed; the daemon's log ends:"; tail -n 20 "$T/daemon.log"; exit 1; }
}
RULES='[{"action":"allow","host":"api.bench"},{"action":"allow","host":"bulk.bench"},{"action":"allow","host":"127.0.0.1"}]'
gbx_api POST /v1/sandboxes "{\"id\":\"egress-splice\",\"network\":{\"rules\":$RULES}}"
gbx_api POST /v1/secrets '{"name":"bench","value":"s3cr3t","hosts":["api.bench"],"header":"Authorization: Bearer ${secret}"}'
gbx_api POST /v1/sandboxes "{\"id\":\"egress-tls\",\"network\":{\"rules\":$RULES,\"secrets\":[\"bench\"]}}"
for sb in egress-splice egress-tls; do
    "$BUILD/glovebox" cp "$BUILD/bench/egress_client" "$sb:/tmp/egress_client" >/dev/null
    "$BUILD/glovebox" cp "$E/ca.pem" "$sb:/tmp/bench-ca.pem" >/dev/null
    "$BUILD/glovebox" exec "$sb" -- chmod 755 /tmp/egress_client
done

EC="$BUILD/bench/egress_client"
FAILED=
# NAME WHERE(host|SANDBOX) [ENV=VALUE] -- CLIENT ARGS...: one key=value line into $E/NAME;
# killed after $TMO seconds (default 300)
measure() {
    name=$1 where=$2
    shift 2
    env=
    [ "$1" = -- ] || { env=$1; shift; }
    shift
    if [ "$where" = host ]; then
        env ${env:+"$env"} timeout "${TMO:-300}" "$EC" "$@" >"$E/$name" 2>"$E/$name.err"
    else
        "$BUILD/glovebox" exec --timeout "${TMO:-300}s" ${env:+--env "$env"} "$where" -- \
            /tmp/egress_client "$@" >"$E/$name" 2>"$E/$name.err"
    fi || {
        rc=$?
        [ "$rc" = 124 ] && echo "timed out after ${TMO:-300} s" >>"$E/$name.err"
        echo "$name failed (exit $rc): $(head -c 400 "$E/$name.err")"
        FAILED="$FAILED $name"
        : >"$E/$name"
    }
}
measure direct host -- --expect-auth no 127.0.0.1 "$HTTP_PORT" / "$EG_N"
measure spliced egress-splice -- --expect-auth no api.bench "$HTTP_PORT" / "$EG_N"
measure tinyproxy host -- --expect-auth no --proxy "127.0.0.1:$TP_PORT" api.bench "$HTTP_PORT" / "$EG_N"
measure direct_tls host "SSL_CERT_FILE=$E/ca.pem" -- --tls --sni api.bench --expect-auth no \
    127.0.0.1 "$TLS_PORT" / "$EG_N"
# the first sandbox does not trust the test CA: give it that file (the connection is spliced,
# the upstream's own certificate reaches the client)
measure spliced_tls egress-splice SSL_CERT_FILE=/tmp/bench-ca.pem -- --tls --expect-auth no \
    api.bench "$TLS_PORT" / "$EG_N"
# the second verifies the daemon's CA (its default bundle) and must see the injected header
measure intercepted egress-tls -- --tls --expect-auth yes api.bench "$TLS_PORT" / "$EG_N"
# bulk: a minute is ample for one download (1 GiB at 17 MB/s); a path that stalls once is
# not tried again
TMO=60
for i in $(seq "$EG_BULK_RUNS"); do
    measure "bulk_direct.$i" host -- --bulk "$EG_BULK" 127.0.0.1 "$HTTP_PORT" /bulk 1
    case "$FAILED" in *bulk_spliced*) ;; *)
    measure "bulk_spliced.$i" egress-splice -- --bulk "$EG_BULK" bulk.bench "$HTTP_PORT" /bulk 1 ;;
    esac
    case "$FAILED" in *bulk_tinyproxy*) ;; *)
    measure "bulk_tinyproxy.$i" host -- --proxy "127.0.0.1:$TP_PORT" --bulk "$EG_BULK" bulk.bench \
        "$HTTP_PORT" /bulk 1 ;;
    esac
done
TMO=
sleep 0.5 # the audit rows of connections that just ended
for sb in egress-splice egress-tls; do # the counters and every audit row, a page at a time
    after=0 i=0
    while [ -n "$after" ] && [ "$i" -lt 20 ]; do
        curl -s --unix-socket "$GLOVEBOX_RUNTIME_DIR/api.sock" \
            "http://glovebox/v1/sandboxes/$sb/egress?limit=1000&after=$after" >"$E/$sb.$i.json" || break
        after=$(python3 -c 'import json, sys; j = json.load(open(sys.argv[1]))
print(j["next_after"] if j.get("events") else "")' "$E/$sb.$i.json" 2>/dev/null) || break
        i=$((i + 1))
    done
done
stop_daemon
stop_peers
python3 - "$E" "$EG_BULK_RUNS" <<'PY'
import json, os, statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
def load(name):
    try:
        return {k: v for k, v in (kv.split("=", 1) for kv in open(os.path.join(d, name)).read().split())}
    except (OSError, ValueError):
        return {}
def f(x, k):
    return float(x[k]) if k in x else float("nan")
rows = [("direct", "direct HTTP, host -> 127.0.0.1", None),
        ("spliced", "spliced HTTP, sandbox -> api.bench", "direct"),
        ("tinyproxy", "tinyproxy HTTP, host -> proxy -> api.bench", "direct"),
        ("direct_tls", "direct TLS, host -> 127.0.0.1 (SNI api.bench)", None),
        ("spliced_tls", "spliced TLS, sandbox -> api.bench", "direct_tls"),
        ("intercepted", "intercepted TLS + header, sandbox 2", "direct_tls")]
r = {n: load(n) for n, _, _ in rows}
print("%-46s %8s %8s %8s %8s %8s %8s  %s" % ("latency per request (us)", "p50", "p99", "mean", "added",
                                            "setup", "first", "resolve / reconnects / X-Saw-Auth"))
for n, label, base in rows:
    x = r[n]
    if not x:
        print("%-46s FAILED" % label)
        continue
    added = f(x, "p50_us") - f(r[base], "p50_us") if base else 0.0
    print("%-46s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f  %.0f / %s / %s" % (
        label, f(x, "p50_us"), f(x, "p99_us"), f(x, "mean_us"), added, f(x, "setup_us"),
        f(x, "first_us"), f(x, "resolve_us"), x.get("reconnects", "?"), x.get("saw_auth", "?")))
print("  (added: p50 minus the direct p50 of the same protocol; setup: connect + TLS handshake;")
print("   first: setup + the first request, where a proxy's own upstream connect shows for HTTP;")
print("   resolve: getaddrinfo, a literal on the host, the daemon's DNS in a sandbox)")
def target(label, v, limit, unit, le=True):
    ok = v <= limit if le else v >= limit
    fmt = "%.1f us" if unit else "%.2f"
    print("%-44s %s (target %s %s: %s)" % (label, fmt % v, "<=" if le else ">=", fmt % limit,
                                         "met" if ok else "MISSED"))
p50 = {n: f(r[n], "p50_us") for n in r}
target("spliced HTTP, added p50", p50["spliced"] - p50["direct"], 100, "us")
target("spliced TLS, added p50", p50["spliced_tls"] - p50["direct_tls"], 100, "us")
target("intercepted TLS, added p50", p50["intercepted"] - p50["direct_tls"], 1000, "us")
print("%-44s %.2fx" % ("spliced / direct, p50 (HTTP)", p50["spliced"] / p50["direct"]))
print("%-44s %.2fx" % ("tinyproxy / direct, p50 (HTTP)", p50["tinyproxy"] / p50["direct"]))
print("%-44s %.2fx" % ("spliced / tinyproxy, p50 (HTTP)", p50["spliced"] / p50["tinyproxy"]))
print("%-44s %.2fx" % ("intercepted / direct TLS, p50", p50["intercepted"] / p50["direct_tls"]))
bulk = {}
for n in ("direct", "spliced", "tinyproxy"):
    v = [f(load("bulk_%s.%d" % (n, i)), "mb_s") for i in range(1, runs + 1)]
    v = [x for x in v if x == x]
    bulk[n] = statistics.median(v) if v else float("nan")
    if not v:
        print("bulk %-39s FAILED" % n)
        continue
    print("bulk %-39s %8.0f MB/s median of %d (%s)" % (n, bulk[n], len(v), " ".join("%.0f" % x for x in v)))
target("bulk spliced / direct", bulk["spliced"] / bulk["direct"], 0.8, "", le=False)
print("%-44s %.2f" % ("bulk tinyproxy / direct", bulk["tinyproxy"] / bulk["direct"]))
for sb in ("egress-splice", "egress-tls"):
    try:
        pages = [json.load(open(os.path.join(d, p))) for p in sorted(os.listdir(d))
                 if p.startswith(sb + ".") and p.endswith(".json")]
        s = pages[0]
        print("daemon counters, %s: %s" % (sb, json.dumps(s.get("stats", {}))))
        kinds, conns = {}, {}
        for e in (e for p in pages for e in p.get("events", [])):
            kinds[e.get("kind")] = kinds.get(e.get("kind"), 0) + 1
            if e.get("kind") == "conn":
                k = "port %s %s %s%s" % (e.get("port"), e.get("decision"), e.get("mode", "-"),
                                         ", " + e["reason"] if e.get("reason") else "")
                conns[k] = conns.get(k, 0) + 1
        print("  audit rows: %s" % ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
        for k, n in sorted(conns.items()):
            print("  connections: %dx %s" % (n, k))
    except (OSError, ValueError, IndexError):
        pass
PY
if [ -n "$FAILED" ]; then
    echo "egress: failed:$FAILED"
    exit 1
fi
fi

# Load, bounded (issue 13 §4): 20 native clients (create, exec, upload, download, delete) and a
# session harness for LOAD_SECS (bench/bench_load.c), with an E2B SDK client beside them
# (bench/load_e2b.mjs), against one daemon on a TCP port; /healthz timed idle and under the
# load; the daemon's RSS and descriptors before and after.
if [ -z "$ONLY" ] || [ "$ONLY" = load ]; then
echo
LOAD_SECS="${GBX_BENCH_LOAD_SECS:-60}"
LOAD_CLIENTS="${GBX_BENCH_LOAD_CLIENTS:-20}"
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
# the daemon in a session of its own, as a service manager starts it: started from this
# script's session, it would share the session's CPU group (autogroup) with the 20 load
# threads, which a daemon never does in production
DAEMON_SESSION=setsid
# the per-key request limit off: this measures the daemon under load, not its limiter (the
# E2B client alone sends about 100 requests/s, the default limit)
start_daemon --listen "127.0.0.1:$port" --rate-limit 0
DAEMON_SESSION=
E2BPID=
if command -v node >/dev/null && [ -d "$(dirname "$0")/../tests/e2b/node_modules/e2b" ]; then
    key=$("$BUILD/glovebox" apikey create "load-$port" --json |
        python3 -c "import json, sys; print(json.load(sys.stdin)['key'])")
    # it starts with the native clients (after their 10 s of idle /healthz timing)
    ( sleep 11; E2B_API_URL="http://127.0.0.1:$port" E2B_SANDBOX_URL="http://127.0.0.1:$port" \
        E2B_API_KEY="$key" node "$(dirname "$0")/load_e2b.mjs" --seconds "$((LOAD_SECS - 2))" \
        > "$T/load_e2b.txt" 2>&1 ) &
    E2BPID=$!
else
    echo "  (the E2B SDK client is skipped: needs node and tests/e2b/node_modules)"
fi
LOAD_RC=0
# the prober is a monitor, not one of the load: it runs 10 nice levels above the load's
# threads of its own process, and (cgroup v1 cpu) in a group of its own weighted the same,
# as a health checker of its own service would, rather than behind the 20 load threads and
# the E2B client that share its session's group and the 2 CPUs; --idle-seconds 10: 500
# idle samples
PROBE_GROUP=
cpu_mnt=$(awk '$9 == "cgroup" && $NF ~ /(^|,)cpu(,|$)/ { print $5; exit }' /proc/self/mountinfo)
if [ -n "$cpu_mnt" ] && mkdir -p "$cpu_mnt/bench-load-probe" 2>/dev/null; then
    PROBE_GROUP="$cpu_mnt/bench-load-probe"
    echo 9533 > "$PROBE_GROUP/cpu.shares"
fi
PROBE="--probe-nice -10 --probe-slice 100${PROBE_GROUP:+ --probe-group $PROBE_GROUP}"
echo "  (the /healthz prober: $PROBE)"
# shellcheck disable=SC2086 # PROBE is words
"$BUILD/bench/bench_load" "$GLOVEBOX_RUNTIME_DIR/api.sock" "$DPID" --clients "$LOAD_CLIENTS" \
    --seconds "$LOAD_SECS" --idle-seconds 10 $PROBE || LOAD_RC=1
if [ -n "$E2BPID" ]; then
    wait "$E2BPID" || LOAD_RC=1
    cat "$T/load_e2b.txt"
fi
# the same load again on the same daemon: what the first pass grew (arenas, caches) is reused
echo "== load, a second pass on the same daemon (does its RSS grow again?)"
"$BUILD/bench/bench_load" "$GLOVEBOX_RUNTIME_DIR/api.sock" "$DPID" --clients "$LOAD_CLIENTS" \
    --seconds "$((LOAD_SECS / 3))" --idle-seconds 10 $PROBE > "$T/load2.txt" || LOAD_RC=1
grep -E 'RSS|fds|left|errors|throughput|healthz p99, load' "$T/load2.txt"
# and the prober as one of the load's threads (nice 0, its session's group): what a client
# on this 2-CPU machine sees, for comparison
echo "== load, the prober without its priority (nice 0, in the load's CPU group)"
"$BUILD/bench/bench_load" "$GLOVEBOX_RUNTIME_DIR/api.sock" "$DPID" --clients "$LOAD_CLIENTS" \
    --seconds "$((LOAD_SECS / 3))" --idle-seconds 10 > "$T/load3.txt" || LOAD_RC=1
grep -E '/healthz' "$T/load3.txt"
[ -n "$PROBE_GROUP" ] && rmdir "$PROBE_GROUP" 2>/dev/null
stop_daemon
[ $LOAD_RC -eq 0 ] || { echo "load: errors (see above); the daemon's log ends:"; tail -n 20 "$T/daemon.log"; exit 1; }
fi

# A create flood (issue 14 #10): FLOOD_N creates sent at once on the admin socket, each on
# its own connection, while a prober times /healthz every 10 ms (bench/bench_flood.c): the
# loop must keep answering (target p99 <= 10 ms), compared with the same daemon idle.
if [ -z "$ONLY" ] || [ "$ONLY" = flood ]; then
echo
FLOOD_N="${GBX_BENCH_FLOOD:-1000}"
echo "== a create flood: $FLOOD_N creates at once, /healthz timed beside them"
DAEMON_SESSION=setsid   # its own session (autogroup), as a service manager starts it
start_daemon
DAEMON_SESSION=
"$BUILD/bench/bench_flood" "$GLOVEBOX_RUNTIME_DIR/api.sock" --creates "$FLOOD_N" ||
    { echo "flood: creates failed; the daemon's log ends:"; tail -n 20 "$T/daemon.log"; stop_daemon; exit 1; }
stop_daemon
fi

# Re-adoption (issue 13 §1): ADOPT_N sandboxes (one paused), the daemon killed with SIGKILL,
# a new one started on the same directories: how long until /healthz answers (adoption is
# done by then) and until every sandbox is listed, beside the daemon's start with none.
if [ -z "$ONLY" ] || [ "$ONLY" = adopt ]; then
echo
ADOPT_N="${GBX_BENCH_ADOPT_N:-1000}"
echo "== re-adoption of $ADOPT_N sandboxes after kill -9"
start_kept() {
    "$BUILD/gloveboxd" --state-dir "$GLOVEBOX_STATE_DIR" --runtime-dir "$GLOVEBOX_RUNTIME_DIR" \
        2>>"$T/daemon-adopt.log" &
    DPID=$!
}
until_health() {
    while [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$GLOVEBOX_RUNTIME_DIR/api.sock" \
        http://glovebox/healthz)" != 200 ]; do sleep 0.002; done
}
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
t0=$(date +%s%N); start_kept; until_health; empty_ms=$(ms_since "$t0")
i=0
while [ $i -lt "$ADOPT_N" ]; do
    curl -s -o /dev/null --unix-socket "$GLOVEBOX_RUNTIME_DIR/api.sock" -X POST -d '{}' \
        http://glovebox/v1/sandboxes
    i=$((i + 1))
done
first=$(curl -s --unix-socket "$GLOVEBOX_RUNTIME_DIR/api.sock" 'http://glovebox/v1/sandboxes?limit=1' |
    python3 -c "import json, sys; print(json.load(sys.stdin)['sandboxes'][0]['id'])")
curl -s -o /dev/null --unix-socket "$GLOVEBOX_RUNTIME_DIR/api.sock" -X POST -d '{}' \
    "http://glovebox/v1/sandboxes/$first/pause"
for run in 1 2 3; do
    kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
    t0=$(date +%s%N); start_kept; until_health; up_ms=$(ms_since "$t0")
    n=$(curl -s --unix-socket "$GLOVEBOX_RUNTIME_DIR/api.sock" 'http://glovebox/v1/sandboxes?limit=1000' |
        python3 -c "import json, sys; print(len(json.load(sys.stdin)['sandboxes']))")
    printf '  %-44s %6d ms to /healthz, %d listed (an empty daemon: %d ms)\n' \
        "adopt $ADOPT_N, run $run" "$up_ms" "$n" "$empty_ms"
done
# all of them go with the last daemon
kill "$DPID"; wait "$DPID" 2>/dev/null || true
"$BUILD/gloveboxd" --state-dir "$GLOVEBOX_STATE_DIR" --runtime-dir "$GLOVEBOX_RUNTIME_DIR" \
    --kill-on-exit 2>>"$T/daemon-adopt.log" &
DPID=$!; until_health; stop_daemon
fi

# Ingress (src/ingress): a request to a server inside a sandbox through the daemon's listener
# ("<port>-<id>.<domain>", the owner's key), beside the same server (bench/egress_upstream.c)
# reached directly on the host, and through socat, a userspace TCP relay on the host (the same
# one extra hop, without a sandbox): the latency ingress adds to one keep-alive GET (p50;
# target <= 100 us), and a bulk download through it against the direct one (target >= 80 %).
if [ -z "$ONLY" ] || [ "$ONLY" = ingress ]; then
echo
echo "== ingress: client -> daemon -> server inside a sandbox, vs the same server on the host ($EG_N requests)"
I="$T/ingress"
mkdir -p "$I"
iport() { python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }
LPORT=$(iport); HPORT=$(iport); SPORT=$(iport)
start_daemon --listen "127.0.0.1:$LPORT" --ingress-domain bench.test
KEY=$("$BUILD/glovebox" apikey create ingress-bench 2>/dev/null)
SB=$(curl -fsS -H "Authorization: Bearer $KEY" -X POST "http://127.0.0.1:$LPORT/v1/sandboxes" -d '{"memory":"2G"}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
"$BUILD/glovebox" cp "$BUILD/bench/egress_upstream" "$SB:/tmp/egress_upstream" >/dev/null
"$BUILD/glovebox" exec "$SB" -- chmod 755 /tmp/egress_upstream
"$BUILD/glovebox" exec -d "$SB" -- /tmp/egress_upstream 8000 >/dev/null
"$BUILD/bench/egress_upstream" "$HPORT" >"$I/upstream.log" 2>&1 &
PEERS="$PEERS $!"
socat "TCP-LISTEN:$SPORT,bind=127.0.0.1,reuseaddr,fork" "TCP:127.0.0.1:$HPORT" 2>"$I/socat.log" &
PEERS="$PEERS $!"
IH="8000-$SB.bench.test"
for _ in $(seq 100); do
    [ "$(curl -s -H "Host: $IH" -H "Authorization: Bearer $KEY" "http://127.0.0.1:$LPORT/")" = 0123456789abcdef ] &&
        grep -q ready "$I/upstream.log" && break
    sleep 0.05
done
EC="$BUILD/bench/egress_client"
"$EC" 127.0.0.1 "$HPORT" / "$EG_N" >"$I/direct"
"$EC" --sni "$IH" --header "Authorization: Bearer $KEY" 127.0.0.1 "$LPORT" / "$EG_N" >"$I/ingress"
"$EC" 127.0.0.1 "$SPORT" / "$EG_N" >"$I/socat"
for i in $(seq "$EG_BULK_RUNS"); do
    timeout 120 "$EC" --bulk "$EG_BULK" 127.0.0.1 "$HPORT" /bulk 1 >"$I/bulk_direct.$i"
    timeout 120 "$EC" --bulk "$EG_BULK" 127.0.0.1 "$SPORT" /bulk 1 >"$I/bulk_socat.$i"
    timeout 120 "$EC" --sni "$IH" --header "Authorization: Bearer $KEY" --bulk "$EG_BULK" 127.0.0.1 "$LPORT" /bulk 1 >"$I/bulk_ingress.$i"
done
python3 - "$I" "$EG_BULK_RUNS" <<'PY'
import statistics, sys
d, runs = sys.argv[1], int(sys.argv[2])
def kv(p):
    try:
        return dict(x.split("=", 1) for x in open(p).read().split())
    except (OSError, ValueError):
        return {}
a, b, s = kv(d + "/direct"), kv(d + "/ingress"), kv(d + "/socat")
for name, r in (("direct (host)", a), ("ingress", b), ("socat relay", s)):
    print("  %-16s p50 %7.1f us  p99 %7.1f us  mean %7.1f us" % (name, float(r.get("p50_us", 0)), float(r.get("p99_us", 0)), float(r.get("mean_us", 0))))
added = float(b.get("p50_us", 0)) - float(a.get("p50_us", 0))
print("  ingress adds %.1f us at p50 (target <= 100 us: %s); socat adds %.1f us" % (added, "met" if added <= 100 else "MISSED", float(s.get("p50_us", 0)) - float(a.get("p50_us", 0))))
bd = [float(kv("%s/bulk_direct.%d" % (d, i)).get("mb_s", 0)) for i in range(1, runs + 1)]
bi = [float(kv("%s/bulk_ingress.%d" % (d, i)).get("mb_s", 0)) for i in range(1, runs + 1)]
bs = [float(kv("%s/bulk_socat.%d" % (d, i)).get("mb_s", 0)) for i in range(1, runs + 1)]
md, mi, ms = statistics.median(bd), statistics.median(bi), statistics.median(bs)
print("  bulk: direct %.0f MB/s, ingress %.0f MB/s, socat %.0f MB/s (medians of %d)" % (md, mi, ms, runs))
ratio = mi / md if md else 0
print("  ingress/direct bulk %.2fx (target >= 0.80x: %s); ingress/socat %.2fx" % (ratio, "met" if ratio >= 0.8 else "MISSED", mi / ms if ms else 0))
PY
stop_daemon
stop_peers
fi
