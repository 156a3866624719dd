#!/usr/bin/env python3
# The README's code blocks as one shell script that runs them verbatim (tests/integration/
# t030-readme.sh), read from README.md when the test runs, so that the test cannot drift
# from what a reader is shown.
#   readme.py README SPECIALS OUT    writes the script to stdout; exits 1 naming what is wrong
#
# Blocks, by the info string after the opening fence:
#   sh, bash        commands, run in order in one shell (variables carry over), each in the
#                   shell's current directory at that point; a command is the fewest lines
#                   that bash itself parses as complete (`bash -n`), so continuations, open
#                   quotes and trailing pipes are kept together
#   LANG NAME       a file the commands after it use (```js quickstart.mjs): written as NAME
#                   (a relative path) into the shell's current directory at that point
#   text, LANG data shown for reading only: neither run nor written
#   anything else   an error naming the block: say which of the above it is
#
# A command's outcome is read from its trailing comment (two spaces, '#'):
#   # exit N ...    its status must be N; # prints ...: its status must be 0
#   and any "double-quoted text" after either must appear in its output (stdout and stderr)
#   otherwise its status must be 0
#
# SPECIALS lists commands that are not run as they are (matched against a command's first
# line without its trailing comment, exactly; an entry that matches no command is an error):
#   skip: COMMAND           not run;   why: REASON (required)
#   daemon: COMMAND         run in the background until the end; ready when the admin
#                           socket answers /healthz; stopped with SIGTERM, must exit 0
#   follow: COMMAND         runs until stopped (-f): must still be running after 3 s (and
#                           through its after: checks), then it is stopped
#   run: COMMAND            run as usual (for a `before:`)
# each optionally followed by indented lines "why: TEXT", "before: SHELL" (what the test
# does first: a file the command expects) and "after: SHELL" (a check of what the command
# did: a failure fails the test). Lines starting with '#' are comments.
import re
import shlex
import subprocess
import sys

COMMENT = re.compile(r"\s\s+#\s?(.*)$")
OUTCOME = re.compile(r"^(?:exit (\d+)|prints)\b(.*)$")
MODES = ("skip", "daemon", "follow", "run")
EOF_MARK = "__GBX_README_EOF__"


def fail(msg):
    print("readme.py: " + msg, file=sys.stderr)
    sys.exit(1)


def blocks(path):
    """(line of the opening fence, info string, [(line, text)]) of each fenced block"""
    out, cur = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if cur is None:
                if line.startswith("```"):
                    cur = (n, line[3:].strip(), [])
            elif line.startswith("```"):
                if line.strip() != "```":
                    fail(f"{path}:{n}: a fence opens inside the block of line {cur[0]}")
                out.append(cur)
                cur = None
            else:
                cur[2].append((n, line))
    if cur is not None:
        fail(f"{path}:{cur[0]}: the block never closes")
    return out


def complete(text):
    return subprocess.run(["bash", "-n"], input=text, text=True,
                          capture_output=True).returncode == 0


def commands(lines):
    """[(first line number, [physical lines])]: comment-only lines are prose"""
    out, acc = [], []
    for n, text in lines:
        if not acc and (not text.strip() or text.lstrip().startswith("#")):
            continue
        acc.append((n, text))
        # a line continued with a backslash parses alone too (the backslash at the end)
        if not text.endswith("\\") and complete("\n".join(t for _, t in acc) + "\n"):
            out.append((acc[0][0], [t for _, t in acc]))
            acc = []
    if acc:
        fail(f"line {acc[0][0]}: a command that bash cannot parse: {acc[0][1].strip()}")
    return out


def key(line):
    m = COMMENT.search(line)
    return (line[:m.start()] if m else line).strip()


def outcome(phys):
    """(status, [texts the output must hold]) from the command's trailing comments"""
    for line in phys:
        m = COMMENT.search(line)
        if not m:
            continue
        o = OUTCOME.match(m.group(1).strip())
        if o:
            return int(o.group(1) or 0), re.findall(r'"([^"]+)"', o.group(2))
    return 0, []


def specials(path):
    out, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if not line[0].isspace():
                mode, sep, cmd = line.partition(":")
                if not sep or mode not in MODES:
                    fail(f"{path}:{n}: expected one of {', '.join(MODES)}, then ': COMMAND'")
                cur = {"mode": mode, "cmd": cmd.strip(), "why": "", "before": [], "after": [],
                       "used": 0,
                       "line": n}
                if cur["cmd"] in out:
                    fail(f"{path}:{n}: listed twice: {cur['cmd']}")
                out[cur["cmd"]] = cur
                continue
            field, sep, value = line.strip().partition(":")
            if cur is None or not sep or field not in ("why", "before", "after"):
                fail(f"{path}:{n}: expected an indented 'why: TEXT', 'before: SHELL' or "
                     "'after: SHELL'")
            if field == "why":
                cur["why"] = (cur["why"] + " " + value.strip()).strip()
            else:
                cur[field].append(value.strip())
    for s in out.values():
        if s["mode"] == "skip" and not s["why"]:
            fail(f"{path}:{s['line']}: a skipped command needs its 'why:'")
    return out


def main():
    if len(sys.argv) != 4:
        fail("usage: readme.py README SPECIALS OUT")
    readme, spec_path, outdir = sys.argv[1:]
    spec = specials(spec_path)
    q = shlex.quote
    name = readme.rsplit("/", 1)[-1]
    script = ["# generated by tests/lib/readme.py from " + name, "__O=" + q(outdir)]
    for start, info, lines in blocks(readme):
        words = info.split()
        where = f"{name}:{start}"
        if not words:
            fail(f"{where}: a block without a language: say sh (run), LANG NAME (a file), "
                 "text or LANG data (for reading only)")
        if words == ["text"] or (len(words) == 2 and words[1] == "data"):
            continue
        if len(words) == 2:
            if words[1].startswith("/") or ".." in words[1].split("/"):
                fail(f"{where}: a file block's name is relative to the commands' directory: "
                     f"{words[1]}")
            script.append(f"__gbx_file {q(where)} {q(words[1])}")
            script.append(f"cat > {q(words[1])} <<'{EOF_MARK}'")
            script.extend(t for _, t in lines)
            script.append(EOF_MARK)
            continue
        if words[0] not in ("sh", "bash") or len(words) != 1:
            fail(f"{where}: a block in '{info}', which the test does not know: say sh (run), "
                 "LANG NAME (a file the commands use), text or LANG data (for reading only)")
        try:
            cmds = commands(lines)
        except SystemExit:
            fail(f"{where}: its commands do not parse (above)")
        for n, phys in cmds:
            loc, first = f"{name}:{n}", key(phys[0])
            s = spec.get(first)
            mode = s["mode"] if s else "run"
            if s:
                s["used"] += 1
            body = "\n".join(phys)
            if s and s["before"]:
                script.append(f"__gbx_before {q(loc)}")
                script.extend(s["before"])
            if mode == "skip":
                script.append(f"__gbx_skip {q(loc)} {q(first)} {q(s['why'])}")
            elif mode in ("daemon", "follow"):
                script.append(f"__gbx_at {q(loc)} {q(first)}")
                script.append("set -m")
                script.append("{\n" + body + f"\n}} </dev/null >\"$__O/{n}.out\" 2>&1 &")
                script.append("set +m")
                script.append(f"__gbx_{mode} $! {q(loc)} {q(first)}")
            else:
                status, needles = outcome(phys)
                script.append(f"__gbx_at {q(loc)} {q(first)}")
                script.append("{\n" + body + f"\n}} </dev/null >\"$__O/{n}.out\" 2>&1")
                script.append(f"__gbx_check $? {status} {q(loc)} {q(first)} " +
                              " ".join(q(x) for x in needles))
            for a in s["after"] if s else []:
                script.append(f"{{ {a}\n}} >>\"$__O/after.out\" 2>&1")
                script.append(f"__gbx_after $? {q(loc)} {q(a)}")
            if mode == "follow":
                script.append("__gbx_unfollow")
    stale = [s for s in spec.values() if not s["used"]]
    for s in stale:
        print(f"readme.py: {spec_path}:{s['line']}: '{s['cmd']}' is no longer a command of "
              f"{name}: update the list", file=sys.stderr)
    if stale:
        sys.exit(1)
    script.append("__gbx_finish")
    print("\n".join(script))


main()
