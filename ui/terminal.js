// SPDX-License-Identifier: MIT
// A shell in the browser: xterm.js over the exec API, as `space shell` does
// it. POST .../exec with a pty and stdin open streams the output (NDJSON,
// base64 so that every byte arrives as it is); keystrokes go to
// POST .../exec/{exec_id}/stdin in order (one request at a time, what
// arrives meanwhile batched into the next), window sizes to .../resize.

import { Terminal } from './xterm.mjs'
import { FitAddon } from './addon-fit.mjs'
import { api, stream, enc } from './api.js'
import { errorText } from './util.js'

// bash where there is one, else sh; a login shell either way
const SHELL = 'command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l'

function b64bytes (s) {
  const bin = atob(s)
  const out = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i)
  return out
}

export function openTerminal (container, id, note) {
  const abort = new AbortController()
  const term = new Terminal({ cursorBlink: true, fontSize: 14, convertEol: false, scrollback: 5000 })
  const fit = new FitAddon()
  const box = document.createElement('div')
  box.className = 'terminal'
  container.append(box)
  term.loadAddon(fit)
  term.open(box)
  fit.fit()

  const encoder = new TextEncoder()
  const base = `/sandboxes/${enc(id)}/exec`
  let execId = null
  let pending = []
  let sending = false
  let exited = false

  async function flush () {
    if (sending || !execId || !pending.length) return
    sending = true
    const chunks = pending
    pending = []
    const n = chunks.reduce((a, c) => a + c.length, 0)
    const body = new Uint8Array(n)
    let at = 0
    for (const c of chunks) { body.set(c, at); at += c.length }
    try {
      await api('POST', `${base}/${enc(execId)}/stdin`, body, { signal: abort.signal })
    } catch (err) {
      if (!exited && !abort.signal.aborted) note(`input refused: ${errorText(err)}`)
    }
    sending = false
    flush()
  }

  term.onData((d) => { pending.push(encoder.encode(d)); flush() })
  term.onBinary((d) => { pending.push(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff)); flush() })
  term.onResize(({ rows, cols }) => {
    if (execId && !exited) api('POST', `${base}/${enc(execId)}/resize`, { rows, cols }).catch(() => {})
  })
  const onWindowResize = () => fit.fit()
  window.addEventListener('resize', onWindowResize)

  const request = {
    shell: SHELL,
    env: { TERM: 'xterm-256color' },
    pty: { rows: term.rows, cols: term.cols },
    stdin: true,
    output: 'base64',
    on_disconnect: 'hangup',
  }
  stream('POST', base, request, (ev) => {
    if (ev.type === 'start') {
      execId = ev.exec_id
      box.dataset.exec = execId
      term.focus()
      flush()
    } else if (ev.type === 'stdout' || ev.type === 'stderr') {
      term.write(ev.data_b64 !== undefined ? b64bytes(ev.data_b64) : ev.data)
    } else if (ev.type === 'error') {
      note(`error: ${ev.message || ev.code}`)
    } else if (ev.type === 'exit') {
      exited = true
      note(`The shell ended (exit code ${ev.code}${ev.signal ? ', ' + ev.signal : ''}).`)
    }
  }, { signal: abort.signal }).catch((err) => {
    if (!abort.signal.aborted) note(`The terminal's stream ended: ${errorText(err)}`)
  })

  return () => {
    abort.abort()
    window.removeEventListener('resize', onWindowResize)
    term.dispose()
  }
}
