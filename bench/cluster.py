#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""space cluster benchmark: create throughput (sandboxes/s) and p50/p90
create latency with 1, 2 and 3 workers behind two API servers on
PostgreSQL, beside a single-host spaced on SQLite, in the same run; and the
store's share of create latency, from the Server-Timing header the API
servers send with debug_timing=1 (time the request's thread waited on the
store, over the whole request as the API server saw it).

Everything is private to the run and removed at the end: a PostgreSQL
(tests/pg-test-server.sh) on a unix socket and loopback, one network
namespace per worker "host" (a veth pair from a random 10.214.x.0/24, the
workers' internal listeners on their end), cgroup roots, nft table and
link names unique to this process. Traffic goes only to 127.0.0.1 and to
those namespaces. Not a test: it reports.

    bench/cluster.py [--build-dir build-release] [--creates 30] [--concurrency 4]
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from common import pct, free_port  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PG_SCRIPT = os.path.join(REPO, "tests", "pg-test-server.sh")
CERTS = os.path.join(REPO, "scripts", "cluster-certs.sh")
WORKER_PORT = 7071
TAG = f"spbench{os.getpid() % 100000}"


def run(cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=check)


def server_timing(value):
    """{"store": ms, "store_calls": n, "total": ms} from
    'store;dur=1.2;desc="3 calls", total;dur=9.8'."""
    out = {}
    for part in (value or "").split(","):
        fields = part.strip().split(";")
        for f in fields[1:]:
            if f.startswith("dur="):
                out[fields[0]] = float(f[4:])
            elif f.startswith("desc=") and f.endswith(' calls"'):
                out[fields[0] + "_calls"] = int(f[6:-7])
    return out


class Api:
    def __init__(self, url, key):
        host, port = url.rsplit("//", 1)[1].rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
        self.conn = None

    def request(self, method, path, body=None):
        """(status, response, body bytes), on a connection opened again once if it broke."""
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
            try:
                self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.h)
                r = self.conn.getresponse()
                return r.status, r, r.read()
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def call(self, method, path, body=None):
        status, r, data = self.request(method, path, body)
        return status, r.getheader("Server-Timing"), (json.loads(data) if data else None)


class Proc:
    def __init__(self, name, argv, log_dir, netns=None):
        self.name = name
        if netns:
            argv = ["nsenter", f"--net=/run/netns/{netns}", "--"] + argv
        self.log_path = os.path.join(log_dir, f"{name}.log")
        # a restart appends to the same log: this start's lines come after mark
        self.mark = len(self.log()) if os.path.exists(self.log_path) else 0
        with open(self.log_path, "ab") as log:
            self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, close_fds=True)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, needle, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.log()[self.mark:]:
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: no '{needle}':\n{self.log()[-3000:]}")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(120)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(30)


def wait_healthy(url, proc, timeout=120):
    host, port = url.rsplit("//", 1)[1].rsplit(":", 1)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.p.poll() is not None:
            raise RuntimeError(f"{proc.name} exited:\n{proc.log()[-3000:]}")
        try:
            c = http.client.HTTPConnection(host, int(port), timeout=5)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{proc.name} not healthy:\n{proc.log()[-3000:]}")


class Bench:
    def __init__(self, args):
        self.a = args
        self.build = os.path.abspath(args.build_dir)
        self.spaced = os.path.join(self.build, "src", "spaced", "spaced")
        self.agent = os.path.join(self.build, "src", "agent", "space-agent")
        self.base = tempfile.mkdtemp(prefix="space-bench-cluster-")
        self.templates = os.path.join(self.base, "templates")
        os.makedirs(self.templates)
        shutil.copyfile(args.template, os.path.join(self.templates, "base.tar"))
        self.procs = []
        self.hosts = {}
        self.netns = []
        self.links = []
        self.pg_url = None

    # ---- set-up ----
    def common(self, node="api"):
        """Every cluster node's flags: the store, the cluster token, mutual TLS
        with node's certificate (an API server's and a controller's: "api"),
        the one master key of the cluster."""
        tls = os.path.join(self.base, "tls")
        return ["--store-url", self.pg_url, "--cluster-token-file", self.token, "--template-dir", self.templates,
                "--agent-path", self.agent, "--log-level", "warning",
                f"--worker-lost-timeout-s={self.a.lost_timeout_s}", f"--master-key-file={self.master_key}",
                f"--cluster-tls-cert={tls}/{node}.crt", f"--cluster-tls-key={tls}/{node}.key",
                f"--cluster-tls-ca={tls}/ca.crt"]

    def cert(self, node, *ips):
        run(["sh", CERTS, os.path.join(self.base, "tls"), "node", node, *ips])

    def start_pg(self):
        r = subprocess.run(["sh", PG_SCRIPT, "start"], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"PostgreSQL: {r.stderr}")
        self.pg_url = r.stdout.strip()
        self.token = os.path.join(self.base, "cluster.token")
        with open(os.open(self.token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(os.urandom(24).hex() + "\n")
        self.master_key = os.path.join(self.base, "master.key")
        with open(os.open(self.master_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(os.urandom(32))
        run(["sh", CERTS, os.path.join(self.base, "tls"), "ca"])
        self.cert("api")

    def pick_subnet(self):
        used = run(["ip", "-4", "-o", "addr"]).stdout
        for _ in range(100):
            net = f"10.214.{random.randrange(1, 250)}"
            if f" {net}." not in used:
                return net
        raise RuntimeError("no free 10.214.x.0/24")

    def add_host(self, i):
        ns, link, peer = f"{TAG}w{i}", f"{TAG}h{i}", f"{TAG}p{i}"
        run(["ip", "netns", "add", ns])
        self.netns.append(ns)
        run(["ip", "link", "add", link, "type", "veth", "peer", "name", peer])
        self.links.append(link)
        run(["ip", "link", "set", peer, "netns", ns])
        run(["ip", "addr", "add", f"{self.subnet}.{4 * i + 1}/30", "dev", link])
        run(["ip", "link", "set", link, "up"])
        run(["ip", "-n", ns, "addr", "add", f"{self.subnet}.{4 * i + 2}/30", "dev", peer])
        run(["ip", "-n", ns, "link", "set", peer, "up"])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        # workers reach each other through the host (checkpoint shipping):
        # only these links forward, and only within the run's /24
        run(["sysctl", "-q", "-w", f"net.ipv4.conf.{link}.forwarding=1"])
        run(["ip", "-n", ns, "route", "add", f"{self.subnet}.0/24", "via", f"{self.subnet}.{4 * i + 1}"])
        return ns, f"{self.subnet}.{4 * i + 2}:{WORKER_PORT}"

    def start_worker(self, i, host=None):
        """Worker w{i+1} in a network namespace of its own (host: the one
        an earlier start of it made)."""
        name = f"w{i + 1}"
        ns, addr = host or self.add_host(i)
        if host is None:
            self.cert(name, addr.rsplit(":", 1)[0])
        self.hosts[name] = (ns, addr)
        state = os.path.join(self.base, name)
        p = Proc(name, [self.spaced, "--role", "worker", "--state-dir", state, "--worker-name", name,
                        "--worker-listen", addr, "--pool-size-mb", "8192", "--disk-overcommit", "100", "--cgroup-root", f"{TAG}-{name}",
                        f"--uid-base={2600000000 + i * 70000000}", "--slots-max=1024"] + self.common(name)
                 + ["--log-level", "info"],
                 self.base, ns)
        self.procs.append(p)
        p.wait_log(f"worker {name} serving on", 300)
        return p

    def start_api(self, n):
        url = f"http://127.0.0.1:{free_port()}"
        p = Proc(f"api{n}", [self.spaced, "--role", "api", "--state-dir", os.path.join(self.base, f"api{n}"),
                             "--listen", url[7:], "--debug-timing=1"] + self.common(), self.base)
        self.procs.append(p)
        wait_healthy(url, p)
        return url

    def start_controller(self, n, lease_s):
        p = Proc(f"ctl{n}", [self.spaced, "--role", "controller", "--state-dir",
                             os.path.join(self.base, f"ctl{n}"), f"--controller-lease-s={lease_s}",
                             f"--controller-listen=127.0.0.1:{free_port()}"] + self.common()
                 + ["--log-level", "info"], self.base)
        self.procs.append(p)
        return p

    def start_single(self):
        url = f"http://127.0.0.1:{free_port()}"
        state = os.path.join(self.base, "single")
        p = Proc("single", [self.spaced, "--state-dir", state, "--listen", url[7:], "--template-dir",
                            self.templates, "--agent-path", self.agent, "--cgroup-root", f"{TAG}-single",
                            "--pool-size-mb", "8192", "--disk-overcommit", "100", "--log-level", "warning", "--debug-timing=1",
                            "--net-table", f"{TAG}s", "--net-link-prefix", f"b{os.getpid() % 100000}-",
                            "--net-pool", f"10.{160 + os.getpid() % 32}.0.0/16"], self.base)
        self.procs.append(p)
        wait_healthy(url, p)
        with open(os.path.join(state, "admin.key")) as f:
            return p, url, f.read().strip()

    # ---- measuring ----
    def creates(self, urls, key):
        """a.creates sandboxes through urls (round robin), a.concurrency at a
        time: [(seconds, store ms, total ms, worker)] and the wall time."""
        n, conc = self.a.creates, self.a.concurrency
        todo = list(range(n))
        lock = threading.Lock()
        results, errors = [], []

        start = threading.Barrier(conc + 1)

        def client(k):
            api = [Api(u, key) for u in urls]
            # each connection's server thread opens its store connection on
            # its first request: not part of a create
            for x in api:
                x.call("GET", "/v1/sandboxes?limit=1")
            start.wait()
            while True:
                with lock:
                    if not todo:
                        return
                    i = todo.pop()
                t0 = time.perf_counter()
                status, timing, body = api[i % len(api)].call("POST", "/v1/sandboxes", {"disk_mb": 256, "memory_mb": 64})
                dt = time.perf_counter() - t0
                if status != 201:
                    errors.append(f"create: {status} {body}")
                    return
                st = server_timing(timing)
                with lock:
                    results.append((dt, st.get("store", float("nan")), st.get("total", float("nan")),
                                    body.get("worker", "?"), st.get("store_calls", 0)))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(conc)]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        if errors:
            raise RuntimeError(errors[0])
        return results, wall

    def delete_all(self, url, key):
        api = Api(url, key)
        status, _, body = api.call("GET", "/v1/sandboxes?limit=1000")
        for sb in body["sandboxes"]:
            s, _, b = api.call("DELETE", f"/v1/sandboxes/{sb['id']}")
            if s != 200:
                raise RuntimeError(f"delete {sb['id']}: {s} {b}")

    def scenario(self, name, urls, key):
        # one warm-up create (connections, template caches) that is not counted
        Api(urls[0], key).call("POST", "/v1/sandboxes", {"disk_mb": 256, "memory_mb": 64})
        self.delete_all(urls[0], key)
        res, wall = self.creates(urls, key)
        self.delete_all(urls[0], key)
        lat = [r[0] * 1000 for r in res]
        store = [r[1] for r in res]
        total = [r[2] for r in res]
        spread = {}
        for r in res:
            spread[r[3]] = spread.get(r[3], 0) + 1
        share = sum(store) / sum(total) if sum(total) > 0 else float("nan")
        row = {"setup": name, "creates": len(res), "per_s": len(res) / wall, "p50_ms": pct(lat, 50),
               "p90_ms": pct(lat, 90), "store_p50_ms": pct(store, 50), "store_share": share,
               "store_calls": statistics.median([r[4] for r in res]),
               "spread": ",".join(f"{w}:{c}" for w, c in sorted(spread.items()))}
        print(f"{row['setup']:<37} {row['creates']:>4} {row['per_s']:>10.2f} {row['p50_ms']:>9.1f} "
              f"{row['p90_ms']:>9.1f} {row['store_p50_ms']:>9.1f} {100 * row['store_share']:>7.1f}% "
              f"{row['store_calls']:>6.0f}  {row['spread']}", flush=True)
        return row

    def main(self):
        rows = []
        print(f"creates per setup: {self.a.creates}, {self.a.concurrency} at a time; "
              f"{os.cpu_count()} CPUs; build {self.build}", flush=True)
        print(f"{'setup':<37} {'n':>4} {'creates/s':>10} {'p50 ms':>9} {'p90 ms':>9} {'store p50':>9} "
              f"{'store %':>8} {'calls':>6}  placement", flush=True)
        print("(store: ms a create's request waited on the store, p50; store %: its share of the time the API "
              "server spent on creates; calls: store round trips per create, median)", flush=True)
        single, url, key = self.start_single()
        rows.append(self.scenario("single host, SQLite", [url], key))
        single.stop()

        self.start_pg()
        self.subnet = self.pick_subnet()
        self.start_worker(0)
        urls = [self.start_api(1)]
        with open(os.path.join(self.base, "api1", "admin.key")) as f:
            key = f.read().strip()
        urls.append(self.start_api(2))
        for n in range(1, 4):
            if n > 1:
                self.start_worker(n - 1)
                time.sleep(1)   # its first heartbeat: the templates it holds
            rows.append(self.scenario(f"{n} worker{'s' if n > 1 else ''}, 2 API servers, PostgreSQL", urls, key))
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump(rows, f, indent=1)
        return rows

    def cleanup(self):
        for p in reversed(self.procs):
            p.stop()
        # a run that failed half-way may leave sandboxes of a stopped worker
        # running: every process in this run's cgroups is one of them
        for root in self.cgroup_hierarchies():
            for d in os.listdir(root):
                if not d.startswith(TAG):
                    continue
                for dirpath, _, files in os.walk(os.path.join(root, d)):
                    if "cgroup.procs" not in files:
                        continue
                    with open(os.path.join(dirpath, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except ProcessLookupError:
                                pass
        for link in self.links:
            run(["ip", "link", "del", link], check=False)
        for ns in self.netns:
            run(["ip", "netns", "del", ns], check=False)
        if self.pg_url:
            subprocess.run(["sh", PG_SCRIPT, "stop", self.pg_url], capture_output=True, timeout=120)
        # the pools stay mounted after a worker's SIGTERM (its sandboxes would
        # be adopted): unmount and detach them here
        for d in sorted(os.listdir(self.base)):
            pool = os.path.join(self.base, d, "pool")
            if os.path.ismount(pool):
                run(["umount", "-l", pool], check=False)
            img = os.path.join(self.base, d, "pool.img")
            if os.path.exists(img):
                for line in run(["losetup", "-j", img], check=False).stdout.splitlines():
                    run(["losetup", "-d", line.split(":")[0]], check=False)
        # this run's cgroup roots on every hierarchy (v2, or v1 and hybrid)
        for root in self.cgroup_hierarchies():
            for d in os.listdir(root):
                if not d.startswith(TAG):
                    continue
                for dirpath, _, _ in sorted(os.walk(os.path.join(root, d)), key=lambda x: -x[0].count("/")):
                    try:
                        os.rmdir(dirpath)
                    except OSError:
                        pass
        shutil.rmtree(self.base, ignore_errors=True)

    @staticmethod
    def cgroup_hierarchies():
        """/sys/fs/cgroup (v2) and every v1 or hybrid hierarchy under it."""
        return sorted({"/sys/fs/cgroup"} | {os.path.realpath(os.path.join("/sys/fs/cgroup", h))
                                             for h in os.listdir("/sys/fs/cgroup")
                                             if os.path.isdir(os.path.join("/sys/fs/cgroup", h))})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build-release"))
    ap.add_argument("--template", default=None, help="base.tar (default: BUILD/templates/base.tar)")
    ap.add_argument("--creates", type=int, default=30, help="creates measured per setup")
    ap.add_argument("--concurrency", type=int, default=4, help="clients creating at once")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--lost-timeout-s", type=int, default=15, help="worker_lost_timeout_s")
    run_bench(Bench, ap.parse_args(), "bench/cluster.py")


def run_bench(cls, a, name):
    """cls(a).main(), its processes, links and mounts removed whatever happens."""
    a.template = a.template or os.path.join(a.build_dir, "templates", "base.tar")
    if os.geteuid() != 0:
        sys.exit(f"{name} needs root (spaced does)")
    b = cls(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        b.main()
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()
