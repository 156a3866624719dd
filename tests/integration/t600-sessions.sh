#!/bin/sh
# Sessions and execute: the six tools with the toolset's behaviour, idempotency per
# tool_use_id (a retry and a concurrent duplicate run once), the hash-chained event log and
# its live stream, a sandbox killed between calls replaced with the workspace restored, and a
# session that outlives a daemon restart.
NAME=sessions
. "$(dirname "$0")/../lib/daemon.sh"
start_daemon

# x TOOL_USE_ID NAME INPUT-JSON: execute; $code and $T/body
x() { req POST "/v1/sessions/$SID/execute" "{\"tool_use_id\":\"$1\",\"name\":\"$2\",\"input\":$3}"; }
text() { field "''.join(c.get('text', '') for c in j['content'])"; }
err() { field "j['is_error']"; }

req POST /v1/sessions '{}'
check "a session from {}" [ "$code" = 201 ]
SID=$(field "j['id']")
SB=$(field "j['sandbox_id']")
check "it has a sandbox and a workdir" eval "[ -n '$SB' ] && [ \"\$(field \"j['workdir']\")\" = /workspace ]"

# ---- bash ------------------------------------------------------------------------------------
x b1 bash '{"command":"echo hi; pwd"}'
check "bash runs in the workdir" eval "[ '$code' = 200 ] && [ \"\$(text)\" = \"hi
/workspace\" ] && [ \"\$(err)\" = False ]"
x b2 bash '{"command":"cd /tmp && export GREETING=hello"}'
x b3 bash '{"command":"pwd; echo $GREETING"}'
check "the shell keeps its directory and environment" [ "$(text)" = "/tmp
hello" ]
x b4 bash '{"command":"echo out; echo err >&2; false"}'
check "a failing command is is_error with stdout and stderr merged" eval \
    "[ \"\$(err)\" = True ] && [ \"\$(text)\" = \"out
err\" ]"
x b5 bash '{"command":"sleep 5","timeout_ms":300}'
check "a timeout kills the shell and says so" eval "[ \"\$(err)\" = True ] && text | grep -q 'timed out after 300 ms'"
x b6 bash '{"command":"echo $GREETING"}'
check "the next call gets a fresh shell" eval "[ \"\$(err)\" = False ] && [ -z \"\$(text | tr -d '\n')\" -o \"\$(text)\" = '(no output)' ]"
x b7 bash '{"command":"exit 3"}'
check "a command that exits the shell ends the session's shell" eval "[ \"\$(err)\" = True ] && text | grep -q 'bash session terminated'"
x b8 bash '{"restart":true}'
check "restart" [ "$(text)" = "bash session restarted" ]
x b9 bash '{"command":"printf \"\\033[31mred\\033[0m\\n\""}'
check "ANSI escapes are stripped" [ "$(text)" = red ]
x b10 bash '{"command":"echo ${ANTHROPIC_API_KEY:-none}; echo $TERM"}'
check "the tool environment: no ANTHROPIC_*, TERM=dumb" [ "$(text)" = "none
dumb" ]

# ---- files ------------------------------------------------------------------------------------
x f1 write '{"file_path":"notes/a.txt","content":"hello\nworld\nworld\n"}'
check "write (parents created)" [ "$(text)" = "wrote 18 bytes to /workspace/notes/a.txt" ]
# the host's copy of the workspace cannot take a change (its directory made immutable): the
# answer says so, and so does the recorded result, rather than a plain success
CK="$STATE/sessions/$SID/workspace/notes"
if chattr +i "$CK" 2>/dev/null; then
    x fck write '{"file_path":"notes/ck.txt","content":"kept?"}'
    check "a checkpoint that cannot take a write: the answer warns" eval \
        "[ \"\$(err)\" = False ] && text | grep -q 'workspace checkpoint could not be brought up to date (notes/ck.txt'"
    x fck2 bash '{"command":"echo x > notes/ck2.txt"}'
    check "the same after bash" eval "text | grep -q 'checkpoint could not be brought up to date (notes/ck2.txt'"
    chattr -i "$CK"
    x fck write '{"file_path":"notes/ck.txt","content":"kept?"}'
    check "its replay carries the warning too (it is what was recorded)" eval \
        "text | grep -q 'could not be brought up to date'"
    x fck3 bash '{"command":"rm notes/ck.txt notes/ck2.txt"}'
else
    echo "# skip: chattr +i is not supported on the state dir's file system"
fi
x f2 read '{"file_path":"notes/a.txt"}'
check "read gives the raw text" [ "$(text)" = "hello
world
world" ]
x f3 read '{"file_path":"/workspace/notes/a.txt","view_range":[2,2]}'
check "read with view_range" [ "$(text)" = world ]
x f4 edit '{"file_path":"notes/a.txt","old_string":"world","new_string":"there"}'
check "edit refuses a string found twice" eval "[ \"\$(err)\" = True ] && text | grep -q 2"
x f5 edit '{"file_path":"notes/a.txt","old_string":"hello","new_string":"hi"}'
check "edit replaces a unique string" [ "$(text)" = "edited /workspace/notes/a.txt (1 replacement(s))" ]
x f6 edit '{"file_path":"notes/a.txt","old_string":"world","new_string":"there","replace_all":true}'
check "edit replace_all" eval "text | grep -q '(2 replacement(s))'"
x f7 edit '{"file_path":"notes/a.txt","old_string":"absent","new_string":"x"}'
check "edit of a missing string is is_error" [ "$(err)" = True ]
x f8 glob '{"pattern":"**/*.txt"}'
check "glob finds it" [ "$(text)" = /workspace/notes/a.txt ]
x f9 grep '{"pattern":"the[r]e"}'
check "grep finds the lines" [ "$(text)" = "/workspace/notes/a.txt:2:there
/workspace/notes/a.txt:3:there" ]
x f10 grep '{"pattern":"nothing-like-this"}'
check "grep with no match" [ "$(text)" = "no matches" ]
x f11 read '{"file_path":"/etc/hostname"}'
check "file tools reach the whole sandbox by default, as bash does" eval "[ \"\$(err)\" = False ] && [ -n \"\$(text)\" ] && ! text | grep -q outside"
x f11w write '{"file_path":"/tmp/outside.txt","content":"x"}'
check "a write outside the workspace says it is not checkpointed" eval \
    "[ \"\$(err)\" = False ] && text | grep -q 'outside the workspace (/workspace), which alone is checkpointed'"
# a session narrowed to its workdir (what the Managed Agents worker asks for)
MAIN_SID=$SID
req POST /v1/sessions '{"tools_root":"/workspace"}'
check "a session with tools_root" eval "[ '$code' = 201 ] && [ \"\$(field \"j['tools_root']\")\" = /workspace ]"
SID=$(field "j['id']")
x n1 write '{"file_path":"notes/a.txt","content":"in\n"}'
x n2 bash '{"command":"ln -sf /etc/hostname link && ln -sfn /etc outdir && ln -sfn notes inside"}'
x n3 read '{"file_path":"/etc/passwd"}'
check "narrowed: a path outside tools_root is refused" eval "[ \"\$(err)\" = True ] && text | grep -q \"outside the session's tools_root /workspace\""
x n4 read '{"file_path":"link"}'
check "narrowed: a symlink leading out is refused" eval "[ \"\$(err)\" = True ] && text | grep -q 'resolves to /etc/hostname, outside'"
x n5 write '{"file_path":"outdir/evil","content":"x"}'
check "narrowed: writing through a symlinked directory out is refused" eval "[ \"\$(err)\" = True ] && text | grep -q outside"
x n6 read '{"file_path":"inside/a.txt"}'
check "narrowed: a symlink that stays inside is followed" eval "[ \"\$(err)\" = False ] && [ \"\$(text)\" = in ]"
x n7 bash '{"command":"test -e /etc/evil || echo absent"}'
check "and nothing was written outside" [ "$(text)" = absent ]
req DELETE "/v1/sessions/$SID"
SID=$MAIN_SID
req POST /v1/sessions '{"tools_root":"/srv"}'
check "a workdir outside tools_root is 400" eval "[ '$code' = 400 ] && grep -q 'must be inside' '$T/body'"
req POST /v1/sessions '{"tools_root":"srv/../x"}'
check "a tools_root that is not absolute is 400" [ "$code" = 400 ]
x f12 read '{"file_path":"notes"}'
check "read of a directory is is_error" eval "[ \"\$(err)\" = True ] && text | grep -q directory"
x f13 read '{"file_path":"nope.txt"}'
check "read of a missing file is is_error" [ "$(err)" = True ]

# ---- errors are results, not HTTP errors -------------------------------------------------------
x e1 frobnicate '{}'
check "an unknown tool is a 200 is_error result" eval "[ '$code' = 200 ] && [ \"\$(err)\" = True ]"
x e2 edit '{"file_path":"a"}'
check "a bad input is a 200 is_error result naming the field" eval "[ '$code' = 200 ] && [ \"\$(err)\" = True ] && text | grep -q old_string"
req POST "/v1/sessions/$SID/execute" '{"name":"bash","input":{"command":"true"}}'
check "no tool_use_id: 400" [ "$code" = 400 ]
req POST "/v1/sessions/ses-000000000000/execute" '{"tool_use_id":"z","name":"bash","input":{}}'
check "an unknown session: 404" [ "$code" = 404 ]

# ---- idempotency -----------------------------------------------------------------------------
x once bash '{"command":"echo x >> count.txt; wc -l < count.txt"}'
first=$(text)
x once bash '{"command":"echo x >> count.txt; wc -l < count.txt"}'
check "a retry returns the stored result" [ "$(text)" = "$first" ]
x count bash '{"command":"wc -l < count.txt"}'
check "and ran once" [ "$(text)" = 1 ]
body='{"tool_use_id":"dup","name":"bash","input":{"command":"sleep 0.5; echo y >> dup.txt; echo done"}}'
pids=
for i in 1 2 3; do
    curl -s --unix-socket "$S" -X POST -d "$body" "http://glovebox/v1/sessions/$SID/execute" > "$T/dup$i" &
    pids="$pids $!"
done
wait $pids  # (not a bare wait: the daemon is a background job too)
check "concurrent duplicates all get the one result" eval \
    "[ \"\$(cat $T/dup1)\" = \"\$(cat $T/dup2)\" ] && [ \"\$(cat $T/dup2)\" = \"\$(cat $T/dup3)\" ] && grep -q done $T/dup1"
x dupcount bash '{"command":"wc -l < dup.txt"}'
check "and the command ran once" [ "$(text)" = 1 ]
# call_sha NAME INPUT-JSON: the sha256 of {"input": ..., "name": ...} as canonical JSON
call_sha() { python3 -c 'import hashlib, json, sys; print(hashlib.sha256(json.dumps({"name": sys.argv[1], "input": json.loads(sys.argv[2])}, sort_keys=True, separators=(",", ":")).encode()).hexdigest())' "$1" "$2"; }
req POST "/v1/sessions/$SID/execute" '{"tool_use_id":"once","name":"read","input":{"file_path":"x"}}'
h1=$(call_sha bash '{"command":"echo x >> count.txt; wc -l < count.txt"}')
h2=$(call_sha read '{"file_path":"x"}')
check "a reused tool_use_id with another call: 409 naming both calls' hashes" eval \
    "[ '$code' = 409 ] && grep -q 'sha256 of its name and input: $h1; of this one.s: $h2' '$T/body'"
x once bash '{"command":"echo x >> count.txt; wc -l < count.txt"}'
check "and the first call's retry still replays its result" eval "[ '$code' = 200 ] && [ \"\$(text)\" = '$first' ]"
curl -s --unix-socket "$S" -X POST -d '{"tool_use_id":"inflight","name":"bash","input":{"command":"sleep 1; echo slow"}}' \
    "http://glovebox/v1/sessions/$SID/execute" > "$T/inflight" &
IPID=$!
sleep 0.3
x inflight bash '{"command":"echo other"}'
check "the same for a call still running: 409" eval "[ '$code' = 409 ] && grep -q \"of this one's: $(call_sha bash '{"command":"echo other"}')\" '$T/body'"
wait "$IPID"
check "and the running call is not disturbed" grep -q slow "$T/inflight"

# ---- the log -------------------------------------------------------------------------------------
curl -s -N --max-time 20 --unix-socket "$S" "http://glovebox/v1/sessions/$SID/events?follow=1" > "$T/stream" &
SPID=$!
sleep 0.3
x live bash '{"command":"echo streamed"}'
sleep 0.3
kill $SPID 2>/dev/null
check "the live stream carries new events" eval "grep -q '\"tool_use_id\":\"live\"' '$T/stream' && grep -q streamed '$T/stream'"
req GET "/v1/sessions/$SID/events?limit=1000"
check "the log has the lifecycle, every call and every result" eval \
    "field \"sorted(set(e['type'] for e in j['events']))\" | grep -q \"'session.created', 'tool.call', 'tool.result'\""
check "sequence numbers are contiguous" eval "field \"[e['seq'] for e in j['events']] == list(range(1, len(j['events']) + 1))\" | grep -q True"
req GET "/v1/sessions/$SID/verify"
check "the hash chain verifies" eval "[ '$code' = 200 ] && [ \"\$(field \"j['ok']\")\" = True ]"
q "c.execute(\"update session_events set data = replace(data, 'streamed', 'tampered') where session = '$SID'\"); c.commit()"
req GET "/v1/sessions/$SID/verify"
check "an edited event is found" eval "[ \"\$(field \"j['ok']\")\" = False ] && field \"j['bad_seq']\" | grep -q '[0-9]'"

# ---- a sandbox killed between calls is replaced ----------------------------------------------
x mk bash '{"command":"mkdir -p src && echo made-by-bash > src/b.txt && chmod +x src/b.txt"}'
req DELETE "/v1/sandboxes/$SB"
check "the sandbox is killed" [ "$code" = 204 ]
x after read '{"file_path":"notes/a.txt"}'
check "the next call gets a new sandbox and the workspace back" eval "[ \"\$(err)\" = False ] && text | grep -q 'hi'"
check "and says the sandbox was replaced" eval "text | grep -q 'replaced\|new one was started'"
x after2 bash '{"command":"cat src/b.txt; test -x src/b.txt && echo exec"}'
check "what bash wrote came back too, with its mode" [ "$(text)" = "made-by-bash
exec" ]
req GET "/v1/sessions/$SID"
SB2=$(field "j['sandbox_id']")
check "the session shows its new sandbox" eval "[ -n '$SB2' ] && [ '$SB2' != '$SB' ]"
req GET "/v1/sessions/$SID/events?limit=1000"
check "sandbox.replaced is in the log" eval "field \"[e['data'] for e in j['events'] if e['type'] == 'sandbox.replaced']\" | grep -q '$SB'"

# ---- a paused or hibernated sandbox is resumed by the next call --------------------------------
req POST "/v1/sandboxes/$SB2/pause" '{}'
x onpaused bash '{"command":"echo thawed"}'
check "a call to a paused sandbox resumes it first" eval "[ \"\$(err)\" = False ] && [ \"\$(text)\" = thawed ]"
req GET "/v1/sandboxes/$SB2"
check "and it is running again" [ "$(field "j['state']")" = running ]
hibernate_capability
if [ "$CRIU_OK" = 1 ]; then
    x mem bash '{"command":"sh -c \"sleep 1000\" >/dev/null 2>&1 & echo $! > /tmp/pid"}'
    req POST "/v1/sandboxes/$SB2/hibernate" '{}'
    check "the session's sandbox hibernates" [ "$(field "j['state']")" = hibernated ]
    x onhib bash '{"command":"kill -0 $(cat /tmp/pid) && echo alive"}'
    check "a call wakes it, its processes and /tmp where they were" eval "[ \"\$(err)\" = False ] && [ \"\$(text)\" = alive ]"
fi

# ---- a restarted daemon keeps the session -----------------------------------------------------
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
mv "$T/daemon.log" "$T/daemon-1.log"
start_daemon
x post bash '{"command":"cat notes/a.txt | head -1"}'
check "after a restart the session runs on" eval "[ \"\$(err)\" = False ] && [ \"\$(text)\" = hi ]"
x once bash '{"command":"echo x >> count.txt; wc -l < count.txt"}'
check "and still replays stored results" [ "$(text)" = "$first" ]
x once bash '{"command":"echo never"}'
check "and still refuses another call under a used tool_use_id (409)" [ "$code" = 409 ]

req DELETE "/v1/sessions/$SID"
check "delete" [ "$code" = 204 ]
req GET "/v1/sessions/$SID"
check "gone" [ "$code" = 404 ]

spec_check
summary
