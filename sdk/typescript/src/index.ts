// SPDX-License-Identifier: MIT
// space-sdk: the TypeScript/JavaScript client of space (Node >= 20 and browsers; fetch only).

export * from "./client.js";
export * from "./errors.js";
export { ExecEvent, ExecResult, FRAMES_TYPE, collect, frames, type CollectOptions } from "./exec.js";
export {
  DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, DEFAULT_URL, Transport, backoffMs,
  type BodyInput, type CallOptions, type RequestOptions, type StreamedResponse,
} from "./http.js";
export type * as api from "./generated/api-types.js";
