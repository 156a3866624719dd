// Keeps the fake control plane (fake_cp.mjs) honest: the official npm @anthropic-ai/sdk
// EnvironmentWorker (sdk_worker.mjs, pinned by package-lock.json) runs each scenario against
// it, and the fake's request log and /_fake/state must show what
// managed-agents-worker.md §2-§5 and §11 say a real worker does. If the SDK and the fake
// disagree, the fake (or the spec) is wrong before Glovebox's worker is tested against it.
//   node --test tests/worker/worker.test.mjs        (tests/worker/run.sh)
//
// Scenarios (scenarios/*.json, format at the top of fake_cp.mjs): happy (every tool, history
// over two pages, unowned custom + web_fetch calls, end_turn), lost_lease (no secret, 412, then
// the next item; empty polls 200 null), reconcile (three history pages), lifecycle (heartbeat
// stopping / lease_extended false / 503s, stream drop, result post 503), skills, permissions,
// claim_errors (ack 403, poll 401), tools (§6 edge cases), stopped (stop answered 409), plus
// signed webhook deliveries checked with the SDK's webhooks.unwrap().
//
// What npm @anthropic-ai/sdk 1.14.0 (Node 20) does where managed-agents-worker.md says
// otherwise or nothing (most are asserted below):
// * skills calls (GET /v1/skills/…) carry no anthropic-beta header at all (§2/§7: skills-2025-10-02);
//   an alias version ("latest") is resolved with GET /v1/skills/{id}/versions/latest, not by
//   listing versions, and the archive is fetched by the id that returns (Accept:
//   application/binary); a refused archive (../ member) leaves an empty skills/<name>/ until
//   teardown, and teardown leaves the empty skills/ root.
// * its HTTP client retries 408/409/429/5xx by itself (2 retries, ~0.5 s then ~1 s,
//   x-stainless-retry-count 1, 2): a heartbeat, a result post, even the final forced stop
//   answered 409 is sent three times before the worker lets it go.
// * ack failure (TS): logged, no stop, no backoff: it polls again at once (§8: py/go force-stop
//   on a fatal 4xx); the item comes back after reclaim_older_than_ms.
// * after a 412, heartbeat state stopping/stopped or lease_extended false, the call in flight
//   is abandoned: its result is never posted.
// * read: no image / document blocks (§6): .png and .pdf come back as lossy UTF-8 text; glob
//   fails on Node 20 (fs.glob); an empty bash output is "(no output)".
// * only a failing beat after a whole TTL without success ends the lease; a late successful
//   beat is fine. The next poll follows a finished item at once; the 1-3 s jitter is only
//   after an empty poll.
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
const BETA = 'managed-agents-2026-04-01';
const SKILLS_BETA = 'skills-2025-10-02';
// what npm @anthropic-ai/sdk 1.14.0 sends (the py/go snapshots send 2023-06-01; §2)
const SDK_VERSION_HEADER = '2026-10-21';


function runWorker(scenario, baseURL, timeoutMs, graceMs = 1500) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [path.join(HERE, 'sdk_worker.mjs'), scenario, baseURL, String(timeoutMs)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      // ANTHROPIC_FAKE_PROBE: the bash tool must not see ANTHROPIC_* (tools.json checks)
      env: { ...process.env, KEEP_WORKDIR: '0', ANTHROPIC_FAKE_PROBE: 'leak', GRACE_MS: String(graceMs) },
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    const kill = setTimeout(() => p.kill('SIGKILL'), timeoutMs + 15000);
    p.on('exit', (code) => {
      clearTimeout(kill);
      resolve({ code, stdout, stderr });
    });
  });
}

// run one scenario end to end; returns the fake's request log and final state
async function runScenario(name, timeoutMs = 40000, graceMs = 1500) {
  const scenario = path.join(HERE, 'scenarios', name);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gbx-worker-test-'));
  const logFile = path.join(dir, 'log.jsonl');
  const fake = await startFake(scenario, logFile);
  const base = `http://127.0.0.1:${fake.port}`;
  try {
    const w = await runWorker(scenario, base, timeoutMs, graceMs);
    const state = await (await fetch(`${base}/_fake/state`)).json();
    const log = fs
      .readFileSync(logFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    return { worker: w, state, log, spec: JSON.parse(fs.readFileSync(scenario, 'utf8')) };
  } finally {
    fake.proc.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}


function explain(run) {
  return (
    '\nlog:\n' +
    run.log.map((r) => `${r.t_ms} ${r.method} ${r.path}?${r.raw_query} ${r.status} ${r.auth}`).join('\n') +
    `\nworker exit ${run.worker.code}\nstdout: ${run.worker.stdout}\nstderr: ${run.worker.stderr.slice(-3000)}`
  );
}

// checks every scenario shares: headers, credentials, no invalid posts, §11 order per item
function commonChecks(run, { exits = false } = {}) {
  const { log, state, spec } = run;
  if (!exits) {
    assert.equal(run.worker.code, 0, 'the SDK worker finished every item' + explain(run));
    assert.ok(state.all_done, 'all items done');
  }
  for (const r of log) {
    const what = `${r.method} ${r.path}`;
    const betas = (r.anthropic_beta ?? '').split(',').map((s) => s.trim());
    // the skills calls of npm 1.14.0 carry no anthropic-beta at all (§2 and §7 say
    // skills-2025-10-02): the fake must accept them either way
    if (r.path.startsWith('/v1/skills/')) assert.ok(r.anthropic_beta === null || betas.includes(SKILLS_BETA), `${what}: anthropic-beta`);
    else assert.ok(betas.includes(BETA), `${what}: anthropic-beta`);
    assert.equal(r.anthropic_version, SDK_VERSION_HEADER, `${what}: anthropic-version`);
    assert.equal(r.x_api_key, false, `${what}: no x-api-key`);
    assert.ok(!('beta' in r.query), `${what}: no ?beta=true`);
    if (r.method === 'POST' && r.body !== null) assert.equal(r.content_type, 'application/json', `${what}: content-type`);
  }
  for (const r of log.filter(isPoll)) {
    assert.equal(r.auth, 'env', 'poll uses the environment key');
    assert.equal(r.anthropic_worker_id, 'worker-1', 'poll carries Anthropic-Worker-ID');
    assert.equal(r.query.block_ms, '999', 'always-on loop polls with block_ms=999');
  }
  for (const w of spec.work.filter((w) => !w.poll_status)) {
    const sid = w.session;
    const cred = w.secret ? `session:${w.id}` : 'env';
    const ack = log.filter((r) => r.path === workPath(w.id, 'ack'));
    assert.equal(ack.length, 1 + (w.ack_status?.length ?? 0), `${w.id}: one ack (plus the failed ones)`);
    assert.equal(ack[0].auth, 'env', `${w.id}: ack uses the environment key even with a secret`);
    assert.equal(ack[0].body, null, `${w.id}: ack has no body`);
    for (const r of [...forItem(log, w.id).filter((r) => !r.path.endsWith('/ack')), ...forSession(log, sid)])
      assert.equal(r.auth, cred, `${r.method} ${r.path}: ${w.secret ? 'sessions_token' : 'environment key (no secret)'}`);
    for (const r of [...forItem(log, w.id), ...forSession(log, sid)])
      assert.equal(r.anthropic_worker_id, null, `${r.path}: Anthropic-Worker-ID on poll only`);

    // §11 order: poll (item) → ack → heartbeat NO_HEARTBEAT → GET session → stream → events list
    const iPoll = idx(log, (r) => isPoll(r) && r.response?.id === w.id);
    const iAck = idx(log, (r) => r.path === workPath(w.id, 'ack'));
    const iHb = idx(log, (r) => r.path === workPath(w.id, 'heartbeat'));
    const iSess = idx(log, (r) => r.path === `/v1/sessions/${sid}`);
    const iStream = idx(log, (r) => r.path === `/v1/sessions/${sid}/events/stream`);
    const iList = idx(log, (r) => r.method === 'GET' && r.path === `/v1/sessions/${sid}/events`);
    assert.ok(iPoll >= 0 && iPoll < iAck && iAck < iHb && iHb < iSess && iSess < iStream && iStream < iList,
      `${w.id}: poll < ack < heartbeat < session < stream < list` + explain(run));
    assert.equal(log[iHb].query.expected_last_heartbeat, 'NO_HEARTBEAT', `${w.id}: first beat claims with NO_HEARTBEAT`);
    assert.equal(log[iList].query.limit, '1000', `${w.id}: reconcile lists with limit=1000`);

    // every later beat echoes the last successful beat's last_heartbeat byte for byte; beats
    // are ttl/2 = 2 s apart, except the SDK HTTP client's own retries (x-stainless-retry-count)
    const beats = log.filter((r) => r.path === workPath(w.id, 'heartbeat'));
    let lastOk = null;
    for (let i = 0; i < beats.length; i++) {
      if (i > 0) {
        assert.equal(beats[i].query.expected_last_heartbeat, lastOk?.response.last_heartbeat ?? 'NO_HEARTBEAT', `${w.id}: beat ${i + 1} echoes`);
        if ((beats[i].retry_count ?? '0') === '0')
          assert.ok(beats[i].t_ms - beats[i - 1].t_ms >= 1500, `${w.id}: beats ttl/2 = 2 s apart` + explain(run));
      }
      if (beats[i].status === 200) lastOk = beats[i];
    }

    // reconcile pages through all of the history, following next_page
    const lists = log.filter((r) => r.method === 'GET' && r.path === `/v1/sessions/${sid}/events`);
    for (let i = 1; i < lists.length; i++)
      if (lists[i - 1].response?.next_page) assert.equal(lists[i].query.page, lists[i - 1].response.next_page);

    const s = state.sessions[sid];
    assert.deepEqual(s.rejected, [], `${sid}: no post rejected by the fake`);
    assert.deepEqual(s.duplicates, [], `${sid}: no call answered twice`);
    assert.deepEqual(s.unexpected, [], `${sid}: no result for an unowned call`);
    assert.deepEqual(s.custom_tool_results, [], `${sid}: no custom tool results (the SDK owns no custom tools here)`);
    for (const e of results(log, sid)) {
      assert.equal(e.type, 'user.tool_result');
      assert.ok(Array.isArray(e.content) && e.content.length > 0, `${e.tool_use_id}: content never empty`);
      for (const b of e.content) if (b.type === 'text') assert.ok(b.text.length > 0, `${e.tool_use_id}: text never empty`);
      assert.equal(typeof e.is_error, 'boolean');
    }
  }
}

// the stop that ends a served item: one, forced, after the last result, 204
function checkStopped(run, workId, sid) {
  const stops = run.log.filter((r) => r.path === workPath(workId, 'stop'));
  assert.equal(stops.length, 1, `${workId}: one stop` + explain(run));
  assert.deepEqual(stops[0].body, { force: true });
  assert.equal(stops[0].status, 204);
  const lastPost = run.log.findLastIndex((r) => r.method === 'POST' && r.path === `/v1/sessions/${sid}/events`);
  assert.ok(run.log.indexOf(stops[0]) > lastPost, `${workId}: stop after the last result`);
  // maxIdleMs 1000: the stop follows the end_turn idle by about a second
  const lastT = run.log[lastPost].t_ms;
  assert.ok(stops[0].t_ms - lastT >= 900, `${workId}: stop waits maxIdleMs after end_turn`);
  assert.equal(run.state.items.find((i) => i.id === workId).state, 'stopped');
}

describe('happy path: every tool, end_turn', () => {
  let run;
  before(async () => {
    run = await runScenario('happy.json');
  });
  test('headers, credentials and §11 order', () => commonChecks(run));
  test('one result per owned call, history first, in order; none for custom / web_fetch', () => {
    const got = results(run.log, 'sesn_A').map((e) => e.tool_use_id);
    assert.deepEqual(got, ['sevt_hist_open', 'sevt_a1', 'sevt_a2', 'sevt_a3', 'sevt_a4', 'sevt_a5', 'sevt_a6', 'sevt_a7', 'sevt_a8', 'sevt_a9']);
    const s = run.state.sessions.sesn_A;
    assert.deepEqual(s.pending, []);
    assert.deepEqual(s.unowned.sort(), ['sevt_c1', 'sevt_w1']);
    assert.ok(!got.includes('sevt_hist_done'), 'an answered history call is not run again');
  });
  test('tool results match §6', () => {
    const r = Object.fromEntries(run.state.sessions.sesn_A.tool_results.map((x) => [x.tool_use_id, x]));
    const text = (id) => r[id].content.map((b) => b.text).join('');
    assert.equal(text('sevt_hist_open'), 'from-history');
    assert.equal(r.sevt_a1.is_error, true);
    assert.equal(text('sevt_a1'), 'out\nerr');
    assert.equal(text('sevt_a2'), 'wrote 22 bytes to src/m.c');
    assert.equal(text('sevt_a3'), 'edited src/m.c (1 replacement(s))');
    assert.equal(text('sevt_a4'), 'int main(){return 1;}\n');
    // glob: the SDK's glob uses fs.glob, which Node 20 lacks (§6): on Node 20 it answers
    // is_error ("fsGlob(...) is not a function ..."); on Node >= 22 it finds the file
    if (r.sevt_a5.is_error) assert.match(text('sevt_a5'), /glob/);
    else assert.match(text('sevt_a5'), /src\/m\.c/);
    assert.equal(r.sevt_a6.is_error, false);
    assert.match(text('sevt_a6'), /src\/m\.c:1:int main\(\)\{return 1;\}/);
    assert.equal(text('sevt_a7'), 'bash session restarted');
    assert.match(text('sevt_a8'), /^\/.*gbx-sdk-worker-/, 'bash starts in the workdir');
    assert.equal(text('sevt_a9'), 'slept');
  });
  test('heartbeats repeat during a long call; stop after end_turn idle', () => {
    const beats = run.log.filter((r) => r.path === workPath('work_A', 'heartbeat'));
    assert.ok(beats.length >= 2, 'a second beat during the 2.5 s call');
    assert.ok(beats.every((b) => b.status === 200));
    checkStopped(run, 'work_A', 'sesn_A');
    assert.equal(run.state.sessions.sesn_A.status, 'idle');
  });
  test('empty polls after the item answer 204 and the worker keeps polling', () => {
    const iStop = idx(run.log, (r) => r.path === workPath('work_A', 'stop'));
    const later = run.log.slice(iStop + 1).filter(isPoll);
    assert.ok(later.length >= 1 && later.every((r) => r.status === 204), explain(run));
  });
});

describe('lost lease: no secret, heartbeat 412, no stop', () => {
  let run;
  before(async () => {
    run = await runScenario('lost_lease.json');
  });
  test('headers, credentials and §11 order', () => commonChecks(run));
  test('412 on the second beat: the SDK releases the item without stopping it', () => {
    const beats = run.log.filter((r) => r.path === workPath('work_B', 'heartbeat'));
    assert.deepEqual(beats.map((b) => b.status), [200, 412], explain(run));
    assert.equal(beats[1].response.error.type, 'precondition_failed_error');
    assert.ok(beats[1].response.error.details.current_state.last_heartbeat);
    assert.equal(run.log.filter((r) => r.path === workPath('work_B', 'stop')).length, 0, 'no stop after a 412');
    const b = run.state.items.find((i) => i.id === 'work_B');
    assert.equal(b.stop_calls, 0);
    assert.equal(b.lost, true);
  });
  test('no tool result after the lease is lost (the in-flight call is dropped)', () => {
    const i412 = idx(run.log, (r) => r.status === 412);
    const after = run.log.slice(i412 + 1).filter((r) => r.path.startsWith('/v1/sessions/sesn_B'));
    assert.deepEqual(after, [], 'nothing for sesn_B after the 412' + explain(run));
    assert.deepEqual(results(run.log, 'sesn_B').map((e) => e.tool_use_id), ['sevt_b1']);
    assert.deepEqual(run.state.sessions.sesn_B.pending, ['sevt_b2']);
  });
  test('the worker goes on to the next item and empty polls answer 200 null', () => {
    assert.deepEqual(results(run.log, 'sesn_C').map((e) => e.tool_use_id), ['sevt_c1']);
    checkStopped(run, 'work_C', 'sesn_C');
    const iStop = idx(run.log, (r) => r.path === workPath('work_C', 'stop'));
    const later = run.log.slice(iStop + 1).filter(isPoll);
    assert.ok(later.length >= 1 && later.every((r) => r.status === 200 && r.response === null), explain(run));
  });
});

describe('reconcile: unanswered history calls, paged history', () => {
  let run;
  before(async () => {
    run = await runScenario('reconcile.json');
  });
  test('headers, credentials and §11 order', () => commonChecks(run));
  test('every history page is read before any call runs', () => {
    const lists = run.log.filter((r) => r.method === 'GET' && r.path === '/v1/sessions/sesn_R/events');
    assert.equal(lists.length, 3, 'eight events, three per page' + explain(run));
    assert.equal(lists[2].response.next_page, null);
    const lastList = run.log.indexOf(lists[2]);
    const firstPost = idx(run.log, (r) => r.method === 'POST' && r.path === '/v1/sessions/sesn_R/events');
    assert.ok(lastList < firstPost);
  });
  test('exactly the unanswered owned calls are answered, in order', () => {
    assert.deepEqual(results(run.log, 'sesn_R').map((e) => e.tool_use_id), ['sevt_r2', 'sevt_r3']);
    const r = Object.fromEntries(run.state.sessions.sesn_R.tool_results.map((x) => [x.tool_use_id, x]));
    assert.equal(r.sevt_r3.content[0].text, 'reconciled\n', 'the calls ran in history order');
    assert.deepEqual(run.state.sessions.sesn_R.unowned, ['sevt_r_custom']);
    checkStopped(run, 'work_R', 'sesn_R');
  });
});

// a shutdown the heartbeat asks for: one forced stop right after that beat; the call in flight
// is abandoned (no result posted)
function checkShutdownByBeat(run, workId, sid, inflight) {
  const beats = run.log.filter((r) => r.path === workPath(workId, 'heartbeat'));
  assert.deepEqual(beats.map((b) => b.status), [200, 200], explain(run));
  const stops = run.log.filter((r) => r.path === workPath(workId, 'stop'));
  assert.equal(stops.length, 1, `${workId}: one stop` + explain(run));
  assert.deepEqual(stops[0].body, { force: true });
  assert.equal(stops[0].status, 204);
  assert.ok(run.log.indexOf(stops[0]) > run.log.indexOf(beats[1]));
  assert.ok(stops[0].t_ms - beats[1].t_ms < 1000, `${workId}: stops at once`);
  assert.equal(run.state.items.find((i) => i.id === workId).state, 'stopped');
  assert.deepEqual(run.state.sessions[sid].pending, [inflight], `${workId}: the call in flight gets no result`);
}

describe('lifecycle: stopping, lease_extended false, transient 503s, stream drop', () => {
  let run;
  before(async () => {
    run = await runScenario('lifecycle.json');
  });
  test('headers, credentials and §11 order', () => commonChecks(run));
  test('heartbeat state stopping: force-stop at once', () => {
    assert.equal(run.log.filter((r) => r.path === workPath('work_S', 'heartbeat'))[1].response.state, 'stopping');
    checkShutdownByBeat(run, 'work_S', 'sesn_S', 'sevt_s2');
    assert.deepEqual(results(run.log, 'sesn_S').map((e) => e.tool_use_id), ['sevt_s1']);
  });
  test('heartbeat lease_extended false: force-stop at once', () => {
    assert.equal(run.log.filter((r) => r.path === workPath('work_L', 'heartbeat'))[1].response.lease_extended, false);
    checkShutdownByBeat(run, 'work_L', 'sesn_L', 'sevt_l1');
  });
  test('heartbeat 503s are retried by the SDK client and the lease kept', () => {
    const beats = run.log.filter((r) => r.path === workPath('work_T', 'heartbeat'));
    assert.deepEqual(beats.slice(0, 4).map((b) => [b.status, b.retry_count]), [[200, '0'], [503, '0'], [503, '1'], [200, '2']], explain(run));
    assert.equal(run.state.items.find((i) => i.id === 'work_T').lost, false);
  });
  test('stream drop: reconnect, reconcile again, nothing run twice', () => {
    const streams = run.log.filter((r) => r.path === '/v1/sessions/sesn_T/events/stream');
    const lists = run.log.filter((r) => r.method === 'GET' && r.path === '/v1/sessions/sesn_T/events');
    assert.equal(streams.length, 2, explain(run));
    assert.equal(lists.length, 2);
    assert.ok(run.log.indexOf(streams[1]) < run.log.indexOf(lists[1]), 'stream reopened before the second reconcile');
    assert.ok(streams[1].t_ms - lists[0].t_ms >= 400, 'reconnect after a backoff (0.5 s)');
    const r = Object.fromEntries(run.state.sessions.sesn_T.tool_results.map((x) => [x.tool_use_id, x]));
    assert.equal(r.sevt_t2.content[0].text, '1', 'sevt_t2 ran once');
  });
  test('a result post answered 503 is retried, then accepted once', () => {
    const posts = run.log.filter((r) => r.method === 'POST' && r.path === '/v1/sessions/sesn_T/events' && r.body.events[0].tool_use_id === 'sevt_t3');
    assert.deepEqual(posts.map((p) => [p.status, p.retry_count]), [[503, '0'], [200, '1']], explain(run));
    assert.deepEqual(run.state.sessions.sesn_T.tool_results.map((x) => x.tool_use_id), ['sevt_t1', 'sevt_t2', 'sevt_t3']);
    checkStopped(run, 'work_T', 'sesn_T');
  });
});

describe('skills: latest resolved, zip and tar.gz extracted, slip refused, removed on teardown', () => {
  let run;
  before(async () => {
    run = await runScenario('skills.json');
  });
  test('headers, credentials and §11 order', () => commonChecks(run));
  test('skills are fetched after the session and before the stream, with the sessions_token', () => {
    const sk = run.log.filter((r) => r.path.startsWith('/v1/skills/'));
    assert.deepEqual(sk.map((r) => r.path), [
      // TS 1.14.0 resolves the alias with the retrieve endpoint (no version listing) and
      // downloads by the id it returns
      '/v1/skills/skill_pdf/versions/latest',
      '/v1/skills/skill_pdf/versions/3/content',
      '/v1/skills/skill_evil/versions/1',
      '/v1/skills/skill_evil/versions/1/content',
      '/v1/skills/skill_xlsx/versions/2',
      '/v1/skills/skill_xlsx/versions/2/content',
    ], explain(run));
    assert.ok(sk.every((r) => r.auth === 'session:work_K' && r.status === 200));
    const iSess = idx(run.log, (r) => r.path === '/v1/sessions/sesn_K');
    const iStream = idx(run.log, (r) => r.path === '/v1/sessions/sesn_K/events/stream');
    assert.ok(iSess < run.log.indexOf(sk[0]) && run.log.indexOf(sk.at(-1)) < iStream);
  });
  test('wrapper stripped, modes 0644 / 0755, the slip archive refused, the others kept', () => {
    const r = Object.fromEntries(run.state.sessions.sesn_K.tool_results.map((x) => [x.tool_use_id, x]));
    const lines = r.sevt_k1.content[0].text.split('\n');
    assert.ok(lines.includes('skills/pdf/SKILL.md') && lines.includes('skills/xlsx/bin/go.sh'), r.sevt_k1.content[0].text);
    assert.ok(!lines.some((l) => l.startsWith('skills/evil/')), 'nothing of the slip archive extracted');
    assert.ok(!lines.some((l) => l.includes('escaped')));
    assert.ok(lines.includes('644 skills/pdf/SKILL.md'));
    assert.ok(lines.includes('755 skills/pdf/scripts/run.sh'));
    assert.ok(lines.includes('755 skills/xlsx/bin/go.sh'), 'any x bit (0700 in the archive) becomes 0755');
    assert.equal(r.sevt_k2.content[0].text, '# pdf\n', '"latest" is the largest numeric version');
    assert.equal(r.sevt_k3.content[0].text, 'go');
    checkStopped(run, 'work_K', 'sesn_K');
  });
  test('skill directories removed on teardown', () => {
    const m = /workdir_left (.*)\n/.exec(run.worker.stdout);
    assert.ok(m, run.worker.stdout);
    // the empty skills/ root itself stays
    assert.deepEqual(JSON.parse(m[1]).filter((f) => f !== 'skills'), []);
  });
});

describe('permissions: ask held until allowed, denied calls never run', () => {
  let run;
  before(async () => {
    run = await runScenario('permissions.json');
  });
  test('headers, credentials and §11 order', () => commonChecks(run));
  test('results for the allowed calls only', () => {
    assert.deepEqual(results(run.log, 'sesn_P').map((e) => e.tool_use_id), ['sevt_p1', 'sevt_p4'], explain(run));
    const r = Object.fromEntries(run.state.sessions.sesn_P.tool_results.map((x) => [x.tool_use_id, x]));
    const out = r.sevt_p4.content[0].text;
    assert.match(out, /p1\.txt/);
    assert.match(out, /cannot access 'p2\.txt'/, 'the ask call denied by its confirmation did not run');
    assert.match(out, /cannot access 'p3\.txt'/, 'the evaluated_permission deny call did not run');
    checkStopped(run, 'work_P', 'sesn_P');
  });
});

describe('claim errors: ack 403 then reclaim; poll 401 ends the worker', () => {
  let run;
  before(async () => {
    run = await runScenario('claim_errors.json');
  });
  test('headers, credentials and §11 order', () => commonChecks(run, { exits: true }));
  test('ack 403: no stop (TS; §8 says py/go force-stop), re-poll, the item comes back after the reclaim window', () => {
    const acks = run.log.filter((r) => r.path === workPath('work_Q', 'ack'));
    assert.deepEqual(acks.map((a) => a.status), [403, 200], explain(run));
    const deliveries = run.log.filter((r) => isPoll(r) && r.response?.id === 'work_Q');
    assert.equal(deliveries.length, 2);
    assert.ok(deliveries[1].t_ms - deliveries[0].t_ms >= 1500, 'handed out again only after reclaim_older_than_ms');
    const stopsBefore = run.log.slice(0, run.log.indexOf(acks[1])).filter((r) => r.path.endsWith('/stop'));
    assert.deepEqual(stopsBefore, [], 'no stop after the failed ack');
    assert.deepEqual(results(run.log, 'sesn_Q').map((e) => e.tool_use_id), ['sevt_q1']);
    checkStopped(run, 'work_Q', 'sesn_Q');
  });
  test('poll 401: the worker stops polling and exits', () => {
    assert.equal(run.worker.code, 3, explain(run));
    assert.match(run.worker.stdout, /exited .*401/);
    const polls = run.log.filter(isPoll);
    assert.equal(polls.at(-1).status, 401);
    assert.equal(polls.filter((r) => r.status === 401).length, 1, 'no retry of a fatal 4xx');
    assert.equal(run.state.items.find((i) => i.id === 'work_Z').acked, false);
  });
});

describe('webhooks: the fake signs deliveries the way the SDK unwrap() verifies', () => {
  const KEY = 'whsec_' + Buffer.from('fake-webhook-signing-key-0123456789').toString('base64');
  let fake, receiver, hookURL, base;
  const seen = [];
  before(async () => {
    const { default: Anthropic } = await import('@anthropic-ai/sdk');
    const client = new Anthropic({ apiKey: 'unused' });
    receiver = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        try {
          const ev = client.beta.webhooks.unwrap(raw, { headers: req.headers, key: KEY });
          seen.push(ev);
          res.writeHead(200).end('ok');
        } catch (e) {
          res.writeHead(400).end(String(e));
        }
      });
    });
    await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
    hookURL = `http://127.0.0.1:${receiver.address().port}/hook`;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gbx-worker-test-'));
    fake = await startFake(path.join(HERE, 'scenarios', 'happy.json'), path.join(dir, 'log.jsonl'));
    base = `http://127.0.0.1:${fake.port}`;
  });
  after(() => {
    fake?.proc.kill('SIGTERM');
    receiver?.close();
  });
  const deliver = async (o) =>
    (await fetch(`${base}/_fake/webhook`, { method: 'POST', body: JSON.stringify({ url: hookURL, signing_key: KEY, ...o }) })).json();

  test('a valid delivery verifies and carries the session id', async () => {
    const r = await deliver({ session_id: 'sesn_A', id: 'event_dup' });
    assert.equal(r.status, 200, r.response);
    assert.match(r.request.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/);
    const ev = seen.at(-1);
    assert.equal(ev.type, 'event');
    assert.equal(ev.id, 'event_dup');
    assert.deepEqual([ev.data.type, ev.data.id], ['session.status_run_started', 'sesn_A']);
  });
  test('a retry reuses the id and verifies again (dedupe is the receiver\'s job)', async () => {
    const r = await deliver({ session_id: 'sesn_A', id: 'event_dup' });
    assert.equal(r.status, 200, r.response);
  });
  for (const [what, o] of [
    ['a wrong signature', { tamper: 'signature' }],
    ['a body changed after signing', { tamper: 'body' }],
    ['a timestamp 10 minutes old', { timestamp: Math.floor(Date.now() / 1000) - 600 }],
    ['a missing webhook-signature header', { omit_header: 'webhook-signature' }],
  ])
    test(`${what} is refused`, async () => {
      const r = await deliver(o);
      assert.equal(r.status, 400, r.response);
    });
});

describe('tools: §6 edge cases under the SDK', () => {
  let run, r;
  before(async () => {
    run = await runScenario('tools.json');
    r = Object.fromEntries(run.state.sessions.sesn_E.tool_results.map((x) => [x.tool_use_id, x]));
  });
  const text = (id) => r[id].content.map((b) => b.text ?? '').join('');
  test('headers, credentials and §11 order', () => commonChecks(run));
  test('every call answered once, in order', () => {
    assert.equal(run.state.sessions.sesn_E.tool_results.length, 16, explain(run));
    assert.deepEqual(run.state.sessions.sesn_E.pending, []);
    checkStopped(run, 'work_E', 'sesn_E');
  });
  test('image and PDF reads', () => {
    // §6 (py/go): one image block / one document block. npm 1.14.0's read tool only knows
    // UTF-8 text: it answers a lossy text decoding of the bytes. Accept either; the fake
    // validates image/document blocks when they come.
    for (const [id, kind, media] of [['sevt_e_png', 'image', 'image/png'], ['sevt_e_pdf', 'document', 'application/pdf']]) {
      assert.equal(r[id].content.length, 1);
      const b = r[id].content[0];
      if (b.type === kind) assert.deepEqual([b.source.type, b.source.media_type], ['base64', media]);
      else assert.equal(b.type, 'text');
    }
  });
  test('read: view_range, a directory, paths escaping the workdir', () => {
    assert.equal(text('sevt_e_range'), 'l2\nl3');
    assert.equal(r.sevt_e_dir.is_error, true);
    for (const id of ['sevt_e_dotdot', 'sevt_e_symlink']) {
      assert.equal(r[id].is_error, true);
      assert.match(text(id), /outside/);
    }
  });
  test('edit: no match, several matches, replace_all', () => {
    assert.equal(r.sevt_e_edit0.is_error, true);
    assert.equal(r.sevt_e_edit2.is_error, true);
    assert.match(text('sevt_e_edit2'), /4/);
    assert.equal(text('sevt_e_editall'), 'edited lines.txt (4 replacement(s))');
  });
  test('bash: timeout, a fresh shell after it, exit of the shell, truncation, scrubbed env, no output', () => {
    assert.equal(r.sevt_e_timeout.is_error, true);
    assert.match(text('sevt_e_timeout'), /timed out/);
    assert.equal(text('sevt_e_after_timeout'), 'fresh');
    assert.equal(r.sevt_e_exit.is_error, true);
    assert.match(text('sevt_e_exit'), /bash session terminated/);
    const big = text('sevt_e_big');
    assert.ok(big.startsWith('[output truncated]'), big.slice(0, 40));
    assert.ok(big.endsWith('END'));
    assert.ok(big.length <= 100 * 1024 + 64, `kept the last 100 KiB (${big.length})`);
    assert.equal(text('sevt_e_env'), '0', 'no ANTHROPIC_* variable reaches the bash tool');
    assert.equal(text('sevt_e_empty'), '(no output)');
  });
});

describe('stopped elsewhere: heartbeat state stopped, the forced stop gets 409', () => {
  let run;
  before(async () => {
    run = await runScenario('stopped.json', 40000, 3500); // long grace: see the client's retries
  });
  test('headers, credentials and §11 order', () => commonChecks(run));
  test('shut down at the beat; stop answered 409 is retried by the SDK client, then let go', () => {
    const beats = run.log.filter((r) => r.path === workPath('work_X', 'heartbeat'));
    assert.deepEqual(beats.map((b) => [b.status, b.response.state]), [[200, 'active'], [200, 'stopped']], explain(run));
    const stops = run.log.filter((r) => r.path === workPath('work_X', 'stop'));
    // the Stainless client retries 409 (like 408/429/5xx) twice, 0.5 s then 1 s (jittered),
    // before the worker swallows it: three identical calls, not one
    assert.deepEqual(stops.map((r) => [r.status, r.retry_count]), [[409, '0'], [409, '1'], [409, '2']], explain(run));
    assert.ok(stops.every((r) => r.body.force === true));
    assert.ok(stops[0].t_ms - beats[1].t_ms < 1000);
    assert.deepEqual(run.state.sessions.sesn_X.pending, ['sevt_x1'], 'the call in flight gets no result');
    const after = run.log.slice(run.log.indexOf(stops.at(-1)) + 1);
    assert.ok(after.length > 0 && after.every(isPoll), 'then back to polling');
  });
});
