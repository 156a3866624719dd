#!/usr/bin/env python3
"""Sandboxes nobody can reach any more: a glovebox-init whose control socket's directory is
gone (its test removed its scratch dir, its daemon is dead). Kill each with its cgroup and
print one line per sandbox. Sandboxes whose directories exist (another test's, a daemon's)
are left alone.   tests/lib/orphans.py [--dry-run]"""
import os
import sys

UID_BASE = 0x20000000


def unix_paths():
    paths = {}
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            cols = line.split()
            if len(cols) >= 8:
                paths[cols[6]] = cols[7]
    return paths


def main():
    dry = "--dry-run" in sys.argv
    paths = unix_paths()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid < UID_BASE:
                continue
            with open(f"/proc/{pid}/comm") as f:
                if "glovebox" not in f.read():
                    continue
            link = os.readlink(f"/proc/{pid}/fd/3")
        except OSError:
            continue
        if not link.startswith("socket:["):
            continue
        path = paths.get(link[8:-1])
        if not path or os.path.exists(os.path.dirname(path)):
            continue
        print(f"run-tests: a sandbox left behind (init {pid}, {path} is gone): killed")
        if dry:
            continue
        killed = False
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                for line in f:
                    if line.startswith("0::"):
                        kill = f"/sys/fs/cgroup/unified{line[3:].strip()}/cgroup.kill"
                        if os.path.exists(kill):
                            with open(kill, "w") as k:
                                k.write("1")
                            killed = True
        except OSError:
            pass
        if not killed:
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass


main()
