// @e2b/code-interpreter against Glovebox (spec §6): runCode with state kept between runs,
// streamed stdout/stderr, results, errors, and contexts (create, list, restart, remove).
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { newCodeSandbox, randomName } from './lib.mjs';

describe('code interpreter', () => {
    let sbx;

    before(async () => {
        sbx = await newCodeSandbox(); // template code-interpreter-v1, the package's default
    });

    test('runCode: the last expression is the main result; state persists between runs', async () => {
        const a = await sbx.runCode('x = 6 * 7\nx');
        assert.equal(a.error, undefined);
        assert.equal(a.text, '42');
        assert.equal(a.results.filter((r) => r.isMainResult).length, 1);
        const b = await sbx.runCode('x + 1');
        assert.equal(b.text, '43', 'x survived from the previous run');
        const none = await sbx.runCode('y = 1');
        assert.equal(none.text, undefined, 'an assignment has no result');
    });

    test('stdout and stderr: collected in logs and streamed to the callbacks', async () => {
        const out = [];
        const err = [];
        const e = await sbx.runCode('import sys\nprint("to out")\nprint("to err", file=sys.stderr)\nprint("again")', {
            onStdout: (m) => out.push(m.line ?? m),
            onStderr: (m) => err.push(m.line ?? m),
        });
        assert.equal(e.logs.stdout.join(''), 'to out\nagain\n');
        assert.equal(e.logs.stderr.join(''), 'to err\n');
        assert.equal(out.map(String).join(''), 'to out\nagain\n');
        assert.equal(err.map(String).join(''), 'to err\n');
    });

    test('an exception is execution.error (name, value, traceback), not a thrown error', async () => {
        const e = await sbx.runCode('1 / 0');
        assert.ok(e.error, 'execution.error is set');
        assert.equal(e.error.name, 'ZeroDivisionError');
        assert.match(e.error.value, /division by zero/);
        assert.match(e.error.traceback, /ZeroDivisionError/);
        const after = await sbx.runCode('x');
        assert.equal(after.text, '42', 'the interpreter survives an exception');
    });

    test('envs for one run', async () => {
        const e = await sbx.runCode('import os\nos.environ.get("RUN_VAR")', { envs: { RUN_VAR: 'per-run' } });
        assert.equal(e.text, "'per-run'");
    });

    test('the interpreter runs inside the sandbox, as its default user', async () => {
        const marker = randomName('ci');
        await sbx.files.write(`/home/user/${marker}.txt`, 'from files');
        const e = await sbx.runCode(`import os, getpass\nprint(getpass.getuser())\nprint(open("/home/user/${marker}.txt").read())`);
        assert.equal(e.logs.stdout.join(''), 'user\nfrom files\n');
        await sbx.runCode(`open("/home/user/${marker}.out", "w").write("from python")`);
        assert.equal(await sbx.files.read(`/home/user/${marker}.out`), 'from python');
    });

    test('contexts: separate state, list, restart, remove', async () => {
        const ctx = await sbx.createCodeContext({ cwd: '/tmp' });
        assert.equal(typeof ctx.id, 'string');
        assert.equal(ctx.cwd, '/tmp');
        const where = await sbx.runCode('import os\nos.getcwd()', { context: ctx });
        assert.equal(where.text, "'/tmp'");
        const missing = await sbx.runCode('x', { context: ctx });
        assert.equal(missing.error?.name, 'NameError', 'a new context does not see the default one\'s x');
        await sbx.runCode('z = 5', { context: ctx });
        assert.equal((await sbx.runCode('z', { context: ctx })).text, '5');

        const listed = await sbx.listCodeContexts();
        assert.ok(listed.some((c) => c.id === ctx.id), 'listCodeContexts has it');

        await sbx.restartCodeContext(ctx);
        const gone = await sbx.runCode('z', { context: ctx });
        assert.equal(gone.error?.name, 'NameError', 'restart clears the state');

        await sbx.removeCodeContext(ctx);
        assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id), 'removed');
    });

    test('concurrent runs in separate contexts each get their own output', async () => {
        const ctxs = await Promise.all([1, 2, 3].map(() => sbx.createCodeContext()));
        const res = await Promise.all(ctxs.map((c, i) => sbx.runCode(`v = ${i}\nprint("ctx", v)\nv * 10`, { context: c })));
        res.forEach((e, i) => {
            assert.equal(e.logs.stdout.join(''), `ctx ${i}\n`);
            assert.equal(e.text, String(i * 10));
        });
        await Promise.all(ctxs.map((c) => sbx.removeCodeContext(c)));
    });
});
