#!/bin/sh
# gloveboxd's files API: binary round trips, ranges, stat/list/mkdir/move/remove and their
# errors, hostile paths that must stay inside the sandbox, users and permissions, multipart
# uploads, the upload limit, clients that leave mid-download, a slow reader's memory, watch
# streams (NDJSON and SSE), `glovebox cp`, and the audit records of every change.
set -u
NAME=files
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
MAX=8M # the daemon's largest upload

# req METHOD PATH [CURL ARGS...]: status in $code, body in $T/body, headers in $T/headers
req() {
    m=$1; p=$2; shift 2
    code=$(curl -s --max-time 60 -o "$T/body" -D "$T/headers" -w '%{http_code}' --unix-socket "$S" -X "$m" "$@" "http://glovebox$p")
    record "$m" "${p%%\?*}"
}
# field EXPR: a Python expression over the reply's JSON j; a tuple prints as one
field() { python3 -c "import json; j = json.load(open('$T/body')); v = ($1,); print(v[0] if len(v) == 1 else v)"; }
header() { tr -d '\r' < "$T/headers" | awk -v h="$1" 'tolower($1) == tolower(h) ":" { $1 = ""; sub(/^ /, ""); print }'; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
F=/v1/sandboxes/fs/files
# sh CMD: run a shell command in sandbox fs, its stdout on ours
sh_in() {
    curl -s --max-time 60 --unix-socket "$S" -X POST --data-binary "$(python3 -c 'import json, sys; print(json.dumps({"shell": sys.argv[1]}))' "$1")" "http://glovebox/v1/sandboxes/${2:-fs}/exec" | python3 -c "
import base64, json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e['type'] == 'stdout':
        sys.stdout.buffer.write(base64.b64decode(e['data']))"
}

ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=4" start_daemon --max-upload "$MAX"
req POST /v1/sandboxes -d '{"id":"fs"}'
req POST /v1/sandboxes -d '{"id":"fh"}'

# ---- a binary round trip: every byte value, 4 MiB ----
python3 -c "import sys; sys.stdout.buffer.write(bytes(range(256)) * 16384)" > "$T/bin"
req PUT "$F?path=/tmp/bin" --data-binary @"$T/bin"
[ "$code" = 201 ] && [ "$(field 'j["size"], j["type"], j["mode"], j["path"]')" = "(4194304, 'file', '0644', '/tmp/bin')" ]
check "upload is 201 with the new file's stat" [ $? = 0 ]
req GET "$F?path=/tmp/bin"
check "download is 200" [ "$code" = 200 ]
check "4 MiB of every byte value come back intact" [ "$(sha "$T/body")" = "$(sha "$T/bin")" ]
[ "$(header Content-Length)" = 4194304 ] && [ "$(header Content-Type)" = application/octet-stream ]
check "with Content-Length and application/octet-stream" [ $? = 0 ]
req PUT "$F?path=/tmp/bin&mode=0600" --data-binary @"$T/bin"
[ "$code" = 200 ] && [ "$(field 'j["mode"]')" = 0600 ]
check "replacing a file is 200, with the mode asked for" [ $? = 0 ]
check "the sandbox sees the same bytes" [ "$(sh_in 'sha256sum /tmp/bin' | cut -d' ' -f1)" = "$(sha "$T/bin")" ]
req PUT "$F?path=/tmp/empty" --data-binary ''
req GET "$F?path=/tmp/empty"
[ "$code" = 200 ] && [ ! -s "$T/body" ] && [ "$(header Content-Length)" = 0 ]
check "an empty file round-trips" [ $? = 0 ]

# ---- ranges ----
req GET "$F?path=/tmp/bin" -H 'Range: bytes=1000-1099'
[ "$code" = 206 ] && [ "$(sha "$T/body")" = "$(head -c 1100 "$T/bin" | tail -c 100 | sha256sum | cut -d' ' -f1)" ]
check "a range is 206 with its bytes" [ $? = 0 ]
[ "$(header Content-Range)" = "bytes 1000-1099/4194304" ] && [ "$(header Content-Length)" = 100 ]
check "and Content-Range, Content-Length" [ $? = 0 ]
req GET "$F?path=/tmp/bin" -H 'Range: bytes=-10'
[ "$code" = 206 ] && [ "$(sha "$T/body")" = "$(tail -c 10 "$T/bin" | sha256sum | cut -d' ' -f1)" ] && [ "$(header Content-Range)" = "bytes 4194294-4194303/4194304" ]
check "a suffix range is the last bytes" [ $? = 0 ]
req GET "$F?path=/tmp/bin" -H 'Range: bytes=4194300-'
[ "$code" = 206 ] && [ "$(wc -c < "$T/body")" = 4 ]
check "an open range runs to the end" [ $? = 0 ]
req GET "$F?path=/tmp/bin" -H 'Range: bytes=4194304-'
[ "$code" = 416 ] && [ "$(header Content-Range)" = "bytes */4194304" ]
check "a range past the end is 416 with the size" [ $? = 0 ]
req GET "$F?path=/tmp/bin" -H 'Range: bytes=0-1,5-6'
[ "$code" = 200 ] && [ "$(wc -c < "$T/body")" = 4194304 ]
check "several ranges: the whole file, 200" [ $? = 0 ]
req GET "$F?path=/tmp/bin" -H 'Range: bytes=9-2'
[ "$code" = 200 ] && [ "$(wc -c < "$T/body")" = 4194304 ]
check "a malformed range is ignored" [ $? = 0 ]

# ---- stat, list, mkdir, move, remove ----
req GET "$F/stat?path=/tmp"
[ "$code" = 200 ] && [ "$(field 'j["type"], j["name"], j["mode"]')" = "('dir', 'tmp', '1777')" ]
check "stat of a directory" [ $? = 0 ]
sh_in 'ln -s /tmp/bin /tmp/link' > /dev/null
req GET "$F/stat?path=/tmp/link&follow=0"
check "stat follow=0 of a symlink says where it points" [ "$(field 'j["type"], j["link"]')" = "('symlink', '/tmp/bin')" ]
req GET "$F/stat?path=/tmp/link"
check "stat follows it by default" [ "$(field 'j["type"], j["size"]')" = "('file', 4194304)" ]
req POST "$F/mkdir" -d '{"path":"/tmp/a/b/c","parents":true,"mode":"0750"}'
[ "$code" = 201 ] && [ "$(field 'j["type"], j["mode"]')" = "('dir', '0750')" ]
check "mkdir with parents is 201" [ $? = 0 ]
req POST "$F/mkdir" -d '{"path":"/tmp/a/b/c","parents":true}'
check "again with parents: 200, nothing to do" [ "$code" = 200 ]
req POST "$F/mkdir" -d '{"path":"/tmp/a/b"}'
[ "$code" = 409 ] && [ "$(field 'j["error"]["kind"]')" = conflict ]
check "mkdir of an existing directory is 409" [ $? = 0 ]
req POST "$F/mkdir" -d '{"path":"/tmp/x/y"}'
check "mkdir without its parent is 404" [ "$code" = 404 ]
req PUT "$F?path=/tmp/a/b/f.txt" --data-binary 'some text'
req GET "$F/list?path=/tmp/a"
[ "$code" = 200 ] && [ "$(field '[(e["name"], e["path"], e["type"]) for e in j["entries"]]')" = "[('b', '/tmp/a/b', 'dir')]" ]
check "list gives the children" [ $? = 0 ]
req GET "$F/list?path=/tmp/a&depth=3"
check "list depth=3 gives the tree, names relative" [ "$(field '[e["name"] for e in j["entries"]]')" = "['b', 'b/c', 'b/f.txt']" ]
req GET "$F/list?path=/tmp/a&depth=11"
check "depth above 10 is 400" [ "$code" = 400 ]
req POST "$F/move" -d '{"from":"/tmp/a/b/f.txt","to":"/tmp/a/g.txt"}'
[ "$code" = 200 ] && [ "$(field 'j["path"], j["size"]')" = "('/tmp/a/g.txt', 9)" ]
check "move is 200 with the new stat" [ $? = 0 ]
req PUT "$F?path=/tmp/a/h.txt" --data-binary 'other'
req POST "$F/move" -d '{"from":"/tmp/a/h.txt","to":"/tmp/a/g.txt"}'
check "move onto an existing file is 409" [ "$code" = 409 ]
req POST "$F/move" -d '{"from":"/tmp/a/h.txt","to":"/tmp/a/g.txt","overwrite":true}'
[ "$code" = 200 ] && [ "$(field 'j["size"]')" = 5 ]
check "unless overwrite is true" [ $? = 0 ]
req POST "$F/move" -d '{"from":"/tmp/nope","to":"/tmp/a/z"}'
check "moving a missing file is 404" [ "$code" = 404 ]
# mkdir and move take their fields in the query too, as every other files route does
req POST "$F/mkdir?path=/tmp/a/q1/q2&parents=1&mode=0700"
[ "$code" = 201 ] && [ "$(field 'j["path"], j["mode"]')" = "('/tmp/a/q1/q2', '0700')" ]
check "mkdir with its fields in the query" [ $? = 0 ]
req POST "$F/move?from=/tmp/a/q1/q2&to=/tmp/a/q3"
[ "$code" = 200 ] && [ "$(field 'j["path"], j["type"]')" = "('/tmp/a/q3', 'dir')" ]
check "move with its fields in the query" [ $? = 0 ]
req POST "$F/move?from=/tmp/a/g.txt&overwrite=true" -d '{"to":"/tmp/a/q1/g.txt"}'
check "query and body together" eval "[ '$code' = 200 ] && [ \"\$(field 'j[\"path\"]')\" = /tmp/a/q1/g.txt ]"
req POST "$F/mkdir?path=/tmp/a/dup" -d '{"path":"/tmp/a/dup"}'
check "a field in both is 400" eval "[ '$code' = 400 ] && grep -q 'given twice' '$T/body'"
req POST "$F/mkdir?path=/tmp/a/p&parents=maybe"
check "a query flag that is not a boolean is 400" eval "[ '$code' = 400 ] && grep -q \"'parents' must be\" '$T/body'"
req POST "$F/move?from=/tmp/a/q3&dest=/tmp/x"
check "an unknown query parameter is 400" [ "$code" = 400 ]
req GET "$F/stat?path=/tmp/a/dup"
check "and nothing was made by the refused ones" [ "$code" = 404 ]
req DELETE "$F?path=/tmp/a"
check "removing a non-empty directory is 409" [ "$code" = 409 ]
req DELETE "$F?path=/tmp/a&recursive=1"
check "recursive=1 removes the tree (204)" [ "$code" = 204 ]
req GET "$F/stat?path=/tmp/a"
check "and it is gone" [ "$code" = 404 ]

# ---- errors ----
req GET "$F?path=/tmp/no-such-file"
[ "$code" = 404 ] && [ "$(field 'j["error"]["kind"]')" = not_found ]
check "downloading a missing file is 404" [ $? = 0 ]
req GET "$F?path=/tmp"
[ "$code" = 400 ] && grep -q "is a directory" "$T/body"
check "downloading a directory is 400, saying so" [ $? = 0 ]
req GET "$F/stat?path=tmp/x"
[ "$code" = 400 ] && grep -q "absolute path" "$T/body"
check "a relative path is 400" [ $? = 0 ]
req GET "$F/stat"
check "no path is 400" [ "$code" = 400 ]
req GET "$F/stat?path=/tmp&colour=blue"
[ "$code" = 400 ] && grep -q "'colour' is unknown" "$T/body"
check "an unknown query parameter is 400 naming it" [ $? = 0 ]
req GET "$F/stat?path=/tmp&path=/etc"
check "a repeated parameter is 400" [ "$code" = 400 ]
req GET "$F/stat?path=/etc%00/passwd"
check "a NUL byte in a path is 400" [ "$code" = 400 ]
req POST "$F/mkdir" -d '{"path":"/tmp/q","recursive":true}'
[ "$code" = 400 ] && grep -q "unknown field 'recursive'" "$T/body"
check "an unknown JSON field is 400 naming it" [ $? = 0 ]
req POST "$F/mkdir" -d '{"path":"/tmp/q","mode":"999"}'
check "a bad mode is 400" [ "$code" = 400 ]
req GET "$F/nothing?path=/"
check "an unknown files route is 404" [ "$code" = 404 ]
req PUT "$F/stat?path=/tmp"
check "a wrong method is 405" [ "$code" = 405 ]
req GET "/v1/sandboxes/nope/files/stat?path=/"
check "an unknown sandbox is 404" [ "$code" = 404 ]
req DELETE "$F?path=/"
check "removing / is refused" [ "$code" = 409 ]

# ---- hostile paths stay inside the sandbox ----
host_passwd=$(sha /etc/passwd)
req PUT "/v1/sandboxes/fh/files?path=/../../../etc/passwd" --data-binary 'evil:x:0:0::/:/bin/sh'
check "writing /../../../etc/passwd succeeds inside the sandbox" [ "$code" = 200 ]
check "the host's /etc/passwd is untouched" [ "$(sha /etc/passwd)" = "$host_passwd" ]
req GET "/v1/sandboxes/fh/files?path=/etc/passwd"
check "the sandbox's own copy changed" [ "$(cat "$T/body")" = 'evil:x:0:0::/:/bin/sh' ]
echo "host secret" > "$T/secret"
sh_in 'ln -s / /tmp/up; ln -s ../../../../.. /tmp/rel' fh > /dev/null
req GET "/v1/sandboxes/fh/files?path=/tmp/up$T/secret"
check "a symlink to / does not reach the host's files" [ "$code" = 404 ]
req GET "/v1/sandboxes/fh/files?path=/tmp/rel/..$T/secret"
check "nor does a relative symlink climbing out" [ "$code" = 404 ]
req GET "/v1/sandboxes/fh/files?path=/tmp/up/../../..$T/secret"
check "nor .. after a symlink" [ "$code" = 404 ]
req PUT "/v1/sandboxes/fh/files?path=/tmp/up/..$T/planted&parents=1" --data-binary 'x'
[ "$code" = 201 ] && [ ! -e "$T/planted" ] && [ "$(sh_in "cat $T/planted" fh)" = x ]
check "a write through the symlink lands inside" [ $? = 0 ]
req POST "/v1/sandboxes/fh/files/move" -d "{\"from\":\"/tmp/up$T/planted\",\"to\":\"/../../../tmp/moved\"}"
[ "$code" = 200 ] && [ ! -e /tmp/moved ]
check "moves stay inside too" [ $? = 0 ]

# ---- users and permissions ----
req PUT "$F?path=/tmp/owned&user=user" --data-binary 'mine'
[ "$code" = 201 ] && [ "$(field 'j["owner"], j["uid"]')" = "('user', $(sh_in 'id -u user'))" ]
check "a file written as user belongs to it" [ $? = 0 ]
req POST "$F/mkdir" -d '{"path":"/root-only","mode":"0700"}'
req PUT "$F?path=/root-only/x&user=user" --data-binary 'no'
[ "$code" = 403 ] && [ "$(field 'j["error"]["kind"]')" = permission ]
check "a root-only directory is 403 for user" [ $? = 0 ]
req GET "$F/list?path=/root-only&user=user"
check "and cannot be listed by it" [ "$code" = 403 ]
req GET "$F?path=/tmp/owned&user=nosuchuser"
check "an unknown user is an error, not root" [ "$code" != 200 ]

# ---- multipart uploads ----
printf 'first file\n' > "$T/m1"
head -c 100000 /dev/urandom > "$T/m2"
req POST "$F?path=/tmp/up2&parents=1" -F "a=@$T/m1;filename=one.txt" -F "b=@$T/m2;filename=two.bin"
[ "$code" = 201 ] && [ "$(field '[(f["path"], f["size"]) for f in j["files"]]')" = "[('/tmp/up2/one.txt', 11), ('/tmp/up2/two.bin', 100000)]" ]
check "a multipart upload of two files is 201 listing them" [ $? = 0 ]
req GET "$F?path=/tmp/up2/two.bin"
check "the uploaded parts are intact" [ "$(sha "$T/body")" = "$(sha "$T/m2")" ]
req POST "$F?path=/tmp/up2" -F "a=@$T/m1;filename=../escape"
[ "$code" = 400 ] && grep -q "not a plain name" "$T/body"
check "a part named ../escape is 400" [ $? = 0 ]
req POST "$F?path=/tmp/up2" -F "a=value"
check "a part that is not a file is 400" [ "$code" = 400 ]
req POST "$F?path=/tmp/up2" --data-binary 'raw' -H 'Content-Type: text/plain'
check "POST without multipart is 400" [ "$code" = 400 ]

# ---- the upload limit ----
head -c 9000000 /dev/zero > "$T/big"
req PUT "$F?path=/tmp/toobig" --data-binary @"$T/big"
check "an upload over the limit is 413" [ "$code" = 413 ]
req GET /healthz
check "and the daemon still serves" [ "$code" = 200 ]
req GET "$F/stat?path=/tmp/toobig"
check "nothing was written" [ "$code" = 404 ]

# ---- clients that leave, slow readers ----
want=$(sh_in 'head -c 24000000 /dev/urandom > /tmp/large; sha256sum /tmp/large' | cut -d' ' -f1)
curl -s --max-time 0.5 --limit-rate 1M --unix-socket "$S" "http://glovebox$F?path=/tmp/large" -o /dev/null
check "a client that times out mid-download" [ $? = 28 ]
curl -s --unix-socket "$S" "http://glovebox$F?path=/tmp/large" | head -c 1000 > /dev/null
req GET /healthz
check "then the daemon still serves" [ "$code" = 200 ]
rss() { awk '/VmRSS/ {print $2}' /proc/$DPID/status; }
before=$(rss)
curl -s --max-time 60 --limit-rate 8M --unix-socket "$S" "http://glovebox$F?path=/tmp/large" -o "$T/large" &
CPID=$!
peak=0
while kill -0 $CPID 2>/dev/null; do r=$(rss); [ "$r" -gt "$peak" ] && peak=$r; sleep 0.2; done
wait $CPID
check "a slow reader gets every byte" [ "$(sha "$T/large")" = "$want" ]
grow=$((peak - before))
echo "# daemon RSS before ${before} KiB, peak ${peak} KiB while a slow reader downloaded 24 MB"
check "daemon memory stays bounded under a slow reader (grew ${grow} KiB)" [ "$grow" -lt 12000 ]

# ---- watch ----
# wait_for FILE PATTERN: until a line matches (the stream is live), at most 10 s
wait_for() { i=0; while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; grep -q "$2" "$1"; }
fds() { ls /proc/$DPID/fd | wc -l; }
fds_before=$(fds)
curl -s -N --max-time 30 --unix-socket "$S" "http://glovebox$F/watch?path=/tmp" > "$T/w1" &
W1=$!
curl -s -N --max-time 30 -H 'Accept: text/event-stream' --unix-socket "$S" "http://glovebox$F/watch?path=/tmp" > "$T/w2" &
W2=$!
wait_for "$T/w1" '"type":"start"' && wait_for "$T/w2" '^event: start'
check "watch streams start" [ $? = 0 ]
req PUT "$F?path=/tmp/watched.txt" --data-binary 'x'
req DELETE "$F?path=/tmp/watched.txt"
check "NDJSON: the creation arrives" wait_for "$T/w1" '{"type":"create","name":"watched.txt"}'
check "NDJSON: the removal arrives" wait_for "$T/w1" '{"type":"remove","name":"watched.txt"}'
wait_for "$T/w2" '^data: {"type":"remove","name":"watched.txt"}' && grep -q '^event: create$' "$T/w2"
check "SSE: event and data lines" [ $? = 0 ]
python3 -c "
import json
for line in open('$T/w1'):
    json.loads(line)" 2>/dev/null
check "every NDJSON line is JSON" [ $? = 0 ]
cp "$T/w1" "$T/body"; code=200; record GET "$F/watch"
kill $W1 $W2; wait $W1 $W2 2>/dev/null
i=0; while [ "$(fds)" -gt "$fds_before" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
check "watchers that leave release their connections" [ "$(fds)" -le "$fds_before" ]
req GET "$F/watch?path=/tmp/bin"
check "watching a file (not a directory) is an error" [ "$code" = 400 ]
curl -s -N --max-time 30 --unix-socket "$S" "http://glovebox/v1/sandboxes/fh/files/watch?path=/" > "$T/w3" &
W3=$!
wait_for "$T/w3" '"type":"start"'
req DELETE /v1/sandboxes/fh
wait $W3
[ $? = 0 ] && tail -n 1 "$T/w3" | grep -q '"type":"error"'
check "a watch ends when its sandbox goes away" [ $? = 0 ]

# ---- glovebox cp ----
head -c 3000000 /dev/urandom > "$T/c1"
"$GB" cp "$T/c1" fs:/tmp/c1
[ $? = 0 ] && [ "$(sh_in 'sha256sum /tmp/c1' | cut -d' ' -f1)" = "$(sha "$T/c1")" ]
check "cp uploads" [ $? = 0 ]
"$GB" cp fs:/tmp/c1 "$T/c1.back"
[ $? = 0 ] && [ "$(sha "$T/c1.back")" = "$(sha "$T/c1")" ]
check "cp downloads" [ $? = 0 ]
mkdir "$T/dir"
"$GB" cp fs:/tmp/c1 "$T/dir" && "$GB" cp "$T/c1" fs:/tmp/a-dir/ --parents
[ "$(sha "$T/dir/c1")" = "$(sha "$T/c1")" ] && [ "$(sh_in 'cat /tmp/a-dir/c1 | sha256sum' | cut -d' ' -f1)" = "$(sha "$T/c1")" ]
check "cp into directories keeps the name" [ $? = 0 ]
[ "$(echo piped | "$GB" cp - fs:/tmp/piped && "$GB" cp fs:/tmp/piped -)" = piped ]
check "cp - uploads stdin and downloads to stdout" [ $? = 0 ]
"$GB" cp "$T/c1" fs:/tmp/c1-user --user user --mode 0600
req GET "$F/stat?path=/tmp/c1-user"
check "cp --user --mode" [ "$(field 'j["owner"], j["mode"]')" = "('user', '0600')" ]
"$GB" cp fs:/tmp/nope "$T/nope" 2> "$T/err"
[ $? = 3 ] && grep -q "No such file" "$T/err" && [ ! -e "$T/nope" ]
check "a missing remote file exits 3 with the reason" [ $? = 0 ]
"$GB" cp "$T/c1" nosuch:/tmp/x 2> "$T/err"
[ $? = 3 ] && grep -q "glovebox ls" "$T/err"
check "an unknown sandbox exits 3 with a hint" [ $? = 0 ]
"$GB" cp "$T/c1" "$T/c2" 2> /dev/null
check "two local paths is a usage error (2)" [ $? = 2 ]
"$GB" cp "$T/big" fs:/tmp/big 2> "$T/err"
[ $? = 1 ] && grep -q "larger than the daemon accepts" "$T/err"
check "too large an upload exits 1 saying so" [ $? = 0 ]

# names that are not UTF-8 come from the sandbox: the daemon shows them mangled, never fails
sh_in 'mkdir -p /tmp/odd && touch "/tmp/odd/$(printf "a\377b")" && ln -sf "$(printf "\376")" /tmp/odd/l' > /dev/null
req GET "$F/list?path=/tmp/odd"
check "a directory with names that are not UTF-8 lists" [ "$code" = 200 ]
check "with the bytes shown as U+FFFD" [ "$(field 'sorted(e["name"] for e in j["entries"]) == ["a\ufffdb", "l"] and j["entries"][1]["link"] == "\ufffd"')" = True ]
req GET /healthz
check "and the daemon stays up" [ "$code" = 200 ]
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
check "the daemon stops cleanly (no leaks under ASan)" [ $rc -eq 0 ]

# ---- every change is in the audit log ----
check "file.write records path and bytes" [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'file.write' and detail like '%\\\"path\\\":\\\"/tmp/bin\\\"%' and detail like '%\\\"bytes\\\":4194304%'\").fetchone()[0])")" = 2 ]
check "file.write records the user" [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'file.write' and detail like '%/tmp/owned%' and detail like '%\\\"user\\\":\\\"user\\\"%'\").fetchone()[0])")" = 1 ]
check "multipart writes each file" [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'file.write' and detail like '%/tmp/up2/%'\").fetchone()[0])")" = 2 ]
for k in mkdir move remove; do
    check "file.$k is recorded" [ "$(q "print(c.execute(\"select count(*) from audit where kind = 'file.$k'\").fetchone()[0])")" -ge 1 ]
done
check "failed changes are not recorded" [ "$(q "print(c.execute(\"select count(*) from audit where detail like '%/root-only/x%' or detail like '%toobig%'\").fetchone()[0])")" = 0 ]
spec_check
summary
