// SPDX-License-Identifier: MIT
// Exec events and results: the stream's lines (docs/API.md, Exec) as objects
// with their bytes decoded, and the collected result of a command.

import type * as api from "./generated/api-types.js";

const decoder = new TextDecoder();

function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.byteLength;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** One event of an exec stream: start, stdout, stderr, dropped, exit, error (and
 * whatever kinds a newer server sends, with their fields in raw). */
export class ExecEvent {
  readonly type: string;
  /** stdout/stderr: the bytes (from data or data_b64). */
  readonly data: Uint8Array;
  /** Output offset: of the first byte (stdout/stderr), where output starts (start),
   * the lost bytes (dropped), the total (exit). */
  readonly offset?: number;
  /** exit: the exit code. */
  readonly code?: number;
  /** error: its code (exec_failed, sandbox_gone, exec_expired, bad_gateway, internal). */
  readonly errorCode?: string;
  readonly signal?: string;
  readonly reason?: string;
  readonly execId?: string;
  readonly pid?: number;
  /** dropped: how many bytes the buffer lost before this reader got them. */
  readonly bytes?: number;
  readonly message?: string;
  readonly raw: api.ExecEvent | Record<string, unknown>;

  /** d: one line of the stream; bytes: the payload of a frame (output frames), if that is where it came from. */
  constructor(d: Record<string, unknown>, bytes?: Uint8Array) {
    this.raw = d;
    this.type = typeof d.type === "string" ? d.type : "";
    this.data = bytes ?? (typeof d.data_b64 === "string" ? fromBase64(d.data_b64)
      : typeof d.data === "string" ? new TextEncoder().encode(d.data) : new Uint8Array(0));
    if (typeof d.offset === "number") this.offset = d.offset;
    if (typeof d.code === "number") this.code = d.code;
    if (this.type === "error") {
      if (typeof d.code === "string") this.errorCode = d.code;
      if (typeof d.message === "string") this.message = d.message;
    }
    if (typeof d.signal === "string") this.signal = d.signal;
    if (typeof d.reason === "string") this.reason = d.reason;
    if (typeof d.exec_id === "string") this.execId = d.exec_id;
    if (typeof d.pid === "number") this.pid = d.pid;
    if (typeof d.bytes === "number") this.bytes = d.bytes;
  }

  /** The bytes as text (UTF-8, bad sequences replaced). */
  get text(): string {
    return decoder.decode(this.data);
  }
}

/** A command's end, collected. */
export class ExecResult {
  exitCode: number | null = null;
  stdout: Uint8Array = new Uint8Array(0);
  stderr: Uint8Array = new Uint8Array(0);
  signal?: string;
  reason?: string;
  execId?: string;
  pid?: number;
  /** An error event that ended the stream (no exit): {code, message}. */
  error?: { code: string; message: string };
  /** Bytes the buffer lost before this reader got them (dropped events). */
  dropped = 0;

  get ok(): boolean {
    return this.exitCode === 0;
  }

  get stdoutText(): string {
    return decoder.decode(this.stdout);
  }

  get stderrText(): string {
    return decoder.decode(this.stderr);
  }
}

export interface CollectOptions {
  onStdout?: (data: Uint8Array, ev: ExecEvent) => void;
  onStderr?: (data: Uint8Array, ev: ExecEvent) => void;
  onEvent?: (ev: ExecEvent) => void;
}

export async function collect(events: AsyncIterable<ExecEvent>, o: CollectOptions = {}): Promise<ExecResult> {
  const res = new ExecResult();
  const out: Uint8Array[] = [];
  const err: Uint8Array[] = [];
  for await (const ev of events) {
    o.onEvent?.(ev);
    switch (ev.type) {
      case "start":
        res.execId = ev.execId;
        res.pid = ev.pid;
        break;
      case "stdout":
        out.push(ev.data);
        o.onStdout?.(ev.data, ev);
        break;
      case "stderr":
        err.push(ev.data);
        o.onStderr?.(ev.data, ev);
        break;
      case "dropped":
        res.dropped += ev.bytes ?? 0;
        break;
      case "error":
        res.error = { code: ev.errorCode ?? "error", message: ev.message ?? "" };
        break;
      case "exit":
        res.exitCode = ev.code ?? null;
        res.signal = ev.signal;
        res.reason = ev.reason;
        break;
    }
  }
  res.stdout = concat(out);
  res.stderr = concat(err);
  return res;
}

export const FRAMES_TYPE = "application/vnd.space.exec-frames";
const FRAME_HEADER = 16;
const FRAME_KINDS: Record<number, string> = { 1: "stdout", 2: "stderr" };

/** Exec events from output frames: 16-byte headers (u8 kind, 3 zero bytes, u32 payload
 * length, u64 offset; big endian), raw stdout (1) / stderr (2) bytes or one JSON event (3). */
export async function* frames(body: ReadableStream<Uint8Array>): AsyncGenerator<ExecEvent> {
  const reader = body.getReader();
  let buf: Uint8Array = new Uint8Array(0);
  const dec = new TextDecoder();
  try {
    for (;;) {
      while (buf.byteLength >= FRAME_HEADER) {
        const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
        const kind = v.getUint8(0);
        const len = v.getUint32(4);
        const offset = Number(v.getBigUint64(8));
        if (buf.byteLength < FRAME_HEADER + len) break;
        const payload = buf.slice(FRAME_HEADER, FRAME_HEADER + len);
        buf = buf.subarray(FRAME_HEADER + len);
        if (kind === 3) yield new ExecEvent(JSON.parse(dec.decode(payload)));
        else if (FRAME_KINDS[kind]) yield new ExecEvent({ type: FRAME_KINDS[kind], offset }, payload);
        else throw new Error(`unknown exec frame kind ${kind}`);
      }
      const r = await reader.read();
      if (r.done) break;
      buf = buf.byteLength ? concat([buf, r.value]) : r.value;
    }
    if (buf.byteLength) throw new Error(`exec frames: the stream ended inside a frame (${buf.byteLength} bytes)`);
  } finally {
    reader.cancel().catch(() => {});
  }
}
