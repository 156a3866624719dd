#!/bin/sh
# Artifacts: a file or a directory published out of a sandbox into the content-addressed
# store (sha256 as `sha256sum` says, one blob for equal content, a tar for a directory with
# symlinks kept as symlinks), symlinks that point out of the sandbox never followed to the
# host, artifacts that outlive `glovebox kill` and a daemon restart, list filters and pages,
# download (Range, ETag), delete (the blob goes with its last row), an API key's view, and the
# errors (missing path, size limit, bad input).
NAME=artifacts
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
U="http://127.0.0.1:$PORT"
start_daemon --listen "127.0.0.1:$PORT"
A="$STATE/artifacts"
blobs() { ls "$A" 2>/dev/null | grep -c '^[0-9a-f]\{64\}$'; }
pub() { req POST "/v1/sandboxes/$SB/artifacts" "$1"; }

# a file only the host has, with a marker no sandbox file holds
MARK="host-only-$(od -An -tx8 -N8 /dev/urandom | tr -d ' ')"
echo "$MARK" > "$T/hostsecret"
chmod 644 "$T/hostsecret"
SB=$("$GB" create --timeout 10m)
check "a sandbox" [ -n "$SB" ]
"$GB" exec "$SB" -- sh -c '
    set -e
    printf "report line 1\nreport line 2\n" > /tmp/out.txt
    cp /tmp/out.txt /tmp/same.txt
    head -c 300000 /dev/urandom > /tmp/big.bin
    mkdir -p /tmp/d/sub /tmp/d/empty
    echo alpha > /tmp/d/a.txt
    echo beta > /tmp/d/sub/b.txt
    ln -s a.txt /tmp/d/link
    ln -s /etc/shadow /tmp/d/abs
    ln -s ../../../../../../../etc/shadow /tmp/d/rel
    mkfifo /tmp/d/fifo
    ln -s /etc/shadow /tmp/evil
    ln -s ../../../../../../../../etc/shadow /tmp/evil2
    ln -s / /tmp/rootlink
    ln -s "$1" /tmp/evil3
    ln -s "../../../../../../..$1" /tmp/evil4
    ln -s "$1" /tmp/d/host
    mkdir -p /tmp/priv/inner
    echo private > /tmp/priv/inner/secret.txt
    chown -R 1000:1000 /tmp/priv
    chmod 700 /tmp/priv/inner
    chmod 600 /tmp/priv/inner/secret.txt
    cp /tmp/out.txt /tmp/mine.txt
    chown 1000:1000 /tmp/mine.txt
    chmod 600 /tmp/mine.txt' sh "$T/hostsecret"
"$GB" exec "$SB" -- cat /tmp/out.txt > "$T/out.txt"
"$GB" exec "$SB" -- cat /tmp/big.bin > "$T/big.bin"

# ---- a file ----------------------------------------------------------------------------------
pub '{"path":"/tmp/out.txt","name":"report","metadata":{"step":"1"}}'
check "publish a file: 201" [ "$code" = 201 ]
ID1=$(field "j['id']")
SHA1=$(field "j['sha256']")
check "its sha256 is sha256sum's" [ "$SHA1" = "$(sha256sum "$T/out.txt" | cut -d' ' -f1)" ]
check "name, kind, size, sandbox, metadata" eval \
    "[ \"\$(field \"(j['name'], j['kind'], j['size'], j['sandbox'], j['metadata'])\")\" = \"('report', 'file', 28, '$SB', {'step': '1'})\" ]"
check "the blob is stored under its sha256" cmp -s "$A/$SHA1" "$T/out.txt"
pub '{"path":"/tmp/same.txt"}'
ID2=$(field "j['id']")
check "the same content again: same sha256, another id" eval \
    "[ '$code' = 201 ] && [ \"\$(field \"j['sha256']\")\" = '$SHA1' ] && [ '$ID2' != '$ID1' ]"
check "the name defaults to the file's" [ "$(field "j['name']")" = same.txt ]
check "one blob on disk for both" [ "$(blobs)" = 1 ]
pub '{"path":"/tmp/big.bin","name":"big"}'
IDBIG=$(field "j['id']")
check "a 300 kB binary file" eval "[ '$code' = 201 ] && [ \"\$(field \"j['sha256']\")\" = \"\$(sha256sum '$T/big.bin' | cut -d' ' -f1)\" ]"

pub '{"path":"/tmp/mine.txt"}'
check "a 0600 file of the sandbox's user" eval "[ '$code' = 201 ] && [ \"\$(field \"j['sha256']\")\" = '$SHA1' ]"
pub '{"path":"/tmp/priv","name":"priv"}'
check "a directory with a 0700 subdirectory of the sandbox's user" eval "[ '$code' = 201 ]"
tar xOf "$A/$(field "j['sha256']")" inner/secret.txt > "$T/priv.txt"
check "holds its 0600 file" [ "$(cat "$T/priv.txt")" = private ]
req DELETE "/v1/artifacts/$(field "j['id']")"
req DELETE "/v1/artifacts/$(q "print(c.execute(\"select id from artifacts where name = 'mine.txt'\").fetchone()[0])")"

# ---- errors ---------------------------------------------------------------------------------
pub '{"path":"/tmp/nope.txt"}'
check "a missing path: 404 that says so" eval "[ '$code' = 404 ] && grep -q 'no such file' '$T/body'"
pub '{"path":"tmp/out.txt"}'
check "a relative path: 400" [ "$code" = 400 ]
pub '{"path":"/tmp/out.txt","colour":"red"}'
check "an unknown field: 400" [ "$code" = 400 ]
pub '{"path":"/tmp/out.txt","metadata":[1]}'
check "metadata that is not an object: 400" [ "$code" = 400 ]
pub '{"path":"/tmp/d/fifo"}'
check "a fifo: 400" [ "$code" = 400 ]
n_before=$(q "print(c.execute('select count(*) from artifacts').fetchone()[0])")
pub '{"path":"/tmp/big.bin","max_bytes":1000}'
check "over max_bytes: 413" [ "$code" = 413 ]
pub '{"path":"/tmp/d","max_bytes":1000,"name":"d-small"}'
check "a directory over max_bytes: 413" [ "$code" = 413 ]
check "and nothing is stored" eval "[ \"\$(q \"print(c.execute('select count(*) from artifacts').fetchone()[0])\")\" = '$n_before' ] && [ -z \"\$(ls '$A/tmp')\" ]"
pub '{"path":"/tmp/out.txt","session":"ses-000000000000"}'
check "an unknown session: 404" [ "$code" = 404 ]
req POST "/v1/sandboxes/no-such-sandbox/artifacts" '{"path":"/tmp/out.txt"}'
check "an unknown sandbox: 404" [ "$code" = 404 ]
req GET "/v1/sandboxes/$SB/artifacts"
check "GET on the publish route: 405" [ "$code" = 405 ]

# ---- symlinks never lead out of the sandbox ------------------------------------------------
host_sha=$(sha256sum /etc/shadow | cut -d' ' -f1)
for sp in /tmp/evil /tmp/evil2 /tmp/rootlink/etc/shadow /tmp/d/abs /tmp/../../../etc/shadow \
    /tmp/evil3 /tmp/evil4 "/tmp/rootlink$T/hostsecret" /tmp/d/host; do
    pub "{\"path\":\"$sp\"}"
    if [ "$code" = 201 ]; then
        s=$(field "j['sha256']")
        check "$sp: the sandbox's own file, not the host's" eval \
            "[ '$s' != '$host_sha' ] && ! grep -qF '$MARK' '$A/$s'"
        req DELETE "/v1/artifacts/$(field "j['id']")"
    else
        check "$sp: refused with a 4xx ($code)" [ "${code%??}" = 4 ]
    fi
done
pub "{\"path\":\"$T/hostsecret\"}"
check "the host file's own path is not found in the sandbox" [ "$code" = 404 ]

# ---- what the sandbox's root cannot read, a publish cannot either (issue 14 #9) -------------
# The copier once ran with euid 0, which owns the sandbox's user namespace and so passed the
# ptrace check that refuses /proc/1/maps to the sandbox's root.
inside=$("$GB" exec "$SB" -- sh -c 'cat /proc/1/maps >/dev/null 2>&1 && echo read; cat /proc/1/environ >/dev/null 2>&1 && echo read; echo end' 2>&1)
check "inside, the sandbox's root cannot read init's maps or environ" [ "$inside" = end ]
for f in maps environ; do
    pub "{\"path\":\"/proc/1/$f\"}"
    check "publish /proc/1/$f: 403, read as the sandbox's root" eval "[ '$code' = 403 ] && grep -q \"sandbox's root\" '$T/body'"
done
pub '{"path":"/proc/1/status"}'
check "what it can read, a publish can: /proc/1/status" [ "$code" = 201 ]
req DELETE "/v1/artifacts/$(field "j['id']")"
pub '{"path":"/tmp/out.txt","name":"after"}'
check "and the worker that refused reads as before" eval "[ '$code' = 201 ] && [ \"\$(field \"j['sha256']\")\" = '$SHA1' ]"
req DELETE "/v1/artifacts/$(field "j['id']")"

# ---- a directory ---------------------------------------------------------------------------
pub '{"path":"/tmp/d","name":"tree"}'
check "publish a directory: 201, kind dir" eval "[ '$code' = 201 ] && [ \"\$(field \"j['kind']\")\" = dir ] && [ \"\$(field \"j['content_type']\")\" = application/x-tar ]"
IDD=$(field "j['id']")
SHAD=$(field "j['sha256']")
tar tf "$A/$SHAD" > "$T/list"
check "the tar lists the entries, sorted, the fifo left out" \
    [ "$(tr '\n' ' ' < "$T/list")" = "a.txt abs empty/ host link rel sub/ sub/b.txt " ]
tar tvf "$A/$SHAD" --numeric-owner > "$T/listv"
check "symlinks are stored as symlinks" eval \
    "grep -q 'link -> a.txt' '$T/listv' && grep -q 'abs -> /etc/shadow' '$T/listv' && grep -q 'rel -> ../../' '$T/listv' && grep -qF 'host -> $T/hostsecret' '$T/listv'"
mkdir "$T/x"
tar xf "$A/$SHAD" -C "$T/x"
check "file contents survive" eval "[ \"\$(cat '$T/x/sub/b.txt')\" = beta ] && [ \"\$(cat '$T/x/a.txt')\" = alpha ]"
check "the host file is not in the tar" sh -c "! grep -qF '$MARK' '$A/$SHAD'"
check "owners are uids inside the sandbox" sh -c \
    "awk '{split(\$2, o, \"/\"); if (o[1] + 0 >= 65536) exit 1}' '$T/listv'"

# ---- list, get, download ---------------------------------------------------------------------
"$GB" artifact publish "$SB" /tmp/out.txt --name cli --meta who=cli --meta n=2 > "$T/cli.out"
check "glovebox artifact publish prints id, sha256 and size" grep -q "^art-[0-9a-f]* $SHA1 28\$" "$T/cli.out"
IDC=$(cut -d' ' -f1 "$T/cli.out")
req GET "/v1/artifacts/$IDC"
check "get: metadata from --meta" [ "$(field "j['metadata']")" = "{'n': '2', 'who': 'cli'}" ]
req GET "/v1/artifacts?name=report"
check "list by name" [ "$(field "[a['id'] for a in j['artifacts']]")" = "['$ID1']" ]
req GET "/v1/artifacts?sandbox=$SB&limit=2"
check "list by sandbox, paged" eval "[ \"\$(field \"[a['id'] for a in j['artifacts']]\")\" = \"['$ID1', '$ID2']\" ] && [ \"\$(field \"j['next_after']\")\" = '$ID2' ]"
req GET "/v1/artifacts?sandbox=$SB&limit=2&after=$ID2"
check "the next page" [ "$(field "[a['id'] for a in j['artifacts']]")" = "['$IDBIG', '$IDD']" ]
req GET "/v1/artifacts?limit=0"
check "a bad limit: 400" [ "$code" = 400 ]
req GET "/v1/artifacts?after=art-nothing"
check "a bad cursor: 400" [ "$code" = 400 ]
check "glovebox artifact ls --sandbox lists 5" \
    [ "$("$GB" artifact ls --sandbox "$SB" --json | python3 -c "import json, sys; print(len(json.load(sys.stdin)))")" = 5 ]
check "glovebox artifact ls shows the table" sh -c "'$GB' artifact ls | grep '^$IDD' | grep -q 'dir.*tree'"
"$GB" artifact get "$IDBIG" -o "$T/got.bin"
check "artifact get -o equals the original" cmp -s "$T/got.bin" "$T/big.bin"
check "artifact get to stdout" sh -c "'$GB' artifact get '$ID1' | cmp -s - '$T/out.txt'"
# by the name publish gave: of several with one name, the newest; an id keeps working
check "artifact get NAME downloads it" sh -c "'$GB' artifact get report | cmp -s - '$T/out.txt'"
pub '{"path":"/tmp/out.txt","name":"twice"}'
TW1=$(field "j['id']")
pub '{"path":"/tmp/big.bin","name":"twice"}'
TW2=$(field "j['id']")
req GET "/v1/artifacts?name=twice&order=desc&limit=1"
check "list by name, newest first" [ "$(field "[a['id'] for a in j['artifacts']]")" = "['$TW2']" ]
req GET "/v1/artifacts?name=twice&order=desc&limit=1&after=$TW2"
check "and its next page goes older" [ "$(field "[a['id'] for a in j['artifacts']]")" = "['$TW1']" ]
req GET "/v1/artifacts?name=twice&order=asc"
check "order=asc is oldest first, as without it" [ "$(field "[a['id'] for a in j['artifacts']]")" = "['$TW1', '$TW2']" ]
req GET "/v1/artifacts?order=sideways"
check "a bad order: 400" eval "[ '$code' = 400 ] && grep -q 'asc or desc' '$T/body'"
"$GB" artifact get twice -o "$T/twice"
check "artifact get NAME shared by two: the newest" cmp -s "$T/twice" "$T/big.bin"
check "artifact get of the older one's id still gets it" sh -c "'$GB' artifact get '$TW1' | cmp -s - '$T/out.txt'"
"$GB" artifact get no-such-name > "$T/none" 2> "$T/err"
rc=$?
check "a name nothing has: not found (exit 3), nothing written" eval "[ $rc = 3 ] && [ ! -s '$T/none' ] && grep -q \"artifact 'no-such-name' not found\" '$T/err'"
"$GB" artifact get "a name/with spaces?&" > /dev/null 2> "$T/err"
check "any name is looked up as it is (not found: 3)" [ $? = 3 ]
req DELETE "/v1/artifacts/$TW1"
req DELETE "/v1/artifacts/$TW2"
curl -s -D "$T/hdr" -o "$T/dl" --unix-socket "$S" "http://glovebox/v1/artifacts/$IDD/content"
check "content: type, length, ETag" eval "grep -qi '^content-type: application/x-tar' '$T/hdr' && grep -qi \"^etag: \\\"$SHAD\\\"\" '$T/hdr' && grep -qi \"^content-length: \$(stat -c %s '$A/$SHAD')\" '$T/hdr' && cmp -s '$T/dl' '$A/$SHAD'"
curl -s -o "$T/part" -w '%{http_code}' -H 'Range: bytes=10-19' --unix-socket "$S" "http://glovebox/v1/artifacts/$IDBIG/content" > "$T/code"
check "a Range: 206 with those bytes" eval "[ \"\$(cat '$T/code')\" = 206 ] && [ \"\$(od -An -tx1 '$T/part')\" = \"\$(dd if='$T/big.bin' bs=1 skip=10 count=10 2>/dev/null | od -An -tx1)\" ]"
check "If-None-Match with the ETag: 304" [ "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: \"$SHA1\"" --unix-socket "$S" "http://glovebox/v1/artifacts/$ID1/content")" = 304 ]
req GET /v1/artifacts/art-0000000000000000
check "an unknown artifact: 404" [ "$code" = 404 ]

# ---- concurrency and clients that leave ---------------------------------------------------
"$GB" exec "$SB" -- sh -c 'head -c 30000000 /dev/zero > /tmp/zero.bin'
for i in 1 2 3 4 5; do
    curl -s --unix-socket "$S" -X POST --data-binary '{"path":"/tmp/big.bin","name":"par"}' \
        "http://glovebox/v1/sandboxes/$SB/artifacts" > "$T/conc$i" &
    pp="$pp $!"
done
wait $pp
check "5 concurrent publishes of one file: one sha256" [ "$(python3 -c "import sys, json; print(len({json.load(open(f))['sha256'] for f in sys.argv[1:]}))" "$T"/conc?)" = 1 ]
req GET "/v1/artifacts?name=par"
check "and 5 rows" [ "$(field "len(j['artifacts'])")" = 5 ]
for id in $(field "' '.join(a['id'] for a in j['artifacts'])"); do
    curl -s --unix-socket "$S" -X DELETE "http://glovebox/v1/artifacts/$id" &
    pp="$pp $!"
    curl -s --unix-socket "$S" -X POST --data-binary '{"path":"/tmp/big.bin","name":"par2"}' \
        "http://glovebox/v1/sandboxes/$SB/artifacts" > /dev/null &
    pp="$pp $!"
done
wait $pp
req GET "/v1/artifacts?name=par2"
check "publishes racing deletes of the same content keep the blob" eval \
    "[ \"\$(field \"len(j['artifacts'])\")\" = 5 ] && cmp -s '$A/$(field "j['artifacts'][0]['sha256']")' '$T/big.bin'"
curl -s -m 0.05 --unix-socket "$S" -X POST --data-binary '{"path":"/tmp/zero.bin","name":"left"}' \
    "http://glovebox/v1/sandboxes/$SB/artifacts" > /dev/null
for i in $(seq 100); do
    req GET "/v1/artifacts?name=left"
    [ "$(field "len(j['artifacts'])")" = 1 ] && break
    sleep 0.05
done
check "a client that leaves mid-publish: the artifact is still published" [ "$(field "len(j['artifacts'])")" = 1 ]
IDZ=$(field "j['artifacts'][0]['id']")
curl -s --limit-rate 100k --max-time 0.5 --unix-socket "$S" -o /dev/null "http://glovebox/v1/artifacts/$IDZ/content"
check "a client that leaves mid-download: the daemon serves on" eval \
    "req GET /v1/artifacts/$IDZ; [ \"\$code\" = 200 ]"

# ---- sessions --------------------------------------------------------------------------------
req POST /v1/sessions '{}'
SID=$(field "j['id']")
pub "{\"path\":\"/tmp/out.txt\",\"name\":\"for-session\",\"session\":\"$SID\"}"
IDS=$(field "j['id']")
check "publish into a session" eval "[ '$code' = 201 ] && [ \"\$(field \"j['session']\")\" = '$SID' ]"
req GET "/v1/artifacts?session=$SID"
check "list by session" [ "$(field "[a['id'] for a in j['artifacts']]")" = "['$IDS']" ]
"$GB" artifact ls --session "$SID" --json > "$T/ses.json"
check "glovebox artifact ls --session" [ "$(python3 -c "import json; print([a['id'] for a in json.load(open('$T/ses.json'))])")" = "['$IDS']" ]

# ---- API keys see only their own ---------------------------------------------------------------
KEY=$("$GB" apikey create team-a)
tcp() { code=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $KEY" -X "$1" "$U$2" ${3:+--data-binary "$3"}); }
tcp GET /v1/artifacts
check "an API key lists none of the admin's" [ "$(field "len(j['artifacts'])")" = 0 ]
tcp GET "/v1/artifacts/$ID1"
check "nor gets one (404)" [ "$code" = 404 ]
tcp GET "/v1/artifacts/$ID1/content"
check "nor downloads one (404)" [ "$code" = 404 ]
tcp DELETE "/v1/artifacts/$ID1"
check "nor deletes one (404)" [ "$code" = 404 ]
tcp POST "/v1/sandboxes/$SB/artifacts" '{"path":"/tmp/out.txt"}'
check "nor publishes from the admin's sandbox (404)" [ "$code" = 404 ]
tcp POST /v1/sandboxes '{}'
KSB=$(field "j['id']")
tcp POST "/v1/sandboxes/$KSB/artifacts" '{"path":"/etc/hostname","name":"mine"}'
check "a key publishes from its own sandbox" [ "$code" = 201 ]
KID=$(field "j['id']")
tcp GET /v1/artifacts
check "and sees that one only" [ "$(field "[a['id'] for a in j['artifacts']]")" = "['$KID']" ]
tcp GET "/v1/artifacts?name=report&order=desc&limit=1"
check "a key's lookup by name finds none of the admin's" eval "[ '$code' = 200 ] && [ \"\$(field \"len(j['artifacts'])\")\" = 0 ]"
tcp GET "/v1/artifacts?name=mine&order=desc&limit=1"
check "and finds its own" [ "$(field "[a['id'] for a in j['artifacts']]")" = "['$KID']" ]
req GET "/v1/artifacts/$KID"
check "the admin sees the key's artifact" [ "$code" = 200 ]

# ---- artifacts outlive the sandbox and the daemon ------------------------------------------
"$GB" kill "$SB" > /dev/null
check "after glovebox kill the artifact downloads" sh -c "'$GB' artifact get '$IDBIG' | cmp -s - '$T/big.bin'"
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
# what a daemon killed mid-publish leaves: a temporary file, a blob whose row was never written
echo partial > "$A/tmp/0123456789abcdef0123456789abcdef"
touch -d '1 minute ago' "$A/tmp/0123456789abcdef0123456789abcdef"
ORPHAN=0000000000000000000000000000000000000000000000000000000000000000
echo orphan > "$A/$ORPHAN"
mv "$T/daemon.log" "$T/daemon-1.log"
start_daemon --listen "127.0.0.1:$PORT"
req GET "/v1/artifacts/$IDD"
for i in $(seq 100); do [ -f "$A/$ORPHAN" ] || break; sleep 0.05; done
check "the first request sweeps: the orphan blob and the leftover temporary file go" \
    eval "[ ! -f '$A/$ORPHAN' ] && [ -z \"\$(ls '$A/tmp')\" ]"
check "the named blobs stay" eval "[ -f '$A/$SHAD' ] && [ -f '$A/$SHA1' ]"
check "after a daemon restart: the row" eval "[ '$code' = 200 ] && [ \"\$(field \"j['sandbox']\")\" = '$SB' ]"
check "and the content" sh -c "'$GB' artifact get '$IDBIG' | cmp -s - '$T/big.bin'"
SB2=$("$GB" create --timeout 10m)
"$GB" exec "$SB2" -- sh -c 'mkdir -p /tmp/e/f && echo again > /tmp/e/f/g.txt && ln -s g.txt /tmp/e/f/h'
SB="$SB2"
pub '{"path":"/tmp/e"}'
check "the restarted daemon publishes (a directory, no metadata)" eval "[ '$code' = 201 ] && [ \"\$(field \"j['metadata']\")\" = '{}' ]"
IDE=$(field "j['id']")
pub '{"path":"/tmp/e/f/g.txt","metadata":{"a":{"b":[1,2]}}}'
check "and a file with nested metadata" eval "[ '$code' = 201 ] && [ \"\$(field \"j['metadata']\")\" = \"{'a': {'b': [1, 2]}}\" ]"
pub '{"path":"/tmp/nothing"}'
check "and says 404 for a missing path" [ "$code" = 404 ]

# ---- delete ------------------------------------------------------------------------------
"$GB" artifact rm "$ID1"
check "rm removes the row" eval "req GET /v1/artifacts/$ID1; [ \"\$code\" = 404 ]"
check "the blob stays while another row names it" [ -f "$A/$SHA1" ]
req DELETE "/v1/artifacts/$ID2"
check "delete: 204" [ "$code" = 204 ]
"$GB" artifact rm "$IDC"
"$GB" artifact rm "$IDS"
for i in $(seq 100); do [ -f "$A/$SHA1" ] || break; sleep 0.05; done
check "the last row gone, the blob goes" [ ! -f "$A/$SHA1" ]
check "other blobs stay" [ -f "$A/$SHAD" ]
"$GB" artifact rm "$ID1" 2> "$T/err"
check "rm of a deleted artifact fails" [ $? -ne 0 ]
check "audit rows for publish and delete" eval \
    "[ \"\$(q \"print(c.execute(\\\"select count(*) from audit where kind in ('artifact.publish', 'artifact.delete')\\\").fetchone()[0])\")\" -ge 8 ]"

spec_check
summary
