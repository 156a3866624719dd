#!/bin/sh
# make bench: every benchmark side by side with its peer in the same run, with ratios.
set -eu
: "${BUILD:=build}"
RUNS="${BENCH_RUNS:-1000}"
HF_RUNS="${BENCH_HF_RUNS:-200}"
T=$(mktemp -d /tmp/gbx-bench-XXXXXX)
chmod 711 "$T"
trap 'rm -rf "$T"' EXIT
export GLOVEBOX_RUNTIME_DIR="$T/run"
export GLOVEBOX_STATE_DIR="${GLOVEBOX_STATE_DIR:-$T/state}"

echo "== glovebox run true vs bwrap vs unshare (hyperfine, $HF_RUNS runs each)"
"$BUILD/glovebox" run -- true   # generate the host template outside the measurement
BWRAP='bwrap --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin --proc /proc --dev /dev --unshare-all --die-with-parent /bin/true'
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
echo
echo "== library: create->ready and exec round trip ($RUNS runs each)"
"$BUILD/bench/bench_sandbox" "$RUNS"
