// SPDX-License-Identifier: MIT
// The dashboard's shell: the login (a key checked against GET /v1/info, which
// also tells whether it is admin), and a hash
// router mounting one page module at a time. A page's mount() returns a
// function that stops its streams and timers when the page goes away.

import { api, key, setKey, clearKey } from './api.js'
import { errorText, replace, el } from './util.js'
import * as sandboxes from './sandboxes.js'
import * as sandbox from './sandbox.js'
import * as events from './events.js'
import * as templates from './templates.js'
import * as volumes from './volumes.js'
import * as admin from './admin.js'

const $ = (id) => document.getElementById(id)
const routes = [
  [/^#?\/?$/, sandboxes.mount],
  [/^#\/sandbox\/([a-z0-9]+)$/, sandbox.mount],
  [/^#\/events$/, events.mount],
  [/^#\/templates$/, templates.mount],
  [/^#\/volumes$/, volumes.mount],
  [/^#\/tenants$/, admin.mountTenants, true],
  [/^#\/keys$/, admin.mountKeys, true],
]
const session = { admin: false, tenant: '' }
let unmount = null

// GET /v1/info checks the key and says whether it is admin (caller.admin).
async function whoami () {
  const info = await api('GET', '/info')
  session.admin = info.caller?.admin === true
  session.tenant = info.caller?.tenant || ''
}

function showLogin (message) {
  clearKey()
  if (unmount) unmount()
  unmount = null
  replace($('view'))
  $('nav').hidden = true
  $('logout').hidden = true
  $('who').textContent = ''
  $('login').hidden = false
  $('login-error').textContent = message || ''
  $('key').focus()
}

function route () {
  if (unmount) unmount()
  unmount = null
  const view = $('view')
  replace(view)
  for (const [re, mount, adminOnly] of routes) {
    const m = location.hash.match(re)
    if (!m) continue
    if (adminOnly && !session.admin) break
    const ctx = { admin: session.admin, onAuthLost: () => showLogin('The key is no longer accepted.') }
    unmount = mount(view, ...m.slice(1), ctx) || null
    return
  }
  replace(view, el('p', { class: 'error' }, 'No such page.'))
}

async function start () {
  try {
    await whoami()
  } catch (err) {
    showLogin(err.status === 401 ? 'That key was refused.' : `Cannot reach the API: ${errorText(err)}`)
    return
  }
  $('login').hidden = true
  $('nav').hidden = false
  $('logout').hidden = false
  $('who').textContent = `${session.tenant}${session.admin ? ' (admin)' : ''}`
  for (const a of document.querySelectorAll('#nav .admin')) a.hidden = !session.admin
  route()
}

$('login').addEventListener('submit', (ev) => {
  ev.preventDefault()
  setKey($('key').value.trim())
  $('key').value = ''
  start()
})
$('logout').addEventListener('click', () => showLogin())
window.addEventListener('hashchange', () => { if (key()) route() })

if (key()) start()
else showLogin()
