#!/bin/sh
# The glovebox CLI against a running gloveboxd: status, create, ls, exec (output, exit
# status, errors), kill; and what it says when no daemon is there.
NAME=cli
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"

"$GB" status > "$T/out" 2>&1
check "status without a daemon exits 4" [ $? -eq 4 ]
check "and says how to start one" grep -q "start it with 'gloveboxd'" "$T/out"

start_daemon
check "status" sh -c "'$GB' status | grep -q 'serving, 0 sandboxes'"
id=$("$GB" create --memory 256M --pids 64 --timeout 10m)
check "create prints the new id" [ -n "$id" ]
"$GB" create --id cli-two --json > "$T/two.json"
check "create --json" python3 -c "import json; assert json.load(open('$T/two.json'))['id'] == 'cli-two'"
check "ls lists both" sh -c "'$GB' ls | grep -q '^$id' && '$GB' ls | grep -q '^cli-two'"
check "ls --json" python3 -c "import json, subprocess; assert len(json.loads(subprocess.check_output(['$GB', 'ls', '--json']))) == 2"
"$GB" create --id cli-three --label team=x --meta "note=a b" --env GREETING=hi > /dev/null
check "create --label --meta --env" [ "$("$GB" exec cli-three -- sh -c 'echo $GREETING')" = hi ]
check "ls --label filters" [ "$("$GB" ls --label team=x --json | python3 -c "import json, sys; print([s['id'] for s in json.load(sys.stdin)])")" = "['cli-three']" ]
check "ls shows labels" sh -c "'$GB' ls | grep '^cli-three' | grep -q 'team=x'"
check "ls has a STATE column" sh -c "'$GB' ls | head -n 1 | grep -q '^ID  *TEMPLATE  *STATE  *CREATED'"
check "ls shows a sandbox running" [ "$("$GB" ls | awk '$1 == "cli-three" {print $3}')" = running ]
"$GB" pause cli-three > /dev/null
check "and paused once it is" [ "$("$GB" ls | awk '$1 == "cli-three" {print $3}')" = paused ]
check "ls --json keeps the state as the API gives it" [ "$("$GB" ls --label team=x --json | python3 -c "import json, sys; print(json.load(sys.stdin)[0]['state'])")" = paused ]
"$GB" resume cli-three > /dev/null
"$GB" ls --label "no equals" 2> "$T/err"
rc=$?
check "a bad filter fails with the daemon's message" eval '[ $rc -ne 0 ] && grep -q "KEY=VALUE" "$T/err"'
"$GB" create --env nonsense 2> "$T/err"
rc=$?
check "a malformed --env is a usage error" eval '[ $rc -eq 2 ] && grep -q "KEY=VALUE" "$T/err"'
k1=$("$GB" create --idempotency-key once); k2=$("$GB" create --idempotency-key once)
check "a retried create with the same key gives the same sandbox" eval '[ -n "$k1" ] && [ "$k1" = "$k2" ]'
"$GB" kill cli-three "$k1" > /dev/null

out=$("$GB" exec "$id" -- sh -c 'echo out; echo err >&2; exit 4' 2>"$T/err")
rc=$?
check "exec passes stdout" [ "$out" = out ]
check "exec passes stderr" [ "$(cat "$T/err")" = err ]
check "exec passes the exit status" [ $rc -eq 4 ]
"$GB" exec "$id" -- sh -c 'kill -9 $$'
check "a signal gives 128+N" [ $? -eq 137 ]
head -c 300000 /dev/urandom > "$T/rand"
"$GB" exec "$id" -- sh -c 'head -c 300000 /dev/zero | tr "\000" "\377"' > "$T/ff"
check "binary output arrives intact" eval '[ "$(tr -d '\''\377'\'' < "$T/ff" | wc -c)" = 0 ] && [ "$(wc -c < "$T/ff")" = 300000 ]'
check "exec as user with env and cwd" \
    [ "$("$GB" exec "$id" --user user --cwd /tmp --env X=1 -- sh -c 'echo $(id -un) $(pwd) $X')" = "user /tmp 1" ]
"$GB" exec "$id" -- /no/such 2>"$T/err"
rc=$?
check "a missing program exits 127 with the reason" eval '[ $rc -eq 127 ] && grep -q "cannot run '\''/no/such'\''" "$T/err"'
"$GB" exec nope -- true 2>"$T/err"
rc=$?
check "an unknown sandbox exits 125 with the reason" eval '[ $rc -eq 125 ] && grep -q "sandbox '\''nope'\'' not found" "$T/err"'
check "info" sh -c "'$GB' info '$id' | python3 -c 'import json, sys; assert json.load(sys.stdin)[\"limits\"][\"pids\"] == 64'"
check "timeout moves the expiry" sh -c "'$GB' timeout '$id' 2h | grep -q '^20'"
check "timeout 0 removes it" [ "$("$GB" timeout "$id" 0)" = "no timeout" ]
"$GB" timeout "$id" soon 2>"$T/err"
rc=$?
check "a bad timeout is refused" eval '[ $rc -ne 0 ] && grep -q "a duration like" "$T/err"'
"$GB" info nope 2>/dev/null
check "info on an unknown sandbox exits 3" [ $? -eq 3 ]
"$GB" kill "$id" cli-two
rc=$?
check "kill" eval '[ $rc -eq 0 ] && [ "$("$GB" ls --json)" = "[]" ]'
"$GB" kill cli-two 2>"$T/err"
rc=$?
check "killing an unknown sandbox exits 3 with the reason" eval '[ $rc -eq 3 ] && grep -q "not found" "$T/err"'
summary
