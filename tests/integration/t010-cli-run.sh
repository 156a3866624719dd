#!/bin/sh
# glovebox run: exit status, stdio, options and errors, driven through the real binary.
set -u
: "${BUILD:=build}"
GB="$BUILD/glovebox"
T=$(mktemp -d /tmp/gbx-cli-XXXXXX)
chmod 711 "$T"
export GLOVEBOX_RUNTIME_DIR="$T/run"
[ -n "${GBX_TEST_STATE_DIR:-}" ] && export GLOVEBOX_STATE_DIR="$GBX_TEST_STATE_DIR" || export GLOVEBOX_STATE_DIR="$T/state"
trap 'rm -rf "$T"' EXIT
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }

pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
no() { fail=$((fail + 1)); echo "not ok - $1"; }
check() { name=$1; shift; if "$@"; then ok "$name"; else no "$name"; fi; }

# exit status passes through
"$GB" run -- sh -c 'exit 7'; check "exit status 7" [ $? -eq 7 ]
"$GB" run -- true; check "exit status 0" [ $? -eq 0 ]
"$GB" run -- sh -c 'kill -TERM $$'; check "killed by signal gives 128+15" [ $? -eq 143 ]

# stdout and stderr separately
out=$("$GB" run -- sh -c 'echo out; echo err >&2' 2>"$T/err")
check "stdout" [ "$out" = "out" ]
check "stderr" [ "$(cat "$T/err")" = "err" ]

# binary stdin -> stdout round trip
head -c 3000000 /dev/urandom > "$T/in"
"$GB" run -- cat < "$T/in" > "$T/out"
check "binary stdin/stdout round trip" cmp -s "$T/in" "$T/out"

# options
check "--env" [ "$("$GB" run --env FOO=bar -- sh -c 'echo $FOO')" = "bar" ]
check "--user" [ "$("$GB" run --user user -- id -un)" = "user" ]
check "--cwd" [ "$("$GB" run --cwd /tmp -- pwd)" = "/tmp" ]
check "hostname is the sandbox id" sh -c "\"$GB\" run -- hostname | grep -q '^run-'"
"$GB" run --timeout 300ms -- sleep 10 2>"$T/err"
check "--timeout kills and exits 124" [ $? -eq 124 ]
check "--timeout says so" grep -q "timed out" "$T/err"
"$GB" run --memory 64M -- python3 -c "b = b'x' * (300 << 20)" 2>/dev/null
check "--memory limit OOM-kills (137)" [ $? -eq 137 ]
check "without --memory the same runs" "$GB" run -- python3 -c "b = b'x' * (300 << 20)"
"$GB" run --pids 16 -- sh -c 'for i in $(seq 40); do sleep 1 & done; wait' 2>/dev/null
check "--pids limit stops forks" [ $? -ne 0 ]

# errors: clear message, exit 125, nothing left behind
"$GB" run --memory lots -- true 2>"$T/err"; rc=$?
check "bad --memory exits 125" [ $rc -eq 125 ]
check "bad --memory message" grep -q "invalid --memory 'lots'" "$T/err"
"$GB" run 2>"$T/err"; check "no command exits 125" [ $? -eq 125 ]
check "no command message" grep -q "no command given" "$T/err"
"$GB" run -- /no/such/program 2>"$T/err"; check "missing program exits 127" [ $? -eq 127 ]
check "missing program message" grep -q "No such file or directory" "$T/err"
"$GB" run --template nope -- true 2>"$T/err"; check "unknown template exits 125" [ $? -eq 125 ]
check "unknown template message" grep -q "template 'nope' not found" "$T/err"
check "nothing left in the runtime dir" [ -z "$(ls -A "$T/run/sandboxes")" ]
"$GB" frobnicate 2>/dev/null; check "unknown command exits 2" [ $? -eq 2 ]
check "help" sh -c "\"$GB\" run --help | grep -q 'usage: glovebox run'"

# a terminal when asked: stdin is a pty inside
check "--tty gives a terminal" sh -c "\"$GB\" run --tty -- tty </dev/null | grep -q /dev/pts/"

# stdin a real terminal (script(1) gives us one): a PTY is used without asking, with the
# terminal's size, and the exit status still passes through
if command -v script >/dev/null 2>&1; then
    # (script's stdin stays open: at end of input script types the terminal's EOF character
    # into it, which would show up as an echoed "^@" once the terminal is raw)
    mkfifo "$T/stdin"
    exec 7<>"$T/stdin"
    script -qec "stty rows 33 cols 101; \"$GB\" run -- sh -c 'tty; stty size; exit 3'" \
        /dev/null <&7 > "$T/tty" 2>&1
    rc=$?
    exec 7>&-
    check "terminal stdin gives a pty" grep -q "/dev/pts/" "$T/tty"
    check "terminal size passes through" grep -q "^33 101" "$T/tty"
    check "exit status through a pty" [ $rc -eq 3 ]
else
    echo "skip: script(1) not installed, terminal auto-detection not tested"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
