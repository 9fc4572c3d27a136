// SPDX-License-Identifier: MIT
// Quickstart: SPACE_URL and SPACE_API_KEY from the environment; creates a
// sandbox, runs a command, prints its output, deletes the sandbox.
//   npm install ./sdk/typescript && node sdk/typescript/examples/quickstart.mjs
import { Client } from "space-sdk";

const sp = new Client(); // SPACE_URL, SPACE_API_KEY
const sb = await sp.create({ template: "base" });
try {
  const r = await sb.exec("echo hello from space");
  process.stdout.write(r.stdoutText);
  if (r.exitCode !== 0) process.exitCode = 1;
} finally {
  await sb.delete();
}
