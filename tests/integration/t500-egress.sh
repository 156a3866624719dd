#!/bin/sh
# The egress gateway, tested from inside sandboxes: DNS answers by policy, connections by
# name, wildcard and port, literal addresses, UDP/ICMP/IPv6 dropped, DNS-rebinding and host
# services refused, SNI/Host mismatches, credential injection over intercepted HTTPS and HTTP
# (and the secret nowhere inside, nor in logs or the audit), revocation, live policy change,
# the emergency block, malformed input, the audit rows and the counters.
# Every upstream is on this machine: 127.0.0.7 (ports 80, 443, an echo port) and a listener
# on 0.0.0.0 standing for a host service. No traffic goes anywhere else.
NAME=egress
. "$(dirname "$0")/../lib/daemon.sh"
command -v openssl >/dev/null || { echo "skip: openssl not installed"; exit 77; }
G="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
UP=127.0.0.7
ECHO_PORT=7007
ANY_PORT=7008
API_PORT=7009
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
trap 'kill $UPID 2>/dev/null; cleanup' EXIT
for i in $(seq 100); do [ -e "$T/upstream.ready" ] && break; sleep 0.05; done
[ -e "$T/upstream.ready" ] || { echo "upstream did not start:"; cat "$T/upstream.err"; exit 1; }

HOSTS="api.test=$UP echo.test=$UP a.wild.test=$UP wild.test=$UP deep.b.wild.test=$UP"
HOSTS="$HOSTS other.test=$UP bad.test=$UP loop.test=127.0.0.1 hostip.test=$HOSTIP meta.test=169.254.169.254"
start_daemon --listen 127.0.0.1:$API_PORT --egress-hosts "$HOSTS" --egress-extra-ca "$T/ca.pem"

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
start_daemon --listen 127.0.0.1:$API_PORT --egress-hosts "$HOSTS" --egress-extra-ca "$T/ca.pem"
req GET /v1/egress
check "the emergency block survives a restart" [ "$(field "j['blocked']")" = True ]
"$G" egress unblock >/dev/null
check "the policy set live survives a restart" eval \
    "\"$G\" egress policy pa | grep -q echo.test && ! \"$G\" egress policy pa | grep -q api.test"
check "adopted: DNS and the proxy serve it again" [ "$(probe pa tcp echo.test $ECHO_PORT)" = "echo hello" ]
check "adopted: its policy still holds" [ "$(probe pa resolve api.test)" = "ERR gaierror" ]

spec_check
summary
