// SPDX-License-Identifier: MIT
// Node-only helpers (import from "space-sdk/node"): local files and directory
// trees to and from a sandbox, streamed. The main entry stays free of Node APIs.
/// <reference types="node" />

import { createReadStream } from "node:fs";
import { mkdir, open, readdir, stat } from "node:fs/promises";
import { join, posix } from "node:path";
import type { Client } from "./client.js";
import type { CallOptions } from "./http.js";

/** A local file into the sandbox at path (streamed; its mode unless given). */
export async function upload(c: Client, id: string, localPath: string, path: string,
                             o: CallOptions & { mode?: number } = {}) {
  const st = await stat(localPath);
  if (!st.isFile()) throw new TypeError(`${localPath} is not a regular file`);
  return c.writeFile(id, path, createReadStream(localPath, { highWaterMark: 1 << 20 }),
    { ...o, mode: o.mode ?? (st.mode & 0o777) });
}

/** A file of the sandbox into localPath (streamed). */
export async function download(c: Client, id: string, path: string, localPath: string, o: CallOptions = {}) {
  const body = await c.readFileStream(id, path, o);
  const fh = await open(localPath, "w");
  try {
    const reader = body.getReader();
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      await fh.write(r.value);
    }
  } finally {
    await fh.close();
  }
}

/** A local directory tree into the sandbox at path (files and directories; symlinks
 * and special files are skipped). */
export async function uploadDir(c: Client, id: string, localDir: string, path: string, o: CallOptions = {}) {
  await c.mkdir(id, path, o);
  for (const e of await readdir(localDir, { withFileTypes: true })) {
    const src = join(localDir, e.name);
    const dst = posix.join(path, e.name);
    if (e.isDirectory()) await uploadDir(c, id, src, dst, o);
    else if (e.isFile()) await upload(c, id, src, dst, o);
  }
}

/** A directory tree of the sandbox into localDir (files and directories; symlinks and
 * special files are skipped). */
export async function downloadDir(c: Client, id: string, path: string, localDir: string, o: CallOptions = {}) {
  await mkdir(localDir, { recursive: true });
  for (const e of await c.listFiles(id, path, o)) {
    if (e.type === "dir") await downloadDir(c, id, e.path, join(localDir, e.name), o);
    else if (e.type === "file") await download(c, id, e.path, join(localDir, e.name), o);
  }
}
