// Helpers for the E2B SDK tests (node:test files, tests/e2b/*.test.mjs), run by run.sh against a
// private gloveboxd. The SDK reads E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY itself; these
// helpers add cleanup, raw requests for what the SDK does not expose, and small utilities.
//
//   env                          the environment run.sh exports (throws at import if it is missing)
//   newSandbox(opts)             Sandbox.create(opts) (opts.template picks the template), killed
//                                when the test file ends
//   newCodeSandbox(opts)         the same with @e2b/code-interpreter's Sandbox
//   track(sandbox)               register a sandbox made some other way (connect, fork) for cleanup
//   killAll()                    kill every registered sandbox, then any other this key can list
//   randomName(prefix)           a unique name for paths, metadata values, tags
//   api(method, path, body)      a raw control-plane request (X-API-KEY)
//   v1(method, path, body)       a raw native /v1 request (Authorization: Bearer, same key)
//   envd(sandbox, method, path, {headers, body, port})   a raw envd request (E2b-Sandbox-Id, ...)
//   rpc(sandbox, service, method, msg, opts)             a raw unary Connect call
//   rpcStream(sandbox, service, method, msg, opts)       a raw server-streaming Connect call
//   envelope(msg, flags), parseEnvelopes(bytes)           Connect framing
//   waitFor(fn, {timeoutMs, intervalMs, what})           poll until fn() is truthy
import { after } from 'node:test';
import { randomBytes } from 'node:crypto';
import { Sandbox } from 'e2b';

function required(name) {
    const v = process.env[name];
    if (!v) throw new Error(`${name} is not set: run the E2B tests through tests/e2b/run.sh`);
    return v;
}

export const env = Object.freeze({
    E2B_API_URL: required('E2B_API_URL'),
    E2B_SANDBOX_URL: required('E2B_SANDBOX_URL'),
    E2B_API_KEY: required('E2B_API_KEY'),
    // where the daemon's runtime dir and binaries are (for tests that look behind the API)
    GLOVEBOX_RUNTIME_DIR: process.env.GLOVEBOX_RUNTIME_DIR || '',
    BUILD: process.env.BUILD || 'build',
    apiUrl: process.env.E2B_API_URL.replace(/\/+$/, ''),
    sandboxUrl: process.env.E2B_SANDBOX_URL.replace(/\/+$/, ''),
    apiKey: process.env.E2B_API_KEY,
});

// A timeout long enough for any test, short enough that a leaked sandbox goes away on its own.
const DEFAULT_TIMEOUT_MS = 10 * 60 * 1000;

const live = new Set();

export function track(sandbox) {
    live.add(sandbox);
    return sandbox;
}

export async function newSandbox(opts = {}) {
    const { template, ...rest } = opts;
    const o = { timeoutMs: DEFAULT_TIMEOUT_MS, ...rest };
    const sbx = template === undefined ? await Sandbox.create(o) : await Sandbox.create(template, o);
    return track(sbx);
}

export async function newCodeSandbox(opts = {}) {
    const ci = await import('@e2b/code-interpreter');
    const { template, ...rest } = opts;
    const o = { timeoutMs: DEFAULT_TIMEOUT_MS, ...rest };
    const sbx = template === undefined ? await ci.Sandbox.create(o) : await ci.Sandbox.create(template, o);
    return track(sbx);
}

export function randomName(prefix = 't') {
    return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

export async function killAll() {
    const mine = [...live];
    live.clear();
    await Promise.allSettled(mine.map((s) => Sandbox.kill(s.sandboxId)));
    // anything else this run's key still owns (made by raw requests, or by a test that failed
    // before it could register it)
    try {
        const pager = Sandbox.list({ limit: 100 });
        const ids = [];
        while (pager.hasNext) {
            for (const s of await pager.nextItems()) ids.push(s.sandboxId);
        }
        await Promise.allSettled(ids.map((id) => Sandbox.kill(id)));
    } catch {
        // list not implemented (yet): the registered ones are gone, the rest expire
    }
}

// Every test file ends with its sandboxes killed, whether its tests passed or not.
after(killAll);

async function reply(res) {
    const bytes = new Uint8Array(await res.arrayBuffer());
    const text = new TextDecoder().decode(bytes);
    let json;
    try {
        json = text.length ? JSON.parse(text) : undefined;
    } catch {
        json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json, bytes };
}

function bodyInit(body, headers) {
    if (body === undefined || body === null) return undefined;
    if (typeof body === 'string' || body instanceof Uint8Array || body instanceof ArrayBuffer ||
        body instanceof Blob || body instanceof FormData || body instanceof URLSearchParams ||
        body instanceof ReadableStream)
        return body;
    if (!Object.keys(headers).some((k) => k.toLowerCase() === 'content-type'))
        headers['Content-Type'] = 'application/json';
    return JSON.stringify(body);
}

// A control-plane request: returns {status, headers, text, json, bytes}; never throws on a
// non-2xx status. opts.headers adds or overrides headers (X-API-KEY: null drops the key).
export async function api(method, path, body, opts = {}) {
    const headers = { 'X-API-KEY': env.apiKey, ...(opts.headers || {}) };
    for (const k of Object.keys(headers)) if (headers[k] === null) delete headers[k];
    const res = await fetch(env.apiUrl + path, {
        method,
        headers,
        body: bodyInit(body, headers),
        signal: opts.signal,
    });
    return reply(res);
}

// The native API on the same listener, with the same key.
export async function v1(method, path, body, opts = {}) {
    const headers = { Authorization: `Bearer ${env.apiKey}`, ...(opts.headers || {}) };
    for (const k of Object.keys(headers)) if (headers[k] === null) delete headers[k];
    const res = await fetch(env.apiUrl + path, {
        method,
        headers,
        body: bodyInit(body, headers),
        signal: opts.signal,
    });
    return reply(res);
}

function envdHeaders(sandbox, port, extra) {
    const id = typeof sandbox === 'string' ? sandbox : sandbox.sandboxId;
    const token = typeof sandbox === 'string' ? undefined : sandbox.envdAccessToken;
    const headers = { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': String(port ?? 49983) };
    if (token) headers['X-Access-Token'] = token;
    Object.assign(headers, extra || {});
    for (const k of Object.keys(headers)) if (headers[k] === null) delete headers[k];
    return headers;
}

// A raw envd request (sandbox: a Sandbox, or an id string for requests without a token).
// opts.headers adds or overrides headers (a null value drops one, e.g. 'X-Access-Token': null);
// opts.port is the E2b-Sandbox-Port (49983; 49999 for the code interpreter); opts.raw returns
// the fetch Response itself (for streams) instead of the read reply.
export async function envd(sandbox, method, path, opts = {}) {
    const headers = envdHeaders(sandbox, opts.port, opts.headers);
    const res = await fetch(env.sandboxUrl + path, {
        method,
        headers,
        body: bodyInit(opts.body, headers),
        signal: opts.signal,
        duplex: opts.body instanceof ReadableStream ? 'half' : undefined,
    });
    return opts.raw ? res : reply(res);
}

// A unary Connect call (JSON): {status, json, ...}.
export async function rpc(sandbox, service, method, msg = {}, opts = {}) {
    return envd(sandbox, 'POST', `/${service}/${method}`, {
        ...opts,
        headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1',
                   ...(opts.headers || {}) },
        body: JSON.stringify(msg),
    });
}

// Connect envelope framing: flags (0 message, 2 end of stream), 4-byte big-endian length, JSON.
export function envelope(msg, flags = 0) {
    const payload = new TextEncoder().encode(JSON.stringify(msg));
    const out = new Uint8Array(5 + payload.length);
    out[0] = flags;
    new DataView(out.buffer).setUint32(1, payload.length);
    out.set(payload, 5);
    return out;
}

// -> {frames: [{flags, msg}], rest: Uint8Array (an incomplete trailing frame)}
export function parseEnvelopes(bytes) {
    const frames = [];
    let off = 0;
    while (bytes.length - off >= 5) {
        const len = new DataView(bytes.buffer, bytes.byteOffset + off + 1, 4).getUint32(0);
        if (bytes.length - off - 5 < len) break;
        const text = new TextDecoder().decode(bytes.subarray(off + 5, off + 5 + len));
        frames.push({ flags: bytes[off], msg: JSON.parse(text) });
        off += 5 + len;
    }
    return { frames, rest: bytes.subarray(off) };
}

// A server-streaming Connect call. Reads the whole stream unless opts.until(frame, frames)
// returns true first (then the request is aborted). -> {status, headers, frames, messages,
// end (the end-of-stream message or undefined), text (the body when the status is not 200)}.
export async function rpcStream(sandbox, service, method, msg = {}, opts = {}) {
    const ac = new AbortController();
    const headers = { 'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1',
                      ...(opts.headers || {}) };
    if (opts.timeoutMs) headers['Connect-Timeout-Ms'] = String(opts.timeoutMs);
    const res = await envd(sandbox, 'POST', `/${service}/${method}`, {
        ...opts, headers, body: envelope(msg), raw: true, signal: ac.signal,
    });
    const out = { status: res.status, headers: res.headers, frames: [], messages: [], end: undefined };
    if (res.status !== 200) {
        out.text = await res.text();
        return out;
    }
    let buf = new Uint8Array(0);
    const reader = res.body.getReader();
    try {
        for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            const joined = new Uint8Array(buf.length + value.length);
            joined.set(buf);
            joined.set(value, buf.length);
            const { frames, rest } = parseEnvelopes(joined);
            buf = new Uint8Array(rest);
            let stop = false;
            for (const f of frames) {
                out.frames.push(f);
                if (f.flags & 2) out.end = f.msg;
                else out.messages.push(f.msg);
                if (opts.until && opts.until(f, out.frames)) stop = true;
            }
            if (stop) {
                ac.abort();
                break;
            }
        }
    } catch (e) {
        if (!ac.signal.aborted) throw e;
    }
    out.trailing = buf.length;
    return out;
}

// Poll fn until it returns something truthy (which is returned); throws after timeoutMs.
export async function waitFor(fn, { timeoutMs = 10000, intervalMs = 50, what = 'condition' } = {}) {
    const deadline = Date.now() + timeoutMs;
    let last;
    for (;;) {
        try {
            const v = await fn();
            if (v) return v;
        } catch (e) {
            last = e;
        }
        if (Date.now() > deadline)
            throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
        await new Promise((r) => setTimeout(r, intervalMs));
    }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
