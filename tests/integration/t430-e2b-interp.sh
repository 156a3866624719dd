#!/bin/sh
# The E2B code interpreter on the wire (E2b-Sandbox-Port: 49999): /execute streams NDJSON
# from a persistent Python kernel per context; /contexts creates, lists, restarts and removes
# contexts; the access token guards /execute; a slow reader holds the kernel back.
set -u
NAME=interp
. "$(dirname "$0")/../lib/daemon.sh"
command -v python3 >/dev/null || { echo "skip: python3 not installed"; exit 77; }

PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
start_daemon --listen "127.0.0.1:$PORT"
U="http://127.0.0.1:$PORT"
req POST /v1/sandboxes '{"id":"py","env":{"FROM_CREATE":"yes"}}'
check "a sandbox" [ "$code" = 201 ]
TOK=$(q "print(c.execute(\"select token from sandboxes where id = 'py'\").fetchone()[0])")

# ci METHOD PATH [BODY]: a code-interpreter request; $code, body in $T/out
ci() {
    if [ $# -ge 3 ]; then
        code=$(curl -s --max-time 30 -o "$T/out" -w '%{http_code}' -X "$1" -H "E2b-Sandbox-Id: py" \
            -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $TOK" --data-binary "$3" "$U$2")
    else
        code=$(curl -s --max-time 30 -o "$T/out" -w '%{http_code}' -X "$1" -H "E2b-Sandbox-Id: py" \
            -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $TOK" "$U$2")
    fi
}
# events TYPE: the NDJSON events of that type, one JSON per line
events() { python3 -c "
import json, sys
for line in open('$T/out'):
    e = json.loads(line)
    if e['type'] == '$1':
        print(json.dumps(e, sort_keys=True))"; }
texts() { python3 -c "
import json
print(''.join(json.loads(l).get('text', '') for l in open('$T/out') if json.loads(l)['type'] == '$1'), end='')"; }

ci POST /execute '{"code":"x = 6 * 7\nprint(\"hello\")\nx"}'
check "execute streams 200" [ "$code" = 200 ]
check "every line is JSON, the last is end_of_execution" \
    python3 -c "import json; l = [json.loads(x) for x in open('$T/out')]; assert l[-1] == {'type': 'end_of_execution'}"
check "stdout" [ "$(texts stdout)" = hello ]
check "the last expression is the main result" \
    [ "$(events result)" = '{"is_main_result": true, "text": "42", "type": "result"}' ]
ci POST /execute '{"code":"x + 1"}'
check "state persists between executions" [ "$(events result)" = '{"is_main_result": true, "text": "43", "type": "result"}' ]
check "executions are counted" [ "$(events number_of_executions)" = '{"execution_count": 2, "type": "number_of_executions"}' ]
ci POST /execute '{"code":"import os, subprocess\nsubprocess.run([\"sh\", \"-c\", \"echo from-child; echo oops >&2\"])\nprint(os.environ[\"FROM_CREATE\"], os.environ.get(\"ONLY_HERE\"), os.getcwd(), os.getuid())","env_vars":{"ONLY_HERE":"1"}}'
check "a child process's output is captured, by stream" \
    eval '[ "$(texts stdout)" = "$(printf "from-child\nyes 1 /home/user 1000")" ] && [ "$(texts stderr)" = oops ]'
ci POST /execute '{"code":"import os\nos.environ.get(\"ONLY_HERE\")"}'
check "env_vars hold for one execution" [ -z "$(events result)" ]
ci POST /execute '{"code":"def f():\n    return 1 / 0\nf()"}'
check "an exception is an error event with the cell's traceback" \
    python3 -c "
import json
e = [json.loads(l) for l in open('$T/out') if json.loads(l)['type'] == 'error'][0]
assert e['name'] == 'ZeroDivisionError' and 'return 1 / 0' in e['traceback'] and 'interp_kernel' not in e['traceback'], e"
ci POST /execute '{"code":"x = (1,"}'
check "a syntax error is an error event" [ "$(events error | python3 -c 'import json, sys; print(json.load(sys.stdin)["name"])')" = SyntaxError ]
ci POST /execute '{"code":"import sys; sys.exit(3)"}'
ci POST /execute '{"code":"x"}'
check "sys.exit does not end the context" [ "$(events result | python3 -c 'import json, sys; print(json.load(sys.stdin)["text"])')" = 42 ]
ci POST /execute '{"code":"class H:\n    def _repr_html_(self): return \"<b>hi</b>\"\nH()"}'
check "rich reprs come as their formats" [ "$(events result | python3 -c 'import json, sys; print(json.load(sys.stdin)["html"])')" = "<b>hi</b>" ]

# contexts: separate state, restart, removal
ci POST /contexts '{"cwd":"/tmp"}'
check "create a context" [ "$code" = 200 ]
ctx=$(python3 -c "import json; print(json.load(open('$T/out'))['id'])")
check "it has the cwd and the language" [ "$(python3 -c "import json; j = json.load(open('$T/out')); print(j['cwd'], j['language'])")" = "/tmp python" ]
ci POST /execute "{\"code\":\"import os; os.getcwd()\",\"context_id\":\"$ctx\"}"
check "its cwd" [ "$(events result | python3 -c 'import json, sys; print(json.load(sys.stdin)["text"])')" = "'/tmp'" ]
ci POST /execute "{\"code\":\"'x' in dir()\",\"context_id\":\"$ctx\"}"
check "contexts do not share state" [ "$(events result | python3 -c 'import json, sys; print(json.load(sys.stdin)["text"])')" = False ]
ci GET /contexts
check "list contexts" [ "$(python3 -c "import json; print(sorted(c['id'] for c in json.load(open('$T/out'))))")" = "$(python3 -c "print(sorted(['default', '$ctx']))")" ]
ci POST /execute "{\"code\":\"y = 1\",\"context_id\":\"$ctx\"}"
ci POST "/contexts/$ctx/restart"
check "restart" [ "$code" = 204 ]
ci POST /execute "{\"code\":\"'y' in dir()\",\"context_id\":\"$ctx\"}"
check "a restarted context starts fresh" [ "$(events result | python3 -c 'import json, sys; print(json.load(sys.stdin)["text"])')" = False ]
ci DELETE "/contexts/$ctx"
check "remove" [ "$code" = 204 ]
ci POST /execute "{\"code\":\"1\",\"context_id\":\"$ctx\"}"
check "a removed context is 404" [ "$code" = 404 ]
ci POST /contexts '{"language":"r"}'
check "another language is 400, saying so" eval '[ "$code" = 400 ] && grep -q python "$T/out"'

# executions queue on one context, in order
for i in 1 2 3; do
    curl -s --max-time 30 -H "E2b-Sandbox-Id: py" -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $TOK" \
        -X POST --data-binary "{\"code\":\"import time; time.sleep(0.2); print($i)\"}" "$U/execute" > "$T/q$i" &
    echo $! >> "$T/qpids"
done
for p in $(cat "$T/qpids"); do wait "$p"; done
check "concurrent executions each get their own output" \
    eval 'grep -q "\"1\\\\n\"" "$T/q1" && grep -q "\"2\\\\n\"" "$T/q2" && grep -q "\"3\\\\n\"" "$T/q3"'

# a slow reader of a big output: everything arrives
curl -s --max-time 60 --limit-rate 2M -H "E2b-Sandbox-Id: py" -H "E2b-Sandbox-Port: 49999" \
    -H "X-Access-Token: $TOK" -X POST --data-binary '{"code":"print(\"z\" * 8000000)"}' "$U/execute" > "$T/out"
check "8 MB of output through a slow reader" [ "$(texts stdout | wc -c)" = 8000001 ]

# auth and errors
code=$(curl -s -o "$T/out" -w '%{http_code}' -H "E2b-Sandbox-Id: py" -H "E2b-Sandbox-Port: 49999" \
    -X POST -d '{"code":"1"}' "$U/execute")
check "execute without the token is 502, as for an unknown sandbox" [ "$code" = 502 ]
# every context route needs the token too (issue 14 #2): none starts, lists, restarts or
# removes a kernel without it, or with another sandbox's
req POST /v1/sandboxes '{"id":"py2"}'
TOK2=$(q "print(c.execute(\"select token from sandboxes where id = 'py2'\").fetchone()[0])")
ci GET /contexts
ctx_before=$(cat "$T/out")
for tok in "" "$TOK2" "wrong"; do
    for mr in "POST /contexts" "GET /contexts" "POST /contexts/default/restart" "DELETE /contexts/default" \
        "POST /execute"; do
        set -- $mr
        code=$(curl -s --max-time 30 -o "$T/out" -w '%{http_code}' -X "$1" -H "E2b-Sandbox-Id: py" \
            -H "E2b-Sandbox-Port: 49999" ${tok:+-H "X-Access-Token: $tok"} \
            --data-binary '{"cwd":"/tmp","code":"1"}' "$U$2")
        case "$tok" in "") who="no token" ;; "$TOK2") who="another sandbox's token" ;; *) who="a junk token" ;; esac
        check "$mr with $who is 502" [ "$code" = 502 ]
    done
done
ci GET /contexts
check "and the contexts are as they were" [ "$(cat "$T/out")" = "$ctx_before" ]
# the code interpreter SDK sends the token on /contexts only as E2B-Traffic-Access-Token
code=$(curl -s --max-time 30 -o "$T/out" -w '%{http_code}' -H "E2b-Sandbox-Id: py" \
    -H "E2b-Sandbox-Port: 49999" -H "E2B-Traffic-Access-Token: $TOK" "$U/contexts")
check "GET /contexts with the token as E2B-Traffic-Access-Token is 200" [ "$code" = 200 ]
code=$(curl -s --max-time 30 -o "$T/out" -w '%{http_code}' -H "E2b-Sandbox-Id: py" \
    -H "E2b-Sandbox-Port: 49999" -H "E2B-Traffic-Access-Token: $TOK2" "$U/contexts")
check "and with another sandbox's as it, 502" [ "$code" = 502 ]
code=$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: py" \
    -H "E2b-Sandbox-Port: 49999" "$U/health")
check "the interpreter's /health without a token: 502, as for an unknown sandbox" [ "$code" = 502 ]
code=$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: py" \
    -H "E2b-Sandbox-Port: 49999" -H "X-Access-Token: $TOK" "$U/health")
check "and with it, 204" [ "$code" = 204 ]
ci POST /execute '{"cod":"1"}'
check "a body without code is 400" [ "$code" = 400 ]
ci POST /execute '{"code":"1","context_id":"nope"}'
check "an unknown context is 404" [ "$code" = 404 ]
code=$(curl -s -o "$T/out" -w '%{http_code}' -H "E2b-Sandbox-Id: gone" -H "E2b-Sandbox-Port: 49999" \
    -X POST -d '{"code":"1"}' "$U/execute")
check "an unknown sandbox is 502 with E2B's body" \
    eval '[ "$code" = 502 ] && grep -q "The sandbox was not found" "$T/out"'
req DELETE /v1/sandboxes/py
check "deleting the sandbox with live contexts" [ "$code" = 204 ]
summary
