# The functions the script made by tests/lib/readme.py calls around each README command
# (bash: daemon and follow lines run as jobs of their own process group, set -m). Sourced
# before that script; $__O is its output directory, $__SOCK the admin socket to wait for.
#   __gbx_at LOC TEXT             a command starts (written to $__O/current for a timeout)
#   __gbx_check RC WANT LOC TEXT [NEEDLE...]   its status and output
#   __gbx_skip LOC TEXT WHY       a command not run, and why
#   __gbx_daemon PID LOC TEXT     a daemon started in the background: wait for /healthz
#   __gbx_follow PID LOC TEXT     a follower: still running after 3 s; __gbx_unfollow stops it
#   __gbx_file LOC NAME           a file block written   __gbx_before LOC: the test's own step
#   __gbx_after RC LOC TEXT       the test's check after a command
#   __gbx_finish                  stop the daemons (SIGTERM: each must exit 0), the tally
__pass=0; __fail=0; __skipped=0; __daemons=
__ok() { __pass=$((__pass + 1)); echo "ok - $*"; }
__no() { __fail=$((__fail + 1)); echo "not ok - $*"; }
__show() { [ -s "$1" ] && cut -c1-200 "$1" | sed -e 's/^/#   /' | head -n "${2:-20}"; }
__gbx_at() { __loc=$1; echo "$1: $2" > "$__O/current"; }
__gbx_before() { echo "# $1: the test prepares it"; }
__gbx_file() { __ok "$1: the file $2 is written"; }
__gbx_after() {
    if [ "$1" -eq 0 ]; then __ok "$2: then: $3"; else __no "$2: then: $3"; __show "$__O/after.out" 20; fi
}

__gbx_check() {
    rc=$1; want=$2; loc=$3; text=$4; shift 4
    out="$__O/${loc##*:}.out"
    miss=
    for n in "$@"; do grep -qF -- "$n" "$out" || miss="$miss \"$n\""; done
    if [ "$rc" -eq "$want" ] && [ -z "$miss" ]; then
        if [ "$want" -ne 0 ]; then __ok "$loc: $text (exit $rc, as the README says)"
        else __ok "$loc: $text"; fi
        __show "$out" 5
    else
        __no "$loc: $text (exit $rc, the README says $want${miss:+; output lacks$miss})"
        __show "$out" 40
    fi
}

__gbx_skip() {
    __skipped=$((__skipped + 1))
    echo "# not run: $1: $2"
    echo "#   why: $3"
}

# alive PGID: a process of the group is still running (zombies aside)
__alive() { [ -n "$(ps -e -o pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/')" ]; }
# __stop PGID SECONDS: SIGTERM the group, SIGKILL it if it is still there after SECONDS
__stop() {
    kill -TERM -- "-$1" 2>/dev/null
    i=0
    while __alive "$1" && [ $i -lt $(($2 * 20)) ]; do sleep 0.05; i=$((i + 1)); done
    __alive "$1" || return 0
    echo "# process group $1 still running $2 s after SIGTERM: SIGKILL"
    kill -KILL -- "-$1" 2>/dev/null
    return 1
}

__gbx_daemon() {
    pid=$1; loc=$2; text=$3
    out="$__O/${loc##*:}.out"
    # 60 s: a sanitized build on a busy machine starts slowly
    for _ in $(seq 1200); do
        [ "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' --unix-socket "$__SOCK" \
            http://glovebox/healthz)" = 200 ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    if [ "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' --unix-socket "$__SOCK" \
        http://glovebox/healthz)" = 200 ]; then
        __ok "$loc: $text (serving on $__SOCK)"
        __daemons="$__daemons $pid:${loc##*:}"
    else
        __no "$loc: $text (the daemon did not start)"
        __show "$out" 40
        __gbx_finish
    fi
}

__gbx_follow() {
    pid=$1; loc=$2; text=$3
    sleep 3
    __following=
    if __alive "$pid"; then
        __following=$pid
        __ok "$loc: $text (still following after 3 s)"
    else
        wait "$pid"
        __no "$loc: $text (ended, exit $?, instead of following)"
        __show "$__O/${loc##*:}.out" 40
    fi
}
__gbx_unfollow() {
    [ -n "$__following" ] || return 0
    __stop "$__following" 10
    __show "$__O/${__loc##*:}.out" 5
    __following=
}

__gbx_finish() {
    # what the test's before: steps started in the background ($__bgpids)
    for p in ${__bgpids:-}; do kill "$p" 2>/dev/null; done
    for d in $__daemons; do
        pid=${d%%:*}; n=${d##*:}
        # the way an operator stops it; bounded: 60 s, then SIGKILL and a failure
        # the job's shell waits for the daemon (or is it, when bash ran it with exec)
        kid=$(ps -o pid= --ppid "$pid" | tr -d ' ')
        kill -TERM "${kid:-$pid}" 2>/dev/null
        i=0
        while __alive "$pid" && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
        if __alive "$pid"; then
            kill -KILL -- "-$pid" 2>/dev/null
            __no "README.md:$n: the daemon stops on SIGTERM (still running after 60 s)"
        else
            wait "$pid"; rc=$?
            if [ $rc -eq 0 ]; then __ok "README.md:$n: the daemon stops cleanly on SIGTERM"
            else __no "README.md:$n: the daemon stops cleanly on SIGTERM (exit $rc)"; fi
        fi
        if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$__O/$n.out"; then
            __no "README.md:$n: a sanitizer report in the daemon's log"
        fi
        if [ $__fail -ne 0 ]; then echo "# the daemon's log:"; __show "$__O/$n.out" 40; fi
    done
    __daemons=
    echo "# $__skipped README commands not run (listed in the test, with why)"
    echo "$__pass passed, $__fail failed"
    [ $__fail -eq 0 ]
    exit
}
