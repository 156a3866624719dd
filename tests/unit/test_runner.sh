#!/bin/sh
# test-timeout: 60
# The test runner's own test: tests/run-tests.sh stops a test at its time limit (its whole
# session, a process that ignores SIGTERM included), reports it as failed with its log, runs
# the tests after it, stops what a passing test left running, honours GBX_TEST_TIMEOUT over
# a script's own "# test-timeout:", and counts passes, failures and skips as before.
set -u
: "${GBX_REPO:=$(cd "$(dirname "$0")/../.." && pwd)}"
D=$(mktemp -d /tmp/gbx-runner-XXXXXX)
MARK="gbx-runner-selftest-$$"
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
no() { fail=$((fail + 1)); echo "not ok - $1"; }
check() { name=$1; shift; if "$@"; then ok "$name"; else no "$name"; fi; }
# left: how many processes carrying this run's marker are alive (none, once the runner is done)
# (awk gets the marker from its environment, or it would find itself)
left() { ps -e -o stat= -o args= | M=$MARK awk 'index($0, ENVIRON["M"]) && $1 !~ /^Z/' | wc -l; }
cleanup() {
    for p in $(ps -e -o pid= -o args= | M=$MARK awk 'index($0, ENVIRON["M"]) { print $1 }'); do
        kill -KILL "$p" 2>/dev/null
    done
    rm -rf "$D"
}
trap cleanup EXIT

# a-hangs: over its 1 s limit, with a child that ignores SIGTERM
cat >"$D/a-hangs.sh" <<EOF
# test-timeout: 1
sh -c "trap '' TERM; sleep 600; : $MARK" &
echo "a-hangs: about to hang"
sleep 600; : $MARK
EOF
# b-passes: runs after a-hangs, and leaves a process behind
cat >"$D/b-passes.sh" <<EOF
sh -c "sleep 600; : $MARK" &
: >"$D/b-ran"
EOF
printf 'echo "skip: nothing to see"\nexit 77\n' >"$D/c-skips.sh"
printf 'echo "d-fails: on purpose"\nexit 3\n' >"$D/d-fails.sh"
mkdir "$D/build"
BUILD="$D/build" GBX_TEST_GRACE=1 GBX_TEST_TIMEOUT='' sh "$GBX_REPO/tests/run-tests.sh" "$D/a-hangs.sh" \
    "$D/b-passes.sh" "$D/c-skips.sh" "$D/d-fails.sh" >"$D/out" 2>&1
rc=$?
sed 's/^/# /' "$D/out"
check "a test over its limit fails, saying so" \
    grep -qE '^FAIL a-hangs\.sh +\(timed out after 1 s\)$' "$D/out"
check "with the end of its log" grep -q '^    | a-hangs: about to hang$' "$D/out"
check "its whole session is stopped, SIGTERM or not" [ "$(left)" -eq 0 ]
check "the next test still runs" eval "[ -e '$D/b-ran' ] && grep -qE '^PASS b-passes\\.sh ' '$D/out'"
check "what a test leaves running is stopped" \
    grep -q "^run-tests: stopping what is still running:" "$D/build/test-b-passes.sh.log"
check "a skip is a skip" grep -qE '^SKIP c-skips\.sh +skip: nothing to see$' "$D/out"
check "a failure is a failure" grep -qE '^FAIL d-fails\.sh +\(exit 3\)$' "$D/out"
check "the summary counts the time-out as failed" \
    eval "grep -qx 'failed: a-hangs.sh d-fails.sh' '$D/out' && grep -qx '1 passed, 2 failed, 1 skipped' '$D/out'"
check "and the run fails" [ "$rc" -ne 0 ]

# GBX_TEST_TIMEOUT overrides what a script declares
printf '# test-timeout: 900\nsleep 600; : %s\n' "$MARK" >"$D/e-long.sh"
BUILD="$D/build" GBX_TEST_GRACE=1 GBX_TEST_TIMEOUT=1 sh "$GBX_REPO/tests/run-tests.sh" \
    "$D/e-long.sh" >"$D/out2" 2>&1
sed 's/^/# /' "$D/out2"
check "GBX_TEST_TIMEOUT overrides a script's limit" \
    grep -qE '^FAIL e-long\.sh +\(timed out after 1 s\)$' "$D/out2"
check "and that test is stopped too" [ "$(left)" -eq 0 ]

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
