// The front router on the one listener (spec §1.5, §2.1, §5.4): what reaches the control plane
// and what reaches a sandbox's envd, before any service does anything.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, AuthenticationError } from 'e2b';
import { api, envd, env } from './lib.mjs';

test('control plane: no key or a wrong key is 401 with a numeric code in the body', async () => {
    for (const key of [null, 'gbx_not_a_key']) {
        const r = await api('GET', '/v2/sandboxes', undefined, { headers: { 'X-API-KEY': key } });
        assert.equal(r.status, 401);
        assert.equal(r.json?.code, 401);
        assert.equal(typeof r.json?.message, 'string');
    }
});

test('the SDK raises AuthenticationError for a wrong key', async () => {
    await assert.rejects(Sandbox.list({ apiKey: 'gbx_wrong' }).nextItems(), AuthenticationError);
    await assert.rejects(Sandbox.create({ apiKey: 'gbx_wrong' }), AuthenticationError);
});

test('envd for an unknown sandbox: 502 with the edge body', async () => {
    for (const [method, path] of [['GET', '/health'], ['GET', '/files?path=%2Fetc%2Fhostname'],
                                  ['POST', '/process.Process/List']]) {
        const r = await envd('no-such-sandbox', method, path, { body: method === 'POST' ? {} : undefined });
        assert.equal(r.status, 502, `${method} ${path}`);
        assert.match(r.headers.get('content-type') || '', /application\/json/);
        assert.deepEqual(r.json, { sandboxId: 'no-such-sandbox', message: 'The sandbox was not found', code: 502 });
    }
});

test('the SDK sees an unknown sandbox as not running', async () => {
    const r = await fetch(`${env.apiUrl}/healthz`);
    assert.equal(r.status, 200);
    // a Sandbox object for an id that does not exist: isRunning() asks envd's /health
    const { Sandbox: S } = await import('e2b');
    const sbx = new S({ sandboxId: 'no-such-sandbox', envdVersion: '0.6.4', envdAccessToken: 'x' });
    assert.equal(await sbx.isRunning(), false);
});
