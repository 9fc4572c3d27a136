# SPDX-License-Identifier: MIT
"""Scale-out on one machine: a private PostgreSQL, two API servers, two
controllers and three workers, each worker in its own network namespace
with its own state directory and pool, as if on three hosts. API servers
reach the workers only over the veth links, with the cluster token.

Covered (issue 7 item 7 and its bad input): 30 creates through both API
servers spread across the workers, exec in each through the API server that
did not create it, the runtimes and accelerators each worker reports, a
worker killed with SIGKILL (its sandboxes become lost with events, the
others keep running, a create does not wait on it; it comes back and takes
its sandboxes back running, files intact; killed and restarted at once it
registers under its name at once), a worker stalled (SIGSTOP) past its lease
takes its sandboxes back without a restart, a worker stalled in the middle
of a call (the caller stops waiting once its heartbeats stop), a chaos run
of all of these and more in a row, a database outage longer than
the lease marks nothing lost, failover of the active controller, a worker with a wrong token
(refused at registration: never listed, never tried), an API server and a
controller with a wrong token (refused at start), a duplicate worker name
(refused), a wildcard worker address (refused), raw connections with a wrong
token, a partition, a database outage (503 with a clear error, then
recovery). Shipping (item 5): checkpoints shipped to another worker (the
second incremental), the sandbox's worker killed, the lost sandbox restored
from its shipped copy on another worker with its files; a template imported
through an API server on every worker; corrupted, mis-checksummed,
truncated, cut-off and oversized streams refused with nothing left behind.
Credentials (issue 4 in a cluster): a credential made through one API server
is used by a sandbox created through the other on a worker (its gateway puts
the value on the request to an HTTPS test upstream beside the workers); a
worker or an API server with another master key, or one others may read, is
refused at start.
No residue on any "host": each worker's netns, pool and cgroups are checked
at the end."""

import http.client
import io
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tarfile
import time

import pytest

import e2e_host as host
import e2e_http
import e2e_residue as residue
from e2e_daemon import E2E_DISK_OVERCOMMIT

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PG_SCRIPT = os.path.join(REPO, "tests", "pg-test-server.sh")
LOST_TIMEOUT_S = 3
LEASE_S = 2           # the controllers' lease (controller_lease_s)
WORKERS = 3
SANDBOXES = 30
QEMU = "/usr/bin/qemu-system-x86_64"
WORKER_PORT = 7071
SERVERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gateway_servers.py")
BUILD = os.environ.get("SPACE_BUILD_DIR", os.path.join(REPO, "build"))
DEBIAN_TAR = os.environ.get("SPACE_DEBIAN_TAR", os.path.join(BUILD, "templates", "debian.tar"))
CRED_HOST = "api.cluster-cred.test"
UPSTREAM_I = 60       # the upstream test host's /30 in the test's /24 (workers use 0..7)
VM_WORKER = "w3"      # started with a guest kernel: it offers the vm runtime too


def _log(msg):
    print(f"[scaleout] {msg}", flush=True)


class Proc:
    """One spaced of the cluster, by PID."""

    def __init__(self, cluster, name, args, netns=None):
        self.c = cluster
        self.name = name
        self.args = args
        self.netns = netns
        self.log_path = os.path.join(cluster.base, f"{name}.log")
        self.proc = None

    def start(self):
        self.mark = len(self.log()) if os.path.exists(self.log_path) else 0  # this start's lines come after
        cmd = list(self.args)
        if self.netns:
            # only the network namespace: mounts (the pool) stay on the host's table
            cmd = ["nsenter", f"--net=/run/netns/{self.netns}", "--"] + cmd
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== start: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=self.c.env, start_new_session=True, close_fds=True)
        self.c.s.extra_pids.append((self.proc.pid, host.proc_starttime(self.proc.pid)))
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_log(self, needle, timeout=60, start=0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.log()[start:]:
                return True
            if not self.running:
                break
            time.sleep(0.1)
        return needle in self.log()[start:]

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if not self.running:
            return self.proc.returncode if self.proc else None
        os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(30)

    def kill9(self):
        """SIGKILL of spaced; its worker process follows (parent-death signal)."""
        kids = host.children(self.proc.pid)
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        assert not host.wait_gone(kids, 30), f"{self.name}: the worker process outlived spaced"

    def sanitizer_reports(self):
        text = self.log()
        return [f"{self.name}: {m}" for m in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
                if m in text]


class Cluster:
    def __init__(self, session):
        self.s = session
        self.base = session.new_base_dir()
        self.tag = session.tag
        # the cgroup roots of this cluster's workers: its own (a cluster after another must not
        # reuse a root the host's instance registry still knows as the other's)
        self.ctag = f"{session.tag}-" + re.sub(r"[^a-z0-9]", "", os.path.basename(self.base)[-8:].lower())
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SPACE_")}
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        self.env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        self.pg_url = None
        self.netns = []
        self.links = []
        self.workers = {}
        self.apis = []
        self.controllers = []
        self.extra = []
        self.subnet = None
        self.key = None
        self.vm_kernel_dir = None
        self.upstream = None        # the HTTPS/DNS test upstream (gateway_servers.py) and its files
        self.master_key_file = None
        self.tls = None             # the certificates' directory, when the cluster runs mutual TLS

    # ---- hosts ----
    def pick_subnet(self):
        used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
        for _ in range(100):
            net = f"10.213.{random.randrange(1, 250)}"
            if f" {net}." not in used:
                return net
        raise RuntimeError("no free 10.213.x.0/24 for the test links")

    @staticmethod
    def host_link(i):
        """The host end of host i's link (by name: self.links also holds the
        upstream's, and hosts come and go, so its order is not the hosts')."""
        return f"spc{os.getpid() % 100000}h{i}"

    def add_host(self, i):
        ns = f"spc{os.getpid() % 100000}w{i}"
        link = self.host_link(i)
        peer = f"spc{os.getpid() % 100000}p{i}"
        host.run(["ip", "netns", "add", ns], check=True)
        self.netns.append(ns)
        host.run(["ip", "link", "add", link, "type", "veth", "peer", "name", peer], check=True)
        self.links.append(link)
        host.run(["ip", "link", "set", peer, "netns", ns], check=True)
        host.run(["ip", "addr", "add", f"{self.subnet}.{4 * i + 1}/30", "dev", link], check=True)
        host.run(["ip", "link", "set", link, "up"], check=True)
        host.run(["ip", "-n", ns, "addr", "add", f"{self.subnet}.{4 * i + 2}/30", "dev", peer], check=True)
        host.run(["ip", "-n", ns, "link", "set", peer, "up"], check=True)
        host.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        # workers reach each other through the host (shipping): only these
        # links forward, and only within the test's /24
        host.run(["sysctl", "-q", "-w", f"net.ipv4.conf.{link}.forwarding=1"], check=True)
        host.run(["ip", "-n", ns, "route", "add", f"{self.subnet}.0/24", "via", f"{self.subnet}.{4 * i + 1}"],
                 check=True)
        self.last_link = link
        return ns, f"{self.subnet}.{4 * i + 2}:{WORKER_PORT}"

    # ---- processes ----
    def tls_args(self, node):
        """Mutual TLS (test_cluster_tls.py: self.tls is the directory of
        scripts/cluster-certs.sh) or, in this file, plaintext on the test links."""
        if not self.tls:
            return ["--cluster-tls=off"]
        return [f"--cluster-tls-cert={self.tls}/{node}.crt", f"--cluster-tls-key={self.tls}/{node}.key",
                f"--cluster-tls-ca={self.tls}/ca.crt"]

    def common(self, token_file=None, node="api"):
        s = self.s
        return self.tls_args(node) + ["--store-url", self.pg_url, "--cluster-token-file", token_file or self.token_file,
                "--template-dir", self.template_dir, "--agent-path", s.agent_bin, "--log-level", "debug",
                f"--worker-lost-timeout-s={LOST_TIMEOUT_S}",
                "--webhook-allow-private=1"]  # test_webhooks_in_a_cluster's receiver is on loopback

    def state_dir(self, name):
        d = os.path.join(self.base, name)
        os.makedirs(d, mode=0o700, exist_ok=True)
        # a worker's pool comes and goes with the worker (like a Daemon's)
        self.s.infra_paths.update({os.path.join(d, "pool"), os.path.join(d, "pool.img")})
        return d

    def add_upstream(self):
        """A test host beside the workers (its own netns, routed through the
        host like the workers reach each other): DNS and HTTPS with its own
        CA, the upstream of every worker's gateway."""
        ns = f"spc{os.getpid() % 100000}up"
        link, peer = f"spc{os.getpid() % 100000}hu", f"spc{os.getpid() % 100000}pu"
        hip, uip = f"{self.subnet}.{4 * UPSTREAM_I + 1}", f"{self.subnet}.{4 * UPSTREAM_I + 2}"
        host.run(["ip", "netns", "add", ns], check=True)
        self.netns.append(ns)
        host.run(["ip", "link", "add", link, "type", "veth", "peer", "name", peer], check=True)
        self.links.append(link)
        host.run(["ip", "link", "set", peer, "netns", ns], check=True)
        host.run(["ip", "addr", "add", f"{hip}/30", "dev", link], check=True)
        host.run(["ip", "link", "set", link, "up"], check=True)
        host.run(["sysctl", "-q", "-w", f"net.ipv4.conf.{link}.forwarding=1"], check=True)
        host.run(["ip", "-n", ns, "addr", "add", f"{uip}/30", "dev", peer], check=True)
        host.run(["ip", "-n", ns, "link", "set", peer, "up"], check=True)
        host.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        host.run(["ip", "-n", ns, "route", "add", f"{self.subnet}.0/24", "via", hip], check=True)
        d = os.path.join(self.base, "upstream")
        os.makedirs(d, mode=0o755)
        os.chmod(self.base, 0o755)
        sh = lambda *a: host.run(list(a), check=True)  # noqa: E731
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
           "/CN=space scaleout upstream CA", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem")
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={CRED_HOST}",
           "-keyout", f"{d}/srv.key", "-out", f"{d}/srv.csr")
        with open(f"{d}/ext", "w") as f:
            f.write(f"subjectAltName=DNS:{CRED_HOST}\n")
        sh("openssl", "x509", "-req", "-in", f"{d}/srv.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
           "-CAcreateserial", "-days", "2", "-extfile", f"{d}/ext", "-out", f"{d}/srv.pem")
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644 if f.endswith(".pem") else 0o600)
        log = f"{d}/upstream.log"
        open(log, "w").close()
        zone = {"_listen": [uip], CRED_HOST: [uip]}
        p = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "--", "/usr/bin/python3", SERVERS, log,
                              f"{d}/srv.pem", f"{d}/srv.key", json.dumps(zone)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.upstream = {"proc": p, "ip": uip, "ca": f"{d}/ca.pem", "log": log}
        assert p.stdout.readline().strip() == "ready"

    def upstream_requests(self, token):
        with open(self.upstream["log"]) as f:
            return [e for e in (json.loads(ln) for ln in f if ln.strip())
                    if e.get("kind") == "http" and token in e["path"]]

    def key_args(self, key_file=None):
        return [f"--master-key-file={key_file or self.master_key_file}"]

    def worker_args(self, name, i, address, token_file=None, state=None, key_file=None):
        extra = [f"--vm-kernel-dir={self.vm_kernel_dir}"] if name == VM_WORKER and self.vm_kernel_dir else []
        extra += self.key_args(key_file)
        if self.upstream:
            extra += [f"--gateway-dns-upstream={self.upstream['ip']}:53", f"--gateway-ca-file={self.upstream['ca']}"]
        return [self.s.spaced_bin, "--role", "worker", "--state-dir", self.state_dir(state or name),
                "--worker-name", name, "--worker-listen", address, "--pool-size-mb", "4096",
                "--disk-overcommit", E2E_DISK_OVERCOMMIT,
                "--cgroup-root", f"{self.ctag}-so-{name}", "--slots-max=1024"] + extra + self.common(token_file, name)

    def start_worker(self, name, i, address, netns, token_file=None):
        p = Proc(self, name, self.worker_args(name, i, address, token_file), netns).start()
        assert p.wait_log(f"worker {name} serving on", 300, p.mark), f"{name} did not start:\n{p.log()[-3000:]}"
        return p

    def start_api(self, n, wrap=(), extra=()):
        port = _free_port()
        p = Proc(self, f"api{n}", list(wrap) + [self.s.spaced_bin, "--role", "api",
                                                "--state-dir", self.state_dir(f"api{n}"),
                                                "--listen", f"127.0.0.1:{port}"] + self.common()
                                               + self.key_args() + list(extra)).start()
        p.url = f"http://127.0.0.1:{port}"
        end = time.monotonic() + 120
        while time.monotonic() < end:
            assert p.running, f"api{n} exited:\n{p.log()[-3000:]}"
            try:
                if e2e_http.request(p.url, "GET", "/healthz", timeout=5).status == 200:
                    return p
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"api{n} not healthy:\n{p.log()[-3000:]}")

    def start_controller(self, n, wrap=()):
        port = _free_port()
        p = Proc(self, f"ctl{n}", list(wrap) + [self.s.spaced_bin, "--role", "controller",
                                                "--state-dir", self.state_dir(f"ctl{n}"),
                                                f"--controller-lease-s={LEASE_S}",
                                                f"--controller-listen=127.0.0.1:{port}"] + self.key_args()
                 + self.common())
        p.probe_port = port
        return p.start()

    # ---- API ----
    def req(self, api, method, path, **kw):
        kw.setdefault("key", self.key)
        kw.setdefault("timeout", 120)
        r = e2e_http.request(api.url, method, path, **kw)
        if r.status < 300 and (r.content_type or "").startswith("application/json") and not kw.get("stream"):
            self.s.validate(r)
        return r

    def sandbox(self, api, sid):
        r = self.req(api, "GET", f"/v1/sandboxes/{sid}")
        assert r.status == 200, r
        return r.json()

    def exec_out(self, api, sid, shell):
        r = self.req(api, "POST", f"/v1/sandboxes/{sid}/exec", json={"shell": shell})
        assert r.status == 200, r
        out, code = "", None
        for line in r.text().splitlines():
            ev = json.loads(line)
            if ev["type"] == "stdout":
                out += ev["data"]
            elif ev["type"] == "exit":
                code = ev["code"]
        return code, out

    def all_sandboxes(self, api):
        r = self.req(api, "GET", "/v1/sandboxes")
        assert r.status == 200, r
        return r.json()["sandboxes"]

    def create(self, n):
        """n sandboxes, alternately through each API server: [(id, api index, worker)]."""
        made = []
        for k in range(n):
            r = self.req(self.apis[k % 2], "POST", "/v1/sandboxes", json={"disk_mb": 256})
            assert r.status == 201, r
            made.append((r.json()["id"], k % 2, r.json()["worker"]))
        return made

    def delete_all(self):
        """Every sandbox goes at the end of each test (the residue check after
        a test counts what no live sandbox owns)."""
        api = next(a for a in self.apis if a.running)
        for sb in self.all_sandboxes(api):
            r = self.req(api, "DELETE", f"/v1/sandboxes/{sb['id']}")
            assert r.status == 200, r

    def remove_host(self, ns, link):
        host.run(["ip", "link", "del", link])
        host.run(["ip", "netns", "del", ns])
        self.links.remove(link)
        self.netns.remove(ns)

    # ---- residue on each "host" ----
    def host_residue(self, grace=15):
        """What the "hosts" still hold once every sandbox is deleted: links in
        a worker's netns beyond lo and its end of the test link, sandbox roots
        in its pool, cgroups below its cgroup root. Polled for a short grace
        (a delete's last steps may trail its answer)."""
        end = time.monotonic() + grace
        while True:
            problems = []
            for name, (i, addr, ns) in self.addresses.items():
                if ns not in self.netns:
                    continue
                out = subprocess.run(["ip", "-n", ns, "-o", "link", "show"], capture_output=True, text=True,
                                     timeout=30).stdout
                links = [ln.split(":")[1].strip().split("@")[0] for ln in out.splitlines() if ln.count(":") > 1]
                extra = [ln for ln in links if ln != "lo" and ln != f"spc{os.getpid() % 100000}p{i}"]
                if extra:
                    problems.append(f"{name}: links {extra} left in its netns {ns}")
                pool = os.path.join(self.base, name, "pool", "sandboxes")
                roots = os.listdir(pool) if os.path.isdir(pool) else []
                if roots:
                    problems.append(f"{name}: sandbox roots {roots} left in its pool")
                for root in host.cgroup_roots(f"{self.ctag}-so-{name}"):
                    subs = [os.path.relpath(p, root) for p in host.cgroup_tree(root)]
                    if subs:
                        problems.append(f"{name}: cgroups {subs} left below {root}")
            if not problems or time.monotonic() > end:
                return problems
            time.sleep(0.5)

    # ---- teardown ----
    def teardown(self):
        problems = []
        api = next((a for a in self.apis if a.running), None)
        if api and self.pg_url:
            try:
                for sb in self.all_sandboxes(api):
                    r = self.req(api, "DELETE", f"/v1/sandboxes/{sb['id']}")
                    if r.status != 200:
                        problems.append(f"delete {sb['id']}: {r.status} {r.text()[:200]}")
            except Exception as e:  # noqa: BLE001 - teardown goes on
                problems.append(f"listing/deleting sandboxes: {e!r}")
            if not problems:
                problems += self.host_residue()
        for p in list(self.workers.values()) + self.apis + self.controllers + self.extra:
            if p.proc is None:
                continue
            rc = p.stop()
            if rc not in (0, None, -9, 1) and p.name not in ("badtoken", "dup", "badapi", "badcontroller",
                                                              "wildcard", "loose"):
                problems.append(f"{p.name} exited with {rc}")
            problems += p.sanitizer_reports()
        logs = residue.log_dir(self.s)
        os.makedirs(logs, exist_ok=True)
        for p in list(self.workers.values()) + self.apis + self.controllers + self.extra:
            if os.path.exists(p.log_path):
                shutil.copyfile(p.log_path, os.path.join(logs, f"scaleout-{p.name}.log"))
        if self.upstream:
            p = self.upstream["proc"]
            p.stdin.close()
            p.kill()
            p.wait(30)
        for link in self.links:
            host.run(["ip", "link", "del", link])
        for ns in self.netns:
            host.run(["ip", "netns", "del", ns])
        if self.pg_url:
            host.run(["sh", PG_SCRIPT, "stop", self.pg_url])
        return problems


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture(scope="module")
def cluster(e2e_session):
    s = e2e_session
    s.check_binaries()
    r = subprocess.run(["sh", PG_SCRIPT, "start"], capture_output=True, text=True, timeout=120)
    if r.returncode == 77:
        pytest.skip("no PostgreSQL here")
    assert r.returncode == 0, r.stderr
    c = Cluster(s)
    c.pg_url = r.stdout.strip()
    try:
        c.token_file = os.path.join(c.base, "cluster.token")
        with open(os.open(c.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(os.urandom(24).hex() + "\n")
        c.template_dir = os.path.join(c.base, "templates")
        os.makedirs(c.template_dir)
        os.link(s.base_template(), os.path.join(c.template_dir, "base.tar"))
        if os.access(QEMU, os.X_OK):
            from test_vm import kernel_dir    # built once into the test cache (test_vm uses it too)
            try:
                c.vm_kernel_dir = kernel_dir()
            except AssertionError as e:       # test_vm fails on it loudly; here only the vm check goes
                _log(f"no guest kernel, the vm runtime check is left out: {str(e)[:300]}")
        c.subnet = c.pick_subnet()
        c.master_key_file = os.path.join(c.base, "master.key")
        with open(os.open(c.master_key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(os.urandom(32))
        c.add_upstream()
        c.addresses = {}
        for i in range(WORKERS):
            name = f"w{i + 1}"
            ns, addr = c.add_host(i)
            c.addresses[name] = (i, addr, ns)
        for name, (i, addr, ns) in c.addresses.items():
            c.workers[name] = c.start_worker(name, i, addr, ns)
        c.apis = [c.start_api(1)]
        with open(os.path.join(c.base, "api1", "admin.key")) as f:
            c.key = f.read().strip()
        c.apis.append(c.start_api(2))
        c.controllers = [c.start_controller(1), c.start_controller(2)]
        yield c
    finally:
        problems = c.teardown()
        if problems:
            pytest.fail("cluster teardown:\n  " + "\n  ".join(problems))


def _by_worker(sandboxes):
    out = {}
    for sb in sandboxes:
        out.setdefault(sb["worker"], []).append(sb["id"])
    return out


@pytest.mark.timeout(600)
def test_spread_and_exec_through_the_other_api_server(cluster):
    c = cluster
    try:
        _spread_and_exec(c)
    finally:
        c.delete_all()


def _spread_and_exec(c):
    made = c.create(SANDBOXES)
    per = _by_worker([{"id": i, "worker": w} for i, _, w in made])
    assert sorted(per) == sorted(c.workers), per
    counts = [len(v) for v in per.values()]
    assert max(counts) - min(counts) <= 1, per           # spread: the least loaded first

    info = c.req(c.apis[1], "GET", "/v1/info").json()
    assert info["worker"] == "cluster"
    assert {w["name"]: w["state"] for w in info["workers"]} == {w: "live" for w in c.workers}
    assert all("base" in w["templates"] for w in info["workers"])
    # what each worker process can run, as it reported it: the one with a
    # guest kernel offers the vm runtime, with KVM only where /dev/kvm opens
    # for the sandboxes' unprivileged VMMs (0666, or 0660 with a group not root's)
    kvm = False
    if os.path.exists("/dev/kvm"):
        mode, gid = os.stat("/dev/kvm").st_mode, os.stat("/dev/kvm").st_gid
        kvm = mode & 0o006 == 0o006 or (mode & 0o060 == 0o060 and gid != 0)
    for w in info["workers"]:
        runtimes = w["runtimes"].split(",")
        assert "ns" in runtimes, w
        if w["name"] == VM_WORKER and c.vm_kernel_dir:
            assert "vm" in runtimes, w
            assert ("kvm" in w["accelerators"].split(",")) == kvm, w
        else:
            assert "vm" not in runtimes and w["accelerators"] == "", w
    if c.vm_kernel_dir:
        assert "runtimes ns,vm" in c.workers[VM_WORKER].log()

    # every exec through the API server that did not create the sandbox, streamed
    # from the worker's netns over the veth (big enough to need several reads)
    for sid, via, _ in made:
        code, out = c.exec_out(c.apis[1 - via], sid, "hostname; head -c 200000 /dev/zero | wc -c")
        assert code == 0 and out.split() == [f"space-{sid}", "200000"], (sid, code, out)
    # files too
    sid, via, _ = made[0]
    r = c.req(c.apis[1 - via], "PUT", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/x"},
              data=b"y" * 300000)
    assert r.status in (200, 201, 204), r
    r = c.req(c.apis[via], "GET", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/x"})
    assert r.status == 200 and r.body == b"y" * 300000, r


@pytest.mark.timeout(300)
def test_wrong_token_and_duplicate_name(cluster):
    c = cluster
    # a raw connection with a wrong token: refused, and nothing after the hello runs
    i, addr, ns = c.addresses["w1"]
    hostpart, port = addr.rsplit(":", 1)
    with socket.create_connection((hostpart, int(port)), timeout=10) as sock:
        sock.sendall(b'{"op":"hello","token":"0123456789abcdef0123","worker":"w1"}\n{"op":"info"}\n')
        data = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    lines = data.decode().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["code"] == "unauthorized", data
    assert c.workers["w1"].wait_log("wrong cluster token", 10)
    # no hello at all
    with socket.create_connection((hostpart, int(port)), timeout=10) as sock:
        sock.sendall(b'{"op":"destroy","id":"x"}\n')
        assert json.loads(sock.recv(4096).decode().splitlines()[0])["code"] == "unauthorized"

    # a duplicate of a live name: refused at registration, exits (on its own
    # cgroup root: the same one as w1's is refused earlier, by the host's
    # registry of instances)
    dup = Proc(c, "dup", c.worker_args("w1", 7, f"{c.subnet}.{4 * 0 + 2}:{WORKER_PORT + 1}", state="dup")
               + ["--cgroup-root", f"{c.ctag}-so-dup"], ns).start()
    c.extra.append(dup)
    assert dup.proc.wait(120) != 0
    assert "taken by another live worker" in dup.log()
    assert c.workers["w1"].running

    # a worker with a wrong token: it reaches the database, but the store
    # holds the cluster token's fingerprint: refused before it registers, so
    # it is never listed and no API server ever tries it
    bad_token = os.path.join(c.base, "bad.token")
    with open(os.open(bad_token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write("not-the-cluster-token-at-all\n")
    ns4, addr4 = c.add_host(3)
    link4 = c.last_link
    bad = Proc(c, "badtoken", c.worker_args("w4", 3, addr4, bad_token), ns4).start()
    c.extra.append(bad)
    assert bad.proc.wait(120) != 0
    log = bad.log()
    assert "is not this cluster's" in log and "Refusing to register worker 'w4'" in log, log[-3000:]
    assert "serving on" not in log
    workers = c.req(c.apis[0], "GET", "/v1/info").json()["workers"]
    assert "w4" not in [w["name"] for w in workers], workers
    r = c.req(c.apis[1], "POST", "/v1/sandboxes", json={"disk_mb": 256})
    assert r.status == 201 and r.json()["worker"] in c.workers, r
    assert c.req(c.apis[0], "DELETE", f"/v1/sandboxes/{r.json()['id']}").status == 200
    c.remove_host(ns4, link4)

    # an API server and a controller with a wrong token: refused at start
    for role in ("api", "controller"):
        args = [c.s.spaced_bin, "--role", role, "--state-dir", c.state_dir(f"bad{role}")] + c.common(bad_token)
        if role == "api":
            args += ["--listen", f"127.0.0.1:{_free_port()}"]
        p = Proc(c, f"bad{role}", args).start()
        c.extra.append(p)
        assert p.proc.wait(120) != 0
        assert "is not this cluster's" in p.log(), p.log()[-3000:]

    # a worker that would register an address nobody can reach it at
    p = Proc(c, "wildcard", c.worker_args("w5", 5, f"0.0.0.0:{WORKER_PORT + 5}", state="wildcard")).start()
    c.extra.append(p)
    assert p.proc.wait(60) != 0 and "wildcard address" in p.log(), p.log()[-2000:]

    # a token file others can read is refused
    loose = os.path.join(c.base, "loose.token")
    with open(loose, "w") as f:
        f.write("0123456789abcdef0123456789\n")
    os.chmod(loose, 0o644)
    p = Proc(c, "loose", [c.s.spaced_bin, "--role", "controller", "--state-dir", c.state_dir("loose")]
             + c.common(loose)).start()
    c.extra.append(p)
    assert p.proc.wait(60) != 0 and "mode 0600" in p.log()


@pytest.mark.timeout(300)
def test_worker_killed_its_sandboxes_become_lost(cluster):
    c = cluster
    try:
        _worker_loss(c)
    finally:
        c.delete_all()


def _worker_loss(c):
    api = c.apis[0]
    c.create(6)
    per = _by_worker([sb for sb in c.all_sandboxes(api) if sb["state"] == "running"])
    victim = "w2"
    lost_ids = per.get(victim, [])
    assert lost_ids, per
    others = [i for w, ids in per.items() if w != victim for i in ids]
    for sid in lost_ids:
        code, _ = c.exec_out(api, sid, f"echo kept-{sid} > /tmp/kept")
        assert code == 0
    t_dead = time.monotonic()
    c.workers[victim].kill9()

    # a create never waits on the dead worker (it may still look live for a moment)
    r = c.req(api, "POST", "/v1/sandboxes", json={})
    assert r.status == 201 and r.json()["worker"] != victim, r
    newer = r.json()["id"]

    _wait(lambda: all(c.sandbox(api, i)["state"] == "unreachable" for i in lost_ids), 30, "sandboxes of w2 lost")
    _log(f"worker kill -9 -> its {len(lost_ids)} sandboxes lost: {time.monotonic() - t_dead:.2f} s "
         f"(worker_lost_timeout_s {LOST_TIMEOUT_S})")
    for sid in lost_ids:
        sb = c.sandbox(api, sid)
        assert victim in sb["reason"], sb
        ev = c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.unreachable"}).json()["events"]
        assert len(ev) == 1 and ev[0]["data"]["worker"] == victim, ev
        # operations on it fail clearly
        r = c.req(c.apis[1], "POST", f"/v1/sandboxes/{sid}/exec", json={"shell": "true"})
        assert r.status == 409, r
    ev = c.req(api, "GET", "/v1/events", params={"type": "worker.suspect"}).json()["events"]
    assert any(e["data"]["worker"] == victim for e in ev), ev
    # the others keep running
    for sid in others + [newer]:
        assert c.sandbox(api, sid)["state"] == "running"
        code, out = c.exec_out(c.apis[1], sid, "echo alive")
        assert code == 0 and out == "alive\n"

    # it comes back under the same name: it takes its lost sandboxes back, running, their files kept
    i, addr, ns = c.addresses[victim]
    c.workers[victim] = c.start_worker(victim, i, addr, ns)
    assert c.workers[victim].wait_log("Reconciled:", 10, c.workers[victim].mark)
    log = c.workers[victim].log()[c.workers[victim].mark:]
    assert "Removing orphan sandbox root" not in log, log[-3000:]
    _wait(lambda: all(c.sandbox(api, i)["state"] == "running" for i in lost_ids), 30, "the lost sandboxes back")
    for sid in lost_ids:
        code, out = c.exec_out(c.apis[1], sid, "cat /tmp/kept")
        assert code == 0 and out == f"kept-{sid}\n", (sid, code, out)
        ev = c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.found"}).json()["events"]
        assert len(ev) == 1 and victim in ev[0]["reason"], ev

    # killed and started again at once: it registers under its name at once (the same instance) and
    # finds its sandboxes, which never stopped
    c.workers[victim].kill9()
    c.workers[victim] = c.start_worker(victim, i, addr, ns)
    assert c.workers[victim].wait_log("Reconciled:", 30, c.workers[victim].mark)
    log = c.workers[victim].log()[c.workers[victim].mark:]
    assert "taken by another live worker" not in log, log[-3000:]
    for sid in lost_ids:
        assert c.sandbox(api, sid)["state"] == "running"
        code, out = c.exec_out(api, sid, "cat /tmp/kept")
        assert code == 0 and out == f"kept-{sid}\n", (sid, code, out)
    for sid in lost_ids:
        assert c.req(api, "DELETE", f"/v1/sandboxes/{sid}").status == 200


class _Raw:
    """A connection to a worker's internal listener with the cluster token
    (its hello answer is the first line)."""

    def __init__(self, c, worker):
        i, addr, ns = c.addresses[worker]
        hostpart, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((hostpart, int(port)), timeout=60)
        self.f = self.sock.makefile("rb")
        with open(c.token_file) as f:
            token = f.read().strip()
        self.send(json.dumps({"op": "hello", "token": token, "worker": worker}).encode() + b"\n")

    def send(self, data):
        self.sock.sendall(data)

    def line(self):
        return json.loads(self.f.readline())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # really gone, whatever still refers to it
        except OSError:
            pass  # the worker closed it first
        self.sock.close()


def _frames(data, sha, nbytes):
    out = b""
    for k in range(0, len(data), 65536):
        chunk = data[k:k + 65536]
        out += len(chunk).to_bytes(4, "big") + chunk
    return out + (0).to_bytes(4, "big") + json.dumps({"sha256": sha, "bytes": nbytes}).encode() + b"\n"


def _pool(c, worker):
    return os.path.join(c.base, worker, "pool")


def _copy_on(c, worker, sid):
    """What of sandbox sid worker still holds: its root in the pool, its cgroups."""
    held = [p for p in [os.path.join(_pool(c, worker), "sandboxes", sid)] if os.path.exists(p)]
    return held + [p for root in host.cgroup_roots(f"{c.ctag}-so-{worker}") for p in host.cgroup_tree(root)
                   if os.path.basename(p) == sid]


@pytest.mark.timeout(600)
def test_checkpoint_shipped_then_lost_sandbox_restored_elsewhere(cluster):
    c = cluster
    try:
        _ship_and_recover(c)
    finally:
        c.delete_all()


def _ship_and_recover(c):
    api = c.apis[0]
    r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 256})
    assert r.status == 201, r
    sid, victim = r.json()["id"], r.json()["worker"]
    code, _ = c.exec_out(api, sid, "mkdir -p /data && echo 'kept across hosts' > /data/note && seq 1 50000 > /data/big")
    assert code == 0
    r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "before-loss"})
    assert r.status == 201, r
    ck = r.json()["id"]
    # the controller ships it to another worker (ship_checkpoints = 1): an event
    # once the receiver verified the stream and holds it
    ev = _wait(lambda: c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.checkpoint_shipped"})
               .json()["events"], 60, "the checkpoint shipped")
    d = ev[0]["data"]
    assert d["checkpoint"] == ck and d["from_worker"] == victim and d["worker"] != victim, d
    assert len(d["sha256"]) == 64 and d["bytes"] > 0, d
    holder = d["worker"]
    assert os.path.isdir(os.path.join(_pool(c, holder), "checkpoints", sid, ck))
    assert not [n for n in os.listdir(os.path.join(_pool(c, holder), "tmp")) if n.startswith("recv.")]
    # a checkpoint taken later is shipped too (incremental when the receiver has a parent)
    code, _ = c.exec_out(api, sid, "echo second > /data/second")
    r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "second"})
    assert r.status == 201, r
    ck2 = r.json()["id"]
    _wait(lambda: [e for e in c.req(api, "GET", "/v1/events", params={"sandbox": sid,
                                                                          "type": "sandbox.checkpoint_shipped"})
                   .json()["events"] if e["data"]["checkpoint"] == ck2], 60, "the second checkpoint shipped")

    # the store also lists a copy on the third worker, which holds none (bookkeeping gone wrong): a
    # recovery that tries it first falls back to the real holder, and the phantom row goes
    phantom = next(w for w in c.workers if w not in (victim, holder))
    subprocess.run(["psql", "-v", "ON_ERROR_STOP=1", "-q", c.pg_url, "-c",
                    "INSERT INTO checkpoint_copies (checkpoint_id, sandbox_id, worker, available, updated_usec) "
                    f"VALUES ('{ck}', '{sid}', '{phantom}', true, 1)"], check=True, timeout=60)

    # the sandbox's worker dies: the sandbox is lost
    c.workers[victim].kill9()
    _wait(lambda: c.sandbox(api, sid)["state"] == "unreachable", 30, "the sandbox lost")
    # restored on a worker that holds the shipped copy, through the other API server
    r = c.req(c.apis[1], "POST", f"/v1/sandboxes/{sid}/restore", json={"checkpoint": "before-loss"})
    assert r.status == 200, r
    rows = subprocess.run(["psql", "-At", c.pg_url, "-c",
                           f"SELECT worker FROM checkpoint_copies WHERE checkpoint_id = '{ck}' ORDER BY worker"],
                          check=True, timeout=60, capture_output=True, text=True).stdout.split()
    assert holder in rows, rows
    if phantom < holder:  # tried first
        assert phantom not in rows, rows
    sb = r.json()
    assert sb["state"] == "running" and sb["worker"] != victim, sb
    code, out = c.exec_out(c.apis[0], sid, "cat /data/note; wc -l < /data/big; test -e /data/second || echo no-second")
    assert code == 0 and out.split("\n")[:3] == ["kept across hosts", "50000", "no-second"], out
    ev = c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.recovered"}).json()["events"]
    assert len(ev) == 1 and ev[0]["data"]["from_worker"] == victim and ev[0]["data"]["worker"] == sb["worker"], ev
    assert ev[0]["data"]["checkpoint"] == ck
    # and it lives on there: another checkpoint and a restore work
    r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "after"})
    assert r.status == 201, r

    # the dead worker comes back: what it had of the sandbox is an orphan now
    i, addr, ns = c.addresses[victim]
    c.workers[victim] = c.start_worker(victim, i, addr, ns)
    assert c.workers[victim].wait_log("Reconciled:", 10, c.workers[victim].mark)
    assert f"Removing orphan sandbox root {sid}" in c.workers[victim].log()[c.workers[victim].mark:]
    assert c.sandbox(api, sid)["state"] == "running"
    # deleting the sandbox removes the copies everywhere (the controller's pass)
    assert c.req(api, "DELETE", f"/v1/sandboxes/{sid}").status == 200
    _wait(lambda: not any(os.path.exists(os.path.join(_pool(c, w), "checkpoints", sid)) for w in c.workers),
          60, "the shipped copies removed")


def _shipped(c, api, sid, ck):
    return [e["data"] for e in c.req(api, "GET", "/v1/events", params={"sandbox": sid,
                                                                       "type": "sandbox.checkpoint_shipped"})
            .json()["events"] if e["data"]["checkpoint"] == ck]


@pytest.mark.timeout(300)
def test_copies_below_the_count_shipped_again_none_left_reported(cluster):
    """ship_checkpoints = 1: the worker holding a checkpoint's shipped copy stops (SIGSTOP past the
    lost timeout): the controller ships it again, from the sandbox's worker to the third one; a
    checkpoint whose every copy went from the store's list is reported once
    (sandbox.checkpoint_unavailable)."""
    c = cluster
    api = c.apis[0]
    [(sid, _, origin)] = c.create(1)
    r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "c1"})
    assert r.status == 201, r
    ck = r.json()["id"]
    holder = _wait(lambda: _shipped(c, api, sid, ck), 60, "the checkpoint shipped")[0]["worker"]
    third = next(w for w in c.workers if w not in (origin, holder))
    os.kill(c.workers[holder].pid, signal.SIGSTOP)
    try:
        again = _wait(lambda: [d for d in _shipped(c, api, sid, ck) if d["worker"] == third], 60,
                      "the copy shipped again")
        assert again[0]["from_worker"] == origin, again
    finally:
        os.kill(c.workers[holder].pid, signal.SIGCONT)
    _wait(lambda: any(w["name"] == holder and w["state"] == "live"
                      for w in c.req(api, "GET", "/v1/info").json()["workers"]), 30, f"{holder} live again")
    # every copy of a second checkpoint unlisted (as if its holders had lost them): reported, once
    r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "c2"})
    assert r.status == 201, r
    ck2 = r.json()["id"]
    _wait(lambda: _shipped(c, api, sid, ck2), 60, "the second checkpoint shipped")
    subprocess.run(["psql", "-v", "ON_ERROR_STOP=1", "-q", c.pg_url, "-c",
                    f"DELETE FROM checkpoint_copies WHERE checkpoint_id = '{ck2}'"], check=True, timeout=60)

    def unavailable():
        return [e for e in c.req(api, "GET", "/v1/events", params={"sandbox": sid,
                                                                   "type": "sandbox.checkpoint_unavailable"})
                .json()["events"] if e["data"]["checkpoint"] == ck2]
    _wait(unavailable, 30, "the checkpoint reported without a copy")
    time.sleep(2.5)  # two more rounds
    assert len(unavailable()) == 1, unavailable()
    c.delete_all()


class _StalledReceiver:
    """A receiver of ship streams that takes the request and then reads
    nothing: the sender's `btrfs send` stays in the kernel, blocked on a full
    pipe, for as long as the test wants. It listens on the host end of a
    worker's link (reachable from that worker's namespace)."""

    def __init__(self, c, worker):
        i, _, _ = c.addresses[worker]
        self.host = f"{c.subnet}.{4 * i + 1}"
        self.lsock = socket.socket()
        self.lsock.bind((self.host, 0))
        self.lsock.listen(1)
        self.lsock.settimeout(60)
        self.conn = None

    @property
    def address(self):
        return f"{self.host}:{self.lsock.getsockname()[1]}"

    def take(self):
        """Answers the hello and the receive request ("have nothing": a full
        stream), reads the first bytes of the stream and then stops reading."""
        self.conn, _ = self.lsock.accept()
        self.conn.settimeout(60)
        f = self.conn.makefile("rb")
        assert json.loads(f.readline())["op"] == "hello"
        self.conn.sendall(json.dumps({"ok": True, "worker": "stalled"}).encode() + b"\n")
        req = json.loads(f.readline())
        assert req["op"] == "receive", req
        self.conn.sendall(json.dumps({"ok": True, "complete": False, "have": []}).encode() + b"\n")
        assert len(f.read(65536)) == 65536
        return req

    def close(self):
        for s in (self.conn, self.lsock):
            if s:
                s.close()


def _sends_of(pid, item=None):
    """The `btrfs send` processes that spaced PID started (of a subvolume
    whose path holds item: the controller may ship other copies meanwhile)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and argv[0].endswith(b"/btrfs") and argv[1:2] == [b"send"] and \
                (item is None or any(item.encode() in a for a in argv[2:])):
            out.append(int(d))
    return out


@pytest.mark.timeout(600)
def test_delete_while_a_checkpoint_ships(cluster):
    """The kernel refuses to delete a subvolume while a send reads it: a
    DELETE of a checkpoint, or of its sandbox, while that checkpoint ships
    cancels the send and succeeds (it was a 500 "Operation not permitted")."""
    c = cluster
    api = c.apis[0]
    r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 256})
    assert r.status == 201, r
    sid, victim = r.json()["id"], r.json()["worker"]
    node = c.workers[victim]
    mark = len(node.log())
    try:
        # far more than a pipe and two socket buffers hold
        code, _ = c.exec_out(api, sid, "head -c 67108864 /dev/urandom > /big && sync")
        assert code == 0
        cks = []
        for name in ("one", "two"):
            r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": name})
            assert r.status == 201, r
            cks.append(r.json()["id"])
        for k, ck in enumerate(cks):
            recv = _StalledReceiver(c, victim)
            try:
                with _Raw(c, victim) as raw:
                    assert raw.line()["ok"]
                    raw.send(json.dumps({"op": "ship", "kind": "checkpoint", "sandbox": sid, "name": ck,
                                         "to": "stalled", "address": recv.address, "template": "base"}).encode()
                             + b"\n")
                    req = recv.take()
                    assert req["sandbox"] == sid and req["name"] == ck, req
                    assert _wait(lambda: _sends_of(node.pid, ck), 30, "the btrfs send in the kernel")
                    if k == 0:
                        r = c.req(api, "DELETE", f"/v1/sandboxes/{sid}/checkpoints/{ck}")
                    else:
                        r = c.req(api, "DELETE", f"/v1/sandboxes/{sid}")
                    assert r.status in (200, 204), r
                    gone = os.path.join(_pool(c, victim), "checkpoints", sid, ck)
                    if k == 0:   # a checkpoint's DELETE removes it before it answers
                        assert not os.path.exists(gone)
                        assert not _sends_of(node.pid, ck)
                    else:        # a sandbox's files go on the worker's teardown thread, after the answer
                        assert _wait(lambda: not os.path.exists(gone), 30, "the deleted sandbox's checkpoint gone")
                        assert _wait(lambda: not _sends_of(node.pid, ck), 30, "the btrfs send cancelled")
                    recv.close()  # the sender's write fails: it answers the ship with the failure
                    ans = raw.line()
                    assert not ans["ok"] and "shipping" in ans["message"], ans
            finally:
                recv.close()
        assert node.wait_log("Cancelling the btrfs send", 10, mark)
        # the controller may remove the deleted checkpoint's copy (cancelling
        # the send) before the teardown thread reaches the root
        root = os.path.join(_pool(c, victim), "sandboxes", sid)
        assert _wait(lambda: not os.path.exists(root), 30, "the deleted sandbox's root gone")
    finally:
        c.delete_all()


@pytest.mark.timeout(300)
def test_template_import_reaches_every_worker(cluster):
    c = cluster
    api = c.apis[1]
    with open(c.s.base_template(), "rb") as f:
        tar = f.read()
    r = c.req(api, "POST", "/v1/templates", params={"name": "shipped"}, data=tar,
              headers={"Content-Type": "application/x-tar"})
    assert r.status == 201, r
    assert r.json()["name"] == "shipped" and r.json()["state"] == "ready", r.json()
    for w in c.workers:
        assert os.path.isdir(os.path.join(_pool(c, w), "templates", "shipped")), w
        assert os.path.isdir(os.path.join(_pool(c, w), "templates", "shipped@v1")), w  # its version 1
    # every worker says so in its heartbeat, and a sandbox of it runs on any of them
    _wait(lambda: all("shipped" in w["templates"].split(",")
                      for w in c.req(api, "GET", "/v1/info").json()["workers"] if w["name"] in c.workers),
          30, "every worker lists the template")
    made = []
    for n in range(len(c.workers)):
        r = c.req(c.apis[n % 2], "POST", "/v1/sandboxes", json={"template": "shipped"})
        assert r.status == 201, r
        made.append((r.json()["id"], r.json()["worker"]))
    assert len({w for _, w in made}) == len(c.workers), made
    for sid, _ in made:
        code, out = c.exec_out(api, sid, "echo ok")
        assert code == 0 and out == "ok\n"
        assert c.req(api, "DELETE", f"/v1/sandboxes/{sid}").status == 200
    # a second import under the name is a version 2: a corrupt one is 400 and leaves the name as it was
    r = c.req(api, "POST", "/v1/templates", params={"name": "shipped"}, data=b"x" * 512,
              headers={"Content-Type": "application/x-tar"})
    assert r.status == 400, r
    assert [v["version"] for v in c.req(api, "GET", "/v1/templates/shipped/versions").json()["versions"]] == [1]
    for w in c.workers:
        assert os.path.isdir(os.path.join(_pool(c, w), "templates", "shipped")), w
        assert not os.path.exists(os.path.join(_pool(c, w), "templates", "shipped@v2")), w
    r = c.req(api, "POST", "/v1/templates", params={"name": "broken"}, data=b"not a tar archive" * 100,
              headers={"Content-Type": "application/x-tar"})
    assert r.status == 400, r
    assert not any(os.path.exists(os.path.join(_pool(c, w), "templates", "broken")) for w in c.workers)
    # a good one: version 2 on every worker, the name moved on each; version 1 kept by its tag
    assert c.req(api, "POST", "/v1/templates/shipped/tags", json={"tag": "keep"}).status == 200
    r = c.req(api, "POST", "/v1/templates", params={"name": "shipped"}, data=tar,
              headers={"Content-Type": "application/x-tar"})
    assert r.status == 201, r
    for w in c.workers:
        for v in ("shipped@v1", "shipped@v2"):
            assert os.path.isdir(os.path.join(_pool(c, w), "templates", v)), (w, v)
    r = c.req(c.apis[0], "POST", "/v1/sandboxes", json={"template": "shipped:keep"})
    assert r.status == 201 and r.json()["template_version"] == 1, r
    sid = r.json()["id"]
    code, out = c.exec_out(api, sid, "echo ok")
    assert code == 0 and out == "ok\n"
    assert c.req(api, "DELETE", f"/v1/sandboxes/{sid}").status == 200
    # removed from every worker
    assert c.req(api, "DELETE", "/v1/templates/shipped").status == 204
    for w in c.workers:
        assert not os.path.exists(os.path.join(_pool(c, w), "templates", "shipped")), w
        assert not os.path.exists(os.path.join(_pool(c, w), "templates", "shipped@v1")), w


def _build_context(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for path, data in files.items():
            ti = tarfile.TarInfo(path)
            ti.mode, ti.mtime, ti.size = 0o644, 1700000000, len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _build(c, api, name, ctx):
    r = c.req(api, "POST", f"/v1/templates/{name}/build", data=ctx, headers={"Content-Type": "application/x-tar"},
              timeout=300)
    assert r.status == 200, r
    lines = [json.loads(ln) for ln in r.text().splitlines() if ln.strip()]
    assert lines and lines[-1]["type"] == "result", lines[-3:]
    return lines


@pytest.mark.timeout(600)
def test_dockerfile_build_in_a_cluster(cluster):
    """A Dockerfile build through an API server runs on one worker of the cluster (FROM a template,
    RUN in a sandbox there, COPY of the context's files streamed to it, the published template
    shipped to the others): a sandbox of it runs on every worker; a rebuild through the other API
    server goes to the same worker and takes every step from its cache; nothing of the build's
    stages is left on any worker."""
    c = cluster
    api = c.apis[0]
    name = f"bld-{secrets.token_hex(4)}"
    ctx = _build_context({
        "Dockerfile": b"FROM base\nRUN echo built > /built && mkdir -p /app\nCOPY hello.txt /app/hello.txt\n"
                      b"ENV GREETING=cluster\n",
        "hello.txt": b"hi from the context\n",
    })
    try:
        first = _build(c, api, name, ctx)[-1]
        assert first["run"] == 2 and first["cached_steps"] == 0, first  # RUN and COPY made, nothing cached
        assert first["worker"] in c.workers, first
        _wait(lambda: all(name in w["templates"].split(",")
                          for w in c.req(api, "GET", "/v1/info").json()["workers"] if w["name"] in c.workers),
              60, "every worker lists the built template")
        sids = []
        for n in range(len(c.workers)):
            r = c.req(c.apis[n % 2], "POST", "/v1/sandboxes", json={"template": name})
            assert r.status == 201, r
            sids.append((r.json()["id"], r.json()["worker"]))
        assert len({w for _, w in sids}) == len(c.workers), sids
        for sid, w in sids:
            code, out = c.exec_out(api, sid, "cat /built /app/hello.txt; echo $GREETING")
            assert code == 0 and out == "built\nhi from the context\ncluster\n", (w, code, out)
        c.delete_all()
        # the same build again, through the other API server: the same worker, every step cached
        res = _build(c, c.apis[1], name, ctx)[-1]
        assert res["run"] == 0 and res["cached_steps"] == first["run"] and res["worker"] == first["worker"], res
        # its version 2 went to the others as what differs from version 1, which they hold
        shipped = [ln for w in c.workers.values() for ln in w.log().splitlines()
                   if f"Shipped template '{name}@v2'" in ln]
        assert len(shipped) == len(c.workers) - 1, shipped
        assert all(f"incremental against {name}@v1" in ln for ln in shipped), shipped
        # no stage template, no build sandbox, anywhere
        names = [t["name"] for t in c.req(api, "GET", "/v1/templates").json()["templates"]]
        assert not [n for n in names if n.startswith("build-")], names
        assert not c.all_sandboxes(api)
        for w in c.workers:
            left = [t for t in os.listdir(os.path.join(_pool(c, w), "templates")) if t.startswith("build-")]
            assert not left, (w, left)
    finally:
        c.delete_all()
        c.req(api, "DELETE", f"/v1/templates/{name}")


def test_build_ops_over_the_network_take_no_host_path(cluster):
    """A peer with the cluster token cannot make a worker read a file of its own host into a layer:
    build_layer with a "tar" path is refused (its files come with build_layer_put, streamed); a
    build_layer_put with a key that is no layer key is refused before anything is received."""
    c = cluster
    w = next(iter(c.workers))
    key = "ab" * 32
    with _Raw(c, w) as raw:
        assert raw.line()["ok"]
        raw.send(json.dumps({"op": "build_layer", "key": key, "from": "scratch", "tar": "/etc/shadow"}).encode()
                 + b"\n")
        r = raw.line()
        assert not r["ok"] and r["code"] == "forbidden" and "build_layer_put" in r["message"], r
        # the connection goes on: a question after the refusal is answered
        raw.send(b'{"op":"layers_cached","keys":["' + key.encode() + b'"]}\n')
        r = raw.line()
        assert r["ok"] and r["cached"] == [False], r
    with _Raw(c, w) as raw:
        assert raw.line()["ok"]
        raw.send(json.dumps({"op": "build_layer_put", "key": "../../etc", "from": "scratch"}).encode() + b"\n")
        r = raw.line()
        assert not r["ok"] and r["code"] == "invalid_argument", r
    assert not os.path.exists(os.path.join(_pool(c, w), "layers", key))


def _marked_tar(c, marks):
    """The base template with /etc/space-version holding each mark: one tar per mark."""
    paths = []
    for m in marks:
        d = os.path.join(c.base, f"mark-{m}")
        os.makedirs(os.path.join(d, "etc"), exist_ok=True)
        with open(os.path.join(d, "etc", "space-version"), "w") as f:
            f.write(m + "\n")
        t = os.path.join(c.base, f"mark-{m}.tar")
        shutil.copyfile(c.s.base_template(), t)
        subprocess.run(["tar", "-rf", t, "-C", d, "--numeric-owner", "--owner=0", "--group=0", "etc/space-version"],
                       check=True)
        paths.append(t)
    return paths


def _publish(c, api, name, tar):
    """Imports tar as the newest version of name: its versions then."""
    with open(tar, "rb") as f:
        r = c.req(api, "POST", "/v1/templates", params={"name": name}, data=f.read(),
                  headers={"Content-Type": "application/x-tar"})
    assert r.status == 201, r
    return sorted(v["version"] for v in c.req(api, "GET", f"/v1/templates/{name}/versions").json()["versions"])


def _worker_state(c, api, name):
    return next(w for w in c.req(api, "GET", "/v1/info").json()["workers"] if w["name"] == name)


def _restart(c, name):
    i, addr, ns = c.addresses[name]
    c.workers[name] = c.start_worker(name, i, addr, ns)
    _wait(lambda: _worker_state(c, c.apis[0], name)["state"] == "live", 30, f"{name} live")


def _stop(c, name):
    assert c.workers[name].stop() == 0, c.workers[name].log()[-2000:]
    _wait(lambda: _worker_state(c, c.apis[0], name)["state"] != "live", 30, f"{name} no longer live")


@pytest.mark.timeout(600)
def test_a_worker_away_while_a_version_was_published_catches_up(cluster):
    """A worker that was down while version 2 was published still holds the
    name with version 1's files: no create is made from those (the create
    names the exact version); the controller ships it version 2 and makes it
    the name there too."""
    c = cluster
    api = c.apis[0]
    name, away, holders = "caught-up", "w3", ["w1", "w2"]
    one, two = _marked_tar(c, ("one", "two"))
    assert _publish(c, api, name, one) == [1]
    assert c.req(api, "POST", f"/v1/templates/{name}/tags", json={"tag": "first"}).status == 200  # kept
    _stop(c, away)
    try:
        assert _publish(c, api, name, two) == [1, 2]
        for w in holders:
            assert os.path.isdir(os.path.join(_pool(c, w), "templates", f"{name}@v2")), w

        # only the worker that missed it is left (its pool is mounted while it runs): it has
        # version 1's files under the name; a create from the name is refused, clearly
        for w in holders:
            _stop(c, w)
        _restart(c, away)
        stale = os.path.join(_pool(c, away), "templates", name)
        assert not os.path.exists(os.path.join(_pool(c, away), "templates", f"{name}@v2"))
        with open(os.path.join(stale, "etc", "space-version")) as f:
            assert f.read() == "one\n"
        r = c.req(api, "POST", "/v1/sandboxes", json={"template": name})
        assert r.status == 503, r
        assert "version 2 of template 'caught-up' is not on this host yet" in r.json()["error"]["message"], r.json()
        # a version it holds is still made there
        r = c.req(api, "POST", "/v1/sandboxes", json={"template": f"{name}@v1"})
        assert r.status == 201 and r.json()["worker"] == away and r.json()["template_version"] == 1, r
        sid = r.json()["id"]
        code, out = c.exec_out(api, sid, "cat /etc/space-version")
        assert code == 0 and out == "one\n", (code, out)
        assert c.req(api, "DELETE", f"/v1/sandboxes/{sid}").status == 200

        # a holder comes back: the controller ships version 2 and makes it the name there
        _restart(c, holders[0])
        _wait(lambda: os.path.isdir(os.path.join(_pool(c, away), "templates", f"{name}@v2")), 60,
              f"version 2 shipped to {away}")

        def promoted():
            try:
                with open(os.path.join(stale, "etc", "space-version")) as f:
                    return f.read() == "two\n"
            except OSError:
                return False
        _wait(promoted, 60, f"{away}'s {name} is version 2")
        _stop(c, holders[0])
        _wait(lambda: f"{name}@v2" in _worker_state(c, api, away)["templates"].split(","), 30,
              f"{away}'s heartbeat lists version 2")
        r = c.req(api, "POST", "/v1/sandboxes", json={"template": name})
        assert r.status == 201 and r.json()["worker"] == away and r.json()["template_version"] == 2, r
        sid = r.json()["id"]
        code, out = c.exec_out(api, sid, "cat /etc/space-version")
        assert code == 0 and out == "two\n", (code, out)
        assert c.req(api, "DELETE", f"/v1/sandboxes/{sid}").status == 200
    finally:
        for w in [away] + holders:
            if not c.workers[w].running:
                _restart(c, w)
        c.delete_all()
    assert c.req(api, "DELETE", f"/v1/templates/{name}").status == 204


@pytest.mark.timeout(300)
def test_corrupted_stream_is_refused_and_leaves_nothing(cluster):
    c = cluster
    target, source = "w1", "w2"
    # a real btrfs send stream (of the source's template), shipped by hand to
    # the target as a checkpoint of a sandbox that does not exist
    stream = subprocess.run(["btrfs", "send", "-q", os.path.join(_pool(c, source), "templates", "base")],
                            capture_output=True, check=True, timeout=120).stdout
    assert len(stream) > 100000
    sha = __import__("hashlib").sha256(stream).hexdigest()
    flipped = bytearray(stream)
    flipped[len(stream) // 2] ^= 0x01
    cases = [
        ("a flipped byte", bytes(flipped), sha, len(stream)),
        ("a wrong checksum", stream, "0" * 64, len(stream)),
        ("a truncated stream", stream[:len(stream) // 2], sha, len(stream)),
    ]
    recv = {"op": "receive", "kind": "checkpoint", "sandbox": "nosuchsandbox0", "name": "base",
            "ident": "00000000-0000-0000-0000-000000000001", "parents": []}
    for what, data, claimed, nbytes in cases:
        with _Raw(c, target) as raw:
            assert raw.line()["ok"], what
            raw.send(json.dumps(recv).encode() + b"\n")
            ans = raw.line()
            assert ans["ok"] and ans["have"] == [], (what, ans)
            raw.send(_frames(data, claimed, nbytes))
            ans = raw.line()
        assert not ans["ok"] and "refused" in ans["message"], (what, ans)
        assert not os.path.exists(os.path.join(_pool(c, target), "checkpoints", "nosuchsandbox0")), what
        assert not [n for n in os.listdir(os.path.join(_pool(c, target), "tmp")) if n.startswith("recv.")], what
    # a stream cut off mid-way (the sender went away): nothing either
    mark = len(c.workers[target].log())
    with _Raw(c, target) as raw:
        assert raw.line()["ok"]
        raw.send(json.dumps(recv).encode() + b"\n")
        assert raw.line()["ok"]
        raw.send(_frames(stream, sha, len(stream))[:len(stream) // 3])
    assert c.workers[target].wait_log("Refused a checkpoint 'nosuchsandbox0/base'", 30, mark)
    assert not [n for n in os.listdir(os.path.join(_pool(c, target), "tmp")) if n.startswith("recv.")]
    assert not os.path.exists(os.path.join(_pool(c, target), "checkpoints", "nosuchsandbox0"))
    # an oversized chunk length: refused
    with _Raw(c, target) as raw:
        assert raw.line()["ok"]
        raw.send(json.dumps({"op": "receive", "kind": "template", "name": "bogus",
                             "ident": "00000000-0000-0000-0000-000000000001"}).encode() + b"\n")
        assert raw.line()["ok"]
        raw.send((1 << 30).to_bytes(4, "big") + b"x" * 100)
        ans = raw.line()
    assert not ans["ok"] and "refused" in ans["message"], ans
    assert not os.path.exists(os.path.join(_pool(c, target), "templates", "bogus"))
    # bad requests: answered, nothing started
    with _Raw(c, target) as raw:
        assert raw.line()["ok"]
        raw.send(json.dumps({"op": "receive", "kind": "checkpoint", "sandbox": "../etc", "name": "x",
                             "ident": "u"}).encode() + b"\n")
        ans = raw.line()
    assert not ans["ok"] and ans["code"] == "bad_request", ans


@pytest.mark.timeout(300)
def test_webhooks_in_a_cluster(cluster):
    """The active controller delivers (PostgreSQL: after the events settle),
    once each, in order, signed; a webhook made on one API server."""
    from test_webhooks import Receiver, verify
    c = cluster
    rec = Receiver()
    try:
        r = c.req(c.apis[0], "POST", "/v1/webhooks", json={"url": rec.url, "events": ["sandbox.created",
                                                                                      "sandbox.deleted"]})
        assert r.status == 201, r
        secret, wid = r.json()["secret"], r.json()["id"]
        r = c.req(c.apis[1], "POST", "/v1/sandboxes", json={})
        assert r.status == 201, r
        sid = r.json()["id"]
        r = c.req(c.apis[1], "DELETE", f"/v1/sandboxes/{sid}")
        assert r.status == 200, r
        _wait(lambda: [e["type"] for e in rec.events() if e["sandbox_id"] == sid] ==
              ["sandbox.created", "sandbox.deleted"], 60, "both events delivered")
        ids = [e["id"] for e in rec.events()]
        assert len(ids) == len(set(ids)), ids
        for hdrs, body in rec.deliveries():
            verify(secret, hdrs, body)
        assert c.req(c.apis[1], "DELETE", f"/v1/webhooks/{wid}").status == 204
    finally:
        rec.stop()


def _lease_token(text):
    m = re.findall(r"now the active one \(lease token (\d+)\)", text)
    return int(m[-1]) if m else None


def _leads_now(p):
    try:
        return "space_controller_leader 1\n" in _probe(p, "/metrics")[1]
    except OSError:
        return False


def _active_controller(c):
    """(the controller that leads now, the other): the one that says it holds the lease now (its
    /metrics), once exactly one does. Not judged from the logs: after a store outage longer than
    the lease the last one to take it has stepped down, and nobody may lead yet."""
    def one():
        leading = [p for p in c.controllers if p.running and _leads_now(p)]
        return leading if len(leading) == 1 else None
    active = _wait(one, 30, "exactly one active controller")[0]
    return active, [p for p in c.controllers if p is not active][0]


@pytest.mark.timeout(120)
def test_hung_leader_is_taken_over_and_fenced(cluster):
    """The active controller stopped (SIGSTOP) longer than its lease: the standby takes the lease
    over with the next fencing token (the takeover time is logged), and does the work (a sandbox's
    timeout); continued (SIGCONT), the old one finds its lease taken over, steps down with a log
    line and writes nothing: the sandbox expired once, by the new leader."""
    c = cluster
    active, standby = _active_controller(c)
    assert standby.running, standby.log()[-2000:]
    token = _lease_token(active.log())
    mark_a, mark_s = len(active.log()), len(standby.log())
    api = c.apis[0]
    t0 = time.monotonic()
    os.kill(active.pid, signal.SIGSTOP)
    try:
        r = c.req(api, "POST", "/v1/sandboxes", json={"timeout_s": 2})
        assert r.status == 201, r
        sid = r.json()["id"]
        assert standby.wait_log("now the active one", LEASE_S * 10, start=mark_s), standby.log()[mark_s:][-2000:]
        takeover = time.monotonic() - t0
        _log(f"controller takeover after SIGSTOP of the leader: {takeover:.2f} s (lease {LEASE_S} s)")
        assert _lease_token(standby.log()) == token + 1, standby.log()[mark_s:][-2000:]
        # the new leader reaps the expired sandbox
        _wait(lambda: c.req(api, "GET", f"/v1/sandboxes/{sid}").status == 404, 30,
              "the sandbox expired by the new leader")
    finally:
        os.kill(active.pid, signal.SIGCONT)
    assert active.wait_log("Fenced: the controller lease of token", 15, start=mark_a), active.log()[mark_a:][-3000:]
    time.sleep(1.5)  # a round or two of the old one, if it still thought it led
    after = active.log()[mark_a:]
    assert "now the active one" not in after, after[-3000:]
    assert "Deleted expired sandbox" not in after and "is suspect (" not in after, after[-3000:]
    assert "expired or was taken over; stepping down" in after, after[-3000:]
    expired = [e for e in c.req(api, "GET", "/v1/events", params={"type": "sandbox.expired"}).json()["events"]
               if e.get("sandbox") == sid]
    assert len(expired) == 1, expired
    # the new leader keeps it
    assert "no longer the active one" not in standby.log()[mark_s:]


def _probe(p, path, method="GET"):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", p.probe_port, timeout=10)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def test_controller_probes_and_worker_oom_protection(cluster):
    """controller_listen: /healthz 200 while the loop turns, /metrics says which one leads; bad
    requests refused. Each worker (spaced and its worker process) runs at oom_score_adj -900."""
    c = cluster
    active, standby = _active_controller(c)
    for p in (active, standby):
        status, body = _probe(p, "/healthz")
        assert status == 200 and json.loads(body)["ok"] is True, (p.name, status, body)
        assert json.loads(body)["leader"] is (p is active), body
    _wait(lambda: "space_controller_leader 1\n" in _probe(active, "/metrics")[1], 10, "the leader's metrics")
    status, body = _probe(standby, "/metrics")
    assert status == 200 and "space_controller_leader 0\n" in body and "space_checkpoints_unavailable 0\n" in body
    assert _probe(active, "/nope")[0] == 404
    assert _probe(active, "/healthz", "POST")[0] == 405
    # lowering it needs CAP_SYS_RESOURCE, which a host in a container may lack: then a warning says so
    can_lower = subprocess.run(["sh", "-c", "echo -1 > /proc/self/oom_score_adj"], capture_output=True).returncode == 0
    for name, w in c.workers.items():
        if not w.running:
            continue
        if not can_lower:
            assert "Cannot set oom_score_adj -900 (worker_oom_protect" in w.log()[w.mark:], name
            continue
        assert "oom_score_adj is -900 (worker_oom_protect)" in w.log()[w.mark:], name
        for pid in [w.pid] + host.children(w.pid):
            with open(f"/proc/{pid}/oom_score_adj") as f, open(f"/proc/{pid}/cmdline", "rb") as g:
                assert f.read().strip() == "-900", (name, pid, g.read().split(b"\0")[:4])


@pytest.mark.timeout(300)
def test_chaos_nothing_destroyed(cluster):
    """In a row, with sandboxes alive on every worker, each with an acknowledged checkpoint: kill -9
    of a worker and its immediate restart; another worker stopped (SIGSTOP) past the lost timeout,
    then continued; a worker's link cut past the lost timeout, then healed; PostgreSQL stopped past
    the lease and the lost timeout, then started; the leader controller stopped past its lease, then
    continued; an API server killed while it streams an exec, then started again. After each,
    every sandbox answers exec with its file, running, on one worker only. At the end none was
    destroyed (no delete, no orphan removal), every checkpoint is still listed with its files where
    the store says they are, and the events tell of each loss and return."""
    c = cluster
    api = c.apis[0]
    made = c.create(6)
    ids = [sid for sid, _, _ in made]
    checkpoints = {}
    for sid in ids:
        assert c.exec_out(api, sid, f"echo chaos-{sid} > /tmp/chaos")[0] == 0
        r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "acked"})
        assert r.status == 201, r
        checkpoints[sid] = r.json()["id"]
    marks = {n: len(w.log()) for n, w in c.workers.items()}

    def roots(sid):
        return [n for n in c.workers if os.path.isdir(os.path.join(_pool(c, n), "sandboxes", sid))]

    def check(step):
        # every worker beats again (a stalled one is "silent" until it does), every sandbox runs
        _wait(lambda: all(w["state"] == "live" for w in c.req(api, "GET", "/v1/info").json()["workers"]
                          if w["name"] in c.workers), 60, f"every worker live after {step}")
        _wait(lambda: all(c.sandbox(api, i)["state"] == "running" for i in ids), 60, f"all running after {step}")
        for sid in ids:
            code, out = c.exec_out(c.apis[1], sid, "cat /tmp/chaos")
            assert code == 0 and out == f"chaos-{sid}\n", (step, sid, code, out)
            # no sandbox exists twice: its root is on the worker its row names, and only there
            assert roots(sid) == [c.sandbox(api, sid)["worker"]], (step, sid, roots(sid))

    def events(sid, after=0):
        r = c.req(api, "GET", "/v1/events", params={"sandbox": sid, "after": after, "limit": 1000})
        assert r.status == 200, r
        return r.json()["events"]

    def last_seqs():
        return {sid: max([e["seq"] for e in events(sid)] or [0]) for sid in ids}

    def lost_and_found(worker, since, step):
        """Each sandbox of worker was lost and found again after since, as its events say."""
        mine = [sid for sid, _, w in made if w == worker]
        assert mine, made
        for sid in mine:
            types = [e["type"] for e in events(sid, since[sid])]
            assert "sandbox.unreachable" in types and "sandbox.found" in types, (step, sid, types)
            assert types.index("sandbox.unreachable") < len(types) - 1 - types[::-1].index("sandbox.found"), (step, types)

    # a worker killed and started again at once
    first = made[0][2]
    i, addr, ns = c.addresses[first]
    c.workers[first].kill9()
    c.workers[first] = c.start_worker(first, i, addr, ns)
    assert c.workers[first].wait_log("Reconciled:", 30, c.workers[first].mark)
    check("kill -9 and restart")
    # another stalled past the lost timeout
    second = next(w for _, _, w in made if w != first)
    since = last_seqs()
    os.kill(c.workers[second].pid, signal.SIGSTOP)
    try:
        _wait(lambda: all(c.sandbox(api, sid)["state"] == "unreachable" for sid, _, w in made if w == second), 30,
              "the stalled worker's sandboxes lost")
    finally:
        os.kill(c.workers[second].pid, signal.SIGCONT)
    check("SIGSTOP and SIGCONT of a worker")
    lost_and_found(second, since, "SIGSTOP and SIGCONT of a worker")
    # a third cut off from the API servers and controllers (its link down) past the lost timeout, then
    # healed; it reaches the store by its socket and heartbeats on: its sandboxes stay running, and
    # calls to them answer 503 naming it meanwhile
    third = next(w for _, _, w in made if w not in (first, second))
    cut = [sid for sid, _, w in made if w == third]
    link = c.host_link(c.addresses[third][0])
    host.run(["ip", "link", "set", link, "down"], check=True)
    try:
        time.sleep(LOST_TIMEOUT_S + 1.5)
        for sid in cut:
            assert c.sandbox(api, sid)["state"] == "running", sid
        r = c.req(api, "POST", f"/v1/sandboxes/{cut[0]}/exec", json={"shell": "true"}, timeout=60)
        assert r.status == 503 and f"worker '{third}'" in r.json()["error"]["message"], r
    finally:
        host.run(["ip", "link", "set", link, "up"], check=True)
    check("a partition of a worker, healed")
    # the store away for longer than the lease and the lost timeout
    subprocess.run(["sh", PG_SCRIPT, "down", c.pg_url], check=True, timeout=60)
    try:
        time.sleep(max(LEASE_S, LOST_TIMEOUT_S) + 1)
    finally:
        subprocess.run(["sh", PG_SCRIPT, "up", c.pg_url], check=True, timeout=60)
    _wait(lambda: c.req(api, "GET", "/v1/sandboxes").status == 200, 60, "the API after the outage")
    check("PostgreSQL down and up")
    # the leader hung past its lease
    active, standby = _active_controller(c)
    mark_a, mark_s = len(active.log()), len(standby.log())
    os.kill(active.pid, signal.SIGSTOP)
    try:
        assert standby.wait_log("now the active one", LEASE_S * 10, start=mark_s), standby.log()[mark_s:][-2000:]
    finally:
        os.kill(active.pid, signal.SIGCONT)
    assert active.wait_log("stepping down", 15, start=mark_a), \
        (f"running {active.running}, exit status {active.proc.returncode}", active.log()[mark_a:][-2000:],
         _sql(c, "SELECT pid, application_name, state, wait_event_type, wait_event, left(query, 120) "
                 "FROM pg_stat_activity WHERE datname = current_database()"))
    check("SIGSTOP and SIGCONT of the leader")
    # an API server killed while it streams an exec: the command's sandbox is not harmed, the other
    # server serves meanwhile, and the killed one serves again once started
    victim = ids[0]
    body = b'{"shell":"sleep 30; echo late"}'
    port = int(c.apis[0].url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as stream:
        stream.sendall(f"POST /v1/sandboxes/{victim}/exec HTTP/1.1\r\nHost: x\r\n"
                       f"Authorization: Bearer {c.key}\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        _wait(lambda: "sleep 30" in c.exec_out(c.apis[1], victim, "ps -eo args")[1], 30, "the streamed command")
        c.apis[0].kill9()
    assert c.exec_out(c.apis[1], victim, "echo served")[1] == "served\n"
    c.apis[0] = c.start_api(1)
    api = c.apis[0]
    check("kill -9 of an API server and its restart")

    for sid in ids:
        ev = c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.deleted"}).json()["events"]
        assert not ev, (sid, ev)
        # the acknowledged checkpoint is listed, its files on every worker the store names
        r = c.req(api, "GET", f"/v1/sandboxes/{sid}/checkpoints")
        assert r.status == 200 and checkpoints[sid] in [ck["id"] for ck in r.json()["checkpoints"]], r
        holders = [w for (w,) in _sql(c, "SELECT worker FROM checkpoint_copies WHERE available "
                                         f"AND checkpoint_id = '{checkpoints[sid]}'")]
        home = c.sandbox(api, sid)["worker"]
        for w in set(holders) | {home}:
            assert os.path.isdir(os.path.join(_pool(c, w), "checkpoints", sid, checkpoints[sid])), (sid, w, holders)
    for n, w in c.workers.items():
        log = w.log()[marks[n]:]
        assert "Removing orphan sandbox root" not in log, (n, log[-3000:])
        assert all(k == "0" for k in re.findall(r"(\d+) orphans removed", log)), (n, log[-3000:])
    c.delete_all()


def test_controller_failover(cluster):
    c = cluster
    active, standby = _active_controller(c)
    mark = len(standby.log())
    active.proc.send_signal(signal.SIGKILL)
    active.proc.wait(30)
    assert standby.wait_log("now the active one", 30, start=mark), standby.log()[-2000:]
    # the new one does the work: a worker that stops heartbeating is marked lost
    victim = "w3"
    api = c.apis[1]
    r = c.req(api, "POST", "/v1/sandboxes", json={})
    assert r.status == 201, r
    os.kill(c.workers[victim].pid, signal.SIGSTOP)  # its heartbeats stop
    try:
        _wait(lambda: any(w["name"] == victim and w["state"] == "suspect"
                          for w in c.req(api, "GET", "/v1/info").json()["workers"]), 30, "w3 suspect")
    finally:
        os.kill(c.workers[victim].pid, signal.SIGCONT)
    assert "Worker w3 is suspect" in standby.log()
    # it heartbeats again and registers anew
    _wait(lambda: any(w["name"] == victim and w["state"] == "live"
                      for w in c.req(api, "GET", "/v1/info").json()["workers"]), 30, "w3 live again")
    # restart it so that it reconciles (its sandboxes were marked lost)
    i, addr, ns = c.addresses[victim]
    assert c.workers[victim].stop() == 0
    c.workers[victim] = c.start_worker(victim, i, addr, ns)
    c.delete_all()


@pytest.mark.timeout(300)
def test_worker_stalled_past_its_lease_takes_its_sandboxes_back(cluster):
    """A worker stopped (SIGSTOP) longer than the lost timeout: its sandboxes are marked lost, not
    destroyed; once it runs again it registers anew and takes them back, running, without a restart."""
    c = cluster
    api = c.apis[0]
    made = c.create(6)
    victim = "w1"
    mine = [sid for sid, _, w in made if w == victim]
    assert mine, made
    for sid in mine:
        assert c.exec_out(api, sid, f"echo kept-{sid} > /tmp/kept")[0] == 0
    mark = len(c.workers[victim].log())
    os.kill(c.workers[victim].pid, signal.SIGSTOP)  # its heartbeats stop; its sandboxes run on
    try:
        _wait(lambda: all(c.sandbox(api, i)["state"] == "unreachable" for i in mine), 30, "its sandboxes lost")
    finally:
        os.kill(c.workers[victim].pid, signal.SIGCONT)
    _wait(lambda: all(c.sandbox(api, i)["state"] == "running" for i in mine), 60, "its sandboxes back")
    for sid in mine:
        code, out = c.exec_out(c.apis[1], sid, "cat /tmp/kept")
        assert code == 0 and out == f"kept-{sid}\n", (sid, code, out)
        ev = c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.found"}).json()["events"]
        assert ev and victim in ev[-1]["reason"], ev
    assert "Removing orphan" not in c.workers[victim].log()[mark:]
    c.delete_all()


def test_worker_stalled_in_a_call_is_not_waited_for(cluster):
    """A worker stopped (SIGSTOP) with a call of an API server in flight on a connection it had
    answered on before: the call ends once the worker's heartbeats stop (503 naming it), not at the
    op's deadline; the worker is judged lost meanwhile, and it takes its sandbox back when it runs
    again."""
    c = cluster
    api = c.apis[0]
    r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 256})
    assert r.status == 201, r
    sid, victim = r.json()["id"], r.json()["worker"]
    host_, port = api.url.rsplit("/", 1)[1].split(":")
    # one HTTP connection is one thread of the API server, which keeps its connection to the worker
    conn = http.client.HTTPConnection(host_, int(port), timeout=60)
    try:
        def metrics():
            conn.request("GET", f"/v1/sandboxes/{sid}/metrics", headers={"Authorization": f"Bearer {c.key}"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        status, _ = metrics()
        assert status == 200
        os.kill(c.workers[victim].pid, signal.SIGSTOP)
        try:
            # the op's deadline is 20 s, the lost timeout 3 s: the answer names the stopped heartbeats
            status, body = metrics()
            assert status == 503, (status, body)
            msg = body["error"]["message"]
            assert f"worker '{victim}'" in msg and "stopped heartbeating while it ran 'metrics'" in msg, msg
            _wait(lambda: c.sandbox(api, sid)["state"] == "unreachable", 30, "the sandbox lost")
        finally:
            os.kill(c.workers[victim].pid, signal.SIGCONT)
        _wait(lambda: c.sandbox(api, sid)["state"] == "running", 60, "the sandbox back")
        assert c.exec_out(c.apis[1], sid, "echo back") == (0, "back\n")
    finally:
        conn.close()
        c.delete_all()


@pytest.mark.timeout(300)
def test_database_outage_longer_than_the_lease_loses_nothing(cluster):
    """PostgreSQL down for longer than the lost timeout: the controller does not judge the heartbeats
    missed meanwhile; no worker and no sandbox is marked lost, and they all answer afterwards."""
    c = cluster
    api = c.apis[0]
    made = c.create(4)
    lost_before = len(c.req(api, "GET", "/v1/events", params={"type": "worker.suspect"}).json()["events"])
    subprocess.run(["sh", PG_SCRIPT, "down", c.pg_url], check=True, timeout=60)
    try:
        time.sleep(LOST_TIMEOUT_S * 3)
    finally:
        subprocess.run(["sh", PG_SCRIPT, "up", c.pg_url], check=True, timeout=60)
    _wait(lambda: c.req(api, "GET", "/v1/sandboxes").status == 200, 60, "the API after the outage")
    time.sleep(LOST_TIMEOUT_S * 2)  # a controller that judged them would have by now
    for sid, _, w in made:
        sb = c.sandbox(api, sid)
        assert sb["state"] == "running", sb
        code, out = c.exec_out(c.apis[1], sid, "echo still")
        assert code == 0 and out == "still\n"
    lost = c.req(api, "GET", "/v1/events", params={"type": "worker.suspect"}).json()["events"]
    assert len(lost) == lost_before, lost[lost_before:]
    assert all(w["state"] == "live" for w in c.req(api, "GET", "/v1/info").json()["workers"] if w["name"] in c.workers)
    c.delete_all()


@pytest.mark.timeout(300)
def test_port_forward_through_either_api_server(cluster):
    """GET .../ports/{port}/connect (Upgrade: tcp) through an API server of the cluster: its sandbox's worker
    dials the port (op port on its listener) and the stream runs through; nothing listening is a clean 502;
    the op with a sandbox that is not on that worker is refused."""
    c = cluster
    r = c.req(c.apis[0], "POST", "/v1/sandboxes", json={})
    assert r.status == 201, r
    sid, worker = r.json()["id"], r.json()["worker"]
    r = c.req(c.apis[0], "POST", f"/v1/sandboxes/{sid}/exec",
              json={"shell": "exec nc -ll -p 9100 -e cat", "background": True})
    assert r.status in (200, 201), r
    _wait(lambda: ":9100 " in c.exec_out(c.apis[0], sid, "netstat -ltn")[1], 30, "the echo server listening")
    for api in c.apis:
        host_, port_ = api.url.rsplit("/", 1)[1].rsplit(":", 1)
        for remote, want in ((9100, 101), (9200, 502)):
            s = socket.create_connection((host_, int(port_)), timeout=30)
            s.sendall((f"GET /v1/sandboxes/{sid}/ports/{remote}/connect HTTP/1.1\r\nHost: x\r\n"
                       f"Authorization: Bearer {c.key}\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n").encode())
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(4096)
                assert chunk, buf
                buf += chunk
            head, _, rest = buf.partition(b"\r\n\r\n")
            assert int(head.split()[1]) == want, head
            if want == 101:
                s.sendall(b"across the cluster\n")
                while len(rest) < 19:
                    rest += s.recv(4096)
                assert rest == b"across the cluster\n", rest
            s.close()
    # the op itself, with the token, for a sandbox that is not on this worker: refused
    other = next(w for w in c.workers if w != worker)
    with _Raw(c, other) as raw:
        assert raw.line()["ok"] is True
        raw.send(json.dumps({"op": "port", "id": sid, "slot": 0, "port": 9100}).encode() + b"\n")
        reply = raw.line()
        assert reply["ok"] is False and reply["code"] == "not_found", reply
    with _Raw(c, worker) as raw:
        assert raw.line()["ok"] is True
        raw.send(json.dumps({"op": "port", "id": sid, "slot": 0, "port": 70000}).encode() + b"\n")
        reply = raw.line()
        assert reply["ok"] is False and reply["code"] == "bad_request", reply
    c.delete_all()


@pytest.mark.timeout(300)
def test_partition_between_api_and_a_worker(cluster):
    c = cluster
    try:
        made = c.create(3)
        cut = made[0][2]
        sid = made[0][0]
        i, addr, ns = c.addresses[cut]
        link = c.host_link(i)
        host.run(["ip", "link", "set", link, "down"], check=True)
        try:
            # its sandboxes: a clear 503, nothing changed
            r = c.req(c.apis[0], "POST", f"/v1/sandboxes/{sid}/exec", json={"shell": "true"})
            assert r.status == 503, r
            assert f"worker '{cut}'" in r.json()["error"]["message"], r.json()
            r = c.req(c.apis[1], "POST", f"/v1/sandboxes/{sid}/pause")
            assert r.status == 503, r
            assert c.sandbox(c.apis[0], sid)["state"] == "running"
            # creates go elsewhere, without waiting on it
            for _ in range(3):
                r = c.req(c.apis[0], "POST", "/v1/sandboxes", json={"disk_mb": 256})
                assert r.status == 201 and r.json()["worker"] != cut, r
        finally:
            host.run(["ip", "link", "set", link, "up"], check=True)
        # healed: the same sandbox, still running, answers
        def healed():
            r = c.req(c.apis[1], "POST", f"/v1/sandboxes/{sid}/exec", json={"shell": "echo healed"})
            return r if r.status == 200 else None
        r = _wait(healed, 30, "exec after the partition")
        assert '"data":"healed\\n"' in r.text(), r.text()
    finally:
        c.delete_all()


@pytest.mark.timeout(300)
def test_database_outage_503_then_recovery(cluster):
    c = cluster
    api = c.apis[0]
    subprocess.run(["sh", PG_SCRIPT, "down", c.pg_url], check=True, timeout=60)
    try:
        r = c.req(api, "POST", "/v1/sandboxes", json={})
        assert r.status == 503, r
        assert "store" in r.json()["error"]["message"], r.json()
        r = c.req(api, "GET", "/v1/sandboxes")
        assert r.status == 503, r
    finally:
        subprocess.run(["sh", PG_SCRIPT, "up", c.pg_url], check=True, timeout=60)
    # recovers by itself
    _wait(lambda: c.req(api, "GET", "/v1/sandboxes").status == 200, 60, "the API after the outage")
    r = _wait(lambda: (lambda x: x if x.status == 201 else None)(c.req(api, "POST", "/v1/sandboxes", json={})),
              60, "a create after the outage")
    sid = r.json()["id"]
    code, out = c.exec_out(c.apis[1], sid, "echo back")
    assert code == 0 and out == "back\n"
    # workers kept (or got back) their registration
    _wait(lambda: all(w["state"] == "live" for w in c.req(api, "GET", "/v1/info").json()["workers"]
                      if w["name"] in c.workers), 30, "all workers live")
    c.delete_all()


@pytest.mark.timeout(300)
def test_api_server_starts_before_its_database(cluster):
    """An API server started while PostgreSQL is down waits for it (with backoff, saying so) instead of
    exiting, and serves once it is up."""
    c = cluster
    port = _free_port()
    subprocess.run(["sh", PG_SCRIPT, "down", c.pg_url], check=True, timeout=60)
    p = None
    try:
        p = Proc(c, "api-early", [c.s.spaced_bin, "--role", "api", "--state-dir", c.state_dir("api-early"),
                                  "--listen", f"127.0.0.1:{port}"] + c.common() + c.key_args()).start()
        c.extra.append(p)
        assert p.wait_log("Cannot open the store yet", 30, p.mark), p.log()[-2000:]
        assert p.running, p.log()[-2000:]
    finally:
        subprocess.run(["sh", PG_SCRIPT, "up", c.pg_url], check=True, timeout=60)
    url = f"http://127.0.0.1:{port}"

    def healthy():
        try:
            return e2e_http.request(url, "GET", "/healthz", timeout=5).status == 200
        except OSError:
            return False
    _wait(healthy, 90, "the API server after the database came up")
    r = e2e_http.request(url, "GET", "/v1/sandboxes", key=c.key, timeout=30)
    assert r.status == 200, r
    assert p.stop() == 0


def _cap_eff(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    raise AssertionError(f"no CapEff for {pid}")


@pytest.mark.timeout(300)
def test_api_and_controller_need_no_capability(cluster):
    """What deploy/ promises: an API server and a controller run with no
    capability at all and no_new_privs (Kubernetes: capabilities drop ALL,
    allowPrivilegeEscalation false; systemd: CapabilityBoundingSet= empty,
    NoNewPrivileges=yes)."""
    c = cluster
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("setpriv (util-linux) is not installed")
    drop = [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs", "--"]
    # without CAP_DAC_OVERRIDE, root cannot enter the test server's private
    # socket directory: these two reach PostgreSQL over TCP with a password,
    # as they would reach a database on another host
    password = os.urandom(12).hex()
    r = subprocess.run(["psql", "-v", "ON_ERROR_STOP=1", "-q", c.pg_url, "-c",
                        f"ALTER ROLE postgres PASSWORD '{password}'"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    port = c.pg_url.rsplit("port=", 1)[1].split("&")[0]
    unix_url, c.pg_url = c.pg_url, f"postgresql://postgres:{password}@127.0.0.1:{port}/postgres"
    try:
        api = c.start_api(9, wrap=drop)
        ctl = c.start_controller(9, wrap=drop)
    finally:
        c.pg_url = unix_url
    c.extra.append(ctl)
    c.extra.append(api)
    assert _cap_eff(api.pid) == 0
    # the whole path through it: a create placed on a worker, exec, files, delete
    r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 256})
    assert r.status == 201, r
    sid = r.json()["id"]
    code, out = c.exec_out(api, sid, "echo capless")
    assert code == 0 and out == "capless\n", (code, out)
    r = c.req(api, "PUT", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/y"}, data=b"z" * 100000)
    assert r.status in (200, 201, 204), r
    assert c.req(api, "DELETE", f"/v1/sandboxes/{sid}").status == 200

    # the controller without capabilities takes the lease once the others stop
    assert ctl.wait_log("waiting for the lease", 60), ctl.log()[-2000:]
    assert _cap_eff(ctl.pid) == 0
    for p in c.controllers:
        p.stop()
    assert ctl.wait_log("now the active one", 30), ctl.log()[-2000:]
    time.sleep(2)   # a few rounds as the active one
    assert ctl.running, ctl.log()[-2000:]


@pytest.mark.timeout(300)
def test_vm_sandbox_goes_to_the_worker_that_offers_vm(cluster):
    """Placement by the runtimes workers reported: only the worker with a
    guest kernel offers vm, so every vm create lands there and boots."""
    c = cluster
    if not c.vm_kernel_dir:
        pytest.skip("no guest kernel (QEMU or vm/kernel/build.sh missing)")
    try:
        r = c.req(c.apis[0], "POST", "/v1/sandboxes", json={"runtime": "vm", "memory_mb": 256, "disk_mb": 512})
        assert r.status == 201, r
        sb = r.json()
        assert sb["runtime"] == "vm" and sb["worker"] == VM_WORKER, sb
        code, out = c.exec_out(c.apis[1], sb["id"], "uname -r")
        assert code == 0 and out.strip() != os.uname().release, (code, out)   # the guest's own kernel
    finally:
        c.delete_all()


@pytest.mark.timeout(900)
def test_credentials_across_the_cluster(cluster):
    """A credential made through one API server is sealed under the
    cluster's master key (master_key_file, the same on every API server and
    worker); a sandbox created through the other API server on a worker
    uses it: that worker's gateway puts the value on its requests to the
    upstream. A worker or an API server with another master key is refused
    at its start (the store holds the key's fingerprint); an API server
    without one answers the credential calls with 503."""
    c = cluster
    with open(c.master_key_file, "rb") as f:
        raw = f.read()
    # the store holds the key's fingerprint, not the key
    fp = subprocess.run(["psql", "-tA", c.pg_url, "-c",
                         "SELECT value FROM cluster_settings WHERE name = 'master_key_fingerprint'"],
                        capture_output=True, text=True, timeout=60)
    assert fp.returncode == 0, fp.stderr
    assert len(fp.stdout.strip()) == 32 and raw.hex()[:32] not in fp.stdout, fp.stdout

    # a worker with another key: refused before it registers
    other_key = os.path.join(c.base, "other-master.key")
    with open(os.open(other_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(os.urandom(32))
    ns6, addr6 = c.add_host(6)
    link6 = c.last_link
    try:
        bad = Proc(c, "badkey", c.worker_args("w6", 6, addr6, state="badkey", key_file=other_key), ns6).start()
        c.extra.append(bad)
        assert bad.proc.wait(120) != 0
        log = bad.log()
        assert "is not the one this store's credentials are sealed under" in log, log[-3000:]
        assert "Refusing to register worker 'w6'" in log and "serving on" not in log, log[-3000:]
        assert raw.hex() not in log
    finally:
        c.remove_host(ns6, link6)
    workers = c.req(c.apis[0], "GET", "/v1/info").json()["workers"]
    assert "w6" not in [w["name"] for w in workers], workers
    # an API server with another key: refused at start; one whose key others may read: refused
    loose_key = os.path.join(c.base, "loose-master.key")
    with open(loose_key, "wb") as f:
        f.write(raw)
    os.chmod(loose_key, 0o644)
    for name, key, words in (("badkeyapi", other_key, "is not the one this store's credentials are sealed under"),
                             ("loosekeyapi", loose_key, "0644")):
        p = Proc(c, name, [c.s.spaced_bin, "--role", "api", "--state-dir", c.state_dir(name),
                           "--listen", f"127.0.0.1:{_free_port()}"] + c.common() + c.key_args(key)).start()
        c.extra.append(p)
        assert p.proc.wait(120) != 0
        assert words in p.log() and "master key" in p.log(), p.log()[-3000:]

    if not os.path.exists(DEBIAN_TAR):
        pytest.skip(f"the debian template is not built ({DEBIAN_TAR}): its curl is the client")
    api_a, api_b = c.apis
    with open(DEBIAN_TAR, "rb") as f:
        r = c.req(api_b, "POST", "/v1/templates", params={"name": "debian"}, data=f,
                  headers={"Content-Type": "application/x-tar"}, timeout=900)
    assert r.status == 201, r
    try:
        name, value = "cluster-" + secrets.token_hex(4), "sk-cluster-" + secrets.token_hex(16)
        r = c.req(api_b, "POST", "/v1/credentials",
                  json={"name": name, "value": value, "hosts": [CRED_HOST], "env": "API_KEY"})
        assert r.status == 201, r
        r = c.req(api_a, "POST", "/v1/sandboxes",
                  json={"template": "debian", "credentials": [name], "network": {"allow": [CRED_HOST]}})
        assert r.status == 201, r
        sid, worker = r.json()["id"], r.json()["worker"]
        assert worker in c.workers, r.json()
        tok = secrets.token_hex(4)
        code, out = c.exec_out(api_b, sid, f'echo "$API_KEY"; curl -sS --fail https://{CRED_HOST}/{tok}/a')
        assert code == 0 and out.startswith(f"space-cred-{name}\n") and "hello host=" in out, out
        got = c.upstream_requests(tok)
        assert [e["auth"] for e in got] == [f"Bearer {value}"] and got[0]["tls"], got
        # revoked through the other API server: the worker's gateway stops at once
        assert c.req(api_a, "POST", f"/v1/credentials/{name}/revoke").status == 200
        code, out = c.exec_out(api_b, sid, f"curl -sS -k --fail https://{CRED_HOST}/{tok}/b")
        assert code == 0, out
        assert [e["auth"] for e in c.upstream_requests(tok)] == [f"Bearer {value}", None]
        # the value nowhere in any log of the cluster
        for p in list(c.workers.values()) + c.apis:
            assert value not in p.log(), p.name
        assert c.req(api_a, "DELETE", f"/v1/sandboxes/{sid}").status == 200
    finally:
        c.delete_all()
        assert c.req(api_a, "DELETE", "/v1/templates/debian").status == 204


def _sql(c, query):
    r = subprocess.run(["psql", "-At", "-v", "ON_ERROR_STOP=1", "-q", c.pg_url, "-c", query],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [ln.split("|") for ln in r.stdout.splitlines() if ln]


def _warm(c, state="paused"):
    """{id: worker} of the warm pool's sandboxes in state."""
    return dict(_sql(c, f"SELECT id, worker FROM sandboxes WHERE warm_pool = 'base' AND state = '{state}'"))


@pytest.mark.timeout(300)
def test_warm_pool_claim_through_the_cluster_listener(cluster):
    """A warm pool in a cluster: the controller makes a paused warm sandbox on
    a worker, a create through an API server with the pool claims it, and
    the claim (the take_warm op: the taker's limits, then it runs) reaches
    that worker over its cluster listener. Refused there (an op missing
    from the listener's allow-list), the API would destroy the warm sandbox
    and create another one instead: the id would not be the warm one's."""
    c = cluster
    stopped = [p for p in c.controllers + c.extra if p.name.startswith("ctl") and p.running]
    for p in stopped:
        p.stop()
    ctl = Proc(c, "ctlwarm", [c.s.spaced_bin, "--role", "controller", "--state-dir", c.state_dir("ctlwarm"),
                              "--warm-pool=base:1"] + c.common()).start()
    c.extra.append(ctl)
    api = c.start_api(7, extra=["--warm-pool=base:1"])
    c.extra.append(api)
    sid = None
    try:
        assert ctl.wait_log("now the active one", 60), ctl.log()[-2000:]
        warm = _wait(lambda: _warm(c), 120, "a warm sandbox of base")
        r = c.req(api, "POST", "/v1/sandboxes", json={"memory_mb": 256})
        assert r.status == 201, r
        sid, worker = r.json()["id"], r.json()["worker"]
        assert sid in warm and warm[sid] == worker, (r.json(), warm, api.log()[-3000:])
        assert r.json()["state"] == "running", r.json()
        ev = c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.created"}).json()["events"]
        assert [e for e in ev if e["reason"] == "from the warm pool" and e["data"].get("warm_pool") is True], ev
        assert not c.req(api, "GET", "/v1/events",
                         params={"sandbox": sid, "type": "sandbox.create_failed"}).json()["events"]
        # it is the taker's and runs, through the other API servers too
        code, out = c.exec_out(c.apis[0], sid, "echo warm")
        assert code == 0 and out == "warm\n", (code, out)
        assert "not served over the network" not in api.log()
        # the pool is refilled before its controller goes (no warm create cut short)
        _wait(lambda: _warm(c), 120, "the warm pool refilled")
    finally:
        if sid:
            assert c.req(c.apis[0], "DELETE", f"/v1/sandboxes/{sid}").status == 200
        api.stop()
        ctl.stop()
        for p in stopped:
            p.start()
        # without a warm pool the active controller removes the warm sandboxes
        _wait(lambda: not _sql(c, "SELECT id FROM sandboxes WHERE warm_pool <> '' AND state <> 'deleted'"),
              120, "the warm sandboxes removed")


@pytest.mark.timeout(300)
def test_volume_lives_on_one_worker_and_placement_follows(cluster):
    """A volume is made on one worker; every sandbox that mounts it goes
    there, whichever API server creates it; its files API reaches it
    through the other API server; deleting it removes it there."""
    c = cluster
    name = f"cvol-{secrets.token_hex(4)}"
    r = c.req(c.apis[0], "POST", "/v1/volumes", json={"name": name, "size_mb": 32})
    assert r.status == 201, r
    home = r.json()["worker"]
    assert home in c.workers, r
    try:
        r = c.req(c.apis[1], "PUT", f"/v1/volumes/{name}/files", params={"path": "/seed"}, data=b"from-api2")
        assert r.status == 204, r
        made = []
        for k in range(4):
            r = c.req(c.apis[k % 2], "POST", "/v1/sandboxes",
                      json={"disk_mb": 256, "volumes": [{"name": name, "path": "/v", "read_only": True}]})
            assert r.status == 201, r
            assert r.json()["worker"] == home, r.json()
            made.append((r.json()["id"], k % 2))
        for sid, via in made:
            code, out = c.exec_out(c.apis[1 - via], sid, "cat /v/seed")
            assert code == 0 and out == "from-api2", (sid, code, out)
        r = c.req(c.apis[1], "DELETE", f"/v1/volumes/{name}")
        assert r.status == 409 and r.json()["error"]["code"] == "volume_in_use", r
    finally:
        c.delete_all()
    r = c.req(c.apis[1], "DELETE", f"/v1/volumes/{name}")
    assert r.status == 204, r
    assert c.req(c.apis[0], "GET", f"/v1/volumes/{name}").status == 404


@pytest.mark.timeout(300)
def test_lost_sandbox_with_a_volume_moves_with_its_volume(cluster):
    """A lost sandbox that mounts a volume comes back on another worker with
    the volume as it was at the checkpoint (its worker took a copy with the
    checkpoint and shipped it along): the volume lives there from then on,
    its files are served from there, and the old worker's return takes
    neither the sandbox nor the volume back."""
    c = cluster
    api = c.apis[0]
    name = f"mvol-{secrets.token_hex(4)}"
    r = c.req(api, "POST", "/v1/volumes", json={"name": name, "size_mb": 32})
    assert r.status == 201, r
    home = r.json()["worker"]
    try:
        r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 256, "volumes": [{"name": name, "path": "/v"}]})
        assert r.status == 201 and r.json()["worker"] == home, r
        sid = r.json()["id"]
        assert c.exec_out(api, sid, "echo at-checkpoint > /v/data && echo root > /root-note")[0] == 0
        r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "with-volume"})
        assert r.status == 201, r
        ck = r.json()["id"]
        _wait(lambda: _shipped(c, api, sid, ck), 60, "the checkpoint shipped")
        # a clone lives beside its source: a create that mounts it is placed on the old worker
        r = c.req(api, "POST", f"/v1/volumes/{name}/clone", json={"name": f"{name}-pin"})
        assert r.status == 201 and r.json()["worker"] == home, r
        # written after the checkpoint: stays on the old worker's copy
        assert c.exec_out(api, sid, "echo later > /v/data")[0] == 0
        os.kill(c.workers[home].pid, signal.SIGSTOP)
        try:
            _wait(lambda: c.sandbox(api, sid)["state"] == "unreachable", 30, "the sandbox lost")
            r = c.req(c.apis[1], "POST", f"/v1/sandboxes/{sid}/restore", json={"checkpoint": "with-volume"})
            assert r.status == 200, r
            there = r.json()["worker"]
            assert there != home, r.json()
            code, out = c.exec_out(c.apis[1], sid, "cat /v/data /root-note")
            assert code == 0 and out == "at-checkpoint\nroot\n", (code, out)
            v = c.req(api, "GET", f"/v1/volumes/{name}").json()
            assert v["worker"] == there, v
            vid = v["id"]
            # its files through the API come from where it lives now
            r = c.req(c.apis[1], "PUT", f"/v1/volumes/{name}/files", params={"path": "/by-api"}, data=b"moved")
            assert r.status in (200, 201, 204), r
            assert c.exec_out(api, sid, "cat /v/by-api")[1] == "moved"
        finally:
            os.kill(c.workers[home].pid, signal.SIGCONT)
        # the old worker back: it keeps neither (the store says both live elsewhere)
        _wait(lambda: _worker_state(c, api, home)["state"] == "live", 60, "the worker back")
        assert _copy_on(c, there, sid)
        sb = c.sandbox(api, sid)
        assert sb["state"] == "running" and sb["worker"] == there, sb
        assert c.req(api, "GET", f"/v1/volumes/{name}").json()["worker"] == there
        code, out = c.exec_out(c.apis[1], sid, "cat /v/data && echo again > /v/data && cat /v/data")
        assert code == 0 and out == "at-checkpoint\nagain\n", (code, out)
        # its slot (uid range, address) free in the store again while the old worker may still hold
        # the stale copy: a create there gets it all the same, never beside the stale copy
        assert c.req(api, "DELETE", f"/v1/sandboxes/{sid}").status == 200
        r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 256, "volumes": [{"name": f"{name}-pin", "path": "/v"}]})
        assert r.status == 201 and r.json()["worker"] == home, r
        pin = r.json()["id"]
        code, out = c.exec_out(api, pin, "cat /v/data && echo mine > /root/note")
        assert code == 0 and out == "at-checkpoint\n", (code, out)
        _wait(lambda: not _copy_on(c, home, sid), 30, "the old worker's stale copy removed")
        # the removal took the stale copy only, not the sandbox beside it
        assert _copy_on(c, home, pin)
        # the volume's stale copy there is set aside, kept (it holds what was written after the
        # checkpoint) but no longer a volume of that pool
        vols = os.path.join(_pool(c, home), "volumes")
        _wait(lambda: not os.path.exists(os.path.join(vols, vid)), 30, "the old worker's stale volume set aside")
        aside = [n for n in os.listdir(vols) if n.startswith(vid + ".stale-")]
        assert len(aside) == 1, os.listdir(vols)
        with open(os.path.join(vols, aside[0], "data")) as f:
            assert f.read() == "later\n"
        code, out = c.exec_out(api, pin, "cat /root/note /v/data")
        assert code == 0 and out == "mine\nat-checkpoint\n", (code, out)
    finally:
        c.delete_all()
    assert c.req(api, "DELETE", f"/v1/volumes/{name}").status == 204
    assert c.req(api, "DELETE", f"/v1/volumes/{name}-pin").status == 204


def test_lost_sandbox_sharing_a_volume_waits_for_its_worker(cluster):
    """A volume moves with one sandbox only: a lost sandbox whose volume
    another sandbox mounts too (two readers) is not recovered elsewhere (the
    two would see two copies); the restore is refused saying why, nothing
    moves or is removed, and both run on once their worker is back."""
    c = cluster
    api = c.apis[0]
    name = f"svol-{secrets.token_hex(4)}"
    r = c.req(api, "POST", "/v1/volumes", json={"name": name, "size_mb": 32})
    assert r.status == 201, r
    home = r.json()["worker"]
    assert c.req(api, "PUT", f"/v1/volumes/{name}/files", params={"path": "/seed"}, data=b"shared").status in (200, 201, 204)
    try:
        sids = []
        for _ in range(2):
            r = c.req(api, "POST", "/v1/sandboxes",
                      json={"disk_mb": 256, "volumes": [{"name": name, "path": "/v", "read_only": True}]})
            assert r.status == 201 and r.json()["worker"] == home, r
            sids.append(r.json()["id"])
        sid = sids[0]
        r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "with-volume"})
        assert r.status == 201, r
        _wait(lambda: _shipped(c, api, sid, r.json()["id"]), 60, "the checkpoint shipped")
        os.kill(c.workers[home].pid, signal.SIGSTOP)
        try:
            _wait(lambda: c.sandbox(api, sid)["state"] == "unreachable", 30, "the sandbox lost")
            r = c.req(c.apis[1], "POST", f"/v1/sandboxes/{sid}/restore", json={"checkpoint": "with-volume"})
            assert r.status == 409, r
            msg = r.json()["error"]["message"]
            assert f"volume '{name}' is mounted by other sandboxes too" in msg, msg
            sb = c.sandbox(api, sid)
            assert sb["state"] == "unreachable" and sb["worker"] == home, sb
            assert c.req(api, "GET", f"/v1/volumes/{name}").json()["worker"] == home
            assert not c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.recovered"}) \
                .json()["events"]
        finally:
            os.kill(c.workers[home].pid, signal.SIGCONT)
        for s in sids:
            _wait(lambda: c.sandbox(api, s)["state"] == "running", 60, "the sandbox back with its worker")
            code, out = c.exec_out(c.apis[1], s, "cat /v/seed")
            assert code == 0 and out == "shared", (code, out)
    finally:
        c.delete_all()
    assert c.req(api, "DELETE", f"/v1/volumes/{name}").status == 204
