#!/bin/sh
# envd's filesystem.Filesystem (Connect JSON) and /files on the wire, as the E2B SDK speaks
# them (shared/protocols/e2b.md §4.3-§4.6): EntryInfo fields, the exact error codes, users and
# paths (~, relative, unknown user, root-only paths), WatchDir streams (start, events,
# recursion, entries, keepalives, deadline, errors in the end-of-stream frame), downloads and
# uploads (multipart with full-path names, octet-stream, gzip, 413 and 507), access tokens and
# URL signatures, hostile paths that must stay inside the sandbox, and the audit records.
set -u
NAME=e2bfiles
. "$(dirname "$0")/../lib/daemon.sh"
command -v python3 >/dev/null || { echo "skip: python3 not installed"; exit 77; }
# a failed check shows the last reply
no() { fail=$((fail + 1)); echo "not ok - $1"; echo "#   last: $code $(head -c 300 "$T/out" 2>/dev/null)"; }

PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=4" start_daemon --listen "127.0.0.1:$PORT" --max-upload 8M
U="http://127.0.0.1:$PORT"
req POST /v1/sandboxes '{"id":"fs"}'
check "a sandbox" [ "$code" = 201 ]
req POST /v1/sandboxes '{"id":"tiny","disk":"4M"}'
check "a sandbox with a small disk" [ "$code" = 201 ]
TOK=$(q "print(c.execute(\"select token from sandboxes where id = 'fs'\").fetchone()[0])")
TOK2=$(q "print(c.execute(\"select token from sandboxes where id = 'tiny'\").fetchone()[0])")
SB=fs

# sh_in CMD [SANDBOX]: run a shell command in the sandbox (native exec), its stdout on ours
sh_in() {
    curl -s --max-time 60 --unix-socket "$S" -X POST -H 'Content-Type: application/json' \
        --data-binary "$(python3 -c 'import json, sys; print(json.dumps({"shell": sys.argv[1]}))' "$1")" \
        "http://glovebox/v1/sandboxes/${2:-fs}/exec" | python3 -c "
import base64, json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e['type'] == 'stdout':
        sys.stdout.buffer.write(base64.b64decode(e['data']))"
}
# rpc METHOD JSON [USER]: a unary filesystem.Filesystem call; $code, the reply in $T/out
rpc() {
    if [ $# -ge 3 ]; then
        auth="Authorization: Basic $(printf '%s:' "$3" | base64)"
    else
        auth="X-No-Auth: 1"
    fi
    code=$(curl -s --max-time 30 -o "$T/out" -w '%{http_code}' -X POST -H "E2b-Sandbox-Id: $SB" \
        -H 'E2b-Sandbox-Port: 49983' -H "X-Access-Token: $TOK" -H 'Content-Type: application/json' \
        -H 'Connect-Protocol-Version: 1' -H "$auth" --data-binary "$2" "$U/filesystem.Filesystem/$1")
}
# files METHOD QUERY [CURL ARGS...]: /files with the token; $code, body in $T/out, headers $T/hdr
files() {
    m=$1; qs=$2; shift 2
    code=$(curl -s --max-time 60 -o "$T/out" -D "$T/hdr" -w '%{http_code}' -X "$m" -H "E2b-Sandbox-Id: $SB" \
        -H 'E2b-Sandbox-Port: 49983' -H "X-Access-Token: $TOK" "$@" "$U/files$qs")
}
# raw METHOD URL [CURL ARGS...]: any request; $code, body in $T/out
raw() {
    m=$1; url=$2; shift 2
    code=$(curl -s --max-time 60 -o "$T/out" -D "$T/hdr" -w '%{http_code}' -X "$m" "$@" "$url")
}
j() { python3 -c "import json; j = json.load(open('$T/out')); print($1)"; }
header() { tr -d '\r' < "$T/hdr" | awk -v h="$1" 'tolower($1) == tolower(h) ":" { $1 = ""; sub(/^ /, ""); print }'; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# sign PATH OPERATION USER TOKEN [EXPIRATION]: envd's URL signature, URL-encoded
sign() {
    python3 -c "
import base64, hashlib, sys, urllib.parse
raw = ':'.join(sys.argv[1:])
sig = 'v1_' + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip('=')
print(urllib.parse.quote(sig, safe=''))" "$@"
}
enc() { python3 -c "import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=''))" "$1"; }

# watch JSON OUT [HEADERS...]: a WatchDir stream in the background, each frame a line of OUT
# ("<flags> <json>"); $WPID. The helper says "ready" in OUT.ready once the start frame is in.
cat > "$T/watch.py" <<'EOF'
import http.client, json, struct, sys
port, sb, tok, body, out = sys.argv[1:6]
hdrs = {'E2b-Sandbox-Id': sb, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': tok,
        'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1'}
for h in sys.argv[6:]:
    k, v = h.split(':', 1)
    hdrs[k.strip()] = v.strip()
msg = body.encode()
c = http.client.HTTPConnection('127.0.0.1', int(port), timeout=60)
c.request('POST', '/filesystem.Filesystem/WatchDir', struct.pack('>BI', 0, len(msg)) + msg, hdrs)
r = c.getresponse()
with open(out, 'w') as f:
    f.write('status %d %s\n' % (r.status, r.getheader('Content-Type')))
    f.flush()
    while True:
        h = r.read(5)
        if len(h) < 5:
            f.write('eof\n')
            break
        flags, n = struct.unpack('>BI', h)
        f.write('%d %s\n' % (flags, r.read(n).decode()))
        f.flush()
        if flags & 2:
            break
        if 'start' in json.loads(open(out).readlines()[-1].split(' ', 1)[1]):
            open(out + '.ready', 'w').close()
EOF
watch() {
    b=$1; o=$2; shift 2
    rm -f "$o" "$o.ready"
    python3 "$T/watch.py" "$PORT" "$SB" "$TOK" "$b" "$o" "$@" &
    WPID=$!
}
# wait_for FILE PATTERN: until a line of FILE matches (5 s at most)
wait_for() {
    for i in $(seq 100); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
# frames FILE: the messages of a watch, one JSON per line (without the flags)
frames() { sed -n 's/^[0-9] //p' "$1"; }

# ---- Stat and EntryInfo ----
sh_in 'printf abc > /home/user/a.txt; chown user:user /home/user/a.txt; ln -s a.txt /home/user/link; mkdir -p /home/user/d1/d2/d3; echo x > /home/user/d1/d2/d3/deep; ln -s /etc /home/user/d1/etc'
rpc Stat '{"path":"/home/user/a.txt"}'
check "Stat: 200 with the entry" [ "$code" = 200 ]
check "Stat: EntryInfo fields" [ "$(j "sorted(j['entry'])")" = "['group', 'metadata', 'mode', 'modifiedTime', 'name', 'owner', 'path', 'permissions', 'size', 'type']" ]
check "Stat: values (size an int64 string, mode the permission bits)" \
    [ "$(j "(lambda e: (e['name'], e['type'], e['path'], e['size'], e['mode'], e['permissions'], e['owner'], e['group'], e['metadata']))(j['entry'])")" = "('a.txt', 'FILE_TYPE_FILE', '/home/user/a.txt', '3', 420, '-rw-r--r--', 'user', 'user', {})" ]
check "Stat: modifiedTime is RFC 3339 UTC" \
    python3 -c "import json, re; t = json.load(open('$T/out'))['entry']['modifiedTime']; assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{9})?Z', t), t"
rpc Stat '{"path":"/home/user"}'
check "Stat: a directory" [ "$(j "(j['entry']['type'], j['entry']['permissions'][0], j['entry']['name'], j['entry']['owner'])")" = "('FILE_TYPE_DIRECTORY', 'd', 'user', 'user')" ]
rpc Stat '{"path":"/home/user/link"}'
check "Stat: a symlink is itself, with its target" [ "$(j "(j['entry']['type'], j['entry']['permissions'], j['entry']['symlinkTarget'])")" = "('FILE_TYPE_SYMLINK', 'lrwxrwxrwx', 'a.txt')" ]
rpc Stat '{"path":"/"}'
check "Stat: the root" [ "$(j "(j['entry']['name'], j['entry']['path'], j['entry']['type'])")" = "('/', '/', 'FILE_TYPE_DIRECTORY')" ]
rpc Stat '{"path":"/missing"}'
check "Stat: missing is 404 not_found" [ "$code" = 404 ]
check "  with a Connect error body" [ "$(j "(j['code'], j['message'])")" = "('not_found', \"path '/missing' does not exist\")" ]
rpc Stat '{"path":"a.txt"}'
check "a relative path is under the user's home" [ "$(j "j['entry']['path']")" = /home/user/a.txt ]
rpc Stat '{"path":"~/a.txt"}'
check "~/ is the user's home" [ "$(j "j['entry']['path']")" = /home/user/a.txt ]
rpc Stat '{"path":"~"}'
check "~ is the user's home" [ "$(j "j['entry']['path']")" = /home/user ]
rpc Stat '{"path":"~"}' root
check "~ of root is /root" [ "$(j "j['entry']['path']")" = /root ]
rpc Stat '{"path":"/home/user/../user/./d1//"}'
check "paths are cleaned" [ "$(j "j['entry']['path']")" = /home/user/d1 ]
rpc Stat '{"path":"x"}' bob
check "an unknown user is unauthenticated" [ "$code" = 401 ]
check "  saying which" [ "$(j "(j['code'], j['message'])")" = "('unauthenticated', \"invalid username: 'bob'\")" ]
rpc Stat '{}'
[ "$code" = 400 ] && [ "$(j "j['code']")" = invalid_argument ]
check "a missing path is invalid_argument" [ $? = 0 ]
rpc ListDir '{"path":"/home/user/d1","depth":null}'
check "an explicit null is the default (proto3 JSON)" [ "$(j "len(j['entries'])")" = 2 ]
rpc Stat '{"path":7}'
check "a path that is not a string is invalid_argument" [ "$(j "j['code']")" = invalid_argument ]
rpc Stat 'not json'
[ "$code" = 400 ] && [ "$(j "j['code']")" = invalid_argument ]
check "a body that is not JSON is invalid_argument" [ $? = 0 ]
rpc Nope '{}'
[ "$code" = 501 ] && [ "$(j "j['code']")" = unimplemented ]
check "an unknown method is unimplemented" [ $? = 0 ]
code=$(curl -s -o "$T/out" -w '%{http_code}' -X POST -H "E2b-Sandbox-Id: fs" -H 'Content-Type: application/json' -d '{"path":"/"}' "$U/filesystem.Filesystem/Stat")
check "no access token: 502, as an unknown sandbox" [ "$code" = 502 ]

# ---- ListDir ----
rpc ListDir '{"path":"/home/user/d1","depth":1}'
check "ListDir depth 1: the children only, not the root" [ "$(j "[(e['name'], e['type']) for e in j['entries']]")" = "[('d2', 'FILE_TYPE_DIRECTORY'), ('etc', 'FILE_TYPE_SYMLINK')]" ]
rpc ListDir '{"path":"/home/user/d1","depth":2}'
check "ListDir depth 2: two levels, absolute paths, symlinks not followed" \
    [ "$(j "[e['path'] for e in j['entries']]")" = "['/home/user/d1/d2', '/home/user/d1/d2/d3', '/home/user/d1/etc']" ]
check "ListDir: owners and groups by name" [ "$(j "sorted({(e['owner'], e['group']) for e in j['entries']})")" = "[('root', 'root')]" ]
rpc ListDir '{"path":"/home/user/d1","depth":9}'
check "ListDir deeper: names are base names" [ "$(j "[e['name'] for e in j['entries']]")" = "['d2', 'd3', 'deep', 'etc']" ]
rpc ListDir '{"path":"d1"}'
check "ListDir: depth defaults to 1, relative paths" [ "$(j "[e['path'] for e in j['entries']]")" = "['/home/user/d1/d2', '/home/user/d1/etc']" ]
rpc ListDir '{"path":"/home/user/a.txt","depth":1}'
[ "$code" = 400 ] && [ "$(j "j['code']")" = invalid_argument ]
check "ListDir on a file: invalid_argument" [ $? = 0 ]
rpc ListDir '{"path":"/nope","depth":1}'
[ "$code" = 404 ] && [ "$(j "j['code']")" = not_found ]
check "ListDir on a missing path: not_found" [ $? = 0 ]
rpc ListDir '{"path":"/","depth":100}'
check "ListDir: a depth past 32 is invalid_argument" [ "$(j "j['code']")" = invalid_argument ]
rpc ListDir '{"path":"/root"}'
[ "$code" = 403 ] && [ "$(j "j['code']")" = permission_denied ]
check "ListDir: root's home is not the user's" [ $? = 0 ]
rpc ListDir '{"path":"/root"}' root
check "ListDir: but root's" [ "$code" = 200 ]

# ---- MakeDir ----
rpc MakeDir '{"path":"/home/user/new/a/b"}'
[ "$code" = 200 ] && [ "$(j "(j['entry']['type'], j['entry']['path'], j['entry']['owner'])")" = "('FILE_TYPE_DIRECTORY', '/home/user/new/a/b', 'user')" ]
check "MakeDir: parents made, the entry" [ $? = 0 ]
check "  the parents belong to the user" [ "$(sh_in 'stat -c %U /home/user/new /home/user/new/a' | tr '\n' ' ')" = "user user " ]
rpc MakeDir '{"path":"/home/user/new/a/b"}'
[ "$code" = 409 ] && [ "$(j "j['code']")" = already_exists ]
check "MakeDir: an existing directory is already_exists" [ $? = 0 ]
rpc MakeDir '{"path":"/home/user/a.txt"}'
[ "$code" = 400 ] && [ "$(j "j['code']")" = invalid_argument ]
check "MakeDir: an existing file is invalid_argument" [ $? = 0 ]
rpc MakeDir '{"path":"/home/user/a.txt/sub"}'
check "MakeDir under a file: invalid_argument" [ "$(j "j['code']")" = invalid_argument ]
rpc MakeDir '{"path":"/opt/x"}'
check "MakeDir where the user may not: permission_denied" [ "$(j "j['code']")" = permission_denied ]
rpc MakeDir '{"path":"/opt/x"}' root
[ "$code" = 200 ] && [ "$(j "j['entry']['owner']")" = root ]
check "MakeDir as root: owned by root" [ $? = 0 ]

# ---- Move ----
sh_in 'printf move-me > /home/user/m1'
rpc Move '{"source":"/home/user/m1","destination":"/home/user/moved/here/m2"}'
[ "$code" = 200 ] && [ "$(j "(j['entry']['path'], j['entry']['size'], j['entry']['type'])")" = "('/home/user/moved/here/m2', '7', 'FILE_TYPE_FILE')" ]
check "Move: the destination's entry" [ $? = 0 ]
check "  moved, its new parents made" [ "$(sh_in 'cat /home/user/moved/here/m2; test -e /home/user/m1 || echo " gone"')" = "move-me gone" ]
sh_in 'printf other > /home/user/m3'
rpc Move '{"source":"m3","destination":"~/moved/here/m2"}'
[ "$code" = 200 ] && [ "$(sh_in 'cat /home/user/moved/here/m2')" = other ]
check "Move: replaces the destination (relative and ~ paths)" [ $? = 0 ]
rpc Move '{"source":"/home/user/nope","destination":"/home/user/x"}'
[ "$code" = 404 ] && [ "$(j "j['code']")" = not_found ]
check "Move: a missing source is not_found" [ $? = 0 ]
rpc Move '{"source":"/home/user/a.txt"}'
check "Move: a missing destination is invalid_argument" [ "$(j "j['code']")" = invalid_argument ]

# ---- Remove ----
rpc Remove '{"path":"/home/user/new"}'
[ "$code" = 200 ] && [ "$(cat "$T/out")" = '{}' ]
check "Remove: a tree, {}" [ $? = 0 ]
check "  it is gone" [ "$(sh_in 'test -e /home/user/new || echo gone')" = gone ]
rpc Remove '{"path":"/home/user/new"}'
[ "$code" = 200 ] && [ "$(cat "$T/out")" = '{}' ]
check "Remove: a missing path is fine (rm -rf)" [ $? = 0 ]
rpc Remove '{"path":"/opt/x"}'
[ "$code" = 403 ] && [ "$(j "j['code']")" = permission_denied ]
check "Remove: what the user may not is permission_denied" [ $? = 0 ]
rpc Remove '{"path":"/opt/x"}' root
check "Remove: as root" [ "$code" = 200 ]
rpc Remove '{"path":"/"}' root
check "Remove: / is refused" [ "$code" != 200 ]

# ---- WatchDir ----
sh_in 'mkdir -p /home/user/w/sub; chown -R user:user /home/user/w'
watch '{"path":"/home/user/w"}' "$T/w1" 'Connect-Timeout-Ms: 20000'
wait_for "$T/w1" start
check "WatchDir: 200 application/connect+json, start first" \
    eval '[ "$(head -1 "$T/w1")" = "status 200 application/connect+json" ] && [ "$(sed -n 2p "$T/w1")" = "0 {\"start\":{}}" ]'
sh_in 'echo hi > /home/user/w/f1; rm /home/user/w/f1; echo deep > /home/user/w/sub/f2'
wait_for "$T/w1" EVENT_TYPE_REMOVE
sleep 0.3
kill "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null
check "WatchDir: create, write, remove of a file, one message per operation" \
    [ "$(frames "$T/w1" | python3 -c "
import json, sys
ev = [json.loads(l)['filesystem'] for l in sys.stdin if 'filesystem' in l]
print(sorted({(e['name'], e['type']) for e in ev}))")" = "[('f1', 'EVENT_TYPE_CREATE'), ('f1', 'EVENT_TYPE_REMOVE'), ('f1', 'EVENT_TYPE_WRITE')]" ]
watch '{"path":"w","recursive":true,"includeEntry":true}' "$T/w2" 'Connect-Timeout-Ms: 20000'
wait_for "$T/w2" start
sh_in 'echo deep > /home/user/w/sub/f3'
wait_for "$T/w2" 'sub/f3.*EVENT_TYPE_WRITE'
kill "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null
check "WatchDir recursive: names relative to the watched directory" \
    eval 'frames "$T/w2" | grep -q "\"name\":\"sub/f3\",\"type\":\"EVENT_TYPE_CREATE\""'
check "WatchDir includeEntry: the entry of the file" \
    [ "$(frames "$T/w2" | python3 -c "
import json, sys
ev = [json.loads(l)['filesystem'] for l in sys.stdin if 'filesystem' in l]
e = [e for e in ev if e['type'] == 'EVENT_TYPE_CREATE'][0]
print(e['entry']['path'], e['entry']['type'])")" = "/home/user/w/sub/f3 FILE_TYPE_FILE" ]
watch '{"path":"/home/user/w"}' "$T/w3" 'Connect-Timeout-Ms: 3000' 'Keepalive-Ping-Interval: 1'
wait_for "$T/w3" '^2 '
wait "$WPID"
check "WatchDir: keepalives when idle" grep -q '^0 {"keepalive":{}}' "$T/w3"
check "WatchDir: the deadline ends it with deadline_exceeded in the end-of-stream frame" \
    eval 'tail -1 "$T/w3" | grep -q "^2 {\"error\":{\"code\":\"deadline_exceeded\""'
watch '{"path":"/home/user/nope"}' "$T/w4"
wait_for "$T/w4" '^2 '; wait "$WPID"
check "WatchDir on a missing path: 200, then not_found in the end-of-stream frame, no start" \
    eval '[ "$(head -1 "$T/w4")" = "status 200 application/connect+json" ] && [ "$(sed -n 2p "$T/w4" | cut -c1-40)" = "2 {\"error\":{\"code\":\"not_found\",\"message\"" ]'
watch '{"path":"/home/user/a.txt"}' "$T/w5"
wait_for "$T/w5" '^2 '; wait "$WPID"
check "WatchDir on a file: invalid_argument" grep -q '^2 {"error":{"code":"invalid_argument"' "$T/w5"
rpc WatchDir '{"path":"/home/user"}'
check "WatchDir as a unary call: invalid_argument" [ "$code" = 400 ]
watch '{"path":"/home/user/w"}' "$T/w6"
wait_for "$T/w6" start
kill "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null
check "a client that leaves a watch ends it" [ "$(sh_in 'echo ok')" = ok ]

# ---- /files: download ----
python3 -c "import sys; sys.stdout.buffer.write(bytes(range(256)) * 8192)" > "$T/bin"
files POST "?path=$(enc /home/user/bin)" -H 'Content-Type: application/octet-stream' -H 'Transfer-Encoding: chunked' --data-binary @"$T/bin"
check "octet-stream upload: 200" [ "$code" = 200 ]
check "  [{path, name, type: file}]" [ "$(cat "$T/out")" = '[{"path":"/home/user/bin","name":"bin","type":"file"}]' ]
files GET "?path=$(enc /home/user/bin)"
check "download: 200, every byte value" eval '[ "$code" = 200 ] && [ "$(sha "$T/out")" = "$(sha "$T/bin")" ]'
check "  application/octet-stream with Content-Length" eval '[ "$(header Content-Type)" = application/octet-stream ] && [ "$(header Content-Length)" = 2097152 ]'
files GET "?path=$(enc /home/user/bin)" -H 'Accept-Encoding: gzip'
check "  Accept-Encoding: gzip is answered identity" eval '[ "$(sha "$T/out")" = "$(sha "$T/bin")" ] && [ -z "$(header Content-Encoding)" ]'
sh_in ': > /home/user/empty'
files GET "?path=$(enc /home/user/empty)"
check "an empty file: 200, Content-Length 0" eval '[ "$code" = 200 ] && [ ! -s "$T/out" ] && [ "$(header Content-Length)" = 0 ]'
files GET "?path=a.txt"
check "a relative path is under the home" eval '[ "$code" = 200 ] && [ "$(cat "$T/out")" = abc ]'
files GET "?path=$(enc /nope)"
check "a missing file: 404 with envd's body" eval '[ "$code" = 404 ] && [ "$(cat "$T/out")" = "{\"code\":404,\"message\":\"path '"'"'/nope'"'"' does not exist\"}" ]'
files GET "?path=$(enc /home/user)"
check "a directory: 400" eval '[ "$code" = 400 ] && [ "$(j "j['"'"'code'"'"']")" = 400 ]'
files GET "?path=a.txt&username=bob"
check "an unknown user: 401" [ "$code" = 401 ]
files GET "?path=$(enc /root/.profile)"
check "a file the user may not read: an error" [ "$code" = 403 ]
sh_in 'echo secret > /root/s; chmod 600 /root/s'
files GET "?path=$(enc /root/s)&username=root"
check "  but root may" eval '[ "$code" = 200 ] && [ "$(cat "$T/out")" = secret ]'
files GET ""
check "no path: 400" [ "$code" = 400 ]

# ---- /files: upload ----
printf 'multi' > "$T/m1"
files POST "?path=$(enc /home/user/up/one.txt)" -F "file=@$T/m1;filename=/home/user/up/one.txt"
check "multipart, one file with ?path=: 200, the parents made" eval '[ "$code" = 200 ] && [ "$(cat "$T/out")" = "[{\"path\":\"/home/user/up/one.txt\",\"name\":\"one.txt\",\"type\":\"file\"}]" ]'
[ "$(sh_in 'stat -c "%U %a" /home/user/up/one.txt')" = "user 644" ] && [ "$(sh_in 'stat -c "%U %a" /home/user/up')" = "user 755" ]
check "  owned by the user, the parent too" [ $? = 0 ]
printf 'two' > "$T/m2"
files POST "" -F "file=@$T/m1;filename=/home/user/up/x/a" -F "file=@$T/m2;filename=rel/b" -F "other=ignored"
check "multipart, several files: each part's filename is its full destination" \
    eval '[ "$code" = 200 ] && [ "$(j "[e['"'"'path'"'"'] for e in j]")" = "['"'"'/home/user/up/x/a'"'"', '"'"'/home/user/rel/b'"'"']" ]'
check "  written" [ "$(sh_in 'cat /home/user/up/x/a /home/user/rel/b')" = multitwo ]
files POST "" -F "file=@$T/m1;filename=/home/user/dup" -F "file=@$T/m2;filename=~/dup"
check "the same destination twice: 400" eval '[ "$code" = 400 ] && grep -q "same path" "$T/out"'
files POST "" -F "other=@$T/m1;filename=/home/user/zz"
check "no part named file: 400" [ "$code" = 400 ]
files POST "?path=$(enc /home/user/up/one.txt)" -H 'Content-Type: application/octet-stream' --data-binary 'replaced'
check "octet-stream replaces a file in place" eval '[ "$code" = 200 ] && [ "$(sh_in "cat /home/user/up/one.txt")" = replaced ]'
files POST "" -H 'Content-Type: application/octet-stream' --data-binary 'x'
check "octet-stream without path: 400" [ "$code" = 400 ]
files POST "?path=x" -H 'Content-Type: text/plain' --data-binary 'x'
check "another content type: 400" [ "$code" = 400 ]
files POST "?path=$(enc /home/user/up)" -H 'Content-Type: application/octet-stream' --data-binary 'x'
check "a directory target: 400" eval '[ "$code" = 400 ] && grep -q "is a directory" "$T/out"'
files POST "?path=$(enc /home/user/a.txt/x)" -H 'Content-Type: application/octet-stream' --data-binary 'x'
check "a file in the way: 400" [ "$code" = 400 ]
files POST "?path=$(enc /etc/nope)" -H 'Content-Type: application/octet-stream' --data-binary 'x'
check "a root-only path: 403" [ "$code" = 403 ]
files POST "?path=$(enc /etc/yes)&username=root" -H 'Content-Type: application/octet-stream' --data-binary 'x'
check "  root may, and owns it" eval '[ "$code" = 200 ] && [ "$(sh_in "stat -c %U /etc/yes")" = root ]'
files POST "?path=m.txt" -H 'Content-Type: application/octet-stream' -H 'X-Metadata-Owner: me' --data-binary 'meta'
check "X-Metadata-* headers are accepted" [ "$code" = 200 ]
rpc Stat '{"path":"m.txt"}'
check "  and not stored (metadata is always {})" [ "$(j "j['entry']['metadata']")" = "{}" ]
files POST "?path=bob.txt&username=bob" -H 'Content-Type: application/octet-stream' --data-binary 'x'
check "upload as an unknown user: 401" [ "$code" = 401 ]

# gzip
python3 -c "import random; random.seed(7); print(' '.join(str(random.random()) for i in range(3000)))" > "$T/plain"
gzip -c < "$T/plain" > "$T/plain.gz"
files POST "?path=gz.txt" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' --data-binary @"$T/plain.gz"
check "a gzip body is inflated" eval '[ "$code" = 200 ] && [ "$(sh_in "sha256sum /home/user/gz.txt" | cut -d" " -f1)" = "$(sha "$T/plain")" ]'
{ gzip -c < "$T/m1"; gzip -c < "$T/m2"; } > "$T/multi.gz"
files POST "?path=gz2.txt" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' --data-binary @"$T/multi.gz"
check "  several gzip members follow each other" eval '[ "$code" = 200 ] && [ "$(sh_in "cat /home/user/gz2.txt")" = multitwo ]'
printf 'multi' | gzip -c > "$T/mp.gz"
python3 - "$T" <<'EOF'
import gzip, sys
t = sys.argv[1]
body = (b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="/home/user/gzmp.txt"\r\n'
        b'Content-Type: application/octet-stream\r\n\r\nin a gzip multipart\r\n--XyZ--\r\n')
open(t + '/mp.gz', 'wb').write(gzip.compress(body))
EOF
files POST "" -H 'Content-Type: multipart/form-data; boundary=XyZ' -H 'Content-Encoding: gzip' --data-binary @"$T/mp.gz"
check "  a gzip multipart body too" eval '[ "$code" = 200 ] && [ "$(sh_in "cat /home/user/gzmp.txt")" = "in a gzip multipart" ]'
head -c $(($(wc -c < "$T/plain.gz") / 2)) "$T/plain.gz" > "$T/cut.gz"
files POST "?path=cut.txt" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' --data-binary @"$T/cut.gz"
check "a truncated gzip body: 400" [ "$code" = 400 ]
files POST "?path=cut.txt" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' --data-binary 'not gzip'
check "a body that is not gzip: 400" [ "$code" = 400 ]
files POST "?path=cut.txt" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: br' --data-binary 'x'
check "another Content-Encoding: 400" [ "$code" = 400 ]
head -c 64M /dev/zero | gzip -1 -c > "$T/bomb.gz"
files POST "?path=bomb" -H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' --data-binary @"$T/bomb.gz"
check "a gzip bomb past --max-upload: 413 ($(wc -c < "$T/bomb.gz") bytes inflating to 64 MiB)" [ "$code" = 413 ]
check "  nothing written" [ "$(sh_in 'test -e /home/user/bomb || echo none')" = none ]
head -c 9M /dev/zero > "$T/big"
files POST "?path=big" -H 'Content-Type: application/octet-stream' --data-binary @"$T/big"
check "a body past --max-upload: 413" [ "$code" = 413 ]

# a full disk
SB=tiny; TOKSAVE=$TOK; TOK=$TOK2
head -c 7M /dev/urandom > "$T/rand"
files POST "?path=fill" -H 'Content-Type: application/octet-stream' --data-binary @"$T/rand"
check "a full disk: 507" eval '[ "$code" = 507 ] && [ "$(j "j['"'"'code'"'"']")" = 507 ]'
SB=fs; TOK=$TOKSAVE

# ---- hostile paths stay inside the sandbox ----
ESC="gbx-escape-$$"
sh_in "ln -s ../../../../../../../tmp /home/user/up/esc; ln -s / /home/user/up/root"
files POST "?path=$(enc "/home/user/up/esc/$ESC")" -H 'Content-Type: application/octet-stream' --data-binary 'in'
check "a write through a symlink to ../../../tmp lands in the sandbox's /tmp" \
    eval '[ "$code" = 200 ] && [ ! -e "/tmp/$ESC" ] && [ "$(sh_in "cat /tmp/$ESC")" = in ]'
files POST "?path=$(enc "/../../../../tmp/$ESC-2")" -H 'Content-Type: application/octet-stream' --data-binary 'in'
check "  and through .. components" eval '[ ! -e "/tmp/$ESC-2" ]'
files GET "?path=$(enc /home/user/up/root/etc/hostname)"
check "a read through a symlink to / reads the sandbox's file" eval '[ "$code" = 200 ] && [ "$(cat "$T/out")" = "$(sh_in "cat /etc/hostname")" ]'
rpc Move "{\"source\":\"/home/user/a.txt\",\"destination\":\"/home/user/up/esc/$ESC-3\"}"
check "a move through such a symlink stays inside" eval '[ ! -e "/tmp/$ESC-3" ]'
rpc Move "{\"source\":\"/tmp/$ESC-3\",\"destination\":\"/home/user/a.txt\"}"
printf 'bad\377name' > "$T/badname"
sh_in "touch \"/home/user/w/\$(printf 'bad\\377name')\""
rpc ListDir '{"path":"/home/user/w"}'
[ "$code" = 200 ] && [ "$(j "[e['name'] for e in j['entries']] == ['bad\\ufffdname', 'sub']")" = True ]
check "a file name that is not UTF-8 is listed with U+FFFD" [ $? = 0 ]
files GET "?path=$(enc /home/user/w)%FFx"
check "a query path that is not UTF-8: a clean 404" [ "$code" = 404 ]

# ---- access tokens and signatures ----
P=/home/user/bin
raw GET "$U/files?path=$(enc $P)" -H "E2b-Sandbox-Id: fs"
check "no token, no signature: 502 with the edge's body, as for an unknown sandbox" \
    eval '[ "$code" = 502 ] && [ "$(cat "$T/out")" = "{\"sandboxId\":\"fs\",\"message\":\"The sandbox was not found\",\"code\":502}" ]'
raw GET "$U/files?path=$(enc $P)" -H "E2b-Sandbox-Id: fs" -H "X-Access-Token: wrong"
check "a wrong token: 502" [ "$code" = 502 ]
SIG=$(sign "$P" read "" "$TOK")
raw GET "$U/files?path=$(enc $P)&signature=$SIG" -H "E2b-Sandbox-Id: fs"
check "a signed read: 200" eval '[ "$code" = 200 ] && [ "$(sha "$T/out")" = "$(sha "$T/bin")" ]'
raw GET "$U/files?path=$(enc $P)&signature=$SIG"
check "  also without the sandbox id (E2B_SANDBOX_URL downloadUrl())" eval '[ "$code" = 200 ] && [ "$(sha "$T/out")" = "$(sha "$T/bin")" ]'
raw GET "$U/files?path=$(enc $P)&signature=${SIG}x"
check "a tampered signature: 401" [ "$code" = 401 ]
raw GET "$U/files?path=$(enc /home/user/a.txt)&signature=$SIG"
check "a signature for another path: 401" [ "$code" = 401 ]
raw POST "$U/files?path=$(enc $P)&signature=$SIG" -H 'Content-Type: application/octet-stream' --data-binary 'x'
check "a read signature does not write: 401" [ "$code" = 401 ]
raw GET "$U/files?path=$(enc $P)&signature=$(sign "$P" read "" "$TOK2")" -H "E2b-Sandbox-Id: fs"
check "another sandbox's signature (with the id): 502" [ "$code" = 502 ]
SIGW=$(sign signed.txt write root "$TOK")
raw POST "$U/files?path=signed.txt&username=root&signature=$SIGW" -H 'Content-Type: application/octet-stream' --data-binary 'signed'
check "a signed write with a username (relative path, root's home)" eval '[ "$code" = 200 ] && [ "$(sh_in "cat /root/signed.txt")" = signed ]'
EXP=$(($(date +%s) + 600))
raw GET "$U/files?path=$(enc $P)&signature=$(sign "$P" read "" "$TOK" "$EXP")&signature_expiration=$EXP"
check "a signature that expires later: 200" [ "$code" = 200 ]
raw GET "$U/files?path=$(enc $P)&signature=$(sign "$P" read "" "$TOK" "$EXP")&signature_expiration=$((EXP + 1))"
check "  with its expiration changed: 401" [ "$code" = 401 ]
OLD=$(($(date +%s) - 10))
raw GET "$U/files?path=$(enc $P)&signature=$(sign "$P" read "" "$TOK" "$OLD")&signature_expiration=$OLD" -H "E2b-Sandbox-Id: fs"
check "an expired signature (with the id): 502" [ "$code" = 502 ]
raw GET "$U/files?path=$(enc $P)&signature=$SIG" -H "E2b-Sandbox-Id: fs" -H "X-Access-Token: wrong"
check "a wrong token fails even with a good signature (502)" [ "$code" = 502 ]
raw GET "$U/files?path=$(enc $P)"
check "no sandbox id and no signature: 401" [ "$code" = 401 ]

# ---- a client that leaves mid-download ----
head -c 6M /dev/urandom > "$T/six"
files POST "?path=six" -H 'Content-Type: application/octet-stream' --data-binary @"$T/six"
for i in 1 2 3; do
    curl -s --max-time 5 -H "E2b-Sandbox-Id: fs" -H "X-Access-Token: $TOK" "$U/files?path=six" | head -c 1000 > /dev/null
done
files GET "?path=six"
check "downloads abandoned midway leave the daemon well" eval '[ "$code" = 200 ] && [ "$(sha "$T/out")" = "$(sha "$T/six")" ]'

# ---- audit ----
check "the audit has every change, as the sandbox's owner, with the user" \
    [ "$(q "
import collections
rows = c.execute(\"select actor, kind, detail from audit where sandbox = 'fs' and kind like 'file.%'\").fetchall()
d = collections.defaultdict(set)
for actor, kind, detail in rows:
    j = json.loads(detail)
    d[kind].add((actor, j.get('user')))
print(sorted((k, sorted(v)) for k, v in d.items()))")" = "[('file.mkdir', [('admin', 'root'), ('admin', 'user')]), ('file.move', [('admin', 'user')]), ('file.remove', [('admin', 'root'), ('admin', 'user')]), ('file.write', [('admin', 'root'), ('admin', 'user')])]" ]
check "  a write records its path and size" \
    [ "$(q "print(c.execute(\"select detail from audit where kind = 'file.write' and detail like '%/home/user/bin%'\").fetchone()[0])")" = '{"bytes":2097152,"path":"/home/user/bin","user":"user"}' ]

# ---- a graceful stop ends open watches with their end-of-stream frame ----
watch '{"path":"/home/user/w"}' "$T/w9"
wait_for "$T/w9" start
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
wait "$WPID"
check "the daemon stops cleanly on SIGTERM" [ $rc -eq 0 ]
check "  and ended the watch with unavailable" grep -q '^2 {"error":{"code":"unavailable"' "$T/w9"

summary
