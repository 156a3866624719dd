// `glovebox mcp` driven by the official MCP TypeScript SDK: its Client over a
// StdioClientTransport that runs $BUILD/glovebox mcp against the private daemon of run.sh
// (GLOVEBOX_RUNTIME_DIR). The server creates a session at start; the tools act in it.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js'

const GLOVEBOX = `${process.env.BUILD ?? 'build'}/glovebox`
// what the server needs from our environment (the SDK passes only a safe default set)
const ENV = Object.fromEntries(
  ['GLOVEBOX_RUNTIME_DIR', 'ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS']
    .filter((k) => process.env[k] !== undefined)
    .map((k) => [k, process.env[k]]))

let client
let transport
let stderr = ''
let session

before(async () => {
  assert.ok(process.env.GLOVEBOX_RUNTIME_DIR, 'run through tests/mcp/run.sh')
  transport = new StdioClientTransport({ command: GLOVEBOX, args: ['mcp'], env: ENV, stderr: 'pipe' })
  transport.stderr.on('data', (d) => { stderr += d })
  client = new Client({ name: 'glovebox-mcp-tests', version: '1.0.0' })
  await client.connect(transport)
  session = /session '([^']+)'/.exec(client.getInstructions() ?? '')?.[1]
})

after(async () => {
  await client?.close()
  assert.doesNotMatch(stderr, /Sanitizer|runtime error:/, `glovebox mcp stderr:\n${stderr}`)
})

// a tool call may take bash's default 120 s: above the SDK's 60 s default
const CALL = { timeout: 150_000 }
const text = (r) => r.content.filter((b) => b.type === 'text').map((b) => b.text).join('')
async function call (name, args) {
  const r = await client.callTool({ name, arguments: args }, undefined, CALL)
  assert.ok(Array.isArray(r.content), JSON.stringify(r))
  return r
}
async function ok (name, args) {
  const r = await call(name, args)
  assert.equal(r.isError, false, `${name} ${JSON.stringify(args)}: ${text(r)}`)
  return r
}

test('initialize: server info, tools capability, the session named', async () => {
  const info = client.getServerVersion()
  assert.equal(info.name, 'glovebox')
  assert.match(info.version, /^\d+\.\d+/)
  assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false })
  assert.match(session ?? '', /^[A-Za-z0-9._-]+$/, `no session in the instructions: ${client.getInstructions()}`)
  // the session it created is named on stderr too (a pipe of its own: it may come later)
  for (let i = 0; i < 100 && !stderr.includes(`created session '${session}'`); i++)
    await new Promise((resolve) => setTimeout(resolve, 20))
  assert.ok(stderr.includes(`created session '${session}'`), stderr)
})

test('ping', async () => {
  assert.deepEqual(await client.ping(), {})
})

test('tools/list: the six tools and their schemas', async () => {
  const { tools } = await client.listTools()
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]))
  assert.deepEqual(Object.keys(byName).sort(), ['bash', 'edit', 'glob', 'grep', 'read', 'write'])
  const want = {
    bash: [['command', 'restart', 'timeout_ms'], []],
    read: [['file_path', 'view_range'], ['file_path']],
    write: [['file_path', 'content'], ['file_path', 'content']],
    edit: [['file_path', 'old_string', 'new_string', 'replace_all'], ['file_path', 'old_string', 'new_string']],
    glob: [['pattern', 'path'], ['pattern']],
    grep: [['pattern', 'path'], ['pattern']],
  }
  for (const [name, [props, required]] of Object.entries(want)) {
    const t = byName[name]
    assert.ok(t.description.length > 40, name)
    assert.equal(t.inputSchema.type, 'object')
    assert.deepEqual(Object.keys(t.inputSchema.properties).sort(), [...props].sort(), name)
    assert.deepEqual(t.inputSchema.required ?? [], required, name)
  }
  assert.equal(byName.bash.inputSchema.properties.command.type, 'string')
  assert.equal(byName.bash.inputSchema.properties.restart.type, 'boolean')
  assert.equal(byName.bash.inputSchema.properties.timeout_ms.type, 'integer')
  assert.equal(byName.read.inputSchema.properties.view_range.type, 'array')
  assert.equal(byName.edit.inputSchema.properties.replace_all.type, 'boolean')
  assert.equal(byName.read.annotations?.readOnlyHint, true)
})

test('write, read, edit, glob, grep on one file', async () => {
  let r = await ok('write', { file_path: 'notes/hello.txt', content: 'alpha\nbeta\n' })
  assert.equal(r.content[0].type, 'text')

  r = await ok('read', { file_path: 'notes/hello.txt' })
  assert.equal(text(r), 'alpha\nbeta\n')

  await ok('edit', { file_path: 'notes/hello.txt', old_string: 'beta', new_string: 'gamma' })
  r = await ok('read', { file_path: 'notes/hello.txt' })
  assert.equal(text(r), 'alpha\ngamma\n')

  r = await ok('read', { file_path: 'notes/hello.txt', view_range: [2, 2] })
  assert.match(text(r), /gamma/)
  assert.doesNotMatch(text(r), /alpha/)

  r = await ok('glob', { pattern: '**/*.txt' })
  assert.match(text(r), /notes\/hello\.txt/)

  r = await ok('grep', { pattern: 'gam+a' })
  assert.match(text(r), /hello\.txt:2:gamma/)

  // the same files from the shell: one working directory for every tool
  r = await ok('bash', { command: 'cat notes/hello.txt' })
  assert.match(text(r), /alpha\ngamma/)
})

test('read: an image is MCP image content, a PDF an embedded resource', async () => {
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
  await ok('bash', { command: `echo ${png} | base64 -d > pic.png` })
  let r = await ok('read', { file_path: 'pic.png' })
  assert.equal(r.content.length, 1)
  assert.equal(r.content[0].type, 'image')
  assert.equal(r.content[0].mimeType, 'image/png')
  assert.equal(r.content[0].data, png)

  await ok('write', { file_path: 'docs/tiny.pdf', content: '%PDF-1.4\n%%EOF\n' })
  r = await ok('read', { file_path: 'docs/tiny.pdf' })
  assert.equal(r.content.length, 1)
  assert.equal(r.content[0].type, 'resource', JSON.stringify(r.content[0]))
  const res = r.content[0].resource
  assert.equal(res.mimeType, 'application/pdf')
  assert.match(res.uri, new RegExp(`^glovebox://${session}/.*docs/tiny\\.pdf$`))
  assert.equal(Buffer.from(res.blob, 'base64').toString(), '%PDF-1.4\n%%EOF\n')
})

test('bash: output, and a failing command is an error', async () => {
  let r = await ok('bash', { command: 'echo hi' })
  assert.match(text(r), /^hi\n?$/)

  r = await call('bash', { command: "sh -c 'exit 3'" })
  assert.equal(r.isError, true, text(r))

  // the shell is still there afterwards
  r = await ok('bash', { command: 'echo again' })
  assert.match(text(r), /again/)
})

test('errors: a missing file, bad arguments, an unknown tool', async () => {
  let r = await call('read', { file_path: 'does/not/exist.txt' })
  assert.equal(r.isError, true)
  assert.ok(text(r).length > 0)

  r = await call('read', {})
  assert.equal(r.isError, true)
  assert.match(text(r), /file_path/)

  await assert.rejects(client.callTool({ name: 'rm', arguments: {} }),
    (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams)
})

// The transport itself, without the SDK: bad lines get JSON-RPC errors and the server goes on;
// end of input ends it with status 0.
test('stdio: parse error, batch, notification, then a request; EOF exits 0', async () => {
  assert.ok(session)
  const p = spawn(GLOVEBOX, ['mcp', '--session', session], {
    env: { ...ENV, PATH: process.env.PATH }, stdio: ['pipe', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  p.stdout.on('data', (d) => { out += d })
  p.stderr.on('data', (d) => { err += d })
  p.stdin.write('{"jsonrpc":"2.0","id":1,\n')
  p.stdin.write('[{"jsonrpc":"2.0","id":2,"method":"ping"}]\n')
  p.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n\n')
  p.stdin.write('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo $((6*7))"}}}\n')
  p.stdin.end('{"jsonrpc":"2.0","id":"last","method":"ping"}')  // no final newline
  const [code] = await once(p, 'close')
  assert.equal(code, 0, err)
  assert.doesNotMatch(err, /Sanitizer|runtime error:/)
  assert.match(err, new RegExp(`serving session '${session}'`))
  const lines = out.split('\n').filter((l) => l !== '')
  assert.equal(lines.length, 4, out)
  const [parse, batch, callr, ping] = lines.map((l) => JSON.parse(l))
  assert.equal(parse.error.code, -32700)
  assert.equal(parse.id, null)
  assert.equal(batch.error.code, -32600)
  assert.equal(batch.id, null)
  assert.equal(callr.id, 3)
  assert.equal(callr.result.isError, false)
  assert.match(callr.result.content[0].text, /42/)
  assert.deepEqual(ping, { jsonrpc: '2.0', id: 'last', result: {} })
})

test('--session with an unknown id exits 3', async () => {
  const p = spawn(GLOVEBOX, ['mcp', '--session', 'ses-none-such'], {
    env: { ...ENV, PATH: process.env.PATH }, stdio: ['pipe', 'pipe', 'pipe'],
  })
  let out = ''
  p.stdout.on('data', (d) => { out += d })
  p.stdin.end()
  const [code] = await once(p, 'close')
  assert.equal(code, 3)
  assert.equal(out, '')
})
