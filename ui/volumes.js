// SPDX-License-Identifier: MIT
// The tenant's volumes: size, use, who mounts them (readers, the writer),
// what each was made from (a snapshot, a clone), a form to make one, a
// read-only snapshot of one, delete (refused by the API while one is mounted).

import { api, enc } from './api.js'
import { el, replace, bytes, time, table, errorText, section } from './util.js'

export function mount (view, ctx) {
  const abort = new AbortController()
  const list = section('Volumes')
  const create = section('New volume')
  const status = el('p', { class: 'error', role: 'alert' })
  view.append(create.node, list.node)

  const name = el('input', { name: 'name', required: true, size: 24, 'aria-label': 'name' })
  const size = el('input', { name: 'size_mb', type: 'number', min: 1, value: 256, size: 8, 'aria-label': 'size in MiB' })
  const form = el('form', {
    id: 'volume-create',
    class: 'inline',
    onsubmit: async (ev) => {
      ev.preventDefault()
      try {
        await api('POST', '/volumes', { name: name.value.trim(), size_mb: Number(size.value) })
        status.textContent = ''
        name.value = ''
        reload()
      } catch (err) { status.textContent = `Create failed: ${errorText(err)}` }
    },
  }, el('label', {}, 'Name ', name), el('label', {}, 'Size (MiB) ', size), el('button', { type: 'submit' }, 'Create'))
  replace(create.body, form, status)

  async function remove (v) {
    if (!confirm(`Delete volume ${v}? Its files go with it.`)) return
    try {
      await api('DELETE', `/volumes/${enc(v)}`)
      status.textContent = ''
      reload()
    } catch (err) { status.textContent = `Delete failed: ${errorText(err)}` }
  }

  async function snapshot (v) {
    const to = prompt(`Name of the read-only snapshot of ${v}:`, `${v}-snap`)
    if (!to) return
    try {
      await api('POST', `/volumes/${enc(v)}/snapshot`, { name: to.trim() })
      status.textContent = ''
      reload()
    } catch (err) { status.textContent = `Snapshot failed: ${errorText(err)}` }
  }

  const kind = (v) => v.read_only ? `snapshot of ${v.source}` : v.source ? `clone of ${v.source}` : 'volume'

  async function reload () {
    let volumes
    try {
      volumes = (await api('GET', '/volumes', undefined, { signal: abort.signal })).volumes
    } catch (err) {
      if (abort.signal.aborted) return
      if (err.status === 401) return ctx.onAuthLost()
      replace(list.body, el('p', { class: 'error' }, errorText(err)))
      return
    }
    replace(list.body, table(['Name', 'Kind', 'Size', 'Readers', 'Writer', 'Worker', 'Created', ''], volumes.map((v) =>
      el('tr', { 'data-volume': v.name },
        el('td', { class: 'mono' }, v.name),
        el('td', { class: 'kind' }, kind(v)),
        el('td', { class: 'num' }, bytes(v.size_mb * 1024 * 1024)),
        el('td', { class: 'num' }, v.readers),
        el('td', {}, v.writers ? 'yes' : ''),
        el('td', {}, v.worker),
        el('td', {}, time(v.created_at)),
        el('td', {},
          el('button', { type: 'button', class: 'snapshot', onclick: () => snapshot(v.name) }, 'Snapshot'),
          ' ',
          el('button', { type: 'button', class: 'danger', onclick: () => remove(v.name) }, 'Delete')))),
    { empty: 'No volumes. A sandbox mounts one at create: space create --volume NAME:/path' }))
    list.body.dataset.loaded = 'true'
  }
  reload()
  return () => abort.abort()
}
