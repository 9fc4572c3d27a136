#!/usr/bin/env python3
"""space benchmark: create, first exec, exec round trip, delete and
create→first output through the HTTP API, p50/p90, beside bwrap and runc on
the same root filesystem in the same invocation. Not a test: it reports."""
import argparse, http.client, json, os, shutil, statistics, subprocess, sys, tempfile, time, urllib.parse
from common import pct  # noqa: E402


class Api:
    def __init__(self, url, key):
        u = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port or 80)
        self.h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.h)
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:200]!r}")
        return json.loads(data) if data else None

    def exec_first_output(self, sid, cmd):
        """Runs cmd; returns (seconds to first stdout line, seconds to exit)."""
        t0 = time.perf_counter()
        self.conn.request("POST", f"/v1/sandboxes/{sid}/exec", body=json.dumps({"cmd": cmd}), headers=self.h)
        r = self.conn.getresponse()
        if r.status != 200:
            raise RuntimeError(f"exec: {r.status} {r.read()[:200]!r}")
        first = None
        while True:
            line = r.readline()
            if not line:
                break
            ev = json.loads(line)
            if ev["type"] == "stdout" and first is None:
                first = time.perf_counter() - t0
            if ev["type"] == "exit":
                break
        r.read()
        return first, time.perf_counter() - t0


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def daemon_pids(state_dir):
    pid = int(open(os.path.join(state_dir, "spaced.pid")).read().strip())
    pids = [pid]
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1]) == pid:
                    if open(f"/proc/{d}/comm").read().strip() == "space-worker":
                        pids.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return pids


def timed(cmd, **kw):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    dt = time.perf_counter() - t0
    if p.returncode != 0 or b"hi" not in p.stdout:
        raise RuntimeError(f"{cmd[0]} failed: {p.returncode} {p.stderr[:300]!r}")
    return dt


def bench_bwrap(rootfs, runs):
    if not shutil.which("bwrap"):
        return None
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--bind", rootfs, "/", "--proc", "/proc",
           "--dev", "/dev", "/bin/echo", "hi"]
    return [timed(cmd) for _ in range(runs)]


def bench_runc(rootfs, runs):
    if not shutil.which("runc"):
        return None
    bundle = tempfile.mkdtemp(prefix="space-bench-runc-")
    try:
        subprocess.run(["runc", "spec"], cwd=bundle, check=True)
        cfg = json.load(open(os.path.join(bundle, "config.json")))
        cfg["root"]["path"] = os.path.abspath(rootfs)
        cfg["process"]["terminal"] = False
        cfg["process"]["args"] = ["/bin/echo", "hi"]
        cfg["root"]["readonly"] = True
        json.dump(cfg, open(os.path.join(bundle, "config.json"), "w"))
        out = []
        for i in range(runs):
            out.append(timed(["runc", "--root", os.path.join(bundle, "state"), "run", "--bundle", bundle,
                              f"space-bench-{os.getpid()}-{i}"]))
        return out
    except Exception as e:  # a peer that cannot run here is reported, not fatal
        print(f"runc: {e}", file=sys.stderr)
        return None
    finally:
        shutil.rmtree(bundle, ignore_errors=True)


def row(name, xs, base=None):
    if not xs:
        return f"  {name:34s} {'n/a':>9s}"
    p50, p90 = pct(xs, 50) * 1000, pct(xs, 90) * 1000
    s = f"  {name:34s} p50 {p50:8.2f} ms  p90 {p90:8.2f} ms  (n={len(xs)})"
    if base:
        s += f"  ×{p50 / (pct(base, 50) * 1000):.2f} vs space"
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--rootfs", required=True, help="the base template extracted (for the peers)")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--idle", type=int, default=50, help="idle sandboxes for the memory figure")
    ap.add_argument("--latency-only", action="store_true",
                    help="create, exec and delete latencies only (no memory figure, no peers)")
    a = ap.parse_args()

    api = Api(a.url, a.key)
    create, first_exec, c2o, delete, rtt = [], [], [], [], []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        sb = api.call("POST", "/v1/sandboxes", {})
        t1 = time.perf_counter()
        first, _total = api.exec_first_output(sb["id"], ["/bin/echo", "hi"])
        create.append(t1 - t0)
        first_exec.append(first)
        c2o.append(t1 - t0 + first)
        t2 = time.perf_counter()
        api.call("DELETE", f"/v1/sandboxes/{sb['id']}")
        delete.append(time.perf_counter() - t2)

    sb = api.call("POST", "/v1/sandboxes", {})
    for _ in range(a.runs):
        _f, total = api.exec_first_output(sb["id"], ["/bin/true"])
        rtt.append(total)
    api.call("DELETE", f"/v1/sandboxes/{sb['id']}")

    if a.latency_only:
        print(f"space latencies ({a.runs} runs, {os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M:%S')})")
        print(row("create (API)", create))
        print(row("first exec after create", first_exec))
        print(row("create → first output", c2o))
        print(row("exec round trip (/bin/true)", rtt))
        print(row("delete", delete))
        return

    pids = daemon_pids(a.state_dir)
    before = sum(rss_kib(p) for p in pids)
    ids = [api.call("POST", "/v1/sandboxes", {})["id"] for _ in range(a.idle)]
    time.sleep(0.5)
    after = sum(rss_kib(p) for p in pids)
    for i in ids:
        api.call("DELETE", f"/v1/sandboxes/{i}")

    bw = bench_bwrap(a.rootfs, a.runs)
    rc = bench_runc(a.rootfs, min(a.runs, 100))

    print(f"space benchmark ({a.runs} runs, {os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M:%S')})")
    print(row("create (API)", create))
    print(row("first exec after create", first_exec))
    print(row("create → first output", c2o))
    print(row("exec round trip (/bin/true)", rtt))
    print(row("delete", delete))
    print("  peers, fresh sandbox running `echo hi` (process spawn included):")
    print(row("bwrap --unshare-all", bw, c2o))
    print(row("runc run", rc, c2o))
    print(f"  spaced+worker RSS per idle sandbox: {(after - before) / a.idle:.1f} KiB "
          f"({a.idle} sandboxes, {before} → {after} KiB)")


if __name__ == "__main__":
    main()
