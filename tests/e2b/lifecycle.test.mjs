// The end-to-end flow of issue 4 §5 with the unmodified SDK: create → commands.run → streaming
// → CommandExitError → background command, stdin, kill → a PTY and files in passing → getInfo,
// setTimeout, list with filters and pagination → pause, connect → kill → not-found and timeout
// errors. The per-area files (control, process, files) test each surface in depth.
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import {
    Sandbox, CommandExitError, SandboxError, SandboxNotFoundError, NotFoundError, TimeoutError,
} from 'e2b';
import { newSandbox, randomName, waitFor, track } from './lib.mjs';

const dec = new TextDecoder();

describe('one sandbox, start to finish', () => {
    const tag = randomName('life');
    let sbx;

    before(async () => {
        sbx = await newSandbox({
            metadata: { suite: 'lifecycle', tag },
            envs: { FROM_CREATE: 'create-value', SHADOWED: 'create' },
            timeoutMs: 10 * 60 * 1000,
        });
    });

    test('create returns a running sandbox with an access token', async () => {
        assert.equal(typeof sbx.sandboxId, 'string');
        assert.ok(sbx.sandboxId.length > 0);
        assert.equal(typeof sbx.envdAccessToken, 'string', 'create returned envdAccessToken');
        assert.ok(sbx.envdAccessToken.length >= 16, 'the access token is long enough to be a secret');
        assert.equal(await sbx.isRunning(), true);
    });

    test('commands.run: output, exit code, user, home, environment', async () => {
        const r = await sbx.commands.run('echo hello; echo "to err" >&2');
        assert.equal(r.exitCode, 0);
        assert.equal(r.stdout, 'hello\n');
        assert.equal(r.stderr, 'to err\n');
        assert.equal(r.error, undefined);

        const who = await sbx.commands.run('id -un; pwd; echo "$HOME"');
        assert.equal(who.stdout, 'user\n/home/user\n/home/user\n', 'default user is "user" in its home');

        const root = await sbx.commands.run('id -u', { user: 'root' });
        assert.equal(root.stdout, '0\n');

        const e = await sbx.commands.run('echo "$FROM_CREATE $SHADOWED $PER_CMD"', {
            envs: { SHADOWED: 'command', PER_CMD: 'x' },
        });
        assert.equal(e.stdout, 'create-value command x\n', 'create envs, overridden per command');

        const cwd = await sbx.commands.run('pwd', { cwd: '/tmp' });
        assert.equal(cwd.stdout, '/tmp\n');
    });

    test('streaming: onStdout/onStderr get the output while the command runs', async () => {
        const out = [];
        const err = [];
        // the command prints, then blocks on stdin: the first line can only be seen by a stream
        const h = await sbx.commands.run('echo ready; echo warn >&2; read line; echo "got $line"', {
            background: true,
            stdin: true,
            onStdout: (d) => out.push(d),
            onStderr: (d) => err.push(d),
        });
        await waitFor(() => out.join('').includes('ready\n') && err.join('').includes('warn\n'), {
            what: 'output streamed before the command ends',
        });
        assert.equal(h.exitCode, undefined, 'still running');
        await h.sendStdin('typed\n');
        const r = await h.wait();
        assert.equal(r.exitCode, 0);
        assert.equal(out.join(''), 'ready\ngot typed\n');
        assert.equal(err.join(''), 'warn\n');
        assert.equal(r.stdout, 'ready\ngot typed\n');
    });

    test('larger output arrives complete and in order', async () => {
        const chunks = [];
        const r = await sbx.commands.run('seq 1 20000', { onStdout: (d) => chunks.push(d) });
        const want = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');
        assert.equal(r.stdout.length, want.length);
        assert.equal(r.stdout, want);
        assert.equal(chunks.join(''), want);
    });

    test('a non-zero exit raises CommandExitError with the output', async () => {
        await assert.rejects(sbx.commands.run('echo partial; echo bad >&2; exit 3'), (e) => {
            assert.ok(e instanceof CommandExitError, `got ${e?.name}: ${e?.message}`);
            assert.equal(e.exitCode, 3);
            assert.equal(e.stdout, 'partial\n');
            assert.equal(e.stderr, 'bad\n');
            assert.match(e.message, /exit status 3/);
            return true;
        });
        // a command that does not exist: bash says so and exits 127
        await assert.rejects(sbx.commands.run('no-such-command-here'), (e) => {
            assert.ok(e instanceof CommandExitError);
            assert.equal(e.exitCode, 127);
            assert.match(e.stderr, /not found/);
            return true;
        });
    });

    test('background command: list, sendStdin, closeStdin, connect, kill', async () => {
        // cat echoes stdin until it is closed
        const cat = await sbx.commands.run('cat', { background: true, stdin: true });
        assert.equal(typeof cat.pid, 'number');
        const listed = await sbx.commands.list();
        const mine = listed.find((p) => p.pid === cat.pid);
        assert.ok(mine, `pid ${cat.pid} in commands.list()`);
        assert.equal(mine.cmd, '/bin/bash');
        assert.deepEqual(mine.args, ['-l', '-c', 'cat']);

        await sbx.commands.sendStdin(cat.pid, 'line one\n');
        await cat.sendStdin('line two\n');
        await waitFor(() => cat.stdout === 'line one\nline two\n', { what: 'stdin echoed back' });
        await sbx.commands.closeStdin(cat.pid);
        const r = await cat.wait();
        assert.equal(r.exitCode, 0);
        assert.equal(r.stdout, 'line one\nline two\n');

        // a long one: disconnect, connect again, then kill
        const sleeper = await sbx.commands.run('echo started; exec sleep 1000', { background: true });
        await waitFor(() => sleeper.stdout === 'started\n', { what: 'first output' });
        await sleeper.disconnect();
        assert.ok((await sbx.commands.list()).some((p) => p.pid === sleeper.pid),
            'a process outlives its client disconnecting');
        const again = await sbx.commands.connect(sleeper.pid);
        assert.equal(again.pid, sleeper.pid);
        assert.equal(await again.kill(), true);
        await assert.rejects(again.wait(), (e) => {
            assert.ok(e instanceof CommandExitError, `got ${e?.name}: ${e?.message}`);
            assert.match(e.message, /signal: killed/);
            return true;
        });
        await waitFor(async () => !(await sbx.commands.list()).some((p) => p.pid === sleeper.pid),
            { what: 'killed process gone from the list' });
        assert.equal(await sbx.commands.kill(sleeper.pid), false, 'killing it again: false');
    });

    test('a PTY: create, sendInput, resize, kill', async () => {
        const seen = [];
        const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => seen.push(dec.decode(d)) });
        await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\n'));
        await waitFor(() => seen.join('').includes('pty-42'), { what: 'pty output' });
        assert.match(seen.join(''), /24 80/);
        await sbx.pty.resize(pty.pid, { cols: 100, rows: 30 });
        await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size\n'));
        await waitFor(() => seen.join('').includes('30 100'), { what: 'resized pty' });
        assert.equal(await sbx.pty.kill(pty.pid), true);
        await assert.rejects(pty.wait(), CommandExitError);
    });

    test('files in passing: write, read (text and bytes), list, exists, rename, remove', async () => {
        const dir = `/home/user/${tag}`;
        assert.equal(await sbx.files.makeDir(dir), true);
        await sbx.files.write(`${dir}/a.txt`, 'text content\n');
        const bin = new Uint8Array(256).map((_, i) => i);
        await sbx.files.write(`${dir}/b.bin`, bin.buffer);
        assert.equal(await sbx.files.read(`${dir}/a.txt`), 'text content\n');
        assert.deepEqual(await sbx.files.read(`${dir}/b.bin`, { format: 'bytes' }), bin);
        const names = (await sbx.files.list(dir)).map((e) => e.name).sort();
        assert.deepEqual(names, ['a.txt', 'b.bin']);
        // what the SDK wrote, the sandbox's commands see (and the other way round)
        const cat = await sbx.commands.run(`cat ${dir}/a.txt; stat -c %U ${dir}/a.txt`);
        assert.equal(cat.stdout, 'text content\nuser\n');
        await sbx.commands.run(`echo from-shell > ${dir}/c.txt`);
        assert.equal(await sbx.files.read(`${dir}/c.txt`), 'from-shell\n');
        await sbx.files.rename(`${dir}/c.txt`, `${dir}/d.txt`);
        assert.equal(await sbx.files.exists(`${dir}/c.txt`), false);
        assert.equal(await sbx.files.exists(`${dir}/d.txt`), true);
        await sbx.files.remove(dir);
        assert.equal(await sbx.files.exists(dir), false);
    });

    test('getInfo reflects create', async () => {
        const info = await sbx.getInfo();
        assert.equal(info.sandboxId, sbx.sandboxId);
        assert.equal(typeof info.templateId, 'string');
        assert.deepEqual(info.metadata, { suite: 'lifecycle', tag });
        assert.equal(info.state, 'running');
        assert.ok(info.startedAt instanceof Date && !isNaN(info.startedAt));
        assert.ok(info.endAt instanceof Date && !isNaN(info.endAt));
        const span = info.endAt - info.startedAt;
        assert.ok(span > 9 * 60 * 1000 && span <= 10 * 60 * 1000 + 2000,
            `endAt - startedAt is the 10 min timeout (${span} ms)`);
        assert.equal(typeof info.envdVersion, 'string');
        const same = await Sandbox.getInfo(sbx.sandboxId);
        assert.equal(same.sandboxId, sbx.sandboxId);
        assert.deepEqual(same.metadata, info.metadata);
    });

    test('setTimeout moves the end of life both ways', async () => {
        const before = (await sbx.getInfo()).endAt;
        await sbx.setTimeout(30 * 60 * 1000);
        const later = (await sbx.getInfo()).endAt;
        assert.ok(later - before > 15 * 60 * 1000, `endAt moved out (${before.toISOString()} -> ${later.toISOString()})`);
        await sbx.setTimeout(5 * 60 * 1000);
        const sooner = (await sbx.getInfo()).endAt;
        assert.ok(sooner < later, 'and back in');
        assert.equal(await sbx.isRunning(), true);
    });

    test('kill: true once, then false; the sandbox is gone everywhere', async () => {
        const id = sbx.sandboxId;
        assert.equal(await sbx.kill(), true);
        assert.equal(await sbx.kill(), false);
        assert.equal(await Sandbox.kill(id), false);
        assert.equal(await sbx.isRunning(), false);
        await assert.rejects(sbx.getInfo(), SandboxNotFoundError);
        await assert.rejects(Sandbox.connect(id), SandboxNotFoundError);
        await assert.rejects(sbx.setTimeout(60000), SandboxNotFoundError);
        await assert.rejects(sbx.commands.run('true'), SandboxNotFoundError);
        // /files of a dead sandbox: the edge's 502, which the SDK reports as a timeout
        await assert.rejects(sbx.files.read('/etc/hostname'), TimeoutError);
        const ids = [];
        const pager = Sandbox.list({ query: { metadata: { tag } } });
        while (pager.hasNext) for (const s of await pager.nextItems()) ids.push(s.sandboxId);
        assert.deepEqual(ids, []);
    });
});

describe('list: filters and pagination', () => {
    const group = randomName('grp');
    const made = [];

    before(async () => {
        for (let i = 0; i < 3; i++)
            made.push(await newSandbox({ metadata: { group, idx: String(i), 'odd key': 'a&b=c é' } }));
    });

    async function all(opts) {
        const pager = Sandbox.list(opts);
        const pages = [];
        while (pager.hasNext) pages.push(await pager.nextItems());
        return pages;
    }

    test('a metadata filter finds exactly the group (keys and values that need escaping too)', async () => {
        const [page, ...rest] = await all({ query: { metadata: { group } } });
        assert.equal(rest.length, 0, 'one page');
        assert.deepEqual(page.map((s) => s.sandboxId).sort(), made.map((s) => s.sandboxId).sort());
        for (const s of page) {
            assert.equal(s.state, 'running');
            assert.equal(s.metadata.group, group);
            assert.equal(s.metadata['odd key'], 'a&b=c é');
            assert.ok(s.startedAt instanceof Date && !isNaN(s.startedAt));
        }
        const one = await all({ query: { metadata: { group, idx: '1' } } });
        assert.deepEqual(one.flat().map((s) => s.sandboxId), [made[1].sandboxId], 'filters combine with AND');
        const odd = await all({ query: { metadata: { 'odd key': 'a&b=c é', group } } });
        assert.equal(odd.flat().length, 3);
        const none = await all({ query: { metadata: { group, idx: 'nope' } } });
        assert.deepEqual(none.flat(), []);
    });

    test('limit 1 pages through with X-Next-Token, each sandbox once', async () => {
        const pages = await all({ query: { metadata: { group } }, limit: 1 });
        assert.equal(pages.filter((p) => p.length > 0).length, 3, 'three non-empty pages');
        for (const p of pages) assert.ok(p.length <= 1);
        const ids = pages.flat().map((s) => s.sandboxId);
        assert.equal(new Set(ids).size, 3, 'no sandbox twice');
        assert.deepEqual(ids.sort(), made.map((s) => s.sandboxId).sort());
        const two = await all({ query: { metadata: { group } }, limit: 2 });
        assert.deepEqual(two.map((p) => p.length).filter((n) => n), [2, 1]);
    });

    test('order asc and desc by start time', async () => {
        const asc = (await all({ query: { metadata: { group } }, order: 'asc' })).flat();
        const desc = (await all({ query: { metadata: { group } }, order: 'desc' })).flat();
        assert.deepEqual(asc.map((s) => s.sandboxId), [...desc.map((s) => s.sandboxId)].reverse());
        for (let i = 1; i < asc.length; i++) assert.ok(asc[i - 1].startedAt <= asc[i].startedAt);
        // created one after another: the ascending order is the creation order
        assert.deepEqual(asc.map((s) => s.sandboxId), made.map((s) => s.sandboxId));
    });

    test('state filter: running and paused', async () => {
        assert.equal(await made[0].pause(), true);
        const paused = (await all({ query: { metadata: { group }, state: ['paused'] } })).flat();
        assert.deepEqual(paused.map((s) => s.sandboxId), [made[0].sandboxId]);
        assert.equal(paused[0].state, 'paused');
        const running = (await all({ query: { metadata: { group }, state: ['running'] } })).flat();
        assert.deepEqual(running.map((s) => s.sandboxId).sort(), [made[1].sandboxId, made[2].sandboxId].sort());
        const both = (await all({ query: { metadata: { group }, state: ['running', 'paused'] } })).flat();
        assert.equal(both.length, 3);
        const dflt = (await all({ query: { metadata: { group } } })).flat();
        assert.equal(dflt.length, 3, 'no state filter: running and paused');
    });
});

describe('pause and connect', () => {
    test('a paused sandbox keeps its files and processes and comes back on connect', async () => {
        const sbx = await newSandbox();
        await sbx.commands.run('echo kept > /home/user/before-pause.txt');
        const bg = await sbx.commands.run('exec sleep 1000', { background: true });
        await bg.disconnect();

        assert.equal(await sbx.pause(), true);
        assert.equal(await sbx.pause(), false, 'pausing a paused sandbox: false');
        assert.equal((await sbx.getInfo()).state, 'paused');
        assert.equal(await sbx.isRunning(), false, 'envd of a paused sandbox does not answer');

        const back = track(await Sandbox.connect(sbx.sandboxId));
        assert.equal(back.sandboxId, sbx.sandboxId);
        assert.equal((await back.getInfo()).state, 'running');
        assert.equal(await back.isRunning(), true);
        assert.equal((await back.commands.run('cat /home/user/before-pause.txt')).stdout, 'kept\n');
        assert.ok((await back.commands.list()).some((p) => p.pid === bg.pid), 'the process was frozen, not killed');
        const r = await back.commands.run('echo alive');
        assert.equal(r.stdout, 'alive\n');
        // the old object works again too: same id, same token
        assert.equal((await sbx.commands.run('echo old-handle')).stdout, 'old-handle\n');
    });

    test('connect to a running sandbox returns it as it is', async () => {
        const sbx = await newSandbox();
        await sbx.commands.run('echo 1 > /tmp/mark');
        const other = await Sandbox.connect(sbx.sandboxId);
        assert.equal(other.sandboxId, sbx.sandboxId);
        assert.equal((await other.commands.run('cat /tmp/mark')).stdout, '1\n');
        assert.equal(await sbx.connect(), sbx, 'instance connect');
    });

    test('a running command survives a pause and is reconnected after connect', async () => {
        // pause hibernates (CRIU): the process and its memory go to disk and come back; the
        // stream the client held ends with the pause (as a VM snapshot's connections do), so
        // the client connects to the process again by pid
        const sbx = await newSandbox();
        const h = await sbx.commands.run('read x; echo "after $x"', { background: true, stdin: true });
        const ended = h.wait().then(() => 'finished', () => 'stream ended');
        assert.equal(await sbx.pause(), true);
        await Sandbox.connect(sbx.sandboxId);
        const h2 = await sbx.commands.connect(h.pid);
        await sbx.commands.sendStdin(h.pid, 'resume\n');
        const r = await h2.wait();
        assert.equal(r.stdout, 'after resume\n');
        assert.ok(['finished', 'stream ended'].includes(await ended));
    });

    test('kill a paused sandbox', async () => {
        const sbx = await newSandbox();
        assert.equal(await Sandbox.pause(sbx.sandboxId), true);
        assert.equal(await Sandbox.kill(sbx.sandboxId), true);
        await assert.rejects(Sandbox.connect(sbx.sandboxId), SandboxNotFoundError);
    });
});

describe('errors', () => {
    test('not found: connect, getInfo, setTimeout, pause, kill, list of an unknown id', async () => {
        const id = randomName('missing');
        await assert.rejects(Sandbox.connect(id), SandboxNotFoundError);
        await assert.rejects(Sandbox.getInfo(id), SandboxNotFoundError);
        await assert.rejects(Sandbox.setTimeout(id, 60000), SandboxNotFoundError);
        await assert.rejects(Sandbox.pause(id), SandboxNotFoundError);
        assert.equal(await Sandbox.kill(id), false);
    });

    test('an unknown template is an error the SDK reports', async () => {
        await assert.rejects(Sandbox.create(randomName('no-such-template')), (e) => {
            assert.ok(e instanceof SandboxError, `got ${e?.name}: ${e?.message}`);
            assert.match(e.message, /template/i);
            return true;
        });
    });

    test('unknown processes: kill is false, connect is NotFoundError', async () => {
        const sbx = await newSandbox();
        assert.equal(await sbx.commands.kill(999999), false);
        await assert.rejects(sbx.commands.connect(999999), NotFoundError);
        await assert.rejects(sbx.commands.sendStdin(999999, 'x'), NotFoundError);
    });

    test('a command past its timeoutMs: TimeoutError, and the process is gone', async () => {
        const sbx = await newSandbox();
        await assert.rejects(sbx.commands.run('sleep 600', { timeoutMs: 1000 }), TimeoutError);
        const h = await sbx.commands.run('exec sleep 601', { background: true, timeoutMs: 1000 });
        await assert.rejects(h.wait(), TimeoutError);
        // Connect-Timeout-Ms is the process's lifetime: the server kills it, not only the stream
        await waitFor(async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid),
            { timeoutMs: 15000, what: 'the timed-out process to be killed' });
        const ps = await sbx.commands.run('ps -eo args');
        assert.doesNotMatch(ps.stdout, /sleep 60[01]/);
    });

    test('a sandbox past its timeout is killed', async () => {
        const sbx = await newSandbox({ timeoutMs: 1000 });
        const id = sbx.sandboxId;
        await waitFor(async () => !(await sbx.isRunning()), { timeoutMs: 30000, what: 'the sandbox to expire' });
        await assert.rejects(Sandbox.getInfo(id), SandboxNotFoundError);
        assert.equal(await Sandbox.kill(id), false);
    });

    test('setTimeout shortens a sandbox\'s life', async () => {
        const sbx = await newSandbox({ timeoutMs: 10 * 60 * 1000 });
        await sbx.setTimeout(1000);
        await waitFor(async () => !(await sbx.isRunning()), { timeoutMs: 30000, what: 'the sandbox to expire' });
        await assert.rejects(sbx.getInfo(), SandboxNotFoundError);
    });

    test('killing a sandbox ends its open streams with an error, none hangs', async () => {
        const sbx = await newSandbox();
        const bg = await sbx.commands.run('exec sleep 1000', { background: true });
        // settled as soon as it fails, so the rejection is never unhandled
        const fg = sbx.commands.run('echo started; exec sleep 1001').then((r) => r, (e) => e);
        let watchExit;
        const exited = new Promise((resolve) => { watchExit = resolve; });
        await sbx.files.watchDir('/home/user', () => {}, { onExit: (e) => watchExit(e) });
        await waitFor(async () => (await sbx.commands.list()).length === 2, { what: 'both commands running' });
        assert.equal(await sbx.kill(), true);
        await assert.rejects(bg.wait(), TimeoutError);
        const fgEnd = await fg;
        assert.ok(fgEnd instanceof TimeoutError, `the foreground run got ${fgEnd?.name}: ${fgEnd?.message}`);
        const e = await exited;
        assert.ok(e instanceof TimeoutError, `watchDir onExit got ${e?.name}: ${e?.message}`);
    });

    // a wrong token is answered as an unknown sandbox (502: the SDK's SandboxNotFoundError),
    // not envd's 401, so that the answer does not tell whether the id exists (docs/e2b.md)
    test('a wrong access token is refused as if there were no such sandbox', async () => {
        const sbx = await newSandbox();
        const forged = new Sandbox({
            sandboxId: sbx.sandboxId, envdVersion: '0.6.4', envdAccessToken: 'not-the-token',
        });
        await assert.rejects(forged.commands.run('true'), (e) => {
            assert.match(e.name, /SandboxNotFoundError/);
            return true;
        });
        await assert.rejects(forged.files.read('/etc/hostname'), (e) => {
            // envd REST's 502 is the SDK's "sandbox timed out or is gone" error
            assert.match(e.name, /TimeoutError/);
            return true;
        });
        assert.equal((await sbx.commands.run('echo still-fine')).stdout, 'still-fine\n');
    });
});
