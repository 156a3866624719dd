#!/bin/sh
# A sandbox cannot flood the audit log through its egress: 5,000 DNS queries for random
# names leave a bounded number of egress.dns rows (the rate limit, --audit-rate), and the
# rest is counted, by decision, in egress.dns.suppressed rows, so that what is recorded
# individually plus what is summarised is every query the daemon answered. The decisions
# themselves are unchanged. With --audit-rate 0 every query has its row.
# No traffic leaves the machine: the queries go to the daemon's DNS in the sandbox's netns.
NAME=egflood
. "$(dirname "$0")/../lib/daemon.sh"
G="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
N=5000
start_daemon

probe() { id=$1; shift; "$G" exec "$id" -- python3 /tmp/probe.py "$@" 2>&1; }
mk() { # mk ID: a sandbox whose policy allows *.wild.test only
    req POST /v1/sandboxes "{\"id\":\"$1\",\"network\":{\"rules\":[{\"action\":\"allow\",\"host\":\"*.wild.test\"}]}}"
    [ "$code" = 201 ] || { echo "create $1: $code $(cat "$T/body")"; exit 1; }
    "$G" cp "$(dirname "$0")/../lib/egress_probe.py" "$1:/tmp/probe.py" || exit 1
}
rows() { # rows SANDBOX KIND: audit rows of that kind
    q "print(c.execute(\"select count(*) from audit where sandbox = '$1' and kind = '$2'\").fetchone()[0])"
}
# held SANDBOX FIELD: the sum of FIELD over its egress.dns.suppressed rows
held() {
    q "print(sum(json.loads(d)['$2'] for (d,) in c.execute(\"select detail from audit where sandbox = '$1' and kind = 'egress.dns.suppressed'\")))"
}
# decided SANDBOX DECISION: its egress.dns rows with that decision
decided() {
    q "print(sum(1 for (d,) in c.execute(\"select detail from audit where sandbox = '$1' and kind = 'egress.dns'\") if json.loads(d)['decision'] == '$2'))"
}

mk fl
out=$(probe fl dnsflood $N wild.test)
echo "# flood: $out"
A=$(echo "$out" | awk '$1 == "sent" {print $4}')
check "the flood was answered (the resolver answered $A of $N)" eval "[ -n '$A' ] && [ '$A' -gt 0 ]"
R=$(rows fl egress.dns)
echo "# egress.dns rows: $R"
check "the audit log stays bounded: $R egress.dns rows for $N queries (<= 400)" \
    eval "[ '$R' -ge 1 ] && [ '$R' -le 400 ]"
check "the policy still decides every name: an allowed one resolves" \
    eval 'probe fl resolve x.wild.test | grep -q "^198\."'
check "and a denied one is NXDOMAIN" [ "$(probe fl resolve evil.test)" = "ERR gaierror" ]
req GET "/v1/sandboxes/fl/egress?limit=10"
check "the egress log API still answers during the flood" [ "$code" = 200 ]
# the summary of what was held back is written when the sandbox goes (or its window ends)
req DELETE /v1/sandboxes/fl
check "the sandbox is deleted" [ "$code" = 204 ]
# (the two probes above sent one A query each: gethostbyname; one allowed, one denied)
R=$(($(rows fl egress.dns) - 2))
H=$(held fl count)
echo "# recorded individually: $R, summarised: $H, answered: $A, sent: $N"
check "an egress.dns.suppressed row counts what was not recorded individually" \
    eval "[ '$H' -gt 0 ]"
check "recorded + summarised = every query answered ($R + $H, $A answered of $N sent)" \
    eval "[ \$(($R + $H)) -ge '$A' ] && [ \$(($R + $H)) -le '$N' ]"
HA=$(held fl allowed); HD=$(held fl denied)
DA=$(($(decided fl allow) - 1)); DD=$(($(decided fl deny) - 1))
echo "# allowed $DA + $HA, denied $DD + $HD"
check "the counts by decision add up (allowed + denied = summarised)" [ $((HA + HD)) = "$H" ]
if [ "$A" = "$N" ]; then
    # every tenth name was under the allowed wildcard
    check "every allowed query is accounted for ($DA + $HA = $((N / 10)))" \
        [ $((DA + HA)) = $((N / 10)) ]
    check "every denied query is accounted for ($DD + $HD = $((N - N / 10)))" \
        [ $((DD + HD)) = $((N - N / 10)) ]
fi
check "the summary says what it holds" eval \
    "q \"print(c.execute(\\\"select detail from audit where sandbox = 'fl' and kind = 'egress.dns.suppressed'\\\").fetchone()[0])\" | grep -qE '\"message\": *\"[0-9,]+ more queries \\([0-9,]+ denied\\) not recorded individually in the last [0-9]+ s\"'"
check "the audit chain verifies" eval "\"$G\" audit verify --state-dir '$STATE' | grep -q 'audit log intact'"

# ---- the summary also comes when its window ends, with the sandbox still there ----------
mk fw
out=$(probe fw dnsflood 300 wild.test)
A=$(echo "$out" | awk '$1 == "sent" {print $4}')
summarised() { [ "$(rows fw egress.dns.suppressed)" -ge 1 ]; }
waited() { for i in $(seq 60); do summarised && return 0; sleep 0.5; done; return 1; }
check "a flood's summary is written when its window ends (10 s), the sandbox still running" waited
check "and it counts what was held back (recorded + summarised = $A answered)" \
    eval "[ \$((\$(rows fw egress.dns) + \$(held fw count))) = '$A' ]"

# ---- --audit-rate 0: every row written ---------------------------------------------------
kill "$DPID"; wait "$DPID" 2>/dev/null; DPID=
mv "$T/daemon.log" "$T/daemon-1.log"
start_daemon --audit-rate 0
mk fz
out=$(probe fz dnsflood 500 wild.test)
A=$(echo "$out" | awk '$1 == "sent" {print $4}')
R=$(rows fz egress.dns)
check "--audit-rate 0: every query answered has its own row ($R rows, $A answered of 500)" \
    eval "[ -n '$A' ] && [ '$R' -ge '$A' ] && [ '$R' -le 500 ]"
req DELETE /v1/sandboxes/fz
check "--audit-rate 0: nothing summarised" [ "$(rows fz egress.dns.suppressed)" = 0 ]
start_bad() { "$D" --state-dir "$T/bad" --runtime-dir "$T/badrun" --audit-rate "$1" 2>&1; }
check "a bad --audit-rate is refused, saying so" eval "start_bad 20/x | grep -q 'audit-rate must be'"
summary
