#!/usr/bin/env node
// Runs the official npm @anthropic-ai/sdk EnvironmentWorker (the reference self-hosted worker)
// against the fake control plane, exactly as in managed-agents-worker.md §11, until every work
// item of the fake is done (stopped, or its lease lost with a 412) or a timeout.
//
//   node tests/worker/sdk_worker.mjs SCENARIO.json BASE_URL [TIMEOUT_MS]
//
// After the fake reports all_done it keeps the worker running for GRACE_MS more (so that a
// stop call that must not happen, e.g. after a 412, would still show in the fake's log), then
// aborts it. Prints the outcome as the last line: `done` (exit 0), `timeout` (exit 1), or
// `exited ERROR` when EnvironmentWorker.run ended by itself, e.g. on a poll 401 (exit 3);
// 2 is a usage error. The worker's
// workdir is a fresh temporary directory, printed as `workdir DIR` and removed at exit unless
// KEEP_WORKDIR=1; before that its remaining contents are printed as `workdir_left [JSON list]`.
// The SDK's own logs go to stderr.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { EnvironmentWorker } from '@anthropic-ai/sdk/lib/environments/index';

const GRACE_MS = Number(process.env.GRACE_MS ?? 1500);
const [scenarioPath, baseURL, timeoutArg] = process.argv.slice(2);
if (!scenarioPath || !baseURL) {
  process.stderr.write('usage: sdk_worker.mjs SCENARIO.json BASE_URL [TIMEOUT_MS]\n');
  process.exit(2);
}
const timeoutMs = Number(timeoutArg ?? 60000);
const sc = JSON.parse(fs.readFileSync(scenarioPath, 'utf8'));
const environmentId = sc.environment_id ?? 'env_test';
const environmentKey = sc.environment_key ?? 'sk-ant-oat01-FAKEENVKEY';

// the tools must not see the test runner's credentials (the SDK scrubs ANTHROPIC_* itself;
// these must not reach the client either)
delete process.env.ANTHROPIC_API_KEY;
delete process.env.ANTHROPIC_AUTH_TOKEN;
delete process.env.ANTHROPIC_BASE_URL;

const workdir = fs.mkdtempSync(path.join(os.tmpdir(), 'gbx-sdk-worker-'));
process.stdout.write(`workdir ${workdir}\n`);

const ctrl = new AbortController();
const client = new Anthropic({ authToken: environmentKey, baseURL });
const worker = new EnvironmentWorker({
  client,
  environmentId,
  environmentKey,
  workdir,
  workerId: 'worker-1',
  maxIdleMs: 1000,
});

async function fakeState() {
  const r = await fetch(`${baseURL}/_fake/state`);
  return r.json();
}

let outcome = 'timeout';
const watcher = (async () => {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !ctrl.signal.aborted) {
    try {
      const st = await fakeState();
      if (st.all_done) {
        await new Promise((r) => setTimeout(r, GRACE_MS));
        outcome = 'done';
        break;
      }
    } catch (e) {
      process.stderr.write(`sdk_worker: state: ${e}\n`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  ctrl.abort();
})();

try {
  await worker.run(ctrl.signal);
  if (!ctrl.signal.aborted) outcome = 'exited';
} catch (e) {
  if (!ctrl.signal.aborted) {
    // the worker gave up by itself (e.g. a fatal poll error)
    outcome = `exited ${String(e).split('\n')[0]}`;
    process.stderr.write(`sdk_worker: run: ${e?.stack ?? e}\n`);
  }
}
ctrl.abort();
await watcher;
// what the worker left behind (skill directories must be gone after teardown)
const left = fs.readdirSync(workdir, { recursive: true }).map(String).sort();
process.stdout.write(`workdir_left ${JSON.stringify(left)}\n`);
if (process.env.KEEP_WORKDIR !== '1') fs.rmSync(workdir, { recursive: true, force: true });
process.stdout.write(`${outcome}\n`);
process.exit(outcome === 'done' ? 0 : outcome.startsWith('exited') ? 3 : 1);
