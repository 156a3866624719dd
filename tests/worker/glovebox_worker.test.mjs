// `glovebox worker` end to end: a private gloveboxd (its own state and runtime dirs), the fake
// control plane (fake_cp.mjs) running each scenario, and `build/glovebox worker
// --environment-id env_test --once` (or `--webhook 127.0.0.1:0`, woken by the fake's signed
// deliveries) between them. The fake's request log and /_fake/state
// must show what managed-agents-worker.md §2-§5 says a worker does: every owned call answered
// exactly once with a non-empty user.tool_result and the right is_error, unowned calls left
// alone, a forced stop at the end, and none after a 412.
//   node --test tests/worker/glovebox_worker.test.mjs        (as root, after make; BUILD=build-san)
// Skips without root or without $BUILD/gloveboxd and $BUILD/glovebox.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFake, workPath, isPoll, forItem, forSession, idx, results } from './lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const BUILD = path.resolve(REPO, process.env.BUILD ?? 'build');
const GLOVEBOX = path.join(BUILD, 'glovebox');
const GLOVEBOXD = path.join(BUILD, 'gloveboxd');
const BETA = 'managed-agents-2026-04-01';
const VERSION = '2023-06-01';
const ENV_KEY = 'sk-ant-oat01-FAKEENVKEY';
const OWNED = new Set(['bash', 'read', 'write', 'edit', 'glob', 'grep']);

const skip =
  process.getuid?.() !== 0
    ? 'needs root (gloveboxd creates sandboxes)'
    : !fs.existsSync(GLOVEBOXD) || !fs.existsSync(GLOVEBOX)
      ? `no ${GLOVEBOXD}: run make`
      : false;

// ---- the private daemon
let tmp;
let daemon;
let runDir;

function healthz(sock) {
  return new Promise((resolve) => {
    const req = http.get({ socketPath: sock, path: '/healthz', host: 'glovebox' }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
  });
}

async function startDaemon() {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gbx-worker-e2e-'));
  fs.chmodSync(tmp, 0o711);
  runDir = path.join(tmp, 'run');
  const log = fs.openSync(path.join(tmp, 'daemon.log'), 'a');
  daemon = spawn(GLOVEBOXD, ['--state-dir', path.join(tmp, 'state'), '--runtime-dir', runDir, '--kill-on-exit'], {
    stdio: ['ignore', log, log],
  });
  fs.closeSync(log);
  let exited = false;
  daemon.on('exit', () => (exited = true));
  for (let i = 0; i < 200 && !exited; i++) {
    if (await healthz(path.join(runDir, 'api.sock'))) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('gloveboxd did not start:\n' + fs.readFileSync(path.join(tmp, 'daemon.log'), 'utf8'));
}

async function stopDaemon() {
  if (daemon && daemon.exitCode === null) {
    const done = new Promise((r) => daemon.on('exit', r));
    daemon.kill('SIGTERM');
    const t = setTimeout(() => daemon.kill('SIGKILL'), 30000);
    await done;
    clearTimeout(t);
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}

// ---- the fake and the worker

function runWorker(base, timeoutMs, maxIdleMs = 1000) {
  return new Promise((resolve) => {
    const env = { ...process.env, GLOVEBOX_RUNTIME_DIR: runDir, ANTHROPIC_BASE_URL: base, ANTHROPIC_ENVIRONMENT_KEY: ENV_KEY };
    delete env.ANTHROPIC_VERSION;
    const p = spawn(GLOVEBOX, ['worker', '--environment-id', 'env_test', '--once', '--max-idle-ms', String(maxIdleMs)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    const kill = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code, signal) => {
      clearTimeout(kill);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

// run a scenario (a file in scenarios/, or an object): `runs` workers with --once one after
// the other; returns log and state
async function runScenario(name, runs = 1, timeoutMs = 60000, maxIdleMs = 1000) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gbx-worker-fake-'));
  let scenario = path.join(HERE, 'scenarios', String(name));
  if (typeof name === 'object') {
    scenario = path.join(dir, 'scenario.json');
    fs.writeFileSync(scenario, JSON.stringify(name));
  }
  const logFile = path.join(dir, 'log.jsonl');
  const fake = await startFake(scenario, logFile);
  const base = `http://127.0.0.1:${fake.port}`;
  try {
    const workers = [];
    for (let i = 0; i < runs; i++) workers.push(await runWorker(base, timeoutMs, maxIdleMs));
    const state = await (await fetch(`${base}/_fake/state`)).json();
    const log = fs
      .readFileSync(logFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    return { workers, state, log, spec: JSON.parse(fs.readFileSync(scenario, 'utf8')) };
  } finally {
    fake.proc.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}


function explain(run) {
  return (
    '\nlog:\n' +
    run.log.map((r) => `${r.t_ms} ${r.method} ${r.path}?${r.raw_query} ${r.status} ${r.auth}`).join('\n') +
    run.workers.map((w) => `\nworker exit ${w.code} ${w.signal ?? ''}\nstderr: ${w.stderr.slice(-3000)}`).join('')
  );
}

// every owned agent.tool_use the session ever held (history and script), in order
function ownedCalls(spec, sid) {
  const s = spec.sessions[sid];
  return [...(s.history ?? []), ...(s.script ?? [])].filter((e) => e.type === 'agent.tool_use' && OWNED.has(e.name));
}
function unownedCalls(spec, sid) {
  const s = spec.sessions[sid];
  return [...(s.history ?? []), ...(s.script ?? [])]
    .filter((e) => (e.type === 'agent.tool_use' && !OWNED.has(e.name)) || e.type === 'agent.custom_tool_use')
    .map((e) => e.id);
}
function answeredInHistory(spec, sid) {
  return new Set((spec.sessions[sid].history ?? []).filter((e) => e.type === 'user.tool_result').map((e) => e.tool_use_id));
}

// what every scenario shares: headers, credentials, valid posts, results for owned calls only
function commonChecks(run, { lostItems = [], notRun = [], webhook = false } = {}) {
  const { log, state, spec } = run;
  for (const w of run.workers) assert.equal(w.code, 0, 'glovebox worker exits 0' + explain(run));
  assert.ok(state.all_done, 'all items done' + explain(run));
  for (const r of log) {
    const what = `${r.method} ${r.path}`;
    assert.ok((r.anthropic_beta ?? '').split(',').map((s) => s.trim()).includes(BETA), `${what}: anthropic-beta`);
    assert.equal(r.anthropic_version, VERSION, `${what}: anthropic-version`);
    assert.equal(r.x_api_key, false, `${what}: no x-api-key`);
    assert.notEqual(r.auth, 'none', `${what}: a bearer`);
    if (r.method === 'POST' && r.body !== null) assert.equal(r.content_type, 'application/json', `${what}: content-type`);
  }
  for (const r of log.filter(isPoll)) {
    assert.equal(r.auth, 'env', 'poll uses the environment key');
    assert.match(r.anthropic_worker_id ?? '', /^.+-[0-9a-f-]{36}$/, 'poll carries Anthropic-Worker-ID hostname-uuid');
    if (webhook) {
      // a drain polls without blocking, reclaiming items a dead runner acked (spec §9.2)
      assert.equal(r.query.block_ms, undefined, 'a drain poll does not block');
      assert.equal(r.query.reclaim_older_than_ms, '2000');
    } else {
      assert.equal(r.query.block_ms, '999');
    }
  }
  for (const w of spec.work) {
    const sid = w.session;
    const usable = w.secret && typeof w.secret === 'object'; // a string is sent verbatim: undecodable
    const cred = usable ? `session:${w.id}` : 'env';
    const ack = log.filter((r) => r.path === workPath(w.id, 'ack'));
    assert.equal(ack.length, 1, `${w.id}: one ack`);
    assert.equal(ack[0].auth, 'env', `${w.id}: ack uses the environment key`);
    for (const r of [...forItem(log, w.id).filter((r) => !r.path.endsWith('/ack')), ...forSession(log, sid)])
      assert.equal(r.auth, cred, `${r.method} ${r.path}: ${usable ? 'sessions_token' : 'environment key'}`);
    for (const r of [...forItem(log, w.id), ...forSession(log, sid)])
      assert.equal(r.anthropic_worker_id, null, `${r.path}: Anthropic-Worker-ID on poll only`);

    // heartbeat first with NO_HEARTBEAT, then echoing; stream opened before the history is read
    const beats = log.filter((r) => r.path === workPath(w.id, 'heartbeat'));
    assert.ok(beats.length >= 1, `${w.id}: heartbeats`);
    assert.equal(beats[0].query.expected_last_heartbeat, 'NO_HEARTBEAT');
    assert.ok(idx(log, (r) => r === ack[0]) < log.indexOf(beats[0]), `${w.id}: beat after ack`);
    // each beat echoes the last successful one's last_heartbeat byte for byte; after a success
    // the next beat comes ttl/2 = 2 s later (after a failure, sooner)
    let lastOk = null;
    for (let i = 0; i < beats.length; i++) {
      if (i > 0) {
        assert.equal(beats[i].query.expected_last_heartbeat, lastOk?.response.last_heartbeat ?? 'NO_HEARTBEAT', `${w.id}: beat ${i + 1} echoes`);
        if (beats[i - 1].status === 200)
          assert.ok(beats[i].t_ms - beats[i - 1].t_ms >= 1500, `${w.id}: beats ttl/2 = 2 s apart` + explain(run));
      }
      if (beats[i].status === 200) lastOk = beats[i];
    }
    const iStream = idx(log, (r) => r.path === `/v1/sessions/${sid}/events/stream`);
    const iList = idx(log, (r) => r.method === 'GET' && r.path === `/v1/sessions/${sid}/events`);
    assert.ok(iStream >= 0 && iStream < iList, `${w.id}: stream before reconcile` + explain(run));
    assert.equal(log[iList].query.limit, '1000');

    const s = state.sessions[sid];
    assert.deepEqual(s.rejected, [], `${sid}: no post rejected by the fake`);
    assert.deepEqual(s.duplicates, [], `${sid}: no call answered twice`);
    assert.deepEqual(s.unexpected, [], `${sid}: no result for an unowned call`);
    assert.deepEqual(s.custom_tool_results, [], `${sid}: no custom tool results`);
    const posted = results(log, sid);
    for (const e of posted) {
      assert.equal(e.type, 'user.tool_result');
      assert.ok(Array.isArray(e.content) && e.content.length > 0, `${e.tool_use_id}: content never empty`);
      for (const b of e.content) if (b.type === 'text') assert.ok(b.text.length > 0, `${e.tool_use_id}: text never empty`);
      assert.equal(typeof e.is_error, 'boolean');
    }
    // exactly one result per owned, unanswered call (unless the lease was lost); none for unowned
    const ids = forSession(log, sid)
      .filter((r) => r.method === 'POST' && r.path.endsWith('/events') && r.status === 200)
      .flatMap((r) => r.body.events)
      .map((e) => e.tool_use_id);
    const unowned = unownedCalls(spec, sid);
    for (const u of unowned) assert.ok(!ids.includes(u), `${sid}: ${u} (unowned) left alone`);
    assert.deepEqual(s.unowned.slice().sort(), unowned.slice().sort(), `${sid}: unowned calls still unanswered`);
    if (!lostItems.includes(w.id)) {
      const want = ownedCalls(spec, sid)
        .map((e) => e.id)
        .filter((id) => !answeredInHistory(spec, sid).has(id) && !notRun.includes(id));
      assert.deepEqual(ids, want, `${sid}: one result per owned call, in order` + explain(run));
      assert.deepEqual(s.pending.filter((id) => !notRun.includes(id)), [], `${sid}: nothing owned left pending`);
    }
  }
}

function checkStopped(run, workId, sid) {
  const stops = run.log.filter((r) => r.path === workPath(workId, 'stop'));
  assert.equal(stops.length, 1, `${workId}: one stop` + explain(run));
  assert.deepEqual(stops[0].body, { force: true });
  assert.equal(stops[0].status, 204);
  const lastPost = run.log.findLastIndex((r) => r.method === 'POST' && r.path === `/v1/sessions/${sid}/events`);
  assert.ok(run.log.indexOf(stops[0]) > lastPost, `${workId}: stop after the last result`);
  assert.ok(stops[0].t_ms - run.log[lastPost].t_ms >= 900, `${workId}: stop waits --max-idle-ms after end_turn`);
  assert.equal(run.state.items.find((i) => i.id === workId).state, 'stopped');
}

// a shutdown the heartbeat asks for: one forced stop right after that beat; the call in flight
// is abandoned (no result posted)
function checkShutdownByBeat(run, workId, sid, inflight) {
  const beats = run.log.filter((r) => r.path === workPath(workId, 'heartbeat'));
  assert.deepEqual(beats.map((b) => b.status), [200, 200], explain(run));
  const stops = run.log.filter((r) => r.path === workPath(workId, 'stop'));
  assert.equal(stops.length, 1, `${workId}: one stop` + explain(run));
  assert.deepEqual(stops[0].body, { force: true });
  assert.ok(run.log.indexOf(stops[0]) > run.log.indexOf(beats[1]));
  assert.ok(stops[0].t_ms - beats[1].t_ms < 1000, `${workId}: stops at once`);
  assert.equal(run.state.items.find((i) => i.id === workId).state, 'stopped');
  assert.deepEqual(run.state.sessions[sid].pending, [inflight], `${workId}: the call in flight gets no result`);
}

const resultsById = (run, sid) => Object.fromEntries(run.state.sessions[sid].tool_results.map((x) => [x.tool_use_id, x]));
const text = (r) => r.content.map((b) => b.text).join('');

describe('glovebox worker against the fake control plane', { skip }, () => {
  before(startDaemon);
  after(stopDaemon);

  describe('happy path: every tool, unowned calls, end_turn', () => {
    let run;
    before(async () => {
      run = await runScenario('happy.json');
    });
    test('headers, credentials, one result per owned call', () => commonChecks(run));
    test('results and is_error as the tools answer them', () => {
      const r = resultsById(run, 'sesn_A');
      assert.equal(text(r.sevt_hist_open), 'from-history');
      assert.equal(r.sevt_hist_open.is_error, false);
      assert.equal(r.sevt_a1.is_error, true, 'a non-zero exit is an error');
      assert.equal(text(r.sevt_a1), 'out\nerr');
      for (const id of ['sevt_a2', 'sevt_a3', 'sevt_a4', 'sevt_a5', 'sevt_a6', 'sevt_a7', 'sevt_a8', 'sevt_a9'])
        assert.equal(r[id].is_error, false, `${id}: ${text(r[id])}`);
      assert.match(text(r.sevt_a2), /^wrote 22 bytes to /);
      assert.match(text(r.sevt_a3), /\(1 replacement\(s\)\)$/);
      assert.equal(text(r.sevt_a4), 'int main(){return 1;}\n');
      assert.match(text(r.sevt_a5), /src\/m\.c/);
      assert.match(text(r.sevt_a6), /src\/m\.c:1:int main\(\)\{return 1;\}/);
      assert.equal(text(r.sevt_a7), 'bash session restarted');
      assert.equal(text(r.sevt_a9), 'slept');
      assert.ok(!('sevt_hist_done' in r), 'an answered history call is not run again');
    });
    test('heartbeats repeat during a long call; one forced stop after the idle', () => {
      const beats = run.log.filter((r) => r.path === workPath('work_A', 'heartbeat'));
      assert.ok(beats.length >= 2 && beats.every((b) => b.status === 200), explain(run));
      checkStopped(run, 'work_A', 'sesn_A');
    });
  });

  describe('reconcile: unanswered history calls over three pages', () => {
    let run;
    before(async () => {
      run = await runScenario('reconcile.json');
    });
    test('headers, credentials, one result per owned call', () => commonChecks(run));
    test('every page read before any call runs; calls in history order', () => {
      const lists = run.log.filter((r) => r.method === 'GET' && r.path === '/v1/sessions/sesn_R/events');
      assert.ok(lists.length >= 3, explain(run));
      for (let i = 1; i < 3; i++) assert.equal(lists[i].query.page, lists[i - 1].response.next_page);
      const firstPost = idx(run.log, (r) => r.method === 'POST' && r.path === '/v1/sessions/sesn_R/events');
      assert.ok(run.log.indexOf(lists[2]) < firstPost);
      assert.equal(text(resultsById(run, 'sesn_R').sevt_r3), 'reconciled\n');
      checkStopped(run, 'work_R', 'sesn_R');
    });
  });

  const lifecycle = path.join(HERE, 'scenarios', 'lifecycle.json');
  describe('lifecycle: stopping, lease_extended false, transient 503s, stream drop', {
    skip: !fs.existsSync(lifecycle) && 'no scenarios/lifecycle.json',
  }, () => {
    let run;
    before(async () => {
      run = await runScenario('lifecycle.json', 3); // three --once runs: work_S, work_L, work_T
    });
    test('headers, credentials, one result per owned call', () =>
      commonChecks(run, { lostItems: ['work_S', 'work_L'] }));
    test('heartbeat state stopping: force-stop at once, the call in flight abandoned', () => {
      checkShutdownByBeat(run, 'work_S', 'sesn_S', 'sevt_s2');
      assert.deepEqual(results(run.log, 'sesn_S').map((e) => e.tool_use_id), ['sevt_s1']);
    });
    test('heartbeat lease_extended false: force-stop at once', () => {
      checkShutdownByBeat(run, 'work_L', 'sesn_L', 'sevt_l1');
    });
    test('heartbeat 503s are retried within the TTL and the lease kept', () => {
      const beats = run.log.filter((r) => r.path === workPath('work_T', 'heartbeat'));
      assert.deepEqual(beats.slice(0, 4).map((b) => b.status), [200, 503, 503, 200], explain(run));
      for (const i of run.state.items) assert.equal(i.late_beats ?? 0, 0, `${i.id}: no beat later than the TTL`);
      assert.equal(run.state.items.find((i) => i.id === 'work_T').lost, false);
    });
    test('stream drop: reconnect, reconcile again, nothing run twice', () => {
      const streams = run.log.filter((r) => r.path === '/v1/sessions/sesn_T/events/stream');
      const lists = run.log.filter((r) => r.method === 'GET' && r.path === '/v1/sessions/sesn_T/events');
      assert.equal(streams.length, 2, explain(run));
      assert.equal(lists.length, 2);
      assert.ok(run.log.indexOf(streams[1]) < run.log.indexOf(lists[1]), 'stream reopened before the second reconcile');
      assert.ok(streams[1].t_ms - lists[0].t_ms >= 400, 'reconnect after a backoff (0.5 s)');
      assert.equal(text(resultsById(run, 'sesn_T').sevt_t2), '1', 'sevt_t2 ran once');
    });
    test('a result post answered 503 is retried, then accepted once', () => {
      const posts = run.log.filter(
        (r) => r.method === 'POST' && r.path === '/v1/sessions/sesn_T/events' && r.body.events[0].tool_use_id === 'sevt_t3',
      );
      assert.deepEqual(posts.map((p) => p.status), [503, 200], explain(run));
      assert.deepEqual(run.state.sessions.sesn_T.tool_results.map((x) => x.tool_use_id), ['sevt_t1', 'sevt_t2', 'sevt_t3']);
      checkStopped(run, 'work_T', 'sesn_T');
    });
  });

  describe('edges: poll 401, an undecodable secret, termination, memory stores', () => {
    test('poll 401: the worker exits 1 and says why', async () => {
      const run = await runScenario({
        work: [{ id: 'work_X', session: 'sesn_X', poll_status: 401 }],
        sessions: { sesn_X: { script: [] } },
      });
      assert.equal(run.workers[0].code, 1, explain(run));
      assert.match(run.workers[0].stderr, /refused the environment key \(401\)/);
      assert.equal(run.log.filter((r) => !isPoll(r)).length, 0, 'nothing but the poll' + explain(run));
    });
    test('an undecodable secret: the environment key for every call; session.status_terminated ends the item', async () => {
      const t0 = Date.now();
      const run = await runScenario(
        {
          ttl_seconds: 4,
          work: [{ id: 'work_U', session: 'sesn_U', secret: 'not base64url json!' }],
          sessions: {
            sesn_U: {
              end: 'terminated',
              script: [{ type: 'agent.tool_use', id: 'sevt_u1', name: 'bash', input: { command: 'printf ""' } }],
            },
          },
        },
        1,
        60000,
        60000, // a minute of --max-idle-ms: only the termination can end it soon
      );
      commonChecks(run);
      assert.ok(Date.now() - t0 < 30000, 'termination ends the item without waiting for the idle');
      const r = resultsById(run, 'sesn_U').sevt_u1;
      assert.deepEqual(r.content, [{ type: 'text', text: '(no output)' }], 'an empty output is never empty content');
      assert.equal(r.is_error, false);
      const stops = run.log.filter((x) => x.path === workPath('work_U', 'stop'));
      assert.equal(stops.length, 1);
      assert.equal(stops[0].auth, 'env');
      assert.match(run.workers[0].stderr, /secret is not usable/);
      assert.doesNotMatch(run.workers[0].stderr, /not base64url json/, 'the secret is never logged');
    });
    test('a session with memory stores: the item is stopped with a clear message, nothing run', async () => {
      const run = await runScenario({
        work: [{ id: 'work_M', session: 'sesn_M', secret: { sessions_token: 'sk-ant-req-FAKE-M' } }],
        sessions: {
          sesn_M: {
            resources: [{ type: 'memory_store', memory_store_id: 'memstore_1', mount_path: '/mnt/memory/notes', access: 'read_write', name: 'notes' }],
            script: [{ type: 'agent.tool_use', id: 'sevt_m1', name: 'bash', input: { command: 'echo no' } }],
          },
        },
      });
      assert.equal(run.workers[0].code, 0, explain(run));
      assert.match(run.workers[0].stderr, /memory stores/);
      assert.deepEqual(results(run.log, 'sesn_M'), []);
      const stops = run.log.filter((x) => x.path === workPath('work_M', 'stop'));
      assert.equal(stops.length, 1, explain(run));
      assert.equal(run.state.items[0].state, 'stopped');
    });
  });

  const scenario = (f) => path.join(HERE, 'scenarios', f);
  describe('permissions: ask held for a confirmation, deny never run', {
    skip: !fs.existsSync(scenario('permissions.json')) && 'no scenarios/permissions.json',
  }, () => {
    let run;
    before(async () => {
      run = await runScenario('permissions.json');
    });
    test('headers, credentials, one result per allowed call', () => commonChecks(run, { notRun: ['sevt_p2', 'sevt_p3'] }));
    test('the allowed ask call runs after its confirmation; denied ones never', () => {
      assert.deepEqual(results(run.log, 'sesn_P').map((e) => e.tool_use_id), ['sevt_p1', 'sevt_p4'], explain(run));
      const r = resultsById(run, 'sesn_P');
      assert.equal(text(r.sevt_p1), 'p1');
      assert.match(text(r.sevt_p4), /p1\.txt/);
      assert.doesNotMatch(text(r.sevt_p4), /^p2\.txt$|^p3\.txt$/m, 'the denied calls wrote nothing');
      checkStopped(run, 'work_P', 'sesn_P');
    });
  });

  describe('claim errors: ack 403 then the item again; poll 401', {
    skip: !fs.existsSync(scenario('claim_errors.json')) && 'no scenarios/claim_errors.json',
  }, () => {
    let run;
    before(async () => {
      run = await runScenario('claim_errors.json', 2); // work_Q (after a failed ack), then the 401
    });
    test('ack 403: no stop, poll again, serve the item when it comes back', () => {
      assert.equal(run.workers[0].code, 0, explain(run));
      const acks = run.log.filter((r) => r.path === workPath('work_Q', 'ack'));
      assert.deepEqual(acks.map((a) => a.status), [403, 200], explain(run));
      const stops = run.log.filter((r) => r.path === workPath('work_Q', 'stop'));
      assert.equal(stops.length, 1);
      assert.ok(run.log.indexOf(stops[0]) > run.log.indexOf(acks[1]), 'no stop after the failed ack');
      assert.deepEqual(results(run.log, 'sesn_Q').map((e) => e.tool_use_id), ['sevt_q1']);
    });
    test('poll 401: the worker exits 1', () => {
      assert.equal(run.workers[1].code, 1, explain(run));
      assert.match(run.workers[1].stderr, /refused the environment key \(401\)/);
      assert.equal(run.state.items.find((i) => i.id === 'work_Z').acked, false);
    });
  });

  describe('stopped elsewhere: heartbeat state stopped, the forced stop gets 409', {
    skip: !fs.existsSync(scenario('stopped.json')) && 'no scenarios/stopped.json',
  }, () => {
    let run;
    before(async () => {
      run = await runScenario('stopped.json');
    });
    test('headers, credentials; the call in flight gets no result', () => commonChecks(run, { lostItems: ['work_X'] }));
    test('shut down at the beat; a stop answered 409 is fine', () => {
      const beats = run.log.filter((r) => r.path === workPath('work_X', 'heartbeat'));
      assert.deepEqual(beats.map((b) => [b.status, b.response.state]), [[200, 'active'], [200, 'stopped']], explain(run));
      const stops = run.log.filter((r) => r.path === workPath('work_X', 'stop'));
      assert.deepEqual(stops.map((r) => r.status), [409], explain(run));
      assert.ok(stops[0].t_ms - beats[1].t_ms < 1000, 'at once');
      assert.equal(run.workers[0].code, 0);
      assert.deepEqual(run.state.sessions.sesn_X.pending, ['sevt_x1']);
    });
  });

  describe('tools: §6 edge cases through the daemon', {
    skip: !fs.existsSync(scenario('tools.json')) && 'no scenarios/tools.json',
  }, () => {
    let run, r;
    before(async () => {
      run = await runScenario('tools.json');
      r = resultsById(run, 'sesn_E');
    });
    const t = (id) => r[id].content.map((b) => b.text ?? '').join('');
    test('headers, credentials, one result per owned call', () => {
      commonChecks(run);
      checkStopped(run, 'work_E', 'sesn_E');
    });
    test('image and PDF reads are image and document blocks', () => {
      for (const [id, kind, media] of [['sevt_e_png', 'image', 'image/png'], ['sevt_e_pdf', 'document', 'application/pdf']]) {
        assert.equal(r[id].content.length, 1);
        assert.deepEqual([r[id].content[0].type, r[id].content[0].source.type, r[id].content[0].source.media_type], [kind, 'base64', media]);
      }
    });
    test('read: view_range, a directory, .. out of the workdir', () => {
      assert.equal(t('sevt_e_range'), 'l2\nl3');
      assert.equal(r.sevt_e_dir.is_error, true);
      assert.equal(r.sevt_e_dotdot.is_error, true);
      assert.match(t('sevt_e_dotdot'), /outside/);
    });
    test('read: a symlink out of the workdir is refused', () => {
      assert.equal(r.sevt_e_symlink.is_error, true);
      assert.match(t('sevt_e_symlink'), /outside/);
    });
    test('edit, bash: errors, timeout, exit, truncation, scrubbed env, no output', () => {
      assert.equal(r.sevt_e_edit0.is_error, true);
      assert.equal(r.sevt_e_edit2.is_error, true);
      assert.match(t('sevt_e_edit2'), /4/);
      assert.match(t('sevt_e_editall'), /\(4 replacement\(s\)\)$/);
      assert.equal(r.sevt_e_timeout.is_error, true);
      assert.match(t('sevt_e_timeout'), /timed out/);
      assert.equal(t('sevt_e_after_timeout'), 'fresh');
      assert.equal(r.sevt_e_exit.is_error, true);
      assert.match(t('sevt_e_exit'), /bash session terminated/);
      const big = t('sevt_e_big');
      assert.ok(big.startsWith('[output truncated]') && big.endsWith('END'), big.slice(0, 40));
      assert.ok(big.length <= 100 * 1024 + 64);
      assert.equal(t('sevt_e_env'), '0', 'no ANTHROPIC_* variable reaches the bash tool');
      assert.equal(t('sevt_e_empty'), '(no output)');
    });
  });

  describe('lost lease: heartbeat 412, no stop; then the next item', () => {
    let run;
    before(async () => {
      run = await runScenario('lost_lease.json', 2); // two --once runs: work_B, then work_C
    });
    test('headers, credentials, one result per owned call', () => commonChecks(run, { lostItems: ['work_B'] }));
    test('412: no stop call, no result after it', () => {
      const beats = run.log.filter((r) => r.path === workPath('work_B', 'heartbeat'));
      assert.deepEqual(beats.map((b) => b.status), [200, 412], explain(run));
      const b = run.state.items.find((i) => i.id === 'work_B');
      assert.equal(b.stop_calls, 0, 'never stop after a 412');
      assert.equal(b.lost, true);
      const i412 = idx(run.log, (r) => r.status === 412);
      const after412 = run.log.slice(i412 + 1).filter((r) => r.path.startsWith('/v1/sessions/sesn_B') && r.method === 'POST');
      assert.deepEqual(after412, [], 'nothing posted for sesn_B after the 412' + explain(run));
      assert.deepEqual(results(run.log, 'sesn_B').map((e) => e.tool_use_id), ['sevt_b1']);
    });
    test('the next item is served and stopped', () => {
      assert.deepEqual(results(run.log, 'sesn_C').map((e) => e.tool_use_id), ['sevt_c1']);
      checkStopped(run, 'work_C', 'sesn_C');
    });
  });
  describe('webhook mode: verified deliveries drain the queue', () => {
    const SECRET = 'whsec_' + Buffer.from('fake-webhook-signing-key-0123456789').toString('base64');
    let run, dir, fake, base, worker, hookURL;
    const deliveries = {};
    const readLog = (f) =>
      fs
        .readFileSync(f, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    const deliver = async (o) =>
      (await fetch(`${base}/_fake/webhook`, { method: 'POST', body: JSON.stringify({ url: hookURL, session_id: 'sesn_H', ...o }) })).json();
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gbx-worker-hook-'));
      const scenario = path.join(HERE, 'scenarios', 'webhook.json');
      const logFile = path.join(dir, 'log.jsonl');
      fs.writeFileSync(path.join(dir, 'secret'), SECRET + '\n');
      fake = await startFake(scenario, logFile);
      base = `http://127.0.0.1:${fake.port}`;
      const env = { ...process.env, GLOVEBOX_RUNTIME_DIR: runDir, ANTHROPIC_BASE_URL: base, ANTHROPIC_ENVIRONMENT_KEY: ENV_KEY };
      delete env.ANTHROPIC_VERSION;
      delete env.ANTHROPIC_WEBHOOK_SECRET;
      const p = spawn(
        GLOVEBOX,
        ['worker', '--environment-id', 'env_test', '--max-idle-ms', '1000', '--webhook', '127.0.0.1:0', '--webhook-secret-file', path.join(dir, 'secret')],
        { stdio: ['ignore', 'pipe', 'pipe'], env },
      );
      worker = { code: null, signal: null, stdout: '', stderr: '' };
      const exited = new Promise((r) =>
        p.on('exit', (code, signal) => {
          worker.code = code;
          worker.signal = signal;
          r();
        }),
      );
      p.stdout.on('data', (d) => (worker.stdout += d));
      p.stderr.on('data', (d) => (worker.stderr += d));
      const kill = setTimeout(() => p.kill('SIGKILL'), 90000);
      try {
        for (let i = 0; i < 200 && !hookURL; i++) {
          const m = /webhook: listening on 127\.0\.0\.1:(\d+)/.exec(worker.stderr);
          if (m) hookURL = `http://127.0.0.1:${m[1]}/hook`;
          else await sleep(50);
        }
        assert.ok(hookURL, 'the worker says where it listens: ' + worker.stderr);
        const now = Math.floor(Date.now() / 1000);
        deliveries.tampered = await deliver({ tamper: 'signature' });
        deliveries.body = await deliver({ tamper: 'body' });
        deliveries.stale = await deliver({ timestamp: now - 600 });
        deliveries.future = await deliver({ timestamp: now + 600 });
        deliveries.unsigned = await deliver({ omit_header: 'webhook-signature' });
        deliveries.other_key = await deliver({ signing_key: 'whsec_' + Buffer.from('another key').toString('base64') });
        await sleep(500);
        deliveries.polls_before = readLog(logFile).filter(isPoll).length;
        deliveries.good = await deliver({ id: 'event_hook_1' });
        let state;
        for (let i = 0; i < 600; i++) {
          state = await (await fetch(`${base}/_fake/state`)).json();
          const log = readLog(logFile);
          const iStop = log.findIndex((r) => r.path === workPath('work_H', 'stop'));
          // done, and the drain polled once more after the stop (the queue is empty)
          if (state.all_done && iStop >= 0 && log.slice(iStop).some(isPoll)) break;
          await sleep(100);
        }
        await sleep(300);
        const pollsAfterDrain = readLog(logFile).filter(isPoll).length;
        deliveries.duplicate = await deliver({ id: 'event_hook_1' });
        await sleep(800);
        deliveries.polls_after_duplicate = readLog(logFile).filter(isPoll).length - pollsAfterDrain;
        // a second fresh delivery drains again (an empty queue: one poll)
        deliveries.second = await deliver({ id: 'event_hook_2' });
        for (let i = 0; i < 50 && readLog(logFile).filter(isPoll).length === pollsAfterDrain; i++) await sleep(100);
        deliveries.polls_after_second = readLog(logFile).filter(isPoll).length - pollsAfterDrain;
        state = await (await fetch(`${base}/_fake/state`)).json();
        p.kill('SIGTERM');
        await exited;
        run = { workers: [], worker, state, log: readLog(logFile), spec: JSON.parse(fs.readFileSync(scenario, 'utf8')) };
      } finally {
        clearTimeout(kill);
        if (worker.code === null && worker.signal === null) p.kill('SIGKILL');
        fake.proc.kill('SIGTERM');
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
    const why = () => explain(run) + '\nworker stderr:\n' + run.worker.stderr.slice(-4000);
    test('bad deliveries get 401 and wake nothing', () => {
      for (const k of ['tampered', 'body', 'stale', 'future', 'unsigned', 'other_key'])
        assert.equal(deliveries[k].status, 401, `${k}: ${JSON.stringify(deliveries[k])}` + why());
      assert.equal(deliveries.polls_before, 0, 'no poll before a verified delivery' + why());
    });
    test('a verified delivery is acknowledged and drains the queue', () => {
      assert.ok([200, 204].includes(deliveries.good.status), JSON.stringify(deliveries.good));
      commonChecks(run, { webhook: true });
      checkStopped(run, 'work_H', 'sesn_H');
      const r = resultsById(run, 'sesn_H');
      assert.equal(text(r.sevt_h0), 'from-history');
      assert.equal(text(r.sevt_h2), 'hooked');
      const polls = run.log.filter(isPoll);
      assert.ok(polls.length >= 2, 'polls until no work' + why());
      assert.equal(polls.at(-1).status, 204);
    });
    test('a replayed id gets 200 and does nothing; a new one drains again', () => {
      assert.equal(deliveries.duplicate.status, 200, JSON.stringify(deliveries.duplicate));
      assert.equal(deliveries.polls_after_duplicate, 0, 'a duplicate does not drain' + why());
      assert.ok([200, 204].includes(deliveries.second.status));
      assert.equal(deliveries.polls_after_second, 1, 'an empty queue: one poll' + why());
    });
    test('SIGTERM ends the listener', () => {
      assert.equal(run.worker.code, 130, why());
    });
  });
});
