#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The worker's restart time (role all): kill -9 of the worker process
(spaced's child space-worker) until /readyz answers 200 again with a new
worker, with one running sandbox that must still answer exec afterwards.
Each round waits past the stable run (30 s) first, so the supervisor's
backoff is at its minimum (100 ms) every time; the worker's own log line
("serves again, N ms after the last one died") is reported beside it.
A real spaced on a temporary state dir (the e2e suite's Session: its
cgroup root, net pool and cleanup), as root. Not a test: it reports.

    SPACE_BUILD_DIR=build bench/worker-restart.py [--rounds 8] [--sandboxes 100]

With --sandboxes N, N sandboxes run through the restarts (the worker adopts
them all at its start) and each round also reports the time from the kill
until every one of them answered an exec again.
"""
import argparse
import os
import re
import signal
import statistics
import sys
import threading
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
import e2e_host as host  # noqa: E402
import e2e_http  # noqa: E402
import e2e_residue as residue  # noqa: E402
from e2e_daemon import Session  # noqa: E402

STABLE_S = 31


def worker(d):
    return [p for p in host.children(d.pid) if host.proc_status(p, "Name") == "space-worker"]


def all_answer(d, sids, t0):
    """Msec from t0 until every sandbox answered `echo` (8 threads, each retrying its own)."""
    left = list(sids)
    lock = threading.Lock()

    def run():
        while True:
            with lock:
                if not left:
                    return
                sid = left.pop()
            while True:
                try:
                    if d.sh(sid, "echo ok") == "ok\n":
                        break
                except (AssertionError, OSError):
                    pass
                time.sleep(0.01)

    ts = [threading.Thread(target=run) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return (time.monotonic() - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--sandboxes", type=int, default=1)
    a = ap.parse_args()
    s = Session(TOP)
    d = s.new_daemon()
    d.start()
    try:
        sids = [d.create()["id"] for _ in range(a.sandboxes)]
        sid = sids[0]
        took, logged, every = [], [], []
        for _ in range(a.rounds):
            time.sleep(STABLE_S)
            old = worker(d)
            start = d.log_size()
            t0 = time.monotonic()
            os.kill(old[0], signal.SIGKILL)
            while True:
                try:
                    if e2e_http.request(d.url, "GET", "/readyz", timeout=5).status == 200 and worker(d) not in ([], old):
                        break
                except OSError:
                    pass
                time.sleep(0.005)
            took.append((time.monotonic() - t0) * 1000)
            m = re.search(r"serves again, (\d+) ms after", d.log_text(start))
            logged.append(int(m.group(1)) if m else None)
            every.append(all_answer(d, sids, t0))
            assert d.sh(sid, "echo ok") == "ok\n", "the sandbox did not survive"
        print("kill -9 -> /readyz 200 (ms):", [round(x) for x in took])
        print("the supervisor's log (ms):  ", logged)
        print("p50 %.0f ms, max %.0f ms over %d rounds" % (statistics.median(took), max(took), len(took)))
        print("kill -9 -> all %d sandboxes answer exec (ms): %s; p50 %.0f ms" %
              (len(sids), [round(x) for x in every], statistics.median(every)))
        for x in sids:
            d.delete(x)
    finally:
        d.stop()
        residue.cleanup(s, lambda m: print(m, file=sys.stderr))


if __name__ == "__main__":
    main()
