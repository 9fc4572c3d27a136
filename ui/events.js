// SPDX-License-Identifier: MIT
// Events as they happen: GET /v1/events?follow=1 (the last hour first),
// newest on top, with a type filter (a type or a prefix ending in '.').

import { stream, enc } from './api.js'
import { el, replace, time, errorText, section, nowRfc3339 } from './util.js'

const ROWS_MAX = 500
const BACKLOG_MSEC = 3600 * 1000

export function eventRow (ev) {
  return el('tr', { 'data-seq': ev.seq },
    el('td', {}, time(ev.time)),
    el('td', { class: 'mono' }, ev.type),
    el('td', {}, ev.sandbox ? el('a', { href: `#/sandbox/${ev.sandbox}`, class: 'mono' }, ev.sandbox) : ''),
    el('td', {}, ev.tenant),
    el('td', { class: 'mono' }, ev.actor),
    el('td', {}, ev.reason),
    el('td', { class: 'mono data' }, Object.keys(ev.data || {}).length ? JSON.stringify(ev.data) : ''))
}

export function eventTable (rows) {
  return el('table', {}, el('thead', {}, el('tr', {},
    ['Time', 'Type', 'Sandbox', 'Tenant', 'Actor', 'Reason', 'Data'].map((h) => el('th', {}, h)))), rows)
}

export function mount (view, ctx) {
  let abort = null
  const s = section('Events')
  const filter = el('input', { name: 'type', placeholder: 'type or prefix., e.g. sandbox.', size: 30 })
  const status = el('p', { class: 'note' })
  const rows = el('tbody')
  view.append(s.node)
  s.body.append(el('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); follow() } },
    el('label', {}, 'Type ', filter), el('button', { type: 'submit' }, 'Filter')), status, eventTable(rows))

  function follow () {
    if (abort) abort.abort()
    abort = new AbortController()
    replace(rows)
    status.textContent = 'Following…'
    let q = `/events?follow=1&since=${enc(nowRfc3339(BACKLOG_MSEC))}`
    if (filter.value.trim()) q += `&type=${enc(filter.value.trim())}`
    const mine = abort
    stream('GET', q, undefined, (ev) => {
      rows.prepend(eventRow(ev))
      while (rows.children.length > ROWS_MAX) rows.lastChild.remove()
    }, { signal: mine.signal }).then(() => {
      if (!mine.signal.aborted) status.textContent = 'The stream ended.'
    }).catch((err) => {
      if (mine.signal.aborted) return
      if (err.status === 401) return ctx.onAuthLost()
      status.textContent = errorText(err)
    })
  }
  follow()
  return () => abort && abort.abort()
}
