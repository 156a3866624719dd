#!/usr/bin/env node
// A fake of the Claude Managed Agents control plane (work queue + session event plane), for
// tests of self-hosted environment workers: Glovebox's `glovebox worker` and, to keep the fake
// honest, the official npm `@anthropic-ai/sdk` EnvironmentWorker (tests/worker/worker.test.mjs).
// Contract: /work/shared/protocols/managed-agents-worker.md §2-§5, §11, §12. Node >= 20, no
// dependencies beyond node:http / node:crypto / node:fs.
//
//   node tests/worker/fake_cp.mjs SCENARIO.json LOG.jsonl
//
// Listens on 127.0.0.1, port 0 (or $FAKE_CP_PORT), and prints `listening PORT` on stdout once
// ready. Every request is appended to LOG.jsonl as one JSON object per line, written when the
// response starts (for the SSE stream: when it opens):
//   {"seq":1,"t_ms":12,"method":"GET","path":"/v1/environments/env_test/work/poll",
//    "query":{"block_ms":"999"},"raw_query":"block_ms=999","status":204,
//    "auth":"env" | "session:work_A" | "other" | "none",      which credential the bearer was
//    "auth_tail":"…FAKEENVKEY",                               the bearer's last 12 characters
//    "x_api_key":false, "anthropic_beta":"managed-agents-2026-04-01",
//    "anthropic_version":"2026-10-21", "anthropic_worker_id":"worker-1",
//    "content_type":null, "accept":"application/json",
//    "retry_count":"0",                                       x-stainless-retry-count (SDK) or null
//    "body":null | <parsed JSON> | "<raw text>",             the request body
//    "response":<parsed JSON>}                                the JSON answer, absent when none
//                                                             (204, SSE, empty 200)
// SIGTERM / SIGINT close the server and exit 0.
//
// ---- Scenario (SCENARIO.json) --------------------------------------------------------------
// {
//   "environment_id": "env_test",                  default env_test
//   "environment_key": "sk-ant-oat01-FAKEENVKEY",  bearer that poll and ack must carry (else 401)
//   "ttl_seconds": 4,                              heartbeat ttl_seconds (default 4)
//   "empty_poll": "204",                           "204" | "null" (200 `null`) | "empty200" | "alternate"
//   "events_page_size": 2,                         max events per GET …/events page (default 1000)
//   "ping_ms": 300,                                SSE `event: ping` period (default 500)
//   "reclaim_older_than_ms": 5000,                 default when the poll does not send it
//   "webhook_signing_key": "whsec_…",              default key for POST /_fake/webhook
//   "skills": {                                    skills the session agents may name (optional)
//     "skill_pdf": { "name": "pdf", "versions": { "3": {
//         "format": "zip",                         "zip" (stored) | "tar.gz"
//         "files": { "pdf/SKILL.md": "# pdf\n",   member → text, or {"content": "…", "mode": 493};
//                    "pdf/run.sh": { "content": "#!/bin/sh\n", "mode": 493 },   a name ending in
//                    "../evil.txt": "slip" } } } } },   "/" is a directory; no checks on names
//   "work": [                                      handed out by poll in this order
//     { "id": "work_A", "session": "sesn_A",
//       "secret": { "sessions_token": "sk-ant-req-FAKE-A", "api_base_url": "self" },
//                 // object → base64url(JSON) without padding; "self" = this fake's base URL;
//                 // a string is sent verbatim (e.g. to test an undecodable secret); omit for none
//       "after": "work_X",                         queued only once work_X is stopped or lost
//       "heartbeats": [ {}, {"steal": true} ]      per-beat script, index 0 = first beat:
//                 // {} normal; {"steal":true} another worker beats first, so this beat's
//                 // expected_last_heartbeat no longer matches → a genuine 412;
//                 // {"status":500} (or any code) answered with an error envelope;
//                 // {"state":"stopping"}: graceful stop requested (item → stopping);
//                 // {"state":"stopped"}: stopped elsewhere (item → stopped; a later stop is 409);
//                 // {"lease_extended":false}: lease not extended;
//                 // beats past the end of the list are normal
//       "poll_status": 401,                        (optional) answer the poll that would hand this
//                                                  item out with this error instead
//       "ack_status": [403]                        (optional) answer the first acks with these
//                                                  statuses, in turn (the item stays queued and is
//                                                  handed out again after reclaim_older_than_ms)
//     } ],
//   "sessions": {
//     "sesn_A": {
//       "status": "idle",                          session object status before the stream opens
//       "agent": { "skills": [ { "type": "custom", "skill_id": "skill_pdf", "version": "latest" } ] },
//       "resources": [],
//       "history": [ …events… ],                   in the event log before any worker connects
//       "script": [ …events… ],                    emitted on the stream, one by one (below)
//       "end": "end_turn",                         after the script: "end_turn" (session.status_idle
//                                                  {stop_reason:{type:"end_turn"}}), "terminated"
//                                                  (session.status_terminated), or "none"
//       "post_status": { "sevt_x": [503] }         answer the first POST …/events carrying a result
//                                                  for sevt_x with these statuses, in turn, before
//                                                  accepting one (a retried post)
//     } }
// }
// Events are session events: {"type":"agent.tool_use","id":"sevt_a1","name":"bash","input":{…}}
// (id, processed_at and created_at are filled in when absent). Script pacing: the next scripted
// event is emitted once a stream is open and every *owned* tool call in the log so far has a
// result; owned = an agent.tool_use whose name is one of bash, read, write, edit, glob, grep.
// agent.custom_tool_use and other names (web_fetch, …) are unowned: never waited for, and a
// result for them is recorded as an error of the worker (state.sessions[sid].unexpected).
// After the script, once everything owned is answered, the `end` event is emitted.
// Permission gating: an owned call with "evaluated_permission":"ask" is waited for only once a
// user.tool_confirmation {tool_use_id, result:"allow"} for it is in the log (script it next);
// "deny" (or any value but allow/ask), or a deny verdict, is never waited for. A result for a
// held or denied call is recorded in state.sessions[sid].unexpected.
// A script entry {"type":"_fake.drop_stream"} is not emitted: it closes every open stream of
// the session (the worker must reconnect, reconcile and not run anything twice); the script
// goes on once a stream is open again.
//
// ---- Routes --------------------------------------------------------------------------------
// GET  /v1/environments/{env}/work/poll        bearer = env key; block_ms ≤ 999; 200 item | empty
// POST /v1/environments/{env}/work/{id}/ack    queued→starting; 404 unknown; 409 not queued
// POST /v1/environments/{env}/work/{id}/heartbeat?expected_last_heartbeat=…
//      NO_HEARTBEAT only when none stored; mismatch → 412 with error.details.current_state
//      {state,ttl_seconds,last_heartbeat}; starting→active; stopped → 409
// POST /v1/environments/{env}/work/{id}/stop   {"force":true} → stopped, else → stopping; 204;
//      409 when already stopped
// GET  /v1/environments/{env}/work/{id}        item (secret null); GET …/work list; GET …/work/stats;
// POST /v1/environments/{env}/work/{id}        {"metadata":{…}} merge patch
// GET  /v1/sessions/{sid}                      session object
// GET  /v1/skills/{skill}/versions             {data:[skill_version…], has_more:false, next_page:null}
// GET  /v1/skills/{skill}/versions/{v}         skill_version {id: v, skill_id, name, description,
//      created_at}; v = a version key, its id, or "latest" (the largest numeric key)
// GET  /v1/skills/{skill}/versions/{v}/content the archive (application/zip | application/gzip)
// GET  /v1/sessions/{sid}/events               {data,next_page}; limit, page, order=asc|desc
// GET  /v1/sessions/{sid}/events/stream        SSE (`event: TYPE` / `data: JSON`, pings, `: …`)
// POST /v1/sessions/{sid}/events               {"events":[…]}: validated (400 with the reason,
//      recorded in state.sessions[sid].rejected), appended, echoed on the stream, {data:[…]}
// Per-item calls accept the environment key or the item's sessions_token (the log says which);
// skills routes accept the environment key or any item's sessions_token.
// A `beta=true` query parameter is ignored (but logged).
// Control (not part of the API, not logged):
// GET  /_fake/state                            {all_done, items:[…], sessions:{sid:{status,
//      tool_results:[{tool_use_id,is_error,content}], custom_tool_results, pending, unowned,
//      unexpected, rejected, duplicates, events}}}
// POST /_fake/emit/{sid}                       {"events":[…]}: append and broadcast now
// POST /_fake/drop/{sid}                       close every open stream of the session
// POST /_fake/webhook                          send one Standard Webhooks delivery and report it:
//      {"url": "http://127.0.0.1:PORT/hook", "signing_key": "whsec_<base64 key>" (default: the
//       scenario's "webhook_signing_key"), "type": "session.status_run_started",
//       "session_id": "sesn_A", "id": "event_…" (default fresh; reuse one to test dedupe),
//       "timestamp": <unix seconds> (default now; e.g. now - 600 to test staleness),
//       "tamper": "signature" | "body" (optional: break the signature or change the body after
//       signing), "omit_header": "webhook-signature" (optional)}
//      → {"status": <receiver's status>, "response": "<its body>", "request": {"headers": {…},
//         "body": "<raw body sent>"}}. Signature: webhook-signature "v1,<base64 HMAC-SHA256 of
//         `${id}.${timestamp}.${body}` keyed with the base64-decoded key after whsec_>".
//
// Item flags in /_fake/state: state; acked; heartbeats (count); lost (a 412 was returned);
// stop_calls (count of stop requests, any status); late_beats (beats that arrived more than
// ttl_seconds after the previous successful one: the lease had expired; what a real server
// does then is undocumented, the fake only counts them); done = stopped or lost.
// Session fields: streams_opened (count), tool_results and custom_tool_results (accepted
// posts, in order), pending (owned calls without a result), unowned, unexpected (results for
// unowned calls), rejected ({reason, event}), duplicates (ids answered more than once).
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import zlib from 'node:zlib';

const OWNED = new Set(['bash', 'read', 'write', 'edit', 'glob', 'grep']);

const [scenarioPath, logPath] = process.argv.slice(2);
if (!scenarioPath || !logPath) {
  process.stderr.write('usage: fake_cp.mjs SCENARIO.json LOG.jsonl\n');
  process.exit(2);
}
const sc = JSON.parse(fs.readFileSync(scenarioPath, 'utf8'));
const ENV = sc.environment_id ?? 'env_test';
const ENV_KEY = sc.environment_key ?? 'sk-ant-oat01-FAKEENVKEY';
const TTL = sc.ttl_seconds ?? 4;
const PAGE = sc.events_page_size ?? 1000;
const PING_MS = sc.ping_ms ?? 500;
const EMPTY = sc.empty_poll ?? '204';
const RECLAIM = sc.reclaim_older_than_ms ?? 5000;
const logFd = fs.openSync(logPath, 'a');
const t0 = Date.now();
let seq = 0;
let baseUrl = '';
let evCounter = 0;
let emptyPolls = 0;

const now = () => new Date().toISOString();
const newEventId = () => `sevt_fake_${String(++evCounter).padStart(4, '0')}`;

// ---- state ---------------------------------------------------------------------------------
const items = (sc.work ?? []).map((w) => ({
  spec: w,
  id: w.id,
  session: w.session,
  state: 'queued',
  created_at: now(),
  acknowledged_at: null,
  started_at: null,
  latest_heartbeat_at: null,
  stop_requested_at: null,
  stopped_at: null,
  metadata: { ...(w.metadata ?? {}) },
  last_heartbeat: null, // stored string, echoed byte for byte
  delivered_at: null, // ms of the last unacked delivery
  acked: false,
  heartbeats: 0,
  lost: false,
  stop_calls: 0,
  late_beats: 0,
  ack_calls: 0,
  token: w.secret && typeof w.secret === 'object' ? w.secret.sessions_token : null,
}));
const itemById = new Map(items.map((i) => [i.id, i]));

const sessions = new Map();
function sessionOf(sid) {
  if (sessions.has(sid)) return sessions.get(sid);
  const spec = sc.sessions?.[sid];
  if (!spec) return null;
  const s = {
    id: sid,
    spec,
    status: spec.status ?? 'idle',
    log: [],
    script: [...(spec.script ?? [])],
    ended: false,
    streams: new Set(),
    tool_results: [],
    custom_tool_results: [],
    unexpected: [],
    rejected: [],
    duplicates: [],
    answered: new Set(),
    streams_opened: 0,
    post_status: Object.fromEntries(Object.entries(spec.post_status ?? {}).map(([k, v]) => [k, [...v]])),
  };
  sessions.set(sid, s);
  for (const e of spec.history ?? []) append(s, e, false);
  return s;
}
for (const sid of Object.keys(sc.sessions ?? {})) sessionOf(sid);

function itemView(i, withSecret) {
  let secret = null;
  if (withSecret && i.spec.secret !== undefined && i.spec.secret !== null) {
    if (typeof i.spec.secret === 'string') secret = i.spec.secret;
    else {
      const o = { ...i.spec.secret };
      if (o.api_base_url === 'self') o.api_base_url = baseUrl;
      if (o.api_base_url === null) delete o.api_base_url;
      secret = Buffer.from(JSON.stringify(o)).toString('base64url');
    }
  }
  return {
    type: 'work',
    id: i.id,
    environment_id: ENV,
    data: { type: 'session', id: i.session },
    state: i.state,
    created_at: i.created_at,
    acknowledged_at: i.acknowledged_at,
    started_at: i.started_at,
    latest_heartbeat_at: i.latest_heartbeat_at,
    stop_requested_at: i.stop_requested_at,
    stopped_at: i.stopped_at,
    metadata: i.metadata,
    secret,
  };
}

const isDone = (i) => i.state === 'stopped' || i.lost;

// ---- session events ------------------------------------------------------------------------
function ownedToolUse(e) {
  return e.type === 'agent.tool_use' && OWNED.has(e.name);
}

function append(s, ev, broadcast = true) {
  const e = { ...ev };
  if (!e.id) e.id = newEventId();
  if (!e.processed_at) e.processed_at = now();
  if (!e.created_at) e.created_at = e.processed_at;
  s.log.push(e);
  if (e.type === 'user.tool_result') s.answered.add(e.tool_use_id);
  if (e.type === 'user.custom_tool_result') s.answered.add(e.custom_tool_use_id);
  if (e.type === 'session.status_running') s.status = 'running';
  if (e.type === 'session.status_idle') s.status = 'idle';
  if (e.type === 'session.status_terminated') s.status = 'terminated';
  if (broadcast) for (const st of s.streams) sseSend(st, e.type, e);
  return e;
}

// permission gating (§5.5): 'await' (the worker must run it), 'hold' (evaluated_permission ask,
// no verdict yet) or 'denied' (evaluated_permission deny or unknown, or a deny verdict)
function permission(s, e) {
  const p = e.evaluated_permission;
  if (p === undefined || p === null || p === 'allow') return 'await';
  if (p !== 'ask') return 'denied';
  const verdict = s.log.findLast((x) => x.type === 'user.tool_confirmation' && x.tool_use_id === e.id);
  if (!verdict) return 'hold';
  return verdict.result === 'allow' ? 'await' : 'denied';
}

function pendingOwned(s) {
  return s.log
    .filter((e) => ownedToolUse(e) && !s.answered.has(e.id) && permission(s, e) === 'await')
    .map((e) => e.id);
}

// emit scripted events while nothing owned is outstanding and a stream is open
function advance(s) {
  if (s.streams.size === 0) return;
  while (pendingOwned(s).length === 0) {
    if (s.script.length > 0) {
      const e = s.script.shift();
      if (e.type === '_fake.drop_stream') {
        for (const st of [...s.streams]) st.destroy();
        s.streams.clear();
        return;
      }
      append(s, e);
      continue;
    }
    if (!s.ended) {
      s.ended = true;
      const end = s.spec.end ?? 'end_turn';
      if (end === 'end_turn')
        append(s, { type: 'session.status_idle', stop_reason: { type: 'end_turn' } });
      else if (end === 'terminated') append(s, { type: 'session.status_terminated' });
    }
    return;
  }
}

function sseSend(res, event, data) {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

function validateEvent(s, e) {
  if (!e || typeof e !== 'object' || typeof e.type !== 'string') return 'event without a type';
  const content = (c) => {
    if (!Array.isArray(c) || c.length === 0) return 'content must be a non-empty array';
    for (const b of c) {
      if (!b || typeof b.type !== 'string') return 'content block without a type';
      if (b.type === 'text' && (typeof b.text !== 'string' || b.text.length === 0))
        return 'empty text block';
      if ((b.type === 'image' || b.type === 'document') && (!b.source || typeof b.source.type !== 'string'))
        return `${b.type} block without a source`;
    }
    return null;
  };
  switch (e.type) {
    case 'user.tool_result': {
      if (typeof e.tool_use_id !== 'string') return 'user.tool_result without tool_use_id';
      const use = s.log.find((x) => x.id === e.tool_use_id);
      if (!use) return `tool_use_id ${e.tool_use_id} names no event`;
      if (use.type !== 'agent.tool_use') return `tool_use_id ${e.tool_use_id} is a ${use.type}, not an agent.tool_use`;
      if (e.is_error !== undefined && typeof e.is_error !== 'boolean') return 'is_error must be a boolean';
      return content(e.content);
    }
    case 'user.custom_tool_result': {
      if (typeof e.custom_tool_use_id !== 'string') return 'user.custom_tool_result without custom_tool_use_id';
      const use = s.log.find((x) => x.id === e.custom_tool_use_id);
      if (!use || use.type !== 'agent.custom_tool_use')
        return `custom_tool_use_id ${e.custom_tool_use_id} names no agent.custom_tool_use`;
      return content(e.content);
    }
    case 'user.message':
      return content(e.content);
    case 'user.tool_confirmation':
      if (typeof e.tool_use_id !== 'string' || !['allow', 'deny'].includes(e.result))
        return 'user.tool_confirmation needs tool_use_id and result allow|deny';
      return null;
    case 'user.interrupt':
    case 'user.define_outcome':
      return null;
    default:
      return `a client cannot send ${e.type}`;
  }
}

// ---- skill archives --------------------------------------------------------------------------
const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function members(files) {
  return Object.entries(files).map(([name, v]) => {
    const dir = name.endsWith('/');
    const content = Buffer.from(dir ? '' : typeof v === 'string' ? v : (v.content ?? ''));
    const mode = (typeof v === 'object' && v !== null && v.mode) || (dir ? 0o755 : 0o644);
    return { name, dir, content, mode };
  });
}
// a zip with stored (uncompressed) members and Unix modes
function buildZip(files) {
  const locals = [];
  const centrals = [];
  let offset = 0;
  for (const m of members(files)) {
    const name = Buffer.from(m.name);
    const crc = crc32(m.content);
    const lh = Buffer.alloc(30);
    lh.writeUInt32LE(0x04034b50, 0);
    lh.writeUInt16LE(20, 4);
    lh.writeUInt16LE(0, 6);
    lh.writeUInt16LE(0, 8); // stored
    lh.writeUInt32LE(0x21 << 16, 10); // 1980-01-01 00:00
    lh.writeUInt32LE(crc, 14);
    lh.writeUInt32LE(m.content.length, 18);
    lh.writeUInt32LE(m.content.length, 22);
    lh.writeUInt16LE(name.length, 26);
    lh.writeUInt16LE(0, 28);
    locals.push(lh, name, m.content);
    const ch = Buffer.alloc(46);
    ch.writeUInt32LE(0x02014b50, 0);
    ch.writeUInt16LE((3 << 8) | 20, 4); // made by Unix
    ch.writeUInt16LE(20, 6);
    ch.writeUInt16LE(0, 8);
    ch.writeUInt16LE(0, 10);
    ch.writeUInt32LE(0x21 << 16, 12);
    ch.writeUInt32LE(crc, 16);
    ch.writeUInt32LE(m.content.length, 20);
    ch.writeUInt32LE(m.content.length, 24);
    ch.writeUInt16LE(name.length, 28);
    ch.writeUInt16LE(0, 30);
    ch.writeUInt16LE(0, 32);
    ch.writeUInt16LE(0, 34);
    ch.writeUInt16LE(0, 36);
    ch.writeUInt32LE((((m.dir ? 0o040000 : 0o100000) | m.mode) << 16 | (m.dir ? 0x10 : 0)) >>> 0, 38);
    ch.writeUInt32LE(offset, 42);
    centrals.push(ch, name);
    offset += 30 + name.length + m.content.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  const n = centrals.length / 2;
  end.writeUInt16LE(n, 8);
  end.writeUInt16LE(n, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}
// a gzipped ustar archive
function buildTarGz(files) {
  const blocks = [];
  for (const m of members(files)) {
    const h = Buffer.alloc(512);
    const name = m.dir ? m.name : m.name;
    h.write(name.slice(0, 100), 0, 'utf8');
    h.write(m.mode.toString(8).padStart(7, '0') + '\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write(m.content.length.toString(8).padStart(11, '0') + '\0', 124);
    h.write('00000000000\0', 136);
    h.write('        ', 148);
    h.write(m.dir ? '5' : '0', 156);
    h.write('ustar\0', 257);
    h.write('00', 263);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(h, m.content, Buffer.alloc((512 - (m.content.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return zlib.gzipSync(Buffer.concat(blocks));
}
function skillVersion(skillId, v) {
  const sk = sc.skills?.[skillId];
  if (!sk) return null;
  const keys = Object.keys(sk.versions ?? {});
  let key = v;
  if (v === 'latest') key = keys.filter((k) => /^\d+$/.test(k)).sort((a, b) => Number(b) - Number(a))[0];
  if (!key || !sk.versions[key]) return null;
  return {
    key,
    spec: sk.versions[key],
    obj: {
      type: 'skill_version',
      id: key,
      skill_id: skillId,
      name: sk.name ?? skillId,
      description: sk.description ?? `${sk.name ?? skillId} (fake)`,
      created_at: '2026-09-01T00:00:00Z',
    },
  };
}

// ---- HTTP ----------------------------------------------------------------------------------
function authOf(req) {
  const h = req.headers.authorization;
  if (!h) return { kind: 'none', tail: null, token: null };
  const m = /^Bearer (.+)$/.exec(h);
  const token = m ? m[1] : h;
  let kind = 'other';
  if (token === ENV_KEY) kind = 'env';
  else {
    const it = items.find((i) => i.token && i.token === token);
    if (it) kind = `session:${it.id}`;
  }
  return { kind, tail: '…' + token.slice(-12), token };
}

function logReq(req, url, body, status, response) {
  const a = authOf(req);
  const h = req.headers;
  const rec = {
    seq: ++seq,
    t_ms: Date.now() - t0,
    method: req.method,
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    raw_query: url.search.replace(/^\?/, ''),
    status,
    auth: a.kind,
    auth_tail: a.tail,
    x_api_key: h['x-api-key'] !== undefined,
    anthropic_beta: h['anthropic-beta'] ?? null,
    anthropic_version: h['anthropic-version'] ?? null,
    anthropic_worker_id: h['anthropic-worker-id'] ?? null,
    content_type: h['content-type'] ?? null,
    accept: h.accept ?? null,
    retry_count: h['x-stainless-retry-count'] ?? null,
    body,
  };
  if (response !== undefined) rec.response = response;
  fs.writeSync(logFd, JSON.stringify(rec) + '\n');
}

function errBody(type, message, details) {
  const error = { type, message };
  if (details) error.details = details;
  return { type: 'error', error };
}
const ERR_TYPES = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  409: 'conflict_error',
  412: 'precondition_failed_error',
  429: 'rate_limit_error',
  500: 'api_error',
  503: 'overloaded_error',
};

function handler(req, res) {
  const url = new URL(req.url, 'http://x');
  const logUrl = new URL(req.url, 'http://x'); // as sent, ?beta=true included
  url.searchParams.delete('beta');
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    let body = null;
    if (raw.length) {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    const ctl = url.pathname.startsWith('/_fake/');
    let logged = false;
    const send = (status, obj) => {
      if (!ctl && !logged) logReq(req, logUrl, body, status, obj);
      logged = true;
      if (obj === undefined) {
        res.writeHead(status);
        res.end();
      } else {
        const s = JSON.stringify(obj);
        res.writeHead(status, { 'content-type': 'application/json', 'request-id': 'req_fake' });
        res.end(s);
      }
    };
    const fail = (status, msg, details) => send(status, errBody(ERR_TYPES[status] ?? 'api_error', msg, details));
    const sse = () => {
      if (!logged) logReq(req, logUrl, body, 200);
      logged = true;
    };
    Promise.resolve()
      .then(() => route(req, res, url, body, send, fail, sse, ctl, logUrl))
      .catch((e) => {
        process.stderr.write(`fake_cp: ${e.stack}\n`);
        if (!res.headersSent) fail(500, String(e));
      });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function pollable(nowMs, reclaim) {
  for (const i of items) {
    if (i.state !== 'queued') continue;
    if (i.spec.after) {
      const dep = itemById.get(i.spec.after);
      if (dep && !isDone(dep)) continue;
    }
    if (i.delivered_at !== null && nowMs - i.delivered_at < reclaim) continue;
    return i;
  }
  return null;
}

async function route(req, res, url, body, send, fail, sse, ctl, logUrl) {
  const p = url.pathname.split('/').filter(Boolean);
  const m = req.method;
  if (ctl) return control(m, p, body, send);
  const a = authOf(req);

  // ---- work queue
  if (p[0] === 'v1' && p[1] === 'environments' && p[3] === 'work') {
    if (p[2] !== ENV) return fail(404, `environment ${p[2]} not found`);
    if (p.length === 5 && p[4] === 'poll' && m === 'GET') {
      if (a.kind !== 'env') return fail(401, 'poll needs the environment key');
      const blockRaw = url.searchParams.get('block_ms');
      let block = 0;
      if (blockRaw !== null) {
        block = Number(blockRaw);
        if (!Number.isInteger(block) || block < 1 || block > 999)
          return fail(400, 'block_ms must be an integer in 1..999');
      }
      const reclaimRaw = url.searchParams.get('reclaim_older_than_ms');
      const reclaim = reclaimRaw === null ? RECLAIM : Number(reclaimRaw);
      if (!Number.isInteger(reclaim) || reclaim < 1) return fail(400, 'reclaim_older_than_ms must be ≥ 1');
      const deadline = Date.now() + block;
      for (;;) {
        const it = pollable(Date.now(), reclaim);
        if (it) {
          if (it.spec.poll_status) {
            const st = it.spec.poll_status;
            return fail(st, `scripted poll error ${st}`);
          }
          it.delivered_at = Date.now();
          return send(200, itemView(it, true));
        }
        if (Date.now() >= deadline) break;
        await sleep(Math.min(50, deadline - Date.now()));
      }
      let mode = EMPTY;
      if (mode === 'alternate') mode = ['204', 'null', 'empty200'][emptyPolls % 3];
      emptyPolls++;
      if (mode === 'null') return send(200, null);
      if (mode === 'empty200') {
        logReq(req, logUrl, body, 200);
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end();
      }
      return send(204);
    }
    if (p.length === 4) {
      if (m === 'GET') {
        const lim = Number(url.searchParams.get('limit') ?? 20);
        const start = Number(url.searchParams.get('page') ?? 0);
        const data = items.slice(start, start + lim).map((i) => itemView(i, false));
        const next = start + lim < items.length ? String(start + lim) : null;
        return send(200, { data, next_page: next });
      }
      return fail(404, 'no route');
    }
    if (p.length === 5 && p[4] === 'stats' && m === 'GET') {
      const q = items.filter((i) => i.state === 'queued');
      return send(200, {
        type: 'work_queue_stats',
        depth: q.filter((i) => i.delivered_at === null).length,
        pending: q.filter((i) => i.delivered_at !== null).length,
        oldest_queued_at: q.length ? q[0].created_at : null,
        workers_polling: 1,
      });
    }
    const it = itemById.get(p[4]);
    if (!it) return fail(404, `work ${p[4]} not found`);
    const tokenOk = a.kind === 'env' || a.kind === `session:${it.id}`;
    if (!tokenOk) return fail(401, 'unknown credential for this work item');
    if (p.length === 5) {
      if (m === 'GET') return send(200, itemView(it, false));
      if (m === 'POST') {
        const md = body && typeof body === 'object' ? body.metadata : null;
        if (!md || typeof md !== 'object') return fail(400, 'metadata object required');
        for (const [k, v] of Object.entries(md)) {
          if (v === null) delete it.metadata[k];
          else it.metadata[k] = String(v);
        }
        return send(200, itemView(it, false));
      }
    }
    if (p.length === 6 && m === 'POST' && p[5] === 'ack') {
      if (it.state !== 'queued') return fail(409, `work ${it.id} is ${it.state}, not queued`);
      it.ack_calls++;
      const ackQ = it.spec.ack_status ?? [];
      if (it.ack_calls <= ackQ.length) return fail(ackQ[it.ack_calls - 1], `scripted ack error ${ackQ[it.ack_calls - 1]}`);
      it.state = 'starting';
      it.acked = true;
      it.acknowledged_at = now();
      it.delivered_at = null;
      return send(200, itemView(it, false));
    }
    if (p.length === 6 && m === 'POST' && p[5] === 'heartbeat') {
      const idx = it.heartbeats++;
      const script = (it.spec.heartbeats ?? [])[idx] ?? {};
      const current = () => ({ state: it.state, ttl_seconds: TTL, last_heartbeat: it.last_heartbeat });
      if (it.state === 'stopped') return fail(409, `work ${it.id} is stopped`, { current_state: current() });
      if (it.state === 'queued') return fail(409, `work ${it.id} is not acknowledged`, { current_state: current() });
      if (script.status) return fail(script.status, `scripted heartbeat error ${script.status}`);
      if (script.steal) {
        // another worker beats in between: the stored value moves on
        it.last_heartbeat = new Date(Date.now() + 7).toISOString();
        it.latest_heartbeat_at = it.last_heartbeat;
      }
      if (it.latest_heartbeat_at && Date.now() - Date.parse(it.latest_heartbeat_at) > TTL * 1000) it.late_beats++;
      const expected = url.searchParams.get('expected_last_heartbeat');
      const stored = it.last_heartbeat ?? 'NO_HEARTBEAT';
      if (expected !== stored) {
        it.lost = true;
        return fail(
          412,
          `expected_last_heartbeat ${expected} does not match the stored heartbeat`,
          { current_state: current() },
        );
      }
      let hb = now();
      if (hb === it.last_heartbeat) hb = new Date(Date.parse(hb) + 1).toISOString();
      it.last_heartbeat = hb;
      it.latest_heartbeat_at = hb;
      if (it.state === 'starting') {
        it.state = 'active';
        it.started_at = hb;
      }
      if (script.state === 'stopping' && it.state !== 'stopping') {
        it.state = 'stopping';
        it.stop_requested_at = hb;
      }
      if (script.state === 'stopped') {
        // stopped by someone else (an operator's work/stop) as this beat lands
        it.state = 'stopped';
        it.stop_requested_at ??= hb;
        it.stopped_at = hb;
      }
      return send(200, {
        type: 'work_heartbeat',
        last_heartbeat: hb,
        lease_extended: script.lease_extended ?? true,
        state: it.state,
        ttl_seconds: TTL,
      });
    }
    if (p.length === 6 && m === 'POST' && p[5] === 'stop') {
      it.stop_calls++;
      if (it.state === 'stopped') return fail(409, `work ${it.id} is already stopped`);
      const force = body && typeof body === 'object' && body.force === true;
      if (force || it.state === 'queued') {
        it.state = 'stopped';
        it.stopped_at = now();
      } else {
        it.state = 'stopping';
        it.stop_requested_at = now();
      }
      return send(204);
    }
    return fail(404, `no route for ${m} ${url.pathname}`);
  }

  // ---- skills
  if (p[0] === 'v1' && p[1] === 'skills' && p[2] && p[3] === 'versions' && m === 'GET') {
    if (!(a.kind === 'env' || a.kind.startsWith('session:'))) return fail(401, 'unknown credential');
    const sk = sc.skills?.[p[2]];
    if (!sk) return fail(404, `skill ${p[2]} not found`);
    if (p.length === 4) {
      const data = Object.keys(sk.versions ?? {}).map((k) => skillVersion(p[2], k).obj);
      return send(200, { data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, next_page: null });
    }
    const sv = skillVersion(p[2], p[4]);
    if (!sv) return fail(404, `version ${p[4]} of skill ${p[2]} not found`);
    if (p.length === 5) return send(200, sv.obj);
    if (p.length === 6 && p[5] === 'content') {
      const tgz = sv.spec.format === 'tar.gz';
      const buf = tgz ? buildTarGz(sv.spec.files ?? {}) : buildZip(sv.spec.files ?? {});
      logReq(req, logUrl, body, 200);
      res.writeHead(200, {
        'content-type': tgz ? 'application/gzip' : 'application/zip',
        'content-length': buf.length,
        'content-disposition': `attachment; filename="${sv.obj.name}.${tgz ? 'tar.gz' : 'zip'}"`,
      });
      return res.end(buf);
    }
    return fail(404, `no route for ${m} ${url.pathname}`);
  }

  // ---- sessions
  if (p[0] === 'v1' && p[1] === 'sessions' && p[2]) {
    const s = sessionOf(p[2]);
    if (!s) return fail(404, `session ${p[2]} not found`);
    const owners = items.filter((i) => i.session === s.id);
    if (!(a.kind === 'env' || owners.some((i) => a.kind === `session:${i.id}`)))
      return fail(401, 'unknown credential for this session');
    if (p.length === 3 && m === 'GET') {
      return send(200, {
        type: 'session',
        id: s.id,
        status: s.status,
        environment_id: ENV,
        agent: { type: 'agent', id: 'agent_fake', version: 1, skills: [], ...(s.spec.agent ?? {}) },
        resources: s.spec.resources ?? [],
        metadata: s.spec.metadata ?? {},
        created_at: items.find((i) => i.session === s.id)?.created_at ?? now(),
        updated_at: now(),
      });
    }
    if (p.length === 4 && p[3] === 'events' && m === 'GET') {
      const lim = Math.min(Number(url.searchParams.get('limit') ?? 20) || 20, PAGE);
      const order = url.searchParams.get('order') ?? 'asc';
      const list = order === 'desc' ? [...s.log].reverse() : s.log;
      let start = 0;
      const page = url.searchParams.get('page');
      if (page) {
        const mm = /^page_(\d+)_(asc|desc)$/.exec(page);
        if (!mm || mm[2] !== order) return fail(400, 'bad page cursor');
        start = Number(mm[1]);
      }
      const data = list.slice(start, start + lim);
      const next = start + lim < list.length ? `page_${start + lim}_${order}` : null;
      return send(200, { data, next_page: next });
    }
    if (p.length === 4 && p[3] === 'events' && m === 'POST') {
      const evs = body && typeof body === 'object' ? body.events : null;
      if (!Array.isArray(evs) || evs.length === 0) {
        s.rejected.push({ reason: 'body must be {"events":[…]}', body });
        return fail(400, 'body must be {"events":[...]} with at least one event');
      }
      for (const e of evs) {
        const why = validateEvent(s, e);
        if (why) {
          s.rejected.push({ reason: why, event: e });
          return fail(400, why);
        }
      }
      for (const e of evs) {
        const id = e.tool_use_id ?? e.custom_tool_use_id;
        const q = id !== undefined ? s.post_status[id] : undefined;
        if (q && q.length) {
          const st = q.shift();
          return fail(st, `scripted error ${st} for the result of ${id}`);
        }
      }
      const out = [];
      for (const e of evs) {
        if (e.type === 'user.tool_result' || e.type === 'user.custom_tool_result') {
          const id = e.type === 'user.tool_result' ? e.tool_use_id : e.custom_tool_use_id;
          const use = s.log.find((x) => x.id === id);
          if (s.answered.has(id)) s.duplicates.push(id);
          const rec = { tool_use_id: id, name: use.name, is_error: e.is_error ?? false, content: e.content };
          if (e.type === 'user.tool_result') s.tool_results.push(rec);
          else s.custom_tool_results.push(rec);
          if (!ownedToolUse(use) || permission(s, use) !== 'await') s.unexpected.push(id);
        }
        out.push(append(s, e));
      }
      send(200, { data: out });
      setImmediate(() => advance(s));
      return;
    }
    if (p.length === 5 && p[3] === 'events' && p[4] === 'stream' && m === 'GET') {
      sse();
      res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      res.write(': fake control plane stream\n\n');
      s.streams.add(res);
      s.streams_opened++;
      const ping = setInterval(() => {
        res.write(': keep-alive\n\n');
        sseSend(res, 'ping', { type: 'ping' });
      }, PING_MS);
      const close = () => {
        clearInterval(ping);
        s.streams.delete(res);
      };
      res.on('close', close);
      req.on('close', close);
      setImmediate(() => advance(s));
      return;
    }
    return fail(404, `no route for ${m} ${url.pathname}`);
  }
  return fail(404, `no route for ${m} ${url.pathname}`);
}

function stateView() {
  const out = { all_done: items.every(isDone), items: [], sessions: {} };
  for (const i of items) {
    out.items.push({
      id: i.id,
      session_id: i.session,
      state: i.state,
      acked: i.acked,
      heartbeats: i.heartbeats,
      last_heartbeat: i.last_heartbeat,
      lost: i.lost,
      stop_calls: i.stop_calls,
      late_beats: i.late_beats,
      done: isDone(i),
    });
  }
  for (const s of sessions.values()) {
    out.sessions[s.id] = {
      status: s.status,
      ended: s.ended,
      streams_open: s.streams.size,
      streams_opened: s.streams_opened,
      script_left: s.script.length,
      tool_results: s.tool_results,
      custom_tool_results: s.custom_tool_results,
      pending: pendingOwned(s),
      unowned: s.log
        .filter((e) => (e.type === 'agent.custom_tool_use' || e.type === 'agent.tool_use') && !ownedToolUse(e))
        .map((e) => e.id),
      unexpected: s.unexpected,
      rejected: s.rejected,
      duplicates: s.duplicates,
      events: s.log.length,
    };
  }
  return out;
}

async function sendWebhook(o) {
  const key = o.signing_key ?? sc.webhook_signing_key;
  if (!o.url || !key) return { error: 'url and signing_key (or the scenario webhook_signing_key) required' };
  const id = o.id ?? `event_fake_${crypto.randomBytes(6).toString('hex')}`;
  const ts = String(o.timestamp ?? Math.floor(Date.now() / 1000));
  let payload = JSON.stringify({
    type: 'event',
    id,
    created_at: new Date(Number(ts) * 1000).toISOString(),
    data: {
      type: o.type ?? 'session.status_run_started',
      id: o.session_id ?? Object.keys(sc.sessions ?? {})[0] ?? 'sesn_fake',
      organization_id: 'org_fake',
      workspace_id: 'wrkspc_fake',
    },
  });
  const k = Buffer.from(key.replace(/^whsec_/, ''), 'base64');
  let sig = crypto.createHmac('sha256', k).update(`${id}.${ts}.${payload}`).digest('base64');
  if (o.tamper === 'signature') sig = crypto.createHmac('sha256', Buffer.from('wrong')).update(payload).digest('base64');
  if (o.tamper === 'body') payload = payload.replace('"type":"event"', '"type":"event" ');
  const headers = {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': ts,
    'webhook-signature': `v1,${sig}`,
  };
  if (o.omit_header) delete headers[o.omit_header];
  try {
    const r = await fetch(o.url, { method: 'POST', headers, body: payload });
    return { status: r.status, response: await r.text(), request: { headers, body: payload } };
  } catch (e) {
    return { status: null, error: String(e), request: { headers, body: payload } };
  }
}

async function control(m, p, body, send) {
  if (m === 'GET' && p[1] === 'state') return send(200, stateView());
  if (m === 'POST' && p[1] === 'webhook') return send(200, await sendWebhook(body ?? {}));
  const s = p[2] ? sessionOf(p[2]) : null;
  if (m === 'POST' && p[1] === 'emit' && s) {
    const evs = body?.events ?? [];
    const out = evs.map((e) => append(s, e));
    return send(200, { data: out });
  }
  if (m === 'POST' && p[1] === 'drop' && s) {
    const n = s.streams.size;
    for (const st of [...s.streams]) st.destroy();
    return send(200, { dropped: n });
  }
  return send(404, errBody('not_found_error', 'no such control route'));
}

const server = http.createServer(handler);
server.keepAliveTimeout = 5000;
server.listen(Number(process.env.FAKE_CP_PORT ?? 0), '127.0.0.1', () => {
  const port = server.address().port;
  baseUrl = `http://127.0.0.1:${port}`;
  process.stdout.write(`listening ${port}\n`);
});
const shutdown = () => {
  for (const s of sessions.values()) for (const st of s.streams) st.destroy();
  server.close();
  server.closeAllConnections?.();
  fs.closeSync(logFd);
  process.exit(0);
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
