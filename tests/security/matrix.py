#!/usr/bin/env python3
"""The cross-tenant matrix: every route of gloveboxd x every identity, held to routes.tsv.

usage: matrix.py ROUTES_TSV REPO PORT ADMIN_SOCKET KEY_A KEY_B KEY_REVOKED CRIU_OK

Prints one TAP line per cell ("ok - ..." / "not ok - ..." / "ok - ... # skip ...") and a
summary; exits 1 on any mismatch. The table's format is described at its top. What it checks:

  - each (row, identity) answers the expected status; the owner's answer is a real success
    (2xx, or the row says "unsupported") and contains the row's owner-check text;
  - a refused identity gets the same answer (status and body) for the fixture's id as for an
    id that does not exist (no existence oracle);
  - no identity but the owner ever sees one of the owner's ids or tokens it did not send;
  - every route literal the daemon's routers compare a path against (src/{api,e2b,http,daemon,core,session}/*.c) is in the
    table, and no method the table does not list is served on a path it lists (405/404).
"""
import base64
import gzip
import hashlib
import http.client
import io
import json
import os
import re
import socket
import struct
import sys
import tarfile
import time
import urllib.parse

ROUTES, REPO, PORT, SOCK, KA, KB, KR, CRIU = sys.argv[1:9]
CRIU_OK = CRIU == "1"
# the browser routes' owner cells need Debian's Chromium on the host (the host template's)
CHROMIUM_OK = os.path.exists("/usr/lib/chromium/chromium")
IDENTITIES = ["owner", "other", "none", "revoked", "e2b"]
passed = failed = skipped = 0
ghosted = 0      # refused cells also sent with ids that do not exist


def tap(good, name, detail=""):
    global passed, failed
    if good:
        passed += 1
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - " + name + ("  # " + detail if detail else ""))
    sys.stdout.flush()


def skip(name, why):
    global skipped
    skipped += 1
    print("ok - %s # skip %s" % (name, why))


# ---- HTTP ------------------------------------------------------------------------------------

class UnixConn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(SOCK)


RATE = 50        # requests per second and API key, at most: under the daemon's per-key limits
sent_at = {}


def pace(headers):
    key = headers.get("Authorization") or headers.get("X-API-KEY") or headers.get("X-API-Key")
    if key is None:
        return
    times = sent_at.setdefault(key, [])
    now = time.monotonic()
    while times and now - times[0] >= 1.0:
        times.pop(0)
    if len(times) >= RATE:
        time.sleep(1.0 - (now - times[0]))
        times.pop(0)
    times.append(time.monotonic())


def call(method, path, body=None, headers=None, admin=False, stream=False, timeout=60):
    """One request; returns (status, body bytes). A stream is read for its first line or frame
    only: enough to see that it started, without waiting for its end."""
    pace(headers or {})
    c = UnixConn("glovebox", timeout=timeout) if admin else \
        http.client.HTTPConnection("127.0.0.1", int(PORT), timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        ok = 200 <= r.status < 300
        if stream == "head" and ok:  # a stream whose first bytes the row does not check
            return r.status, b""
        if stream and ok and c.sock is not None:
            # up to the first NDJSON line or Connect frame, or 5 s of silence
            c.sock.settimeout(5)
            data = b""
            try:
                while len(data) < 4096:
                    chunk = r.read1(4096)
                    if not chunk:
                        break
                    data += chunk
                    if b"\n" in data or (len(data) >= 5 and data[0] in (0, 2) and
                                         len(data) >= 5 + struct.unpack(">I", data[1:5])[0]):
                        break
            except (socket.timeout, TimeoutError):
                pass
            return r.status, data
        return r.status, r.read()
    finally:
        c.close()


def jcall(method, path, obj=None, headers=None, admin=False, key=None, e2b=False):
    h = dict(headers or {})
    if key:
        h["X-API-KEY" if e2b else "Authorization"] = key if e2b else "Bearer " + key
    data = None
    if obj is not None:
        data = json.dumps(obj).encode()
        h["Content-Type"] = "application/json"
    st, raw = call(method, path, data, h, admin=admin)
    try:
        return st, json.loads(raw) if raw else None
    except ValueError:
        return st, raw


def envelope(msg):
    b = msg.encode()
    return bytes([0]) + struct.pack(">I", len(b)) + b


def first_frame(raw):
    if len(raw) < 5:
        return None
    n = struct.unpack(">I", raw[1:5])[0]
    try:
        return json.loads(raw[5:5 + n])
    except ValueError:
        return None


def sign(path, op, user, token):
    raw = ":".join([path, op, user, token])
    sig = "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")
    return urllib.parse.quote(sig, safe="")


def must(what, st, want, body):
    if st not in (want if isinstance(want, tuple) else (want,)):
        print("Bail out! fixture: %s answered %s: %r" % (what, st, body))
        sys.exit(1)
    return body


# ---- fixtures ----------------------------------------------------------------------------------

def tiny_oci():
    """A one-layer OCI image layout tar (a file in a directory), built in memory."""
    def ti(name, size=0, **kw):
        t = tarfile.TarInfo(name)
        t.size = size
        t.mode = kw.get("mode", 0o644)
        t.type = kw.get("type", tarfile.REGTYPE)
        return t

    def tar(entries):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w") as tf:
            for t, d in entries:
                tf.addfile(t, io.BytesIO(d) if d is not None else None)
        return b.getvalue()

    def sha(b):
        return hashlib.sha256(b).hexdigest()
    layer = gzip.compress(tar([(ti("etc/", type=tarfile.DIRTYPE, mode=0o755), None),
                               (ti("etc/matrix", size=3), b"ok\n")]))
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {}}).encode()
    man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": "sha256:" + sha(cfg), "size": len(cfg)},
                      "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                  "digest": "sha256:" + sha(layer), "size": len(layer)}]}).encode()
    idx = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + sha(man),
         "size": len(man)}]}).encode()
    return tar([(ti("oci-layout", size=30), b'{"imageLayoutVersion":"1.0.0"}'),
                (ti("index.json", size=len(idx)), idx)] +
               [(ti("blobs/sha256/" + sha(b), size=len(b)), b) for b in (man, cfg, layer)])


F = {}        # placeholder -> value (the fixtures)
OWNED = {}    # A's ids and tokens that no other identity may be shown
OCI = tiny_oci()


def sandbox(key, sid):
    st, j = jcall("POST", "/v1/sandboxes", {"id": sid}, key=key)
    must("create sandbox " + sid, st, 201, j)
    return sid


def e2b_token(key, sid):
    st, j = jcall("POST", "/v2/sandboxes/%s/connect" % sid, {"timeout": 600}, key=key, e2b=True)
    must("connect " + sid, st, (200, 201), j)
    return j["envdAccessToken"]


def native_proc(sid, pty=False):
    """A long-running process started by exec (its stream is left after the start event)."""
    body = {"cmd": ["/bin/sleep", "600"]}
    if pty:
        body["pty"] = {"rows": 24, "cols": 80}
    st, raw = call("POST", "/v1/sandboxes/%s/exec" % sid, json.dumps(body).encode(),
                   {"Authorization": "Bearer " + KA, "Content-Type": "application/json"},
                   stream=True)
    line = raw.split(b"\n")[0]
    ev = json.loads(line) if st == 200 and line else None
    must("exec in " + sid, st, 200, raw)
    return str(ev["process"])


def envd_proc(sid, token):
    msg = json.dumps({"process": {"cmd": "/bin/sleep", "args": ["600"]},
                      "pty": {"size": {"rows": 24, "cols": 80}}})
    st, raw = call("POST", "/process.Process/Start", envelope(msg),
                   {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983", "X-Access-Token": token,
                    "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"},
                   stream=True)
    fr = first_frame(raw)
    must("envd Start in " + sid, st, 200, raw)
    return str(fr["event"]["start"]["pid"])


def make_fixtures():
    # sandboxes: A's main one, one per destructive or state-changing row, and B's
    for name, sid in [("sb", "m-a"), ("sb_del", "m-a-del"), ("sb_kill", "m-a-kill"),
                      ("sb_pause", "m-a-pause"), ("sb_e2bpause", "m-a-e2bpause"),
                      ("sb_hib", "m-a-hib"), ("sb_rb", "m-a-rb")]:
        F[name] = sandbox(KA, sid)
    F["sbB"] = sandbox(KB, "m-b")
    F["tokA"] = e2b_token(KA, F["sb"])
    F["tokB"] = e2b_token(KB, F["sbB"])
    F["proc"] = native_proc(F["sb"], pty=True)
    F["pid"] = envd_proc(F["sb"], F["tokA"])
    F["pid_kill"] = envd_proc(F["sb"], F["tokA"])
    # sessions, artifacts, snapshots of A
    for name in ("ses", "ses_del"):
        st, j = jcall("POST", "/v1/sessions", {}, key=KA)
        F[name] = must("session", st, 201, j)["id"]
    for name in ("art", "art_del"):
        st, j = jcall("POST", "/v1/sandboxes/m-a/artifacts", {"path": "/etc/hostname"}, key=KA)
        F[name] = must("artifact", st, 201, j)["id"]
    for name, sid, sname in [("snap", "m-a", "m-snap"), ("snap_del", "m-a", "m-snap-del"),
                             ("snap_e2bdel", "m-a", "m-snap-e2bdel"), ("snap_rb", "m-a-rb", "m-snap-rb")]:
        st, j = jcall("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": sname}, key=KA)
        F[name] = must("snapshot", st, 201, j)["id"]
    F["snap_e2bdel"] = "m-snap-e2bdel:default"
    F["snap_e2b"] = "m-snap:default"
    # the code interpreter's contexts in A's sandbox
    for name in ("ctx", "ctx_del"):
        st, j = jcall("POST", "/contexts", {"language": "python", "cwd": "/home/user"},
                      {"E2b-Sandbox-Id": F["sb"], "E2b-Sandbox-Port": "49999",
                       "X-Access-Token": F["tokA"]})
        F[name] = must("context", st, 200, j)["id"]
    # admin-made: a template to delete, one being built (its events), a secret, a key to revoke
    st, j = jcall("POST", "/v1/snapshots/%s/template" % F["snap"], {"name": "m-tpl-del"}, admin=True)
    must("template from snapshot", st, 201, j)
    F["tpl_del"] = "m-tpl-del"
    st, raw = call("POST", "/v1/templates/m-tpl-ev/oci", OCI,
                   {"Content-Type": "application/x-tar"}, admin=True)
    must("template upload", st, 202, raw)
    F["tpl_ev"] = "m-tpl-ev"
    # A's own templates (names per key): one to show, use and follow, one to delete
    for name, tname in (("tpl_a", "m-tpl-a"), ("tpl_adel", "m-tpl-adel")):
        st, raw = call("POST", "/v1/templates/%s/oci" % tname, OCI,
                       {"Content-Type": "application/x-tar", "Authorization": "Bearer " + KA})
        must("A's template upload", st, 202, raw)
        F[name] = tname
    for tname in ("m-tpl-a", "m-tpl-adel"):
        for _ in range(600):
            st, j = jcall("GET", "/v1/templates/" + tname, key=KA)
            if st != 200 or j.get("state") != "building":
                break
            time.sleep(0.05)
        must("A's template " + tname + " built", st, 200, j)
        if j.get("state") != "ready":
            must("A's template " + tname + " ready", j.get("state"), "ready", j)
    for name in ("secret", "secret_del"):
        sname = "m-" + name.replace("_", "-")
        st, j = jcall("POST", "/v1/secrets", {"name": sname, "value": "v", "hosts": ["example.com"],
                                               "header": "Authorization: Bearer ${secret}"},
                      admin=True)
        must("secret", st, 201, j)
        F[name] = sname
    st, j = jcall("POST", "/v1/apikeys", {"name": "m-key-del"}, admin=True)
    must("api key", st, 201, j)
    F["key_del"] = "m-key-del"
    F["key_q"] = "m-team-b"  # its quota read and set (to what the daemon's would be)
    F["tpl_host"] = "host"
    F["oci_path"] = os.path.join(os.environ.get("T", "/tmp"), "matrix-oci.tar")
    with open(F["oci_path"], "wb") as f:
        f.write(OCI)
    for k in ("sb", "sb_del", "sb_kill", "sb_pause", "sb_e2bpause", "sb_hib", "sb_rb", "tokA",
              "ses", "ses_del", "art", "art_del", "snap", "snap_del", "snap_rb", "ctx", "ctx_del",
              "tpl_a", "tpl_adel"):
        OWNED[k] = F[k]


GHOSTS = {}
# the fixtures a refused cell is also tried with a ghost of (A's ids, and its process handles)
GHOSTABLE = ("sb", "sb_del", "sb_kill", "sb_pause", "sb_e2bpause", "sb_hib", "sb_rb", "ses",
             "ses_del", "art", "art_del", "snap", "snap_del", "snap_rb", "snap_e2bdel", "snap_e2b",
             "ctx", "ctx_del", "proc", "pid", "pid_kill", "tpl_a", "tpl_adel")


def ghost(name):
    """A value of the same form as fixture NAME that names nothing."""
    if name not in GHOSTS:
        v = F[name]
        if name.startswith("sb"):
            g = "m-ghost-" + name.replace("_", "")
        elif name.startswith("snap_e2b"):
            g = "m-ghost-snap:default"
        elif v.isdigit():
            g = str(int(v) + 7777)
        else:
            tail = "0000" if not v.endswith("0000") else "1111"
            g = v[:-4] + tail
        GHOSTS[name] = g
    return GHOSTS[name]


# ---- the table ---------------------------------------------------------------------------------

class Row:
    pass


def load_rows():
    rows = []
    for n, line in enumerate(open(ROUTES), 1):
        line = line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) < 10:
            print("Bail out! %s:%d: %d columns, expected 10 (or 11): %r" % (ROUTES, n, len(cols), line))
            sys.exit(1)
        r = Row()
        r.line = n
        r.plane, r.method, r.path, r.body = cols[0], cols[1], cols[2], cols[3]
        r.want = dict(zip(IDENTITIES, cols[4:9]))
        r.check = cols[9] if cols[9] != "-" else ""
        r.flags = cols[10].split(",") if len(cols) > 10 and cols[10] != "-" else []
        if r.plane not in ("native", "admin", "e2b", "envd", "interp", "signed", "public"):
            print("Bail out! %s:%d: unknown plane %r" % (ROUTES, n, r.plane))
            sys.exit(1)
        rows.append(r)
    return rows


PH = re.compile(r"(?<!\$)\{([a-z][a-z0-9_]*)\}")
uniq = [0]


def expand(text, ghosts, ident):
    """Fill the placeholders; ghosts: the set of fixture names to replace by their ghost."""
    def sub(m):
        name = m.group(1)
        if name == "uniq":
            uniq[0] += 1
            return "m-u%d" % uniq[0]
        if name == "mine":  # the asker's own sandbox: a row whose body names A's objects
            return F["sb_rb"] if ident == "owner" else F["sbB"]
        if name not in F:
            print("Bail out! no fixture {%s}" % name)
            sys.exit(1)
        return ghost(name) if name in ghosts else F[name]
    return PH.sub(sub, text)


def fixtures_in(r):
    names = set(PH.findall(r.path + " " + r.body))
    if r.plane in ("envd", "interp"):
        names.add("sb")
    return sorted(n for n in names if n in GHOSTABLE)


def build(r, ident, ghosts):
    """(admin, method, path, body, headers, stream) for row r as identity ident."""
    path = expand(r.path, ghosts, ident)
    h = {}
    body = None
    stream = False
    kind, _, text = r.body.partition(":")
    if r.body != "-":
        text = expand(text, ghosts, ident)
        if kind == "json":
            body, h["Content-Type"] = text.encode(), "application/json"
        elif kind == "raw":
            body, h["Content-Type"] = text.encode(), "application/octet-stream"
        elif kind == "connect":
            body = envelope(text)
            h["Content-Type"], h["Connect-Protocol-Version"] = "application/connect+json", "1"
            stream = True
        elif kind == "rpc":
            body = text.encode()
            h["Content-Type"], h["Connect-Protocol-Version"] = "application/json", "1"
        elif kind == "multipart":
            field, _, rest = text.partition("=")
            fname, _, content = rest.partition("=")
            bnd = "matrixboundary"
            body = ("--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                    "Content-Type: application/octet-stream\r\n\r\n%s\r\n--%s--\r\n"
                    % (bnd, field, fname, content, bnd)).encode()
            h["Content-Type"] = "multipart/form-data; boundary=" + bnd
        elif kind == "oci":
            body, h["Content-Type"] = OCI, "application/x-tar"
        else:
            print("Bail out! line %d: unknown body kind %r" % (r.line, kind))
            sys.exit(1)
    if "stream" in r.flags:
        stream = True if r.check else "head"
    admin = False
    tokA_use = F["tokA"]
    if r.plane in ("envd", "interp"):
        h["E2b-Sandbox-Id"] = ghost("sb") if "sb" in ghosts else F["sb"]
        h["E2b-Sandbox-Port"] = "49999" if r.plane == "interp" else "49983"
        if ident == "owner":
            h["X-Access-Token"] = tokA_use
        elif ident == "other":
            h["X-Access-Token"] = F["tokB"]
        elif ident == "revoked":
            h["X-API-Key"] = KR
            h["Authorization"] = "Bearer " + KR
        elif ident == "e2b":
            h["E2B-Traffic-Access-Token"] = F["tokB"]
    elif r.plane == "signed":
        if ident == "owner":
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
            op = "write" if r.method == "POST" else "read"
            path += "&signature=" + sign(q["path"][0], op, q.get("username", [""])[0], tokA_use)
        elif ident in ("other", "revoked"):
            h["Authorization"] = "Bearer " + (KB if ident == "other" else KR)
        elif ident == "e2b":
            h["X-Access-Token"] = F["tokB"]
    else:
        e2b = r.plane == "e2b"
        hdr = "X-API-KEY" if e2b else "Authorization"
        val = (lambda k: k) if e2b else (lambda k: "Bearer " + k)
        if ident == "owner":
            if r.plane == "admin":
                admin = True
            else:
                h[hdr] = val(KA)
        elif ident == "other":
            h[hdr] = val(KB)
        elif ident == "revoked":
            h[hdr] = val(KR)
        elif ident == "e2b":
            # a sandbox's envd token is not an API key, wherever it is put
            h["X-Access-Token"] = F["tokB"]
            h[hdr] = val(F["tokB"])
    return admin, r.method, path, body, h, stream


def want_codes(spec):
    return [int(x) for x in spec.split("/")]


def leaks(raw, sent):
    """A's ids and tokens in raw that the request did not name itself."""
    text = raw.decode("utf-8", "replace")
    out = []
    for k, v in OWNED.items():
        if v in sent:
            continue
        # an id echoed as a prefix of a longer id it is part of is still a leak; ids that are
        # prefixes of the requested ones (m-a of m-a-del) are not
        if re.search(r"(?<![A-Za-z0-9_-])" + re.escape(v) + r"(?![A-Za-z0-9_-])", text):
            out.append(k)
    return out


def run_cell(r, ident):
    global ghosted
    name = "%s %s %s as %s" % (r.plane, r.method, r.path, ident)
    spec = r.want[ident]
    if "criu" in r.flags and ident == "owner" and not CRIU_OK:
        return skip(name, "CRIU is not available here: hibernate cannot succeed")
    if "browser" in r.flags and ident == "owner" and not CHROMIUM_OK:
        return skip(name, "no Debian chromium on this host (scripts/deps.sh installs it)")
    admin, m, path, body, h, stream = build(r, ident, set())
    st, raw = call(m, path, body, h, admin=admin, stream=stream)
    wants = want_codes(spec)
    problems = []
    if st not in wants:
        problems.append("answered %d, the table says %s: %s" % (st, spec, raw[:200]))
    if ident == "owner":
        if not (200 <= st < 300) and "unsupported" not in r.flags:
            problems.append("the owner's answer is not a success")
        if r.check and r.check.encode() not in raw:
            problems.append("the owner's answer lacks %r: %s" % (r.check, raw[:200]))
    else:
        lk = leaks(raw, path + json.dumps(h) + (body or b"").decode("utf-8", "replace"))
        if lk and "shared" in r.flags:
            print("# note: %s shows the owner's %s (flagged shared: the admin's, every key's)"
                  % (name, ", ".join(lk)))
        elif lk:
            problems.append("shows the owner's %s: %s" % (", ".join(lk), raw[:200]))
        fx = fixtures_in(r)
        if fx and not (200 <= st < 300) and not problems:
            gset = set(fx)
            admin, m, gpath, gbody, gh, stream = build(r, ident, gset)
            gst, graw = call(m, gpath, gbody, gh, admin=admin, stream=stream)
            ghosted += 1
            norm = graw
            for n in fx:
                norm = norm.replace(ghost(n).encode(), F[n].encode())
            # a sandbox id the daemon made up for this create is no one's
            made = re.compile(rb"\bsb-[0-9a-f]{12}\b")
            if gst != st or made.sub(b"sb-*", norm) != made.sub(b"sb-*", raw):
                problems.append("differs from an id that does not exist: %d %s vs %d %s"
                                % (st, raw[:160], gst, graw[:160]))
    tap(not problems, name, "; ".join(problems))


# ---- every route in the table --------------------------------------------------------------------

LIT_CALL = re.compile(r'\b(?:strcmp|strncmp|sub_prefix)\(\s*(path|sub|slash|rest|action|method|'
                      r'seg\[\d\]|path\s*\+\s*\d+)\s*,\s*"([^"]*)"')
LIT_TABLE = re.compile(r'\{\s*"([^"]*)"\s*,\s*(?:EVHTTP_REQ_|OP_|FS_)')
LIT_PREFIX = re.compile(r'prefixes\[\]\s*=\s*\{([^}]*)\}', re.S)
# literals that routers compare against but that name no route of their own, and why
NOT_ROUTES = {
    "/": "a trailing slash of a collection (/files/, /processes/): the same route",
    "": "the empty remainder of a path: the collection itself",
    "/v3/templates": "an E2B control-plane prefix (API-key errors as E2B's) with no handler: "
                     "E2B template builds are not served, every path under it is 404",
    "/..": "a workspace path check in sessions.c, not a route",
    "~": "a home-relative file path (e2b.c resolves envd's paths), not a route",
    "~/": "the same",
}


# where a router's literals must be found: its file's routes (plane and path). A file not
# named here (api/server.c, http/reqmetrics.c, e2b/e2b.c) may match any row.
SCOPES = {
    "session/sessions.c": r"^native /v1/sessions",
    "api/snapshots_api.c": r"^(native|admin) /v1/(snapshots|sandboxes/[^/]+/(snapshots|fork|rollback))",
    "api/templates_api.c": r"^(native|admin) /v1/templates",
    "api/artifacts_api.c": r"^native /v1/(artifacts|sandboxes/[^/]+/artifacts)",
    "api/egress_api.c": r"^(native|admin) /v1/(egress|secrets|sandboxes/[^/]+/(network|egress))",
    "api/files.c": r"^native /v1/sandboxes/[^/]+/files",
    "api/procs.c": r"^native /v1/sandboxes/[^/]+/processes",
    "api/gc_api.c": r"^admin /v1/gc",
    "e2b/control.c": r"^e2b ",
    "e2b/process.c": r"^envd /process\.Process/",
    "e2b/fs.c": r"^envd /filesystem\.Filesystem/",
    "e2b/files.c": r"^(envd|signed) /files",
    "e2b/interp.c": r"^interp ",
}


ROUTER_ROOMS = ("api", "e2b", "http", "daemon", "core", "session")


def source_literals():
    """(literal, room/file) for every path literal a router in the daemon compares against
    (the front ends, the listeners, and any service that still answers a route itself)."""
    lits = set()
    files = []
    for room in ROUTER_ROOMS:
        d = os.path.join(REPO, "src", room)
        files += ["%s/%s" % (room, f) for f in sorted(os.listdir(d)) if f.endswith(".c")]
    for f in files:
        text = open(os.path.join(REPO, "src", f)).read()
        for m in LIT_CALL.finditer(text):
            lits.add((m.group(2), f))
        for m in LIT_TABLE.finditer(text):
            lits.add((m.group(1), f))
        for m in LIT_PREFIX.finditer(text):
            for s in re.findall(r'"([^"]*)"', m.group(1)):
                lits.add((s, f))
    return lits


def route_coverage(rows):
    routes = ["%s %s" % (r.plane, urllib.parse.urlsplit(r.path).path) for r in rows]
    lits = source_literals()
    tap(len(lits) > 50, "the routers' path literals are found in src/ (%d)" % len(lits),
        "the extractor found too few: has the routers' style changed?")
    missing = []
    for lit, f in sorted(lits):
        if lit in NOT_ROUTES:
            continue
        scope = re.compile(SCOPES.get(f, ""))
        pat = re.compile(r"(?:^|/)" + re.escape(lit.strip("/")) + r"(?:$|/)")
        if not any(scope.search(rt) and pat.search(rt.split(" ", 1)[1]) for rt in routes):
            missing.append("%s (%s)" % (lit, f))
    tap(not missing, "every path the routers match is a row of routes.tsv",
        "not in the table: " + ", ".join(missing))


def spec_coverage(rows):
    """Every operation docs/api.yaml documents is a row (native, admin or public)."""
    try:
        import yaml
    except ImportError:
        return skip("every route of docs/api.yaml is a row", "PyYAML is not installed")
    spec = yaml.safe_load(open(os.path.join(REPO, "docs", "api.yaml")))

    def norm(p):
        return re.sub(r"\{[^}]*\}", "{}", p)
    have = {(r.method, norm(urllib.parse.urlsplit(r.path).path)) for r in rows
            if r.plane in ("native", "admin", "public")}
    missing = ["%s %s" % (m.upper(), p) for p, ops in spec["paths"].items() for m in ops
               if m in ("get", "put", "post", "delete", "patch", "head")
               and (m.upper(), norm(p)) not in have]
    tap(not missing, "every route of docs/api.yaml is a row of routes.tsv",
        "not in the table: " + ", ".join(missing))


def method_probe(rows):
    """A method the table does not list for a path must not be served: 405, or 404 (no route;
    for a sandbox route, what a method it has no route for gets)."""
    listed = {}
    for r in rows:
        # one route: the same router, the same path with its fixtures named by their kind
        # ({sb_del} and {sb} are both a sandbox id)
        router = "v1" if r.plane in ("native", "admin", "public") else r.plane
        route = PH.sub(lambda m: "{%s}" % m.group(1).replace("mine", "sb").split("_")[0],
                       r.path.split("?")[0])
        listed.setdefault((router, route), (r, set()))[1].add(r.method)
    served = []
    for (plane, p), (r, methods) in sorted(listed.items(), key=lambda kv: kv[0]):
        for m in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"):
            if m in methods:
                continue
            probe = Row()
            probe.__dict__.update(r.__dict__)
            probe.method, probe.body = m, "-"
            probe.flags = [f for f in r.flags if f != "stream"]
            admin, _, path, body, h, stream = build(probe, "owner", set())
            st, raw = call(m, path, b"{}" if m in ("POST", "PUT", "PATCH") else None,
                           dict(h, **({"Content-Type": "application/json"}
                                      if m in ("POST", "PUT", "PATCH") else {})),
                           admin=admin, stream=True)
            # HEAD: libevent answers 501 before any handler (not in the allowed methods)
            if st not in (404, 405) and not (m == "HEAD" and st == 501):
                served.append("%s %s (%s) answered %d" % (m, p, plane, st))
    tap(not served, "no method the table does not list is served on its paths",
        "; ".join(served))


def main():
    rows = load_rows()
    make_fixtures()
    t0 = time.time()
    route_coverage(rows)
    spec_coverage(rows)
    # refusals first (they must leave every fixture as it is), then the owner, in table order
    for ident in IDENTITIES[1:]:
        for r in rows:
            run_cell(r, ident)
    # before the owner's deletes: a probe of a missing method finds its fixture alive
    method_probe(rows)
    for r in rows:
        run_cell(r, "owner")
    print("# %d rows x %d identities in %.1f s: %d passed, %d failed, %d skipped; %d refusals "
          "compared with the answer for an id that does not exist"
          % (len(rows), len(IDENTITIES), time.time() - t0, passed, failed, skipped, ghosted))
    sys.exit(1 if failed else 0)


main()
