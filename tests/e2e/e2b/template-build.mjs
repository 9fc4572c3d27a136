// SPDX-License-Identifier: MIT
// Template.build() / buildInBackground() / getBuildStatus() of the E2B JS SDK
// (npm e2b, unmodified) against a real spaced. Run by
// tests/e2e/test_e2b_template_build.py with E2B_API_URL, E2B_SANDBOX_URL,
// E2B_API_KEY and TPL_NAME set; prints one JSON object of what it saw.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { Sandbox, Template } from 'e2b'

const name = process.env.TPL_NAME
const out = {}
const ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'space-tpl-'))
fs.writeFileSync(path.join(ctx, 'hello.txt'), 'hello from the context\n')

try {
  const logs = []
  const tpl = Template({ fileContextPath: ctx })
    .fromTemplate('base')
    .copy('hello.txt', '/app/hello.txt', { user: 'user' }) // a name in the image's /etc/passwd
    .setEnvs({ GREETING: 'hi there' })
    .setWorkdir('/app')
    .runCmd('echo "built $GREETING" > /app/built.txt && cat hello.txt')
    .setStartCmd('echo started > /tmp/started; exec sleep 100000', 'test -f /tmp/started')
  const info = await Template.build(tpl, name, { onBuildLogs: (l) => logs.push(l.message) })
  out.build = { templateId: info.templateId, buildId: info.buildId, logs }
  out.exists = await Template.exists(name)

  const sbx = await Sandbox.create(name)
  // the image's workdir and env are the commands' defaults
  const r = await sbx.commands.run('cat /app/built.txt /app/hello.txt /tmp/started; pwd; echo "env=$GREETING"; stat -c %u:%g /app/hello.txt')
  out.run = { stdout: r.stdout, exitCode: r.exitCode }
  await sbx.kill()

  // a RUN that fails: an error with the step's output; the template built before stays
  const failLogs = []
  const bad = Template({ fileContextPath: ctx })
    .fromTemplate('base')
    .runCmd('echo ok-step')
    .runCmd('echo oops-output; exit 3')
  try {
    await Template.build(bad, name, { onBuildLogs: (l) => failLogs.push(l.message) })
    out.fail = { threw: false }
  } catch (e) {
    out.fail = { threw: true, name: e.name, message: e.message, logs: failLogs, stack: String(e.stack || '') }
  }
  const again = await Sandbox.create(name)
  const r2 = await again.commands.run('cat /app/built.txt')
  out.after_fail = r2.stdout
  await again.kill()

  // in the background, then polled
  const bg = Template().fromTemplate(name).runCmd('echo second > /app/second.txt')
  const data = await Template.buildInBackground(bg, name + '-bg')
  let st
  for (let i = 0; i < 600; i++) {
    st = await Template.getBuildStatus(data, { logsOffset: 0 })
    if (st.status === 'ready' || st.status === 'error') break
    await new Promise((res) => setTimeout(res, 100))
  }
  const tail = await Template.getBuildStatus(data, { logsOffset: st.logEntries.length })
  out.background = {
    status: st.status, entries: st.logEntries.length, tail: tail.logEntries.length, buildId: st.buildID,
  }

  // the layer cache, and skipCache() past it
  const cacheLogs = async (t) => {
    const l = []
    await Template.build(t, name + '-c', { onBuildLogs: (e) => l.push(e.message) })
    return l.filter((m) => m.includes('RUN echo cache-probe'))
  }
  await cacheLogs(Template().fromTemplate('base').runCmd('echo cache-probe'))
  out.cache = {
    again: await cacheLogs(Template().fromTemplate('base').runCmd('echo cache-probe')),
    skipped: await cacheLogs(Template().skipCache().fromTemplate('base').runCmd('echo cache-probe')),
  }
} finally {
  fs.rmSync(ctx, { recursive: true, force: true })
}
console.log(JSON.stringify(out))
