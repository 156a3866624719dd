#!/usr/bin/env python3
"""A minimal WebSocket (RFC 6455) echo server and client, for the ingress tests.

usage: ws_echo.py server PORT            echo text frames on 127.0.0.1:PORT (in a sandbox)
       ws_echo.py client ADDR PORT HOST TEXT [HEADER: VALUE ...]
              connect to ADDR:PORT, upgrade with Host: HOST (and the headers), send TEXT,
              print the echoed text; exit 1 if the upgrade is refused (the status line is
              printed), 2 on a timeout
"""
import base64
import hashlib
import os
import socket
import struct
import sys
import threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise EOFError("closed before the head ended")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def recv_exact(sock, n, buf):
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("closed mid-frame")
        buf += chunk
    return buf[:n], buf[n:]


def read_frame(sock, buf):
    hdr, buf = recv_exact(sock, 2, buf)
    op, ln = hdr[0] & 0x0F, hdr[1] & 0x7F
    masked = hdr[1] & 0x80
    if ln == 126:
        ext, buf = recv_exact(sock, 2, buf)
        ln = struct.unpack("!H", ext)[0]
    elif ln == 127:
        ext, buf = recv_exact(sock, 8, buf)
        ln = struct.unpack("!Q", ext)[0]
    mask = b""
    if masked:
        mask, buf = recv_exact(sock, 4, buf)
    payload, buf = recv_exact(sock, ln, buf)
    if masked:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return op, payload, buf


def frame(payload, mask):
    n = len(payload)
    b1 = 0x80 if mask else 0
    if n < 126:
        hdr = bytes([0x81, b1 | n])
    elif n < 65536:
        hdr = bytes([0x81, b1 | 126]) + struct.pack("!H", n)
    else:
        hdr = bytes([0x81, b1 | 127]) + struct.pack("!Q", n)
    if not mask:
        return hdr + payload
    key = os.urandom(4)
    return hdr + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def serve_one(conn):
    try:
        head, buf = read_head(conn)
        key = ""
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "sec-websocket-key":
                key = value.strip()
        accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
        conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
        while True:
            op, payload, buf = read_frame(conn, buf)
            if op == 8:
                return
            conn.sendall(frame(b"echo:" + payload, False))
    except (EOFError, OSError):
        pass
    finally:
        conn.close()


def server(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve_one, args=(conn,), daemon=True).start()


def client(addr, port, host, text, headers):
    sock = socket.create_connection((addr, port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    extra = "".join("%s\r\n" % h for h in headers)
    sock.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n"
                  % (host, key, extra)).encode())
    head, buf = read_head(sock)
    status = head.split("\r\n")[0]
    if " 101 " not in status + " ":
        print(status)
        return 1
    want = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
    if want not in head:
        print("bad Sec-WebSocket-Accept")
        return 1
    sock.sendall(frame(text.encode(), True))
    _, payload, buf = read_frame(sock, buf)
    print(payload.decode())
    sock.sendall(bytes([0x88, 0x80]) + os.urandom(4))
    sock.close()
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]))
    else:
        try:
            sys.exit(client(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6:]))
        except socket.timeout:
            print("timed out")
            sys.exit(2)
