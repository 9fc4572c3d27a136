#!/usr/bin/env python3
"""space churn benchmark: N cycles of create → write 10 MiB → delete through
the API, by --clients clients at once (each one cycle after another),
reported per block of cycles: create, exec (the write) and delete p50/p90,
the CPU the kernel's btrfs-cleaner threads spent in that block, and the
worker's teardown backlog at its end; at the end, the pool's free space
against its start once the backlog drained. A pool that drifts shows as
blocks getting slower. Not a test: it reports.

    bench/churn.py --url URL --key KEY [-n 10000] [--block 500] [--template base] [--clients 1]

(bench/run.sh runs it with CHURN=N set: ./bench/run.sh with CHURN=10000.)"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Api  # noqa: E402
from common import pct  # noqa: E402

WRITE = "dd if=/dev/zero of=/root/churn bs=1M count=10 2>/dev/null && sync -f /root/churn 2>/dev/null; echo done"


def cleaner_ticks():
    """utime+stime (clock ticks) of every btrfs-cleaner kernel thread."""
    t = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        name = st[st.index("(") + 1:st.rindex(")")]
        if name == "btrfs-cleaner":
            f = st[st.rindex(")") + 2:].split()
            t += int(f[11]) + int(f[12])
    return t


def backlog(api):
    api.conn.request("GET", "/metrics", headers=api.h)
    r = api.conn.getresponse()
    body = r.read()
    for line in body.decode().splitlines():
        if line.startswith("space_worker_teardowns_pending"):
            return int(float(line.split()[-1]))
    return None


def free_bytes(api):
    """The pool's free space as /v1/info reports it."""
    return api.call("GET", "/v1/info")["storage"]["free_bytes"]


def settle(api, timeout=120):
    """Waits until the teardown backlog is 0 (the pool's space is back)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and backlog(api) not in (0, None):
        time.sleep(0.2)


def cycles(url, key, template, n, out, lock, errors):
    """n cycles on a connection of its own, each appended to out as (create, write, delete) ms."""
    api = Api(url, key)
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            sb = api.call("POST", "/v1/sandboxes", {"template": template})
            t1 = time.perf_counter()
            got, _ = api.exec_first_output(sb["id"], ["sh", "-c", WRITE])
            t2 = time.perf_counter()
            if got is None:
                raise RuntimeError("the write printed nothing")
            api.call("DELETE", f"/v1/sandboxes/{sb['id']}")
            t3 = time.perf_counter()
            with lock:
                out.append(((t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000))
    except Exception as e:  # noqa: BLE001 (reported by the main thread)
        errors.append(e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("-n", type=int, default=10000, help="cycles")
    ap.add_argument("--block", type=int, default=500, help="cycles per reported row")
    ap.add_argument("--template", default="base")
    ap.add_argument("--clients", type=int, default=1, help="clients cycling at once")
    a = ap.parse_args()
    api = Api(a.url, a.key)
    hz = os.sysconf("SC_CLK_TCK")
    settle(api)
    free0 = free_bytes(api)
    print(f"churn: {a.n} cycles of create → write 10 MiB → delete, template {a.template}, {a.clients} "
          f"client{'s' if a.clients > 1 else ''} at once, {os.cpu_count()} cpus, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}, load {os.getloadavg()[0]:.1f}")
    print(f"{'cycles':>13}  {'create p50/p90':>16}  {'write p50':>9}  {'delete p50/p90':>15}  "
          f"{'cleaner CPU':>11}  {'backlog':>7}  {'load':>4}")
    first = last = None
    done = 0
    while done < a.n:
        c0, w0 = cleaner_ticks(), time.monotonic()
        todo = min(a.block, a.n - done)
        res, lock, errors = [], threading.Lock(), []
        share = [todo // a.clients + (1 if k < todo % a.clients else 0) for k in range(a.clients)]
        threads = [threading.Thread(target=cycles, args=(a.url, a.key, a.template, share[k], res, lock, errors))
                   for k in range(a.clients) if share[k]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise SystemExit(f"cycle {done + len(res)}: {errors[0]}")
        cr, wr, de = [x[0] for x in res], [x[1] for x in res], [x[2] for x in res]
        done += len(res)
        cpu = (cleaner_ticks() - c0) / hz / (time.monotonic() - w0) * 100
        row = (pct(cr, 50), pct(cr, 90), pct(wr, 50), pct(de, 50), pct(de, 90), cpu)
        first = first or row
        last = row
        print(f"{done - len(cr) + 1:>6}-{done:<6}  {row[0]:7.1f}/{row[1]:6.1f} ms  {row[2]:6.1f} ms  "
              f"{row[3]:6.1f}/{row[4]:5.1f} ms  {cpu:9.0f} %  {backlog(api)!s:>7}  {os.getloadavg()[0]:4.1f}",
              flush=True)
    print(f"create p50: first block {first[0]:.1f} ms, last block {last[0]:.1f} ms "
          f"({(last[0] / first[0] - 1) * 100:+.0f} %); delete p50: {first[3]:.1f} → {last[3]:.1f} ms "
          f"({(last[3] / first[3] - 1) * 100:+.0f} %)")
    settle(api)
    time.sleep(2)
    free1 = free_bytes(api)
    print(f"pool free space: {free0 / 2**20:.0f} MiB at the start, {free1 / 2**20:.0f} MiB at the end "
          f"({(free1 - free0) / 2**20:+.0f} MiB)")


if __name__ == "__main__":
    main()
