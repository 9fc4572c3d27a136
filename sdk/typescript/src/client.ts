// SPDX-License-Identifier: MIT
// The client: every /v1 call, with the types of src/generated/api-types.ts.

import type * as api from "./generated/api-types.js";
import { ExecFailed, SpaceError, errorClass } from "./errors.js";
import { collect, ExecEvent, ExecResult, FRAMES_TYPE, frames, type CollectOptions } from "./exec.js";
import {
  DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, DEFAULT_URL, Transport, ndjson, seg,
  type BodyInput, type CallOptions, type RequestOptions,
} from "./http.js";

const LONG_MS = 300_000;
const BRANCH_MS = 600_000;
const UPLOAD_MS = 600_000;
const IMPORT_MS = 1_800_000;

export interface ClientOptions {
  /** Default: SPACE_URL, else http://127.0.0.1:7070. */
  url?: string;
  /** Default: SPACE_API_KEY. */
  apiKey?: string;
  /** Every call's timeout (default 60 s; long calls such as create get at least 5 min). */
  timeoutMs?: number;
  /** Tries after the first on 429/503 and on refused connections (default 3). */
  retries?: number;
  /** Another fetch (a test double, a proxy agent). */
  fetch?: typeof fetch;
  /** Headers added to every request. */
  headers?: Record<string, string>;
}

export type Command = string | string[];

export interface ExecOptions extends CallOptions {
  env?: Record<string, string>;
  cwd?: string;
  /** A user name or uid (default root). */
  user?: api.ExecRequest["user"];
  /** A string is fed then closed; true keeps stdin open for sendStdin. */
  stdin?: api.ExecRequest["stdin"];
  /** Kill the command after this many seconds (0 = none). */
  timeoutS?: number;
  pty?: api.ExecRequest["pty"];
  /** text (default), base64 (exact bytes always, as JSON) or frames (raw bytes in binary
   * frames: the least overhead). The SDK gives Uint8Array in every form. */
  output?: api.ExecRequest["output"];
  onDisconnect?: api.ExecRequest["on_disconnect"];
  /** Longest quiet time on the stream (default: as long as the command may run, a day without timeoutS). */
  streamTimeoutMs?: number;
  /** Further body fields for a newer server. */
  extra?: Record<string, unknown>;
}

export interface RunOptions extends ExecOptions, CollectOptions {
  /** Throw ExecFailed unless the command exited 0. */
  check?: boolean;
}

export interface AttachOptions extends CallOptions {
  /** Offset to start from (default 0: the oldest byte kept). */
  from?: number;
  output?: api.ExecRequest["output"];
  streamTimeoutMs?: number;
}

export type CreateOptions = api.SandboxCreate & CallOptions;
export type SandboxPatch = api.SandboxPatch;
export type FileEntry = api.FileEntry;
export type Checkpoint = api.Checkpoint;
export type Template = api.Template;
export type TemplateVersion = api.TemplateVersion;
export type TemplateTag = api.TemplateTag;
export type Credential = api.Credential;
export type Webhook = api.Webhook;
export type SpaceEvent = api.Event;
export type Key = api.Key;
export type KeyCreated = api.KeyCreated;
export type ProcessInfo = api.Process;

const EXEC_QUIET_MAX_MS = 24 * 3600 * 1000;

/** An exec stream's events, NDJSON or frames as its Content-Type says. */
async function* execEvents(r: { headers: Headers; body: ReadableStream<Uint8Array> }): AsyncGenerator<ExecEvent> {
  if ((r.headers.get("content-type") ?? "").startsWith(FRAMES_TYPE)) {
    yield* frames(r.body);
    return;
  }
  for await (const d of ndjson(r.body)) yield new ExecEvent(d);
}

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name] || undefined;
}

function drop<T extends Record<string, unknown>>(o: T): Partial<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as Partial<T>;
}

function split<T extends CallOptions>(o: T | undefined): [Omit<T, "signal" | "timeoutMs">, CallOptions] {
  const { signal, timeoutMs, ...rest } = (o ?? {}) as T;
  return [rest, { signal, timeoutMs }];
}

function atLeast(c: CallOptions, ms: number, base: number): CallOptions {
  return { ...c, timeoutMs: c.timeoutMs ?? Math.max(base, ms) };
}

function execBody(cmd: Command, o: ExecOptions, background: boolean): api.ExecRequest {
  let what: Pick<api.ExecRequest, "cmd" | "shell">;
  if (typeof cmd === "string") what = { shell: cmd };
  else if (Array.isArray(cmd) && cmd.length > 0 && cmd.every((a) => typeof a === "string")) what = { cmd: [...cmd] };
  else throw new TypeError("cmd must be a non-empty array of strings, or a string (run by /bin/sh -c)");
  // typed as the spec's ExecRequest: a field the spec drops or renames fails the build
  const body: api.ExecRequest = {
    ...what, env: o.env, cwd: o.cwd, user: o.user, stdin: o.stdin, timeout_s: o.timeoutS, pty: o.pty,
    output: o.output, on_disconnect: o.onDisconnect, background: background || undefined,
  };
  return drop({ ...body, ...(o.extra ?? {}) }) as api.ExecRequest;
}

/** A sandbox: its fields as the server sent them, and the calls for it. */
export interface Sandbox extends api.Sandbox {}
export class Sandbox {
  /** The JSON the server sent (fields a newer server adds are there too). */
  declare readonly raw: api.Sandbox;
  declare private readonly client: Client;

  constructor(client: Client, d: api.Sandbox) {
    Object.assign(this, d);
    Object.defineProperty(this, "client", { value: client, enumerable: false });
    Object.defineProperty(this, "raw", { value: d, enumerable: false });
  }

  exec(cmd: Command, o?: RunOptions) { return this.client.exec(this.id, cmd, o); }
  execStream(cmd: Command, o?: ExecOptions) { return this.client.execStream(this.id, cmd, o); }
  start(cmd: Command, o?: ExecOptions) { return this.client.start(this.id, cmd, o); }
  attach(execId: string, o?: AttachOptions) { return this.client.attach(this.id, execId, o); }
  processes(o?: CallOptions) { return this.client.processes(this.id, o); }
  readFile(path: string, o?: CallOptions) { return this.client.readFile(this.id, path, o); }
  readFileText(path: string, o?: CallOptions) { return this.client.readFileText(this.id, path, o); }
  readFileStream(path: string, o?: CallOptions & { idleTimeoutMs?: number }) {
    return this.client.readFileStream(this.id, path, o);
  }
  writeFile(path: string, data: BodyInput, o?: WriteOptions) { return this.client.writeFile(this.id, path, data, o); }
  listFiles(path: string, o?: CallOptions) { return this.client.listFiles(this.id, path, o); }
  stat(path: string, o?: CallOptions) { return this.client.stat(this.id, path, o); }
  mkdir(path: string, o?: MkdirOptions) { return this.client.mkdir(this.id, path, o); }
  remove(path: string, o?: RemoveOptions) { return this.client.remove(this.id, path, o); }
  move(from: string, to: string, o?: CallOptions) { return this.client.move(this.id, from, to, o); }
  checkpoint(name?: string, o?: CheckpointOptions) { return this.client.checkpoint(this.id, name, o); }
  /** Its checkpoints (the field `checkpoints` is their count). */
  listCheckpoints(o?: CallOptions) { return this.client.checkpoints(this.id, o); }
  restore(checkpoint: string, o?: CallOptions) { return this.client.restore(this.id, checkpoint, o); }
  branch(count = 1, o?: BranchOptions) { return this.client.branch(this.id, count, o); }
  update(fields: SandboxPatch, o?: CallOptions) { return this.client.update(this.id, fields, o); }
  setPolicy(policy: api.NetworkPolicyRequest, o?: CallOptions) { return this.client.setPolicy(this.id, policy, o); }
  pause(o?: CallOptions) { return this.client.pause(this.id, o); }
  resume(o?: CallOptions) { return this.client.resume(this.id, o); }
  suspend(o?: CallOptions) { return this.client.suspend(this.id, o); }
  refresh(o?: CallOptions) { return this.client.get(this.id, o); }
  delete(o?: CallOptions) { return this.client.delete(this.id, o); }
}

/** A command started in the background (start()): its exec id and pid, and the calls that reach it. */
export class Process {
  constructor(private readonly client: Client, readonly sandboxId: string, readonly execId: string,
              readonly pid: number) {}

  sendStdin(data: Uint8Array | string, o?: CallOptions & { eof?: boolean }) {
    return this.client.sendStdin(this.sandboxId, this.execId, data, o);
  }
  signal(signal: api.SignalRequest["signal"] = "SIGTERM", o?: CallOptions) {
    return this.client.signal(this.sandboxId, this.execId, signal, o);
  }
  kill(o?: CallOptions) { return this.signal("SIGKILL", o); }
  resize(rows: number, cols: number, o?: CallOptions) {
    return this.client.resize(this.sandboxId, this.execId, rows, cols, o);
  }
  /** Its output events from offset `from` on, to its end. */
  attach(o?: AttachOptions) { return this.client.attach(this.sandboxId, this.execId, o); }
  /** Waits for its end: the output from offset `from` (default 0) and the exit. */
  wait(o?: AttachOptions & CollectOptions) { return collect(this.attach(o), o); }
}

export interface WriteOptions extends CallOptions { mode?: number; parents?: boolean }
export interface MkdirOptions extends CallOptions { mode?: number; parents?: boolean }
export interface RemoveOptions extends CallOptions { recursive?: boolean }
export interface CheckpointOptions extends CallOptions { withMemory?: boolean }
export interface BranchOptions extends CallOptions { fromCheckpoint?: string; withMemory?: boolean }
export interface EventQuery extends CallOptions {
  sandbox?: string; type?: string; after?: number; since?: string; limit?: number;
}

/** A space client. Every call has a timeout and takes an AbortSignal; 429 and 503
 * answers are retried with backoff (honouring Retry-After). */
export class Client {
  readonly transport: Transport;

  constructor(o: ClientOptions = {}) {
    const url = o.url ?? env("SPACE_URL") ?? DEFAULT_URL;
    if (!/^https?:\/\/[^/]+/.test(url)) throw new TypeError(`SPACE_URL must be http(s)://host[:port], not ${url}`);
    this.transport = new Transport({
      url, apiKey: o.apiKey ?? env("SPACE_API_KEY"), timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      retries: o.retries ?? DEFAULT_RETRIES, fetch: o.fetch, headers: o.headers,
    });
  }

  private j<T>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    return this.transport.json<T>(method, path, o);
  }

  private get t(): number {
    return this.transport.timeoutMs;
  }

  private sb(d: api.Sandbox): Sandbox {
    return new Sandbox(this, d);
  }

  // ---- deployment ----
  info(o?: CallOptions) { return this.j<api.Info>("GET", "/v1/info", o); }
  health(o?: CallOptions) { return this.j<Record<string, unknown>>("GET", "/healthz", o); }
  /** 200 when the store and the worker answer (a load balancer's probe); a 503 throws, naming the part. */
  ready(o?: CallOptions) { return this.j<Record<string, unknown>>("GET", "/readyz", o); }

  // ---- tenants (an admin key sets quotas; a tenant's key reads its own) ----
  async tenants(o?: CallOptions): Promise<api.Tenant[]> {
    return (await this.j<api.TenantList>("GET", "/v1/tenants", o)).tenants;
  }

  tenant(name: string, o?: CallOptions): Promise<api.Tenant> {
    return this.j("GET", `/v1/tenants/${seg(name)}`, o);
  }

  /** Sets the quotas given (null resets one to the server's default) and `default_runtime`. */
  setTenant(name: string, quotas: api.TenantQuotasSet, o?: CallOptions): Promise<api.Tenant> {
    return this.j("PUT", `/v1/tenants/${seg(name)}`, { json: quotas, ...o });
  }

  // ---- ports (the ingress) and metrics ----
  /** How to reach a port of a sandbox through the ingress: its url, traffic token and a one-time link. */
  port(id: string, port: number, o?: CallOptions): Promise<api.SandboxPort> {
    const p = String(port);
    return this.j("GET", `/v1/sandboxes/${seg(id)}/ports/${seg(p)}`, o);
  }

  /** The sandbox's usage samples (every 5 s, the last hour), since a time if given. */
  async metrics(id: string, o: CallOptions & { since?: string } = {}): Promise<api.SandboxMetric[]> {
    const [q, c] = split(o);
    return (await this.j<api.SandboxMetrics>("GET", `/v1/sandboxes/${seg(id)}/metrics`, { query: { ...q }, ...c }))
      .metrics;
  }

  // ---- sandboxes ----
  /** A new running sandbox (POST /v1/sandboxes); fields as in docs/API.md. */
  async create(o: CreateOptions = {}): Promise<Sandbox> {
    const [body, c] = split(o);
    return this.sb(await this.j("POST", "/v1/sandboxes", { json: body, ...atLeast(c, LONG_MS, this.t) }));
  }

  async get(id: string, o?: CallOptions): Promise<Sandbox> {
    return this.sb(await this.j("GET", `/v1/sandboxes/${seg(id)}`, o));
  }

  /** One page: the sandboxes and the cursor of the next (or null). */
  async listPage(o: CallOptions & { state?: string; limit?: number; after?: string } = {}) {
    const [q, c] = split(o);
    const v = await this.j<api.SandboxList>("GET", "/v1/sandboxes", { query: q, ...c });
    return { sandboxes: v.sandboxes.map((s) => this.sb(s)), next: v.next ?? null };
  }

  /** Every sandbox of the tenant (all pages). */
  async list(o: CallOptions & { state?: string; pageSize?: number } = {}): Promise<Sandbox[]> {
    const out: Sandbox[] = [];
    let after: string | undefined;
    for (;;) {
      const p = await this.listPage({ state: o.state, limit: o.pageSize, after, signal: o.signal,
                                      timeoutMs: o.timeoutMs });
      out.push(...p.sandboxes);
      if (!p.next) return out;
      after = p.next;
    }
  }

  async delete(id: string, o: CallOptions = {}): Promise<Sandbox> {
    return this.sb(await this.j("DELETE", `/v1/sandboxes/${seg(id)}`, atLeast(o, LONG_MS, this.t)));
  }

  /** PATCH: timeout_s, idle_s, idle_action, checkpoint_every_s, auto_resume, ... */
  async update(id: string, fields: SandboxPatch, o?: CallOptions): Promise<Sandbox> {
    return this.sb(await this.j("PATCH", `/v1/sandboxes/${seg(id)}`, { json: fields, ...o }));
  }

  /** Replaces the egress policy: {allow: [...], deny: [...]}. */
  async setPolicy(id: string, policy: api.NetworkPolicyRequest, o?: CallOptions): Promise<Sandbox> {
    return this.sb(await this.j("PUT", `/v1/sandboxes/${seg(id)}/policy`, { json: policy, ...o }));
  }

  async pause(id: string, o?: CallOptions): Promise<Sandbox> {
    return this.sb(await this.j("POST", `/v1/sandboxes/${seg(id)}/pause`, o));
  }

  async resume(id: string, o: CallOptions = {}): Promise<Sandbox> {
    return this.sb(await this.j("POST", `/v1/sandboxes/${seg(id)}/resume`, atLeast(o, LONG_MS, this.t)));
  }

  async suspend(id: string, o: CallOptions = {}): Promise<Sandbox> {
    return this.sb(await this.j("POST", `/v1/sandboxes/${seg(id)}/suspend`, atLeast(o, LONG_MS, this.t)));
  }

  // ---- checkpoints and branches ----
  checkpoint(id: string, name?: string, o: CheckpointOptions = {}): Promise<Checkpoint> {
    const [rest, c] = split(o);
    return this.j("POST", `/v1/sandboxes/${seg(id)}/checkpoints`, {
      json: drop({ name, with_memory: rest.withMemory } satisfies api.CheckpointCreate), ...atLeast(c, LONG_MS, this.t),
    });
  }

  async checkpoints(id: string, o?: CallOptions): Promise<Checkpoint[]> {
    return (await this.j<api.CheckpointList>("GET", `/v1/sandboxes/${seg(id)}/checkpoints`, o)).checkpoints;
  }

  async deleteCheckpoint(id: string, checkpoint: string, o?: CallOptions): Promise<void> {
    await this.j("DELETE", `/v1/sandboxes/${seg(id)}/checkpoints/${seg(checkpoint)}`, o);
  }

  async restore(id: string, checkpoint: string, o: CallOptions = {}): Promise<Sandbox> {
    return this.sb(await this.j("POST", `/v1/sandboxes/${seg(id)}/restore`, {
      json: { checkpoint } satisfies api.RestoreRequest, ...atLeast(o, LONG_MS, this.t),
    }));
  }

  /** count new sandboxes from its files now (or from a checkpoint), all or nothing. */
  async branch(id: string, count = 1, o: BranchOptions = {}): Promise<Sandbox[]> {
    const [rest, c] = split(o);
    const v = await this.j<api.BranchResult>("POST", `/v1/sandboxes/${seg(id)}/branch`, {
      json: drop({ count, from: rest.fromCheckpoint, with_memory: rest.withMemory } satisfies api.BranchRequest),
      ...atLeast(c, BRANCH_MS, this.t),
    });
    return v.sandboxes.map((s) => this.sb(s));
  }

  // ---- exec ----
  private quiet(o: ExecOptions): number {
    return o.streamTimeoutMs ?? (o.timeoutS ? Math.max(this.t, (o.timeoutS + 30) * 1000) : EXEC_QUIET_MAX_MS);
  }

  /** The command's events as they happen (start, stdout, stderr, ..., exit). A string runs
   * by /bin/sh -c, an array as argv. Leaving the loop early ends the stream (the command
   * then runs on or not as onDisconnect says). */
  async *execStream(id: string, cmd: Command, o: ExecOptions = {}): AsyncGenerator<ExecEvent> {
    const body = execBody(cmd, o, false);
    const r = await this.transport.request("POST", `/v1/sandboxes/${seg(id)}/exec`, {
      json: body, stream: true, signal: o.signal, timeoutMs: o.timeoutMs, idleTimeoutMs: this.quiet(o),
    });
    try {
      yield* execEvents(r);
    } finally {
      r.close();
    }
  }

  /** Runs a command to its end: exitCode, stdout, stderr (bytes, and as text), signal, reason.
   * onStdout/onStderr get each chunk as it comes; check: true throws ExecFailed unless it exited 0. */
  async exec(id: string, cmd: Command, o: RunOptions = {}): Promise<ExecResult> {
    const res = await collect(this.execStream(id, cmd, o), o);
    if (o.check && res.exitCode !== 0) {
      if (res.error) throw new (errorClass(res.error.code))(res.error.message, { code: res.error.code });
      throw new ExecFailed(`exit code ${res.exitCode}${res.signal ? ` (${res.signal})` : ""}`);
    }
    return res;
  }

  /** Starts a command in the background: a Process (stdin with stdin: true, signal, resize,
   * attach). It outlives this call. */
  async start(id: string, cmd: Command, o: ExecOptions = {}): Promise<Process> {
    const body = execBody(cmd, o, true);
    const r = await this.transport.request("POST", `/v1/sandboxes/${seg(id)}/exec`, {
      json: body, stream: true, signal: o.signal, timeoutMs: o.timeoutMs, idleTimeoutMs: o.timeoutMs ?? this.t,
    });
    try {
      for await (const ev of execEvents(r)) {
        if (ev.type === "start") return new Process(this, id, ev.execId ?? "", ev.pid ?? 0);
        if (ev.type === "error") {
          throw new (errorClass(ev.errorCode ?? "exec_failed"))(ev.message ?? "the command could not be started",
            { code: ev.errorCode });
        }
      }
    } finally {
      r.close();
    }
    throw new ExecFailed("the server sent no start event");
  }

  /** Reattaches to an exec (running, background or finished): its events from offset
   * `from` on (start first, dropped if the buffer lost some), to its end. */
  async *attach(id: string, execId: string, o: AttachOptions = {}): AsyncGenerator<ExecEvent> {
    const r = await this.transport.request("GET", `/v1/sandboxes/${seg(id)}/exec/${seg(execId)}/output`, {
      query: { from: o.from, output: o.output }, stream: true, signal: o.signal, timeoutMs: o.timeoutMs,
      idleTimeoutMs: o.streamTimeoutMs ?? EXEC_QUIET_MAX_MS,
    });
    try {
      yield* execEvents(r);
    } finally {
      r.close();
    }
  }

  async processes(id: string, o?: CallOptions): Promise<ProcessInfo[]> {
    return (await this.j<api.ProcessList>("GET", `/v1/sandboxes/${seg(id)}/exec`, o)).processes;
  }

  async sendStdin(id: string, execId: string, data: Uint8Array | string,
                  o: CallOptions & { eof?: boolean } = {}): Promise<void> {
    const [rest, c] = split(o);
    await this.j("POST", `/v1/sandboxes/${seg(id)}/exec/${seg(execId)}/stdin`, {
      body: data, contentType: "application/octet-stream", query: { eof: rest.eof ? true : undefined }, ...c,
    });
  }

  async signal(id: string, execId: string, signal: api.SignalRequest["signal"] = "SIGTERM",
               o?: CallOptions): Promise<void> {
    const json: api.SignalRequest = { signal };
    await this.j("POST", `/v1/sandboxes/${seg(id)}/exec/${seg(execId)}/signal`, { json, ...o });
  }

  async resize(id: string, execId: string, rows: number, cols: number, o?: CallOptions): Promise<void> {
    const json: api.ResizeRequest = { rows, cols };
    await this.j("POST", `/v1/sandboxes/${seg(id)}/exec/${seg(execId)}/resize`, { json, ...o });
  }

  // ---- files ----
  /** The file's bytes. */
  async readFile(id: string, path: string, o?: CallOptions): Promise<Uint8Array> {
    const r = await this.transport.request("GET", `/v1/sandboxes/${seg(id)}/files`, { query: { path }, ...o });
    return new Uint8Array(await new Response(r.body).arrayBuffer());
  }

  async readFileText(id: string, path: string, o?: CallOptions): Promise<string> {
    return new TextDecoder().decode(await this.readFile(id, path, o));
  }

  /** The file's bytes as they come (any size): a ReadableStream (async-iterable on Node). */
  async readFileStream(id: string, path: string,
                       o: CallOptions & { idleTimeoutMs?: number } = {}): Promise<ReadableStream<Uint8Array>> {
    const r = await this.transport.request("GET", `/v1/sandboxes/${seg(id)}/files`, {
      query: { path }, stream: true, signal: o.signal, timeoutMs: o.timeoutMs, idleTimeoutMs: o.idleTimeoutMs ?? this.t,
    });
    return r.body;
  }

  /** Writes bytes, a string, a Blob, a ReadableStream or (async) iterable of chunks (streamed);
   * the file appears whole or not at all. */
  writeFile(id: string, path: string, data: BodyInput, o: WriteOptions = {}): Promise<api.FileWritten> {
    const [rest, c] = split(o);
    return this.j("PUT", `/v1/sandboxes/${seg(id)}/files`, {
      body: data, contentType: "application/octet-stream",
      query: { path, parents: rest.parents === false ? undefined : true, mode: rest.mode?.toString(8) },
      ...atLeast(c, UPLOAD_MS, this.t),
    });
  }

  async listFiles(id: string, path: string, o?: CallOptions): Promise<FileEntry[]> {
    return (await this.j<api.FileList>("GET", `/v1/sandboxes/${seg(id)}/files`, { query: { path, list: true }, ...o }))
      .entries;
  }

  stat(id: string, path: string, o?: CallOptions): Promise<FileEntry> {
    return this.j("GET", `/v1/sandboxes/${seg(id)}/files`, { query: { path, stat: true }, ...o });
  }

  async mkdir(id: string, path: string, o: MkdirOptions = {}): Promise<void> {
    const [rest, c] = split(o);
    await this.j("PUT", `/v1/sandboxes/${seg(id)}/files`, {
      query: { path, type: "dir", parents: rest.parents === false ? undefined : true, mode: rest.mode?.toString(8) },
      body: new Uint8Array(0), ...c,
    });
  }

  async remove(id: string, path: string, o: RemoveOptions = {}): Promise<void> {
    const [rest, c] = split(o);
    await this.j("DELETE", `/v1/sandboxes/${seg(id)}/files`, {
      query: { path, recursive: rest.recursive ? true : undefined }, ...c,
    });
  }

  async move(id: string, from: string, to: string, o?: CallOptions): Promise<void> {
    await this.j("POST", `/v1/sandboxes/${seg(id)}/files/move`, { json: { from, to } satisfies api.MoveRequest, ...o });
  }

  // ---- templates ----
  async templates(o?: CallOptions): Promise<Template[]> {
    return (await this.j<api.TemplateList>("GET", "/v1/templates", o)).templates;
  }

  /** A template from a tar archive (bytes, Blob or chunks, streamed; admin key). */
  importTemplate(name: string, tar: BodyInput, o: CallOptions = {}): Promise<Template> {
    return this.j("POST", "/v1/templates", {
      query: { name }, body: tar, contentType: "application/x-tar", ...atLeast(o, IMPORT_MS, this.t),
    });
  }

  /** A template's versions, newest first: every import, pull or build is one; the name means the newest.
   * `create({ template: "NAME:TAG" })` or `"NAME@vN"` makes a sandbox from an older one. */
  async templateVersions(name: string, o?: CallOptions): Promise<TemplateVersion[]> {
    return (await this.j<api.TemplateVersionList>("GET", `/v1/templates/${seg(name)}/versions`, o)).versions;
  }

  async templateTags(name: string, o?: CallOptions): Promise<TemplateTag[]> {
    return (await this.j<api.TemplateTagList>("GET", `/v1/templates/${seg(name)}/tags`, o)).tags;
  }

  /** Points `tag` at a version (default: the newest); a tag set again moves (admin key). */
  tagTemplate(name: string, tag: string, version?: number, o?: CallOptions): Promise<TemplateTag> {
    const json: api.TemplateTagSet = { tag, ...(version ? { version } : {}) };
    return this.j("POST", `/v1/templates/${seg(name)}/tags`, { json, ...o });
  }

  async untagTemplate(name: string, tag: string, o?: CallOptions): Promise<void> {
    await this.j("DELETE", `/v1/templates/${seg(name)}/tags/${seg(tag)}`, o);
  }

  async deleteTemplate(name: string, o?: CallOptions): Promise<void> {
    await this.j("DELETE", `/v1/templates/${seg(name)}`, o);
  }

  /** Sets the template's `runtime` and `start` (command and ready check) for every sandbox made from it;
   * null removes one, a setting left out is kept (admin key). */
  updateTemplate(name: string, settings: api.TemplateSettingsSet, o?: CallOptions): Promise<Template> {
    return this.j("PATCH", `/v1/templates/${seg(name)}`, { json: settings, ...o });
  }

  /** A template from an image in a registry (`registry/repo:tag` or `...@sha256:`; admin key), logged in
   * with a stored basic credential if named. */
  pullTemplate(name: string, ref: string, o: CallOptions & { credential?: string } = {}): Promise<Template> {
    const [rest, c] = split(o);
    const json: api.TemplatePull = { ref, ...(rest.credential ? { credential: rest.credential } : {}) };
    return this.j("POST", `/v1/templates/${seg(name)}/pull`, { json, ...atLeast(c, IMPORT_MS, this.t) });
  }

  /** Builds template `name` from a Dockerfile (admin key). `context` is a tar of the build context (bytes, Blob
   * or chunks) holding the Dockerfile (`dockerfile`: its path in it); `buildArgs` are ARG values, `allow` the
   * hosts the RUN steps may reach (default none). `onEvent` sees every progress line (step, output, result,
   * error) as it comes. Resolves to the result line; a failed step rejects with a SpaceError and leaves the
   * previous version of the template in place. */
  async buildTemplate(name: string, context: BodyInput, o: CallOptions & {
    dockerfile?: string; buildArgs?: Record<string, string>; allow?: string[];
    onEvent?: (e: api.BuildEvent) => void;
  } = {}): Promise<api.BuildEvent> {
    const { dockerfile, buildArgs, allow, onEvent, ...c } = o;
    const query: Record<string, string> = {};
    if (dockerfile) query.dockerfile = dockerfile;
    if (buildArgs && Object.keys(buildArgs).length) query.build_args = JSON.stringify(buildArgs);
    if (allow && allow.length) query.network = JSON.stringify({ allow });
    const r = await this.transport.request("POST", `/v1/templates/${seg(name)}/build`, {
      query, body: context, contentType: "application/x-tar", stream: true, ...atLeast(c, IMPORT_MS, this.t),
      idleTimeoutMs: EXEC_QUIET_MAX_MS,
    });
    let result: api.BuildEvent | undefined;
    try {
      for await (const d of ndjson<api.BuildEvent>(r.body)) {
        onEvent?.(d);
        if (d.type === "error") throw new SpaceError(d.message ?? "the build failed", { code: d.code });
        if (d.type === "result") result = d;
      }
    } finally {
      r.close();
    }
    if (!result) throw new SpaceError("the build's stream ended without a result");
    return result;
  }

  // ---- volumes (kept beyond any sandbox; mounted with create({volumes: [{name, path, read_only}]})) ----
  async volumes(o?: CallOptions): Promise<api.Volume[]> {
    return (await this.j<api.VolumeList>("GET", "/v1/volumes", o)).volumes;
  }

  createVolume(name: string, o: CallOptions & { sizeMb?: number } = {}): Promise<api.Volume> {
    const [rest, c] = split(o);
    const json: api.VolumeCreate = { name, ...(rest.sizeMb !== undefined ? { size_mb: rest.sizeMb } : {}) };
    return this.j("POST", "/v1/volumes", { json, ...c });
  }

  volume(name: string, o?: CallOptions): Promise<api.Volume> {
    return this.j("GET", `/v1/volumes/${seg(name)}`, o);
  }

  /** 409 volume_in_use while a sandbox mounts it. */
  async deleteVolume(name: string, o?: CallOptions): Promise<void> {
    await this.j("DELETE", `/v1/volumes/${seg(name)}`, o);
  }

  /** A new volume named to, a writable snapshot of name (on its worker; it may be in use). */
  cloneVolume(name: string, to: string, o?: CallOptions): Promise<api.Volume> {
    return this.j("POST", `/v1/volumes/${seg(name)}/clone`, { json: { name: to }, ...o });
  }

  /** A new volume named to, a read-only snapshot of name as it is now (mounted read-only only; a clone of it restores it). */
  snapshotVolume(name: string, to: string, o?: CallOptions): Promise<api.Volume> {
    return this.j("POST", `/v1/volumes/${seg(name)}/snapshot`, { json: { name: to }, ...o });
  }

  /** A file of a volume without a sandbox (at most 512 KiB). */
  async readVolumeFile(name: string, path: string, o?: CallOptions): Promise<Uint8Array> {
    const r = await this.transport.request("GET", `/v1/volumes/${seg(name)}/files`, { query: { path }, ...o });
    return new Uint8Array(await new Response(r.body).arrayBuffer());
  }

  async listVolumeFiles(name: string, path = "/", o?: CallOptions): Promise<api.VolumeDir["entries"]> {
    return (await this.j<api.VolumeDir>("GET", `/v1/volumes/${seg(name)}/files`, { query: { path, list: true }, ...o }))
      .entries;
  }

  async writeVolumeFile(name: string, path: string, data: BodyInput, o?: CallOptions): Promise<void> {
    await this.j("PUT", `/v1/volumes/${seg(name)}/files`, {
      query: { path }, body: data, contentType: "application/octet-stream", ...o,
    });
  }

  async removeVolumeFile(name: string, path: string, o?: CallOptions): Promise<void> {
    await this.j("DELETE", `/v1/volumes/${seg(name)}/files`, { query: { path }, ...o });
  }

  /** The volumes a sandbox mounts. */
  async sandboxVolumes(id: string, o?: CallOptions): Promise<api.VolumeMount[]> {
    return (await this.j<{ volumes: api.VolumeMount[] }>("GET", `/v1/sandboxes/${seg(id)}/volumes`, o)).volumes;
  }

  // ---- credentials ----
  createCredential(c: api.CredentialCreate, o?: CallOptions): Promise<Credential> {
    return this.j("POST", "/v1/credentials", { json: c, ...o });
  }

  async credentials(o?: CallOptions): Promise<Credential[]> {
    return (await this.j<api.CredentialList>("GET", "/v1/credentials", o)).credentials;
  }

  credential(name: string, o?: CallOptions): Promise<Credential> {
    return this.j("GET", `/v1/credentials/${seg(name)}`, o);
  }

  /** PATCH: value (a rotation), hosts, header, basic_user, env, expires_at. */
  updateCredential(name: string, fields: api.CredentialPatch, o?: CallOptions): Promise<Credential> {
    return this.j("PATCH", `/v1/credentials/${seg(name)}`, { json: fields, ...o });
  }

  revokeCredential(name: string, o?: CallOptions): Promise<Credential> {
    return this.j("POST", `/v1/credentials/${seg(name)}/revoke`, o);
  }

  async deleteCredential(name: string, o?: CallOptions): Promise<void> {
    await this.j("DELETE", `/v1/credentials/${seg(name)}`, o);
  }

  grant(id: string, credential: string, o?: CallOptions): Promise<Credential> {
    return this.j("POST", `/v1/sandboxes/${seg(id)}/credentials/${seg(credential)}`, o);
  }

  async ungrant(id: string, credential: string, o?: CallOptions): Promise<void> {
    await this.j("DELETE", `/v1/sandboxes/${seg(id)}/credentials/${seg(credential)}`, o);
  }

  async grants(id: string, o?: CallOptions): Promise<Credential[]> {
    return (await this.j<api.CredentialList>("GET", `/v1/sandboxes/${seg(id)}/credentials`, o)).credentials;
  }

  // ---- webhooks ----
  /** The answer carries the secret this once (generated when none is given). */
  createWebhook(w: api.WebhookCreate, o?: CallOptions): Promise<Webhook> {
    return this.j("POST", "/v1/webhooks", { json: w, ...o });
  }

  async webhooks(o?: CallOptions): Promise<Webhook[]> {
    return (await this.j<api.WebhookList>("GET", "/v1/webhooks", o)).webhooks;
  }

  webhook(id: string, o?: CallOptions): Promise<Webhook> {
    return this.j("GET", `/v1/webhooks/${seg(id)}`, o);
  }

  /** PATCH: url, events, name, enabled. */
  updateWebhook(id: string, fields: api.WebhookPatch, o?: CallOptions): Promise<Webhook> {
    return this.j("PATCH", `/v1/webhooks/${seg(id)}`, { json: fields, ...o });
  }

  async deleteWebhook(id: string, o?: CallOptions): Promise<void> {
    await this.j("DELETE", `/v1/webhooks/${seg(id)}`, o);
  }

  /** A signed webhook.test delivery now; a receiver that does not take it is a 502 (BadGatewayError). */
  testWebhook(id: string, o?: CallOptions): Promise<api.WebhookTested> {
    return this.j("POST", `/v1/webhooks/${seg(id)}/test`, o);
  }

  // ---- events and keys ----
  /** One page of events, and the seq to continue after. */
  events(o: EventQuery = {}): Promise<api.EventList> {
    const [q, c] = split(o);
    return this.j("GET", "/v1/events", { query: { ...q }, ...c });
  }

  /** Events as they happen (break out of the loop, or abort the signal, to stop). */
  async *followEvents(o: Omit<EventQuery, "limit"> = {}): AsyncGenerator<SpaceEvent> {
    const [q, c] = split(o);
    const r = await this.transport.request("GET", "/v1/events", {
      query: { ...q, follow: true }, stream: true, ...c, idleTimeoutMs: EXEC_QUIET_MAX_MS,
    });
    try {
      for await (const d of ndjson<SpaceEvent>(r.body)) yield d;
    } finally {
      r.close();
    }
  }

  createKey(name: string, o: CallOptions & { tenant?: string; admin?: boolean } = {}): Promise<KeyCreated> {
    const [rest, c] = split(o);
    const json: api.KeyCreate = { name, tenant: rest.tenant, admin: rest.admin };
    return this.j("POST", "/v1/keys", { json: drop(json), ...c });
  }

  async keys(o?: CallOptions): Promise<Key[]> {
    return (await this.j<api.KeyList>("GET", "/v1/keys", o)).keys;
  }

  async deleteKey(id: string, o?: CallOptions): Promise<void> {
    await this.j("DELETE", `/v1/keys/${seg(id)}`, o);
  }
}

export { SpaceError };
