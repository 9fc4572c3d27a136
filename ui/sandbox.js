// SPDX-License-Identifier: MIT
// One sandbox: its limits and live usage, a terminal, its processes, files,
// a port to open in the browser (the ingress's one-time link), checkpoints (with the sandboxes branched from them) and network decisions
// (its network.* events, live).

import { api, stream, enc } from './api.js'
import { el, replace, bytes, percent, time, table, errorText, section, nowRfc3339 } from './util.js'

const REFRESH_MSEC = 5000
const NETWORK_ROWS_MAX = 200
const FILE_SHOW_MAX = 64 * 1024

// The newest metrics sample of the last 30 s, or null.
export async function recentMetric (id, signal) {
  const { metrics } = await api('GET', `/sandboxes/${enc(id)}/metrics?since=${enc(nowRfc3339(30000))}`,
    undefined, { signal })
  return metrics.length ? metrics[metrics.length - 1] : null
}

export function mount (view, id, ctx) {
  const abort = new AbortController()
  const signal = abort.signal
  const timers = []
  const every = (f) => { f(); timers.push(setInterval(f, REFRESH_MSEC)) }
  const fail = (body) => (err) => {
    if (signal.aborted) return
    if (err.status === 401) return ctx.onAuthLost()
    replace(body, el('p', { class: 'error' }, errorText(err)))
  }

  const head = el('div', { class: 'sandbox-head' })
  const term = section('Terminal')
  const procs = section('Processes')
  const files = section('Files')
  const ports = section('Ports')
  const cps = section('Checkpoints')
  const net = section('Network decisions')
  view.append(head, term.node, el('div', { class: 'grid' }, procs.node, files.node, ports.node, cps.node, net.node))

  let closeTerminal = null
  const startButton = el('button', {
    type: 'button',
    id: 'terminal-open',
    onclick: async () => {
      startButton.remove()
      // xterm.js (most of the dashboard's bytes) loads only when a terminal opens
      const { openTerminal } = await import('./terminal.js')
      if (signal.aborted) return
      closeTerminal = openTerminal(term.body, id, (msg) => term.body.append(el('p', { class: 'note' }, msg)))
    },
  }, 'Open a shell')
  term.body.append(startButton)

  summary(head, id, signal).catch(fail(head))
  every(() => processes(procs.body, id, signal).catch(fail(procs.body)))
  fileBrowser(files.body, id, signal)
  portOpener(ports.body, id, signal)
  checkpoints(cps.body, id, signal).catch(fail(cps.body))
  network(net.body, id, signal).catch(fail(net.body))

  return () => {
    abort.abort()
    timers.forEach(clearInterval)
    if (closeTerminal) closeTerminal()
  }
}

async function summary (head, id, signal) {
  const sb = await api('GET', `/sandboxes/${enc(id)}`, undefined, { signal })
  const cpu = el('dd', {}, '–')
  const mem = el('dd', {}, '–')
  const status = el('p', { class: 'error', role: 'alert' })
  const dl = (pairs) => el('dl', {}, pairs.map(([k, v]) => el('div', {}, el('dt', {}, k), v instanceof Node ? v : el('dd', {}, v))))
  replace(head,
    el('h1', {}, 'Sandbox ', el('span', { class: 'mono' }, sb.id), ' ', el('span', { class: `state ${sb.state}` }, sb.state)),
    dl([
      ['Template', sb.template], ['Runtime', sb.runtime], ['Worker', sb.worker || '–'],
      ['CPUs', sb.cpu], ['Memory', `${sb.memory_mb} MiB`], ['Disk', `${sb.disk_mb} MiB`],
      ['Processes max', sb.pids_max], ['Timeout', sb.timeout_s ? `${sb.timeout_s} s` : 'none'],
      ['Created', time(sb.created_at)], ['Expires', time(sb.expires_at)],
      ['Parent', sb.parent ? el('a', { href: `#/sandbox/${sb.parent}`, class: 'mono' }, sb.parent) : '–'],
      ['CPU use', cpu], ['Memory use', mem],
    ]),
    el('div', { class: 'actions' },
      el('button', { type: 'button', onclick: () => checkpoint(id, status) }, 'Checkpoint'),
      el('button', {
        type: 'button',
        class: 'danger',
        onclick: async () => {
          if (!confirm(`Delete sandbox ${id}?`)) return
          try {
            await api('DELETE', `/sandboxes/${enc(id)}`)
            location.hash = '#/'
          } catch (err) { status.textContent = `Delete failed: ${errorText(err)}` }
        },
      }, 'Delete')),
    status)
  if (sb.reason) head.append(el('p', { class: 'note' }, sb.reason))
  const tick = async () => {
    try {
      const m = await recentMetric(id, signal)
      if (!m) return
      cpu.textContent = percent(m.cpu_percent)
      mem.textContent = `${bytes(m.memory_bytes)}${m.memory_limit_bytes ? ' / ' + bytes(m.memory_limit_bytes) : ''}`
    } catch { /* shown as – */ }
    if (!signal.aborted) setTimeout(tick, REFRESH_MSEC)
  }
  if (sb.state === 'running') tick()
}

async function checkpoint (id, status) {
  try {
    const ck = await api('POST', `/sandboxes/${enc(id)}/checkpoints`, {})
    status.textContent = ''
    document.dispatchEvent(new CustomEvent('space:checkpointed', { detail: ck }))
  } catch (err) { status.textContent = `Checkpoint failed: ${errorText(err)}` }
}

async function processes (body, id, signal) {
  const { processes } = await api('GET', `/sandboxes/${enc(id)}/exec`, undefined, { signal })
  replace(body, table(['PID', 'Command', 'PTY', 'Exec'], processes.map((p) => el('tr', {},
    el('td', { class: 'num' }, p.pid),
    el('td', { class: 'mono' }, p.argv.join(' ')),
    el('td', {}, p.pty ? 'yes' : ''),
    el('td', { class: 'mono' }, p.exec_id))), { empty: 'No processes started through exec run.' }))
}

// A server inside listens on a port: its ingress URL, and a one-time link
// that lets this browser in (it sets the port's cookie; the token stays here).
function portOpener (body, id, signal) {
  const port = el('input', { name: 'port', type: 'number', min: 1, max: 65535, value: 8000, size: 6, 'aria-label': 'port' })
  const out = el('div', { class: 'port' })
  const form = el('form', {
    id: 'port-open',
    class: 'inline',
    onsubmit: async (ev) => {
      ev.preventDefault()
      try {
        const p = await api('GET', `/sandboxes/${enc(id)}/ports/${enc(port.value)}`, undefined, { signal })
        replace(out,
          el('p', {}, 'URL ', el('span', { class: 'mono', 'data-url': p.url }, p.url)),
          el('p', {}, el('a', { href: p.link, target: '_blank', rel: 'noopener noreferrer', class: 'port-link' },
            `Open port ${p.port}`), ` (a one-time link, until ${time(p.link_expires_at)})`))
      } catch (err) { replace(out, el('p', { class: 'error' }, errorText(err))) }
    },
  }, el('label', {}, 'Port ', port), el('button', { type: 'submit' }, 'Open'))
  replace(body, form, out)
}

function fileBrowser (body, id, signal) {
  const path = el('input', { name: 'path', value: '/', size: 40, 'aria-label': 'path' })
  const list = el('div', { class: 'files' })
  const shown = el('pre', { class: 'file', hidden: true })
  const go = async (p) => {
    path.value = p
    shown.hidden = true
    try {
      const { entries } = await api('GET', `/sandboxes/${enc(id)}/files?list=1&path=${enc(p)}`, undefined, { signal })
      entries.sort((a, b) => (a.type === 'dir') === (b.type === 'dir') ? a.name.localeCompare(b.name) : a.type === 'dir' ? -1 : 1)
      const up = p.replace(/\/[^/]+\/?$/, '') || '/'
      replace(list, table(['Name', 'Size', 'Mode', 'Modified'], [
        p !== '/' ? el('tr', {}, el('td', {}, el('a', { href: '#', onclick: (e) => { e.preventDefault(); go(up) } }, '..')), el('td'), el('td'), el('td')) : null,
        ...entries.map((f) => el('tr', { 'data-name': f.name },
          el('td', {}, el('a', {
            href: '#',
            class: f.type,
            onclick: (e) => { e.preventDefault(); f.type === 'dir' ? go(f.path) : show(f) },
          }, f.name + (f.type === 'dir' ? '/' : f.type === 'symlink' ? ` → ${f.target || ''}` : ''))),
          el('td', { class: 'num' }, f.type === 'file' ? bytes(f.size) : ''),
          el('td', { class: 'mono' }, f.mode.toString(8).padStart(4, '0')),
          el('td', {}, time(f.mtime)))),
      ].filter(Boolean), { empty: 'empty' }))
    } catch (err) {
      if (!signal.aborted) replace(list, el('p', { class: 'error' }, errorText(err)))
    }
  }
  const show = async (f) => {
    shown.hidden = false
    if (f.size > FILE_SHOW_MAX) {
      shown.textContent = `${f.path}: ${bytes(f.size)}, too large to show here`
      return
    }
    try {
      shown.textContent = await api('GET', `/sandboxes/${enc(id)}/files?path=${enc(f.path)}`, undefined, { signal })
    } catch (err) { shown.textContent = errorText(err) }
  }
  body.append(el('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); go(path.value || '/') } },
    path, el('button', { type: 'submit' }, 'List')), list, shown)
  go('/')
}

// The sandbox's checkpoints, each with the sandboxes branched from it; branches of its live files last.
async function checkpoints (body, id, signal) {
  const render = async () => {
    const [{ checkpoints }, { sandboxes }] = await Promise.all([
      api('GET', `/sandboxes/${enc(id)}/checkpoints`, undefined, { signal }),
      api('GET', '/sandboxes?limit=500', undefined, { signal }),
    ])
    const children = sandboxes.filter((s) => s.parent === id)
    const branches = (ck) => {
      const kids = children.filter((s) => (s.parent_checkpoint || null) === ck)
      return kids.length
        ? el('ul', {}, kids.map((s) => el('li', {}, 'branch ', el('a', { href: `#/sandbox/${s.id}`, class: 'mono' }, s.id), ` ${s.state}`)))
        : null
    }
    const items = checkpoints.map((c) => el('li', {},
      el('span', { class: 'mono' }, c.name || c.id), ` ${time(c.created_at)}, ${bytes(c.size_bytes)}`,
      c.auto ? ' (auto)' : '', c.with_memory ? ' (with memory)' : '',
      branches(c.id) || branches(c.name)))
    const live = branches(null)
    replace(body, el('ul', { class: 'tree' }, el('li', {}, el('span', { class: 'mono' }, id),
      items.length || live ? el('ul', {}, items, live ? el('li', {}, 'live files', live) : null) : ' (no checkpoints)')))
  }
  document.addEventListener('space:checkpointed', () => render().catch(() => {}), { signal })
  await render()
}

async function network (body, id, signal) {
  const rows = el('tbody')
  const empty = el('p', { class: 'empty' }, 'No network decisions yet.')
  const t = el('table', { hidden: true }, el('thead', {}, el('tr', {},
    ['Time', 'Decision', 'Kind', 'Host', 'Address', 'Rule or reason'].map((h) => el('th', {}, h)))), rows)
  body.append(empty, t)
  await stream('GET', `/events?follow=1&sandbox=${enc(id)}&type=network.`, undefined, (ev) => {
    empty.remove()
    t.hidden = false
    const d = ev.data || {}
    rows.prepend(el('tr', {},
      el('td', {}, time(ev.time)),
      el('td', {}, el('span', { class: `decision ${ev.type.replace('network.', '')}` }, ev.type.replace('network.', ''))),
      el('td', {}, d.kind || ''),
      el('td', { class: 'mono' }, d.host || ''),
      el('td', { class: 'mono' }, d.ip ? `${d.ip}${d.port ? ':' + d.port : ''}` : ''),
      el('td', {}, ev.reason || d.why || '')))
    while (rows.children.length > NETWORK_ROWS_MAX) rows.lastChild.remove()
  }, { signal })
}
