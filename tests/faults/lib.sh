# The fault suite's helpers, sourced after tests/lib/daemon.sh (docs/daemon.md, "Faults, on
# purpose"). A case starts a daemon with GLOVEBOX_FAULT set, drives it into the fault, starts
# a new daemon on the same state and runtime dirs, and ends with `invariants`. It defines:
#   fault_daemon SPEC [ARGS...]  a daemon with GLOVEBOX_FAULT=SPEC ("" for none); its log is $LOG
#   restart [ARGS...]            the same without a fault
#   stop_daemon                  SIGTERM (its sandboxes go with it: --kill-on-exit), bounded
#   died_at POINT                the daemon died at POINT (bounded wait), its log says so
#   inventory                    remember what this daemon's sandboxes hold now (uids)
#   invariants LABEL             the checks every case ends with (each its own check)
#   finish                       stop the daemon (--kill-on-exit), check nothing is left, summary
#   sh_in ID SCRIPT              run SCRIPT in sandbox ID and wait: $code, $out (its stdout)
#   execute TOOL_USE_ID COMMAND  a bash call in session $SES: $code, $T/body; text: its text
# Every curl has --max-time; every wait is a bounded loop.
GB="$BUILD/glovebox"
NDAEMON=0
LOG=
: > "$T/uids"
# this daemon's cgroup names begin with a hash of its runtime dir (src/sandbox/ns.c cg_scope)
SCOPE=$(python3 -c "
import sys
h = 2166136261
for b in sys.argv[1].encode():
    h = ((h ^ b) * 16777619) & 0xffffffff
print('g%08x-' % h)" "$RUN")

fault_daemon() {
    spec=$1; shift
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        no "the case stopped its daemon before starting the next one"
        stop_daemon
    fi
    NDAEMON=$((NDAEMON + 1))
    LOG="$T/daemon-$NDAEMON.log"
    ln -sf "daemon-$NDAEMON.log" "$T/daemon.log" # what summary shows when a check failed
    GLOVEBOX_FAULT="$spec" "$D" --state-dir "$STATE" --runtime-dir "$RUN" --kill-on-exit "$@" \
        2>"$LOG" &
    DPID=$!
    for i in $(seq 400); do
        [ "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' --unix-socket "$S" \
            http://glovebox/healthz)" = 200 ] && return 0
        kill -0 "$DPID" 2>/dev/null || break
        sleep 0.05
    done
    echo "not ok - gloveboxd did not start:"; cat "$LOG"; exit 1
}
restart() { fault_daemon "" "$@"; }
stop_daemon() { # SIGTERM, bounded: with --kill-on-exit its sandboxes go with it; $rc
    kill -TERM "$DPID"
    for i in $(seq 300); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$DPID" 2>/dev/null && { no "the daemon stops within 30 s of SIGTERM"; kill -9 "$DPID"; }
    wait "$DPID"; rc=$?; DPID=
}

died_at() {
    for i in $(seq 300); do
        kill -0 "$DPID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$DPID" 2>/dev/null; then
        no "the daemon died at '$1' (it is still running)"
        kill -9 "$DPID"
    else
        check "the daemon died at '$1'" grep -q "fault: '$1': kill" "$LOG"
    fi
    wait "$DPID" 2>/dev/null
    DPID=
}

sh_in() {
    req POST "/v1/sandboxes/$1/exec" "$(python3 -c 'import json,sys; print(json.dumps({"shell":sys.argv[1],"wait":True}))' "$2")"
    out=$(field "j.get('stdout','').rstrip(chr(10))" 2>/dev/null)
}
# new_sandbox [BODY]: a sandbox, $SB and $HUID; its uid remembered for the final checks
new_sandbox() {
    req POST /v1/sandboxes "${1:-{\}}"
    SB=$(field "j['id']" 2>/dev/null)
    HUID=$(field "j['host_uid']" 2>/dev/null)
    [ -n "$HUID" ] && echo "$HUID" >> "$T/uids"
    [ "$code" = 201 ]
}
# execute TOOL_USE_ID COMMAND: a bash call in session $SES; $code, $T/body, $T/headers
execute() {
    code=$(curl -s --max-time 60 -D "$T/headers" -o "$T/body" -w '%{http_code}' \
        --unix-socket "$S" -X POST -H 'Content-Type: application/json' --data-binary \
        "$(python3 -c 'import json, sys; print(json.dumps({"tool_use_id": sys.argv[1], "name": "bash", "input": {"command": sys.argv[2]}}))' "$1" "$2")" \
        "http://glovebox/v1/sessions/$SES/execute")
}
text() { field "''.join(b.get('text', '') for b in j['content']).strip()" 2>/dev/null; }
state_of() { req GET "/v1/sandboxes/$1"; field "j.get('state')" 2>/dev/null; }
# range_procs UID: the processes that run as any uid of the sandbox whose root is UID
# (zombies aside: an adopted init that ended is the host's init's to reap, about once a second)
range_procs() { ps -eo uid=,pid=,stat= | awk -v u="$1" '$1 >= u && $1 < u + 65536 && $3 !~ /^Z/ { print $2 }'; }
gone_uid() { # UID: none (bounded wait: the host's init reaps an adopted init a moment later)
    for i in $(seq 50); do
        [ -z "$(range_procs "$1")" ] && return 0
        sleep 0.1
    done
    return 1
}

# cgroups: "ID DIR" for each cgroup directory of this daemon's sandboxes, every hierarchy
cg_dirs() {
    python3 - "$SCOPE" <<'PY'
import os, sys
scope = sys.argv[1]
own = {}
for line in open('/proc/self/cgroup'):
    hid, ctrls, path = line.rstrip('\n').split(':', 2)
    own[ctrls] = path
for line in open('/proc/self/mountinfo'):
    pre, post = line.split(' - ', 1)
    f = pre.split()
    fstype, _src, opts = (post.split() + ['', '', ''])[:3]
    if f[3] != '/':
        continue
    path = None
    if fstype == 'cgroup2':
        path = own.get('')
    elif fstype == 'cgroup':
        o = set(opts.split(','))
        for ctrls, p in own.items():
            if ctrls and set(ctrls.split(',')) <= o:
                path = p
    if path is None:
        continue
    base = os.path.join(f[4] + ('' if path == '/' else path), 'glovebox')
    try:
        names = os.listdir(base)
    except OSError:
        continue
    for n in names:
        d = os.path.join(base, n)
        if n.startswith(scope) and os.path.isdir(d):
            print(n[len(scope):], d)
PY
}
# cg_pids: "ID PID" for every process in this daemon's sandbox cgroups
cg_pids() {
    cg_dirs | while read -r id dir; do
        [ -r "$dir/cgroup.procs" ] || continue
        while read -r pid; do echo "$id $pid"; done < "$dir/cgroup.procs"
    done | sort -u
}
# inventory: remember the uids of every process in this daemon's cgroups and of every row
inventory() {
    cg_pids | while read -r id pid; do stat -c %u "/proc/$pid" 2>/dev/null; done >> "$T/uids"
    python3 -c "
import sqlite3
c = sqlite3.connect('file:$STATE/glovebox.db?mode=ro', uri=True, timeout=10)
for (u,) in c.execute('select host_uid from sandboxes'): print(u)" >> "$T/uids" 2>/dev/null
}

listed() { # the daemon's sandboxes: "ID STATE HOST_UID" lines in $T/listed
    curl -s --max-time 10 --unix-socket "$S" "http://glovebox/v1/sandboxes?limit=1000" > "$T/list"
    python3 -c "
import json
for s in json.load(open('$T/list'))['sandboxes']: print(s['id'], s['state'], s['host_uid'])" \
        > "$T/listed" 2>/dev/null
}
is_listed() { awk -v id="$1" '$1 == id { f = 1 } END { exit !f }' "$T/listed"; }

no_host_mounts() { # nothing of the daemon's is mounted under $T, but what the case mounted
    awk -v t="$T/" -v own="${OWN_MOUNT:-}" 'index($5, t) == 1 && $5 != own { print $5; bad = 1 }
        END { exit bad }' /proc/self/mountinfo > "$T/mounts"
}
cgroups_listed() {
    cg_dirs > "$T/cgs"
    rc=0
    while read -r id dir; do
        is_listed "$id" || { echo "# a cgroup of no listed sandbox: $dir"; rc=1; }
    done < "$T/cgs"
    return $rc
}
procs_listed() {
    cg_pids > "$T/pids"
    rc=0
    while read -r id pid; do
        is_listed "$id" || { echo "# a process of no listed sandbox: $pid ($id): $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"; rc=1; }
    done < "$T/pids"
    return $rc
}
no_criu_tables() {
    rc=0
    while read -r id st uid; do
        [ "$st" = hibernated ] && continue
        pid=$(awk -v id="$id" '$1 == id { print $2; exit }' "$T/pids")
        [ -n "$pid" ] || continue
        if nsenter -t "$pid" -n nft list tables 2>/dev/null | grep -q 'CRIU-'; then
            echo "# sandbox '$id' has a CRIU network lock"; rc=1
        fi
    done < "$T/listed"
    return $rc
}
audit_intact() { "$GB" audit verify --state-dir "$STATE" > "$T/verify" 2>&1; }
db_ok() {
    [ "$(python3 -c "
import sqlite3
c = sqlite3.connect('$STATE/glovebox.db', timeout=10)
print(c.execute('PRAGMA integrity_check').fetchone()[0])")" = ok ]
}
# every listed snapshot has its files, whole (the bytes of its regular files, each inode once,
# are its size_bytes); every snapshot directory has its row
snapshots_whole() {
    curl -s --max-time 10 --unix-socket "$S" http://glovebox/v1/snapshots > "$T/snaps"
    python3 - "$T/snaps" "$STATE/snapshots" "$STATE/glovebox.db" <<'PY'
import json, os, sqlite3, sys
snaps = {s['id']: s for s in json.load(open(sys.argv[1]))['snapshots']}
rows = {r[0] for r in sqlite3.connect(sys.argv[3], timeout=10).execute('select id from snapshots')}
bad = 0
for sid, s in snaps.items():
    layer = os.path.join(sys.argv[2], sid, 'layer')
    seen, total = set(), 0
    for root, dirs, files in os.walk(layer):
        for f in files:
            st = os.lstat(os.path.join(root, f))
            if os.path.stat.S_ISREG(st.st_mode) and st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    if not os.path.isdir(layer) or total != s['size_bytes']:
        print('# snapshot %s: %d bytes on disk, %d listed' % (sid, total, s['size_bytes'])); bad = 1
for d in os.listdir(sys.argv[2]) if os.path.isdir(sys.argv[2]) else []:
    if d.startswith('sn-') and d not in rows:
        print('# a snapshot directory without its row: ' + d); bad = 1
sys.exit(bad)
PY
}
# every artifact row has its blob, whose sha256 is the row's; every blob has a row; no
# temporary file is left once the sweep (the daemon's first artifact request) has run
artifacts_whole() {
    curl -s --max-time 10 --unix-socket "$S" "http://glovebox/v1/artifacts?limit=1000" > /dev/null
    for i in $(seq 50); do
        [ -z "$(ls -A "$STATE/artifacts/tmp" 2>/dev/null)" ] && break
        sleep 0.1
    done
    python3 - "$STATE/artifacts" "$STATE/glovebox.db" <<'PY'
import hashlib, os, sqlite3, sys
d = sys.argv[1]
rows = {}
try:
    rows = dict(sqlite3.connect(sys.argv[2], timeout=10).execute('select id, sha256 from artifacts'))
except sqlite3.OperationalError:
    pass
bad = 0
for aid, sha in rows.items():
    p = os.path.join(d, sha)
    if not os.path.exists(p) or hashlib.sha256(open(p, 'rb').read()).hexdigest() != sha:
        print('# artifact %s: its blob is missing or does not match' % aid); bad = 1
names = os.listdir(d) if os.path.isdir(d) else []
for n in names:
    if len(n) == 64 and n not in rows.values():
        print('# a blob without a row: ' + n); bad = 1
tmp = os.listdir(os.path.join(d, 'tmp')) if os.path.isdir(os.path.join(d, 'tmp')) else []
if tmp:
    print('# temporary files left: %s' % tmp); bad = 1
sys.exit(bad)
PY
}

# every hibernate image is of a listed sandbox that is hibernated (or on its way there or back)
images_listed() {
    rc=0
    for d in "$STATE"/hibernate/*; do
        [ -e "$d" ] || continue
        st=$(awk -v id="$(basename "$d")" '$1 == id { print $2 }' "$T/listed")
        case "$st" in
            hibernated|hibernating|waking) ;;
            *) echo "# a hibernate image of a sandbox that is ${st:-not listed}: $d"; rc=1 ;;
        esac
    done
    return $rc
}

invariants() {
    lbl=$1
    listed
    check "$lbl: nothing of the daemon's is mounted under the test's dir" no_host_mounts
    [ -s "$T/mounts" ] && sed 's/^/# mounted: /' "$T/mounts"
    check "$lbl: no cgroup but those of listed sandboxes" cgroups_listed
    check "$lbl: no process in them but those of listed sandboxes" procs_listed
    check "$lbl: no CRIU network lock in any listed sandbox" no_criu_tables
    settle
    check "$lbl: the audit chain is intact" audit_intact
    check "$lbl: the database's integrity check is ok" db_ok
    check "$lbl: every listed snapshot is whole, every snapshot directory has its row" snapshots_whole
    check "$lbl: every artifact has its blob (sha256 matches), no blob or temp file is stray" artifacts_whole
    check "$lbl: every hibernate image is of a hibernated sandbox" images_listed
    awk '{print $3}' "$T/listed" >> "$T/uids"
}

# Other daemons and tests run on this machine and may take a slot (and run processes in its
# uid range) as soon as ours let it go: a process in another daemon's sandbox cgroups, or a
# lock held by a process that is neither in this daemon's cgroups nor names the test's dir,
# is someone else's, and said so.
# foreign PID: the process belongs to another daemon's sandboxes or another test
foreign() {
    if grep -q "/glovebox/$SCOPE" "/proc/$1/cgroup" 2>/dev/null; then return 1; fi
    if tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | grep -qF "$T"; then return 1; fi
    grep -q "/glovebox/" "/proc/$1/cgroup" 2>/dev/null && return 0
    tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | grep -q 'gloveboxd\|glovebox run\|/tests/'
}
# the uid slots of every uid seen are free (their OFD byte locks in /run/glovebox-uids.lock)
held_slots() {
    sort -un "$T/uids" | python3 -c "
import fcntl, os, sys
fd = os.open('/run/glovebox-uids.lock', os.O_RDWR)
for line in sys.stdin:
    uid = int(line)
    if uid < 0x20000000:
        continue
    slot = (uid - 0x20000000) // 65536
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, slot)
    except OSError:
        print(slot)"
}
# slot_holders SLOT: the pids whose open lock file holds SLOT's byte
slot_holders() {
    python3 - "$1" <<'PY'
import glob, os, sys
slot, ino = int(sys.argv[1]), os.stat('/run/glovebox-uids.lock').st_ino
for p in glob.glob('/proc/[0-9]*/fdinfo/*'):
    try:
        lines = open(p).read().splitlines()
    except OSError:
        continue
    for l in lines:
        f = l.split()
        if f[:1] == ['lock:'] and len(f) >= 9 and f[6].split(':')[-1] == str(ino) and \
                int(f[7]) <= slot <= (int(f[8]) if f[8] != 'EOF' else 1 << 62):
            print(p.split('/')[2])
PY
}
slots_free() {
    for i in $(seq 20); do
        [ -z "$(held_slots)" ] && return 0
        sleep 0.1
    done
    rc=0
    for slot in $(held_slots); do
        for pid in $(slot_holders "$slot" | sort -u); do
            if foreign "$pid"; then
                echo "# uid slot $slot is taken again, by another's $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-100)"
            else
                echo "# uid slot $slot is still held by $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"; rc=1
            fi
        done
    done
    return $rc
}
no_uid_procs() {
    rc=0
    for u in $(sort -un "$T/uids"); do
        gone_uid "$u" && continue
        for pid in $(range_procs "$u"); do
            if foreign "$pid"; then
                echo "# uid $u runs again, in another's sandbox: $pid"
            else
                echo "# a process of uid $u is left: $pid $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"; rc=1
            fi
        done
    done
    return $rc
}
no_cgroups() { cg_dirs > "$T/cgs"; [ ! -s "$T/cgs" ] || { sed 's/^/# left: /' "$T/cgs"; return 1; }; }

finish() {
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        stop_daemon
        check "the daemon stops cleanly on SIGTERM, destroying its sandboxes" [ $rc -eq 0 ]
    fi
    check "at the end: no process is left in this daemon's cgroups" eval '[ -z "$(cg_pids)" ]'
    check "at the end: no cgroup of this daemon is left" no_cgroups
    check "at the end: no process runs as any uid its sandboxes had" no_uid_procs
    check "at the end: the uid slots its sandboxes used are free" slots_free
    summary
}
