// SPDX-License-Identifier: MIT
// Admin pages (the router shows them to admin keys only; the API refuses the
// others anyway): tenants with their quotas and usage, and API keys.

import { api, enc } from './api.js'
import { el, replace, time, table, errorText, section } from './util.js'

const kv = (o) => Object.entries(o || {}).map(([k, v]) => `${k} ${v}`).join(', ')

function page (view, title, load, ctx) {
  const abort = new AbortController()
  const s = section(title)
  view.append(s.node)
  const reload = () => load(s.body, abort.signal, reload).catch((err) => {
    if (abort.signal.aborted) return
    if (err.status === 401) return ctx.onAuthLost()
    replace(s.body, el('p', { class: 'error' }, errorText(err)))
  })
  reload()
  return () => abort.abort()
}

export function mountTenants (view, ctx) {
  return page(view, 'Tenants', async (body, signal) => {
    const { tenants } = await api('GET', '/tenants', undefined, { signal })
    replace(body, table(['Name', 'ID', 'Usage', 'Quotas', 'Own quotas'], tenants.map((t) => el('tr', {},
      el('td', {}, t.name), el('td', { class: 'mono' }, t.id),
      el('td', {}, kv(t.usage)), el('td', {}, kv(t.quotas)), el('td', {}, kv(t.overrides)))), { empty: 'No tenants.' }))
  }, ctx)
}

export function mountKeys (view, ctx) {
  return page(view, 'API keys', async (body, signal, reload) => {
    const { keys } = await api('GET', '/keys', undefined, { signal })
    const status = el('p', { class: 'error', role: 'alert' })
    replace(body, table(['ID', 'Name', 'Tenant', 'Admin', 'Created', ''], keys.map((k) => el('tr', {},
      el('td', { class: 'mono' }, k.id), el('td', {}, k.name), el('td', {}, k.tenant),
      el('td', {}, k.admin ? 'yes' : ''), el('td', {}, time(k.created_at)),
      el('td', {}, el('button', {
        type: 'button',
        class: 'danger',
        onclick: async () => {
          if (!confirm(`Delete key ${k.id}?`)) return
          try { await api('DELETE', `/keys/${enc(k.id)}`); reload() } catch (err) { status.textContent = errorText(err) }
        },
      }, 'Delete')))), { empty: 'No keys.' }), status)
  }, ctx)
}
