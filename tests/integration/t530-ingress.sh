#!/bin/sh
# test-timeout: 240
# Ingress: "<port>-<id>.<ingress domain>" on the TCP listener reaches a server inside the
# sandbox, on its own loopback: keep-alive, a large download intact and with backpressure (a
# slow client does not grow the daemon), a WebSocket upgrade passed through; the owner's key or
# the sandbox's traffic token only (no key 401, an invalid key 401, another key's sandbox 404
# like one that does not exist); 400 for a malformed port, 403 for the daemon's own ports in
# the sandbox, 409 while paused, 502 when nobody listens; audited, counted; E2B's create says
# the domain; a reload changes it.
NAME=ingress
. "$(dirname "$0")/../lib/daemon.sh"
GB="$BUILD/glovebox"
export GLOVEBOX_RUNTIME_DIR="$RUN"
PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
DOMAIN="sbx.test:$PORT"
printf 'ingress-domain = %s\n' "$DOMAIN" > "$T/conf"
start_daemon --config "$T/conf" --listen "127.0.0.1:$PORT"
A=$("$GB" apikey create team-a 2>/dev/null); B=$("$GB" apikey create team-b 2>/dev/null)
R=$("$GB" apikey create gone 2>/dev/null); "$GB" apikey revoke gone > /dev/null

# a sandbox of A's, through E2B's create: its token and the domain come back
curl -s -X POST -H "X-API-KEY: $A" -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/v2/sandboxes" \
    -d '{"templateID":"base","timeout":600}' > "$T/e2b.json"
id=$(python3 -c "import json; print(json.load(open('$T/e2b.json'))['sandboxID'])")
tok=$(python3 -c "import json; print(json.load(open('$T/e2b.json'))['trafficAccessToken'])")
check "E2B's create names the ingress domain" [ "$(python3 -c "import json; print(json.load(open('$T/e2b.json'))['domain'])")" = "$DOMAIN" ]
H="8000-$id.sbx.test:$PORT"

check "glovebox port prints the URL" [ "$("$GB" port "$id" 8000)" = "http://8000-$id.sbx.test:$PORT/" ]
check "glovebox port --json" [ "$("$GB" port "$id" 8000 --json | python3 -c 'import json, sys; j = json.load(sys.stdin); print(j["sandbox"], j["port"], j["url"])')" = "$id 8000 http://8000-$id.sbx.test:$PORT/" ]
"$GB" port nosuch 8000 2> /dev/null
check "glovebox port: an unknown sandbox exits 3" [ $? -eq 3 ]
"$GB" port "$id" 0 2> /dev/null
check "glovebox port: port 0 is a usage error" [ $? -eq 2 ]

# get HOST [CURL ARGS...]: through ingress; sets $code, body in $T/body
get() {
    h=$1; shift
    code=$(curl -s --max-time 30 -o "$T/body" -w '%{http_code}' -H "Host: $h" "$@" "http://127.0.0.1:$PORT/x.txt")
}
# an HTTP/1.1 server (keep-alive) in the sandbox, on its loopback
"$GB" exec "$id" -- sh -c 'mkdir -p /tmp/www && echo hello-ingress > /tmp/www/x.txt &&
    head -c 67108864 /dev/urandom > /tmp/www/big && sha256sum /tmp/www/big | cut -d" " -f1 > /tmp/www/big.sum'
"$GB" exec -d "$id" -- python3 -c 'import functools, http.server as h
h.SimpleHTTPRequestHandler.protocol_version = "HTTP/1.1"
h.ThreadingHTTPServer(("127.0.0.1", 8000), functools.partial(h.SimpleHTTPRequestHandler, directory="/tmp/www")).serve_forever()' > /dev/null
for i in $(seq 100); do get "$H" -H "Authorization: Bearer $A"; [ "$code" = 200 ] && break; sleep 0.1; done
check "the owner's key reaches the server inside" eval '[ "$code" = 200 ] && [ "$(cat "$T/body")" = hello-ingress ]'
get "$H" -H "X-API-Key: $A"
check "X-API-Key too" [ "$code" = 200 ]
get "$H" -H "E2B-Traffic-Access-Token: $tok"
check "the sandbox's traffic token too" [ "$code" = 200 ]
curl -s -v -H "Host: $H" -H "Authorization: Bearer $A" "http://127.0.0.1:$PORT/x.txt" "http://127.0.0.1:$PORT/x.txt" > "$T/two" 2> "$T/two.err"
check "keep-alive: two requests on one connection" eval '[ "$(grep -c hello-ingress "$T/two")" = 2 ] && grep -q "Re-using existing connection" "$T/two.err"'

# a half-close is passed on: the client ends its side after the request and still reads
# the whole answer (the server saw the end of the request stream, not a reset)
cat > "$T/half.py" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(("GET /x.txt HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n" % (sys.argv[2], sys.argv[3])).encode())
s.shutdown(socket.SHUT_WR)
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(data.split(b"\r\n\r\n", 1)[1].decode().strip())
EOF
check "a client's half-close is passed on; the answer still arrives whole" [ "$(python3 "$T/half.py" "$PORT" "$H" "$A")" = hello-ingress ]

get "$H"
check "no credential: 401" eval '[ "$code" = 401 ] && grep -q "a credential is needed" "$T/body"'
get "$H" -H "Authorization: Bearer $R"
check "a revoked key: 401" [ "$code" = 401 ]
get "$H" -H "Authorization: Bearer $B"
sed "s/$id/ID/" "$T/body" > "$T/other"
check "another key's sandbox: 404" [ "$code" = 404 ]
get "8000-sb-000000000000.sbx.test:$PORT" -H "Authorization: Bearer $B"
sed "s/sb-000000000000/ID/" "$T/body" > "$T/none"
check "the same answer as a sandbox that does not exist" cmp -s "$T/other" "$T/none"
get "8000-$id.sbx.test" -H "E2B-Traffic-Access-Token: wrong"
check "a wrong traffic token: 404" [ "$code" = 404 ]
for bad in "0-$id" "65536-$id" "http-$id" "8000" "8000-"; do
    get "$bad.sbx.test:$PORT" -H "Authorization: Bearer $A"
    check "host '$bad': 400 saying why" eval '[ "$code" = 400 ] && grep -q "ingress:" "$T/body"'
done
get "8001-$id.sbx.test:$PORT" -H "Authorization: Bearer $A"
check "a port nobody listens on: 502 saying so" eval '[ "$code" = 502 ] && grep -q "nobody listens on port 8001" "$T/body"'
get "901-$id.sbx.test:$PORT" -H "Authorization: Bearer $A"
check "the daemon's egress port in the sandbox: 403" [ "$code" = 403 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $A" "http://127.0.0.1:$PORT/v1/sandboxes")
check "the API still answers on the same listener" [ "$code" = 200 ]

# the path form, for setups without wildcard DNS: /v1/sandboxes/ID/ports/PORT/...
P="http://127.0.0.1:$PORT/v1/sandboxes/$id/ports/8000"
code=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $A" "$P/x.txt")
check "the path form reaches the same server" eval '[ "$code" = 200 ] && [ "$(cat "$T/body")" = hello-ingress ]'
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $A" "$P?x=1")
check "the path form: the port alone, with a query" [ "$code" = 200 ]
code=$(curl -s -o /dev/null -w '%{http_code}' "$P/x.txt")
check "the path form: no credential, 401" [ "$code" = 401 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $B" "$P/x.txt")
check "the path form: another key, 404" [ "$code" = 404 ]
code=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $A" "http://127.0.0.1:$PORT/v1/sandboxes/$id/ports/http/")
check "the path form: a port that is not one, 400" eval '[ "$code" = 400 ] && grep -q "port must be" "$T/body"'
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $A" "http://127.0.0.1:$PORT/v1/sandboxes/$id")
check "the sandbox's own API route is untouched" [ "$code" = 200 ]
curl -s -H "Authorization: Bearer $A" "$P/x.txt" "$P/x.txt" > "$T/two"
check "the path form: two requests in a row (each on its own connection)" [ "$(grep -c hello-ingress "$T/two")" = 2 ]

# a large download arrives whole; a slow client holds the daemon's memory down
code=$(curl -s --max-time 60 -o "$T/big" -w '%{http_code}' -H "Host: $H" -H "Authorization: Bearer $A" "http://127.0.0.1:$PORT/big")
want=$("$GB" exec "$id" -- cat /tmp/www/big.sum)
check "64 MiB through ingress, intact" eval '[ "$code" = 200 ] && [ "$(sha256sum < "$T/big" | cut -d" " -f1)" = "$want" ]'
rm -f "$T/big"
m() { curl -s --unix-socket "$S" http://glovebox/metrics | awk -v n="$1" '$1 == n {print $2}'; }
curl -s --max-time 6 --limit-rate 256K -o /dev/null -H "Host: $H" -H "Authorization: Bearer $A" "http://127.0.0.1:$PORT/big" &
SLOW=$!
held=0
for i in 1 2 3 4 5 6 7 8; do
    sleep 0.5
    h=$(m glovebox_ingress_buffered_bytes); [ "${h:-0}" -gt "$held" ] && held=$h
done
kill "$SLOW" 2>/dev/null; wait "$SLOW" 2>/dev/null
echo "# the most the daemon held for a slow 64 MiB download (256 KiB/s): $held bytes"
check "a slow client does not grow what the daemon holds (its two 1 MiB pipes at most)" [ "$held" -le 2097152 ]

# a WebSocket upgrade goes through
"$GB" cp "$(dirname "$0")/../lib/ws_echo.py" "$id:/tmp/ws_echo.py"
"$GB" exec -d "$id" -- python3 /tmp/ws_echo.py server 8765 > /dev/null
for i in $(seq 100); do
    out=$(python3 "$(dirname "$0")/../lib/ws_echo.py" client 127.0.0.1 "$PORT" "8765-$id.sbx.test:$PORT" ping "Authorization: Bearer $A" 2>&1) && break
    sleep 0.1
done
check "a WebSocket echo through ingress" [ "$out" = "echo:ping" ]
out=$(python3 "$(dirname "$0")/../lib/ws_echo.py" client 127.0.0.1 "$PORT" "8765-$id.sbx.test:$PORT" ping 2>&1)
check "and not without a credential" eval 'echo "$out" | grep -q " 401 "'
cat > "$T/wspath.py" <<'EOF'
import base64, os, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /v1/sandboxes/%s/ports/8765/ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
           "Sec-WebSocket-Version: 13\r\n\r\n" % (sys.argv[2], sys.argv[3], key)).encode())
print(s.recv(4096).split(b"\r\n")[0].decode())
EOF
out=$(python3 "$T/wspath.py" "$PORT" "$id" "$A")
check "a WebSocket upgrade through the path form (101)" eval 'echo "$out" | grep -q " 101 "'

# held connections from one address count against --max-conns-per-ip (a reload sets it)
printf 'ingress-domain = %s\nmax-conns-per-ip = 3\n' "$DOMAIN" > "$T/conf"
"$GB" daemon reload > /dev/null
cat > "$T/hold.py" <<'EOF'
import base64, os, socket, sys
port, host, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def upgrade():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
               % (host, key, base64.b64encode(os.urandom(16)).decode())).encode())
    return s, s.recv(4096).decode(errors="replace")
held = [upgrade() for _ in range(3)]
print(" ".join(line.split()[1] for _, line in held))
s, line = upgrade()
print(line.replace("\r\n", " "))
EOF
out=$(python3 "$T/hold.py" "$PORT" "8765-$id.sbx.test:$PORT" "$A")
check "three held connections from one address are served" [ "$(echo "$out" | head -1)" = "101 101 101" ]
check "the fourth is refused, 503 (ingress's per-address cap)" eval 'echo "$out" | tail -1 | grep -q " 503 .*ingress connections from this address"'
printf 'ingress-domain = %s\n' "$DOMAIN" > "$T/conf"
"$GB" daemon reload > /dev/null

# public sandboxes take any request: native "public": true, E2B's allowPublicTraffic
pub=$(curl -s -H "Authorization: Bearer $A" -X POST "http://127.0.0.1:$PORT/v1/sandboxes" -d '{"public":true}' |
    python3 -c 'import json, sys; j = json.load(sys.stdin); print(j["id"] if j["public"] else "")')
check "a public sandbox says so" [ -n "$pub" ]
"$GB" exec -d "$pub" -- python3 -m http.server 8000 --bind 127.0.0.1 --directory /etc > /dev/null
for i in $(seq 100); do get "8000-$pub.sbx.test:$PORT"; [ "$code" = 200 ] && break; sleep 0.1; done
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: 8000-$pub.sbx.test:$PORT" "http://127.0.0.1:$PORT/hostname")
check "public: no credential needed" [ "$code" = 200 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: 8000-$pub.sbx.test:$PORT" -H "Authorization: Bearer $B" "http://127.0.0.1:$PORT/hostname")
check "public: another key's request too" [ "$code" = 200 ]
curl -s -X POST -H "X-API-KEY: $A" -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/v2/sandboxes" \
    -d '{"templateID":"base","network":{"allowPublicTraffic":true}}' > "$T/e2bpub.json"
epub=$(python3 -c "import json; print(json.load(open('$T/e2bpub.json'))['sandboxID'])")
check "E2B's allowPublicTraffic: true makes it public" [ "$(curl -s -H "Authorization: Bearer $A" "http://127.0.0.1:$PORT/v1/sandboxes/$epub" | python3 -c 'import json, sys; print(json.load(sys.stdin)["public"])')" = True ]
check "and a sandbox that does not ask is private" [ "$(curl -s -H "Authorization: Bearer $A" "http://127.0.0.1:$PORT/v1/sandboxes/$id" | python3 -c 'import json, sys; print(json.load(sys.stdin)["public"])')" = False ]
check "glovebox create --public" [ "$("$GB" create --public --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["public"])')" = True ]
"$GB" kill "$pub" "$epub" > /dev/null

# paused: 409
"$GB" pause "$id" > /dev/null
get "$H" -H "Authorization: Bearer $A"
check "a paused sandbox: 409" eval '[ "$code" = 409 ] && grep -q "resume it first" "$T/body"'
"$GB" resume "$id" > /dev/null
get "$H" -H "Authorization: Bearer $A"
check "resumed: 200 again" [ "$code" = 200 ]

# counted and audited
check "metrics: proxied connections" [ "$(m 'glovebox_ingress_connections_total{result="proxied"}')" -ge 6 ]
check "metrics: refused ones" [ "$(m 'glovebox_ingress_connections_total{result="refused"}')" -ge 10 ]
check "metrics: unreachable ones" [ "$(m 'glovebox_ingress_connections_total{result="unreachable"}')" -ge 1 ]
"$GB" audit log --kind ingress.connection --sandbox "$id" --json > "$T/audit"
check "each proxied connection is audited (port, client, bytes)" python3 -c "
import json
rows = [json.loads(l) for l in open('$T/audit')]
assert len(rows) >= 6, rows
d = rows[0]['detail']
assert d['port'] == 8000 and d['client'] == '127.0.0.1' and d['bytes_out'] > 0 and rows[0]['actor'] == 'team-a', rows[0]
assert any(r['detail']['bytes_out'] > 64 << 20 for r in rows), 'the big download'
"

# many half-open connections are bounded and the daemon goes on answering
python3 - "$PORT" "$T/half" <<'EOF' &
import resource, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
conns = []
for i in range(1000):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
        s.sendall(b"GET / HTTP/1.1\r\nHost: 8000-x.sbx.test\r\n")  # never ends
        conns.append(s)
    except OSError:
        pass
open(sys.argv[2], "w").write(str(len(conns)))
time.sleep(8)
EOF
HALF=$!
for i in $(seq 100); do [ -s "$T/half" ] && break; sleep 0.1; done
check "while 1,000 ingress heads hang (those the daemon took): /healthz answers" [ "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' --unix-socket "$S" http://glovebox/healthz)" = 200 ]
get "$H" -H "Authorization: Bearer $A"
check "ingress from the same address is held to the per-address cap meanwhile (503)" [ "$code" = 503 ]
kill "$HALF" 2>/dev/null; wait "$HALF" 2>/dev/null
for i in $(seq 100); do get "$H" -H "Authorization: Bearer $A"; [ "$code" = 200 ] && break; sleep 0.1; done
check "and answered again once they are gone" [ "$code" = 200 ]

# a reload changes the domain: the old one is the API's again
printf 'ingress-domain = third.test\n' > "$T/conf"
"$GB" daemon reload > /dev/null
get "$H" -H "Authorization: Bearer $A"
check "after a reload the old domain is the API's (no such route)" [ "$code" = 404 ]
get "8000-$id.third.test" -H "Authorization: Bearer $A"
check "the new one is ingress's" eval '[ "$code" = 200 ] && [ "$(cat "$T/body")" = hello-ingress ]'
printf '\n' > "$T/conf"
"$GB" daemon reload > /dev/null
check "no ingress domain: glovebox port gives the path form" [ "$("$GB" port "$id" 8000)" = "http://127.0.0.1:$PORT/v1/sandboxes/$id/ports/8000/" ]
summary
