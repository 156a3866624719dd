#!/bin/sh
# kill -9 at each named point (GLOVEBOX_FAULT=point): the daemon dies there, a new daemon on
# the same dirs finds every acknowledged write, the operation in flight wholly there or
# wholly absent, the sandbox concerned adopted and working or reported lost with nothing
# left behind, and the operation can be done again. Hibernate's points need CRIU.
# test-timeout: 600
NAME=fkill
. "$(dirname "$0")/../lib/daemon.sh"
. "$(dirname "$0")/lib.sh"

# post_dying PATH BODY: a request the daemon dies during (no answer, or a cut one)
post_dying() {
    curl -s --max-time 30 --unix-socket "$S" -X POST -H 'Content-Type: application/json' \
        --data-binary "$2" "http://glovebox$1" > "$T/dying" 2>&1
}
audited() { # KIND ID: an audit record of KIND about sandbox ID
    [ "$(q "print(c.execute(\"select count(*) from audit where kind = '$1' and sandbox = '$2'\").fetchone()[0])")" -ge 1 ]
}
works() { sh_in "$1" 'cat /home/user/f'; [ "$code" = 200 ] && [ "$out" = "${2:-kept}" ]; }

# ---- create ------------------------------------------------------------------------------
fault_daemon create.spawned
post_dying /v1/sandboxes '{"id":"fx-spawned"}'
died_at create.spawned
check "create.spawned: the sandbox was made (its runtime dir is there)" [ -d "$RUN/sandboxes/fx-spawned" ]
inventory
restart
check "create.spawned: the sandbox without a record is removed, and the log says so" \
    grep -q "removed sandbox 'fx-spawned': it had no record" "$LOG"
check "create.spawned: and the audit log" audited sandbox.orphan fx-spawned
req GET /v1/sandboxes/fx-spawned
check "create.spawned: it is not listed" [ "$code" = 404 ]
check "create.spawned: its processes are gone" no_uid_procs
invariants create.spawned
new_sandbox '{"id":"fx-spawned"}'
check "create.spawned: the same create works again (201)" [ "$code" = 201 ]
sh_in fx-spawned 'echo kept > /home/user/f'
check "create.spawned: and the sandbox works" works fx-spawned
req DELETE /v1/sandboxes/fx-spawned
stop_daemon

fault_daemon create.recorded
post_dying /v1/sandboxes '{"id":"fx-recorded"}'
died_at create.recorded
inventory
restart
req GET /v1/sandboxes/fx-recorded
check "create.recorded: the recorded sandbox is adopted (200, running)" \
    eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = running ]"
HUID=$(field "j['host_uid']")
sh_in fx-recorded 'echo kept > /home/user/f'
check "create.recorded: and works" works fx-recorded
settle
# it died between the row and the create's audit record (written behind): the next daemon
# records the create, as the owner's, saying when
check "create.recorded: its create is in the audit log, recorded at adoption" \
    [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'sandbox.create' and sandbox = 'fx-recorded' and detail like '%at adoption%'\").fetchone()[0])")" = 1 ]
invariants create.recorded
req DELETE /v1/sandboxes/fx-recorded
check "create.recorded: it can be deleted" [ "$code" = 204 ]
check "create.recorded: and leaves no process" gone_uid "$HUID"
new_sandbox '{"id":"fx-recorded"}'
check "create.recorded: the same create works again (201)" [ "$code" = 201 ]
req DELETE /v1/sandboxes/fx-recorded
stop_daemon

# ---- delete ------------------------------------------------------------------------------
fault_daemon delete.destroyed
new_sandbox '{"id":"fx-del"}'
DUID=$HUID
curl -s --max-time 30 --unix-socket "$S" -X DELETE http://glovebox/v1/sandboxes/fx-del > /dev/null
died_at delete.destroyed
inventory
restart
check "delete.destroyed: the destroyed sandbox is reported lost in the log" \
    grep -q "sandbox 'fx-del' did not survive" "$LOG"
check "delete.destroyed: and in the audit log" audited sandbox.lost fx-del
req GET /v1/sandboxes/fx-del
check "delete.destroyed: it is not listed" [ "$code" = 404 ]
check "delete.destroyed: nothing of it runs" gone_uid "$DUID"
check "delete.destroyed: its runtime dir is gone" [ ! -e "$RUN/sandboxes/fx-del" ]
invariants delete.destroyed
new_sandbox '{"id":"fx-del"}'
check "delete.destroyed: the id can be used again (201)" [ "$code" = 201 ]
req DELETE /v1/sandboxes/fx-del
check "delete.destroyed: and deleted (204)" [ "$code" = 204 ]
stop_daemon

# ---- snapshots, forks --------------------------------------------------------------------
# one acknowledged snapshot first, so that the second one (@2) is the one in flight
for point in snapshot.frozen snapshot.copy; do
    fault_daemon "$point@2"
    new_sandbox
    A=$SB
    sh_in "$A" 'echo kept > /home/user/f; head -c 100000 /dev/urandom > /home/user/blob; nohup sh -c "while :; do date +%s%N > /tmp/c; sleep 0.02; done" >/dev/null 2>&1 &'
    req POST "/v1/sandboxes/$A/snapshots" '{"name":"first"}'
    check "$point: an acknowledged snapshot (201)" [ "$code" = 201 ]
    S1=$(field "j['id']")
    sh_in "$A" 'echo second > /home/user/f2'
    post_dying "/v1/sandboxes/$A/snapshots" '{"name":"second"}'
    died_at "$point"
    inventory
    restart
    check "$point: the sandbox is adopted, running" [ "$(state_of "$A")" = running ]
    [ "$point" = snapshot.frozen ] &&
        check "$point: it was thawed (the log says why)" grep -q "sandbox '$A': thawed" "$LOG"
    sh_in "$A" 'a=$(cat /tmp/c); sleep 0.2; b=$(cat /tmp/c); [ "$b" != "$a" ] && cat /home/user/f'
    check "$point: its processes run and its files are there" eval "[ '$code' = 200 ] && [ '$out' = kept ]"
    req GET /v1/snapshots
    check "$point: the acknowledged snapshot is listed, the one in flight is not" \
        [ "$(field "[s['name'] for s in j['snapshots']]")" = "['first']" ]
    invariants "$point"
    new_sandbox "{\"snapshot\":\"$S1\"}"
    B=$SB
    check "$point: a clone of the acknowledged snapshot has its files" works "$B"
    req POST "/v1/sandboxes/$A/snapshots" '{"name":"second"}'
    check "$point: the snapshot can be taken again (201)" [ "$code" = 201 ]
    req DELETE "/v1/sandboxes/$A"; req DELETE "/v1/sandboxes/$B"
    for s in first second; do req DELETE "/v1/snapshots/$s"; done
    stop_daemon
done

# a fork makes its sandboxes through the create path: killed after its snapshot, while its
# first sandbox is made but not recorded
fault_daemon create.spawned@2
new_sandbox
A=$SB
sh_in "$A" 'echo kept > /home/user/f'
post_dying "/v1/sandboxes/$A/fork" '{"count":2}'
died_at create.spawned
inventory
restart
check "fork: the source sandbox is adopted, running" [ "$(state_of "$A")" = running ]
req GET /v1/sandboxes
check "fork: the unrecorded sandbox is removed (only the source is listed)" \
    [ "$(field "[s['id'] for s in j['sandboxes']]")" = "['$A']" ]
check "fork: the log says so" grep -q "it had no record" "$LOG"
req GET "/v1/snapshots?kind=fork"
check "fork: its snapshot (recorded before the sandboxes) is listed" [ "$(field "len(j['snapshots'])")" = 1 ]
invariants fork
req POST "/v1/sandboxes/$A/fork" '{"count":2}'
check "fork: it can be done again (201, two sandboxes)" \
    eval "[ '$code' = 201 ] && [ \"\$(field \"len(j['sandboxes'])\")\" = 2 ]"
F1=$(field "j['sandboxes'][0]['id']")
check "fork: and its sandboxes have the files" works "$F1"
stop_daemon

# ---- sessions ----------------------------------------------------------------------------
for point in session.call_recorded session.result_recorded; do
    fault_daemon "$point@2"
    req POST /v1/sessions '{}'
    SES=$(field "j['id']")
    execute tu-1 'echo one >> runs; wc -l < runs'
    check "$point: an acknowledged call" eval "[ '$code' = 200 ] && [ \"\$(text)\" = 1 ]"
    execute tu-2 'echo two >> runs; wc -l < runs'
    died_at "$point"
    inventory
    restart
    req GET "/v1/sessions/$SES"
    check "$point: the session is there, with its sandbox" eval "[ '$code' = 200 ] && [ \"\$(field \"j['sandbox_id'] is not None\")\" = True ]"
    execute tu-1 'echo one >> runs; wc -l < runs'
    check "$point: the acknowledged call's result is replayed, not run again" \
        eval "[ '$code' = 200 ] && [ \"\$(text)\" = 1 ] && grep -qi '^Glovebox-Replayed: true' '$T/headers'"
    execute tu-2 'echo two >> runs; wc -l < runs'
    if [ "$point" = session.call_recorded ]; then
        check "$point: the call in flight (recorded, never run) runs once on its retry" \
            eval "[ '$code' = 200 ] && [ \"\$(text)\" = 2 ] && ! grep -qi '^Glovebox-Replayed' '$T/headers'"
    else
        check "$point: the call in flight (its result recorded) is replayed on its retry" \
            eval "[ '$code' = 200 ] && [ \"\$(text)\" = 2 ] && grep -qi '^Glovebox-Replayed: true' '$T/headers'"
    fi
    execute tu-3 'wc -l < runs'
    check "$point: each call ran exactly once" eval "[ '$code' = 200 ] && [ \"\$(text)\" = 2 ]"
    req GET "/v1/sessions/$SES/verify"
    check "$point: the session's log verifies" [ "$code" = 200 ]
    invariants "$point"
    req DELETE "/v1/sessions/$SES"
    stop_daemon
done

# ---- artifacts ---------------------------------------------------------------------------
fault_daemon artifact.copied@2
new_sandbox
A=$SB
sh_in "$A" 'echo first > /tmp/a1; head -c 300000 /dev/urandom > /tmp/a2; sha256sum /tmp/a2'
SHA2=${out%% *}
req POST "/v1/sandboxes/$A/artifacts" '{"path":"/tmp/a1","name":"one"}'
check "artifact.copied: an acknowledged artifact (201)" [ "$code" = 201 ]
A1=$(field "j['id']")
post_dying "/v1/sandboxes/$A/artifacts" '{"path":"/tmp/a2","name":"two"}'
died_at artifact.copied
check "artifact.copied: the copy was left in artifacts/tmp" [ -n "$(ls -A "$STATE/artifacts/tmp")" ]
inventory
sleep 1.1 # the sweep takes temporary files older than 1 s
restart
req GET /v1/artifacts
check "artifact.copied: the acknowledged artifact is listed, the one in flight is not" \
    [ "$(field "[a['name'] for a in j['artifacts']]")" = "['one']" ]
code=$(curl -s --max-time 10 -o "$T/a1" -w '%{http_code}' --unix-socket "$S" "http://glovebox/v1/artifacts/$A1/content")
check "artifact.copied: its content is intact" eval "[ '$code' = 200 ] && [ \"\$(cat '$T/a1')\" = first ]"
invariants artifact.copied
req POST "/v1/sandboxes/$A/artifacts" '{"path":"/tmp/a2","name":"two"}'
check "artifact.copied: the publish works again, with the right sha256" \
    eval "[ '$code' = 201 ] && [ \"\$(field \"j['sha256']\")\" = '$SHA2' ]"
stop_daemon

# ---- templates ---------------------------------------------------------------------------
# an OCI image of sh and cat with their libraries (from the host)
python3 - "$T/img.tar" <<'PY'
import hashlib, io, json, os, subprocess, sys, tarfile
def ti(name, **kw):
    t = tarfile.TarInfo(name); t.mtime = 1700000000
    for k, v in kw.items(): setattr(t, k, v)
    return t
ents, seen = [], set()
def add(p):
    parts = p.strip('/').split('/')
    for i in range(1, len(parts) + 1):
        q = '/' + '/'.join(parts[:i])
        if os.path.islink(q):
            if q not in seen:
                seen.add(q)
                tgt = os.readlink(q)
                ents.append((ti(q[1:], type=tarfile.SYMTYPE, linkname=tgt), None))
                add(os.path.normpath(os.path.join(os.path.dirname(q), tgt)))
            rest = '/'.join(parts[i:])
            if rest: add(os.path.realpath(q) + '/' + rest)
            return
        if q in seen: continue
        seen.add(q)
        if os.path.isdir(q): ents.append((ti(q[1:] + '/', type=tarfile.DIRTYPE, mode=0o755), None))
        else:
            d = open(q, 'rb').read(); ents.append((ti(q[1:], size=len(d), mode=0o755), d))
for b in ['/bin/sh', '/bin/cat']:
    add(b)
    for line in subprocess.check_output(['ldd', os.path.realpath(b)], text=True).splitlines():
        for w in line.split():
            if w.startswith('/'): add(w)
ents.append((ti('etc/fx', size=3), b'fx\n'))
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as tf:
    for t, d in ents: tf.addfile(t, io.BytesIO(d) if d is not None else None)
L = buf.getvalue()
cfg = json.dumps({'architecture': 'amd64', 'os': 'linux', 'config': {'Env': ['PATH=/bin:/usr/bin']}}).encode()
sha = lambda b: hashlib.sha256(b).hexdigest()
files = [('manifest.json', json.dumps([{'Config': sha(cfg) + '.json', 'Layers': ['l/layer.tar']}]).encode()),
         (sha(cfg) + '.json', cfg), ('l/layer.tar', L)]
with tarfile.open(sys.argv[1], 'w') as tf:
    for n, d in files: tf.addfile(ti(n, size=len(d)), io.BytesIO(d))
PY
tmpl_state() { req GET /v1/templates/fx-img; field "j.get('state')" 2>/dev/null; }
fault_daemon template.build
post_dying /v1/templates "{\"name\":\"fx-img\",\"from\":{\"oci\":{\"path\":\"$T/img.tar\"}}}"
died_at template.build
inventory
restart
req GET /v1/templates/fx-img
check "template.build: the template that was never built is not there (404)" [ "$code" = 404 ]
check "template.build: nothing of it is in the state dir" eval "! ls -a '$STATE/templates' | grep -q fx-img"
invariants template.build
req POST /v1/templates "{\"name\":\"fx-img\",\"from\":{\"oci\":{\"path\":\"$T/img.tar\"}}}"
for i in $(seq 300); do [ "$(tmpl_state)" = building ] || break; sleep 0.1; done
check "template.build: the build works again" [ "$(tmpl_state)" = ready ]
new_sandbox '{"template":"fx-img"}'
sh_in "$SB" 'cat /etc/fx'
check "template.build: and a sandbox of it runs" eval "[ '$code' = 200 ] && [ '$out' = fx ]"
req DELETE "/v1/sandboxes/$SB"
stop_daemon

# ---- hibernate and wake (CRIU) -----------------------------------------------------------
restart
hibernate_capability
stop_daemon
if [ "$CRIU_OK" = 1 ]; then
    counting() { # a sandbox with a counter in memory and a file: $SB, $HUID
        new_sandbox
        sh_in "$SB" 'echo kept > /home/user/f; nohup sh -c "i=0; while :; do i=\$((i+1)); echo \$i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.02; done" >/dev/null 2>&1 & sleep 0.2'
    }
    runs_on() {
        sh_in "$1" 'a=$(cat /tmp/c); sleep 0.3; b=$(cat /tmp/c); [ "$b" -gt "$a" ] && cat /home/user/f'
        [ "$code" = 200 ] && [ "$out" = kept ]
    }
    for point in hibernate.ask hibernate.dump; do
        fault_daemon "$point"
        counting
        A=$SB
        post_dying "/v1/sandboxes/$A/hibernate" '{}'
        died_at "$point"
        inventory
        restart
        check "$point: the sandbox is adopted, running" [ "$(state_of "$A")" = running ]
        check "$point: its processes, memory and files are as they were" runs_on "$A"
        check "$point: its image is not left" [ ! -e "$STATE/hibernate/$A" ]
        invariants "$point"
        req POST "/v1/sandboxes/$A/hibernate" '{}'
        if [ "$point" = hibernate.dump ]; then
            # its layer handle went with the daemon that died (t760): refused, clearly
            check "$point: hibernating again is refused with a clear error" \
                eval "[ '$code' != 200 ] && grep -q 'writable layer' '$T/body'"
        else
            check "$point: it can be hibernated again" eval "[ '$code' = 200 ] && [ \"\$(field \"j['state']\")\" = hibernated ]"
            req POST "/v1/sandboxes/$A/resume" '{}'
            check "$point: and woken" runs_on "$A"
        fi
        req DELETE "/v1/sandboxes/$A"
        stop_daemon
    done

    fault_daemon hibernate.dumped
    counting
    A=$SB; AUID=$HUID
    post_dying "/v1/sandboxes/$A/hibernate" '{}'
    died_at hibernate.dumped
    inventory
    restart
    check "hibernate.dumped: the sandbox is reported lost in the log" grep -q "sandbox '$A' did not survive" "$LOG"
    check "hibernate.dumped: and in the audit log" audited sandbox.lost "$A"
    req GET "/v1/sandboxes/$A"
    check "hibernate.dumped: it is not listed" [ "$code" = 404 ]
    check "hibernate.dumped: nothing of it runs" gone_uid "$AUID"
    check "hibernate.dumped: its image is not left behind" [ ! -e "$STATE/hibernate/$A" ]
    invariants hibernate.dumped
    counting
    req POST "/v1/sandboxes/$SB/hibernate" '{}'
    check "hibernate.dumped: another sandbox hibernates" [ "$code" = 200 ]
    req POST "/v1/sandboxes/$SB/resume" '{}'
    check "hibernate.dumped: and wakes" runs_on "$SB"
    req DELETE "/v1/sandboxes/$SB"
    stop_daemon

    fault_daemon wake.restored
    counting
    A=$SB; AUID=$HUID
    req POST "/v1/sandboxes/$A/hibernate" '{}'
    check "wake.restored: an acknowledged hibernate" [ "$code" = 200 ]
    post_dying "/v1/sandboxes/$A/resume" '{}'
    died_at wake.restored
    inventory
    restart
    st=$(state_of "$A")
    echo "# after a kill at wake.restored the sandbox is '$st'"
    check "wake.restored: the restored sandbox is adopted, running" [ "$st" = running ]
    check "wake.restored: its processes, memory and files are as they were" runs_on "$A"
    check "wake.restored: one copy of it runs (one counter)" \
        [ "$(pgrep -u "$AUID" -f 'i=0; while' | wc -l)" = 1 ]
    invariants wake.restored
    req POST "/v1/sandboxes/$A/hibernate" '{}'
    check "wake.restored: it can be hibernated again" [ "$code" = 200 ]
    req POST "/v1/sandboxes/$A/resume" '{}'
    check "wake.restored: and woken" runs_on "$A"
    req DELETE "/v1/sandboxes/$A"
    stop_daemon
else
    echo "# skip: hibernate.ask, hibernate.dump, hibernate.dumped, wake.restored: hibernate is unavailable here ($CRIU_WHY)"
fi
restart
spec_check
finish
