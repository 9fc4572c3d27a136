// SPDX-License-Identifier: MIT
// DOM building without innerHTML (every value from the API is text), and formats.

export function el (tag, attrs = {}, ...children) {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v)
    else if (k === 'class') e.className = v
    else e.setAttribute(k, v === true ? '' : v)
  }
  append(e, children)
  return e
}

function append (e, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue
    e.append(c instanceof Node ? c : document.createTextNode(String(c)))
  }
}

export function replace (node, ...children) {
  node.replaceChildren()
  append(node, children)
}

export function bytes (n) {
  if (n === null || n === undefined) return '–'
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let i = 0
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++ }
  return `${n < 10 && i ? n.toFixed(1) : Math.round(n)} ${u[i]}`
}

export function time (s) {
  if (!s) return '–'
  const d = new Date(s)
  return isNaN(d) ? s : d.toLocaleString()
}

export function percent (p) {
  return p === null || p === undefined ? '–' : `${p.toFixed(1)} %`
}

export function table (columns, rows, { empty = 'none' } = {}) {
  if (!rows.length) return el('p', { class: 'empty' }, empty)
  return el('table', {},
    el('thead', {}, el('tr', {}, columns.map((c) => el('th', {}, c)))),
    el('tbody', {}, rows))
}

export function errorText (err) {
  return err.status ? `${err.message} (${err.status}${err.code ? ' ' + err.code : ''})` : String(err.message || err)
}

// A section with a title and a body the caller fills.
export function section (title, ...extra) {
  const body = el('div', { class: 'body' })
  const s = el('section', {}, el('h2', {}, title, ...extra), body)
  return { node: s, body }
}

// RFC 3339 in whole seconds (what the API parses), agoMsec before now.
export function nowRfc3339 (agoMsec = 0) {
  return new Date(Date.now() - agoMsec).toISOString().replace(/\.\d+Z$/, 'Z')
}
