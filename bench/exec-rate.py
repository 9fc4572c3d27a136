#!/usr/bin/env python3
"""space exec throughput: `echo hi` executed through the API as fast as
h2load (HTTP/1.1, keep-alive) sends them, over S sandboxes, with 1 and with
C connections; requests per second and the latency p50 h2load reports.
Not a test: it reports.

    bench/exec-rate.py --url URL --key KEY [--sandboxes 50] [--connections 1,8] [-n 4000]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Api  # noqa: E402

BODY = b'{"cmd":["echo","hi"]}'


def h2load(url, key, sids, conns, n, body_path):
    uris = [f"{url}/v1/sandboxes/{s}/exec" for s in sids]
    cmd = ["h2load", "--h1", "-c", str(conns), "-n", str(n), "-d", body_path,
           "-H", f"Authorization: Bearer {key}", "-H", "Content-Type: application/json"] + uris
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    rate = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    ok = re.search(r"(\d+) succeeded, (\d+) failed", out)
    lat = re.search(r"time for request:\s+([\d.]+)(\w+)\s+([\d.]+)(\w+)\s+([\d.]+)(\w+)", out)
    if not rate or not ok:
        raise SystemExit("h2load said:\n" + out)
    return float(rate.group(1)), int(ok.group(1)), int(ok.group(2)), lat.group(5) + lat.group(6) if lat else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--sandboxes", type=int, default=50)
    ap.add_argument("--connections", default="1,8")
    ap.add_argument("-n", type=int, default=4000, help="requests per run")
    a = ap.parse_args()
    if not shutil.which("h2load"):
        raise SystemExit("exec-rate.py needs h2load (Debian's nghttp2-client)")
    api = Api(a.url, a.key)
    sids = [api.call("POST", "/v1/sandboxes", {})["id"] for _ in range(a.sandboxes)]
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(BODY)
        f.flush()
        print(f"exec `echo hi` through the API over {a.sandboxes} sandboxes, {a.n} requests a run, "
              f"{os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M:%S')}, load {os.getloadavg()[0]:.1f}")
        try:
            for c in [int(x) for x in a.connections.split(",")]:
                h2load(a.url, a.key, sids, c, min(200, a.n), f.name)   # warm-up
                rate, ok, bad, mean = h2load(a.url, a.key, sids, c, a.n, f.name)
                print(f"  {c:2d} connection{'s' if c > 1 else ' '}: {rate:7.0f} req/s  ({ok} ok, {bad} failed; "
                      f"mean request {mean})")
        finally:
            for s in sids:
                api.call("DELETE", f"/v1/sandboxes/{s}")


if __name__ == "__main__":
    main()
