// The control plane in depth with the unmodified SDK (shared/protocols/e2b.md §2): create with
// metadata/envs/timeout, getInfo, list with filters and pagination, setTimeout, getMetrics,
// pause → connect, kill, the not-found and error mappings, and what is not implemented yet.
// The wire shapes (204s, error bodies, X-Next-Token, 429 + Retry-After under a low rate limit)
// are held by tests/integration/t400-e2b-control.sh.
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import {
    Sandbox, SandboxError, SandboxNotFoundError, AuthenticationError,
} from 'e2b';
import { api, env, newSandbox, randomName, track, waitFor } from './lib.mjs';

const near = (a, b, slackMs, what) =>
    assert.ok(Math.abs(a - b) <= slackMs, `${what}: ${a} is not within ${slackMs} ms of ${b}`);

async function listAll(opts) {
    const pager = Sandbox.list(opts);
    const pages = [];
    while (pager.hasNext) pages.push(await pager.nextItems());
    return pages;
}

describe('create and getInfo', () => {
    const tag = randomName('ctl');
    let sbx;
    let t0;

    before(async () => {
        t0 = Date.now();
        sbx = await newSandbox({
            metadata: { suite: 'control', tag },
            envs: { FROM_CREATE: 'yes' },
            timeoutMs: 120_000,
        });
    });

    test('getInfo reports what create asked for', async () => {
        const info = await sbx.getInfo();
        assert.equal(info.sandboxId, sbx.sandboxId);
        assert.equal(info.templateId, 'base');
        assert.deepEqual(info.metadata, { suite: 'control', tag });
        assert.equal(info.state, 'running');
        assert.equal(info.envdVersion, '0.6.4');
        assert.ok(Number.isInteger(info.cpuCount) && info.cpuCount > 0, 'cpuCount');
        assert.ok(Number.isInteger(info.memoryMB) && info.memoryMB > 0, 'memoryMB');
        assert.ok(info.startedAt instanceof Date);
        near(info.startedAt.getTime(), t0, 10_000, 'startedAt');
        near(info.endAt.getTime() - info.startedAt.getTime(), 120_000, 1_000, 'endAt - startedAt');
        assert.deepEqual(info.lifecycle, { onTimeout: 'kill', autoResume: false });
        assert.equal(info.allowInternetAccess, false);
    });

    test('Sandbox.getInfo(id) is the same request', async () => {
        const info = await Sandbox.getInfo(sbx.sandboxId);
        assert.equal(info.sandboxId, sbx.sandboxId);
        assert.deepEqual(info.metadata, { suite: 'control', tag });
    });

    test('envs become the environment of every command', async () => {
        const r = await sbx.commands.run('echo "$FROM_CREATE"');
        assert.equal(r.stdout, 'yes\n');
    });

    test('the raw create reply has the Sandbox fields', async () => {
        const r = await api('POST', '/v2/sandboxes', { templateID: 'base', timeout: 60 });
        assert.equal(r.status, 201);
        track({ sandboxId: r.json.sandboxID });
        assert.equal(r.json.templateID, 'base');
        assert.equal(typeof r.json.clientID, 'string');
        assert.equal(r.json.envdVersion, '0.6.4');
        assert.match(r.json.envdAccessToken, /^[0-9a-f]{64}$/);
        assert.notEqual(r.json.envdAccessToken, sbx.envdAccessToken, 'tokens are per sandbox');
        // the same secret: the code interpreter sends only it on /contexts
        assert.equal(r.json.trafficAccessToken, r.json.envdAccessToken);
        // the daemon's ingress domain (run.sh gives it one): getHost builds on it
        assert.equal(r.json.domain, `localhost:${new URL(env.apiUrl).port}`);
        assert.equal(await Sandbox.kill(r.json.sandboxID), true);
    });

    test('code-interpreter-v1 is the default template under its own name', async () => {
        const ci = await newSandbox({ template: 'code-interpreter-v1', timeoutMs: 60_000 });
        assert.equal((await ci.getInfo()).templateId, 'code-interpreter-v1');
        assert.equal(await ci.kill(), true);
    });

    test('an unknown template is SandboxError 400: template not found', async () => {
        await assert.rejects(Sandbox.create('nope'), (e) => {
            assert.ok(e instanceof SandboxError, `${e}`);
            assert.ok(!(e instanceof SandboxNotFoundError));
            assert.match(e.message, /400: template not found/);
            return true;
        });
    });

    test('a bad API key is AuthenticationError', async () => {
        await assert.rejects(Sandbox.create({ apiKey: 'gbx_not_a_key' }), AuthenticationError);
        await assert.rejects(Sandbox.list({ apiKey: 'gbx_not_a_key' }).nextItems(),
            AuthenticationError);
        await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: 'gbx_not_a_key' }),
            AuthenticationError);
    });

    test('the options E2B has that Glovebox does not apply are accepted', async () => {
        const o = await newSandbox({
            timeoutMs: 60_000,
            allowInternetAccess: false,
            network: { allowOut: ['1.1.1.1'], denyOut: ['0.0.0.0/0'] },
            lifecycle: { onTimeout: 'kill' },
        });
        assert.equal(await o.isRunning(), true);
        assert.equal(await o.kill(), true);
    });
});

describe('lifecycle: onTimeout pause, autoResume', () => {
    test('a timeout pauses it; commands.run wakes it without connect and finds its state', async () => {
        const sbx = await newSandbox({
            timeoutMs: 3000, lifecycle: { onTimeout: 'pause', autoResume: true },
        });
        assert.deepEqual((await sbx.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: true });
        await sbx.files.write('/tmp/before.txt', 'written before the pause\n');
        await sbx.commands.run('sleep 1000', { background: true });
        await new Promise((r) => setTimeout(r, 5000));
        const info = await Sandbox.getInfo(sbx.sandboxId);
        assert.equal(info.state, 'paused', 'paused by its timeout, not killed');
        const r = await sbx.commands.run('cat /tmp/before.txt; pgrep -c -x sleep');
        assert.equal(r.stdout, 'written before the pause\n1\n', 'its file and its process');
        assert.equal((await sbx.getInfo()).state, 'running');
        assert.equal(await sbx.kill(), true);
    });

    test('without autoResume a paused sandbox stays paused until connect', async () => {
        const sbx = await newSandbox({ timeoutMs: 60_000, lifecycle: { onTimeout: 'pause' } });
        await sbx.pause();
        await assert.rejects(sbx.commands.run('true', { requestTimeoutMs: 10_000 }));
        assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'paused');
        const again = await Sandbox.connect(sbx.sandboxId);
        assert.equal((await again.commands.run('echo back')).stdout, 'back\n');
        assert.equal(await again.kill(), true);
    });
});

describe('list', () => {
    const tag = randomName('list');
    const ids = [];

    before(async () => {
        for (let i = 0; i < 3; i++) {
            const s = await newSandbox({ metadata: { tag, n: String(i) }, timeoutMs: 120_000 });
            ids.push(s.sandboxId);
        }
    });

    test('a metadata filter finds exactly those', async () => {
        const pages = await listAll({ query: { metadata: { tag } } });
        assert.equal(pages.length, 1, 'one page');
        assert.deepEqual(pages[0].map((s) => s.sandboxId).sort(), [...ids].sort());
        const one = pages[0].find((s) => s.sandboxId === ids[1]);
        assert.deepEqual(one.metadata, { tag, n: '1' });
        assert.equal(one.state, 'running');
        assert.equal(one.templateId, 'base');
        assert.ok(one.startedAt instanceof Date && one.endAt > one.startedAt);
        assert.ok(one.cpuCount > 0 && one.memoryMB > 0);
    });

    test('metadata filters combine with AND', async () => {
        const pages = await listAll({ query: { metadata: { tag, n: '2' } } });
        assert.deepEqual(pages.flat().map((s) => s.sandboxId), [ids[2]]);
        const none = await listAll({ query: { metadata: { tag, n: 'nine' } } });
        assert.deepEqual(none.flat(), []);
    });

    test('keys and values with spaces, &, =, +, % and non-ASCII survive the encoding', async () => {
        const weird = { 'a b': 'c&d=é', 'p+q': '1+1 = 2%', user: randomName('x') };
        const s = await newSandbox({ metadata: weird, timeoutMs: 60_000 });
        const found = (await listAll({ query: { metadata: weird } })).flat();
        assert.deepEqual(found.map((x) => x.sandboxId), [s.sandboxId]);
        assert.deepEqual(found[0].metadata, weird);
        await s.kill();
    });

    test('limit 1 pages with nextToken, newest first', async () => {
        const pager = Sandbox.list({ query: { metadata: { tag } }, limit: 1 });
        const seen = [];
        while (pager.hasNext) {
            const page = await pager.nextItems();
            assert.ok(page.length <= 1);
            seen.push(...page.map((s) => s.sandboxId));
            if (seen.length < 3) assert.ok(pager.hasNext && pager.nextToken, 'a next token');
        }
        assert.deepEqual(seen, [...ids].reverse());
    });

    test('order asc, and a paginator resumed from a nextToken', async () => {
        const first = Sandbox.list({ query: { metadata: { tag } }, limit: 2, order: 'asc' });
        const a = await first.nextItems();
        assert.deepEqual(a.map((s) => s.sandboxId), ids.slice(0, 2));
        const rest = Sandbox.list({
            query: { metadata: { tag } }, limit: 2, order: 'asc', nextToken: first.nextToken,
        });
        const b = await rest.nextItems();
        assert.deepEqual(b.map((s) => s.sandboxId), ids.slice(2));
        assert.equal(rest.hasNext, false);
    });

    test('state and startedAfter filters', async () => {
        const s = Sandbox.list({ query: { metadata: { tag }, state: ['paused'] } });
        assert.deepEqual(await s.nextItems(), []);
        const r = Sandbox.list({ query: { metadata: { tag }, state: ['running', 'paused'] } });
        assert.equal((await r.nextItems()).length, 3);
        const later = Sandbox.list({
            query: { metadata: { tag }, startedAfter: new Date(Date.now() + 3_600_000) },
        });
        assert.deepEqual(await later.nextItems(), []);
    });
});

describe('timeout, metrics, pause and connect', () => {
    let sbx;

    before(async () => {
        sbx = await newSandbox({ metadata: { suite: 'control-life' }, timeoutMs: 300_000 });
    });

    test('setTimeout moves the end of life to now + timeout', async () => {
        await sbx.setTimeout(30_000);
        near((await sbx.getInfo()).endAt.getTime(), Date.now() + 30_000, 3_000, 'endAt');
        await Sandbox.setTimeout(sbx.sandboxId, 600_000);
        near((await sbx.getInfo()).endAt.getTime(), Date.now() + 600_000, 3_000, 'endAt');
    });

    test('getMetrics returns a current sample with numbers', async () => {
        await sbx.commands.run('head -c 1000000 /dev/urandom | sha256sum >/dev/null');
        const m = await sbx.getMetrics();
        assert.ok(Array.isArray(m) && m.length >= 1);
        const x = m[m.length - 1];
        assert.ok(x.timestamp instanceof Date);
        near(x.timestamp.getTime(), Date.now(), 10_000, 'timestamp');
        for (const k of ['cpuUsedPct', 'cpuCount', 'memUsed', 'memTotal', 'memCache', 'diskUsed',
            'diskTotal'])
            assert.equal(typeof x[k], 'number', k);
        assert.ok(x.cpuUsedPct >= 0 && x.cpuUsedPct <= 100, 'cpuUsedPct is a percentage');
        assert.ok(x.memUsed > 0 && x.memTotal >= x.memUsed, 'memory');
        assert.ok(x.diskTotal > 0, 'diskTotal');
        const again = await Sandbox.getMetrics(sbx.sandboxId);
        assert.ok(again.length >= 1);
    });

    test('pause → not running → connect → running again', async () => {
        await sbx.commands.run('echo before > /tmp/mark');
        assert.equal(await sbx.pause(), true);
        assert.equal(await sbx.pause(), false, 'already paused');
        assert.equal(await sbx.isRunning(), false);
        assert.equal((await sbx.getInfo()).state, 'paused');
        const paused = await Sandbox.list({ query: { metadata: { suite: 'control-life' },
            state: ['paused'] } }).nextItems();
        assert.deepEqual(paused.map((s) => s.sandboxId), [sbx.sandboxId]);

        const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 });
        assert.equal(again.sandboxId, sbx.sandboxId);
        assert.equal(await again.isRunning(), true);
        assert.equal((await again.getInfo()).state, 'running');
        const r = await again.commands.run('cat /tmp/mark');
        assert.equal(r.stdout, 'before\n', 'the sandbox kept its state');
        // connect only extends: the 600 s set above stays
        assert.ok((await sbx.getInfo()).endAt.getTime() > Date.now() + 300_000);
    });

    test('sbx.connect() on a running sandbox, and betaPause', async () => {
        assert.equal(await sbx.connect(), sbx);
        assert.equal(await sbx.betaPause(), true);
        assert.equal(await sbx.isRunning(), false);
        await sbx.connect();
        await waitFor(() => sbx.isRunning(), { what: 'running after connect' });
    });

    test('kill → true, then false; the killed sandbox is not found anywhere', async () => {
        const id = sbx.sandboxId;
        assert.equal(await sbx.kill(), true);
        assert.equal(await sbx.kill(), false);
        assert.equal(await Sandbox.kill(id), false);
        assert.equal(await sbx.isRunning(), false);
        await assert.rejects(sbx.getInfo(), SandboxNotFoundError);
        await assert.rejects(Sandbox.connect(id), SandboxNotFoundError);
        await assert.rejects(sbx.setTimeout(10_000), SandboxNotFoundError);
        await assert.rejects(sbx.getMetrics(), SandboxNotFoundError);
        await assert.rejects(sbx.pause(), SandboxNotFoundError);
        await assert.rejects(sbx.updateNetwork({ allowOut: ['1.1.1.1'] }), SandboxNotFoundError);
        await assert.rejects(sbx.createSnapshot(), SandboxNotFoundError);
        await assert.rejects(sbx.fork(), SandboxNotFoundError);
    });

    test('a sandbox whose timeout passes is gone', async () => {
        const s = await newSandbox({ timeoutMs: 1_000 });
        await waitFor(async () => {
            try {
                await s.getInfo();
                return false;
            } catch (e) {
                return e instanceof SandboxNotFoundError;
            }
        }, { timeoutMs: 10_000, what: 'the expired sandbox to be gone' });
        assert.equal(await s.isRunning(), false);
    });
});

describe('network, snapshots and fork', () => {
    let sbx;

    before(async () => {
        sbx = await newSandbox({ timeoutMs: 120_000 });
    });

    test('updateNetwork replaces the egress policy', async () => {
        await sbx.updateNetwork({ allowOut: ['api.example.com'], denyOut: ['0.0.0.0/0'] });
        assert.equal((await sbx.getInfo()).allowInternetAccess, false);
        await sbx.updateNetwork({ allowInternetAccess: true });
        assert.equal((await sbx.getInfo()).allowInternetAccess, true);
        await assert.rejects(sbx.updateNetwork({ allowOut: ['not a host!'] }), (e) => {
            assert.ok(e instanceof SandboxError && !(e instanceof SandboxNotFoundError), `${e}`);
            assert.match(e.message, /^400: /);
            return true;
        });
    });

    test('createSnapshot, create from it, list, fork, deleteSnapshot', async () => {
        await sbx.files.write('/home/user/state.txt', 'before');
        const snap = await sbx.createSnapshot({ name: 'e2bsnap' });
        assert.equal(snap.snapshotId, 'e2bsnap:default');
        await sbx.files.write('/home/user/state.txt', 'after');
        // a sandbox from the snapshot sees the files as they were
        const from = await newSandbox({ template: snap.snapshotId });
        assert.equal(await from.files.read('/home/user/state.txt'), 'before');
        assert.equal(await sbx.files.read('/home/user/state.txt'), 'after');
        const pager = Sandbox.listSnapshots({ sandboxId: sbx.sandboxId });
        const ids = (await pager.nextItems()).map((x) => x.snapshotId);
        assert.deepEqual(ids, ['e2bsnap:default']);
        // fork: live files, independent sandboxes
        const forks = await sbx.fork({ count: 2 });
        assert.equal(forks.length, 2);
        for (const f of forks) {
            track(f);
            assert.equal(await f.files.read('/home/user/state.txt'), 'after');
        }
        await forks[0].files.write('/home/user/state.txt', 'mine');
        assert.equal(await forks[1].files.read('/home/user/state.txt'), 'after');
        await assert.rejects(sbx.createSnapshot({ name: 'e2bsnap' }), /409/);
        await from.kill();
        assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
        assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false);
    });
});
