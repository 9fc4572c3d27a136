// SPDX-License-Identifier: MIT
// Drives the web dashboard in Debian's headless chromium (playwright-core):
// a wrong key, the first load, a tenant's walk through (create a sandbox,
// open it, a command in its terminal, a file, a port opened in the browser,
// delete it, a volume) and what an admin
// and a non-admin see. Prints one JSON line of what it saw; exits non-zero on
// a failure (with a screenshot of the page as it was).
// Run by tests/e2e/test_dashboard.py:
//   node drive.mjs URL TENANT_KEY ADMIN_KEY OUT_DIR
import assert from 'node:assert/strict'
import path from 'node:path'

import { chromium } from 'playwright-core'

const [url, userKey, adminKey, out] = process.argv.slice(2)
const ui = `${url}/ui/`
const seen = { screenshots: [], console: [] }
const STEP_MSEC = 60000

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
})
let page = null

async function shot (name) {
  const file = path.join(out, `${name}.png`)
  await page.screenshot({ path: file, fullPage: true })
  seen.screenshots.push(file)
}

// A fresh tab (no cache, empty sessionStorage) whose console errors we keep.
async function fresh (key) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  if (key) await ctx.addInitScript((k) => sessionStorage.setItem('space.key', k), key)
  page = await ctx.newPage()
  page.setDefaultTimeout(STEP_MSEC)
  page.on('console', (m) => { if (m.type() === 'error') seen.console.push(m.text()) })
  page.on('pageerror', (e) => seen.console.push(`pageerror: ${e.message}`))
  page.on('dialog', (d) => d.type() === 'prompt' ? d.accept(d.defaultValue()) : d.accept())
  return ctx
}

async function login (key) {
  await page.goto(ui)
  await page.fill('#key', key)
  await page.click('#login button[type=submit]')
}

const rowOf = (id) => `tr[data-id="${id}"]`

try {
  // a wrong key: an error, no data
  let ctx = await fresh()
  await login('not-a-key')
  await page.waitForFunction(() => document.getElementById('login-error').textContent.includes('refused'))
  assert.equal(await page.isVisible('#nav'), false)
  await shot('wrong-key')
  await ctx.close()
  seen.console = [] // the refused key's 401 is the one error expected

  // the first load with a key: navigation start to the sandbox list rendered
  ctx = await fresh(userKey)
  await page.goto(ui)
  await page.waitForSelector('[data-loaded]')
  seen.load = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0]
    return {
      list_rendered_ms: performance.getEntriesByName('space:list-rendered')[0].startTime,
      dom_content_loaded_ms: nav.domContentLoadedEventEnd,
      transferred_bytes: performance.getEntriesByType('resource').reduce((a, r) => a + r.transferSize, nav.transferSize),
    }
  })
  await ctx.close()

  // a tenant's key: the walk through
  ctx = await fresh()
  await login(userKey)
  await page.waitForSelector('[data-loaded]')
  assert.equal(await page.isVisible('#nav a[href="#/tenants"]'), false, 'a tenant key sees no tenants')
  assert.equal(await page.isVisible('#nav a[href="#/keys"]'), false, 'a tenant key sees no keys')
  const before = await page.$$eval('tr[data-id]', (rows) => rows.map((r) => r.dataset.id))
  await page.waitForSelector('#create select option[value="base"]', { state: 'attached' })
  await page.click('#create button[type=submit]')
  const id = await page.waitForFunction((old) => {
    const ids = [...document.querySelectorAll('tr[data-id]')].map((r) => r.dataset.id).filter((i) => !old.includes(i))
    return ids.length ? ids[0] : null
  }, before, { timeout: 180000 }).then((h) => h.jsonValue())
  seen.created = id
  await page.waitForSelector(`${rowOf(id)} .state.running`)
  await shot('list')

  await page.click(`${rowOf(id)} a`)
  await page.waitForSelector('.sandbox-head h1')
  assert.match(await page.textContent('.sandbox-head h1'), new RegExp(id))
  const head = await page.textContent('.sandbox-head')
  assert.match(head, /Template\s*base/)
  assert.doesNotMatch(head, /\[object/)
  await page.click('#terminal-open')
  await page.waitForSelector('.terminal[data-exec]')
  await page.waitForSelector('.xterm-rows')
  await page.click('.terminal')
  await page.keyboard.type('echo dash-$((6*7)) > /tmp/dash.txt; cat /tmp/dash.txt\n')
  // the command line shows dash-$((6*7)); only its output says dash-42
  await page.waitForFunction(() => document.querySelector('.xterm-rows').textContent.includes('dash-42'))
  seen.terminal = true
  await shot('terminal')

  await page.fill('input[name=path]', '/tmp')
  await page.click('form:has(input[name=path]) button')
  await page.click('tr[data-name="dash.txt"] a')
  await page.waitForFunction(() => document.querySelector('pre.file').textContent.includes('dash-42'))
  seen.file = true
  // the shell is one of its processes
  await page.waitForFunction(() => [...document.querySelectorAll('section td.mono')].some((td) => /sh -c/.test(td.textContent)))
  seen.process = true
  // a refused connection (no egress by default) shows among its network decisions, live
  await page.click('.terminal')
  await page.keyboard.type('curl -s -m 5 http://denied.example/; echo net-$((1+1))\n')
  await page.waitForFunction(() => document.querySelector('.xterm-rows').textContent.includes('net-2'))
  await page.waitForFunction(() => [...document.querySelectorAll('.decision.deny')].some((d) =>
    d.closest('tr').textContent.includes('denied.example')))
  seen.network = true
  // a server inside, opened in the browser through the port's one-time link
  await page.click('.terminal')
  await page.keyboard.type('mkdir -p /srv && echo port-$((3*4)) > /srv/index.html && httpd -p 8000 -h /srv; echo srv-$((2+3))\n')
  await page.waitForFunction(() => document.querySelector('.xterm-rows').textContent.includes('srv-5'))
  await page.fill('#port-open input[name=port]', '8000')
  await page.click('#port-open button')
  await page.waitForSelector('a.port-link')
  const url = await page.getAttribute('[data-url]', 'data-url')
  assert.match(url, new RegExp(`^http://8000-${id}\\.localhost:\\d+/$`))
  const link = await page.getAttribute('a.port-link', 'href')
  const tab = await ctx.newPage()
  await tab.goto(link)
  assert.match(await tab.textContent('body'), /port-12/)
  // the link is spent: a second tab of another browser gets no way in with it
  const other = await browser.newContext()
  const stranger = await other.newPage()
  const refused = await stranger.goto(link)
  assert.equal(refused.status(), 403) // spent
  assert.doesNotMatch(await stranger.textContent('body'), /port-12/)
  await other.close()
  await tab.close()
  seen.port = true
  // a checkpoint from the page shows in its tree
  await page.waitForSelector('ul.tree')
  await page.click('.sandbox-head button:text("Checkpoint")')
  await page.waitForSelector('ul.tree ul li .mono')
  seen.checkpoint = true
  await shot('sandbox')

  await page.click('.sandbox-head button.danger')
  await page.waitForFunction(() => location.hash === '#/')
  await page.waitForSelector('[data-loaded]')
  await page.waitForFunction((sel) => !document.querySelector(sel), rowOf(id))
  seen.deleted = true
  await page.click('#nav a[href="#/events"]')
  await page.waitForFunction((sid) => [...document.querySelectorAll('tr[data-seq]')].some((r) =>
    r.textContent.includes('sandbox.deleted') && r.textContent.includes(sid)), id)
  seen.events = true
  await shot('events')
  await page.click('#nav a[href="#/templates"]')
  await page.waitForFunction(() => [...document.querySelectorAll('td.mono')].some((td) => td.textContent === 'base'))
  assert.match(await page.textContent('tr[data-template="base"]'), /default/) // its runtime: the default
  await shot('templates')
  // a volume: made, listed, deleted
  await page.click('#nav a[href="#/volumes"]')
  await page.waitForSelector('section [data-loaded]', { state: 'attached' })
  await page.fill('#volume-create input[name=name]', 'dash-vol')
  await page.fill('#volume-create input[name=size_mb]', '16')
  await page.click('#volume-create button[type=submit]')
  await page.waitForSelector('tr[data-volume="dash-vol"]')
  assert.match(await page.textContent('tr[data-volume="dash-vol"]'), /16 MiB/)
  assert.equal((await page.textContent('tr[data-volume="dash-vol"] td.kind')).trim(), 'volume')
  // a read-only snapshot of it, named in the prompt (the default: NAME-snap)
  await page.click('tr[data-volume="dash-vol"] button.snapshot')
  await page.waitForSelector('tr[data-volume="dash-vol-snap"]')
  assert.equal((await page.textContent('tr[data-volume="dash-vol-snap"] td.kind')).trim(), 'snapshot of dash-vol')
  await shot('volumes')
  await page.click('tr[data-volume="dash-vol-snap"] button.danger')
  await page.waitForFunction(() => !document.querySelector('tr[data-volume="dash-vol-snap"]'))
  await page.click('tr[data-volume="dash-vol"] button.danger')
  await page.waitForFunction(() => !document.querySelector('tr[data-volume="dash-vol"]'))
  seen.volume = true
  // the admin pages are not routed for it either
  await page.goto(`${ui}#/tenants`)
  await page.waitForFunction(() => document.getElementById('view').textContent.includes('No such page'))
  await ctx.close()

  // an admin key: tenants and keys
  ctx = await fresh()
  await login(adminKey)
  await page.waitForSelector('#nav a[href="#/tenants"]', { state: 'visible' })
  await page.click('#nav a[href="#/tenants"]')
  await page.waitForSelector('section table tbody tr')
  seen.tenants = await page.$$eval('section table tbody tr td:first-child', (tds) => tds.map((t) => t.textContent))
  await shot('tenants')
  await page.click('#nav a[href="#/keys"]')
  // the keys' table, not the tenants' still on the page for a moment
  await page.waitForFunction(() => [...document.querySelectorAll('section table th')].some((t) => t.textContent === 'Admin') &&
    document.querySelectorAll('section table tbody tr').length > 0)
  seen.keys = await page.$$eval('section table tbody tr td:first-child', (tds) => tds.map((t) => t.textContent))
  await shot('keys')
  await page.click('#logout')
  await page.waitForSelector('#login', { state: 'visible' })
  assert.equal(await page.evaluate(() => sessionStorage.getItem('space.key')), null)
  await ctx.close()
} catch (err) {
  if (page) await shot('failure').catch(() => {})
  console.error(err)
  console.log(JSON.stringify(seen))
  await browser.close()
  process.exit(1)
}
await browser.close()
console.log(JSON.stringify(seen))
