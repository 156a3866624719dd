#!/bin/sh
# State with a lifecycle: pause stops a CPU loop and resume continues it; on_timeout=pause;
# write -> snapshot -> change -> rollback gives the snapshot's files exactly (contents,
# deletions, modes, symlinks, owners); snapshots stack (a snapshot of a clone); ten clones
# of one snapshot are independent; fork of a live sandbox; delete is deferred while
# something stacks on the snapshot; snapshots survive a daemon restart.
NAME=snapshots
. "$(dirname "$0")/../lib/daemon.sh"
start_daemon
export GLOVEBOX_RUNTIME_DIR="$RUN"

# sh ID CMD: run CMD in sandbox ID; stdout in $out, exit code in $rc
sh_in() {
    req POST "/v1/sandboxes/$1/exec" "$(python3 -c 'import json,sys; print(json.dumps({"shell":sys.argv[1],"wait":True}))' "$2")"
    out=$(field "j.get('stdout','').rstrip(chr(10))")
    rc=$(field "j.get('exit_code')")
}
create() { req POST /v1/sandboxes "$1"; field "j['id']"; }

# ---- pause and resume ------------------------------------------------------------------------
SB=$(create '{}')
sh_in "$SB" 'nohup sh -c "i=0; while :; do i=\$((i+1)); echo \$i > /tmp/c.new; mv /tmp/c.new /tmp/count; done" >/dev/null 2>&1 &
sleep 0.2; cat /tmp/count'
req POST "/v1/sandboxes/$SB/pause" '{}'
check "pause answers the sandbox, paused" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = paused ]"
c1=$(cat "/proc/$(q "print(c.execute(\"select init_pid from sandboxes where id='$SB'\").fetchone()[0])")/root/tmp/count" 2>/dev/null)
sleep 0.3
c2=$(cat "/proc/$(q "print(c.execute(\"select init_pid from sandboxes where id='$SB'\").fetchone()[0])")/root/tmp/count" 2>/dev/null)
check "a paused CPU loop does not advance ($c1 = $c2)" eval "[ -n '$c1' ] && [ '$c1' = '$c2' ]"
req POST "/v1/sandboxes/$SB/pause" '{}'
check "pause again is fine (idempotent)" [ "$code" = 200 ]
req POST "/v1/sandboxes/$SB/resume" '{}'
check "resume answers running" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = running ]"
sleep 0.2
sh_in "$SB" 'cat /tmp/count'
check "the loop continues from where it stopped ($c2 -> $out)" eval "[ '$out' -gt '$c2' ]"
req POST "/v1/sandboxes/$SB/pause" '{"x":1}'
check "pause with unknown fields is 400" [ "$code" = 400 ]
req POST "/v1/sandboxes/nope/pause" '{}'
check "pause of an unknown sandbox is 404" [ "$code" = 404 ]
req DELETE "/v1/sandboxes/$SB"

req POST /v1/sandboxes '{"timeout":1,"on_timeout":"pause"}'
SBT=$(field "j['id']")
check "on_timeout is echoed" [ "$(field "j['on_timeout']")" = pause ]
sleep 1.6
req GET "/v1/sandboxes/$SBT"
check "on_timeout=pause: the timeout paused it and it is kept" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = paused ]"
req POST "/v1/sandboxes/$SBT/resume" '{"timeout":"10m"}'
check "resume with a new timeout" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = running ] && [ \"\$(field \"j['expires_at'] is not None\")\" = True ]"
req POST /v1/sandboxes '{"on_timeout":"sleep"}'
check "a bad on_timeout is 400" [ "$code" = 400 ]

# ---- snapshot, change, rollback ------------------------------------------------------------
A=$(create '{}')
sh_in "$A" 'mkdir -p /work/d && echo one > /work/a && echo keep > /work/d/b && chmod 640 /work/d/b &&
ln -s a /work/link && dd if=/dev/urandom of=/work/big bs=1M count=3 2>/dev/null &&
ln /work/a /work/hard && chown 1000:1000 /work/d && rm -f /etc/motd && mkdir /etc/opq && echo x > /etc/opq/y &&
sha256sum /work/big | cut -c1-64'
BIGSUM=$out
sh_in "$A" 'find /work /etc/opq \( -type d -printf "%p %m %U %G dir\n" \) -o -printf "%p %m %U %G %s\n" | sort'
BEFORE=$out
req POST "/v1/sandboxes/$A/snapshots" '{"name":"base"}'
check "snapshot answers 201" [ "$code" = 201 ]
S1=$(field "j['id']")
check "it names the sandbox, template and size" eval "[ \"\$(field \"j['sandbox']\")\" = '$A' ] && [ \"\$(field \"j['template']\")\" = host ] && [ \"\$(field \"j['size_bytes'] >= 3*1024*1024\")\" = True ]"
req GET "/v1/sandboxes/$A"
check "the sandbox runs again after the snapshot" [ "$(field "j['state']")" = running ]
req POST "/v1/sandboxes/$A/snapshots" '{"name":"base"}'
check "a second snapshot with the same name is 409" [ "$code" = 409 ]
req POST "/v1/sandboxes/$A/snapshots" '{"name":"Bad Name"}'
check "a bad name is 400" [ "$code" = 400 ]

sh_in "$A" 'echo two > /work/a; rm -r /work/d; echo new > /work/new; rm /work/link; echo motd > /etc/motd; rm -r /etc/opq; mkdir /etc/opq; echo z > /etc/opq/z'
req POST "/v1/sandboxes/$A/rollback" '{"snapshot":"base"}'
check "rollback answers 200 with the same id" eval "[ '$code' = 200 ] && [ \"\$(field \"j['id']\")\" = '$A' ] && [ \"\$(field \"j['snapshot']\")\" = '$S1' ]"
sh_in "$A" 'cat /work/a; readlink /work/link; ls /work/new 2>&1; ls /etc/motd 2>&1; ls /etc/opq; stat -c %h /work/a; sha256sum /work/big | cut -c1-64'
check "rollback gives the snapshot's contents" eval "echo \"\$out\" | head -1 | grep -qx one"
check "symlinks come back as links" eval "echo \"\$out\" | sed -n 2p | grep -qx a"
check "files created after the snapshot are gone" eval "echo \"\$out\" | grep -q \"/work/new': No such file\""
check "files deleted before the snapshot stay deleted (whiteouts)" eval "echo \"\$out\" | grep -q \"/etc/motd': No such file\""
check "a directory replaced before the snapshot shows only its new content (opaque)" eval "echo \"\$out\" | sed -n 5p | grep -qx y"
check "hard links stay linked" eval "echo \"\$out\" | sed -n 6p | grep -qx 2"
check "file data is exact" eval "echo \"\$out\" | tail -1 | grep -qx '$BIGSUM'"
sh_in "$A" 'find /work /etc/opq \( -type d -printf "%p %m %U %G dir\n" \) -o -printf "%p %m %U %G %s\n" | sort'
AFTER=$out
check "names, modes, owners and sizes are the snapshot's exactly" [ "$AFTER" = "$BEFORE" ]
req POST "/v1/sandboxes/$A/rollback" '{"snapshot":"nope"}'
check "rollback to an unknown snapshot is 404" [ "$code" = 404 ]

# ---- clones ----------------------------------------------------------------------------------
req POST "/v1/snapshots/base/clone" '{"count":10}'
check "ten clones of one snapshot" eval "[ '$code' = 201 ] && [ \"\$(field \"len(j['sandboxes'])\")\" = 10 ]"
CLONES=$(field "' '.join(s['id'] for s in j['sandboxes'])")
i=0
for c in $CLONES; do
    i=$((i + 1))
    sh_in "$c" "echo clone$i > /work/a; echo \$(cat /work/d/b)"
done
okc=0
i=0
for c in $CLONES; do
    i=$((i + 1))
    sh_in "$c" 'cat /work/a; find /work /etc/opq \( -type d -printf "%p %m %U %G dir\n" \) -o -printf "%p %m %U %G %s\n" | sort | grep -v "^/work/a \|^/work/hard "'
    [ "$(echo "$out" | head -1)" = "clone$i" ] && okc=$((okc + 1))
    [ "$(echo "$out" | tail -n +2)" = "$(echo "$AFTER" | grep -v '^/work/a \|^/work/hard ')" ] || echo "# clone $c differs: $out"
done
check "each clone sees only its own change (10 independent)" [ "$okc" = 10 ]
sh_in "$A" 'cat /work/a'
check "the source of the snapshot is untouched by its clones" [ "$out" = one ]
FIRST=$(echo "$CLONES" | cut -d' ' -f1)
sh_in "$FIRST" 'stat -c "%u %g %a" /work/d /work/d/b'
check "owners and modes survive (1000:1000 dir, 0640 file)" [ "$out" = "1000 1000 755
0 0 640" ]

# a snapshot of a clone stacks on the first one
sh_in "$FIRST" 'echo layer2 > /work/l2'
req POST "/v1/sandboxes/$FIRST/snapshots" '{"name":"second"}'
check "a snapshot of a clone records its parent" eval "[ '$code' = 201 ] && [ \"\$(field \"j['parent']\")\" = '$S1' ]"
req POST /v1/sandboxes '{"snapshot":"second"}'
C2=$(field "j['id']")
sh_in "$C2" 'cat /work/l2 /work/a /work/d/b'
check "a sandbox from a stacked snapshot sees both layers" [ "$out" = "layer2
clone1
keep" ]
req POST /v1/sandboxes '{"snapshot":"second","template":"other"}'
check "a create from a snapshot with another template is 400" [ "$code" = 400 ]
req POST /v1/sandboxes '{"snapshot":"missing"}'
check "a create from an unknown snapshot is 404" [ "$code" = 404 ]

# ---- a template from a snapshot --------------------------------------------------------------
"$BUILD/glovebox" snapshots template second fromsnap > "$T/tmpl.out" 2>&1
check "glovebox snapshots template makes a template" eval "grep -qx fromsnap '$T/tmpl.out'"
req POST /v1/snapshots/second/template '{"name":"fromsnap"}'
check "a taken template name is 409" [ "$code" = 409 ]
req POST /v1/snapshots/second/template '{"name":"Bad"}'
check "a bad template name is 400" [ "$code" = 400 ]
req POST /v1/sandboxes '{"template":"fromsnap"}'
TS=$(field "j['id']")
check "a sandbox from it reports the template" [ "$(field "j['template']")" = fromsnap ]
sh_in "$TS" 'cat /work/l2 /work/d/b; echo more > /work/more'
check "and sees the snapshot's files on its base" [ "$out" = "layer2
keep" ]

# its size: the bytes of its layers, recorded once when it is made (a 1 MiB file in them)
req POST /v1/sandboxes '{}'
BIG=$(field "j['id']")
sh_in "$BIG" 'head -c 1048576 /dev/urandom > /home/user/big; ls -l /home/user/big'
req POST "/v1/sandboxes/$BIG/snapshots" '{"name":"big"}'
BIGSNAP=$(field "j['size_bytes']")
"$BUILD/glovebox" snapshots template big frombig > /dev/null 2>&1
req GET /v1/templates/frombig
BIGT=$(field "j['size_bytes']")
check "a template from a snapshot has its real size (>= 1 MiB; the snapshot's ${BIGSNAP})" \
    eval "[ '$BIGT' -ge 1048576 ] && [ '$BIGT' -le \$(( $BIGSNAP + 1048576 )) ]"
check "recorded when it was made" grep -qx "size=$BIGT" "$STATE/templates/frombig/template.conf"
req GET /v1/templates
check "the list says the same" [ "$(field "[t['size_bytes'] for t in j['templates'] if t['name'] == 'frombig'][0]")" = "$BIGT" ]
check "glovebox template ls shows it in MiB, not 0B" sh -c "'$BUILD/glovebox' template ls | awk '\$1 == \"frombig\" {print \$3}' | grep -q 'M'"
req DELETE "/v1/sandboxes/$BIG"
req DELETE /v1/templates/frombig
req DELETE /v1/snapshots/big
check "both go again" [ "$code" = 204 ]
req POST "/v1/sandboxes/$TS/snapshots" '{}'
req POST "/v1/snapshots/$(field "j['id']")/clone" '{}'
sh_in "$(field "j['sandboxes'][0]['id']")" 'cat /work/more /work/l2'
check "snapshots of it stack on the template's layers" [ "$out" = "more
layer2" ]

cp -a "$STATE/templates/host" "$STATE/templates/hostcopy"
req POST /v1/sandboxes '{"template":"hostcopy"}'
HC=$(field "j['id']")
req POST "/v1/sandboxes/$HC/snapshots" '{"name":"of-hostcopy"}'
req DELETE "/v1/sandboxes/$HC"
req DELETE /v1/templates/hostcopy
check "a template a snapshot stacks on cannot be deleted (409)" eval "[ '$code' = 409 ] && grep -q 'of-hostcopy\|sn-' '$T/body'"
req POST /v1/snapshots/of-hostcopy/template '{"name":"on-hostcopy"}'
req DELETE /v1/snapshots/of-hostcopy
req DELETE /v1/templates/hostcopy
check "nor one a template names as its base (409)" eval "[ '$code' = 409 ] && grep -q 'on-hostcopy' '$T/body'"

# ---- a template's start command and ready check --------------------------------------------
printf '%s\n' 'start=sleep 0.3; echo up > /tmp/up; exec sleep 1000' 'ready=test -f /tmp/up' >> "$STATE/templates/fromsnap/template.conf"
req POST /v1/sandboxes '{"template":"fromsnap"}'
TB=$(field "j['id']")
sh_in "$TB" 'cat /tmp/up; ps -eo args | grep -c "^sleep 1000"'
check "a create answers once the template's ready check passes, the start command running" [ "$out" = "up
1" ]
cp -r "$STATE/templates/fromsnap" "$STATE/templates/neverready"
printf '%s\n' 'ready=false' 'ready_timeout=1' >> "$STATE/templates/neverready/template.conf"
req POST /v1/sandboxes '{"template":"neverready"}'
check "a ready check that never passes fails the create (503) and says so" eval "[ '$code' = 503 ] && grep -q 'not ready in time' '$T/body'"
req GET /v1/sandboxes
check "and the sandbox is gone" [ "$(field "len([s for s in j['sandboxes'] if s['template'] == 'neverready'])")" = 0 ]

# ---- fork ----------------------------------------------------------------------------------
sh_in "$A" 'echo forked > /work/f'
req POST "/v1/sandboxes/$A/fork" '{"count":2,"labels":{"fork":"yes"}}'
check "fork answers a snapshot and two sandboxes" eval "[ '$code' = 201 ] && [ \"\$(field \"j['snapshot']['kind']\")\" = fork ] && [ \"\$(field \"len(j['sandboxes'])\")\" = 2 ]"
F1=$(field "j['sandboxes'][0]['id']")
check "fork keeps the source's settings and takes the request's" [ "$(field "j['sandboxes'][0]['labels']['fork']")" = yes ]
sh_in "$F1" 'cat /work/f /work/a'
check "the fork sees the live sandbox's files" [ "$out" = "forked
one" ]
req POST "/v1/sandboxes/$A/fork" '{"count":0}'
check "a fork count of 0 is 400" [ "$code" = 400 ]

# ---- list, delete ----------------------------------------------------------------------------
req GET /v1/snapshots
check "list shows the four snapshots" [ "$(field "len(j['snapshots'])")" = 4 ]
req GET "/v1/sandboxes/$A/snapshots"
check "a sandbox's snapshots" [ "$(field "sorted(s['kind'] for s in j['snapshots'])")" = "['fork', 'snapshot']" ]
req DELETE /v1/snapshots/base
check "deleting a snapshot sandboxes stack on is deferred (202)" eval "[ '$code' = 202 ] && [ \"\$(field \"j['state']\")\" = deleting ]"
check "its layer stays while they run" [ -d "$STATE/snapshots/$S1/layer" ]
req GET /v1/snapshots/base
check "a deleted snapshot is no longer found" [ "$code" = 404 ]
sh_in "$C2" 'cat /work/d/b'
check "sandboxes stacked on it keep working" [ "$out" = keep ]

# ---- restart --------------------------------------------------------------------------------
kill "$DPID"; wait "$DPID" 2>/dev/null
DPID=
"$D" --state-dir "$STATE" --runtime-dir "$RUN" --kill-on-exit 2>>"$T/daemon.log" &
DPID=$!
for i in $(seq 200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ] && break
    sleep 0.05
done
req GET /v1/snapshots/second
check "snapshots survive a daemon restart" [ "$code" = 200 ]
req POST /v1/sandboxes '{"snapshot":"second"}'
C3=$(field "j['id']")
sh_in "$C3" 'cat /work/l2 /work/d/b'
check "and sandboxes start from them after it" [ "$out" = "layer2
keep" ]

# everything stacked on base goes: base's files go too (in the background)
for id in $(curl -s --unix-socket "$S" http://glovebox/v1/sandboxes | python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)["sandboxes"]))'); do
    req DELETE "/v1/sandboxes/$id"
done
req DELETE /v1/snapshots/second
req GET /v1/snapshots
for f in $(field "' '.join(s['id'] for s in j['snapshots'])"); do req DELETE "/v1/snapshots/$f"; done
gone=0
for i in $(seq 100); do
    [ -z "$(ls -A "$STATE/snapshots")" ] && { gone=1; break; }
    sleep 0.05
done
check "once nothing stacks on them, deleted snapshots' files are removed" [ "$gone" = 1 ]
check "their rows too" [ "$(q "print(c.execute('select count(*) from snapshots').fetchone()[0])")" = 0 ]
check "audit has the snapshot records" [ "$(q "print(c.execute(\"select count(*) from audit where kind like 'snapshot.%' or kind='sandbox.rollback'\").fetchone()[0] >= 5)")" = True ]
spec_check
summary
