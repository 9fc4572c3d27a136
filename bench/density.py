#!/usr/bin/env python3
"""space density benchmark: N idle sandboxes made through the API, and what
the host pays for them: memory in use (MemTotal - MemAvailable), kernel slab
(all / unreclaimable), the daemon's RSS, per sandbox; the time to make and to
delete them all. Beside it, in the same run, N idle `bwrap --unshare-all`
sandboxes (each a `sleep`): the floor of namespaces without a daemon, link
or gateway. Host-wide figures: run it on a quiet machine. Not a test: it
reports.

    bench/density.py --url URL --key KEY --rootfs DIR [-n 1000]

(bench/run.sh runs it with DENSITY=N set.)"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Api, daemon_pids, rss_kib  # noqa: E402


def meminfo():
    m = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            m[k] = int(v.split()[0])
    return m


def slabinfo():
    """Bytes per slab cache (active objects × object size)."""
    out = {}
    try:
        with open("/proc/slabinfo") as f:
            for line in f.readlines()[2:]:
                v = line.split()
                out[v[0]] = int(v[1]) * int(v[3])
    except OSError:
        pass
    return out


def snapshot(pids):
    subprocess.run(["sync"], check=False)
    time.sleep(1.0)
    m = meminfo()
    return {"used": m["MemTotal"] - m["MemAvailable"], "slab": m["Slab"], "sunreclaim": m["SUnreclaim"],
            "rss": sum(rss_kib(p) for p in pids)}


def per(before, after, n):
    return {k: (after[k] - before[k]) / n for k in before}


def bwrap_idle(rootfs, n):
    bw = shutil.which("bwrap")
    if not bw:
        return None, None
    before = snapshot([])
    procs = [subprocess.Popen([bw, "--unshare-all", "--die-with-parent", "--bind", rootfs, "/", "--proc", "/proc",
                               "--dev", "/dev", "sleep", "3600"]) for _ in range(n)]
    time.sleep(1.0)
    after = snapshot([])
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()
    return per(before, after, n), after


def line(name, p, n):
    return (f"  {name:<34} {p['used']:8.0f} KiB  {p['slab']:7.0f} KiB  {p['sunreclaim']:7.0f} KiB  "
            f"{p['rss']:7.1f} KiB   (× {n}: {p['used'] * n / 1024 / 1024:.2f} GiB in use)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--state-dir", required=True, help="the spaced's state dir (its pids, for the RSS)")
    ap.add_argument("--rootfs", required=True, help="the base template extracted (for bwrap)")
    ap.add_argument("-n", type=int, default=1000)
    a = ap.parse_args()
    api = Api(a.url, a.key)
    pids = daemon_pids(a.state_dir)
    print(f"density: {a.n} idle sandboxes, {os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M:%S')}, "
          f"load {os.getloadavg()[0]:.1f}")
    before, slab0 = snapshot(pids), slabinfo()
    t0 = time.monotonic()
    ids = []
    try:
        for _ in range(a.n):
            ids.append(api.call("POST", "/v1/sandboxes", {"disk_mb": 64})["id"])
        made = time.monotonic() - t0
        after, slab1 = snapshot(pids), slabinfo()
    finally:
        t1 = time.monotonic()
        for i in ids:
            api.call("DELETE", f"/v1/sandboxes/{i}")
        gone = time.monotonic() - t1
    sp = per(before, after, a.n)
    bw, _ = bwrap_idle(a.rootfs, a.n)
    print(f"  {'per sandbox':<34} {'in use':>12}  {'slab':>11}  {'unreclaim':>11}  {'daemon RSS':>11}")
    print(line("space (API)", sp, a.n))
    if bw:
        print(line("peer: bwrap --unshare-all, sleep", bw, a.n))
    print(f"  space: {a.n} creates in {made:.1f} s, {a.n} deletes answered in {gone:.1f} s")
    grown = sorted(((slab1.get(k, 0) - v0, k) for k, v0 in slab0.items()), reverse=True)[:10]
    print("  slab caches that grew most, per sandbox: " +
          ", ".join(f"{k} {d / a.n / 1024:.1f} KiB" for d, k in grown if d > 0))


if __name__ == "__main__":
    main()
