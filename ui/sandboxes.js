// SPDX-License-Identifier: MIT
// The sandbox list: state, template, limits and live CPU/memory (the last
// metrics sample, every 5 s), refreshed as sandbox events arrive on the
// event stream; and a form to create one.

import { api, stream, enc } from './api.js'
import { el, replace, bytes, percent, time, table, errorText, section, nowRfc3339 } from './util.js'
import { recentMetric } from './sandbox.js'

const METRICS_EVERY_MSEC = 5000

export function mount (view, ctx) {
  const abort = new AbortController()
  const list = section('Sandboxes')
  const create = section('New sandbox')
  const status = el('p', { class: 'error', role: 'alert' })
  const live = new Map() // id -> the cells showing its CPU and memory
  let timer = null
  let reloadPending = null

  view.append(create.node, list.node)
  createForm(create.body, status, () => reload())

  async function reload () {
    let sbs
    try {
      sbs = (await api('GET', '/sandboxes?limit=500', undefined, { signal: abort.signal })).sandboxes
    } catch (err) {
      if (abort.signal.aborted) return
      if (err.status === 401) return ctx.onAuthLost()
      replace(list.body, el('p', { class: 'error' }, errorText(err)))
      return
    }
    live.clear()
    const rows = sbs.map((sb) => {
      const cpu = el('td', { class: 'num' }, '–')
      const mem = el('td', { class: 'num' }, '–')
      live.set(sb.id, { cpu, mem, state: sb.state })
      return el('tr', { 'data-id': sb.id },
        el('td', {}, el('a', { href: `#/sandbox/${sb.id}`, class: 'mono' }, sb.id)),
        el('td', {}, el('span', { class: `state ${sb.state}` }, sb.state)),
        el('td', {}, sb.template),
        el('td', { class: 'num' }, sb.cpu),
        el('td', { class: 'num' }, `${sb.memory_mb} MiB`),
        el('td', { class: 'num' }, `${sb.disk_mb} MiB`),
        cpu, mem,
        el('td', {}, time(sb.created_at)),
        el('td', {}, el('button', { type: 'button', class: 'danger', onclick: () => remove(sb.id) }, 'Delete')))
    })
    replace(list.body, table(['ID', 'State', 'Template', 'CPUs', 'Memory', 'Disk', 'CPU use', 'Memory use',
      'Created', ''], rows, { empty: 'No sandboxes yet.' }))
    list.body.dataset.loaded = 'true'
    if (!performance.getEntriesByName('space:list-rendered').length) performance.mark('space:list-rendered')
    metrics()
  }

  // Coalesces a burst of events into one reload.
  function reloadSoon () {
    if (reloadPending) return
    reloadPending = setTimeout(() => { reloadPending = null; reload() }, 200)
  }

  async function metrics () {
    clearTimeout(timer)
    await Promise.all([...live].filter(([, c]) => c.state === 'running').map(async ([id, c]) => {
      try {
        const m = await recentMetric(id, abort.signal)
        if (!m) return
        c.cpu.textContent = percent(m.cpu_percent)
        c.mem.textContent = m.memory_limit_bytes
          ? `${bytes(m.memory_bytes)} / ${bytes(m.memory_limit_bytes)}` : bytes(m.memory_bytes)
      } catch { /* gone meanwhile: the next event reloads the list */ }
    }))
    if (!abort.signal.aborted) timer = setTimeout(metrics, METRICS_EVERY_MSEC)
  }

  async function remove (id) {
    if (!confirm(`Delete sandbox ${id}?`)) return
    try {
      await api('DELETE', `/sandboxes/${enc(id)}`)
      status.textContent = ''
    } catch (err) {
      status.textContent = `Delete failed: ${errorText(err)}`
    }
    reload()
  }

  reload()
  // the events from now on (one of this second already seen only reloads once more)
  stream('GET', `/events?follow=1&type=sandbox.&since=${enc(nowRfc3339())}`, undefined, reloadSoon,
    { signal: abort.signal }).catch(() => {})
  list.node.append(status)

  return () => { abort.abort(); clearTimeout(timer); clearTimeout(reloadPending) }
}

function createForm (body, status, done) {
  const template = el('select', { name: 'template' })
  const memory = el('input', { name: 'memory_mb', type: 'number', min: 16, value: 256 })
  const cpu = el('input', { name: 'cpu', type: 'number', min: 0.01, step: 0.01, value: 1 })
  const button = el('button', { type: 'submit' }, 'Create')
  const form = el('form', { class: 'inline', id: 'create' },
    el('label', {}, 'Template ', template),
    el('label', {}, 'Memory (MiB) ', memory),
    el('label', {}, 'CPUs ', cpu),
    button)
  body.append(form)
  api('GET', '/templates').then(({ templates }) => {
    for (const t of templates.filter((t) => t.state === 'ready')) {
      template.append(el('option', { value: t.name, selected: t.name === 'base' }, t.name))
    }
  }).catch((err) => { status.textContent = `Templates: ${errorText(err)}` })

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault()
    button.disabled = true
    button.textContent = 'Creating…'
    try {
      const req = { memory_mb: Number(memory.value), cpu: Number(cpu.value) }
      if (template.value) req.template = template.value
      const sb = await api('POST', '/sandboxes', req)
      status.textContent = ''
      done(sb)
    } catch (err) {
      status.textContent = `Create failed: ${errorText(err)}`
    } finally {
      button.disabled = false
      button.textContent = 'Create'
    }
  })
}
