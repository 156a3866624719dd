#!/usr/bin/python3
# Driver of t170-http-limits.sh: raw sockets on loopback against the daemon's TCP listener.
#   t170-http-limits.py PHASE PORT PID KEY_A KEY_B SANDBOX
# prints TAP lines ("ok - ..." / "not ok - ...") for the phase's checks.
import json
import socket
import sys
import time

phase, port, pid, key_a, key_b, sandbox = sys.argv[1:7]
port = int(port)
MB60 = 60 * 1000 * 1000
results = []


def check(name, cond, detail=""):
    results.append(cond)
    print(("ok - " if cond else "not ok - ") + name + ("" if cond or not detail else " (%s)" % detail))
    sys.stdout.flush()


def rss_kib():
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def conn(src="127.0.0.1", timeout=5.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


leftover = {}  # bytes read past a response, per socket (pipelining)


def read_response(s, timeout=5.0):
    """One response: (status, headers dict, body bytes), or (None, {}, b'') on timeout/EOF."""
    s.settimeout(timeout)
    buf = leftover.pop(s.fileno(), b"")
    try:
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return None, {}, buf
            buf += d
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for l in lines[1:]:
            k, v = l.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "0"))
        while len(rest) < n:
            d = s.recv(65536)
            if not d:
                break
            rest += d
        if len(rest) > n:
            leftover[s.fileno()] = rest[n:]
        return status, hdrs, rest[:n]
    except (socket.timeout, ConnectionError):
        return None, {}, buf


def read_chunked(s, timeout=10.0):
    """A chunked response to its end: (status, body), or (None, b'')."""
    s.settimeout(timeout)
    buf = leftover.pop(s.fileno(), b"")
    try:
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return None, b""
            buf += d
        head, rest = buf.split(b"\r\n\r\n", 1)
        status = int(head.split(b"\r\n")[0].split()[1])
        body = b""
        while True:
            while b"\r\n" not in rest:
                d = s.recv(65536)
                if not d:
                    return None, body
                rest += d
            line, rest = rest.split(b"\r\n", 1)
            n = int(line.split(b";")[0], 16)
            while len(rest) < n + 2:
                d = s.recv(65536)
                if not d:
                    return None, body
                rest += d
            body += rest[:n]
            rest = rest[n + 2:]
            if n == 0:
                if rest:
                    leftover[s.fileno()] = rest
                return status, body
    except (socket.timeout, ConnectionError, ValueError):
        return None, b""


def closed_within(s, secs):
    """Does the server close s (EOF or reset) within secs? Data before the close is read."""
    s.settimeout(secs)
    end = time.monotonic() + secs
    try:
        while time.monotonic() < end:
            d = s.recv(65536)
            if not d:
                return True
        return False
    except socket.timeout:
        return False
    except ConnectionError:
        return True


def send_body(s, n):
    """Try to send n bytes; stop quietly when the server has closed."""
    chunk = b"x" * (1 << 20)
    s.settimeout(10)
    sent = 0
    try:
        while sent < n:
            sent += s.send(chunk[: min(len(chunk), n - sent)])
    except (OSError, socket.timeout):
        pass
    return sent


def request(s, method, path, headers=None, body=b""):
    h = "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (method, path, port)
    for k, v in (headers or {}).items():
        h += "%s: %s\r\n" % (k, v)
    if body or method in ("PUT", "POST"):
        h += "Content-Length: %d\r\n" % len(body)
    s.sendall(h.encode() + b"\r\n" + body)


def anonymous_big_puts():
    targets = [
        ("native", "/v1/sandboxes/%s/files?path=/tmp/anon" % sandbox, {}, 401),
        ("native, a wrong key", "/v1/sandboxes/%s/files?path=/tmp/anon" % sandbox,
         {"X-API-Key": "gbx_0000000000000000"}, 401),
        ("E2B envd /files, a wrong token", "/files?path=/tmp/anon",
         {"E2b-Sandbox-Id": sandbox, "X-Access-Token": "wrong"}, 502),
        ("E2B envd /files, an unknown sandbox", "/files?path=/tmp/anon",
         {"E2b-Sandbox-Id": "nosuchsandbox", "X-Access-Token": "wrong"}, 502),
    ]
    before = rss_kib()
    early = []
    for i in range(8):
        label, path, hdrs, want = targets[i % len(targets)]
        s = conn()
        method = "PUT" if label.startswith("native") else "POST"
        h = "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/octet-stream\r\n" \
            "Content-Length: %d\r\n" % (method, path, port, MB60)
        for k, v in hdrs.items():
            h += "%s: %s\r\n" % (k, v)
        s.sendall(h.encode() + b"\r\n")
        # the answer comes before a byte of the body was sent
        status, rh, body = read_response(s, timeout=5)
        early.append((label, status, want, body))
        send_body(s, MB60)  # what a client that does not wait would do
        s.close()
    time.sleep(0.5)
    after = rss_kib()
    for label, status, want, body in early[:4]:
        check("anonymous 60 MB %s: answered %d before its body was sent" % (label, want),
              status == want, "got %s" % status)
    check("all 8 anonymous 60 MB uploads were answered before their bodies",
          all(st == w for _, st, w, _ in early))
    unknown = [b for l, st, w, b in early if "unknown" in l]
    wrong = [b for l, st, w, b in early if "wrong token" in l]

    def norm(b):
        try:
            j = json.loads(b.decode())
            return j if isinstance(j, dict) else {}
        except ValueError:
            return {}
    check("the 502 for a wrong token is the 502 of an unknown sandbox (but its id)",
          bool(unknown) and bool(wrong) and norm(wrong[0]) != {} and
          {k: v for k, v in norm(wrong[0]).items() if k != "sandboxId"} ==
          {k: v for k, v in norm(unknown[0]).items() if k != "sandboxId"})
    check("8 anonymous 60 MB uploads grow the daemon's RSS by less than 20 MB (%d KiB)" %
          (after - before), after - before < 20 * 1024, "before %d KiB, after %d KiB" % (before, after))


def timeouts():
    # a half-sent head is closed after the header timeout (1 s here)
    s = conn()
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    check("a half-sent head is closed after the header timeout", closed_within(s, 6))
    s.close()
    # a head dripped byte by byte: each byte arrives in time, the whole head does not
    s = conn()
    t0 = time.monotonic()
    dripped_closed = False
    try:
        for ch in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 40:
            s.send(bytes([ch]))
            time.sleep(0.1)
    except OSError:
        dripped_closed = True
    if not dripped_closed:
        dripped_closed = closed_within(s, 3)
    check("a head dripped byte by byte is closed once the header timeout is over",
          dripped_closed and time.monotonic() - t0 < 8)
    s.close()
    # a connection that sends nothing at all
    s = conn()
    check("a connection that sends nothing is closed after the header timeout", closed_within(s, 6))
    s.close()
    # an authenticated request whose body stalls is closed after the body timeout (1 s)
    s = conn()
    s.sendall(("PUT /v1/sandboxes/%s/files?path=/tmp/stall HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\n"
               "Content-Length: 100000\r\n\r\n" % (sandbox, key_a)).encode() + b"y" * 1000)
    check("a stalled body is closed after the body timeout", closed_within(s, 6))
    s.close()
    # a body that never pauses for long but comes too slowly (--body-min-rate 64K here) is
    # closed once it is GBX_GATE_RATE_GRACE_S (5) seconds old
    s = conn()
    s.sendall(("PUT /v1/sandboxes/%s/files?path=/tmp/slow HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\n"
               "Content-Length: 10000000\r\n\r\n" % (sandbox, key_a)).encode())
    t0 = time.monotonic()
    dripped = False
    try:
        while time.monotonic() - t0 < 12:
            s.send(b"z" * 8192)  # 16 KiB/s: never a pause of a second
            time.sleep(0.5)
    except OSError:
        dripped = True
    took = time.monotonic() - t0
    check("a body slower than the minimum rate is closed after its grace period",
          dripped and 4 < took < 10, "closed %s after %.1f s" % (dripped, took))
    s.close()
    # keep-alive: a second request on the connection works, then the idle timeout closes it
    s = conn()
    request(s, "GET", "/v1/sandboxes", {"X-API-Key": key_a})
    st1, _, _ = read_response(s)
    request(s, "GET", "/healthz")
    st2, _, _ = read_response(s)
    check("keep-alive: two requests on one connection are both answered", (st1, st2) == (200, 200),
          "%s %s" % (st1, st2))
    check("an idle keep-alive connection is closed after the idle timeout", closed_within(s, 8))
    s.close()
    # a streamed reply (exec), then another request on the same connection
    s = conn()
    cmd = json.dumps({"cmd": ["sh", "-c", "echo one; sleep 0.2; echo two"]}).encode()
    request(s, "POST", "/v1/sandboxes/%s/exec" % sandbox,
            {"X-API-Key": key_a, "Content-Type": "application/json"}, cmd)
    st1, body = read_chunked(s)
    request(s, "GET", "/v1/sandboxes", {"X-API-Key": key_a})
    st2, _, _ = read_response(s)
    check("keep-alive after a streamed reply: the next request is answered",
          (st1, st2) == (200, 200) and b'"exit"' in body, "%s %s" % (st1, st2))
    s.close()
    # pipelined: the second, anonymous request with a body is gated as well
    s = conn()
    first = ("GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\n\r\n" % key_a).encode()
    second = ("PUT /v1/sandboxes/%s/files?path=/tmp/piped HTTP/1.1\r\nHost: x\r\n"
              "Content-Length: %d\r\n\r\n" % (sandbox, MB60)).encode()
    s.sendall(first + second)
    st1, _, _ = read_response(s)
    st2, _, _ = read_response(s)
    check("pipelined: an anonymous upload after an authenticated request is answered 401 "
          "before its body", (st1, st2) == (200, 401), "%s %s" % (st1, st2))
    s.close()


def caps():
    held = [conn("127.0.0.1") for _ in range(3)]
    time.sleep(0.3)
    extra = conn("127.0.0.1")
    status, _, body = read_response(extra, timeout=5)
    check("over the per-address cap (3): the extra connection is answered 503 and closed",
          status == 503 and closed_within(extra, 3), "got %s" % status)
    extra.close()
    s = conn("127.0.0.2")
    request(s, "GET", "/v1/sandboxes", {"X-API-Key": key_b})
    status, _, _ = read_response(s)
    check("meanwhile another address's authenticated request is served", status == 200,
          "got %s" % status)
    held += [s, conn("127.0.0.2"), conn("127.0.0.3")]  # 6 open: the global cap
    time.sleep(0.3)
    extra = conn("127.0.0.4")
    status, _, _ = read_response(extra, timeout=5)
    check("over the global cap (6): a connection from a new address is refused", status == 503,
          "got %s" % status)
    extra.close()
    request(held[0], "GET", "/v1/sandboxes", {"X-API-Key": key_a})
    status, _, _ = read_response(held[0])
    check("and an open connection's authenticated request is still served", status == 200,
          "got %s" % status)
    for h in held:
        h.close()
    time.sleep(0.5)
    s = conn("127.0.0.1")
    request(s, "GET", "/healthz")
    status, _, _ = read_response(s)
    check("once they close, new connections are accepted again", status == 200, "got %s" % status)
    s.close()


def rate():
    s = conn()
    seen = []
    hdrs429, body429 = {}, b""
    for i in range(30):
        request(s, "GET", "/v1/sandboxes", {"X-API-Key": key_a})
        status, h, body = read_response(s)
        seen.append(status)
        if status == 429:
            hdrs429, body429 = h, body
            break
    s.close()
    check("a key over its rate (5/s, burst 5) gets 429 on a native route", 429 in seen, str(seen))
    ra = hdrs429.get("retry-after", "")
    check("the 429 says Retry-After in whole seconds", ra.isdigit() and int(ra) >= 1, ra)
    try:
        j = json.loads(body429.decode())
        named = j["error"]["kind"] == "limit" and "--rate-limit" in j["error"]["message"] and \
            j["error"]["limit"]["rate"] == 5
    except (ValueError, KeyError, TypeError):
        named = False
    check("the 429's JSON body names the limit", named, body429[:200])
    s = conn()
    request(s, "GET", "/v1/sandboxes", {"X-API-Key": key_b})
    status, _, _ = read_response(s)
    check("another key is not affected", status == 200, "got %s" % status)
    s.close()
    s = conn()
    request(s, "GET", "/v2/sandboxes", {"X-API-KEY": key_a})
    status, h, _ = read_response(s)
    check("the same bucket covers the E2B control plane", status == 429 and "retry-after" in h,
          "got %s" % status)
    s.close()


def big_upload():
    s = conn(timeout=60)
    h = ("PUT /v1/sandboxes/%s/files?path=/tmp/big HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\n"
         "Content-Length: %d\r\n\r\n" % (sandbox, key_a, MB60))
    s.sendall(h.encode())
    sent = send_body(s, MB60)
    status, _, body = read_response(s, timeout=60)
    check("a valid key's 60 MB upload still works", sent == MB60 and status in (200, 201, 204),
          "sent %d, got %s %s" % (sent, status, body[:200]))
    s.close()


{"anon": anonymous_big_puts, "timeouts": timeouts, "caps": caps, "rate": rate,
 "big": big_upload}[phase]()
sys.exit(0 if all(results) else 1)
