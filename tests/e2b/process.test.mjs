// envd process.Process through the unmodified SDK (shared/protocols/e2b.md §4.2): commands.run
// (output, exit codes, streaming callbacks, envs, cwd, user), background commands (stdin,
// closeStdin, kill, list, connect from another SDK object, disconnect, timeoutMs), PTYs, and
// big or binary output. The exact framing is tested at the wire level by
// tests/integration/t410-e2b-process.sh.
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox, CommandExitError, TimeoutError, InvalidArgumentError, AuthenticationError } from 'e2b';
import { newSandbox, waitFor, rpc } from './lib.mjs';

const dec = new TextDecoder();

async function listed(sbx, pid) {
    return (await sbx.commands.list()).some((p) => p.pid === pid);
}

describe('process.Process', () => {
    let sbx;

    before(async () => {
        sbx = await newSandbox({ envs: { FROM_CREATE: 'create-value', SHADOWED: 'create' } });
    });

    test('commands.run: stdout, stderr, exit code', async () => {
        const r = await sbx.commands.run('echo hello; echo "to err" >&2');
        assert.equal(r.exitCode, 0);
        assert.equal(r.stdout, 'hello\n');
        assert.equal(r.stderr, 'to err\n');
        assert.equal(r.error, undefined);
    });

    test('onStdout and onStderr stream the output as it comes', async () => {
        const out = [];
        const err = [];
        const r = await sbx.commands.run('for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.1; done', {
            onStdout: (d) => out.push(d),
            onStderr: (d) => err.push(d),
        });
        assert.equal(out.join(''), 'out1\nout2\nout3\n');
        assert.equal(err.join(''), 'err1\nerr2\nerr3\n');
        assert.ok(out.length >= 2, 'stdout came in more than one piece');
        assert.equal(r.stdout, out.join(''));
    });

    test('a non-zero exit raises CommandExitError with the output', async () => {
        await assert.rejects(sbx.commands.run('echo partial; echo bad >&2; exit 3'), (e) => {
            assert.ok(e instanceof CommandExitError, `got ${e}`);
            assert.equal(e.exitCode, 3);
            assert.equal(e.error, 'exit status 3');
            assert.equal(e.stdout, 'partial\n');
            assert.equal(e.stderr, 'bad\n');
            return true;
        });
    });

    test('envs, cwd and user', async () => {
        const r = await sbx.commands.run('echo "$FROM_CREATE $SHADOWED $MINE"; pwd; id -un', {
            envs: { SHADOWED: 'request', MINE: 'mine' },
            cwd: '/tmp',
        });
        assert.equal(r.stdout, 'create-value request mine\n/tmp\nuser\n');
        const root = await sbx.commands.run('id -un; pwd', { user: 'root' });
        assert.equal(root.stdout, 'root\n/root\n');
        const home = await sbx.commands.run('pwd');
        assert.equal(home.stdout, '/home/user\n');
    });

    test('a missing cwd is InvalidArgumentError; an unknown user AuthenticationError', async () => {
        await assert.rejects(sbx.commands.run('true', { cwd: '/no/such/dir' }), (e) => {
            assert.ok(e instanceof InvalidArgumentError, `got ${e}`);
            assert.match(e.message, /cwd '\/no\/such\/dir' does not exist/);
            return true;
        });
        await assert.rejects(sbx.commands.run('true', { user: 'bob' }), (e) => {
            assert.ok(e instanceof AuthenticationError, `got ${e}`);
            return true;
        });
    });

    test('background: sendStdin, closeStdin, wait', async () => {
        const h = await sbx.commands.run('cat', { background: true, stdin: true });
        assert.ok(h.pid > 0);
        await h.sendStdin('first\n');
        await sbx.commands.sendStdin(h.pid, 'second\n');
        await sbx.commands.closeStdin(h.pid);
        const r = await h.wait();
        assert.equal(r.exitCode, 0);
        assert.equal(r.stdout, 'first\nsecond\n');
    });

    test('background: list, handle.kill, commands.kill; wait raises "signal: killed"', async () => {
        const a = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
        const b = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
        const procs = await sbx.commands.list();
        const pa = procs.find((p) => p.pid === a.pid);
        assert.ok(pa, 'list shows the background command');
        assert.equal(pa.cmd, '/bin/bash');
        assert.deepEqual(pa.args, ['-l', '-c', 'sleep 600']);
        assert.equal(typeof pa.envs, 'object');
        assert.equal(pa.cwd, '/home/user');

        assert.equal(await a.kill(), true);
        await assert.rejects(a.wait(), (e) => {
            assert.ok(e instanceof CommandExitError, `got ${e}`);
            assert.equal(e.error, 'signal: killed');
            assert.equal(e.exitCode, -1);
            return true;
        });
        assert.equal(await sbx.commands.kill(b.pid), true);
        await assert.rejects(b.wait(), CommandExitError);
        assert.equal(await sbx.commands.kill(b.pid), false, 'a finished pid');
        assert.equal(await sbx.commands.kill(999999), false, 'an unknown pid');
        await waitFor(async () => !(await listed(sbx, a.pid)) && !(await listed(sbx, b.pid)), {
            what: 'the killed commands to leave the list',
        });
    });

    test('commands.connect from another SDK object receives later output; the first handle too', async () => {
        const h = await sbx.commands.run('for i in $(seq 1 600); do echo tick $i; sleep 0.1; done', {
            background: true,
            timeoutMs: 0,
        });
        const other = await Sandbox.connect(sbx.sandboxId);
        const seen = [];
        const c = await other.commands.connect(h.pid, { onStdout: (d) => seen.push(d), timeoutMs: 0 });
        assert.equal(c.pid, h.pid);
        await waitFor(() => seen.join('').includes('tick'), { what: 'output after connect' });
        // the first handle follows along too (envd lets every client that connects see it)
        const before = h.stdout.length;
        await waitFor(() => h.stdout.length > before, { what: 'more output on the first handle' });
        assert.equal(await other.commands.kill(h.pid), true);
        await assert.rejects(c.wait(), (e) => e instanceof CommandExitError && e.error === 'signal: killed');
        await assert.rejects(h.wait(), (e) => e instanceof CommandExitError && e.error === 'signal: killed');
    });

    test('disconnect leaves the command running', async () => {
        const h = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
        await h.disconnect();
        assert.ok(await listed(sbx, h.pid), 'still listed after disconnect');
        const r = await sbx.commands.run(`kill -0 ${h.pid} && echo alive`);
        assert.equal(r.stdout, 'alive\n');
        assert.equal(await sbx.commands.kill(h.pid), true);
    });

    test('timeoutMs kills the command (TimeoutError) and it leaves the list', async () => {
        const h = await sbx.commands.run('echo started; sleep 600', { background: true, timeoutMs: 1500 });
        await assert.rejects(h.wait(), (e) => {
            assert.ok(e instanceof TimeoutError, `got ${e}`);
            return true;
        });
        await waitFor(async () => !(await listed(sbx, h.pid)), { what: 'the timed-out command to go' });
        await assert.rejects(sbx.commands.run('sleep 600', { timeoutMs: 1000 }), TimeoutError);
    });

    test('pty: create, sendInput, resize, kill', async () => {
        const chunks = [];
        const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => chunks.push(d), timeoutMs: 0 });
        const text = () => chunks.map((c) => dec.decode(c)).join('');
        assert.ok(term.pid > 0);
        await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\n'));
        await waitFor(() => text().includes('pty-42'), { what: 'the pty output' });
        assert.match(text(), /24 80/);
        await sbx.pty.resize(term.pid, { cols: 100, rows: 30 });
        await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size\n'));
        await waitFor(() => text().includes('30 100'), { what: 'the new size' });
        assert.equal(await sbx.pty.kill(term.pid), true);
        await assert.rejects(term.wait(), (e) => e instanceof CommandExitError && e.error === 'signal: killed');
        assert.equal(await sbx.pty.kill(term.pid), false);
    });

    test('large output (8 MiB) arrives intact', async () => {
        const r = await sbx.commands.run(
            'head -c 6291456 /dev/zero | tr "\\0" "x"; head -c 2097152 /dev/zero | tr "\\0" "y" >&2',
        );
        assert.equal(r.stdout.length, 6291456);
        assert.ok(/^x+$/.test(r.stdout));
        assert.equal(r.stderr.length, 2097152);
        assert.ok(/^y+$/.test(r.stderr));
    });

    test('binary-ish output: control bytes, multi-byte characters split across chunks', async () => {
        const r = await sbx.commands.run("printf 'caf\\xc3\\xa9 \\xe2\\x82\\xac\\n\\x00\\x01end\\n'");
        assert.equal(r.stdout, 'café €\n\x00\x01end\n');
        const big = await sbx.commands.run("for i in $(seq 1 20000); do printf '\\xe2\\x82\\xac'; done");
        assert.equal(big.stdout, '€'.repeat(20000));
    });

    test('List over raw Connect always carries config', async () => {
        const h = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
        const r = await rpc(sbx, 'process.Process', 'List', {});
        assert.equal(r.status, 200);
        const p = r.json.processes.find((x) => x.pid === h.pid);
        assert.deepEqual(p.config.args, ['-l', '-c', 'sleep 600']);
        assert.equal(p.config.cmd, '/bin/bash');
        await h.kill();
    });
});
