#!/bin/sh
# The egress gateway, tested from inside sandboxes: DNS answers by policy, connections by
# name, wildcard and port, literal addresses, UDP/ICMP/IPv6 dropped, DNS-rebinding and host
# services refused, SNI/Host mismatches, credential injection over intercepted HTTPS and HTTP
# (and the secret nowhere inside, nor in logs or the audit), revocation, live policy change,
# the emergency block, malformed input, upstream failures told apart from refusals, the audit
# rows and the counters.
# Every upstream is on this machine: 127.0.0.7 (ports 80, 443, an echo port, and a nameserver
# that answers NXDOMAIN, the daemon's --egress-resolver), a closed port on 127.0.0.1 and a
# listener on 0.0.0.0 standing for a host service. No traffic goes anywhere else.
NAME=egress
. "$(dirname "$0")/../lib/daemon.sh"
command -v openssl >/dev/null || { echo "skip: openssl not installed"; exit 77; }
G="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
UP=127.0.0.7
ECHO_PORT=7007
ANY_PORT=7008
API_PORT=7009
DNS_PORT=7010
# a port on 127.0.0.1 that nothing listens on (taken and let go)
CLOSED_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
SECRET="s3cr3t-VALUE-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
HOSTIP=$(hostname -I 2>/dev/null | awk '{print $1}')
[ -n "$HOSTIP" ] || HOSTIP=127.0.0.1

# ---- a test CA and the upstreams ----------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=egress test CA" \
    -keyout "$T/ca.key" -out "$T/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=api.test" \
    -keyout "$T/srv.key" -out "$T/srv.csr" 2>/dev/null
printf 'subjectAltName=DNS:api.test,DNS:other.test\n' > "$T/ext"
openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 2 \
    -extfile "$T/ext" -out "$T/srv.pem" 2>/dev/null
python3 "$(dirname "$0")/../lib/egress_upstream.py" $UP $ECHO_PORT $ANY_PORT "$T/srv.pem" \
    "$T/srv.key" "$T/upstream.log" "$T/upstream.ready" 2>"$T/upstream.err" &
UPID=$!
python3 "$(dirname "$0")/../lib/egress_dns.py" $UP $DNS_PORT "$T/dns.ready" 2>"$T/dns.err" &
DNSPID=$!
trap 'kill $UPID $DNSPID 2>/dev/null; cleanup' EXIT
for i in $(seq 100); do [ -e "$T/upstream.ready" ] && [ -e "$T/dns.ready" ] && break; sleep 0.05; done
[ -e "$T/upstream.ready" ] || { echo "upstream did not start:"; cat "$T/upstream.err"; exit 1; }
[ -e "$T/dns.ready" ] || { echo "nameserver did not start:"; cat "$T/dns.err"; exit 1; }

HOSTS="api.test=$UP echo.test=$UP a.wild.test=$UP wild.test=$UP deep.b.wild.test=$UP"
HOSTS="$HOSTS other.test=$UP bad.test=$UP loop.test=127.0.0.1 hostip.test=$HOSTIP meta.test=169.254.169.254"
HOSTS="$HOSTS closed.test=127.0.0.1"
start_daemon --listen 127.0.0.1:$API_PORT --egress-hosts "$HOSTS" --egress-extra-ca "$T/ca.pem" \
    --egress-resolver $UP:$DNS_PORT

# probe ID ARGS...: one network probe from inside the sandbox
probe() { id=$1; shift; "$G" exec "$id" -- python3 /tmp/probe.py "$@" 2>&1; }
mk() { # mk ID POLICY-JSON
    req POST /v1/sandboxes "{\"id\":\"$1\",\"network\":$2}"
    [ "$code" = 201 ] || { echo "create $1: $code $(cat "$T/body")"; exit 1; }
    "$G" cp "$(dirname "$0")/../lib/egress_probe.py" "$1:/tmp/probe.py" || exit 1
}

# ---- policy by name, wildcard, port; literal addresses ------------------------------------
mk pa "{\"rules\":[{\"action\":\"allow\",\"host\":\"api.test\"},{\"action\":\"allow\",\"host\":\"*.wild.test\"},
  {\"action\":\"allow\",\"host\":\"echo.test\",\"ports\":[$ECHO_PORT]},{\"action\":\"deny\",\"host\":\"deep.b.wild.test\"},
  {\"action\":\"allow\",\"host\":\"$UP\"},{\"action\":\"allow\",\"host\":\"loop.test\"},{\"action\":\"allow\",\"host\":\"hostip.test\"},
  {\"action\":\"allow\",\"host\":\"meta.test\"}]}"
check "an allowed name resolves to a synthetic address" eval 'probe pa resolve api.test | grep -q "^198\.1[89]\."'
check "a name no rule allows is NXDOMAIN" [ "$(probe pa resolve evil.test)" = "ERR gaierror" ]
check "AAAA answers are empty" [ "$(probe pa aaaa api.test)" = 0 ]
check "HTTP to an allowed name reaches the upstream" [ "$(probe pa http http://api.test/)" = "200 no" ]
check "HTTPS to an allowed name is spliced: the upstream's own certificate arrives" \
    [ "$(probe pa issuer api.test 443)" = "egress test CA" ]
check "a wildcard allows a subdomain" [ "$(probe pa http http://a.wild.test/)" = "200 no" ]
check "a wildcard does not allow the domain itself" [ "$(probe pa resolve wild.test)" = "ERR gaierror" ]
check "a more specific deny beats the wildcard" [ "$(probe pa resolve deep.b.wild.test)" = "ERR gaierror" ]
check "a non-HTTP protocol allowed by name:port" [ "$(probe pa tcp echo.test $ECHO_PORT)" = "echo hello" ]
check "the same name on another port is refused" eval \
    'probe pa tcp echo.test 80 | grep -q "ERR ECONNRESET"'
check "a literal IP no rule names is refused" eval 'probe pa tcp 198.51.100.7 80 | grep -q "ERR ECONNRESET"'
check "an address from the pool the DNS never gave out is refused" eval \
    'probe pa tcp 198.19.200.1 80 | grep -q "ERR ECONNRESET"'
check "UDP is dropped" eval 'probe pa udp 198.51.100.7 9999 | grep -q "^ERR"'
check "ICMP is dropped" eval 'probe pa icmp 198.51.100.7 | grep -q "^ERR"'
check "IPv6 goes nowhere" eval 'probe pa v6 2001:db8::1 80 | grep -q "^ERR"'

# ---- DNS rebinding and host services ------------------------------------------------------
check "an allowed name that resolves to loopback is refused (no rule names 127.0.0.1)" eval \
    'probe pa http http://loop.test/ | grep -q "ERR ECONNRESET"'
check "an allowed name that resolves to the metadata address is refused" eval \
    'probe pa http http://meta.test/ | grep -q "ERR ECONNRESET"'
check "an allowed name that resolves to the host's own address is refused" eval \
    "probe pa tcp hostip.test $ANY_PORT | grep -q 'ERR ECONNRESET'"
mk po '{"mode":"open"}'
check "open mode: the host's address, dialled literally, is refused" eval \
    "probe po tcp $HOSTIP $ANY_PORT | grep -q 'ERR ECONNRESET'"
check "open mode: the daemon's API port on the host's address is refused" eval \
    "probe po tcp $HOSTIP $API_PORT | grep -q 'ERR ECONNRESET'"
check "the daemon's API port on loopback is the sandbox's own loopback (nothing there)" eval \
    "probe po tcp 127.0.0.1 $API_PORT | grep -q 'ERR ECONNREFUSED'"
check "open mode: a private address is refused" eval 'probe po tcp 10.1.2.3 80 | grep -q "ERR ECONNRESET"'
check "the host service on 0.0.0.0 was never reached" eval "! grep -q reached '$T/upstream.log'"

# ---- SNI and Host must match the name ----------------------------------------------------
check "a TLS server name other than the resolved name is refused" eval \
    'probe pa https https://api.test/ other.test | grep -q "^ERR"'
check "an HTTP Host other than the resolved name is refused" eval \
    'probe pa http http://api.test/ other.test | grep -q "^ERR"'
# a connection to a name must say which name (issue 14 #11): no SNI, no Host, and every request
# of a connection, a pipelined one too, names the connection's host
check "a TLS ClientHello without a server name to a name is refused" eval \
    'probe pa nosni api.test 443 | grep -q "^ERR"'
check "HTTP/1.0 without Host to a name is refused" eval \
    'probe pa http10 api.test /t500-nohost | grep -q -e "^ERR" -e "^closed"'
out=$(probe pa pipeline api.test /t500-pipe1 other.test /t500-pipe2)
check "a pipelined request with another Host: the first is answered, the second refused" \
    eval "echo '$out' | grep -q 'responses [12]' && grep -q '/t500-pipe1' '$T/upstream.log'"
check "and the second never reached the upstream" eval "! grep -q '/t500-pipe2' '$T/upstream.log'"
check "nor did the request without Host" eval "! grep -q '/t500-nohost' '$T/upstream.log'"
check "keep-alive requests to the same name all go (relayed plain HTTP)" \
    [ "$(probe pa keepalive http://api.test/ka 3)" = "200 no 200 no 200 no" ]

# ---- request rules: method and path prefix (the host is intercepted for them) -------------
mk pl "{\"rules\":[{\"action\":\"allow\",\"host\":\"api.test\",\"methods\":[\"GET\"],\"path_prefix\":\"/v1/\"},{\"action\":\"allow\",\"host\":\"$UP\"}]}"
check "request rule: GET /v1/... is allowed (HTTPS, intercepted)" [ "$(probe pl https https://api.test/v1/items)" = "200 no" ]
check "request rule: another path is 403" [ "$(probe pl https https://api.test/v2/items)" = "403 None" ]
check "request rule: the same over plain HTTP" eval \
    '[ "$(probe pl http http://api.test/v1/x)" = "200 no" ] && [ "$(probe pl http http://api.test/admin)" = "403 None" ]'
check "request rule: a path climbing out with .. is 403" [ "$(probe pl http http://api.test/v1/../admin)" = "403 None" ]
check "request rule: the 403's body says denied by policy, and why" [ "$(probe pl body http://api.test/admin)" = \
    "403 glovebox egress: denied by policy: the request rules refuse this method or path" ]

# ---- credentials ---------------------------------------------------------------------------
printf '%s\n' "$SECRET" | "$G" secret add tok --host api.test \
    --header 'Authorization: Bearer ${secret}' >/dev/null
check "secret stored" [ $? -eq 0 ]
req GET /v1/secrets/tok
check "the API never returns the value" eval "[ '$code' = 200 ] && ! grep -q '$SECRET' '$T/body'"
req POST /v1/sandboxes '{"network":{"rules":[{"action":"allow","host":"api.test"}],"secrets":["nope"]}}'
check "attaching an unknown secret: 404" [ "$code" = 404 ]
mk pc "{\"rules\":[{\"action\":\"allow\",\"host\":\"api.test\"},{\"action\":\"allow\",\"host\":\"$UP\"}],\"secrets\":[\"tok\"]}"
: > "$T/upstream.log"
check "HTTPS through interception: the upstream saw the injected header" \
    [ "$(probe pc https https://api.test/one)" = "200 yes" ]
check "the header carried the secret's value" \
    grep -q "\"auth\": \"Bearer $SECRET\", \"port\": [0-9]*, \"tls\": true" "$T/upstream.log"
check "keep-alive through interception: every request injected" \
    [ "$(probe pc keepalive https://api.test/ka 3)" = "200 yes 200 yes 200 yes" ]
check "plain HTTP to the host is injected too" [ "$(probe pc http http://api.test/plain)" = "200 yes" ]
check "intercepted: the sandbox sees a certificate from the daemon's CA" eval \
    '[ "$(probe pc issuer api.test 443)" != "egress test CA" ]'
check "a sandbox without the secret is not intercepted" [ "$(probe pa issuer api.test 443)" = "egress test CA" ]
check "the secret is not in the sandbox's environment, files or /proc" eval \
    "! \"$G\" exec pc -- sh -c 'env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null; grep -rsa . /etc /tmp /root /home /run 2>/dev/null' | grep -qa '$SECRET'"
printf 'other\n' | "$G" secret add tok2 --host bad.test --header 'X-Token: ${secret}' >/dev/null
mk pd "{\"rules\":[{\"action\":\"allow\",\"host\":\"bad.test\"},{\"action\":\"allow\",\"host\":\"$UP\"}],\"secrets\":[\"tok2\"]}"
check "an upstream whose certificate does not name the host is refused" eval \
    'probe pd https https://bad.test/ | grep -q "^ERR"'
settle
req GET "/v1/sandboxes/pd/egress?limit=1000"
check "and the log says why" eval "field \"[e['reason'] for e in j['events'] if e['kind'] == 'conn']\" | grep -q 'upstream certificate'"
"$G" exec pc -- sh -c "python3 /tmp/probe.py kaspan https://api.test/span /tmp/go > /tmp/span 2>&1 &"
sleep 0.5
"$G" secret rm tok
check "revoked" [ $? -eq 0 ]
"$G" exec pc -- touch /tmp/go
for i in $(seq 50); do [ -n "$("$G" exec pc -- cat /tmp/span)" ] && break; sleep 0.1; done
check "revocation takes effect on the next request of an open connection" \
    [ "$("$G" exec pc -- cat /tmp/span)" = "200 yes 200 no" ]

# ---- live policy change, emergency block -------------------------------------------------
"$G" exec pa -- sh -c "python3 /tmp/probe.py hold echo.test $ECHO_PORT /tmp/held >/dev/null 2>&1 &"
for i in $(seq 50); do [ "$("$G" exec pa -- cat /tmp/held 2>/dev/null)" = up ] && break; sleep 0.1; done
"$G" egress policy pa "{\"rules\":[{\"action\":\"allow\",\"host\":\"echo.test\"},{\"action\":\"allow\",\"host\":\"$UP\"}]}" >/dev/null
check "policy replaced live" [ $? -eq 0 ]
check "a name the new policy drops is NXDOMAIN at once" [ "$(probe pa resolve api.test)" = "ERR gaierror" ]
check "the open connection it still allows stays up" [ "$("$G" exec pa -- cat /tmp/held)" = up ]
"$G" egress block >/dev/null
sleep 0.3
check "the emergency block cut the open connection" [ "$("$G" exec pa -- cat /tmp/held)" = cut ]
check "blocked: new connections are refused" eval "probe pa tcp echo.test $ECHO_PORT | grep -q '^ERR'"
check "blocked: names are NXDOMAIN" [ "$(probe pa resolve echo.test)" = "ERR gaierror" ]
req GET /v1/egress
check "the block is reported" [ "$(field "j['blocked']")" = True ]
"$G" egress unblock >/dev/null
check "unblocked: connections flow again" [ "$(probe pa tcp echo.test $ECHO_PORT)" = "echo hello" ]
curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$API_PORT/v1/egress/block" > "$T/code"
check "an API key cannot reach the block (401 without a key)" [ "$(cat "$T/code")" = 401 ]

# ---- malformed input from inside ---------------------------------------------------------
mk pm "{\"rules\":[{\"action\":\"allow\",\"host\":\"api.test\"},{\"action\":\"allow\",\"host\":\"$UP\"}]}"
check "a malformed ClientHello is refused" [ "$(probe pm raw api.test 443 160301000adeadbeef000000000000)" = reset ]
check "a malformed HTTP request is refused" [ "$(probe pm raw api.test 80 474554200001ff0d0a0d0a)" = reset ]
check "junk DNS over UDP and TCP" [ "$(probe pm dnsjunk)" = sent ]
req GET /healthz
check "the daemon is still serving" [ "$code" = 200 ]
check "and DNS still answers" eval 'probe pm resolve api.test | grep -q "^198\."'

# ---- denied by policy, or allowed and the upstream failed (issue 16 #4) ---------------------
# counts: the connection counters of /metrics: upstream_failed deny client_error
counts() {
    curl -s --max-time 10 --unix-socket "$S" http://glovebox/metrics | awk '
        $1 == "glovebox_egress_connections_total{decision=\"upstream_failed\"}" {u = $2}
        $1 == "glovebox_egress_connections_total{decision=\"deny\"}" {d = $2}
        $1 == "glovebox_egress_connections_total{decision=\"client_error\"}" {c = $2}
        END {print u, d, c}'
}
# plus COUNTS U D C: those counts with these added
plus() { echo "$1" | awk -v u="$2" -v d="$3" -v c="$4" '{print $1 + u, $2 + d, $3 + c}'; }
# conns: the sandbox pu's connection rows, "decision reason-up-to-its-first-colon" each
conns() {
    settle
    req GET "/v1/sandboxes/pu/egress?limit=1000"
    field "' | '.join('%s %s' % (e['decision'], e.get('reason', '').split(':')[0]) for e in j['events'] if e['kind'] == 'conn')"
}
mk pu "{\"rules\":[{\"action\":\"allow\",\"host\":\"gone.invalid\",\"ports\":[80,443]},
  {\"action\":\"allow\",\"host\":\"closed.test\",\"ports\":[$CLOSED_PORT]},{\"action\":\"allow\",\"host\":\"127.0.0.1\",\"ports\":[$CLOSED_PORT]},
  {\"action\":\"allow\",\"host\":\"slow.invalid\",\"ports\":[80]}]}"
c0=$(counts)
probe pu body http://gone.invalid/t500-gone > "$T/out"
check "allowed, the name does not resolve: plain HTTP is answered 502 with the reason" \
    grep -qx "502 glovebox egress: upstream failed: cannot resolve 'gone.invalid': .*" "$T/out"
check "counted upstream_failed in /metrics, not deny ($c0 -> $(plus "$c0" 1 0 0))" \
    [ "$(counts)" = "$(plus "$c0" 1 0 0)" ]
rows=$(conns)
check "its audit row says upstream_failed, with the reason" \
    [ "$rows" = "upstream_failed cannot resolve 'gone.invalid'" ]
check "and names the rule that allowed it" \
    [ "$(field "[e.get('rule') for e in j['events'] if e['kind'] == 'conn']")" = "[0]" ]
"$G" egress log pu > "$T/log.txt"
echo "# $(grep upstream_failed "$T/log.txt" | head -1)"
check "the egress log line says upstream_failed, not deny" \
    grep -Eq "conn +upstream_failed +gone\.invalid:80 +\(cannot resolve 'gone\.invalid'" "$T/log.txt"
check "the sandbox's counters: one upstream failure, no denial" \
    [ "$(field "'%d %d %d' % (j['stats']['connections_upstream_failed'], j['stats']['connections_denied'], j['stats']['connections_client_error'])")" = "1 0 0" ]
c0=$(counts)
check "over TLS the same failure is a reset (the protocol has no room for a reason)" eval \
    'probe pu https https://gone.invalid/ | grep -q "^ERR"'
check "and is counted upstream_failed too" [ "$(counts)" = "$(plus "$c0" 1 0 0)" ]
c0=$(counts)
check "allowed name pinned to a closed port on 127.0.0.1: reset" eval \
    "probe pu tcp closed.test $CLOSED_PORT | grep -q 'ERR ECONNRESET'"
check "counted upstream_failed (connect refused), its row says so" eval \
    "[ \"\$(counts)\" = '$(plus "$c0" 1 0 0)' ] && conns | grep -q ' | upstream_failed upstream connect failed\$' && grep -q 'upstream connect failed: Connection refused' '$T/body'"
c0=$(counts)
check "a port the policy does not allow is still denied" eval \
    'probe pu tcp gone.invalid 81 | grep -q "ERR ECONNRESET"'
check "counted deny, and its row says deny: denied by policy" eval \
    "[ \"\$(counts)\" = '$(plus "$c0" 0 1 0)' ] && conns | grep -q ' | deny denied by policy\$'"
c0=$(counts)
check "a malformed ClientHello to an allowed name is reset" \
    [ "$(probe pu raw gone.invalid 443 160301000adeadbeef000000000000)" = reset ]
check "counted client_error, and its row says so" eval \
    "[ \"\$(counts)\" = '$(plus "$c0" 0 0 1)' ] && conns | grep -q ' | client_error malformed TLS ClientHello\$'"
# the nameserver never answers slow.*: the resolution runs into the connect timeout (10 s)
c0=$(counts)
probe pu body http://slow.invalid/ 30 > "$T/out"
check "allowed, the resolution times out: plain HTTP is answered 504 with the reason" \
    [ "$(cat "$T/out")" = "504 glovebox egress: upstream timed out: resolving 'slow.invalid' timed out" ]
check "counted upstream_failed, and its row says so" eval \
    "[ \"\$(counts)\" = '$(plus "$c0" 1 0 0)' ] && conns | grep -q ' | upstream_failed resolving .slow.invalid. timed out\$'"
check "the sandbox's counters: 4 upstream failures, 1 denial, 1 client error" \
    [ "$(field "'%d %d %d' % (j['stats']['connections_upstream_failed'], j['stats']['connections_denied'], j['stats']['connections_client_error'])")" = "4 1 1" ]
check "nothing reached an upstream" eval "! grep -q t500-gone '$T/upstream.log'"

# ---- audit, log, counters ------------------------------------------------------------------
settle
req GET "/v1/sandboxes/pc/egress?limit=1000"
check "egress log: intercepted requests name the secret" eval \
    "field \"[e for e in j['events'] if e['kind'] == 'http' and e.get('secret') == 'tok']\" | grep -q path"
check "egress log: connections with bytes each way and duration" eval \
    "field \"[e for e in j['events'] if e['kind'] == 'conn' and e['decision'] == 'allow' and e['bytes_up'] > 0 and e['bytes_down'] > 0 and 'duration_ms' in e]\" | grep -q mode"
req GET "/v1/sandboxes/pa/egress?limit=1000"
check "egress log: DNS answers and refusals with reasons" eval \
    "field \"sorted(set((e['kind'], e['decision']) for e in j['events']))\" | grep -q \"('dns', 'deny')\""
check "egress log: a denied connection says why" eval \
    "field \"[e['reason'] for e in j['events'] if e['kind'] == 'conn' and e['decision'] == 'deny']\" | grep -q 'no rule names it'"
"$G" egress log pa > "$T/log.txt"
check "glovebox egress log prints the rows" eval "grep -q 'dns.*deny.*evil.test' '$T/log.txt' && grep -q 'conn.*allow' '$T/log.txt'"
check "audit rows are in the hash-chained log" eval \
    "q \"print(c.execute(\\\"select count(*) from audit where kind like 'egress.%'\\\").fetchone()[0])\" | awk '{exit !(\$1 > 20)}'"
check "the secret's value is in no audit row" eval \
    "! q \"print(c.execute('select group_concat(detail) from audit').fetchone()[0])\" | grep -q '$SECRET'"
check "the secret's value is not stored in clear" eval "! grep -qa '$SECRET' '$STATE/glovebox.db' '$STATE/glovebox.db-wal' 2>/dev/null"
check "the secret's value is in no log" eval "! grep -q '$SECRET' '$T/daemon.log'"
curl -s --unix-socket "$S" http://glovebox/metrics > "$T/metrics"
check "counters by decision" eval "grep -q 'glovebox_egress_connections_total{decision=\"deny\"} [1-9]' '$T/metrics' && grep -q 'glovebox_egress_dns_answers_total{decision=\"allow\"} [1-9]' '$T/metrics'"
ls -l "$STATE/egress/secrets.key" | grep -q '^-rw-------' 
check "the secret key file is readable by root only" [ $? -eq 0 ]

# ---- a restarted daemon takes its sandboxes' egress back ----------------------------------
"$G" egress block >/dev/null
PAPID=$(q "print(c.execute(\"select init_pid from sandboxes where id = 'pa'\").fetchone()[0])")
kill -9 "$DPID"; wait "$DPID" 2>/dev/null; DPID=
# (no daemon, no exec: enter the sandbox's network namespace from the host)
check "killed: the sandbox's egress fails closed (nothing listens for it)" eval \
    "nsenter -t $PAPID -n python3 -c 'import socket; socket.create_connection((\"198.51.100.7\", 80), timeout=2)' 2>&1 | grep -q ConnectionRefused"
mv "$T/daemon.log" "$T/daemon-1.log"
start_daemon --listen 127.0.0.1:$API_PORT --egress-hosts "$HOSTS" --egress-extra-ca "$T/ca.pem" \
    --egress-resolver $UP:$DNS_PORT
req GET /v1/egress
check "the emergency block survives a restart" [ "$(field "j['blocked']")" = True ]
"$G" egress unblock >/dev/null
check "the policy set live survives a restart" eval \
    "\"$G\" egress policy pa | grep -q echo.test && ! \"$G\" egress policy pa | grep -q api.test"
check "adopted: DNS and the proxy serve it again" [ "$(probe pa tcp echo.test $ECHO_PORT)" = "echo hello" ]
check "adopted: its policy still holds" [ "$(probe pa resolve api.test)" = "ERR gaierror" ]

spec_check
summary
