#!/usr/bin/env python3
"""The clients' own cost: create → first output of `echo x` through raw HTTP,
the Python SDK (sdk/python) and the MCP server (`space mcp` over stdio,
its first progress notification), interleaved round by round in the same
run, p50/p90; and the TypeScript SDK against raw fetch (its own bench,
sdk/typescript/bench/overhead.mjs) when its dist/ is built. Deletes are not
timed. Run by bench/run.sh (or by hand: --url, --key, --space CLI). Not a
test: it reports."""
import argparse, json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "sdk", "python"))
from bench import Api, pct  # noqa: E402
from space_sdk import Client  # noqa: E402


def via_raw(api):
    t0 = time.perf_counter()
    sb = api.call("POST", "/v1/sandboxes", {})
    created = time.perf_counter() - t0
    first, _total = api.exec_first_output(sb["id"], ["echo", "x"])
    api.call("DELETE", f"/v1/sandboxes/{sb['id']}")
    return created + first


def via_sdk(sp):
    t0 = time.perf_counter()
    sb = sp.create()
    first = None
    for ev in sb.exec_stream(["echo", "x"]):
        if ev.type == "stdout" and first is None:
            first = time.perf_counter() - t0
    sb.delete()
    return first


class Mcp:
    """space mcp over stdio: newline-delimited JSON-RPC."""

    def __init__(self, space, url, key):
        env = dict(os.environ, SPACE_URL=url, SPACE_API_KEY=key)
        self.p = subprocess.Popen([space, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.n = 0
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "space-bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()

    def rpc(self, method, params, on_note=None):
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]
            if on_note:
                on_note(msg)

    def tool(self, name, args, on_note=None, token=None):
        params = {"name": name, "arguments": args}
        if token:
            params["_meta"] = {"progressToken": token}
        r = self.rpc("tools/call", params, on_note)
        if r.get("isError"):
            raise RuntimeError(f"{name}: {r['content'][0]['text']}")
        return r

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)


def via_mcp(m):
    first = []
    t0 = time.perf_counter()
    sid = m.tool("create_sandbox", {})["structuredContent"]["id"]

    def note(msg):
        if msg.get("method") == "notifications/progress" and not first:
            first.append(time.perf_counter() - t0)
    m.tool("run_command", {"sandbox_id": sid, "argv": ["echo", "x"]}, note, token="b")
    m.tool("delete_sandbox", {"sandbox_id": sid})
    return first[0] if first else float("nan")


def row(name, xs, base=None):
    s = f"  {name:40s} p50 {pct(xs, 50) * 1000:7.2f} ms  p90 {pct(xs, 90) * 1000:7.2f} ms  (n={len(xs)})"
    if base:
        s += f"  +{(pct(xs, 50) - pct(base, 50)) * 1000:.2f} ms p50 over raw"
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--space", required=True, help="the space CLI (for space mcp)")
    ap.add_argument("--runs", type=int, default=50)
    a = ap.parse_args()
    api = Api(a.url, a.key)
    sp = Client(url=a.url, api_key=a.key)
    m = Mcp(a.space, a.url, a.key)
    raw, sdk, mcp = [], [], []
    try:
        for i in range(a.runs):
            order = [(raw, lambda: via_raw(api)), (sdk, lambda: via_sdk(sp)), (mcp, lambda: via_mcp(m))]
            for out, f in order[i % 3:] + order[:i % 3]:
                out.append(f())
    finally:
        m.close()
        sp.close()
    print(f"space clients ({a.runs} rounds, {os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M:%S')}): "
          "create → first output of `echo x`")
    print(row("raw HTTP (http.client)", raw))
    print(row("Python SDK (space_sdk)", sdk, raw))
    print(row("MCP (space mcp, stdio, first progress)", mcp, raw))
    ts = os.path.join(HERE, "..", "sdk", "typescript")
    if os.path.isfile(os.path.join(ts, "dist", "index.js")):
        r = subprocess.run(["node", "bench/overhead.mjs", str(min(a.runs, 30))], cwd=ts, capture_output=True,
                           text=True, timeout=600, env=dict(os.environ, SPACE_URL=a.url, SPACE_API_KEY=a.key))
        print("  TypeScript SDK: " + (r.stdout.strip() or r.stderr.strip()[-300:]))
    else:
        print("  TypeScript SDK: not built (cd sdk/typescript && npm ci && npm run build)")


if __name__ == "__main__":
    main()
