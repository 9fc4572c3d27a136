// SPDX-License-Identifier: MIT
// Templates (with the runtime and start command their settings name), and their builds: template.imported / template.removed events
// (an import's outcome and its log lines as the server recorded them).

import { api } from './api.js'
import { el, replace, bytes, time, table, errorText, section } from './util.js'
import { eventRow, eventTable } from './events.js'

export function mount (view, ctx) {
  const abort = new AbortController()
  const list = section('Templates')
  const builds = section('Builds')
  view.append(list.node, builds.node)
  const fail = (body) => (err) => {
    if (abort.signal.aborted) return
    if (err.status === 401) return ctx.onAuthLost()
    replace(body, el('p', { class: 'error' }, errorText(err)))
  }

  api('GET', '/templates', undefined, { signal: abort.signal }).then(({ templates }) => {
    replace(list.body, table(['Name', 'State', 'Size', 'Runtime', 'Start command', 'Created', 'In use by'], templates.map((t) => el('tr', { 'data-template': t.name },
      el('td', { class: 'mono' }, t.name),
      el('td', {}, el('span', { class: `state ${t.state}` }, t.state)),
      el('td', { class: 'num' }, bytes(t.size_bytes)),
      el('td', {}, t.runtime || 'default'),
      el('td', { class: 'mono' }, t.start ? t.start.command : ''),
      el('td', {}, time(t.created_at)),
      el('td', { class: 'num' }, t.in_use))), { empty: 'No templates.' }))
  }).catch(fail(list.body))

  api('GET', '/events?type=template.&limit=500', undefined, { signal: abort.signal }).then(({ events }) => {
    const rows = el('tbody', {}, events.reverse().map(eventRow))
    replace(builds.body, events.length ? eventTable(rows) : el('p', { class: 'empty' }, 'No template imports recorded.'))
  }).catch(fail(builds.body))

  return () => abort.abort()
}
