#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// E2B SDK against spaced: Sandbox.create() → first output of
// commands.run('echo hi'), p50/p90 over N runs (each sandbox killed after it,
// not timed), beside the same path through the plain /v1 API in the same
// run. Uses the SDK installed for the e2e tests (npm ci --prefix
// tests/e2e/e2b). Not a test: it reports.
//
// The configuration is part of the figures: when the server keeps a warm
// pool for the template (config warm_pool, seen in /metrics), every create
// (SDK and /v1 alike) first waits, untimed, until a warm sandbox is ready, so
// the figures are those of warm creates; without one they are cold creates.
// --wait-ready N waits for N ready ones instead (the pool's size: no refill
// is then in flight; a create arriving while the worker makes a refill waits
// behind it).
// The output says which, and how many creates a warm sandbox served (from
// each sandbox's sandbox.created event).
//
//   E2B_API_URL=http://127.0.0.1:PORT E2B_SANDBOX_URL=http://127.0.0.1:PORT \
//   E2B_API_KEY=<space api key> node bench/e2b-bench.mjs [--runs 100] [--template base]
//
// or, with a private spaced of the release build: python3 bench/e2b.py --warm 0|N
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { performance } from 'node:perf_hooks'

const here = dirname(fileURLToPath(import.meta.url))
const sdk = join(here, '..', 'tests', 'e2e', 'e2b', 'node_modules', 'e2b', 'dist', 'index.mjs')
if (!existsSync(sdk)) {
  console.error(`the e2b SDK is not installed: npm ci --prefix ${join(here, '..', 'tests', 'e2e', 'e2b')}`)
  process.exit(2)
}
for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[v]) {
    console.error(`${v} must be set (see the comment at the top of ${fileURLToPath(import.meta.url)})`)
    process.exit(2)
  }
}
const { Sandbox } = await import(pathToFileURL(sdk).href)

const args = process.argv.slice(2)
const opt = (name, def) => {
  const i = args.indexOf(name)
  return i >= 0 && args[i + 1] ? args[i + 1] : def
}
const runs = Number(opt('--runs', '100'))
const template = opt('--template', 'base')
// with a warm pool: wait for this many ready sandboxes before each create (the pool's size: no refill in
// flight, which the single-threaded worker would make the create wait behind); default 1
const waitReady = Number(opt('--wait-ready', '1'))

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  const k = ((s.length - 1) * p) / 100
  const lo = Math.floor(k)
  const hi = Math.min(lo + 1, s.length - 1)
  return s[lo] + (s[hi] - s[lo]) * (k - lo)
}

// The same path through the plain space API, interleaved with the SDK runs
// (the machine's load then weighs on both alike): POST /v1/sandboxes, then
// POST /v1/sandboxes/{id}/exec of /bin/bash -l -c 'echo hi' (as the SDK runs
// commands) until its first stdout event.
const API = process.env.E2B_API_URL
const H = { Authorization: `Bearer ${process.env.E2B_API_KEY}`, 'Content-Type': 'application/json' }

// Warm sandboxes ready for the template; null: the server keeps no warm pool for it.
async function warmReady() {
  const r = await fetch(`${API}/metrics`)
  const text = await r.text()
  const m = text.match(new RegExp(`^space_warm_pool_size\\{template="${template}"\\} (\\d+)$`, 'm'))
  return m ? Number(m[1]) : null
}
const warmPool = (await warmReady()) !== null
async function waitWarm() {
  if (!warmPool) return
  for (let i = 0; i < 1200; i++) {
    if ((await warmReady()) >= waitReady) return
    await new Promise((res) => setTimeout(res, 50))
  }
  throw new Error('no warm sandbox became ready in 60 s')
}
// Whether a sandbox came from the warm pool (its sandbox.created event says so).
async function servedWarm(id) {
  const r = await fetch(`${API}/v1/events?sandbox=${id}&type=sandbox.created`, { headers: H })
  const ev = (await r.json()).events || []
  return ev.some((e) => e.data && e.data.warm_pool === true)
}
const served = { sdk: 0, v1: 0 }

async function v1Once() {
  await waitWarm()
  const t0 = performance.now()
  let r = await fetch(`${API}/v1/sandboxes`, { method: 'POST', headers: H, body: JSON.stringify({ template }) })
  if (r.status !== 201) throw new Error(`/v1 create: ${r.status} ${await r.text()}`)
  const id = (await r.json()).id
  const t1 = performance.now()
  r = await fetch(`${API}/v1/sandboxes/${id}/exec`, {
    method: 'POST', headers: H, body: JSON.stringify({ cmd: ['/bin/bash', '-l', '-c', 'echo hi'] }),
  })
  if (r.status !== 200) throw new Error(`/v1 exec: ${r.status} ${await r.text()}`)
  let tFirst = 0
  let buf = ''
  const dec = new TextDecoder()
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true })
    if (!tFirst && buf.includes('"type":"stdout"')) tFirst = performance.now()
  }
  if (!tFirst) throw new Error('/v1: no output from echo hi')
  if (await servedWarm(id)) served.v1++
  r = await fetch(`${API}/v1/sandboxes/${id}`, { method: 'DELETE', headers: H })
  await r.arrayBuffer()
  return [t1 - t0, tFirst - t1, tFirst - t0]
}
const v1 = { create: [], firstOutput: [], total: [] }

const total = []
const create = []
const firstOutput = []
for (let i = 0; i < runs; i++) {
  const [c, f, t] = await v1Once()
  v1.create.push(c)
  v1.firstOutput.push(f)
  v1.total.push(t)
  await waitWarm()
  const t0 = performance.now()
  const sbx = await Sandbox.create(template)
  const t1 = performance.now()
  let tFirst = 0
  await sbx.commands.run('echo hi', {
    onStdout: () => {
      if (!tFirst) tFirst = performance.now()
    },
  })
  if (!tFirst) throw new Error('no output from echo hi')
  create.push(t1 - t0)
  firstOutput.push(tFirst - t1)
  total.push(tFirst - t0)
  if (await servedWarm(sbx.sandboxId)) served.sdk++
  await sbx.kill()
}

const row = (name, xs) =>
  console.log(`${name.padEnd(38)} p50 ${pct(xs, 50).toFixed(1).padStart(7)} ms   p90 ${pct(xs, 90).toFixed(1).padStart(7)} ms`)
console.log(`E2B SDK against ${process.env.E2B_API_URL}, template ${template}, ${runs} runs`)
console.log(warmPool
  ? `warm pool for ${template}: on (each create waited, untimed, until ${waitReady} warm sandbox(es) were ready` +
    `${waitReady > 1 ? ': no refill in flight' : ''}); ` +
    `served warm: SDK ${served.sdk}/${runs}, /v1 ${served.v1}/${runs}`
  : `warm pool for ${template}: off (every create is a cold create)`)
row('Sandbox.create', create)
row("commands.run('echo hi') → first output", firstOutput)
row('create → first output', total)
console.log('the same through the space API (/v1), interleaved:')
row('POST /v1/sandboxes', v1.create)
row('exec bash -l -c echo hi → first output', v1.firstOutput)
row('create → first output', v1.total)
