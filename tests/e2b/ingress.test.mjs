// Ingress through the E2B SDK: sbx.getHost(port) names a server started inside the sandbox,
// reached through the daemon's listener with the sandbox's traffic token, a WebSocket too.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { randomBytes, createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { newSandbox, killAll, waitFor, env } from './lib.mjs';

after(killAll);
const listener = new URL(env.apiUrl);

// GET path from host (getHost's answer) through the listener: {status, body}
function get(host, path, headers = {}) {
    return new Promise((resolve, reject) => {
        const req = http.request(
            { host: listener.hostname, port: listener.port, path, headers: { Host: host, ...headers } },
            (res) => {
                let body = '';
                res.setEncoding('utf8');
                res.on('data', (d) => (body += d));
                res.on('end', () => resolve({ status: res.statusCode, body }));
            },
        );
        req.on('error', reject);
        req.setTimeout(10000, () => req.destroy(new Error('timed out')));
        req.end();
    });
}

test('getHost(port) reaches a server the sandbox runs in the background', async () => {
    const sbx = await newSandbox();
    await sbx.files.write('/tmp/www/index.html', 'hello from inside');
    await sbx.commands.run('cd /tmp/www && exec python3 -m http.server 8000 --bind 127.0.0.1', {
        background: true,
    });
    const host = sbx.getHost(8000);
    assert.equal(host, `8000-${sbx.sandboxId}.localhost:${listener.port}`);
    assert.ok(sbx.trafficAccessToken, 'the create answered with a traffic token');
    const token = { 'e2b-traffic-access-token': sbx.trafficAccessToken };
    const r = await waitFor(
        async () => {
            const x = await get(host, '/index.html', token);
            return x.status === 200 ? x : null;
        },
        { what: 'the server inside to answer' },
    );
    assert.equal(r.body, 'hello from inside');
    const none = await get(host, '/index.html');
    assert.equal(none.status, 401, 'a private sandbox refuses a request without a credential');
    const wrong = await get(host, '/index.html', { 'e2b-traffic-access-token': 'x'.repeat(64) });
    assert.equal(wrong.status, 404);
    const nobody = await get(sbx.getHost(8001), '/', token);
    assert.equal(nobody.status, 502);
    assert.match(nobody.body, /nobody listens on port 8001/);
});

test('a WebSocket server inside answers through getHost', async () => {
    const sbx = await newSandbox();
    const echo = readFileSync(fileURLToPath(new URL('../lib/ws_echo.py', import.meta.url)));
    await sbx.files.write('/tmp/ws_echo.py', echo);
    await sbx.commands.run('exec python3 /tmp/ws_echo.py server 8765', { background: true });
    const host = sbx.getHost(8765);
    const got = await waitFor(
        () =>
            new Promise((resolve, reject) => {
                const key = randomBytes(16).toString('base64');
                const req = http.request({
                    host: listener.hostname,
                    port: listener.port,
                    path: '/ws',
                    headers: {
                        Host: host,
                        Connection: 'Upgrade',
                        Upgrade: 'websocket',
                        'Sec-WebSocket-Key': key,
                        'Sec-WebSocket-Version': '13',
                        'e2b-traffic-access-token': sbx.trafficAccessToken,
                    },
                });
                req.on('response', () => resolve(null)); // not upgraded (yet): try again
                req.on('error', reject);
                req.setTimeout(10000, () => req.destroy(new Error('timed out')));
                req.on('upgrade', (res, socket) => {
                    const accept = createHash('sha1')
                        .update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11')
                        .digest('base64');
                    assert.equal(res.headers['sec-websocket-accept'], accept);
                    const text = Buffer.from('ping');
                    const mask = randomBytes(4);
                    const payload = Buffer.from(text.map((b, i) => b ^ mask[i % 4]));
                    socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | text.length]), mask, payload]));
                    let buf = Buffer.alloc(0);
                    socket.on('data', (d) => {
                        buf = Buffer.concat([buf, d]);
                        if (buf.length >= 2 && buf.length >= 2 + (buf[1] & 0x7f)) {
                            socket.destroy();
                            resolve(buf.subarray(2, 2 + (buf[1] & 0x7f)).toString());
                        }
                    });
                });
                req.end();
            }),
        { what: 'the WebSocket server inside', timeoutMs: 15000 },
    );
    assert.equal(got, 'echo:ping');
});
