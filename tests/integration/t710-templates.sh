#!/bin/sh
# Templates: OCI image archives built here from host files (a docker-save layout with two
# layers, one of them whiting out a file of the first and making a directory opaque; an OCI
# image layout with a gzip layer), imported through the daemon (by host path, as the admin,
# and as an upload), sandboxes created from them with the whiteouts seen from inside, list,
# show, delete (409 while a sandbox uses it), the build's event stream, and a hostile
# archive refused with its entry's name while nothing is written outside the state dir.
NAME=templates
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
start_daemon --listen "127.0.0.1:$PORT"
# tcp KEY METHOD PATH [BODY]: an API key's request; sets $code, body in $T/body
tcp() {
    key=$1; m=$2; p=$3; shift 3
    code=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $key" -X "$m" \
        --data-binary "${1:-}" "http://127.0.0.1:$PORT$p")
}

. "$(dirname "$0")/../lib/oci.sh"

# wait_ready NAME: poll GET /v1/templates/NAME until it is not building; $T/body holds it
wait_ready() {
    for i in $(seq 600); do
        req GET "/v1/templates/$1"
        [ "$(field "j.get('state')")" != building ] && return 0
        sleep 0.1
    done
}

mkimage docker "$T/docker.tar"
mkimage oci "$T/oci.tar"
check "the test images were built" [ -s "$T/docker.tar" -a -s "$T/oci.tar" ]

# ---- import by host path (admin) ---------------------------------------------------------
req POST /v1/templates "{\"name\":\"img-docker\",\"from\":{\"oci\":{\"path\":\"$T/docker.tar\"}},\"description\":\"two layers\",\"start\":\"/bin/sh -c 'echo started > /tmp/s'\",\"ready\":\"/bin/cat /tmp/s\"}"
check "import a docker-save archive by path: 202 building" eval "[ '$code' = 202 ] && [ \"\$(field \"j['state']\")\" = building ]"
wait_ready img-docker
check "it becomes ready" [ "$(field "j['state']")" = ready ]
check "show: source, format, size, the image's env" eval "[ \"\$(field \"j['source']\")\" = 'oci:$T/docker.tar' ] && [ \"\$(field \"j['size_bytes'] > 0\")\" = True ] && [ \"\$(field \"j['oci']['env'][1]\")\" = IMG=t710 ] && [ \"\$(field \"j['oci']['workdir']\")\" = /data ]"
req POST /v1/templates "{\"name\":\"img-docker\",\"from\":{\"oci\":{\"path\":\"$T/docker.tar\"}}}"
check "the same name again: 409" [ "$code" = 409 ]
req GET /v1/templates/img-docker
check "description, start and ready are kept" eval "[ \"\$(field \"j['description']\")\" = 'two layers' ] && [ \"\$(field \"j['start']\")\" = \"/bin/sh -c 'echo started > /tmp/s'\" ] && [ \"\$(field \"j['ready']\")\" = '/bin/cat /tmp/s' ]"
check "in template.conf" grep -qx "ready=/bin/cat /tmp/s" "$STATE/templates/img-docker/template.conf"
req POST /v1/templates "{\"name\":\"nl\",\"from\":{\"oci\":{\"path\":\"$T/docker.tar\"}},\"start\":\"a\\nb\"}"
check "a start command with a newline: 400" [ "$code" = 400 ]

# ---- upload (OCI layout, gzip layer) ---------------------------------------------------------
code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X POST --data-binary "@$T/oci.tar" \
    http://glovebox/v1/templates/img-oci/oci)
record POST /v1/templates/img-oci/oci
check "upload an OCI layout: 202" [ "$code" = 202 ]
curl -s --max-time 60 --unix-socket "$S" http://glovebox/v1/templates/img-oci/events > "$T/events"
check "the event stream ends with done" eval "tail -n 1 '$T/events' | grep -q '\"type\":\"done\"'"
check "and carried progress for each layer" eval "grep -q '\"phase\":\"layer\".*\"step\":2' '$T/events'"
wait_ready img-oci
check "it is ready" [ "$(field "j['state']")" = ready ]

# ---- the CLI, uploading; what an API key may do ---------------------------------------------
"$GB" template import "$T/docker.tar" --name img-up --upload --ready 'test -e /data/keep && echo "ok"' > "$T/out" 2>&1
rc=$?
check "glovebox template import --upload follows the build to its end" eval \
    "[ $rc -eq 0 ] && grep -q \"template 'img-up' is ready\" '$T/out' && grep -q '^layer' '$T/out'"
check "an upload's ready command (in the query string) is kept" \
    grep -qx 'ready=test -e /data/keep && echo "ok"' "$STATE/templates/img-up/template.conf"
key=$("$GB" apikey create t710 2>/dev/null)
tcp "$key" GET /v1/templates
check "an API key lists templates" eval "[ '$code' = 200 ] && grep -q img-up '$T/body'"
tcp "$key" POST /v1/templates "{\"name\":\"k1\",\"from\":{\"oci\":{\"path\":\"$T/docker.tar\"}}}"
check "an API key may not import a host path: 403" [ "$code" = 403 ]
tcp "$key" POST /v1/templates '{"name":"k2","from":{"debian":{"suite":"bookworm"}}}'
check "nor build from Debian: 403" [ "$code" = 403 ]
tcp "$key" DELETE /v1/templates/img-up
check "nor delete a shared template: 403" [ "$code" = 403 ]
req DELETE /v1/templates/img-up
check "the admin deletes it" [ "$code" = 204 ]

# ---- sandboxes from them ----------------------------------------------------------------------
for t in img-docker img-oci; do
    req POST /v1/sandboxes "{\"id\":\"sb-$t\",\"template\":\"$t\"}"
    check "a sandbox from $t" [ "$code" = 201 ]
    out=$("$GB" exec "sb-$t" -- /bin/cat /data/keep /data/new /opq/upper 2>&1)
    check "$t: the files of both layers are there" [ "$out" = "keep
new
upper" ]
    out=$("$GB" exec "sb-$t" -- /bin/ls -a /data /opq 2>&1)
    check "$t: the whiteout removed data/old, the opaque dir hid opq/lower" eval \
        "! echo '$out' | grep -q -e '^old\$' -e '^lower\$' -e '^.wh.'"
    out=$("$GB" exec "sb-$t" -- /bin/ls -ln /home/user/mine 2>&1)
    check "$t: owners are kept (uid 1000 inside)" eval "echo '$out' | grep -q ' 1000 *1000 '"
    out=$("$GB" exec "sb-$t" -- /bin/cat /etc/resolv.conf 2>&1)
    check "$t: resolv.conf names the egress DNS" [ "$out" = "nameserver 127.0.0.1" ]
done

# ---- list, delete ---------------------------------------------------------------------------
req GET /v1/templates
check "list: host and both images" [ "$(field "sorted(t['name'] for t in j['templates'])")" = "['host', 'img-docker', 'img-oci']" ]
"$GB" template ls > "$T/ls" 2>&1
check "glovebox template ls" eval "grep -q '^img-oci' '$T/ls' && grep -q '^host' '$T/ls'"
"$GB" template show img-docker > "$T/show" 2>&1
check "glovebox template show" grep -q "oci:$T/docker.tar" "$T/show"
req DELETE /v1/templates/img-docker
check "delete while a sandbox uses it: 409 naming the sandbox" eval "[ '$code' = 409 ] && grep -q sb-img-docker '$T/body'"
req DELETE /v1/sandboxes/sb-img-docker
req DELETE /v1/templates/img-docker
check "delete once it is free: 204" [ "$code" = 204 ]
req GET /v1/templates/img-docker
check "then it is gone: 404" [ "$code" = 404 ]
check "and its directory too" [ ! -e "$STATE/templates/img-docker" ]
req DELETE /v1/templates/img-docker
check "delete again: 404" [ "$code" = 404 ]
req POST /v1/sandboxes '{"template":"img-docker"}'
check "a create from a deleted template: 404" [ "$code" = 404 ]

# ---- hostile --------------------------------------------------------------------------------
OUTSIDE="$T/outside"; export OUTSIDE
mkdir -p "$OUTSIDE"; echo sentinel > "$OUTSIDE/sentinel"
mkimage hostile "$T/evil.tar"
"$GB" template import "$T/evil.tar" --name evil > "$T/out" 2>&1
rc=$?
check "a hostile archive fails the import" [ $rc -ne 0 ]
check "with a clear error naming the entry" grep -q "hostile entry 'escape/planted'" "$T/out"
check "nothing was written outside" eval "[ \"\$(ls '$OUTSIDE')\" = sentinel ] && [ \"\$(cat '$OUTSIDE/sentinel')\" = sentinel ]"
req GET /v1/templates/evil
check "the failed build says why" eval "[ \"\$(field \"j['state']\")\" = failed ] && field \"j['error']['message']\" | grep -q escape/planted"
check "and left no template directory" [ ! -e "$STATE/templates/evil" ]
check "and no staging directory" eval "! ls -a '$STATE/templates' | grep -q '^.build'"

# ---- errors -----------------------------------------------------------------------------------
req POST /v1/templates '{"name":"x","from":{"oci":{"path":"relative.tar"}}}'
check "a relative path: 400" [ "$code" = 400 ]
req POST /v1/templates '{"name":"Bad Name","from":{"oci":{"path":"/etc/hostname"}}}'
check "a bad name: 400" [ "$code" = 400 ]
req POST /v1/templates '{"name":"deb","from":{"debian":{"suite":"bookworm","include":["--evil"]}}}'
check "a bad Debian package name: 400" eval "[ '$code' = 400 ] && grep -q -- --evil '$T/body'"
req POST /v1/templates/notar/oci 'this is not a tar archive'
wait_ready notar
check "a body that is no archive fails with a clear error" eval "[ \"\$(field \"j['state']\")\" = failed ] && field \"j['error']['message']\" | grep -qi 'archive'"
req POST /v1/templates/img-oci/oci 'x'
check "an upload over an existing name: 409" [ "$code" = 409 ]

# ---- the CLI's --json (docs/cli.md) ---------------------------------------------------------
"$GB" template import "$T/docker.tar" --name img-json --json > "$T/out" 2> "$T/err"
rc=$?
check "template import --json: NDJSON build events to done" eval "[ $rc -eq 0 ] && python3 -c \"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert ev and all('type' in e for e in ev) and ev[-1]['type'] == 'done', ev
\" '$T/out'"
"$GB" template import "$T/docker.tar" --name img-json2 --json --no-wait > "$T/out" 2> "$T/err"
rc=$?
check "with --no-wait: the template as one JSON document" eval "[ $rc -eq 0 ] && python3 -c \"
import json, sys
j = json.load(open(sys.argv[1]))
assert j['name'] == 'img-json2' and 'state' in j, j
\" '$T/out'"
wait_ready img-json2
"$GB" template import "$T/evil.tar" --name evil2 --json > "$T/out" 2> "$T/err"
rc=$?
check "a failed build with --json: 1, its error event on stdout, the message on stderr" eval \
    "[ $rc -eq 1 ] && tail -n 1 '$T/out' | grep -q '\"type\":\"error\"' && grep -q 'hostile entry' '$T/err'"

spec_check
summary
