// The E2B SDK client of the load test (bench/bench_load.c runs the native clients at the
// same time): for --seconds S, Sandbox.create() -> commands.run('echo hi') -> files.write /
// files.read -> kill(), one cycle after the other, timing each call.
//
//   node bench/load_e2b.mjs --seconds S
// needs E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY (bench/run.sh sets them) and the SDK from
// tests/e2b/node_modules.
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

const args = process.argv.slice(2);
const i = args.indexOf('--seconds');
const SECONDS = i >= 0 ? Number(args[i + 1]) : 60;
let Sandbox;
try {
    const require = createRequire(new URL('../tests/e2b/package.json', import.meta.url));
    ({ Sandbox } = require('e2b'));
} catch (e) {
    console.error(`load_e2b: the SDK is not installed: run npm ci in tests/e2b (${e.message})`);
    process.exit(77);
}
const t = { create: [], run: [], write: [], read: [], kill: [] };
let errors = 0, cycles = 0, first = '';
async function timed(name, fn) {
    const t0 = performance.now();
    const r = await fn();
    t[name].push(performance.now() - t0);
    return r;
}
function pct(xs, p) {
    const s = [...xs].sort((a, b) => a - b);
    return s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] : 0;
}
const end = performance.now() + SECONDS * 1000;
while (performance.now() < end) {
    let sbx;
    try {
        sbx = await timed('create', () => Sandbox.create());
        const r = await timed('run', () => sbx.commands.run('echo hi'));
        if (r.stdout.trim() !== 'hi') throw new Error(`commands.run: ${JSON.stringify(r)}`);
        await timed('write', () => sbx.files.write('/tmp/f', 'x'.repeat(4096)));
        const back = await timed('read', () => sbx.files.read('/tmp/f'));
        if (back.length !== 4096) throw new Error(`files.read: ${back.length} bytes`);
        await timed('kill', () => sbx.kill());
        sbx = null;
        cycles++;
    } catch (e) {
        errors++;
        if (!first) first = String(e && e.message ? e.message : e);
        if (sbx) await sbx.kill().catch(() => {});
    }
}
console.log(`== load, the E2B SDK client beside it: ${cycles} cycles in ${SECONDS} s`);
for (const [name, xs] of Object.entries(t))
    console.log(`  ${('E2B ' + name).padEnd(30)} p50 ${pct(xs, 50).toFixed(3).padStart(8)} ms  p99 ${pct(xs, 99).toFixed(3).padStart(8)} ms  (n=${xs.length})`);
console.log(`  ${'E2B errors'.padEnd(30)} ${errors}${first ? '; first: ' + first : ''}`);
process.exit(errors ? 1 : 0);
