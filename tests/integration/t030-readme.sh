#!/bin/sh
# test-timeout: 300
# Every command in README.md, run verbatim, as a reader would. The code blocks are read from
# README.md when the test runs (tests/lib/readme.py: which blocks run, how a command's
# expected outcome is written beside it, how files are shown), so the README cannot drift:
# a command fails here when its status is not the one the README gives (0 unless it says
# "# exit N"), or its output lacks the "quoted text" of its comment.
#
# The README uses the default paths, so the test runs in private mount and network
# namespaces of its own:
#   /run/glovebox and /var/lib/glovebox are this test's directories mounted over the default
#   ones (created empty on the host if they were not there), so `build/gloveboxd`, the CLI
#   and `curl --unix-socket /run/glovebox/api.sock` reach a private daemon, never a real
#   one; GLOVEBOX_RUNTIME_DIR is the test's own path all the same, because the runtime dir's
#   name is what keeps one daemon's cgroups (and `glovebox run`'s) apart from another's:
#   the default name would share a real daemon's (src/sandbox/ns.c, cg_scope)
#   the daemon line's options come from GLOVEBOX_CONFIG (documented in the README's
#   configuration table): listen on 127.0.0.1:7070 (the README's E2B address; the network
#   namespace is private, so no other daemon's port is in the way), --kill-on-exit, and an
#   --egress-resolver on this namespace's loopback (a stub that answers NXDOMAIN)
#   the network namespace has only lo: nothing the README runs can reach past this machine
# Before the commands the test makes the files they expect in their directory: ./data.csv,
# image.tar (an OCI archive of host files, tests/lib/oci.sh), build/ (a link to $BUILD);
# $TOKEN is set; the rest is in the list below (before:).
#
# Adding a snippet to the README: an `sh` block runs as it is, so make it runnable on a
# fresh daemon, after the blocks before it (their variables are set), and say an expected
# non-zero status as "# exit N" (or "# prints "TEXT"" for text it must print); a file a
# command uses is a block "```LANG NAME"; something to read only is "```text" or
# "```LANG data". What cannot run here goes into the list below with its reason.
NAME=readme
: "${BUILD:=build}"
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
for c in unshare bash curl node python3; do
    command -v $c >/dev/null || { echo "skip: $c not installed"; exit 77; }
done
REPO=$(cd "$(dirname "$0")/../.." && pwd)
case "$BUILD" in /*) ;; *) BUILD="$REPO/$BUILD" ;; esac
[ -x "$BUILD/gloveboxd" ] && [ -x "$BUILD/glovebox" ] || { echo "no $BUILD/gloveboxd: run make"; exit 1; }
[ -d "$REPO/tests/e2b/node_modules/e2b" ] ||
    { echo "skip: no tests/e2b/node_modules (make test installs it: npm ci)"; exit 77; }
if [ -z "${GBX_README_NS:-}" ]; then
    # made here, outside the namespaces, so that a mount point left behind is an empty dir
    made=
    for d in /run/glovebox /var/lib/glovebox; do
        [ -d "$d" ] || { mkdir -p "$d" && made="$made $d"; }
    done
    GBX_README_NS=1 BUILD="$BUILD" unshare -m -n --propagation private sh "$0"
    rc=$?
    # shellcheck disable=SC2086
    for d in $made; do rmdir "$d" 2>/dev/null; done
    exit $rc
fi

T=$(mktemp -d "/tmp/gbx-$NAME-XXXXXX")
chmod 711 "$T"
DNSPID=
# at the end: a daemon the commands left running (they timed out or did not parse) is
# stopped the way an operator does, bounded (its pid is in its runtime dir's lock file)
cleanup() {
    dp=$(cat "$T/run/gloveboxd.lock" 2>/dev/null)
    if [ -n "$dp" ] && [ "$(readlink "/proc/$dp/exe" 2>/dev/null)" = "$(readlink -f "$BUILD/gloveboxd")" ]; then
        echo "# stopping the daemon left running (pid $dp)"
        kill -TERM "$dp"
        for _ in $(seq 600); do kill -0 "$dp" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$dp" 2>/dev/null
    fi
    [ -n "$DNSPID" ] && kill "$DNSPID" 2>/dev/null
    umount /run/glovebox /var/lib/glovebox 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
ip link set lo up || { echo "cannot bring up lo in the test's network namespace"; exit 1; }
mkdir -p "$T/run" "$T/state" "$T/out" "$T/work"
mount --bind "$T/run" /run/glovebox && mount --bind "$T/state" /var/lib/glovebox ||
    { echo "cannot mount over /run/glovebox and /var/lib/glovebox"; exit 1; }

python3 "$REPO/tests/lib/egress_dns.py" 127.0.0.7 53 "$T/dns.ready" 2>"$T/dns.err" &
DNSPID=$!
for _ in $(seq 100); do [ -e "$T/dns.ready" ] && break; sleep 0.05; done
[ -e "$T/dns.ready" ] || { echo "the stub nameserver did not start:"; cat "$T/dns.err"; exit 1; }
cat > "$T/gloveboxd.conf" <<EOF
listen = 127.0.0.1:7070
ingress-domain = localhost:7070
kill-on-exit = true
egress-resolver = 127.0.0.7:53
EOF
export GLOVEBOX_CONFIG="$T/gloveboxd.conf" GLOVEBOX_RUNTIME_DIR="$T/run"
unset GLOVEBOX_STATE_DIR E2B_API_URL E2B_SANDBOX_URL E2B_API_KEY E2B_DOMAIN E2B_DEBUG \
    E2B_ACCESS_TOKEN ANTHROPIC_API_KEY ANTHROPIC_ENVIRONMENT_KEY
export TOKEN=readme-test-token GBX_REPO="$REPO"

# the files the README's commands expect, in their directory
cd "$T/work" || exit 1
ln -s "$BUILD" build
printf 'name,n\na,1\n' > data.csv
. "$REPO/tests/lib/oci.sh"
mkimage docker image.tar
[ -s image.tar ] || { echo "could not make image.tar"; exit 1; }

# What is not run as written, matched against the command's first line (its comment aside);
# tests/lib/readme.py describes the form. A listed command the README no longer has fails
# the test, and so does a block the test does not know.
cat > "$T/specials" <<'EOF'
daemon: make && build/gloveboxd
    why: `make`: this test runs on the build already made ($BUILD, linked as build/), and
    why: `make` stands for it here (a shell function that says so)
skip: make test SANITIZE=address,undefined
    why: the whole test suite, which runs this test; CI runs it
skip: make
    why: the build: this test runs on one already made ($BUILD)
skip: make test
    why: the whole test suite, which runs this test
skip: make bench
    why: the benchmarks: minutes of load, with peers (bwrap) this test does not need
skip: make fuzz
    why: builds with clang's libFuzzer and runs each target 20 s: minutes
skip: make fuzz-long
    why: 10 minutes per fuzz target
skip: make lint
    why: cppcheck and clang-tidy over the tree: about 5 minutes
skip: make format-check
    why: a check of the sources, not of the README's commands (CI runs it)
follow: build/glovebox audit log --sandbox "$id" -f
skip: build/glovebox exec "$id" -- pip download requests
    why: PyPI over HTTPS: pip in the sandbox checks pypi.org's real certificate, which no
    why: stand-in on this machine can present (and the test reaches nothing off it)
follow: ANTHROPIC_ENVIRONMENT_KEY=... build/glovebox worker --environment-id env_...
    why: against a stand-in for Claude Managed Agents on this namespace's loopback
    why: (tests/worker/fake_cp.mjs, ANTHROPIC_BASE_URL) whose environment and key are the
    why: README's placeholders, with one bash tool call queued: its result must come back
    before: printf '%s' '{"environment_id": "env_...", "environment_key": "...", "work": [{"id": "work_A", "session": "sesn_A", "secret": {"sessions_token": "sk-ant-req-README", "api_base_url": "self"}}], "sessions": {"sesn_A": {"status": "idle", "script": [{"type": "agent.tool_use", "id": "sevt_1", "name": "bash", "input": {"command": "echo $((6 * 7))-readme"}}], "end": "end_turn"}}}' > "$__O/cp.json"
    before: node "$GBX_REPO/tests/worker/fake_cp.mjs" "$__O/cp.json" "$__O/cp.log" > "$__O/cp.out" 2>&1 & __bgpids="${__bgpids:-} $!"
    before: for _ in $(seq 200); do grep -q '^listening' "$__O/cp.out" && break; sleep 0.05; done
    before: export ANTHROPIC_BASE_URL="http://127.0.0.1:$(awk '/^listening/ {print $2}' "$__O/cp.out")"
    after: for _ in $(seq 600); do grep -q 42-readme "$__O/cp.log" && break; sleep 0.05; done; grep -q 42-readme "$__O/cp.log"
skip: build/glovebox template build-debian --name bookworm --include python3
    why: debootstrap downloads Debian from a mirror: the network, and minutes
run: art=$(build/glovebox artifact publish "$id" /workspace/report.pdf --name report | cut -d" " -f1)
    before: build/glovebox exec "$id" -- sh -c 'mkdir -p /workspace && echo report > /workspace/report.pdf'
skip: npm init -y && npm install e2b
    why: the npm registry: the test links tests/e2b's install of the same package
    why: (its package-lock.json, npm ci) as the project's node_modules
    before: ln -s "$GBX_REPO/tests/e2b/node_modules" node_modules
EOF

python3 "$REPO/tests/lib/readme.py" "$REPO/README.md" "$T/specials" "$T/out" > "$T/script.sh" ||
    { echo "not ok - the README's code blocks (above)"; echo "0 passed, 1 failed"; exit 1; }
# make: the build this test runs on, already made
cat > "$T/prelude.sh" <<'EOF'
make() { echo "make: (the test runs on the build already made: $BUILD)"; }
EOF
__SOCK=/run/glovebox/api.sock __O="$T/out" timeout -s KILL 200 \
    bash -c '. "$1"; . "$2"; . "$3"' sh "$REPO/tests/lib/readme.sh" "$T/prelude.sh" "$T/script.sh"
rc=$?
if [ $rc -eq 137 ]; then
    echo "not ok - the README's commands did not finish within 200 s; the last one started: $(cat "$T/out/current")"
    echo "0 passed, 1 failed"
fi
exit $rc
