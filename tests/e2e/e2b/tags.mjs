// SPDX-License-Identifier: MIT
// The E2B JS SDK's template tags (Template.assignTags / removeTags / getTags)
// against a real spaced, and a sandbox made from NAME:TAG. Run by
// tests/e2e/test_template_versions.py with E2B_API_URL, E2B_SANDBOX_URL,
// E2B_API_KEY (an admin key) and TEMPLATE (a template with versions 1 and 2).
import assert from 'node:assert/strict'

import { Sandbox, Template } from 'e2b'

const name = process.env.TEMPLATE

// version 1 is kept by the tag "hold" the test set
const assigned = await Template.assignTags(`${name}@v1`, ['prod', 'stable'])
assert.deepEqual(assigned.tags, ['prod', 'stable'])
assert.equal(typeof assigned.buildId, 'string')
assert.deepEqual((await Template.assignTags(`${name}:hold`, 'held')).buildId, assigned.buildId)
await Template.removeTags(name, ['hold', 'held'])

let tags = await Template.getTags(name)
const byTag = Object.fromEntries(tags.map((t) => [t.tag, t]))
assert.deepEqual(Object.keys(byTag).sort(), ['latest', 'prod', 'stable'])
assert.equal(byTag.prod.buildId, assigned.buildId)
assert.notEqual(byTag.latest.buildId, assigned.buildId)
assert.ok(byTag.prod.createdAt instanceof Date && !isNaN(byTag.prod.createdAt))

// a tag set again moves: prod to the newest version
const moved = await Template.assignTags(`${name}:latest`, 'prod')
assert.equal(moved.buildId, byTag.latest.buildId)

const sbx = await Sandbox.create(`${name}:stable`, { timeoutMs: 60_000 })
try {
  const out = await sbx.commands.run('cat /etc/space-version')
  assert.equal(out.stdout, 'one\n')
} finally {
  await sbx.kill()
}

await Template.removeTags(name, ['prod', 'stable'])
tags = await Template.getTags(name)
assert.deepEqual(tags.map((t) => t.tag), ['latest'])

await assert.rejects(Template.assignTags(`${name}:nope`, 'x'))
await assert.rejects(Template.removeTags(name, 'nope'))
await assert.rejects(Template.getTags('no-such-template'))
console.log('ok')
