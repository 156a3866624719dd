// The E2B SDK against gloveboxd (issue 4 §6), each figure beside a peer timed in the same
// process, interleaved run by run, with the ratio:
//
//   create -> first result   Sandbox.create() + commands.run('true')      (target p50 <= 25 ms)
//                            peer: the native API with fetch on the same listener and key:
//                            POST /v1/sandboxes {} + POST .../exec {"cmd": [the same argv], "wait": true}
//   create + run + kill      the same plus kill() / DELETE
//   exec round trip          commands.run('true') in a live sandbox; peer: native exec, same argv
//   host floor               bwrap ... true (as run.sh's hyperfine line) spawned from this process
//
// commands.run(cmd) always runs /bin/bash -l -c cmd: the native peer runs that same argv, so the
// ratio is the E2B protocol's cost (SDK, Connect framing, routing), not bash's.
//
//   node bench/e2b_bench.mjs [--runs N] [--exec-runs N] [--bwrap 'CMD'] [--label TEXT]
// needs E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY (bench/run.sh sets them) and the SDK from
// tests/e2b/node_modules (npm ci there).
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';

const args = process.argv.slice(2);
function opt(name, dflt) {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
}
const RUNS = Number(opt('--runs', 200));
const EXEC_RUNS = Number(opt('--exec-runs', 200));
const BWRAP = opt('--bwrap', '');
const LABEL = opt('--label', '');
const WARMUP = 10;

let Sandbox;
try {
    const require = createRequire(new URL('../tests/e2b/package.json', import.meta.url));
    ({ Sandbox } = require('e2b'));
} catch (e) {
    console.error(`e2b_bench: the SDK is not installed: run npm ci in tests/e2b (${e.message})`);
    process.exit(77);
}
for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
    if (!process.env[v]) {
        console.error(`e2b_bench: ${v} is not set (bench/run.sh sets it)`);
        process.exit(2);
    }
}
const BASE = process.env.E2B_API_URL.replace(/\/+$/, '');
const KEY = process.env.E2B_API_KEY;
const ARGV = ['/bin/bash', '-l', '-c', 'true'];

async function native(method, path, body) {
    const res = await fetch(BASE + path, {
        method,
        headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
}
async function nativeExec(id) {
    const r = await native('POST', `/v1/sandboxes/${id}/exec`, { cmd: ARGV, wait: true });
    if (r.exit_code !== 0) throw new Error(`native exec: ${JSON.stringify(r)}`);
}
async function sdkRun(sbx) {
    const r = await sbx.commands.run('true');
    if (r.exitCode !== 0) throw new Error(`commands.run('true'): exit ${r.exitCode}`);
}

const ms = (a, b) => b - a;
function pct(xs, p) {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
function line(name, xs) {
    return `${name.padEnd(58)} p50 ${pct(xs, 50).toFixed(2).padStart(7)} ms  p99 ${pct(xs, 99)
        .toFixed(2).padStart(7)} ms  mean ${(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(2).padStart(7)} ms`;
}
function ratio(name, a, b) {
    return `${name.padEnd(58)} ${(pct(a, 50) / pct(b, 50)).toFixed(2)}x (p50), ${(pct(a, 99) / pct(b, 99)).toFixed(2)}x (p99)`;
}

function bwrapOnce() {
    if (!BWRAP) return undefined;
    const t0 = performance.now();
    const r = spawnSync('/bin/sh', ['-c', BWRAP], { stdio: 'ignore' });
    const t1 = performance.now();
    if (r.status !== 0) throw new Error(`bwrap peer exited ${r.status}`);
    return ms(t0, t1);
}

async function createSection() {
    const sdkFirst = [], sdkCreate = [], sdkAll = [], natFirst = [], natAll = [], bw = [];
    for (let i = 0; i < WARMUP + RUNS; i++) {
        const keep = i >= WARMUP;
        // the SDK
        let t0 = performance.now();
        const sbx = await Sandbox.create();
        const tc = performance.now();
        await sdkRun(sbx);
        let t1 = performance.now();
        if (!(await sbx.kill())) throw new Error(`kill ${sbx.sandboxId}: false`);
        let t2 = performance.now();
        if (keep) { sdkCreate.push(ms(t0, tc)); sdkFirst.push(ms(t0, t1)); sdkAll.push(ms(t0, t2)); }
        // the native API, same listener, same key, same argv
        t0 = performance.now();
        const { id } = await native('POST', '/v1/sandboxes', {});
        await nativeExec(id);
        t1 = performance.now();
        await native('DELETE', `/v1/sandboxes/${id}`);
        t2 = performance.now();
        if (keep) { natFirst.push(ms(t0, t1)); natAll.push(ms(t0, t2)); }
        const b = bwrapOnce();
        if (keep && b !== undefined) bw.push(b);
    }
    console.log(line("SDK Sandbox.create()", sdkCreate));
    console.log(line("SDK create -> first result (create + run('true'))", sdkFirst));
    console.log(line('SDK create + run + kill', sdkAll));
    console.log(line('peer: native POST /v1/sandboxes + exec (wait)', natFirst));
    console.log(line('peer: native create + exec + DELETE', natAll));
    if (bw.length) console.log(line('peer: bwrap true (spawned from node)', bw));
    console.log(ratio('SDK / native, create -> first result', sdkFirst, natFirst));
    console.log(ratio('SDK / native, create + run + kill', sdkAll, natAll));
    if (bw.length) console.log(ratio('SDK create + run + kill / bwrap true', sdkAll, bw));
    const p50 = pct(sdkFirst, 50);
    console.log(`${'target: SDK create -> first result p50 <= 25 ms'.padEnd(58)} ${p50 <= 25 ? 'met' : 'MISSED'} (${p50.toFixed(2)} ms)`);
}

async function execSection() {
    const sbx = await Sandbox.create();
    const { id } = await native('POST', '/v1/sandboxes', {});
    const sdk = [], nat = [], bare = [];
    try {
        for (let i = 0; i < WARMUP + EXEC_RUNS; i++) {
            const keep = i >= WARMUP;
            let t0 = performance.now();
            await sdkRun(sbx);
            let t1 = performance.now();
            if (keep) sdk.push(ms(t0, t1));
            t0 = performance.now();
            await nativeExec(id);
            t1 = performance.now();
            if (keep) nat.push(ms(t0, t1));
            t0 = performance.now();
            const r = await native('POST', `/v1/sandboxes/${id}/exec`, { cmd: ['true'], wait: true });
            t1 = performance.now();
            if (r.exit_code !== 0) throw new Error('native exec true failed');
            if (keep) bare.push(ms(t0, t1));
        }
    } finally {
        await sbx.kill();
        await native('DELETE', `/v1/sandboxes/${id}`);
    }
    console.log(line("SDK exec round trip: commands.run('true')", sdk));
    console.log(line('peer: native exec (wait), /bin/bash -l -c true', nat));
    console.log(line('peer: native exec (wait), true without bash', bare));
    console.log(ratio('SDK / native, same argv', sdk, nat));
}

console.log(`== E2B SDK (e2b ${createRequire(new URL('../tests/e2b/package.json', import.meta.url))('e2b/package.json').version}, node ${process.versions.node}) vs the native API over the same TCP listener${LABEL ? `, ${LABEL}` : ''}: ${RUNS} creates, ${EXEC_RUNS} execs, interleaved`);
try {
    await createSection();
    console.log();
    await execSection();
} catch (e) {
    console.error(`e2b_bench: ${e.stack || e}`);
    process.exit(1);
}
