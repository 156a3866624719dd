#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The rooms of src/ and which rooms each may include from (README "Source layout",
docs/daemon.md "Rooms"). Every `#include "room/file.h"` in src/ is an edge from the including
file's room to the included file's room; an edge the table does not allow fails the check.

  tools/layers.py          check; prints each edge that is not allowed, exits 1 if any
  tools/layers.py --graph  print the room graph (edge counts) as it is today

tools/layers.known lists the edges against the order that the code still has, one
"src/room/file.c room/header.h" per line, while the move of issue 15 is under way: the check
fails on an edge against the order that is not listed there (a new one), and on a listed edge
the code no longer has (the list must shrink as the code does, and ends empty).
"""
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, "src")

# room -> the rooms it may use (besides itself). Dependencies run one way:
# base <- store, agent <- sandbox <- egress <- core <- session <- http <- api, e2b <- daemon;
# ingress and browser sit on core (ingress also on http); api and daemon use them;
# the client side (cli, mcp, worker) and init use only what is below them.
MAY_USE = {
    "base": set(),
    "store": {"base"},
    "agent": {"base"},
    "sandbox": {"base", "store", "agent"},
    "egress": {"base", "store", "agent", "sandbox"},
    "core": {"base", "store", "agent", "sandbox", "egress"},
    "session": {"base", "store", "agent", "sandbox", "egress", "core"},
    "http": {"base", "store", "agent", "sandbox", "egress", "core"},
    "api": {"base", "store", "agent", "sandbox", "egress", "core", "session", "http", "browser"},
    "e2b": {"base", "store", "agent", "sandbox", "egress", "core", "session", "http"},
    "ingress": {"base", "store", "agent", "sandbox", "egress", "core", "http"},
    "browser": {"base", "store", "agent", "sandbox", "egress", "core"},
    "daemon": {"base", "store", "agent", "sandbox", "egress", "core", "session", "http", "api",
               "e2b", "ingress", "browser"},
    "init": {"base", "agent"},
    "cli": {"base", "agent", "store", "sandbox", "mcp", "worker"},  # glovebox run, audit
    "mcp": {"base", "agent", "cli"},
    "worker": {"base", "agent", "cli"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z0-9_]+)/([^"]+)"', re.M)


def edges():
    out = []
    for room in sorted(os.listdir(SRC)):
        d = os.path.join(SRC, room)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h")):
                continue
            text = open(os.path.join(d, f), encoding="utf-8", errors="replace").read()
            for m in INCLUDE.finditer(text):
                if m.group(1) != room:
                    out.append((room, f, m.group(1), m.group(2)))
    return out


def main():
    es = edges()
    rooms = {r for r in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, r))}
    unknown = sorted(rooms - set(MAY_USE))
    if "--graph" in sys.argv:
        count = {}
        for a, _, b, _ in es:
            count[(a, b)] = count.get((a, b), 0) + 1
        for (a, b), n in sorted(count.items()):
            mark = "" if b in MAY_USE.get(a, set()) else "   <- not allowed"
            print("%-8s -> %-8s %3d%s" % (a, b, n, mark))
        return 0
    against = [e for e in es if e[2] not in MAY_USE.get(e[0], set())]
    known = set()
    kpath = os.path.join(REPO, "tools", "layers.known")
    if os.path.exists(kpath):
        for line in open(kpath):
            line = line.split("#", 1)[0].strip()
            if line:
                known.add(tuple(line.split()))
    have = {("src/%s/%s" % (a, f), "%s/%s" % (b, h)) for a, f, b, h in against}
    new = sorted(have - known)
    stale = sorted(known - have)
    for room in unknown:
        print("layers: src/%s/ is not a room the table knows (tools/layers.py MAY_USE)" % room)
    for f, h in new:
        a, b = f.split("/")[1], h.split("/")[0]
        print("layers: %s includes %s: %s may not use %s" % (f, h, a, b))
    for f, h in stale:
        print("layers: tools/layers.known lists '%s %s', which the code no longer has: "
              "remove the line" % (f, h))
    if new or stale or unknown:
        return 1
    print("layers: %d cross-room includes; %d against the order, all in tools/layers.known "
          "(%d files)" % (len(es), len(have), len({f for f, _ in have})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
