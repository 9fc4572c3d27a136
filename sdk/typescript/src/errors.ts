// SPDX-License-Identifier: MIT
// Errors: one class per API error code (the code table of src/shared/api-error.c),
// all below SpaceError, which carries status, code, message and retryAfter.

import type { Error as ApiErrorBody } from "./generated/api-types.js";

/** Every code the server may answer with (the spec's Error.code enum). */
export type ApiErrorCode = ApiErrorBody["error"]["code"];

export interface SpaceErrorOptions {
  status?: number;
  code?: string;
  retryAfter?: number;
  body?: string;
}

/** An error answered by spaced (status, code, message) or met on the way. */
export class SpaceError extends Error {
  static code = "error";
  readonly status?: number;
  readonly code: string;
  /** Seconds the server asked to wait (Retry-After), if it said. */
  readonly retryAfter?: number;
  readonly body?: string;

  constructor(message: string, opts: SpaceErrorOptions = {}) {
    super(message);
    this.name = new.target.name;
    this.status = opts.status;
    this.code = opts.code || (new.target as unknown as { code: string }).code;
    this.retryAfter = opts.retryAfter;
    this.body = opts.body;
  }

  override toString(): string {
    return `${this.name}: ${this.status ? `${this.status} ` : ""}${this.code}: ${this.message}`;
  }
}

/** spaced could not be reached, or the connection broke. */
export class ConnectionFailed extends SpaceError { static override code = "connection_failed"; }
/** A request or stream did not finish in its time (the client's timeout, or 504). */
export class Timeout extends SpaceError { static override code = "timeout"; }
/** The caller's AbortSignal ended the call. */
export class Aborted extends SpaceError { static override code = "aborted"; }
export class BadRequest extends SpaceError { static override code = "bad_request"; }
export class InvalidArgument extends BadRequest { static override code = "invalid_argument"; }
export class InvalidJson extends BadRequest { static override code = "invalid_json"; }
export class UnknownField extends BadRequest { static override code = "unknown_field"; }
export class InvalidPath extends BadRequest { static override code = "invalid_path"; }
export class Unauthorized extends SpaceError { static override code = "unauthorized"; }
export class Forbidden extends SpaceError { static override code = "forbidden"; }
export class NotFound extends SpaceError { static override code = "not_found"; }
export class MethodNotAllowed extends SpaceError { static override code = "method_not_allowed"; }
export class Conflict extends SpaceError { static override code = "conflict"; }
export class SandboxNotRunning extends Conflict { static override code = "sandbox_not_running"; }
export class SandboxPaused extends Conflict { static override code = "sandbox_paused"; }
export class TemplateInUse extends Conflict { static override code = "template_in_use"; }
export class AlreadyExists extends Conflict { static override code = "already_exists"; }
/** A volume is mounted (one writer or many readers), or deleted while in use. */
export class VolumeInUse extends Conflict { static override code = "volume_in_use"; }
/** This host cannot do what was asked (e.g. a volume without btrfs quotas, or on the vm runtime). */
export class Unsupported extends BadRequest { static override code = "unsupported"; }
export class PayloadTooLarge extends SpaceError { static override code = "payload_too_large"; }
export class UriTooLong extends SpaceError { static override code = "uri_too_long"; }
export class UnsupportedMediaType extends SpaceError { static override code = "unsupported_media_type"; }
/** A rate limit or quota: retryAfter says when to try again. */
export class TooManyRequests extends SpaceError { static override code = "too_many_requests"; }
export class HeadersTooLarge extends SpaceError { static override code = "headers_too_large"; }
export class Internal extends SpaceError { static override code = "internal"; }
export class NotImplementedByServer extends SpaceError { static override code = "not_implemented"; }
export class BadGateway extends SpaceError { static override code = "bad_gateway"; }
export class Unavailable extends SpaceError { static override code = "unavailable"; }
export class WorkerUnavailable extends Unavailable { static override code = "worker_unavailable"; }
export class InsufficientStorage extends SpaceError { static override code = "insufficient_storage"; }
/** The command could not be started (an exec stream's error event), or check: true and it failed. */
export class ExecFailed extends SpaceError { static override code = "exec_failed"; }
/** The sandbox went away under a running command (exec stream error sandbox_gone). */
export class SandboxGone extends SpaceError { static override code = "sandbox_gone"; }
/** A finished exec was dropped from the agent's memory while being read. */
export class ExecExpired extends SpaceError { static override code = "exec_expired"; }

type ErrorClass = (new (message: string, opts?: SpaceErrorOptions) => SpaceError) & { code: string };

/** Error class by API code: every code of the spec but "ok" must be here (the test checks). */
export const ERROR_CLASSES: Record<Exclude<ApiErrorCode, "ok">, ErrorClass> & Record<string, ErrorClass> = {
  bad_request: BadRequest,
  invalid_json: InvalidJson,
  unknown_field: UnknownField,
  invalid_argument: InvalidArgument,
  invalid_path: InvalidPath,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  not_found: NotFound,
  method_not_allowed: MethodNotAllowed,
  conflict: Conflict,
  sandbox_not_running: SandboxNotRunning,
  sandbox_paused: SandboxPaused,
  template_in_use: TemplateInUse,
  already_exists: AlreadyExists,
  volume_in_use: VolumeInUse,
  unsupported: Unsupported,
  payload_too_large: PayloadTooLarge,
  unsupported_media_type: UnsupportedMediaType,
  too_many_requests: TooManyRequests,
  internal: Internal,
  not_implemented: NotImplementedByServer,
  bad_gateway: BadGateway,
  unavailable: Unavailable,
  timeout: Timeout,
  insufficient_storage: InsufficientStorage,
  uri_too_long: UriTooLong,
  headers_too_large: HeadersTooLarge,
  worker_unavailable: WorkerUnavailable,
  exec_failed: ExecFailed,
  sandbox_gone: SandboxGone,
  exec_expired: ExecExpired,
};

const BY_STATUS: Record<number, ErrorClass> = {
  400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed, 409: Conflict,
  413: PayloadTooLarge, 414: UriTooLong, 415: UnsupportedMediaType, 429: TooManyRequests, 431: HeadersTooLarge,
  500: Internal, 501: NotImplementedByServer, 502: BadGateway, 503: Unavailable, 504: Timeout,
  507: InsufficientStorage,
};

/** The class for an API error code, else by HTTP status, else SpaceError. */
export function errorClass(code?: string | null, status?: number): ErrorClass {
  return (code && Object.hasOwn(ERROR_CLASSES, code) ? ERROR_CLASSES[code] : undefined) ??
    (status !== undefined ? BY_STATUS[status] : undefined) ?? (SpaceError as ErrorClass);
}

/** The error for a non-2xx answer (its body as text). */
export function errorFrom(status: number, headers: Headers, body: string): SpaceError {
  let code: string | undefined;
  let message: string | undefined;
  try {
    const e = JSON.parse(body)?.error;
    if (e && typeof e === "object") {
      code = typeof e.code === "string" ? e.code : undefined;
      message = typeof e.message === "string" ? e.message : undefined;
    }
  } catch {
    /* not JSON: the text is the message */
  }
  if (!message) message = body.slice(0, 200) || `HTTP ${status}`;
  const cls = errorClass(code, status);
  return new cls(message, { status, code: code || cls.code, retryAfter: retryAfter(headers), body });
}

/** Retry-After in seconds (delta-seconds or an HTTP date), or undefined. */
export function retryAfter(headers: Headers): number | undefined {
  const v = headers.get("retry-after");
  if (v === null || v.trim() === "") return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(v)) return Math.max(0, Number(v));
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, (t - Date.now()) / 1000);
}
