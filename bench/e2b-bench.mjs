#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// E2B SDK against spaced: Sandbox.create() → first output of
// commands.run('echo hi'), p50/p90 over N runs (each sandbox killed after it,
// not timed). Uses the SDK installed for the e2e tests (npm ci --prefix
// tests/e2e/e2b). Not a test: it reports.
//
//   E2B_API_URL=http://127.0.0.1:PORT E2B_SANDBOX_URL=http://127.0.0.1:PORT \
//   E2B_API_KEY=<space api key> node bench/e2b-bench.mjs [--runs 100] [--template base]
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

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  const k = ((s.length - 1) * p) / 100
  const lo = Math.floor(k)
  const hi = Math.min(lo + 1, s.length - 1)
  return s[lo] + (s[hi] - s[lo]) * (k - lo)
}

const total = []
const create = []
const firstOutput = []
for (let i = 0; i < runs; i++) {
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
  await sbx.kill()
}

const row = (name, xs) =>
  console.log(`${name.padEnd(38)} p50 ${pct(xs, 50).toFixed(1).padStart(7)} ms   p90 ${pct(xs, 90).toFixed(1).padStart(7)} ms`)
console.log(`E2B SDK against ${process.env.E2B_API_URL}, template ${template}, ${runs} runs`)
row('Sandbox.create', create)
row("commands.run('echo hi') → first output", firstOutput)
row('create → first output', total)
