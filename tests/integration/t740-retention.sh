#!/bin/sh
# Retention: the collector removes exactly what the policies say (snapshots by count with
# one kept because a sandbox stacks on it, artifacts by total size, sessions by count,
# paused sandboxes by age), a dry run lists the same and removes nothing, and the CLI shows
# it. The age rule is judged by the clock, not by how fast this machine is: a sandbox paused
# before a sleep of over 4 s must go; the one paused last must stay while the pass can have
# read its clock less than 4 s after the pause, and may go only once it cannot.
NAME=retention
. "$(dirname "$0")/../lib/daemon.sh"
start_daemon --retain-snapshots count=2 --retain-artifacts size=10K --retain-sessions count=1 \
    --retain-stopped age=4s --gc-interval 24h
G="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"

create() { req POST /v1/sandboxes "${1:-{\}}"; field "j['id']"; }
A=$(create)
snap() { req POST "/v1/sandboxes/$A/snapshots" "{\"name\":\"$1\"}"; field "j['id']"; }
S1=$(snap s1); S2=$(snap s2); S3=$(snap s3); S4=$(snap s4)
req POST /v1/sandboxes '{"snapshot":"s1"}'
CLONE=$(field "j['id']")
check "four snapshots, a clone of the oldest" eval "[ -n '$S4' ] && [ -n '$CLONE' ]"

art() {
    req POST "/v1/sandboxes/$A/exec" "{\"shell\":\"head -c $2 /dev/zero > /tmp/$1\",\"wait\":true}"
    req POST "/v1/sandboxes/$A/artifacts" "{\"path\":\"/tmp/$1\",\"name\":\"$1\"}"
    field "j['id']"
}
A1=$(art a1 8192); sleep 0.01; A2=$(art a2 4096); sleep 0.01; A3=$(art a3 4096)
check "three artifacts" eval "[ -n '$A1' ] && [ -n '$A2' ] && [ -n '$A3' ]"

req POST /v1/sessions '{}'
SES1=$(field "j['id']"); SES1_SB=$(field "j['sandbox_id']")
sleep 0.01
req POST /v1/sessions '{}'
SES2=$(field "j['id']")

B=$(create)
req POST "/v1/sandboxes/$B/pause" '{}'
sleep 4.2
C=$(create)
CP0=$(date +%s%N)
req POST "/v1/sandboxes/$C/pause" '{}'
CP1=$(date +%s%N)

# gc_pass BODY: POST /v1/gc BODY; $got = what the pass lists but $C (sorted "kind id" lines),
# $c_in = 1 when it lists $C, $c_ok = 1 when that agrees with the clock: $C was paused between
# CP0 and CP1, and the pass read its clock between t0 and t1.
gc_pass() {
    t0=$(date +%s%N); req POST /v1/gc "$1"; t1=$(date +%s%N)
    got=$(field "'\n'.join(sorted(r['kind'] + ' ' + r['id'] for r in j['removed'] if r['id'] != '$C'))")
    c_in=$(field "int(any(r['id'] == '$C' for r in j['removed']))")
    if [ "$c_in" = 1 ]; then
        c_ok=$((t1 - CP0 > 4000000000)); c_how="listed $(((t1 - CP0) / 1000000)) ms after"
    else
        c_ok=$((t0 - CP1 <= 4000000000)); c_how="kept $(((t0 - CP1) / 1000000)) ms after"
    fi
}

want="artifact $A1
sandbox $B
session $SES1
snapshot $S2"
gc_pass '{"dry_run":true}'
check "a dry run lists exactly what the policies let go" [ "$got" = "$want" ]
check "the sandbox paused last is listed only once over 4 s old ($c_how its pause)" [ "$c_ok" = 1 ]
c_dry=$c_in
rules="['age', 'count', 'count', 'size']"
[ "$c_dry" = 1 ] && rules="['age', 'age', 'count', 'count', 'size']"
check "with the rule that applies" [ "$(field "sorted(r['rule'] for r in j['removed'])")" = "$rules" ]
req GET "/v1/snapshots/$S2"
check "a dry run removes nothing (snapshot)" [ "$code" = 200 ]
req GET "/v1/artifacts/$A1"
check "a dry run removes nothing (artifact)" [ "$code" = 200 ]
req GET "/v1/sandboxes/$B"
check "a dry run removes nothing (sandbox)" [ "$code" = 200 ]
t0=$(date +%s%N); "$G" gc --dry-run > "$T/cli" 2>&1; t1=$(date +%s%N)
n=4; c_ok=$((t0 - CP1 <= 4000000000))
grep -q "would remove sandbox *$C" "$T/cli" && { n=5; c_ok=$((t1 - CP0 > 4000000000)); }
check "glovebox gc --dry-run shows the same" eval "grep -q 'would remove snapshot *$S2' '$T/cli' && grep -q 'would remove $n,' '$T/cli' && [ $c_ok = 1 ]" || sed 's/^/# /' "$T/cli"

gc_pass '{}'
check "a pass removes exactly that" [ "$got" = "$want" ]
check "the sandbox paused last is listed only once over 4 s old ($c_how its pause)" [ "$c_ok" = 1 ]
c_gone=$c_in
req GET "/v1/snapshots/$S2"
check "the snapshot is gone" [ "$code" = 404 ]
for id in $S1 $S3 $S4; do req GET "/v1/snapshots/$id"; [ "$code" = 200 ] || no "snapshot $id kept"; done
check "the oldest snapshot stays: a sandbox stacks on it" eval "req GET /v1/snapshots/$S1; [ \"\$code\" = 200 ]"
req GET "/v1/artifacts/$A1"
check "the oldest artifact is gone" [ "$code" = 404 ]
req GET "/v1/artifacts/$A3"
check "the newest artifacts stay" [ "$code" = 200 ]
req GET "/v1/sessions/$SES1"
check "the older session is gone" [ "$code" = 404 ]
req GET "/v1/sandboxes/$SES1_SB"
check "with its sandbox" [ "$code" = 404 ]
req GET "/v1/sessions/$SES2"
check "the newer session stays" [ "$code" = 200 ]
req GET "/v1/sandboxes/$B"
check "the sandbox paused over 4 s ago is gone" [ "$code" = 404 ]
req GET "/v1/sandboxes/$C"
if [ "$c_gone" = 1 ]; then
    check "the one paused last is gone with it" [ "$code" = 404 ]
else
    check "the one paused last stays" [ "$code" = 200 ]
fi
req GET "/v1/sandboxes/$A"
check "a running sandbox stays" [ "$code" = 200 ]
gone=0
for i in $(seq 600); do
    [ ! -e "$STATE/snapshots/$S2" ] && { gone=1; break; }
    sleep 0.05
done
check "the snapshot's files are removed" [ "$gone" = 1 ]
# what the first pass removed is gone from the books at once, whatever its files are doing;
# only the sandbox paused last may have come of age since
gc_pass '{"dry_run":true}'
check "a second pass has nothing left to do" [ -z "$got" ]
[ "$c_gone" = 1 ] ||
    check "but the sandbox paused last once over 4 s old ($c_how its pause)" [ "$c_ok" = 1 ]
req GET /v1/gc
check "GET /v1/gc shows the policy and the last pass" eval "[ \"\$(field \"j['policy']['snapshots']\")\" = count=2 ] && [ \"\$(field \"len(j['last_run']['removed'])\")\" = $((4 + c_gone)) ]"
check "the pass is audited" [ "$(q "print(c.execute(\"select count(*) from audit where kind='gc.run'\").fetchone()[0])")" = 1 ]
req POST /v1/gc '{"dry_run":"yes"}'
check "a bad body is 400" [ "$code" = 400 ]
spec_check
summary
