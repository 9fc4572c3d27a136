// SPDX-License-Identifier: MIT
// The transport: fetch with a timeout on every call (and a quiet-time limit on
// streams), the caller's AbortSignal, retries with backoff on 429/503
// (honouring Retry-After) and on connections that never reached the server.

import { Aborted, ConnectionFailed, SpaceError, Timeout, errorFrom } from "./errors.js";

export const DEFAULT_URL = "http://127.0.0.1:7070";
export const DEFAULT_TIMEOUT_MS = 60_000;
export const DEFAULT_RETRIES = 3;
const BACKOFF_BASE_MS = 200;
const BACKOFF_MAX_MS = 10_000;
const IDEMPOTENT = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);
export const USER_AGENT = "space-sdk-typescript/0.1";

/** What a request body may be: bytes, text, a Blob, or chunks (streamed). */
export type BodyInput =
  | Uint8Array
  | ArrayBuffer
  | string
  | Blob
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array | string>
  | Iterable<Uint8Array>;

/** Per-call options: every call takes them. */
export interface CallOptions {
  /** Ends the call (and its stream) when aborted. */
  signal?: AbortSignal;
  /** Overrides the client's timeout for this call (for a stream: until its answer starts). */
  timeoutMs?: number;
}

export interface RequestOptions extends CallOptions {
  query?: Record<string, string | number | boolean | null | undefined>;
  json?: unknown;
  body?: BodyInput;
  contentType?: string;
  headers?: Record<string, string>;
  /** Keep the body as a stream (the timeout then covers only the answer's start). */
  stream?: boolean;
  /** For a stream: longest quiet time between chunks before it fails with Timeout (default: none). */
  idleTimeoutMs?: number;
}

export interface TransportOptions {
  url: string;
  apiKey?: string;
  timeoutMs: number;
  retries: number;
  fetch?: typeof fetch;
  headers?: Record<string, string>;
}

/** A response whose body is still to be read, with its abort tied to the call. */
export interface StreamedResponse {
  status: number;
  headers: Headers;
  /** The body's chunks; reading it past a quiet idleTimeoutMs fails with Timeout. */
  body: ReadableStream<Uint8Array>;
  /** Ends the stream (and the connection). */
  close(): void;
}

const encoder = new TextEncoder();

export function seg(s: string | number): string {
  return encodeURIComponent(String(s));
}

function queryString(q?: RequestOptions["query"]): string {
  if (!q) return "";
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined || v === null) continue;
    p.append(k, v === true ? "1" : v === false ? "0" : String(v));
  }
  const s = p.toString();
  return s ? `?${s}` : "";
}

function isReplayable(b: BodyInput | undefined): boolean {
  return b === undefined || typeof b === "string" || b instanceof Uint8Array || b instanceof ArrayBuffer ||
    (typeof Blob !== "undefined" && b instanceof Blob);
}

/** Chunks (an async or sync iterable) as a ReadableStream of bytes. */
export function toStream(b: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array>): ReadableStream<Uint8Array> {
  const it = Symbol.asyncIterator in b
    ? (b as AsyncIterable<Uint8Array | string>)[Symbol.asyncIterator]()
    : (b as Iterable<Uint8Array>)[Symbol.iterator]();
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      const r = await it.next();
      if (r.done) {
        ctl.close();
        return;
      }
      const v = r.value;
      const chunk = typeof v === "string" ? encoder.encode(v) : v;
      if (!(chunk instanceof Uint8Array)) throw new TypeError("body chunks must be Uint8Array or string");
      if (chunk.byteLength) ctl.enqueue(chunk);
    },
    async cancel() {
      await it.return?.();
    },
  });
}

function fetchBody(b: BodyInput | undefined): { body?: BodyInit; streamed: boolean } {
  if (b === undefined) return { streamed: false };
  if (typeof b === "string") return { body: encoder.encode(b), streamed: false };
  if (b instanceof Uint8Array || b instanceof ArrayBuffer) return { body: b as BodyInit, streamed: false };
  if (typeof Blob !== "undefined" && b instanceof Blob) return { body: b, streamed: false };
  if (typeof ReadableStream !== "undefined" && b instanceof ReadableStream) return { body: b, streamed: true };
  if (typeof b === "object" && b !== null && (Symbol.asyncIterator in b || Symbol.iterator in b)) {
    return { body: toStream(b as AsyncIterable<Uint8Array>), streamed: true };
  }
  throw new TypeError("a body must be a Uint8Array, ArrayBuffer, string, Blob, ReadableStream or iterable of chunks");
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Aborted("aborted"));
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(new Aborted("aborted"));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Milliseconds to wait before try attempt+1: the server's Retry-After, else exponential with jitter. */
export function backoffMs(attempt: number, retryAfterS?: number): number {
  if (retryAfterS !== undefined) return Math.min(retryAfterS * 1000, BACKOFF_MAX_MS);
  return Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt) * (0.5 + Math.random() / 2);
}

function refused(e: unknown): boolean {
  // Node's fetch: TypeError("fetch failed") with cause.code; a refused connection never reached the server
  const code = (e as { cause?: { code?: string } })?.cause?.code;
  return code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN";
}

/** One controller per try: aborted by the caller's signal, the timeout, or close(). */
class Deadline {
  readonly ctl = new AbortController();
  private timer?: ReturnType<typeof setTimeout>;
  private idleTimer?: ReturnType<typeof setTimeout>;
  timedOut = false;
  private readonly onAbort = () => this.ctl.abort();

  constructor(private readonly user: AbortSignal | undefined, ms: number) {
    if (user) {
      if (user.aborted) this.ctl.abort();
      else user.addEventListener("abort", this.onAbort, { once: true });
    }
    if (ms > 0 && Number.isFinite(ms)) this.timer = setTimeout(() => this.expire(), ms);
  }

  private expire() {
    this.timedOut = true;
    this.ctl.abort();
  }

  /** From now on, a quiet time of ms (0 = none) between chunks ends it. */
  idle(ms: number) {
    clearTimeout(this.timer);
    clearTimeout(this.idleTimer);
    if (ms > 0 && Number.isFinite(ms)) this.idleTimer = setTimeout(() => this.expire(), ms);
  }

  done() {
    clearTimeout(this.timer);
    clearTimeout(this.idleTimer);
    this.user?.removeEventListener("abort", this.onAbort);
  }

  error(what: string, ms: number, e?: unknown): SpaceError {
    if (this.timedOut) return new Timeout(`${what}: no answer within ${ms / 1000} s`);
    if (this.user?.aborted) return new Aborted(`${what}: aborted`);
    if (e instanceof SpaceError) return e;
    const cause = (e as { cause?: { message?: string } })?.cause?.message;
    return new ConnectionFailed(`${what}: ${(e as Error)?.message ?? e}${cause ? ` (${cause})` : ""}`);
  }
}

export class Transport {
  readonly url: string;
  readonly apiKey?: string;
  readonly timeoutMs: number;
  readonly retries: number;
  private readonly fetchImpl: typeof fetch;
  private readonly extraHeaders: Record<string, string>;

  constructor(o: TransportOptions) {
    this.url = o.url.replace(/\/+$/, "");
    this.apiKey = o.apiKey;
    this.timeoutMs = o.timeoutMs;
    this.retries = o.retries;
    this.fetchImpl = o.fetch ?? globalThis.fetch.bind(globalThis);
    this.extraHeaders = o.headers ?? {};
  }

  private headers(o: RequestOptions, contentType?: string): Record<string, string> {
    const h: Record<string, string> = { Accept: "application/json", ...this.extraHeaders };
    if (typeof window === "undefined") h["User-Agent"] = USER_AGENT; // browsers refuse to set it
    if (this.apiKey) h.Authorization = `Bearer ${this.apiKey}`;
    if (contentType) h["Content-Type"] = contentType;
    return { ...h, ...(o.headers ?? {}) };
  }

  /** One call with its retries: the answer with its body unread (stream) or read. */
  async request(method: string, path: string, o: RequestOptions = {}): Promise<StreamedResponse> {
    let bodyIn = o.body;
    let contentType = o.contentType;
    if (o.json !== undefined) {
      bodyIn = JSON.stringify(o.json);
      contentType = "application/json";
    }
    const target = this.url + path + queryString(o.query);
    const replayable = isReplayable(bodyIn);
    const ms = o.timeoutMs ?? this.timeoutMs;
    const what = `${method} ${path}`;
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= this.retries || !replayable;
      const { body, streamed } = fetchBody(bodyIn);
      const dl = new Deadline(o.signal, ms);
      let resp: Response;
      try {
        const init: RequestInit & { duplex?: string } = {
          method, headers: this.headers(o, contentType), body, signal: dl.ctl.signal,
        };
        if (streamed) init.duplex = "half";
        resp = await this.fetchImpl(target, init);
      } catch (e) {
        dl.done();
        const err = dl.error(what, ms, e);
        if (!last && err instanceof ConnectionFailed && (refused(e) || IDEMPOTENT.has(method))) {
          await sleep(backoffMs(attempt), o.signal);
          continue;
        }
        throw err;
      }
      if (resp.status < 200 || resp.status > 299) {
        let text = "";
        try {
          text = await resp.text();
        } catch (e) {
          dl.done();
          throw dl.error(what, ms, e);
        }
        dl.done();
        const err = errorFrom(resp.status, resp.headers, text);
        if (!last && (resp.status === 429 || resp.status === 503)) {
          await sleep(backoffMs(attempt, err.retryAfter), o.signal);
          continue;
        }
        throw err;
      }
      if (o.stream) {
        dl.idle(o.idleTimeoutMs ?? 0);
        return { status: resp.status, headers: resp.headers, body: guarded(resp, dl, o.idleTimeoutMs ?? 0, what),
                 close: () => { dl.ctl.abort(); dl.done(); } };
      }
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(await resp.arrayBuffer());
      } catch (e) {
        throw dl.error(`${what}: the answer broke off`, ms, e);
      } finally {
        dl.done();
      }
      const whole = new ReadableStream<Uint8Array>({
        start(ctl) {
          if (bytes.byteLength) ctl.enqueue(bytes);
          ctl.close();
        },
      });
      return { status: resp.status, headers: resp.headers, body: whole, close: () => {} };
    }
  }

  /** A call whose answer is JSON (or empty: undefined). */
  async json<T = unknown>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    const r = await this.request(method, path, o);
    const text = await new Response(r.body).text();
    if (!text) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new SpaceError(`the server answered ${r.status} with malformed JSON: ${(e as Error).message}`,
        { status: r.status });
    }
  }
}

/** The response body, each read restarting the quiet timer, errors as SpaceError. */
function guarded(resp: Response, dl: Deadline, idleMs: number, what: string): ReadableStream<Uint8Array> {
  const reader = resp.body?.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      if (!reader) {
        dl.done();
        ctl.close();
        return;
      }
      try {
        const r = await reader.read();
        if (r.done) {
          dl.done();
          ctl.close();
          return;
        }
        dl.idle(idleMs);
        ctl.enqueue(r.value);
      } catch (e) {
        dl.done();
        const err = dl.error(what, idleMs, e);
        ctl.error(dl.timedOut ? new Timeout(`${what}: no data for ${idleMs / 1000} s on the stream`) : err);
      }
    },
    cancel() {
      dl.ctl.abort();
      dl.done();
      reader?.cancel().catch(() => {});
    },
  });
}

/** NDJSON objects from a byte stream, as they come. */
export async function* ndjson<T = Record<string, unknown>>(body: ReadableStream<Uint8Array>): AsyncGenerator<T> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      buf += dec.decode(r.value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) yield parseLine<T>(line);
      }
    }
    buf += dec.decode();
    if (buf.trim()) yield parseLine<T>(buf.trim());
  } finally {
    reader.cancel().catch(() => {});
  }
}

function parseLine<T>(line: string): T {
  try {
    return JSON.parse(line) as T;
  } catch (e) {
    throw new SpaceError(`malformed line in a stream: ${(e as Error).message}`);
  }
}
