// What the worker suites share: the fake control plane's start, and helpers over its
// request log (tests/worker/worker.test.mjs, tests/worker/glovebox_worker.test.mjs).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

export function startFake(scenario, logFile) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(HERE, 'fake_cp.mjs'), scenario, logFile], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      const m = /listening (\d+)\n/.exec(out);
      if (m) resolve({ proc: p, port: Number(m[1]) });
    });
    p.on('exit', (code) => reject(new Error(`fake_cp exited ${code} before listening`)));
  });
}

// ---- helpers over the log
export const workPath = (id, verb) => `/v1/environments/env_test/work/${id}/${verb}`;
export const isPoll = (r) => r.path === '/v1/environments/env_test/work/poll';
export const forItem = (log, id) => log.filter((r) => r.path.startsWith(`/v1/environments/env_test/work/${id}/`));
export const forSession = (log, sid) => log.filter((r) => r.path === `/v1/sessions/${sid}` || r.path.startsWith(`/v1/sessions/${sid}/`));
export const idx = (log, pred) => log.findIndex(pred);
export const results = (log, sid) =>
  forSession(log, sid)
    .filter((r) => r.method === 'POST' && r.path.endsWith('/events'))
    .flatMap((r) => r.body.events);
