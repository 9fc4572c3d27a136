// SPDX-License-Identifier: MIT
// The public surface of the installed E2B JS SDK, as JSON on stdout, for
// tests/e2e/test_e2b_compat.py (which checks docs/e2b-compat.md against it):
//   methods:   "Sandbox.create" (static), "sandbox.kill" (of an instance),
//              "sandbox.files.read" (of its parts: files, commands, pty, git),
//              "Template.build", "template.fromImage", "Volume.create", ...
//   endpoints: "GET /v2/sandboxes", ... (every REST call the SDK's API client makes)
// It needs a reachable server for one sandbox (its parts are made per
// instance): E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

import * as e2b from 'e2b'

const CLASSES = ['Sandbox', 'Template', 'Volume', 'Secret']
const PARTS = ['files', 'commands', 'pty', 'git']

function own(obj) {
  return Object.getOwnPropertyNames(obj).filter(
    (n) => n !== 'constructor' && !n.startsWith('_') && typeof Object.getOwnPropertyDescriptor(obj, n).value === 'function')
}

// Methods of a prototype chain up to (not including) Object.prototype.
function chain(proto) {
  const out = new Set()
  for (let p = proto; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) for (const n of own(p)) out.add(n)
  return [...out]
}

const methods = new Set()
for (const name of CLASSES) {
  const cls = e2b[name]
  if (typeof cls !== 'function') continue
  for (const n of own(cls)) methods.add(`${name}.${n}`)
  const lower = name[0].toLowerCase() + name.slice(1)
  for (const n of chain(cls.prototype)) methods.add(`${lower}.${n}`)
}

const sbx = await e2b.Sandbox.create('base', { timeoutMs: 120_000 })
try {
  for (const part of PARTS) {
    const obj = sbx[part]
    if (!obj) continue
    for (const n of chain(Object.getPrototypeOf(obj))) methods.add(`sandbox.${part}.${n}`)
  }
} finally {
  await sbx.kill()
}

const require = createRequire(import.meta.url)
const dist = join(dirname(require.resolve('e2b')), 'index.mjs')
const src = readFileSync(dist, 'utf8')
const endpoints = new Set()
for (const m of src.matchAll(/\.(GET|POST|PUT|PATCH|DELETE)\("(\/[^"]*)"/g)) endpoints.add(`${m[1]} ${m[2]}`)

const version = JSON.parse(readFileSync(join(dirname(require.resolve('e2b')), '..', 'package.json'), 'utf8')).version
console.log(JSON.stringify({ version, methods: [...methods].sort(), endpoints: [...endpoints].sort() }))
