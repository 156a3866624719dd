// Playwright (the published playwright-core, no browser of its own) drives the Chromium inside a
// sandbox over CDP, through gloveboxd's ingress, unmodified: connectOverCDP to the path form
// of port 9222, a page served inside the sandbox, a cookie that survives a snapshot and a clone,
// a navigation to a name the egress policy denies (it fails, and the egress log says so), and
// the daemon's own screenshot. Run by run.sh (GBX_URL, GBX_KEY).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const URL_ = process.env.GBX_URL;
const KEY = process.env.GBX_KEY;
if (!URL_ || !KEY) throw new Error('GBX_URL and GBX_KEY are not set: run tests/browser/run.sh');
const auth = { Authorization: `Bearer ${KEY}` };

async function v1(method, path, body) {
    const r = await fetch(URL_ + path, {
        method,
        headers: { ...auth, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
    });
    const buf = Buffer.from(await r.arrayBuffer());
    let json;
    try { json = JSON.parse(buf.toString()); } catch { json = undefined; }
    return { status: r.status, json, text: buf.toString(), buf, type: r.headers.get('content-type') };
}

async function sh(id, script) {
    const r = await v1('POST', `/v1/sandboxes/${id}/exec`, { shell: script, wait: true });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.exit_code, 0, `${script}: ${r.text}`);
    return r.json;
}

const made = [];
after(async () => {
    for (const id of made) await v1('DELETE', `/v1/sandboxes/${id}`);
});

async function newSandbox() {
    const c = await v1('POST', '/v1/sandboxes', { timeout: 600 });
    assert.equal(c.status, 201, c.text);
    made.push(c.json.id);
    return c.json.id;
}

const PAGE = 'http://127.0.0.1:8000/';
const cdpUrl = (id) => `${URL_}/v1/sandboxes/${id}/ports/9222`;

test('connectOverCDP through ingress: a page inside, a cookie kept by snapshot and clone, egress', async () => {
    const id = await newSandbox();
    // a site inside the sandbox, on its own loopback
    await sh(id, "mkdir -p /srv/site && printf '<html><head><title>Glovebox site</title></head>" +
        "<body>hello</body></html>' > /srv/site/index.html && cd /srv/site && " +
        '(nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &)');
    const b = await v1('POST', `/v1/sandboxes/${id}/browser`, {});
    assert.equal(b.status, 200, b.text);
    assert.equal(b.json.running, true);
    assert.equal(b.json.port, 9222);
    assert.equal(b.json.ingress_path, `/v1/sandboxes/${id}/ports/9222/`);

    // /json/version points back through the daemon, with the path form's prefix
    const port = new URL(URL_).port;
    const ver = await (await fetch(cdpUrl(id) + '/json/version', { headers: auth })).json();
    assert.match(ver.webSocketDebuggerUrl,
        new RegExp(`^ws://127\\.0\\.0\\.1:${port}/v1/sandboxes/${id}/ports/9222/devtools/browser/`));
    assert.match(ver.Browser, /Chrome\//);
    // ... and only for the owner
    assert.equal((await fetch(cdpUrl(id) + '/json/version')).status, 401);

    const browser = await chromium.connectOverCDP(cdpUrl(id), { headers: auth });
    const ctx = browser.contexts()[0];
    const page = await ctx.newPage();
    await page.goto(PAGE);
    assert.equal(await page.title(), 'Glovebox site');
    await ctx.addCookies([{
        name: 'session', value: 'logged-in-42', url: PAGE,
        expires: Math.floor(Date.now() / 1000) + 3600,
    }]);
    const set = await ctx.cookies(PAGE);
    assert.ok(set.some((c) => c.name === 'session' && c.value === 'logged-in-42'));

    // the browser's traffic is the sandbox's: a name the policy denies does not resolve
    await assert.rejects(page.goto('http://denied-by-policy.example.com/', { timeout: 15000 }),
        /net::ERR_/);
    await browser.close(); // (over CDP: disconnects; the browser stays up)

    const eg = await v1('GET', `/v1/sandboxes/${id}/egress?limit=1000`);
    assert.equal(eg.status, 200, eg.text);
    assert.ok(eg.text.includes('denied-by-policy.example.com'), 'the denied name is in the egress log');

    // the daemon's own screenshot of the page
    const shot = await v1('GET', `/v1/sandboxes/${id}/browser/screenshot`);
    assert.equal(shot.status, 200, shot.text);
    assert.equal(shot.type, 'image/png');
    assert.deepEqual([...shot.buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

    // stop (Chromium writes its profile out), snapshot, clone: the clone's browser has the cookie
    const stop = await v1('DELETE', `/v1/sandboxes/${id}/browser`);
    assert.equal(stop.status, 200, stop.text);
    assert.equal(stop.json.running, false);
    assert.equal(stop.json.was_running, true);
    const snap = await v1('POST', `/v1/sandboxes/${id}/snapshots`, {});
    assert.equal(snap.status, 201, snap.text);
    const clone = await v1('POST', `/v1/snapshots/${snap.json.id}/clone`, {});
    assert.equal(clone.status, 201, clone.text);
    const cid = clone.json.sandboxes[0].id;
    made.push(cid);
    await sh(cid, 'cd /srv/site && (nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &)');
    const b2 = await v1('POST', `/v1/sandboxes/${cid}/browser`, {});
    assert.equal(b2.status, 200, b2.text);
    const again = await chromium.connectOverCDP(cdpUrl(cid), { headers: auth });
    const ctx2 = again.contexts()[0];
    const kept = await ctx2.cookies(PAGE);
    assert.ok(kept.some((c) => c.name === 'session' && c.value === 'logged-in-42'),
        `the clone's browser has the cookie (it has ${JSON.stringify(kept)})`);
    const p2 = await ctx2.newPage();
    await p2.goto(PAGE);
    assert.equal(await p2.title(), 'Glovebox site');
    await again.close();

    // and the original sandbox's browser starts again on the same profile
    const b3 = await v1('POST', `/v1/sandboxes/${id}/browser`, {});
    assert.equal(b3.status, 200, b3.text);
    const st = await v1('GET', `/v1/sandboxes/${id}/browser`);
    assert.equal(st.json.running, true);
});
