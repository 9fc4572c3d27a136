#!/usr/bin/env python3
"""space burst benchmark: N creates issued at once through the API, each
timed from its request to the first output of `echo` in the new sandbox
(create → first output), p50/p95/p99 and success rate, beside bwrap started
N at once in the same run (the shape of the public burst-of-100 benchmark).
Not a test: it reports."""
import argparse, http.client, json, os, shutil, subprocess, threading, time, urllib.parse
from common import pct  # noqa: E402


def one(url, key, start, out, ids, i):
    u = urllib.parse.urlparse(url)
    h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=300)
    start.wait()
    t0 = time.perf_counter()
    try:
        c.request("POST", "/v1/sandboxes", body="{}", headers=h)
        r = c.getresponse()
        data = r.read()
        if r.status != 201:
            out[i] = ("create", r.status, data[:120])
            return
        sid = json.loads(data)["id"]
        ids[i] = sid
        c.request("POST", f"/v1/sandboxes/{sid}/exec", body=json.dumps({"cmd": ["/bin/echo", "hi"]}), headers=h)
        r = c.getresponse()
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
        out[i] = first if first is not None else ("exec", r.status, b"no output")
    except Exception as e:  # a failure is counted, not fatal
        out[i] = ("error", 0, repr(e)[:120])
    finally:
        c.close()


def burst_space(url, key, n):
    out, ids = [None] * n, [None] * n
    start = threading.Event()
    ts = [threading.Thread(target=one, args=(url, key, start, out, ids, i)) for i in range(n)]
    for t in ts:
        t.start()
    t0 = time.perf_counter()
    start.set()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=300)
    for sid in ids:
        if sid:
            c.request("DELETE", f"/v1/sandboxes/{sid}", headers={"Authorization": "Bearer " + key})
            c.getresponse().read()
    return out, wall


def burst_bwrap(rootfs, n):
    if not shutil.which("bwrap"):
        return None, 0
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--bind", rootfs, "/", "--proc", "/proc",
           "--dev", "/dev", "/bin/echo", "hi"]
    out = [None] * n
    start = threading.Event()

    def run(i):
        start.wait()
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = p.stdout.readline()
        dt = time.perf_counter() - t0
        p.wait()
        out[i] = dt if line.startswith(b"hi") else ("bwrap", p.returncode, line[:80])

    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    t0 = time.perf_counter()
    start.set()
    for t in ts:
        t.join()
    return out, time.perf_counter() - t0


def row(name, out, wall):
    if out is None:
        return f"  {name:28s} n/a"
    ok = [x for x in out if isinstance(x, float)]
    s = f"  {name:28s} "
    if ok:
        s += (f"p50 {pct(ok, 50) * 1000:8.1f} ms  p95 {pct(ok, 95) * 1000:8.1f} ms  "
              f"p99 {pct(ok, 99) * 1000:8.1f} ms  ")
    s += f"success {len(ok)}/{len(out)}  (all done in {wall * 1000:.0f} ms)"
    fails = [x for x in out if not isinstance(x, float)]
    if fails:
        s += f"\n    first failure: {fails[0]!r}"
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--state-dir", help="unused (bench/run.sh passes it)")
    ap.add_argument("--rootfs", required=True, help="the base template extracted (for bwrap)")
    ap.add_argument("-n", type=int, default=100, help="creates issued at once")
    a = ap.parse_args()

    load0 = os.getloadavg()[0]
    sp, sp_wall = burst_space(a.url, a.key, a.n)
    bw, bw_wall = burst_bwrap(a.rootfs, a.n)
    print(f"burst of {a.n} at once, create → first output of `echo hi` ({os.cpu_count()} cpus, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}, load {load0:.1f} → {os.getloadavg()[0]:.1f})")
    print(row("space (API)", sp, sp_wall))
    print(row("bwrap --unshare-all", bw, bw_wall))


if __name__ == "__main__":
    main()
