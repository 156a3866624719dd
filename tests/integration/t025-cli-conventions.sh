#!/bin/sh
# The CLI's conventions, on the real binary against a private daemon: every command's
# --help (and `glovebox help CMD`, the same text), the ls/list and rm/delete aliases, the
# --json output of every command that prints (it parses, with the documented keys), the one
# exit-code table (docs/cli.md), and the bash and zsh completion scripts.
NAME=cliconv
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN" GLOVEBOX_STATE_DIR="$STATE"

# rc CMD...: run it (stdout to $T/out, stderr to $T/err), its status in $rc
rc() { "$@" > "$T/out" 2> "$T/err"; rc=$?; }
# keys FILE KEY...: FILE is one JSON object with those keys, a JSON array of such objects
# (or an empty one), or NDJSON lines of them
keys() {
    python3 - "$@" << 'EOF'
import json, sys
text = open(sys.argv[1]).read()
try:
    docs = [json.loads(text)]
except ValueError:
    docs = [json.loads(l) for l in text.splitlines() if l.strip()]
    assert docs, "no JSON"
for d in docs:
    for o in (d if isinstance(d, list) else [d]):
        missing = [k for k in sys.argv[2:] if k not in o]
        assert not missing, "missing %s in %s" % (missing, o)
EOF
}

# ---- no daemon: the table's 4 (125 for exec) -----------------------------------------------
rc "$GB" ls
check "no daemon: ls exits 4" eval '[ $rc -eq 4 ] && grep -q "cannot reach gloveboxd" "$T/err"'
rc "$GB" status --json
check "no daemon: status exits 4" [ $rc -eq 4 ]
rc "$GB" exec nope -- true
check "no daemon: exec exits 125, saying why" eval '[ $rc -eq 125 ] && grep -q "cannot reach gloveboxd" "$T/err"'
GLOVEBOX_RUNTIME_DIR=/nonexistent/dir "$GB" info x > /dev/null 2>&1
check "a socket that does not exist: 4" [ $? -eq 4 ]

# ---- help ------------------------------------------------------------------------------------
rc "$GB" --help
check "--help exits 0" [ $rc -eq 0 ]
cmds=$(sed -n '/^commands:/,/^$/s/^  \([a-z-]*\) .*/\1/p' "$T/out")
check "--help lists the commands" eval '[ $(echo $cmds | wc -w) -ge 25 ]'
"$GB" help > "$T/help"
check "glovebox help is the global help" cmp -s "$T/out" "$T/help"
bad=
for c in $cmds; do
    "$GB" "$c" --help > "$T/h1" 2> "$T/h1.err" || bad="$bad $c(--help:$?)"
    head -n 1 "$T/h1" | grep -q "^usage: glovebox $c\b" || bad="$bad $c(usage-line)"
    [ -s "$T/h1.err" ] && bad="$bad $c(stderr)"
    "$GB" "$c" -h > "$T/h2" || bad="$bad $c(-h:$?)"
    "$GB" help "$c" > "$T/h3" || bad="$bad $c(help:$?)"
    cmp -s "$T/h1" "$T/h2" || bad="$bad $c(-h-differs)"
    cmp -s "$T/h1" "$T/h3" || bad="$bad $c(help-differs)"
done
check "every command: --help and -h exit 0 with a usage line; help CMD prints the same${bad:+:$bad}" [ -z "$bad" ]
bad=
for cs in "apikey create" "apikey ls" "apikey list" "apikey revoke" "apikey quota" \
    "snapshots ls" "snapshots show" "snapshots rm" "snapshots delete" "snapshots template" \
    "template ls" "template show" "template rm" "template delete" "template import" \
    "template build-debian" "egress status" "egress block" "egress ca" "egress policy" \
    "egress log" "secret add" "secret rotate" "secret ls" "secret rm" "artifact publish" \
    "artifact ls" "artifact get" "artifact rm" "audit log" "audit verify" "gc --dry-run" \
    "exec sb" "create --id x" "completion bash"; do
    # shellcheck disable=SC2086
    "$GB" $cs --help > "$T/h1" 2> /dev/null || bad="$bad '$cs'($?)"
    grep -q "^usage: glovebox ${cs%% *}" "$T/h1" || bad="$bad '$cs'(usage-line)"
done
check "every subcommand: --help exits 0 with the usage${bad:+:$bad}" [ -z "$bad" ]
rc "$GB" help exec
check "help exec is exec's help, not the global one" eval '[ $rc -eq 0 ] && grep -q "^usage: glovebox exec" "$T/out" && ! grep -q "^commands:" "$T/out"'
rc "$GB" help nosuch
check "help of an unknown command: 2" eval '[ $rc -eq 2 ] && grep -q "unknown command" "$T/err"'
rc "$GB" frobnicate
check "an unknown command: 2" [ $rc -eq 2 ]
bad=
for cs in "apikey frob" "snapshots frob" "template frob" "egress frob" "secret frob" \
    "artifact frob" "audit frob" "completion fish" "gc --frob" "create --frob" "kill" "info"; do
    # shellcheck disable=SC2086
    "$GB" $cs > /dev/null 2> "$T/err"
    r=$?
    [ $r -eq 2 ] || bad="$bad '$cs'($r)"
    grep -q "usage" "$T/err" || grep -q "unrecognized\|invalid\|unknown" "$T/err" || bad="$bad '$cs'(no message)"
done
check "an unknown subcommand or flag, a missing argument: 2${bad:+:$bad}" [ -z "$bad" ]

# ---- a daemon with things in it ---------------------------------------------------------------
start_daemon
rc "$GB" create --id conv1 --label team=a --json
check "create --json" eval '[ $rc -eq 0 ] && keys "$T/out" id template state created_at limits'
"$GB" exec conv1 -- sh -c 'echo hello > /tmp/a' || no "exec to set up"
rc "$GB" snapshot conv1 --name s1 --json
check "snapshot --json" eval '[ $rc -eq 0 ] && keys "$T/out" id name kind sandbox created_at size_bytes'
snap=$(python3 -c "import json; print(json.load(open('$T/out'))['id'])")
rc "$GB" artifact publish conv1 /tmp/a --name a1 --json
check "artifact publish --json" eval '[ $rc -eq 0 ] && keys "$T/out" id sha256 name kind size sandbox'
art=$(python3 -c "import json; print(json.load(open('$T/out'))['id'])")
echo tok | "$GB" secret add s1 --host api.example.com --header 'Authorization: Bearer ${secret}' --json > "$T/out"
check "secret add --json (no value in it)" eval 'keys "$T/out" name hosts header && ! grep -q tok "$T/out"'
echo tok2 | "$GB" secret rotate s1 --json > "$T/out"
check "secret rotate --json" keys "$T/out" name hosts header
"$GB" apikey create k1 --json > "$T/out"
check "apikey create --json" keys "$T/out" name key

# every printing command's --json: it parses and has the documented keys
bad=
while read -r keys_ cmd; do
    # shellcheck disable=SC2086
    "$GB" $cmd --json > "$T/j" 2> "$T/j.err" || { bad="$bad '$cmd'(exit $?: $(head -c 100 "$T/j.err"))"; continue; }
    # shellcheck disable=SC2086
    keys "$T/j" $(echo "$keys_" | tr , ' ') 2> "$T/j.err" || bad="$bad '$cmd'($(tail -n 1 "$T/j.err"))"
done << EOF
version,socket,sandboxes,capabilities status
id,template,state,created_at,limits,labels ls
id,template,state,created_at,limits info conv1
id,expires_at timeout conv1 1h
id,state pause conv1
id,state resume conv1
id,name,kind,sandbox,created_at snapshots
id,name,kind,sandbox,created_at snapshots ls --sandbox conv1
id,name,kind,sandbox,created_at snapshots show $snap
id,state rollback conv1 $snap
snapshot,sandboxes fork conv1
snapshot,sandboxes clone $snap -n 2
dry_run,removed,bytes gc --dry-run
name,state template ls
name,state,source template show host
process,pid,cmd ps conv1
name,revoked apikey ls
name,quota,use,own apikey quota k1
name,hosts,header secret ls
blocked,default_mode,ca_certificate egress status
ca_certificate egress ca
blocked egress block
blocked egress unblock
mode,rules egress policy conv1
id,sha256,name,kind,size artifact ls
seq,time,actor,kind,detail,hash audit log --limit 3
intact,records,bad_record,reason audit verify
version,agent_protocol version
name,base,source snapshots template $snap tpl1
EOF
check "every command's --json parses, with its keys${bad:+:$bad}" [ -z "$bad" ]
rc "$GB" egress log conv1 --json
check "egress log --json: NDJSON (empty here)" eval '[ $rc -eq 0 ] && [ ! -s "$T/out" ]'
rc "$GB" audit log --limit 3 --json
check "audit log --json: one object a line" eval '[ $rc -eq 0 ] && [ $(wc -l < "$T/out") -eq 3 ]'

# ---- aliases: ls/list, rm/delete -------------------------------------------------------------
bad=
for c in "" apikey snapshots template artifact secret; do
    # shellcheck disable=SC2086
    a=$("$GB" $c ls --json 2>&1); b=$("$GB" $c list --json 2>&1)
    [ -n "$a" ] && [ "$a" = "$b" ] || bad="$bad '${c:-glovebox}'"
    # shellcheck disable=SC2086
    a=$("$GB" $c ls 2>&1); b=$("$GB" $c list 2>&1)
    [ "$a" = "$b" ] || bad="$bad '${c:-glovebox}'(table)"
done
check "ls and list give the same output${bad:+:$bad}" [ -z "$bad" ]
rc "$GB" apikey --help
check "help shows the canonical ls and mentions list" grep -q "apikey ls .*(alias: list)" "$T/out"
"$GB" template delete tpl1; r1=$?
"$GB" artifact delete "$art"; r2=$?
"$GB" secret delete s1; r3=$?
"$GB" snapshots delete "$snap"; r4=$?
check "delete is rm (template, artifact, secret, snapshots)" [ "$r1$r2$r3$r4" = 0000 ]
check "and they are gone" eval '[ "$("$GB" secret ls --json)" = "[]" ] && [ "$("$GB" artifact ls --json)" = "[]" ]'

# ---- the exit-code table ---------------------------------------------------------------------
rc "$GB" info nosuch
check "not found: 3" eval '[ $rc -eq 3 ] && grep -q "not found" "$T/err"'
bad=
for c in "snapshots show nosuch" "template show nosuch" "artifact rm art-nosuch" "secret rm nosuch" \
    "apikey revoke nosuch" "kill nosuch" "ps nosuch" "egress policy nosuch" "pause nosuch"; do
    # shellcheck disable=SC2086
    "$GB" $c > /dev/null 2>&1
    r=$?
    [ $r -eq 3 ] || bad="$bad '$c'($r)"
done
check "not found is 3 for every kind of thing${bad:+:$bad}" [ -z "$bad" ]
rc "$GB" apikey create k1
check "a refused request (a duplicate key): 1" eval '[ $rc -eq 1 ] && grep -q exists "$T/err"'
rc "$GB" timeout conv1 soon
check "an invalid value the daemon refuses: 1" [ $rc -eq 1 ]
rc "$GB" create --pids many
check "a bad flag value: 2" [ $rc -eq 2 ]
rc "$GB" exec --frob conv1 -- true
check "exec's usage error: 125" [ $rc -eq 125 ]
rc "$GB" exec conv1
check "exec without a command: 125" [ $rc -eq 125 ]
rc "$GB" exec nosuch -- true
check "exec in an unknown sandbox: 125" eval '[ $rc -eq 125 ] && grep -q "not found" "$T/err"'
rc "$GB" exec conv1 -- /no/such
check "exec of a missing command: 127" [ $rc -eq 127 ]
rc "$GB" exec conv1 -- /etc/passwd
check "exec of a file that cannot be executed: 126" eval '[ $rc -eq 126 ] && grep -q "Permission denied" "$T/err"'
rc "$GB" exec conv1 --user nosuchuser -- true
check "exec as an unknown user: 125" [ $rc -eq 125 ]
rc "$GB" exec conv1 -- sh -c 'exit 42'
check "exec passes the command's status through" [ $rc -eq 42 ]
rc "$GB" exec conv1 -- sh -c 'kill -TERM $$'
check "exec: killed by signal N is 128+N" [ $rc -eq 143 ]
rc "$GB" exec conv1 --timeout 200ms -- sleep 10
check "exec: timed out is 124" [ $rc -eq 124 ]
rc "$GB" exec conv1 -- sh -c 'echo "$@"' sh --help
check "exec: --help after the command is the command's" eval '[ $rc -eq 0 ] && [ "$(cat "$T/out")" = --help ]'
rc "$GB" run -- /no/such
check "run of a missing command: 127" [ $rc -eq 127 ]
rc "$GB" run --memory lots -- true
check "run's usage error: 125" [ $rc -eq 125 ]

# ---- completion ------------------------------------------------------------------------------
"$GB" completion bash > "$T/comp.bash"
check "completion bash is valid bash" bash -n "$T/comp.bash"
# complete WORDS...: COMPREPLY for the command line WORDS (the last one is being completed)
cat > "$T/complete.bash" << EOF
. "$T/comp.bash"
COMP_WORDS=("\$@"); COMP_CWORD=\$((\$# - 1))
_glovebox
echo "\${COMPREPLY[*]}"
EOF
comp() { bash "$T/complete.bash" "$@"; }
check "bash: glovebox ex -> exec" [ "$(comp glovebox ex)" = exec ]
check "bash: glovebox exec --ti -> --timeout" [ "$(comp glovebox exec --ti)" = --timeout ]
a=$(comp glovebox apikey "")
check "bash: glovebox apikey -> create ls list revoke quota" [ "$a" = "create ls list revoke quota" ]
check "bash: glovebox snapshots l -> ls list" [ "$(comp glovebox snapshots l)" = "ls list" ]
check "bash: glovebox artifact d -> delete" [ "$(comp glovebox artifact d)" = delete ]
check "bash: glovebox ls --j -> --json" [ "$(comp glovebox ls --j)" = --json ]
check "bash: glovebox help sn -> snapshot snapshots" [ "$(comp glovebox help sn)" = "snapshot snapshots" ]
check "bash: glovebox completion -> bash zsh" [ "$(comp glovebox completion "")" = "bash zsh" ]
check "bash: an argument that is no flag: files (nothing from us)" [ -z "$(comp glovebox exec conv1 "")" ]
check "bash: the script registers itself" grep -q '^complete -o default -F _glovebox glovebox$' "$T/comp.bash"
bad=
for c in $cmds; do
    for f in $("$GB" "$c" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        comp glovebox "$c" "$f" | tr ' ' '\n' | grep -qx -- "$f" || bad="$bad $c:$f"
    done
done
check "bash: every flag in every command's help completes${bad:+:$bad}" [ -z "$bad" ]

"$GB" completion zsh > "$T/comp.zsh"
if command -v zsh > /dev/null; then
    check "completion zsh is valid zsh" zsh -n "$T/comp.zsh"
    # compsys-driven: compinit in an interactive zsh on a pseudo-terminal; each line is typed
    # with a TAB, then ^E END, and read back as zle shows it (escapes and ^H dropped), then ^U
    cat > "$T/zcomp.zsh" << EOF
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='%% '; autoload -U compinit; compinit -u -D; source '$T/comp.zsh'; PS1='RE''ADY> '"
zpty -r z line '*READY> *' || exit 1
for w in "\$@"; do
    zpty -w -n z "\$w"\$'\t'
    zpty -w -n z \$'\x05 END'
    zpty -r z out '*END*'
    zpty -w -n z \$'\x15'
    print -r -- "\$out" | tr -d '\r\b' | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' | tail -n 1
done
zpty -d z
EOF
    zout=$(PATH="$(cd "$BUILD" && pwd):$PATH" timeout 60 zsh -f "$T/zcomp.zsh" 'glovebox ex' \
        'glovebox exec --ti' 'glovebox apikey rev' 'glovebox snapshots del' 2>&1)
    echo "$zout" | sed 's/^ */# zsh: /'
    check "zsh: glovebox ex<TAB> -> exec" eval 'echo "$zout" | grep -q "glovebox exec *END"'
    check "zsh: glovebox exec --ti<TAB> -> --timeout" eval 'echo "$zout" | grep -q "glovebox exec --timeout *END"'
    check "zsh: glovebox apikey rev<TAB> -> revoke" eval 'echo "$zout" | grep -q "glovebox apikey revoke *END"'
    check "zsh: glovebox snapshots del<TAB> -> delete" eval 'echo "$zout" | grep -q "glovebox snapshots delete *END"'
else
    echo "# skip: zsh is not installed: the zsh script's structure only"
    check "completion zsh: compdef, the commands, apikey's subcommands" \
        eval 'grep -q "^#compdef glovebox" "$T/comp.zsh" && grep -q "compdef _glovebox glovebox" "$T/comp.zsh" && grep -q "subs=(create ls list revoke quota)" "$T/comp.zsh"'
fi
summary
