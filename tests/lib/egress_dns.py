#!/usr/bin/env python3
# A nameserver for the egress tests, on this machine only: the daemon's --egress-resolver.
# Every A query is answered NXDOMAIN (the name does not exist), except names under "slow.",
# which get no answer at all (a resolver that times out).
# usage: egress_dns.py ADDR PORT READY
import socket
import sys

addr, port, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, port))
open(ready, "w").close()
while True:
    q, peer = s.recvfrom(4096)
    if len(q) < 12:
        continue
    # the question's name: labels after the 12-byte header
    i, labels = 12, []
    while i < len(q) and q[i] and len(labels) < 128:
        labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace"))
        i += 1 + q[i]
    if labels and labels[0].lower() == "slow":  # (resolvers may randomise the case)
        continue
    end = i + 5  # the root label, QTYPE, QCLASS
    # the same id and question; QR, opcode 0, RD as asked, RA, RCODE 3 (NXDOMAIN)
    flags = bytes([0x80 | (q[2] & 0x01), 0x83])
    s.sendto(q[:2] + flags + b"\x00\x01\x00\x00\x00\x00\x00\x00" + q[12:end], peer)
