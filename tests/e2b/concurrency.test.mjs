// Many sandboxes and many streams from one SDK process (issue 4 §5): 20 sandboxes created,
// used and killed all in parallel, each seeing only its own files, processes and environment;
// many concurrent commands in one sandbox, each getting its own output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox } from 'e2b';
import { newSandbox, randomName, waitFor } from './lib.mjs';

const N = 20;

test(`${N} sandboxes used concurrently from one process, each sees only its own`, async () => {
    const group = randomName('conc');
    const sbxs = await Promise.all(Array.from({ length: N }, (_, i) =>
        newSandbox({ metadata: { group, idx: String(i) }, envs: { SBX_IDX: String(i) } })));
    const ids = sbxs.map((s) => s.sandboxId);
    assert.equal(new Set(ids).size, N, 'distinct ids');
    assert.equal(new Set(sbxs.map((s) => s.envdAccessToken)).size, N, 'distinct access tokens');

    await Promise.all(sbxs.map(async (s, i) => {
        // its own environment from create
        const env = await s.commands.run('echo "$SBX_IDX"');
        assert.equal(env.stdout, `${i}\n`, `sandbox ${i} env`);
        // a file through the SDK, a marker through a command
        await s.files.write('/home/user/who.txt', `${s.sandboxId}\n`);
        await s.commands.run(`touch /tmp/marker-${i}`);
        // a background process of its own, still running while the others look around
        const bg = await s.commands.run(`exec sleep 100${i}`, { background: true });
        await bg.disconnect();
        s._bgPid = bg.pid;
    }));

    await Promise.all(sbxs.map(async (s, i) => {
        assert.equal(await s.files.read('/home/user/who.txt'), `${s.sandboxId}\n`, `sandbox ${i} file`);
        const markers = await s.commands.run('ls /tmp | grep "^marker-" || true');
        assert.equal(markers.stdout, `marker-${i}\n`, `sandbox ${i} sees only its own marker`);
        const ps = await s.commands.run('ps -eo args | grep "^sleep" || true');
        assert.equal(ps.stdout, `sleep 100${i}\n`, `sandbox ${i} sees only its own processes`);
        const listed = await s.commands.list();
        assert.deepEqual(listed.map((p) => p.pid), [s._bgPid], `sandbox ${i} commands.list`);
        const info = await s.getInfo();
        assert.deepEqual(info.metadata, { group, idx: String(i) });
    }));

    // the list sees all twenty, and only them
    const listed = [];
    const pager = Sandbox.list({ query: { metadata: { group } }, limit: 7 });
    while (pager.hasNext) listed.push(...(await pager.nextItems()));
    assert.deepEqual(listed.map((s) => s.sandboxId).sort(), [...ids].sort());

    const killed = await Promise.all(sbxs.map((s) => s.kill()));
    assert.deepEqual(killed, Array(N).fill(true));
    const running = await Promise.all(sbxs.map((s) => s.isRunning()));
    assert.deepEqual(running, Array(N).fill(false));
    const after = Sandbox.list({ query: { metadata: { group } } });
    const left = [];
    while (after.hasNext) left.push(...(await after.nextItems()));
    assert.deepEqual(left, []);
});

test('a sandbox created while others are being killed is unaffected', async () => {
    const first = await Promise.all(Array.from({ length: 5 }, () => newSandbox()));
    const [kills, fresh] = await Promise.all([
        Promise.all(first.map((s) => s.kill())),
        newSandbox(),
    ]);
    assert.deepEqual(kills, Array(5).fill(true));
    assert.equal((await fresh.commands.run('echo ok')).stdout, 'ok\n');
});

test('many concurrent commands in one sandbox each get their own output', async () => {
    const sbx = await newSandbox();
    const M = 40;
    const results = await Promise.all(Array.from({ length: M }, (_, i) => {
        const seen = [];
        return sbx.commands.run(`for j in 1 2 3; do echo "cmd${i}-$j"; done; exit $((${i} % 3))`, {
            onStdout: (d) => seen.push(d),
        }).then((r) => ({ r, seen }), (e) => ({ e, seen }));
    }));
    results.forEach(({ r, e, seen }, i) => {
        const want = `cmd${i}-1\ncmd${i}-2\ncmd${i}-3\n`;
        const res = r ?? e;
        assert.equal(res.stdout, want, `command ${i} stdout`);
        assert.equal(seen.join(''), want, `command ${i} streamed`);
        assert.equal(res.exitCode, i % 3, `command ${i} exit code`);
        if (i % 3) assert.equal(e?.name, 'CommandExitError');
    });
});

test('background streams held open while other requests go through', async () => {
    const sbx = await newSandbox();
    // a dozen open streams (each pins a pooled connection) plus unary calls and file transfers
    const bgs = await Promise.all(Array.from({ length: 12 }, (_, i) =>
        sbx.commands.run(`echo up-${i}; exec sleep 1000`, { background: true })));
    await waitFor(() => bgs.every((h, i) => h.stdout === `up-${i}\n`), { what: 'every stream started' });
    await Promise.all(Array.from({ length: 10 }, async (_, i) => {
        await sbx.files.write(`/tmp/f${i}`, `content ${i}`);
        assert.equal(await sbx.files.read(`/tmp/f${i}`), `content ${i}`);
        assert.equal((await sbx.commands.run(`cat /tmp/f${i}`)).stdout, `content ${i}`);
    }));
    const pids = (await sbx.commands.list()).map((p) => p.pid).sort();
    assert.deepEqual(pids, bgs.map((h) => h.pid).sort());
    assert.deepEqual(await Promise.all(bgs.map((h) => h.kill())), Array(12).fill(true));
    for (const h of bgs) await assert.rejects(h.wait(), /signal: killed/);
});
