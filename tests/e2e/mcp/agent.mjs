// SPDX-License-Identifier: MIT
// An agent-like script: the official MCP client (@modelcontextprotocol/sdk)
// drives `space mcp` over stdio or streamable HTTP, creates a sandbox, runs
// commands (with progress), exposes a port, moves files, checkpoints, branches, restores and
// cleans up. Prints one JSON line of what it saw; exits non-zero on a failure.
// Run by tests/e2e/test_mcp.py:
//   node agent.mjs stdio SPACE_CLI     (SPACE_URL, SPACE_API_KEY in the env)
//   node agent.mjs http URL KEY
import assert from 'node:assert/strict'
import http from 'node:http'

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

const [mode, a1, a2] = process.argv.slice(2)
const transport = mode === 'stdio'
  ? new StdioClientTransport({ command: a1, args: ['mcp'], env: process.env, stderr: 'inherit' })
  : new StreamableHTTPClientTransport(new URL(a1), { requestInit: { headers: { Authorization: `Bearer ${a2}` } } })
const client = new Client({ name: 'space-e2e-agent', version: '1.0.0' })
await client.connect(transport)
const seen = { server: client.getServerVersion(), tools: [], progress: [] }

async function call (name, args, opts) {
  const r = await client.callTool({ name, arguments: args }, undefined, opts)
  if (r.isError) throw new Error(`${name}: ${r.content?.[0]?.text}`)
  return r
}

const made = []
try {
  seen.tools = (await client.listTools()).tools.map((t) => t.name).sort()
  for (const t of (await client.listTools()).tools) assert.equal(t.inputSchema.type, 'object', t.name)

  const created = await call('create_sandbox', { memory_mb: 256, env: { AGENT: 'mcp' } })
  const id = created.structuredContent.id
  made.push(id)
  assert.match(created.content[0].text, new RegExp(id))

  const run = await call('run_command', {
    sandbox_id: id, command: 'for i in 1 2 3; do echo line$i; sleep 0.3; done; echo oops >&2; exit 3',
  }, { onprogress: (p) => seen.progress.push(p.message) })
  assert.equal(run.structuredContent.exit_code, 3)
  assert.equal(run.structuredContent.stdout, 'line1\nline2\nline3\n')
  assert.equal(run.structuredContent.stderr, 'oops\n')
  assert.match(run.content[0].text, /\[exit code 3\]/)
  assert.equal((await call('run_command', { sandbox_id: id, argv: ['sh', '-c', 'echo $AGENT'] }))
    .structuredContent.stdout, 'mcp\n')

  // a server inside, reached through the URL and token the tool gives (the ingress)
  await call('run_command', { sandbox_id: id, command: 'mkdir -p /srv && echo served-by-mcp > /srv/index.html && httpd -p 8000 -h /srv' })
  const port = await call('expose_port', { sandbox_id: id, port: 8000 })
  const url = new URL(port.structuredContent.url)
  assert.match(port.content[0].text, new RegExp(port.structuredContent.token))
  const body = await new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: url.port, path: '/', headers: {
      Host: url.host, [port.structuredContent.token_header]: port.structuredContent.token } }, (res) => {
      let b = ''
      res.on('data', (d) => { b += d })
      res.on('end', () => resolve(`${res.statusCode} ${b}`))
    })
    req.on('error', reject)
  })
  assert.equal(body, '200 served-by-mcp\n')
  await assert.rejects(client.callTool({ name: 'expose_port', arguments: { sandbox_id: id, port: 0 } }), /port/)

  await call('write_file', { sandbox_id: id, path: '/work/notes.txt', content: 'plan: try three things\n' })
  await call('write_file', { sandbox_id: id, path: '/work/bin.dat', content: Buffer.from([0, 255, 1]).toString('base64'), encoding: 'base64' })
  assert.equal((await call('read_file', { sandbox_id: id, path: '/work/notes.txt' })).content[0].text, 'plan: try three things\n')
  const bin = await call('read_file', { sandbox_id: id, path: '/work/bin.dat' })
  assert.deepEqual([...Buffer.from(bin.structuredContent.content, 'base64')], [0, 255, 1])
  const ls = await call('list_files', { sandbox_id: id, path: '/work' })
  assert.match(ls.content[0].text, /notes\.txt/)

  const ck = await call('checkpoint', { sandbox_id: id, name: 'plan' })
  assert.equal(ck.structuredContent.name, 'plan')
  await call('write_file', { sandbox_id: id, path: '/work/notes.txt', content: 'changed\n' })
  const br = await call('branch', { sandbox_id: id, count: 2, from_checkpoint: 'plan' })
  const kids = br.structuredContent.sandboxes.map((s) => s.id)
  made.push(...kids)
  assert.equal(kids.length, 2)
  for (const k of kids) {
    assert.equal((await call('read_file', { sandbox_id: k, path: '/work/notes.txt' })).content[0].text, 'plan: try three things\n')
  }
  await call('restore', { sandbox_id: id, checkpoint: 'plan' })
  assert.equal((await call('read_file', { sandbox_id: id, path: '/work/notes.txt' })).content[0].text, 'plan: try three things\n')

  // resources: the sandbox's events and files
  const res = (await client.listResources()).resources.map((r) => r.uri)
  assert.ok(res.includes(`space://sandboxes/${id}/events`), JSON.stringify(res))
  const tmpl = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate)
  assert.ok(tmpl.some((t) => t.includes('/files/')))
  const file = await client.readResource({ uri: `space://sandboxes/${id}/files/work/notes.txt` })
  assert.equal(file.contents[0].text, 'plan: try three things\n')
  const ev = await client.readResource({ uri: `space://sandboxes/${id}/events` })
  assert.match(ev.contents[0].text, /sandbox\.created/)

  // bad input: refused by the schema before any call, or an API error the model can read
  await assert.rejects(client.callTool({ name: 'run_command', arguments: { sandbox_id: id, command: 'x', bogus: 1 } }), /bogus/)
  await assert.rejects(client.callTool({ name: 'create_sandbox', arguments: { memory_mb: 'lots' } }), /memory_mb/)
  await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), /unknown tool/)
  const missing = await client.callTool({ name: 'read_file', arguments: { sandbox_id: id, path: '/nope' } })
  assert.equal(missing.isError, true)
  assert.match(missing.content[0].text, /404/)
  const gone = await client.callTool({ name: 'run_command', arguments: { sandbox_id: 'nosuchsandbox000', command: 'true' } })
  assert.equal(gone.isError, true)
  await assert.rejects(client.readResource({ uri: 'space://elsewhere/x' }))
  assert.deepEqual(await client.ping(), {})
} finally {
  for (const id of made.reverse()) {
    const r = await client.callTool({ name: 'delete_sandbox', arguments: { sandbox_id: id } }).catch((e) => ({ isError: true, e }))
    seen.deleted = (seen.deleted || 0) + (r.isError ? 0 : 1)
  }
  await client.close()
}
console.log(JSON.stringify(seen))
