#!/usr/bin/env python3
# Runs INSIDE a sandbox for the egress tests: one network probe per call, one line of result.
#   resolve NAME            the IPv4 answer, or NXDOMAIN
#   aaaa NAME               how many IPv6 answers (the daemon gives none)
#   http URL [HOST]         "STATUS SAW_AUTH" (HOST: send this Host header instead)
#   https URL [SNI]         the same over TLS, trusting the system bundle (SNI: send this name)
#   body URL [TIMEOUT]      plain HTTP GET: "STATUS BODY" (the body stripped; TIMEOUT s, 5)
#   keepalive URL N         N requests on one connection: "STATUS SAW_AUTH" each, one line
#   kaspan URL FLAG         a request, then (once FLAG exists) another on the same connection
#   issuer HOST PORT        the common name of the issuer of the certificate HOST presents
#   tcp HOST PORT           a line to an echo service: "echo LINE" or ERR
#   raw HOST PORT HEX       send bytes, report what comes back: "reset", "closed" or "data"
#   udp IP PORT             ERR unless a datagram could be sent
#   icmp IP                 ERR unless an echo request could be sent
#   v6 IP PORT              ERR unless an IPv6 connection opened
#   hold HOST PORT FILE     (background) an echo conversation every 50 ms; writes "cut" to FILE
#                           when it breaks
#   dnsjunk                 malformed DNS over UDP and TCP to the configured server
#   nosni HOST PORT         a TLS handshake without a server name: "handshake" or ERR
#   http10 HOST PATH        "GET PATH HTTP/1.0" without Host: the status, "closed" or ERR
#   pipeline HOST P1 OTHER P2  two requests in one write, the second with Host OTHER: how
#                           many responses came back before the connection ended
#   dnsflood N ALLOWED      N A queries over UDP for random names, one at a time, every tenth
#                           under ALLOWED (a wildcard the policy allows): "sent N answered A"
# Errors print "ERR <errno name or exception class>".
import errno
import http.client
import os
import socket
import ssl
import sys
import time
import urllib.parse


def err(e):
    if isinstance(e, socket.gaierror):
        return "ERR gaierror"
    if isinstance(e, ssl.SSLError):
        return "ERR SSL"
    if isinstance(e, OSError) and e.errno:
        return "ERR " + errno.errorcode.get(e.errno, str(e.errno))
    return "ERR " + type(e).__name__


def conn_for(url, sni=None):
    u = urllib.parse.urlsplit(url)
    port = u.port or (443 if u.scheme == "https" else 80)
    if u.scheme == "https":
        ctx = ssl.create_default_context()
        if sni:  # connect to the URL's host, present another name
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            raw = socket.create_connection((u.hostname, port), timeout=5)
            s = ctx.wrap_socket(raw, server_hostname=sni)
            c = http.client.HTTPSConnection(u.hostname, port, timeout=5, context=ctx)
            c.sock = s
            return c, u
        return http.client.HTTPSConnection(u.hostname, port, timeout=5, context=ctx), u
    return http.client.HTTPConnection(u.hostname, port, timeout=5), u


def one(c, u, host=None):
    headers = {"Host": host} if host else {}
    c.request("GET", u.path or "/", headers=headers)
    r = c.getresponse()
    r.read()
    return "%d %s" % (r.status, r.getheader("X-Saw-Auth"))


def main(a):
    cmd = a[0]
    try:
        if cmd == "resolve":
            return socket.gethostbyname(a[1])
        if cmd == "aaaa":
            try:
                return str(len(socket.getaddrinfo(a[1], 80, socket.AF_INET6)))
            except socket.gaierror:
                return "0"
        if cmd in ("http", "https"):
            c, u = conn_for(a[1], a[2] if cmd == "https" and len(a) > 2 else None)
            return one(c, u, a[2] if cmd == "http" and len(a) > 2 else None)
        if cmd == "body":
            u = urllib.parse.urlsplit(a[1])
            c = http.client.HTTPConnection(u.hostname, u.port or 80,
                                           timeout=float(a[2]) if len(a) > 2 else 5)
            c.request("GET", u.path or "/")
            r = c.getresponse()
            return "%d %s" % (r.status, r.read().decode(errors="replace").strip())
        if cmd == "issuer":  # who signed the certificate this name presents (no verification)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            s = ctx.wrap_socket(socket.create_connection((a[1], int(a[2])), timeout=5),
                                server_hostname=a[1])
            open("/tmp/peer.pem", "w").write(ssl.DER_cert_to_PEM_cert(s.getpeercert(True)))
            issuer = ssl._ssl._test_decode_cert("/tmp/peer.pem")["issuer"]
            return [v for rdn in issuer for k, v in rdn if k == "commonName"][0]
        if cmd == "kaspan":  # a request, wait for FLAG to exist, a second on the same connection
            c, u = conn_for(a[1])
            first = one(c, u)
            for _ in range(200):
                if os.path.exists(a[2]):
                    break
                time.sleep(0.05)
            return first + " " + one(c, u)
        if cmd == "keepalive":
            c, u = conn_for(a[1])
            return " ".join(one(c, u) for _ in range(int(a[2])))
        if cmd == "tcp":
            s = socket.create_connection((a[1], int(a[2])), timeout=5)
            s.sendall(b"hello\n")
            return "echo " + s.makefile().readline().strip()
        if cmd == "raw":
            s = socket.create_connection((a[1], int(a[2])), timeout=5)
            s.sendall(bytes.fromhex(a[3]))
            try:
                d = s.recv(100)
                return "data" if d else "closed"
            except ConnectionResetError:
                return "reset"
        if cmd == "nosni":
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.wrap_socket(socket.create_connection((a[1], int(a[2])), timeout=5))
            return "handshake"
        if cmd in ("http10", "pipeline"):
            s = socket.create_connection((a[1], 80), timeout=5)
            if cmd == "http10":
                s.sendall(b"GET " + a[2].encode() + b" HTTP/1.0\r\n\r\n")
            else:
                s.sendall(b"GET " + a[2].encode() + b" HTTP/1.1\r\nHost: " + a[1].encode() +
                          b"\r\n\r\nGET " + a[4].encode() + b" HTTP/1.1\r\nHost: " +
                          a[3].encode() + b"\r\nConnection: close\r\n\r\n")
            got = b""
            try:
                while True:
                    d = s.recv(65536)
                    if not d:
                        break
                    got += d
            except (ConnectionResetError, socket.timeout):
                pass
            if cmd == "http10":
                return got.split(b"\r\n")[0].split(b" ")[1].decode() if got else "closed"
            return "responses %d" % got.count(b"HTTP/1.")
        if cmd == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"x", (a[1], int(a[2])))
            return "sent"
        if cmd == "icmp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
            s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", (a[1], 0))
            return "sent"
        if cmd == "v6":
            socket.create_connection((a[1], int(a[2])), timeout=3)
            return "connected"
        if cmd == "hold":
            s = socket.create_connection((a[1], int(a[2])), timeout=5)
            f = s.makefile()
            open(a[3], "w").write("up\n")
            while True:
                s.sendall(b"ping\n")
                if f.readline().strip() != "ping":
                    break
                time.sleep(0.05)
            open(a[3], "w").write("cut\n")
            return "cut"
        if cmd == "dnsjunk":
            junk = [b"", b"\x00", b"\xff" * 12, os.urandom(512), b"\x12\x34\x01\x00\x00\x01"
                    b"\x00\x00\x00\x00\x00\x00\xc0\x0c\x00\x01\x00\x01",
                    b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + b"\x3f" + b"a" * 63 * 5]
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for j in junk:
                u.sendto(j, ("127.0.0.1", 53))
            for j in junk:
                t = socket.create_connection(("127.0.0.1", 53), timeout=2)
                t.sendall(len(j).to_bytes(2, "big") + j + b"\xff\xff")
                t.close()
            return "sent"
        if cmd == "dnsflood":
            n, allowed = int(a[1]), a[2]
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.settimeout(2)
            answered = 0
            for i in range(n):
                label = os.urandom(6).hex()
                name = label + "." + allowed if i % 10 == 0 else label + ".flood.test"
                qid = i & 0xffff
                q = qid.to_bytes(2, "big") + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
                for part in name.split("."):
                    q += bytes([len(part)]) + part.encode()
                q += b"\x00\x00\x01\x00\x01"
                u.sendto(q, ("127.0.0.1", 53))
                try:
                    while True:
                        r = u.recv(512)
                        if r[:2] == q[:2]:
                            answered += 1
                            break
                except socket.timeout:
                    pass
            return "sent %d answered %d" % (n, answered)
    except Exception as e:  # noqa: BLE001 - every failure is a result here
        if cmd == "hold":
            open(a[3], "w").write("cut\n")
        return err(e)
    return "ERR usage"


print(main(sys.argv[1:]))
