// SPDX-License-Identifier: MIT
// The /v1 API from the browser: the key (sessionStorage, sent as Bearer, no
// cookies), JSON calls that throw ApiError, and NDJSON streams read with fetch.

const KEY = 'space.key'

export const key = () => sessionStorage.getItem(KEY)
export const setKey = (k) => sessionStorage.setItem(KEY, k)
export const clearKey = () => sessionStorage.removeItem(KEY)

export class ApiError extends Error {
  constructor (status, code, message) {
    super(message || code || `HTTP ${status}`)
    this.status = status
    this.code = code
  }
}

function headers (extra) {
  return { Authorization: `Bearer ${key()}`, ...extra }
}

async function fail (res) {
  let code = ''; let message = ''
  try {
    const j = await res.json()
    code = j.error?.code || ''
    message = j.error?.message || ''
  } catch { /* not JSON */ }
  return new ApiError(res.status, code, message)
}

// path under /v1 ("/sandboxes"); body: an object (JSON), or bytes/string (octet-stream)
export async function api (method, path, body, { signal } = {}) {
  const init = { method, headers: headers(), signal, cache: 'no-store' }
  if (body instanceof Uint8Array || typeof body === 'string') {
    init.headers['Content-Type'] = 'application/octet-stream'
    init.body = body
  } else if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json'
    init.body = JSON.stringify(body)
  }
  const res = await fetch(`/v1${path}`, init)
  if (!res.ok) throw await fail(res)
  if (res.status === 204) return null
  const type = res.headers.get('Content-Type') || ''
  return type.startsWith('application/json') ? res.json() : res.text()
}

// Calls onEvent(obj) for each line of an NDJSON answer until it ends or signal aborts.
export async function stream (method, path, body, onEvent, { signal } = {}) {
  const init = { method, headers: headers(), signal, cache: 'no-store' }
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json'
    init.body = JSON.stringify(body)
  }
  const res = await fetch(`/v1${path}`, init)
  if (!res.ok) throw await fail(res)
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
  let buf = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    buf += value
    let nl
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      if (line.trim()) onEvent(JSON.parse(line))
    }
  }
}

export const enc = encodeURIComponent
