#!/usr/bin/env python3
"""space churn benchmark: N cycles of create → write 10 MiB → delete through
the API, one after another, reported per block of cycles: create, exec
(the write) and delete p50/p90, the CPU the kernel's btrfs-cleaner threads
spent in that block, and the worker's teardown backlog at its end. A pool
that drifts shows as blocks getting slower. Not a test: it reports.

    bench/churn.py --url URL --key KEY [-n 10000] [--block 500] [--template base]

(bench/run.sh runs it with CHURN=N set: ./bench/run.sh with CHURN=10000.)"""
import argparse
import os
import sys
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("-n", type=int, default=10000, help="cycles")
    ap.add_argument("--block", type=int, default=500, help="cycles per reported row")
    ap.add_argument("--template", default="base")
    a = ap.parse_args()
    api = Api(a.url, a.key)
    hz = os.sysconf("SC_CLK_TCK")
    print(f"churn: {a.n} cycles of create → write 10 MiB → delete, template {a.template}, "
          f"{os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M:%S')}, load {os.getloadavg()[0]:.1f}")
    print(f"{'cycles':>13}  {'create p50/p90':>16}  {'write p50':>9}  {'delete p50/p90':>15}  "
          f"{'cleaner CPU':>11}  {'backlog':>7}  {'load':>4}")
    first = last = None
    done = 0
    while done < a.n:
        cr, wr, de = [], [], []
        c0, w0 = cleaner_ticks(), time.monotonic()
        for _ in range(min(a.block, a.n - done)):
            t0 = time.perf_counter()
            sb = api.call("POST", "/v1/sandboxes", {"template": a.template})
            t1 = time.perf_counter()
            out, _ = api.exec_first_output(sb["id"], ["sh", "-c", WRITE])
            t2 = time.perf_counter()
            if out is None:
                raise SystemExit(f"the write printed nothing at cycle {done}")
            api.call("DELETE", f"/v1/sandboxes/{sb['id']}")
            t3 = time.perf_counter()
            cr.append((t1 - t0) * 1000)
            wr.append((t2 - t1) * 1000)
            de.append((t3 - t2) * 1000)
            done += 1
        cpu = (cleaner_ticks() - c0) / hz / (time.monotonic() - w0) * 100
        row = (pct(cr, 50), pct(cr, 90), pct(wr, 50), pct(de, 50), pct(de, 90), cpu)
        first = first or row
        last = row
        print(f"{done - len(cr) + 1:>6}-{done:<6}  {row[0]:7.1f}/{row[1]:6.1f} ms  {row[2]:6.1f} ms  "
              f"{row[3]:6.1f}/{row[4]:5.1f} ms  {cpu:9.0f} %  {backlog(api)!s:>7}  {os.getloadavg()[0]:4.1f}",
              flush=True)
    print(f"create p50: first block {first[0]:.1f} ms, last block {last[0]:.1f} ms "
          f"({(last[0] / first[0] - 1) * 100:+.0f} %)")


if __name__ == "__main__":
    main()
