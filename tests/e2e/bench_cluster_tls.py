# SPDX-License-Identifier: MIT
"""The cost of cluster TLS (not a test: run by name, with and without TLS):
  BENCH_TLS=off|on SPACE_BUILD_DIR=$PWD/build python3 -m pytest -q -s tests/e2e/bench_cluster_tls.py
(BENCH_ONLY=exec: the exec latency alone). Prints the exec latency through
the API server (p50, p90), with TLS a connection and hello to a worker from
a client of the test's (p50, p90: a full handshake each, and offering the
last session), file PUT/GET
throughput (API server to worker) and a 224 MB checkpoint shipped between the
workers (the controller's round included)."""
import os, statistics, time
import test_scaleout as so
if os.environ.get("BENCH_TLS") == "off":
    so.Cluster.tls_args = lambda self, node: ["--cluster-tls=off"]
from test_cluster_tls import tls_cluster, _tls_client, _hello_session  # noqa
from test_scaleout import _wait


def test_bench(tls_cluster):
    c = tls_cluster
    api = c.apis[0]
    r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 512})
    sid, worker = r.json()["id"], r.json()["worker"]
    c.exec_out(api, sid, "true")
    lat = []
    for _ in range(40):
        t = time.monotonic(); c.exec_out(api, sid, "true"); lat.append(time.monotonic() - t)
    if os.environ.get("BENCH_TLS") != "off":
        ctx, addr = _tls_client(c, c.tls, "w1"), c.addresses["w1"][1]
        hello = {"full": [], "resumed": []}
        sess, reused = _hello_session(c, ctx, addr)
        for _ in range(40):
            for kind in hello:
                t = time.monotonic()
                s, reused = _hello_session(c, ctx, addr, sess if kind == "resumed" else None)
                hello[kind].append(time.monotonic() - t)
                if kind == "resumed":
                    sess = s
        print("\nBENCH hello " + "; ".join(f"{k} p50 {statistics.median(v)*1000:.2f} ms p90 "
                                             f"{sorted(v)[35]*1000:.2f} ms" for k, v in hello.items())
              + f" (the last resumed: {reused})")
    if os.environ.get("BENCH_ONLY") == "exec":
        print(f"\nBENCH tls={os.environ.get('BENCH_TLS','on')} exec p50 {statistics.median(lat)*1000:.1f} ms "
              f"p90 {sorted(lat)[35]*1000:.1f} ms")
        c.req(api, "DELETE", f"/v1/sandboxes/{sid}")
        return
    body = os.urandom(32 << 20)
    t = time.monotonic()
    for _ in range(3):
        assert c.req(api, "PUT", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/big"}, data=body).status < 300
    put = 3 * 32 / (time.monotonic() - t)
    t = time.monotonic()
    for _ in range(3):
        assert len(c.req(api, "GET", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/big"}).body) == len(body)
    get = 3 * 32 / (time.monotonic() - t)
    c.exec_out(api, sid, "dd if=/dev/urandom of=/tmp/ship bs=1M count=192 2>/dev/null; sync")
    t = time.monotonic()
    c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "b"})
    _wait(lambda: c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.checkpoint_shipped"})
          .json()["events"], 120, "shipped")
    ship = time.monotonic() - t
    print(f"\nBENCH tls={os.environ.get('BENCH_TLS','on')} exec p50 {statistics.median(lat)*1000:.1f} ms "
          f"p90 {sorted(lat)[35]*1000:.1f} ms; files PUT {put:.0f} MB/s GET {get:.0f} MB/s; "
          f"checkpoint(>=224MB)+ship {ship:.2f} s")
    c.req(api, "DELETE", f"/v1/sandboxes/{sid}")
