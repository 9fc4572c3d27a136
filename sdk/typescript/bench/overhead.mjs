// SPDX-License-Identifier: MIT
// The SDK's own overhead on create -> first output, against raw fetch in the same
// run: each round creates a sandbox and runs `echo x` both ways (alternating),
// timing from the create request to the first stdout byte; deletes are not timed.
//   SPACE_URL=... SPACE_API_KEY=... node bench/overhead.mjs [rounds]
import { Client } from "../dist/index.js";

async function raw(url, key) {
  const h = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };
  const t0 = performance.now();
  const c = await fetch(`${url}/v1/sandboxes`, { method: "POST", headers: h, body: "{}" });
  if (c.status !== 201 && c.status !== 200) throw new Error(`create: ${c.status} ${await c.text()}`);
  const id = (await c.json()).id;
  const e = await fetch(`${url}/v1/sandboxes/${id}/exec`, { method: "POST", headers: h,
    body: JSON.stringify({ cmd: ["echo", "x"] }) });
  const reader = e.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let ms;
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    buf += dec.decode(r.value, { stream: true });
    if (ms === undefined && buf.includes('"type":"stdout"')) ms = performance.now() - t0;
  }
  await fetch(`${url}/v1/sandboxes/${id}`, { method: "DELETE", headers: h }).then((r) => r.arrayBuffer());
  if (ms === undefined) throw new Error(`no stdout: ${buf}`);
  return ms;
}

async function viaSdk(sp) {
  const t0 = performance.now();
  const sb = await sp.create();
  let ms;
  for await (const ev of sb.execStream(["echo", "x"])) {
    if (ev.type === "stdout" && ms === undefined) ms = performance.now() - t0;
  }
  await sb.delete();
  if (ms === undefined) throw new Error("no stdout");
  return ms;
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

/** { rounds, rawMs, sdkMs, overheadMs } (medians). */
export async function overhead(rounds = 3, url = process.env.SPACE_URL, key = process.env.SPACE_API_KEY) {
  const sp = new Client({ url, apiKey: key });
  const r = [];
  const s = [];
  for (let i = 0; i < rounds; i++) {
    if (i % 2) {
      s.push(await viaSdk(sp));
      r.push(await raw(url, key));
    } else {
      r.push(await raw(url, key));
      s.push(await viaSdk(sp));
    }
  }
  const rawMs = median(r);
  const sdkMs = median(s);
  return { rounds, rawMs, sdkMs, overheadMs: sdkMs - rawMs };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const o = await overhead(Number(process.argv[2] || 5));
  console.log(`create->first output over ${o.rounds} rounds (median): raw fetch ${o.rawMs.toFixed(1)} ms, ` +
    `space-sdk ${o.sdkMs.toFixed(1)} ms, overhead ${o.overheadMs.toFixed(1)} ms`);
}
