// SPDX-License-Identifier: MIT
// The E2B JS SDK (npm e2b 2.51.0, unmodified) driving a real spaced through
// its public API. Run by tests/e2e/test_e2b_sdk.py, which starts spaced and
// sets E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (a space API key).
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import {
  ALL_TRAFFIC,
  AuthenticationError,
  CommandExitError,
  FileType,
  FilesystemEventType,
  NotFoundError,
  Sandbox,
  SandboxError,
  SandboxNotFoundError,
  Secret,
  TimeoutError,
  Volume,
} from 'e2b'

const API = process.env.E2B_API_URL
const KEY = process.env.E2B_API_KEY
const T = { timeout: 120_000 }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function until(what, fn, ms = 15_000) {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

// Every sandbox a test makes, killed at the end whatever happened.
const made = new Set()
async function create(opts = {}) {
  const sbx = await Sandbox.create('base', { timeoutMs: 600_000, ...opts })
  made.add(sbx.sandboxId)
  return sbx
}
after(async () => {
  for (const id of made) await Sandbox.kill(id).catch(() => {})
})

describe('sandbox lifecycle', () => {
  test('create with metadata and envs, then getInfo', T, async () => {
    const sbx = await create({ metadata: { suite: 'e2b', who: 'lifecycle' }, envs: { SBX_WIDE: 'yes' } })
    assert.match(sbx.sandboxId, /^[a-z0-9]{16}$/)
    const info = await sbx.getInfo()
    assert.equal(info.sandboxId, sbx.sandboxId)
    assert.equal(info.templateId, 'base')
    assert.equal(info.state, 'running')
    assert.deepEqual(info.metadata, { suite: 'e2b', who: 'lifecycle' })
    assert.ok(info.endAt > info.startedAt)
    assert.ok(Math.abs(info.endAt - info.startedAt - 600_000) < 5_000, 'endAt = start + timeout')
    assert.equal(await sbx.isRunning(), true)
    const r = await sbx.commands.run('echo $SBX_WIDE')
    assert.equal(r.stdout, 'yes\n')
    assert.equal(await sbx.kill(), true)
    made.delete(sbx.sandboxId)
    assert.equal(await sbx.isRunning(), false)
    assert.equal(await sbx.kill(), false, 'a second kill finds nothing')
    await assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError)
    await assert.rejects(sbx.commands.run('true'), SandboxError)
  })

  test('default timeout is 300 s; setTimeout moves endAt', T, async () => {
    const sbx = await Sandbox.create('base')
    made.add(sbx.sandboxId)
    let info = await sbx.getInfo()
    assert.ok(Math.abs(info.endAt - info.startedAt - 300_000) < 5_000)
    await sbx.setTimeout(30_000)
    info = await sbx.getInfo()
    assert.ok(Math.abs(info.endAt - Date.now() - 30_000) < 5_000, `endAt ${info.endAt.toISOString()}`)
    await sbx.setTimeout(900_000)
    info = await sbx.getInfo()
    assert.ok(Math.abs(info.endAt - Date.now() - 900_000) < 5_000)
  })

  test('list filters by state and metadata and pages with nextToken', T, async () => {
    const tag = `run-${Date.now()}`
    const a = await create({ metadata: { listing: tag, n: '1' } })
    const b = await create({ metadata: { listing: tag, n: '2' } })
    const c = await create({ metadata: { listing: 'other' } })
    const all = []
    const pages = Sandbox.list({ query: { metadata: { listing: tag } }, limit: 1 })
    while (pages.hasNext) {
      const items = await pages.nextItems()
      assert.ok(items.length <= 1)
      all.push(...items)
    }
    assert.deepEqual(all.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort())
    assert.ok(all.every((s) => s.state === 'running' && s.metadata.listing === tag))

    assert.equal(await b.pause(), true)
    const running = await Sandbox.list({ query: { metadata: { listing: tag }, state: ['running'] } }).nextItems()
    assert.deepEqual(running.map((s) => s.sandboxId), [a.sandboxId])
    const paused = await Sandbox.list({ query: { metadata: { listing: tag }, state: ['paused'] } }).nextItems()
    assert.deepEqual(paused.map((s) => s.sandboxId), [b.sandboxId])
    const odd = await Sandbox.list({ query: { metadata: { 'key with space': 'a&b=c' } } }).nextItems()
    assert.deepEqual(odd, [])
    const d = await create({ metadata: { listing: tag, 'odd key/é': 'a&b=c d%20+' } })
    const found = await Sandbox.list({ query: { metadata: { 'odd key/é': 'a&b=c d%20+' } } }).nextItems()
    assert.deepEqual(found.map((s) => s.sandboxId), [d.sandboxId])
    const both = await Sandbox.list({ query: { state: ['running', 'paused'], metadata: { listing: tag } } }).nextItems()
    assert.equal(both.length, 3)
    assert.ok(c.sandboxId)
  })

  test('pause freezes, a second pause says so, connect resumes', T, async () => {
    const sbx = await create()
    await sbx.files.write('/tmp/kept', 'across pause')
    const bg = await sbx.commands.run('i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done', {
      background: true,
      timeoutMs: 0,
    })
    await sleep(500)
    assert.equal(await sbx.pause(), true)
    assert.equal((await sbx.getInfo()).state, 'paused')
    assert.equal(await sbx.isRunning(), false)
    assert.equal(await sbx.pause(), false, 'already paused')
    await assert.rejects(sbx.commands.run('true'))

    const again = await Sandbox.connect(sbx.sandboxId)
    assert.equal((await again.getInfo()).state, 'running')
    assert.equal(await again.isRunning(), true)
    assert.equal(await again.files.read('/tmp/kept'), 'across pause')
    const n1 = Number((await again.commands.run('cat /tmp/counter')).stdout)
    await sleep(500)
    const n2 = Number((await again.commands.run('cat /tmp/counter')).stdout)
    assert.ok(n2 > n1, `the background loop runs again after resume (${n1} → ${n2})`)
    await again.commands.kill(bg.pid)
    // connecting to a running sandbox is fine too
    const third = await Sandbox.connect(sbx.sandboxId)
    assert.equal((await third.commands.run('echo ok')).stdout, 'ok\n')
  })

  test('a paused sandbox can be killed', T, async () => {
    const sbx = await create()
    await sbx.commands.run('sleep 1000', { background: true, timeoutMs: 0 })
    assert.equal(await sbx.pause(), true)
    assert.equal(await sbx.kill(), true)
    made.delete(sbx.sandboxId)
    await assert.rejects(Sandbox.connect(sbx.sandboxId), NotFoundError)
  })

  test('unknown sandboxes are not found', T, async () => {
    await assert.rejects(Sandbox.connect('zzzzzzzzzzzzzzzz'), NotFoundError)
    await assert.rejects(Sandbox.getInfo('zzzzzzzzzzzzzzzz'), NotFoundError)
    assert.equal(await Sandbox.kill('zzzzzzzzzzzzzzzz'), false)
  })
})

describe('commands', () => {
  let sbx
  before(async () => {
    sbx = await create({ envs: { SANDBOX_VAR: 'from-create', OVERRIDE: 'create' } })
  })

  test('output is streamed as it is produced', T, async () => {
    const chunks = []
    const stamps = []
    const r = await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.3; done; echo err >&2', {
      onStdout: (d) => {
        chunks.push(d)
        stamps.push(Date.now())
      },
      onStderr: (d) => chunks.push(`E:${d}`),
    })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'line1\nline2\nline3\n')
    assert.equal(r.stderr, 'err\n')
    assert.ok(stamps.length >= 3, 'one callback per line at least')
    assert.ok(stamps[stamps.length - 1] - stamps[0] >= 400, 'callbacks came while the command ran')
    assert.ok(chunks.includes('E:err\n'))
  })

  test('large and binary-safe output', T, async () => {
    const r = await sbx.commands.run('seq 1 200000')
    const lines = r.stdout.trimEnd().split('\n')
    assert.equal(lines.length, 200000)
    assert.equal(lines[199999], '200000')
    const u = await sbx.commands.run("printf 'h\\xc3\\xa9llo w\\xc3\\xb6rld\\n'")
    assert.equal(u.stdout, 'héllo wörld\n')
  })

  test('exit codes: non-zero is a CommandExitError', T, async () => {
    const err = await sbx.commands.run('echo out; echo bad >&2; exit 7').catch((e) => e)
    assert.ok(err instanceof CommandExitError, `got ${err}`)
    assert.equal(err.exitCode, 7)
    assert.equal(err.stdout, 'out\n')
    assert.equal(err.stderr, 'bad\n')
    assert.equal(err.error, 'exit status 7')
    const missing = await sbx.commands.run('no-such-command-here').catch((e) => e)
    assert.equal(missing.exitCode, 127)
  })

  test('env, cwd and user', T, async () => {
    let r = await sbx.commands.run('echo $SANDBOX_VAR $OVERRIDE $ONLY_HERE', { envs: { OVERRIDE: 'call', ONLY_HERE: 'x' } })
    assert.equal(r.stdout, 'from-create call x\n')
    r = await sbx.commands.run('pwd; whoami; echo $HOME; id -u')
    assert.equal(r.stdout, '/home/user\nuser\n/home/user\n1000\n')
    r = await sbx.commands.run('pwd', { cwd: '/tmp' })
    assert.equal(r.stdout, '/tmp\n')
    r = await sbx.commands.run('whoami; pwd; echo $HOME', { user: 'root' })
    assert.equal(r.stdout, 'root\n/root\n/root\n')
    r = await sbx.commands.run('touch made-by-user && stat -c %U made-by-user')
    assert.equal(r.stdout, 'user\n')
    await assert.rejects(sbx.commands.run('pwd', { cwd: '/does/not/exist' }), /does not exist/)
    await assert.rejects(sbx.commands.run('true', { user: 'nobody-here' }), AuthenticationError)
  })

  test('a timeout kills the command', T, async () => {
    // envd ends the call with deadline_exceeded, which the SDK raises as a TimeoutError
    await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1500 }), TimeoutError)
    await until('the timed-out process to go', async () => {
      const l = await sbx.commands.list()
      return !l.some((p) => p.args.join(' ').includes('sleep 30'))
    })
  })

  test('a command whose sandbox is killed under it: TimeoutError, the sandbox was killed', T, async () => {
    const sbx = await create()
    const seen = []
    const run = sbx.commands.run('echo up; sleep 600', { onStdout: (d) => seen.push(d), timeoutMs: 0 })
    const failed = run.then(() => null, (e) => e) // it may fail before the kill call returns
    await until('the command to start', async () => seen.join('').includes('up'))
    assert.equal(await Sandbox.kill(sbx.sandboxId), true)
    made.delete(sbx.sandboxId)
    // what E2B's SDK says when its edge drops the stream of a dead sandbox and /health then answers 502
    const e = await failed
    assert.ok(e instanceof TimeoutError, String(e))
    assert.match(e.message, /terminated: The sandbox was killed or reached its end of life while the request was in flight/)
  })

  test('background process with stdin, list, connect and kill', T, async () => {
    let out = ''
    const h = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => (out += d) })
    assert.ok(h.pid > 0)
    await sbx.commands.sendStdin(h.pid, 'first\n')
    await until('echo of stdin', async () => out.includes('first\n'))
    const procs = await sbx.commands.list()
    const me = procs.find((p) => p.pid === h.pid)
    assert.ok(me, `pid ${h.pid} in ${JSON.stringify(procs)}`)
    assert.equal(me.cmd, '/bin/bash')
    assert.deepEqual(me.args, ['-l', '-c', 'cat'])

    // a second subscriber sees what comes next
    let out2 = ''
    const h2 = await sbx.commands.connect(h.pid, { onStdout: (d) => (out2 += d) })
    await sbx.commands.sendStdin(h.pid, 'second\n')
    await until('both subscribers', async () => out.includes('second\n') && out2.includes('second\n'))
    assert.ok(!out2.includes('first'), 'connect does not replay')
    await sbx.commands.closeStdin(h.pid)
    const r = await h.wait()
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'first\nsecond\n')
    await h2.wait()

    const sleeper = await sbx.commands.run('sleep 600', { background: true })
    assert.equal(await sbx.commands.kill(sleeper.pid), true)
    const err = await sleeper.wait().catch((e) => e)
    assert.ok(err instanceof CommandExitError)
    assert.equal(err.exitCode, -1)
    assert.match(err.error, /signal: killed/)
    assert.equal(await sbx.commands.kill(sleeper.pid), false, 'a dead pid is not found')
    await assert.rejects(sbx.commands.sendStdin(999999, 'x'), NotFoundError)
    await assert.rejects(sbx.commands.connect(999999), NotFoundError)
  })

  test('a background process outlives its stream and can be re-attached', T, async () => {
    const h = await sbx.commands.run('for i in $(seq 1 40); do echo tick$i; sleep 0.1; done; echo done', {
      background: true,
    })
    await h.disconnect()
    await sleep(300)
    let seen = ''
    const again = await sbx.commands.connect(h.pid, { onStdout: (d) => (seen += d) })
    const r = await again.wait()
    assert.equal(r.exitCode, 0)
    assert.ok(seen.includes('done\n'), seen)
    assert.ok(!seen.includes('tick1\n'), 'output from before the connect is not replayed')
  })

  test('pty: interactive shell, input, resize, kill', T, async () => {
    let data = ''
    const dec = new TextDecoder()
    const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (data += dec.decode(d)) })
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\n'))
    await until('pty output', async () => data.includes('pty-42'))
    assert.ok(data.includes('24 80'), data)
    await sbx.pty.resize(t.pid, { cols: 120, rows: 40 })
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('stty size\n'))
    await until('resized', async () => data.includes('40 120'))
    assert.equal(await sbx.pty.kill(t.pid), true)
    await t.wait().catch(() => {})
  })
})

describe('files', () => {
  let sbx
  before(async () => {
    sbx = await create()
  })

  test('write and read: text, bytes, blob, stream; relative paths are in the home', T, async () => {
    const info = await sbx.files.write('/tmp/t/a.txt', 'hello')
    assert.equal(info.path, '/tmp/t/a.txt')
    assert.equal(info.name, 'a.txt')
    assert.equal(await sbx.files.read('/tmp/t/a.txt'), 'hello')
    const bytes = new Uint8Array(256).map((_, i) => i)
    await sbx.files.write('bin.dat', bytes)
    assert.deepEqual(await sbx.files.read('/home/user/bin.dat', { format: 'bytes' }), bytes)
    const blob = await sbx.files.read('bin.dat', { format: 'blob' })
    assert.equal(blob.size, 256)
    const stream = await sbx.files.read('bin.dat', { format: 'stream' })
    let n = 0
    for await (const c of stream) n += c.length
    assert.equal(n, 256)
    const st = await sbx.files.getInfo('bin.dat')
    assert.equal(st.owner, 'user')
    assert.equal(st.size, 256)
    await sbx.files.write('/tmp/empty', '')
    assert.equal(await sbx.files.read('/tmp/empty'), '')
  })

  test('large upload and download stay intact', T, async () => {
    const big = new Uint8Array(8 * 1024 * 1024)
    for (let i = 0; i < big.length; i += 4096) big[i] = (i / 4096) & 0xff
    await sbx.files.write('/tmp/big.bin', big)
    const back = await sbx.files.read('/tmp/big.bin', { format: 'bytes' })
    assert.equal(back.length, big.length)
    assert.ok(Buffer.from(back).equals(Buffer.from(big)))
    // a ReadableStream goes as application/octet-stream
    const body = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode('streamed '))
        c.enqueue(new TextEncoder().encode('upload'))
        c.close()
      },
    })
    await sbx.files.write('/tmp/streamed.txt', body)
    assert.equal(await sbx.files.read('/tmp/streamed.txt'), 'streamed upload')
  })

  test('write several files at once, as root and as user', T, async () => {
    const res = await sbx.files.write([
      { path: '/tmp/m/one.txt', data: '1' },
      { path: 'm/two.txt', data: '2' },
    ])
    assert.deepEqual(res.map((r) => r.path), ['/tmp/m/one.txt', '/home/user/m/two.txt'])
    assert.equal(await sbx.files.read('/home/user/m/two.txt'), '2')
    await sbx.files.write('/root/secret.txt', 'r', { user: 'root' })
    assert.equal((await sbx.files.getInfo('/root/secret.txt', { user: 'root' })).owner, 'root')
    assert.equal(await sbx.files.read('secret.txt', { user: 'root' }), 'r')
    assert.equal((await sbx.commands.run('stat -c %U /tmp/m/one.txt')).stdout, 'user\n')
  })

  test('list, exists, getInfo, makeDir, rename, remove', T, async () => {
    assert.equal(await sbx.files.makeDir('/tmp/d/e/f'), true)
    assert.equal(await sbx.files.makeDir('/tmp/d/e/f'), false)
    await sbx.files.write('/tmp/d/x.txt', 'x')
    await sbx.commands.run('ln -s /tmp/d/x.txt /tmp/d/link')
    let l = await sbx.files.list('/tmp/d')
    assert.deepEqual(l.map((e) => e.name), ['e', 'link', 'x.txt'])
    assert.equal(l[0].type, FileType.DIR)
    assert.equal(l[0].permissions, 'drwxr-xr-x')
    assert.equal(l[2].type, FileType.FILE)
    assert.equal(l[1].symlinkTarget, '/tmp/d/x.txt')
    l = await sbx.files.list('/tmp/d', { depth: 3 })
    assert.deepEqual(l.map((e) => e.path), ['/tmp/d/e', '/tmp/d/e/f', '/tmp/d/link', '/tmp/d/x.txt'])
    assert.equal(await sbx.files.exists('/tmp/d/x.txt'), true)
    assert.equal(await sbx.files.exists('/tmp/d/nope'), false)
    const info = await sbx.files.getInfo('/tmp/d/x.txt')
    assert.equal(info.size, 1)
    assert.equal(info.mode, 0o644)
    assert.ok(info.modifiedTime instanceof Date)
    const moved = await sbx.files.rename('/tmp/d/x.txt', '/tmp/elsewhere/y.txt')
    assert.equal(moved.path, '/tmp/elsewhere/y.txt')
    assert.equal(await sbx.files.read('/tmp/elsewhere/y.txt'), 'x')
    await sbx.files.remove('/tmp/d')
    assert.equal(await sbx.files.exists('/tmp/d'), false)
    await sbx.files.remove('/tmp/d') // missing is fine
  })

  test('file errors', T, async () => {
    await assert.rejects(sbx.files.read('/tmp/no/such/file'), NotFoundError)
    await assert.rejects(sbx.files.list('/tmp/no/such/dir'), NotFoundError)
    await assert.rejects(sbx.files.getInfo('/nope'), NotFoundError)
    await assert.rejects(sbx.files.rename('/tmp/none', '/tmp/other'), NotFoundError)
    await assert.rejects(sbx.files.read('/tmp'), SandboxError)
    await sbx.files.write('/tmp/plain', 'p')
    await assert.rejects(sbx.files.list('/tmp/plain'), SandboxError)
    await assert.rejects(sbx.files.write('/tmp', 'x'), SandboxError)
    await assert.rejects(sbx.files.read('/etc/passwd', { user: 'ghost' }), AuthenticationError)
  })

  test('watchDir reports creates, writes, renames and removes, recursively', T, async () => {
    await sbx.files.makeDir('/tmp/w')
    const events = []
    const h = await sbx.files.watchDir('/tmp/w', (e) => events.push(e), { recursive: true, timeoutMs: 0 })
    await sbx.files.write('/tmp/w/a.txt', 'one')
    await sbx.files.makeDir('/tmp/w/sub')
    await until('the new subdirectory to be watched', async () =>
      events.some((e) => e.name === 'sub' && e.type === FilesystemEventType.CREATE))
    await sbx.files.write('/tmp/w/sub/deep.txt', 'two')
    await sbx.files.rename('/tmp/w/a.txt', '/tmp/w/b.txt')
    await sbx.files.remove('/tmp/w/b.txt')
    await until('events', async () =>
      events.some((e) => e.name === 'b.txt' && e.type === FilesystemEventType.REMOVE))
    const has = (name, type) => events.some((e) => e.name === name && e.type === type)
    assert.ok(has('a.txt', FilesystemEventType.CREATE), JSON.stringify(events))
    assert.ok(has('a.txt', FilesystemEventType.WRITE))
    assert.ok(has('sub/deep.txt', FilesystemEventType.CREATE))
    assert.ok(has('sub/deep.txt', FilesystemEventType.WRITE))
    assert.ok(has('a.txt', FilesystemEventType.RENAME))
    assert.ok(has('b.txt', FilesystemEventType.CREATE))
    assert.ok(!events.some((e) => e.name.includes('.#')), 'no temporary files')
    await h.stop()
    await assert.rejects(sbx.files.watchDir('/tmp/not-here', () => {}), NotFoundError)
  })
})

describe('network', () => {
  const policy = async (id) =>
    (await fetch(`${API}/v1/sandboxes/${id}`, { headers: { Authorization: `Bearer ${KEY}` } }).then((r) => r.json())).network

  test('allowOut, denyOut, allowInternetAccess and updateNetwork map onto the egress policy', T, async () => {
    const sbx = await create({ network: { allowOut: ['api.example.com', '1.1.1.1'], denyOut: [ALL_TRAFFIC] } })
    const udp = { cidr: '1.1.1.1/32', proto: 'udp', ports: ['1-65535'] }
    assert.deepEqual(await policy(sbx.sandboxId), {
      allow: [{ host: 'api.example.com', ports: [80, 443] }, { cidr: '1.1.1.1/32', ports: ['1-65535'] }, udp],
      deny: [{ cidr: '0.0.0.0/0' }],
      precedence: 'allow',
    })
    let info = await sbx.getInfo()
    assert.equal(info.allowInternetAccess, false)
    assert.deepEqual(info.network.allowOut, ['api.example.com', '1.1.1.1/32'])
    assert.deepEqual(info.network.denyOut, ['0.0.0.0/0'])
    await sbx.updateNetwork({ allowInternetAccess: true, denyOut: ['8.8.8.0/24'] })
    info = await sbx.getInfo()
    assert.equal(info.allowInternetAccess, true)
    assert.deepEqual(info.network.denyOut, ['8.8.8.0/24'])
    assert.deepEqual(await policy(sbx.sandboxId), { allow: [], deny: [{ cidr: '8.8.8.0/24' }], precedence: 'allow', default: 'allow' })
    await Sandbox.updateNetwork(sbx.sandboxId, { denyOut: ({ allTraffic }) => [allTraffic] })
    assert.deepEqual(await policy(sbx.sandboxId), { allow: [], deny: [{ cidr: '0.0.0.0/0' }], precedence: 'allow' })
    const off = await create({ allowInternetAccess: false })
    assert.deepEqual(await policy(off.sandboxId), { allow: [], deny: [], precedence: 'allow' })
    await assert.rejects(Sandbox.updateNetwork('zzzzzzzzzzzzzzzz', {}), SandboxNotFoundError)
  })

  test("rules: a transform naming Secret.fill(name) grants space's credential name", T, async () => {
    const name = `e2bsdk${Date.now()}`
    const v1 = (path, init = {}) =>
      fetch(`${API}/v1${path}`, { ...init, headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' } })
    let r = await v1('/credentials', { method: 'POST', body: JSON.stringify({ name, value: 'sk-secret', hosts: ['api.example.com'] }) })
    assert.equal(r.status, 201)
    try {
      const sbx = await create({
        network: {
          allowOut: ({ rules }) => [...rules.keys()],
          denyOut: ({ allTraffic }) => [allTraffic],
          rules: { 'api.example.com': [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(name)}` } } }] },
        },
      })
      const grants = await v1(`/sandboxes/${sbx.sandboxId}/credentials`).then((x) => x.json())
      assert.deepEqual(grants.credentials.map((c) => c.name), [name])
      assert.deepEqual((await policy(sbx.sandboxId)).allow, [{ host: 'api.example.com', ports: [80, 443] }])
      const env = await sbx.commands.run('env')
      assert.ok(!env.stdout.includes('sk-secret'))
      await sbx.kill()
      made.delete(sbx.sandboxId)
    } finally {
      await v1(`/credentials/${name}`, { method: 'DELETE' })
    }
  })

  test('Secret: create, getInfo, list, update, exists, destroy; the value is never returned', T, async () => {
    const name = `E2bSdkSec${Date.now()}`
    const value = `sk-sdk-${Date.now()}`
    const s = await Secret.create(name, value)
    try {
      assert.equal(s.name, name.toLowerCase())
      assert.equal(s.version, 1)
      assert.deepEqual(s.metadata, {})
      assert.ok(s.createdAt instanceof Date && !Number.isNaN(s.createdAt.getTime()))
      assert.equal((await Secret.getInfo(s.secretId)).name, s.name)
      assert.equal((await Secret.getInfo(name)).secretId, s.secretId)
      const pages = Secret.list({ limit: 1 })
      const seen = []
      while (pages.hasNext) seen.push(...(await pages.nextItems()))
      assert.ok(seen.some((x) => x.secretId === s.secretId))
      assert.ok(!JSON.stringify(seen).includes(value))
      assert.equal((await Secret.update(s.name, `${value}-2`)).version, 2)
      assert.equal(await Secret.exists(s.name), true)
      await assert.rejects(Secret.create(name, 'again'), (e) => /409/.test(e.message) || e.name === 'SecretError')
      await assert.rejects(Secret.create('', 'x'), (e) => /400/.test(e.message))
    } finally {
      assert.equal(await Secret.destroy(s.secretId), true)
    }
    assert.equal(await Secret.exists(s.name), false)
    assert.equal(await Secret.destroy(s.name), false)
  })

  test('what space cannot map is refused, never dropped', T, async () => {
    await assert.rejects(create({ network: { denyOut: ['example.com'] } }),
      (e) => e instanceof SandboxError && /400: .*domain names are not supported for deny rules/.test(e.message))
    await assert.rejects(create({ network: { rules: { 'api.example.com': [{ transform: { headers: { 'X-Key': 'v' } } }] } } }),
      (e) => e instanceof SandboxError && /400: network\.rules/.test(e.message))
    await assert.rejects(create({ network: { maskRequestHost: 'localhost:${PORT}\r\nX-Evil: 1' } }),
      (e) => /400: network\.maskRequestHost/.test(e.message))
    const sbx = await create()
    await assert.rejects(sbx.updateNetwork({ egressProxy: { address: 'proxy.example.com:1080' } }),
      (e) => /400: network\.egressProxy is not supported/.test(e.message))
  })
})

describe('snapshots, fork and autoPause', () => {
  test('createSnapshot, listSnapshots, create from a snapshot by id and by name, deleteSnapshot', T, async () => {
    const sbx = await create({ envs: { FROM: 'parent' } })
    await sbx.files.write('/tmp/state.txt', 'before')
    const name = `snap-${Date.now()}`
    const snap = await sbx.createSnapshot({ name })
    assert.match(snap.snapshotId, /^[a-z0-9]{16}$/)
    assert.deepEqual(snap.names, [name])
    const anon = await Sandbox.createSnapshot(sbx.sandboxId)
    assert.deepEqual(anon.names, [])
    await sbx.files.write('/tmp/state.txt', 'after')

    const mine = await sbx.listSnapshots().nextItems()
    assert.deepEqual(mine.map((s) => s.snapshotId).sort(), [snap.snapshotId, anon.snapshotId].sort())
    const byName = await Sandbox.listSnapshots({ name }).nextItems()
    assert.deepEqual(byName, [{ snapshotId: snap.snapshotId, names: [name] }])
    const pager = Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 1 })
    const pages = [...await pager.nextItems()]
    assert.equal(pager.hasNext, true)
    pages.push(...await pager.nextItems())
    assert.equal(pager.hasNext, false)
    assert.deepEqual(pages.map((s) => s.snapshotId).sort(), mine.map((s) => s.snapshotId).sort())

    for (const ref of [snap.snapshotId, name]) {
      const child = await Sandbox.create(ref, { timeoutMs: 120_000 })
      made.add(child.sandboxId)
      assert.notEqual(child.sandboxId, sbx.sandboxId)
      assert.equal(await child.files.read('/tmp/state.txt'), 'before')
      assert.equal((await child.commands.run('echo $FROM')).stdout, 'parent\n')
      const info = await child.getInfo()
      assert.ok(Math.abs(info.endAt - Date.now() - 120_000) < 5_000)
      assert.equal(info.templateId, snap.snapshotId, 'made from the snapshot')
      await child.kill()
      made.delete(child.sandboxId)
    }
    // a create from a snapshot takes its own metadata, and envs laid over the snapshot's
    const own = await Sandbox.create(snap.snapshotId, {
      timeoutMs: 120_000, metadata: { from: 'snapshot' }, envs: { X: '1' },
    })
    made.add(own.sandboxId)
    assert.deepEqual((await own.getInfo()).metadata, { from: 'snapshot' })
    assert.equal((await own.commands.run('echo $FROM $X')).stdout, 'parent 1\n')
    const listed = await Sandbox.list({ query: { metadata: { from: 'snapshot' } } }).nextItems()
    assert.deepEqual(listed.map((s) => [s.sandboxId, s.templateId]), [[own.sandboxId, snap.snapshotId]])
    await own.kill()
    made.delete(own.sandboxId)
    await assert.rejects(Sandbox.create(snap.snapshotId, { envs: { 'NOT A NAME': '1' } }), /not a valid variable name/)

    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false, 'already gone')
    assert.equal(await Sandbox.deleteSnapshot('nosuchsnapshot00'), false)
    const left = await sbx.listSnapshots().nextItems()
    assert.deepEqual(left.map((s) => s.snapshotId), [anon.snapshotId])
    await assert.rejects(Sandbox.createSnapshot('nosuchsandbox000'), NotFoundError)
  })

  test('fork makes count sandboxes from the current files', T, async () => {
    const sbx = await create()
    await sbx.files.write('/tmp/fork.txt', 'forked')
    const forks = await sbx.fork({ count: 2, timeoutMs: 60_000 })
    assert.equal(forks.length, 2)
    for (const f of forks) {
      assert.ok(f instanceof Sandbox, String(f))
      made.add(f.sandboxId)
    }
    assert.notEqual(forks[0].sandboxId, forks[1].sandboxId)
    for (const f of forks) {
      assert.equal(await f.files.read('/tmp/fork.txt'), 'forked')
      const info = await f.getInfo()
      assert.ok(Math.abs(info.endAt - Date.now() - 60_000) < 5_000)
    }
    await forks[0].files.write('/tmp/fork.txt', 'changed')
    assert.equal(await forks[1].files.read('/tmp/fork.txt'), 'forked', 'forks are independent')
    assert.equal(await sbx.files.read('/tmp/fork.txt'), 'forked')
    for (const f of forks) {
      await f.kill()
      made.delete(f.sandboxId)
    }
    await assert.rejects(Sandbox.fork('nosuchsandbox000'), NotFoundError)
    await assert.rejects(sbx.fork({ count: 1000 }), /count/)
  })

  test("lifecycle onTimeout 'pause': paused when idle past the timeout, connect resumes", T, async () => {
    const sbx = await create({ timeoutMs: 3_000, lifecycle: { onTimeout: 'pause' } })
    await sbx.files.write('/tmp/kept.txt', 'kept')
    let info = await sbx.getInfo()
    assert.equal(info.lifecycle?.onTimeout ?? 'pause', 'pause')
    assert.ok(info.endAt - Date.now() < 4_000, `endAt ${info.endAt.toISOString()}`)
    await until('the idle pause', async () => (await sbx.getInfo()).state === 'paused', 30_000)
    await sbx.connect({ timeoutMs: 600_000 })
    info = await sbx.getInfo()
    assert.equal(info.state, 'running')
    assert.ok(info.endAt - Date.now() > 500_000, 'connect extended the window')
    assert.equal(await sbx.files.read('/tmp/kept.txt'), 'kept')
    assert.equal((await sbx.commands.run('echo back')).stdout, 'back\n')
  })

  test('lifecycle autoResume: commands, files and the filesystem service wake a paused sandbox', T, async () => {
    const sbx = await create({ lifecycle: { onTimeout: 'pause', autoResume: true } })
    assert.equal((await sbx.getInfo()).lifecycle?.autoResume, true)
    await sbx.files.write('/tmp/kept', 'kept')
    const bg = await sbx.commands.run('i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done', {
      background: true,
      timeoutMs: 0,
    })
    await sleep(300)
    // a command wakes it, and the process frozen with it goes on
    assert.equal(await sbx.pause(), true)
    assert.equal((await sbx.getInfo()).state, 'paused')
    const n1 = Number((await sbx.commands.run('cat /tmp/counter')).stdout)
    assert.equal((await sbx.getInfo()).state, 'running')
    await sleep(400)
    const n2 = Number((await sbx.commands.run('cat /tmp/counter')).stdout)
    assert.ok(n2 > n1, `the background loop runs again after the automatic resume (${n1} → ${n2})`)
    // a file read (plain HTTP /files) wakes it
    assert.equal(await sbx.pause(), true)
    assert.equal(await sbx.files.read('/tmp/kept'), 'kept')
    assert.equal((await sbx.getInfo()).state, 'running')
    // a filesystem.Filesystem call wakes it
    assert.equal(await sbx.pause(), true)
    assert.ok((await sbx.files.list('/tmp')).some((e) => e.name === 'kept'))
    assert.equal((await sbx.getInfo()).state, 'running')
    // and an upload
    assert.equal(await sbx.pause(), true)
    await sbx.files.write('/tmp/after', 'written while paused')
    assert.equal((await sbx.commands.run('cat /tmp/after')).stdout, 'written while paused')
    assert.ok((await sbx.commands.list()).some((p) => p.pid === bg.pid), 'the background loop is still listed')
    await sbx.commands.kill(bg.pid)
  })

  test('without autoResume a paused sandbox stays paused until connect', T, async () => {
    const sbx = await create({ lifecycle: { onTimeout: 'pause', autoResume: false } })
    assert.equal((await sbx.getInfo()).lifecycle?.autoResume, false)
    assert.equal(await sbx.pause(), true)
    await assert.rejects(sbx.commands.run('true'))
    await assert.rejects(sbx.files.read('/etc/hostname'))
    assert.equal((await sbx.getInfo()).state, 'paused', 'the refused calls did not wake it')
    await sbx.connect()
    assert.equal((await sbx.commands.run('echo up')).stdout, 'up\n')
  })

  test('autoResume after the idle pause of onTimeout pause: the next command wakes it', T, async () => {
    const sbx = await create({ timeoutMs: 3_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
    await sbx.files.write('/tmp/kept.txt', 'kept')
    await until('the idle pause', async () => (await sbx.getInfo()).state === 'paused', 30_000)
    const r = await sbx.commands.run('cat /tmp/kept.txt')
    assert.equal(r.stdout, 'kept')
    assert.equal((await sbx.getInfo()).state, 'running')
  })

  test('pause without memory and connect with onResume reboot: files kept, processes start afresh', T, async () => {
    const sbx = await create()
    await sbx.files.write('/tmp/kept', 'kept')
    const bg = await sbx.commands.run('sleep 1000', { background: true, timeoutMs: 0 })
    assert.equal(await sbx.pause({ keepMemory: false }), true)
    assert.equal((await sbx.getInfo()).state, 'paused')
    assert.equal(await sbx.pause(), false, 'already paused')
    const again = await Sandbox.connect(sbx.sandboxId)
    assert.equal(await again.files.read('/tmp/kept'), 'kept')
    assert.ok(!(await again.commands.list()).some((p) => p.pid === bg.pid), 'its processes ended')

    // a paused sandbox connected with onResume 'reboot' drops its memory too
    const bg2 = await again.commands.run('sleep 1000', { background: true, timeoutMs: 0 })
    assert.equal(await again.pause(), true)
    await Sandbox.connect(sbx.sandboxId, { onResume: 'reboot' })
    assert.equal((await again.getInfo()).state, 'running')
    assert.ok(!(await again.commands.list()).some((p) => p.pid === bg2.pid), 'reboot ended its processes')
    assert.equal(await again.files.read('/tmp/kept'), 'kept')
  })

  test("lifecycle onTimeout {action: 'pause', keepMemory: false}: the idle pause keeps files only", T, async () => {
    const sbx = await create({ timeoutMs: 3_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })
    assert.equal((await sbx.getInfo()).lifecycle?.onTimeout, 'pause')
    await sbx.files.write('/tmp/kept', 'kept')
    await until('the idle pause', async () => (await sbx.getInfo()).state === 'paused', 30_000)
    await sbx.connect({ timeoutMs: 600_000 })
    assert.equal(await sbx.files.read('/tmp/kept'), 'kept')
    // the SDK itself refuses autoResume with keepMemory false
    await assert.rejects(create({ lifecycle: { onTimeout: { action: 'pause', keepMemory: false }, autoResume: true } }),
      /autoResume/)
  })
})

describe('two sandboxes at once', () => {
  test('requests are routed by sandbox id', T, async () => {
    const [a, b] = await Promise.all([create({ envs: { WHO: 'a' } }), create({ envs: { WHO: 'b' } })])
    await Promise.all([a.files.write('/tmp/who', 'A'), b.files.write('/tmp/who', 'B')])
    const runs = await Promise.all(
      [a, b, a, b].map((s) => s.commands.run('sleep 0.3; echo $WHO $(cat /tmp/who) $(hostname)')),
    )
    assert.equal(runs[0].stdout, runs[2].stdout)
    assert.equal(runs[1].stdout, runs[3].stdout)
    assert.match(runs[0].stdout, /^a A /)
    assert.match(runs[1].stdout, /^b B /)
    const ha = await a.commands.run('sleep 600', { background: true })
    assert.equal((await b.commands.list()).some((p) => p.pid === ha.pid && p.args.includes('sleep 600')), false)
    assert.equal(await a.kill(), true)
    assert.equal(await b.isRunning(), true)
    assert.equal(await b.files.read('/tmp/who'), 'B')
    await assert.rejects(a.files.read('/tmp/who'))
    assert.equal(await b.kill(), true)
    made.delete(a.sandboxId)
    made.delete(b.sandboxId)
  })

  test("one sandbox's access token does not open another", T, async () => {
    const [a, b] = await Promise.all([create(), create()])
    const token = async (s) =>
      (await fetch(`${API}/sandboxes/${s.sandboxId}`, { headers: { 'X-API-KEY': KEY } }).then((r) => r.json()))
        .envdAccessToken
    const tokenA = await token(a)
    assert.match(tokenA, /^[0-9a-f]{64}$/)
    const own = await fetch(`${process.env.E2B_SANDBOX_URL}/health`, {
      headers: { 'E2b-Sandbox-Id': a.sandboxId, 'X-Access-Token': tokenA },
    })
    assert.equal(own.status, 204)
    const res = await fetch(`${process.env.E2B_SANDBOX_URL}/health`, {
      headers: { 'E2b-Sandbox-Id': b.sandboxId, 'X-Access-Token': tokenA },
    })
    assert.equal(res.status, 401)
    assert.equal((await res.json()).code, 401)
    const none = await fetch(`${process.env.E2B_SANDBOX_URL}/health`, { headers: { 'E2b-Sandbox-Id': b.sandboxId } })
    assert.equal(none.status, 401)
  })
})

describe('wire errors', () => {
  let sbx
  let headers
  before(async () => {
    sbx = await create()
    const info = await fetch(`${API}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-KEY': KEY } }).then((r) => r.json())
    headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': info.envdAccessToken }
  })
  const url = (p) => `${process.env.E2B_SANDBOX_URL}${p}`

  test('control plane: JSON errors with an integer code', T, async () => {
    let r = await fetch(`${API}/v2/sandboxes`, { method: 'POST', headers: { 'X-API-KEY': 'wrong' }, body: '{}' })
    assert.equal(r.status, 401)
    assert.deepEqual(Object.keys(await r.json()).sort(), ['code', 'message'])
    r = await fetch(`${API}/v2/sandboxes`, {
      method: 'POST',
      headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' },
      body: '{"templateID":"no-such-template"}',
    })
    assert.equal(r.status, 404)
    assert.equal((await r.json()).code, 404)
    r = await fetch(`${API}/v2/sandboxes`, { method: 'POST', headers: { 'X-API-KEY': KEY }, body: '{not json' })
    assert.equal(r.status, 400)
    assert.equal((await r.json()).code, 400)
    r = await fetch(`${API}/sandboxes/${sbx.sandboxId}/timeout`, {
      method: 'POST',
      headers: { 'X-API-KEY': KEY },
      body: '{"timeout":"soon"}',
    })
    assert.equal(r.status, 400)
    r = await fetch(`${API}/sandboxes/${sbx.sandboxId}/network`, { method: 'PUT', headers: { 'X-API-KEY': KEY }, body: '{"denyOut":["a.example"]}' })
    assert.equal(r.status, 400)
    assert.equal((await r.json()).code, 400)
    r = await fetch(`${API}/sandboxes/${sbx.sandboxId}/metrics`, { headers: { 'X-API-KEY': KEY } })
    const raw = await r.json()
    assert.ok(Array.isArray(raw) && raw.length > 0, JSON.stringify(raw))
    // the SDK's getMetrics() (and its start/end, unix seconds) answered from the worker's samples
    const ms = await sbx.getMetrics()
    assert.ok(ms.length > 0)
    assert.ok(ms[0].timestamp instanceof Date && !isNaN(ms[0].timestamp))
    assert.ok(ms[0].cpuCount >= 1 && ms[0].memUsed > 0 && ms[0].memTotal >= ms[0].memUsed, JSON.stringify(ms[0]))
    assert.ok(typeof ms[0].cpuUsedPct === 'number' && typeof ms[0].diskTotal === 'number')
    assert.deepEqual(await sbx.getMetrics({ start: new Date(Date.now() + 3600e3) }), [])
  })

  test('raw Connect stream: start, keepalives while idle, data, end, end-stream', T, async () => {
    const msg = new TextEncoder().encode(JSON.stringify({
      process: { cmd: '/bin/sh', args: ['-c', 'sleep 2.5; printf out; exit 3'] },
      stdin: false,
    }))
    const body = new Uint8Array(5 + msg.length)
    new DataView(body.buffer).setUint32(1, msg.length)
    body.set(msg, 5)
    const r = await fetch(url('/process.Process/Start'), {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/connect+json', 'Keepalive-Ping-Interval': '1',
        'Connect-Timeout-Ms': '20000' },
      body,
    })
    assert.equal(r.status, 200)
    assert.match(r.headers.get('content-type'), /^application\/connect\+json/)
    const buf = new Uint8Array(await r.arrayBuffer())
    const msgs = []
    for (let off = 0; off < buf.length;) {
      const len = new DataView(buf.buffer, buf.byteOffset + off + 1, 4).getUint32(0)
      msgs.push({ flags: buf[off], json: JSON.parse(new TextDecoder().decode(buf.subarray(off + 5, off + 5 + len))) })
      off += 5 + len
    }
    assert.ok(msgs[0].json.event.start.pid > 0)
    const keepalives = msgs.filter((m) => m.json.event && 'keepalive' in m.json.event).length
    assert.ok(keepalives >= 2, `keepalives: ${keepalives}`)
    const data = msgs.find((m) => m.json.event?.data)
    assert.equal(Buffer.from(data.json.event.data.stdout, 'base64').toString(), 'out')
    const end = msgs[msgs.length - 2].json.event.end
    assert.deepEqual(end, { exitCode: 3, exited: true, status: 'exit status 3', error: 'exit status 3' })
    assert.deepEqual(msgs[msgs.length - 1], { flags: 2, json: {} })
  })

  test("polling watchers (the Python SDK's watch_dir): create, get events, remove", T, async () => {
    const rpc = (m, body) =>
      fetch(url(`/filesystem.Filesystem/${m}`), {
        method: 'POST',
        headers: { ...headers, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      })
    await sbx.files.makeDir('/tmp/pw')
    let r = await rpc('CreateWatcher', { path: '/tmp/pw', recursive: true })
    assert.equal(r.status, 200)
    const { watcherId } = await r.json()
    assert.match(watcherId, /^w[a-z0-9]+$/)
    await sbx.files.write('/tmp/pw/a.txt', 'a')
    const events = []
    await until('polled events', async () => {
      const got = await rpc('GetWatcherEvents', { watcherId }).then((x) => x.json())
      events.push(...got.events)
      return events.some((e) => e.name === 'a.txt' && e.type === 'EVENT_TYPE_WRITE')
    })
    assert.ok(events.some((e) => e.name === 'a.txt' && e.type === 'EVENT_TYPE_CREATE'), JSON.stringify(events))
    r = await rpc('RemoveWatcher', { watcherId })
    assert.deepEqual(await r.json(), {})
    r = await rpc('GetWatcherEvents', { watcherId })
    assert.equal(r.status, 404)
    assert.equal((await r.json()).code, 'not_found')
    r = await rpc('CreateWatcher', { path: '/tmp/pw/a.txt' })
    assert.equal(r.status, 400)
  })

  test('envd: unknown sandboxes are 502, bad envelopes and methods are Connect errors', T, async () => {
    let r = await fetch(url('/health'), { headers: { 'E2b-Sandbox-Id': 'zzzzzzzzzzzzzzzz', 'X-Access-Token': 'x' } })
    assert.equal(r.status, 401, 'the token is checked first')
    r = await fetch(url('/process.Process/List'), {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: '{"unknown":1}',
    })
    assert.equal(r.status, 200, 'unknown fields are ignored')
    r = await fetch(url('/process.Process/Nope'), { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: '{}' })
    assert.equal(r.status, 501)
    assert.equal((await r.json()).code, 'unimplemented')
    r = await fetch(url('/filesystem.Filesystem/Stat'), { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: '[1' })
    assert.equal(r.status, 400)
    assert.equal((await r.json()).code, 'invalid_argument')
    r = await fetch(url('/filesystem.Filesystem/Stat'), { method: 'POST', headers: { ...headers, 'Content-Type': 'application/proto' }, body: 'x' })
    assert.equal(r.status, 415)
    // a streaming call whose body is not one envelope: 200 and an end-stream error
    r = await fetch(url('/process.Process/Start'), {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/connect+json' },
      body: new Uint8Array([0, 0, 0, 0, 50, 123]),
    })
    assert.equal(r.status, 200)
    const buf = new Uint8Array(await r.arrayBuffer())
    assert.equal(buf[0], 2, 'end-stream flag')
    const end = JSON.parse(new TextDecoder().decode(buf.subarray(5)))
    assert.equal(end.error.code, 'invalid_argument')
    r = await fetch(url('/files?path=/tmp/x'), { method: 'POST', headers: { ...headers, 'Content-Type': 'text/plain' }, body: 'x' })
    assert.equal(r.status, 400)
    assert.equal((await r.json()).code, 400)
    r = await fetch(url('/files?path=/tmp/x'), { method: 'POST', headers: { ...headers, 'Content-Type': 'multipart/form-data; boundary=zz' }, body: '--zz\r\nbroken' })
    assert.equal(r.status, 400)
    r = await fetch(url('/files?path=/nope/x'), { headers })
    assert.equal(r.status, 404)
    assert.match((await r.json()).message, /does not exist/)
    r = await fetch(url('/files'), { headers })
    assert.equal(r.status, 400)
    for (const bad of ['%00', '', '/tmp/%00x']) {
      r = await fetch(url(`/files?path=${bad}`), { headers })
      assert.equal(r.status, 400, `path '${bad}'`)
      assert.equal((await r.json()).code, 400)
    }
    r = await fetch(url('/files?path=/tmp/gz'), {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' },
      body: 'x',
    })
    assert.equal(r.status, 400)
    assert.match((await r.json()).message, /gzip/)
    r = await fetch(url('/files?path=/tmp/two'), {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'multipart/form-data; boundary=b' },
      body: '--b\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\n1\r\n' +
        '--b\r\nContent-Disposition: form-data; name="file"; filename="b"\r\n\r\n2\r\n--b--\r\n',
    })
    assert.equal(r.status, 400, 'two parts to the same ?path=')
    r = await fetch(url('/process.Process/SendSignal'), {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ process: { pid: 1 }, signal: 'SIGNAL_SIGHUP' }),
    })
    assert.equal(r.status, 400)
    r = await fetch(url('/process.Process/SendInput'), {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ process: { pid: 1 }, input: { stdin: '!!not base64' } }),
    })
    assert.equal(r.status, 400)
    assert.equal((await r.json()).code, 'invalid_argument')

    await sbx.kill()
    made.delete(sbx.sandboxId)
    r = await fetch(url('/health'), { headers })
    assert.equal(r.status, 502)
    assert.deepEqual(await r.json(), { sandboxId: sbx.sandboxId, message: 'The sandbox was not found', code: 502 })
    r = await fetch(url('/process.Process/List'), { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' }, body: '{}' })
    assert.equal(r.status, 502)
  })
})

describe('volumes', () => {
  test('Volume create, list, getInfo, volumeMounts on create, destroy', T, async () => {
    const name = `sdkvol-${Date.now()}`
    const vol = await Volume.create(name)
    assert.equal(vol.name, name)
    assert.match(vol.volumeId, /^[a-z][a-z0-9]{15}$/)
    const listed = await Volume.list()
    assert.ok(listed.some((v) => v.volumeId === vol.volumeId && v.name === name), JSON.stringify(listed))
    const info = await Volume.getInfo(vol.volumeId)
    assert.equal(info.name, name)

    const sbx = await create({ volumeMounts: { '/data': vol } })
    await sbx.commands.run('echo kept > /data/f')
    // one writer at a time: a second sandbox that mounts it fails
    await assert.rejects(create({ volumeMounts: { '/data': name } }))
    // in use: not destroyed
    await assert.rejects(Volume.destroy(vol.volumeId))
    await sbx.kill()
    made.delete(sbx.sandboxId)

    const again = await create({ volumeMounts: { '/mnt/v': name } })
    assert.equal((await again.commands.run('cat /mnt/v/f')).stdout, 'kept\n')
    await again.kill()
    made.delete(again.sandboxId)

    assert.equal(await Volume.destroy(vol.volumeId), true)
    assert.equal(await Volume.destroy(vol.volumeId), false)
    await assert.rejects(Volume.getInfo(vol.volumeId))
  })

  test('volume content: write, read, list, getInfo, makeDir, remove; a token opens its own volume only', T, async () => {
    const vol = await Volume.create(`sdkvc-${Date.now()}`)
    const other = await Volume.create(`sdkvc2-${Date.now()}`)
    try {
      const w = await vol.writeFile('/notes/a.txt', 'hello volume')
      assert.equal(w.name, 'a.txt')
      assert.equal(w.type, 'file')
      assert.equal(w.size, 12)
      assert.equal(await vol.readFile('/notes/a.txt'), 'hello volume')
      const bytes = await vol.readFile('/notes/a.txt', { format: 'bytes' })
      assert.equal(bytes.length, 12)
      const d = await vol.makeDir('/empty')
      assert.equal(d.type, 'directory')
      const top = (await vol.list('/')).map((e) => `${e.name}:${e.type}`).sort()
      assert.deepEqual(top, ['empty:directory', 'notes:directory'])
      const info = await vol.getInfo('/notes/a.txt')
      assert.equal(info.size, 12)
      assert.equal(info.path, '/notes/a.txt')
      assert.ok(info.mtime instanceof Date && !isNaN(info.mtime))
      assert.equal(await vol.exists('/nope'), false)
      await assert.rejects(vol.readFile('/nope'))
      await assert.rejects(vol.readFile('/../etc/passwd'))

      // a sandbox mounting it sees the file
      const sbx = await create({ volumeMounts: { '/data': vol } })
      assert.equal((await sbx.commands.run('cat /data/notes/a.txt')).stdout, 'hello volume')
      await sbx.kill()
      made.delete(sbx.sandboxId)

      // the other volume's token does not open this one
      const wrong = new Volume(vol.volumeId, vol.name, other.token, undefined, false, undefined)
      await assert.rejects(wrong.readFile('/notes/a.txt'))
      const forged = new Volume(vol.volumeId, vol.name, `${vol.token.split('.')[0]}.${'0'.repeat(64)}`, undefined,
        false, undefined)
      await assert.rejects(forged.readFile('/notes/a.txt'))

      await vol.remove('/notes/a.txt')
      assert.equal(await vol.exists('/notes/a.txt'), false)
    } finally {
      await Volume.destroy(vol.volumeId)
      await Volume.destroy(other.volumeId)
    }
  })
})
