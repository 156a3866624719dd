# SPDX-License-Identifier: MIT
# The code interpreter's kernel: one persistent Python process per context, inside the
# sandbox. gloveboxd starts it with `python3 -u -c <this file>` and talks to it over its stdin
# and stdout: a request is one JSON line {"code": str, "env": {str: str}}; the reply is the
# E2B /execute NDJSON events, one per line, ending with {"type":"end_of_execution"}. Output
# of the user's code (print, and subprocesses writing to fd 1 and 2) becomes stdout/stderr
# events: fds 1 and 2 are pipes this process reads, the protocol has its own descriptor.
import ast
import json
import linecache
import os
import sys
import threading
import traceback

proto = os.fdopen(os.dup(1), "w", buffering=1)
lock = threading.Lock()


def emit(event):
    with lock:
        proto.write(json.dumps(event) + "\n")
        proto.flush()


MARK = b"\0gbx-sync\0"
synced = {1: threading.Event(), 2: threading.Event()}


def pump(fd, target, kind):
    # forward what the cell writes; a MARK written by the kernel itself says "all before this
    # is forwarded" (see sync), and is not output
    pending = b""
    with os.fdopen(fd, "rb", buffering=0) as f:
        while True:
            chunk = f.read(65536)
            if not chunk:
                break
            pending += chunk
            while True:
                i = pending.find(MARK)
                if i < 0:
                    break
                if i:
                    emit({"type": kind, "text": pending[:i].decode("utf-8", "replace")})
                pending = pending[i + len(MARK):]
                synced[target].set()
            # keep a tail that could be the start of a MARK, and a cut UTF-8 character
            keep = 0
            for n in range(min(len(MARK) - 1, len(pending)), 0, -1):
                if MARK.startswith(pending[-n:]):
                    keep = n
                    break
            out = pending[:len(pending) - keep]
            cut = 0
            while cut < min(3, len(out)) and (out[len(out) - 1 - cut] & 0xC0) == 0x80:
                cut += 1
            if cut < len(out) and out and out[len(out) - 1 - cut] >= 0xC0:
                cut += 1
            else:
                cut = 0
            out, pending = out[:len(out) - cut], out[len(out) - cut:] + pending[len(pending) - keep:]
            if out:
                emit({"type": kind, "text": out.decode("utf-8", "replace")})
    if pending:
        emit({"type": kind, "text": pending.decode("utf-8", "replace")})
    synced[target].set()


for target, kind in ((1, "stdout"), (2, "stderr")):
    r, w = os.pipe()
    os.dup2(w, target)
    os.close(w)
    threading.Thread(target=pump, args=(r, target, kind), daemon=True).start()
sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)


def sync():
    # everything the cell wrote to fds 1 and 2 has been forwarded once both MARKs come back
    sys.stdout.flush()
    sys.stderr.flush()
    for fd in (1, 2):
        synced[fd].clear()
        try:
            os.write(fd, MARK)
        except OSError:
            synced[fd].set()
    for fd in (1, 2):
        synced[fd].wait(5)


namespace = {"__name__": "__main__"}
count = 0


def result_event(value):
    event = {"type": "result", "is_main_result": True, "text": repr(value)}
    for method, key in (("_repr_html_", "html"), ("_repr_markdown_", "markdown"),
                        ("_repr_svg_", "svg"), ("_repr_latex_", "latex"),
                        ("_repr_json_", "json")):
        fn = getattr(value, method, None)
        if callable(fn):
            try:
                out = fn()
            except Exception:
                continue
            if out is not None:
                event[key] = out
    return event


def run(code):
    global count
    count += 1
    emit({"type": "number_of_executions", "execution_count": count})
    name = "<cell-%d>" % count
    # tracebacks show the cell's lines
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(code, name, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, name, "exec"), namespace)
    if last is not None:
        value = eval(compile(last, name, "eval"), namespace)
        if value is not None:
            namespace["_"] = value
            return value
    return None


for line in sys.stdin:
    try:
        req = json.loads(line)
    except ValueError:
        continue
    saved = {}
    for k, v in (req.get("env") or {}).items():
        saved[k] = os.environ.get(k)
        os.environ[k] = str(v)
    value = None
    failed = None
    try:
        value = run(req.get("code", ""))
    except BaseException as e:  # a cell's exception, SystemExit included, is its result
        failed = e
    sync()
    if failed is not None:
        # the cell's frames only, not the kernel's
        tb = failed.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
            tb = tb.tb_next
        tb = traceback.format_exception(type(failed), failed, tb)
        emit({"type": "error", "name": type(failed).__name__, "value": str(failed),
              "traceback": "".join(tb)})
    elif value is not None:
        try:
            emit(result_event(value))
        except Exception as e:
            emit({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": ""})
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    emit({"type": "end_of_execution"})
