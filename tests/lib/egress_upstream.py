#!/usr/bin/env python3
# Upstream services for the egress tests, on this machine only:
#   HTTP and HTTPS (a test CA's certificate) on ADDR:80 and ADDR:443, keep-alive; every request
#   is logged as a JSON line {path, host, auth, port} (auth: the Authorization header, which
#   only this log sees: the response says just X-Saw-Auth: yes|no)
#   a line-echo TCP service on ADDR:ECHO_PORT (a protocol that is not HTTP)
#   a "host service" on 0.0.0.0:ANY_PORT that logs {"reached": true} if anything connects
# usage: egress_upstream.py ADDR ECHO_PORT ANY_PORT CERT KEY LOG READY
import http.server
import json
import socket
import socketserver
import ssl
import sys
import threading

addr, echo_port, any_port, cert, key, log, ready = sys.argv[1:8]
lock = threading.Lock()


def record(obj):
    with lock, open(log, "a") as f:
        f.write(json.dumps(obj) + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        auth = self.headers.get("Authorization")
        record({"path": self.path, "host": self.headers.get("Host"), "auth": auth,
                "port": self.client_address[1], "tls": isinstance(self.connection, ssl.SSLSocket)})
        body = ("ok %s\n" % self.path).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Saw-Auth", "yes" if auth else "no")
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve_http(port, tls):
    srv = Server((addr, port), Handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(line)


class Hosted(socketserver.BaseRequestHandler):
    def handle(self):
        record({"reached": True})
        self.request.sendall(b"host-service\n")


class TCP(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


serve_http(80, False)
serve_http(443, True)
for a, port, h in ((addr, int(echo_port), Echo), ("0.0.0.0", int(any_port), Hosted)):
    s = TCP((a, port), h)
    threading.Thread(target=s.serve_forever, daemon=True).start()
open(ready, "w").write("ready\n")
threading.Event().wait()
