#!/bin/sh
# test-timeout: 240
# Who a request acts for is its own, on every asynchronous path (issue 14 #1: the caller's
# identity was one value in the server, left as the last request set it, so a queued session
# call ran as whichever key the loop had served meanwhile). Two keys, A and B: A's work that
# finishes later (a queued session call that finds its sandbox gone and makes a replacement,
# a snapshot, a fork, a hibernate and a wake, a create on a worker thread, an E2B data-plane
# upload, the collector's pass) runs while B (and an anonymous client, and the E2B data plane
# of B's own sandbox) keep the loop busy; afterwards everything made belongs to the one who
# asked, and the audit log names them, never B.
NAME=actor
. "$(dirname "$0")/../lib/daemon.sh"
command -v python3 >/dev/null || { echo "skip: python3 not installed"; exit 77; }
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
# B keeps the loop busy with hundreds of requests a second: not a test of the per-key rate
# limit (t170-http-limits.sh is), so it is off here
start_daemon --listen "127.0.0.1:$PORT" --retain-snapshots count=1 --gc-interval 1h --rate-limit 0
hibernate_capability
A=$("$GB" apikey create team-a 2>/dev/null)
B=$("$GB" apikey create team-b 2>/dev/null)
check "two keys" eval '[ -n "$A" ] && [ -n "$B" ]'

# the driver prints "ok - ..." / "not ok - ..." / "skip - ..." lines; they are counted here
python3 - "$PORT" "$A" "$B" "$S" "$STATE/glovebox.db" "$CRIU_OK" > "$T/out" 2>&1 <<'EOF'
import http.client, json, socket, sqlite3, sys, threading, time

port, KA, KB, sock, db, criu_ok = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6] == "1"

class UnixConn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(sock)

def call(key, method, path, body=None, headers=None, timeout=60):
    """key: an API key, "admin" (the unix socket) or None (anonymous TCP)."""
    c = UnixConn("glovebox", timeout=timeout) if key == "admin" else \
        http.client.HTTPConnection("127.0.0.1", int(port), timeout=timeout)
    h = dict(headers or {})
    if key not in (None, "admin"):
        h["Authorization"] = "Bearer " + key
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw) if raw else None
    except ValueError:
        return r.status, raw

def check(name, cond, detail=""):
    print(("ok - " if cond else "not ok - ") + name + ("" if cond else "  # " + str(detail)))
    sys.stdout.flush()

def q(sql, *args):
    c = sqlite3.connect(db, timeout=30)
    try:
        return c.execute(sql, args).fetchall()
    finally:
        c.close()

def owner_of(sandbox):
    rows = q("select owner from sandboxes where id = ?", sandbox)
    return rows[0][0] if rows else None

def actors(kind, sandbox=None):
    # the writer thread records audit rows behind the reply: wait for them
    for _ in range(100):
        rows = q("select actor from audit where kind = ?" + (" and sandbox = ?" if sandbox else ""),
                 *((kind, sandbox) if sandbox else (kind,)))
        if rows:
            return sorted(set(a for (a,) in rows))
        time.sleep(0.05)
    return []

# B's noise: B's list, sessions, its own E2B data plane, an anonymous client, until stopped
stop = threading.Event()
noise = {"b": 0, "anon": 0, "e2b": 0}
anon_codes, e2b_codes = set(), set()
st, bsb = call(KB, "POST", "/v1/sandboxes", {"id": "b-own"})
check("B has a sandbox of its own", st == 201, st)
btok = q("select token from sandboxes where id = 'b-own'")[0][0]
def hammer():
    i = 0
    while not stop.is_set():
        i += 1
        try:
            call(KB, "GET", "/v1/sessions", timeout=10); noise["b"] += 1
            call(KB, "GET", "/v1/sandboxes", timeout=10); noise["b"] += 1
            anon_codes.add(call(None, "GET", "/v1/sandboxes", timeout=10)[0]); noise["anon"] += 1
            e2b_codes.add(call(None, "GET", "/files?path=/etc/hostname&username=user", timeout=10,
                               headers={"E2b-Sandbox-Id": "b-own", "E2b-Sandbox-Port": "49983",
                                        "X-Access-Token": btok})[0]); noise["e2b"] += 1
        except Exception:
            time.sleep(0.01)
threads = [threading.Thread(target=hammer, daemon=True) for _ in range(2)]
for t in threads:
    t.start()

# 1. a session's queued call, its sandbox gone: the replacement is A's, with A's workspace
st, ses = call(KA, "POST", "/v1/sessions", {})
check("A opens a session", st == 201, (st, ses))
sid = ses["id"]
old = ses.get("sandbox_id")
st, r = call(KA, "POST", "/v1/sessions/%s/execute" % sid,
             {"tool_use_id": "w", "name": "write",
              "input": {"file_path": "/workspace/secret.txt", "content": "A's secret\n"}})
check("A writes a secret into its workspace", st == 200, (st, r))
results = {}
def run(tuid, name, inp):
    results[tuid] = call(KA, "POST", "/v1/sessions/%s/execute" % sid,
                         {"tool_use_id": tuid, "name": name, "input": inp}, timeout=120)
t1 = threading.Thread(target=run, args=("slow", "bash", {"command": "sleep 2"}))
t1.start()
time.sleep(0.5)
t2 = threading.Thread(target=run, args=("queued", "read", {"file_path": "/workspace/secret.txt"}))
t2.start()
time.sleep(0.3)
# the session's sandbox dies under the running call (as the admin: what a crash would do)
st, _ = call("admin", "DELETE", "/v1/sandboxes/" + old)
check("the session's sandbox is deleted under a running call", st == 204, st)
t1.join(); t2.join()
st, r = results["queued"]
check("the queued call runs on a replacement and reads A's file",
      st == 200 and "A's secret" in json.dumps(r), (st, r))
st, ses2 = call(KA, "GET", "/v1/sessions/" + sid)
new = ses2.get("sandbox_id")
check("the session has a new sandbox", st == 200 and new and new != old, (st, ses2))
check("the replacement is owned by A", owner_of(new) == "team-a", owner_of(new))
check("A sees the replacement", call(KA, "GET", "/v1/sandboxes/" + new)[0] == 200)
check("B does not see it", call(KB, "GET", "/v1/sandboxes/" + new)[0] == 404)
st, _ = call(KB, "GET", "/v1/sandboxes/%s/files?path=/workspace/secret.txt" % new)
check("B cannot read A's secret through it", st == 404, st)
check("the replacement's create is audited as A", actors("sandbox.create", new) == ["team-a"],
      actors("sandbox.create", new))

# 2. a create made on a worker thread while others are served: A's
st, a1 = call(KA, "POST", "/v1/sandboxes", {"id": "a-one"})
check("A creates a sandbox (off the loop)", st == 201, st)
check("it is A's", owner_of("a-one") == "team-a", owner_of("a-one"))
check("its create is audited as A", actors("sandbox.create", "a-one") == ["team-a"])

# 3. a snapshot and a fork (a copy on a worker, then clones) while B is served: A's
st, snap = call(KA, "POST", "/v1/sandboxes/a-one/snapshots", {"name": "a-snap"})
check("A snapshots its sandbox", st == 201, (st, snap))
st, lst = call(KA, "GET", "/v1/snapshots")
check("A lists its snapshot", st == 200 and any(s["id"] == snap["id"] for s in lst["snapshots"]))
st, lst = call(KB, "GET", "/v1/snapshots")
check("B does not", st == 200 and not any(s["id"] == snap["id"] for s in lst["snapshots"]))
check("the snapshot is A's", q("select owner from snapshots where id = ?", snap["id"]) == [("team-a",)])
check("its creation is audited as A", actors("snapshot.create", "a-one") == ["team-a"])
st, fk = call(KA, "POST", "/v1/sandboxes/a-one/fork", {"count": 2})
ids = [s["id"] for s in (fk or {}).get("sandboxes", [])] if st == 201 else []
check("A forks its sandbox twice", len(ids) == 2, (st, fk))
check("the forks are A's", all(owner_of(i) == "team-a" for i in ids), [owner_of(i) for i in ids])
check("B sees none of them", all(call(KB, "GET", "/v1/sandboxes/" + i)[0] == 404 for i in ids))

# 4. hibernate and wake (a dump and a restore on a worker) while B is served
if criu_ok:
    st, r = call(KA, "POST", "/v1/sandboxes/a-one/hibernate", {}, timeout=180)
    check("A hibernates its sandbox", st == 200, (st, r))
    st, r = call(KA, "POST", "/v1/sandboxes/a-one/resume", {}, timeout=180)
    check("A wakes it", st == 200, (st, r))
    check("the hibernate is audited as A", actors("sandbox.hibernate", "a-one") == ["team-a"])
    check("the wake is audited as A", actors("sandbox.wake", "a-one") == ["team-a"])
    check("it is still A's", owner_of("a-one") == "team-a")
else:
    print("skip - hibernate and wake: CRIU is not available here")

# 5. an E2B data-plane upload into A's sandbox (the token decides; it acts as the owner)
atok = q("select token from sandboxes where id = 'a-one'")[0][0]
st, r = call(None, "POST", "/files?path=/home/user/up.txt&username=user", b"hello",
             headers={"E2b-Sandbox-Id": "a-one", "E2b-Sandbox-Port": "49983",
                      "X-Access-Token": atok, "Content-Type": "application/octet-stream"})
check("an upload with A's sandbox token", st == 200, (st, r))
st, _ = call(KB, "POST", "/v1/sandboxes", {"id": "b-two"})
check("B creates a sandbox right after", st == 201, st)
check("B's new sandbox is B's (the data plane left no owner behind)", owner_of("b-two") == "team-b")
check("the upload is audited as A",
      "team-b" not in actors("file.write", "a-one") and "team-a" in actors("file.write", "a-one"),
      actors("file.write", "a-one"))

# 6. the collector's pass (retention keeps one snapshot): its removals are the daemon's
st, snap2 = call(KA, "POST", "/v1/sandboxes/a-one/snapshots", {"name": "a-snap2"})
check("A takes a second snapshot", st == 201, st)
st, gc = call("admin", "POST", "/v1/gc", {})
check("the collector runs", st == 200, (st, gc))
gone = [r["id"] for r in (gc or {}).get("removed", []) if r.get("kind") == "snapshot"]
check("it removes A's older snapshot", snap["id"] in gone, gc)
check("its pass is audited as the system, not B", actors("gc.run") == ["system"], actors("gc.run"))

stop.set()
for t in threads:
    t.join()
check("B, an anonymous client and B's data plane were served meanwhile",
      noise["b"] > 0 and noise["anon"] > 0 and noise["e2b"] > 0, noise)
check("the anonymous client got 401 every time", anon_codes == {401}, anon_codes)
check("B's data plane was answered every time", e2b_codes == {200}, e2b_codes)

# 7. nothing anywhere is owned by B but what B made, and B's audit rows are B's requests only
b_owned = sorted(i for (i,) in q("select id from sandboxes where owner = 'team-b'"))
check("B owns exactly its own sandboxes", b_owned == ["b-own", "b-two"], b_owned)
b_kinds = sorted(set(k for (k,) in q("select kind from audit where actor = 'team-b'")))
check("B's audit rows are its own creates", b_kinds == ["sandbox.create"], b_kinds)
check("no session is B's", q("select count(*) from sessions where owner = 'team-b'") == [(0,)])
EOF
cat "$T/out"
pass=$((pass + $(grep -c '^ok - ' "$T/out")))
fail=$((fail + $(grep -c '^not ok - ' "$T/out")))
grep -q '^ok - B owns exactly' "$T/out" || no "the driver ran to its end"
summary
