#!/bin/sh
# Template names are per tenant (issue 14 #6: names were global, so key B's
# {"template":"pytools"} ran the files key A had imported as "pytools", names could be
# squatted, and no key could delete its own). Two keys import images under the same name,
# each sandbox runs its own key's files, neither sees, uses or deletes the other's; a key
# cannot take a built-in or a shared (admin) name, uses shared templates read-only, deletes
# its own; the admin sees all with their owners; the E2B surface resolves the same way.
NAME=ttmpl
. "$(dirname "$0")/../lib/daemon.sh"
. "$(dirname "$0")/../lib/oci.sh"
command -v python3 >/dev/null || { echo "skip: python3 not installed"; exit 77; }
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
start_daemon --listen "127.0.0.1:$PORT"
A=$("$GB" apikey create team-a 2>/dev/null)
B=$("$GB" apikey create team-b 2>/dev/null)
check "two keys" eval '[ -n "$A" ] && [ -n "$B" ]'
# tcp KEY METHOD PATH [BODY|@FILE]: sets $code, the body in $T/body
tcp() {
    key=$1; m=$2; p=$3; shift 3
    code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $key" \
        -X "$m" --data-binary "${1:-}" "http://127.0.0.1:$PORT$p")
}
e2b() {
    key=$1; m=$2; p=$3; shift 3
    code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' -H "X-API-KEY: $key" \
        -H 'Content-Type: application/json' -X "$m" --data-binary "${1:-}" "http://127.0.0.1:$PORT$p")
}
# ready KEY NAME: the key's template NAME is no longer building
ready() {
    for i in $(seq 600); do
        tcp "$1" GET "/v1/templates/$2"
        [ "$(field "j.get('state')")" != building ] && break
        sleep 0.1
    done
    [ "$(field "j.get('state')")" = ready ]
}
# motd KEY SANDBOX: /etc/motd as that sandbox has it
motd() {
    tcp "$1" POST "/v1/sandboxes/$2/exec" '{"cmd":["/bin/cat","/etc/motd"],"wait":true}'
    field "j.get('stdout', '')" | tr -d '\n'
}
IMG_MOTD="poisoned by team-a" mkimage docker "$T/a.tar"
IMG_MOTD="team-b's own" mkimage docker "$T/b.tar"
IMG_MOTD="shared by the admin" mkimage docker "$T/s.tar"

# ---- the same name, two keys ------------------------------------------------------------------
tcp "$A" POST /v1/templates/pytools/oci "@$T/a.tar"
check "A uploads 'pytools': 202" [ "$code" = 202 ]
check "and it becomes ready" ready "$A" pytools
check "A sees it as its own: name, owner, not shared" \
    [ "$(field "(j['name'], j.get('owner'), j.get('shared'))")" = "('pytools', 'team-a', False)" ]
tcp "$B" GET /v1/templates/pytools
check "B does not see A's template: 404" [ "$code" = 404 ]
tcp "$B" GET /v1/templates
check "nor in its list" eval "[ '$code' = 200 ] && [ \"\$(field \"'pytools' in [t['name'] for t in j['templates']]\")\" = False ]"
tcp "$B" POST /v1/sandboxes '{"template":"pytools"}'
check "B cannot run A's files: template not found (404)" eval "[ '$code' = 404 ] && grep -q pytools '$T/body'"
e2b "$B" POST /v2/sandboxes '{"templateID":"pytools"}'
check "nor through E2B: 400 template not found" eval "[ '$code' = 400 ] && grep -q 'template not found' '$T/body'"
tcp "$B" DELETE /v1/templates/pytools
check "B cannot delete A's template: 404" [ "$code" = 404 ]
tcp "$B" POST /v1/templates/pytools/oci "@$T/b.tar"
check "B uploads its own 'pytools' (the name is not squatted): 202" [ "$code" = 202 ]
check "ready too" ready "$B" pytools
"$GB" apikey quota team-b templates=1 > /dev/null 2>&1
tcp "$B" POST /v1/templates/second/oci "@$T/b.tar"
check "a key's templates quota (1): the second upload is 429 naming it" \
    eval "[ '$code' = 429 ] && grep -q \"quota 'templates' of key 'team-b'\" '$T/body'"
tcp "$A" POST /v1/templates/second/oci "@$T/a.tar"
check "another key's quota is its own" [ "$code" = 202 ]
ready "$A" second
tcp "$A" DELETE /v1/templates/second
"$GB" apikey quota team-b --clear > /dev/null 2>&1

tcp "$A" POST /v1/sandboxes '{"id":"sb-t810-a","template":"pytools"}'
check "A's sandbox from 'pytools'" eval "[ '$code' = 201 ] && [ \"\$(field \"j['template']\")\" = pytools ]"
tcp "$B" POST /v1/sandboxes '{"id":"sb-t810-b","template":"pytools"}'
check "B's sandbox from 'pytools'" eval "[ '$code' = 201 ] && [ \"\$(field \"j['template']\")\" = pytools ]"
check "A's sandbox runs A's files" [ "$(motd "$A" sb-t810-a)" = "poisoned by team-a" ]
check "B's sandbox runs B's files" [ "$(motd "$B" sb-t810-b)" = "team-b's own" ]
tcp "$B" GET '/v1/sandboxes?template=pytools'
check "B's list filtered by template: its sandbox" [ "$(field "[s['id'] for s in j['sandboxes']]")" = "['sb-t810-b']" ]
e2b "$A" POST /v2/sandboxes '{"templateID":"pytools","timeout":120}'
check "A's E2B create from 'pytools': templateID as named" eval "[ '$code' = 201 ] && [ \"\$(field \"j['templateID']\")\" = pytools ]"
EA=$(field "j['sandboxID']")
check "and it runs A's files" [ "$(motd "$A" "$EA")" = "poisoned by team-a" ]
e2b "$A" GET "/sandboxes/$EA"
check "E2B info names the template as the client did" [ "$(field "j['templateID']")" = pytools ]
e2b "$A" DELETE "/sandboxes/$EA"

# ---- the admin's view -------------------------------------------------------------------------
req GET /v1/templates
check "the admin lists both, each with its owner" [ "$(field "sorted((t['name'], t.get('owner')) for t in j['templates'] if t['name'] == 'pytools')")" = "[('pytools', 'team-a'), ('pytools', 'team-b')]" ]
req GET /v1/templates/pytools@team-b
check "the admin shows a key's template by its stored name" eval "[ '$code' = 200 ] && [ \"\$(field \"j.get('owner')\")\" = team-b ]"

# ---- built-in and shared names ----------------------------------------------------------------
for n in host base code-interpreter-v1; do
    tcp "$A" POST "/v1/templates/$n/oci" "@$T/a.tar"
    check "a key cannot take the built-in name '$n': 409" eval "[ '$code' = 409 ] && grep -q 'shared template' '$T/body'"
done
code=$(curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$S" -X POST --data-binary "@$T/s.tar" \
    http://glovebox/v1/templates/common/oci)
record POST /v1/templates/common/oci
check "the admin uploads a shared template 'common'" [ "$code" = 202 ]
for i in $(seq 600); do req GET /v1/templates/common; [ "$(field "j.get('state')")" != building ] && break; sleep 0.1; done
tcp "$A" GET /v1/templates/common
check "a key sees the shared template, marked shared" eval "[ '$code' = 200 ] && [ \"\$(field \"j.get('shared')\")\" = True ]"
tcp "$A" POST /v1/templates/common/oci "@$T/a.tar"
check "a key cannot squat the shared name: 409" [ "$code" = 409 ]
tcp "$B" POST /v1/sandboxes '{"id":"sb-t810-c","template":"common"}'
check "a key creates from the shared template" [ "$code" = 201 ]
check "and runs the admin's files" [ "$(motd "$B" sb-t810-c)" = "shared by the admin" ]
tcp "$B" DELETE /v1/templates/common
check "a key cannot delete a shared template: 403" [ "$code" = 403 ]
tcp "$B" DELETE /v1/sandboxes/sb-t810-c

# ---- delete your own --------------------------------------------------------------------------
tcp "$B" DELETE /v1/templates/pytools
check "B deletes its own while its sandbox uses it: 409" [ "$code" = 409 ]
tcp "$B" DELETE /v1/sandboxes/sb-t810-b
tcp "$B" DELETE /v1/templates/pytools
check "B deletes its own once free: 204" [ "$code" = 204 ]
tcp "$B" GET /v1/templates/pytools
check "then B has no 'pytools': 404" [ "$code" = 404 ]
tcp "$A" GET /v1/templates/pytools
check "and A's is untouched" eval "[ '$code' = 200 ] && [ \"\$(field \"j.get('owner')\")\" = team-a ]"
check "A's sandbox still runs A's files" [ "$(motd "$A" sb-t810-a)" = "poisoned by team-a" ]

summary
