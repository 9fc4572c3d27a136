#!/usr/bin/env python3
"""space A/B benchmark: create and branch latencies of two builds, interleaved
in the same run, so that the load of a shared machine falls on both alike.
Not a test: it reports.

    python3 bench/ab.py --a build-release-main --b build-release -n 30

starts a private spaced from each build directory (temporary state dir and
port, host-global names of its own: nft table, link prefix, address pool,
cgroup root), then alternates between them (which goes first flips every
round): create (the API call) + delete (with --warm N: from a warm pool of N
too, each waiting untimed until the pool is full again), and branch x1 / x10 of a running
sandbox + delete of the children. Prints p50/p90 of each, the ratio B/A, and the
CPU time per operation of each spaced (utime+stime of its processes and of what
they reaped: sandboxes, helpers; the operation includes the delete).
--log-level debug keeps each daemon's log (the worker's per-step timings)
in its state directory, printed at the end with --keep."""
import argparse, http.client, json, os, shutil, signal, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lifecycle import cgroup_cpu_usec, daemon_cpu_ticks, netns_live, settle  # noqa: E402
from common import pct, free_port  # noqa: E402

MiB = 1024 * 1024


class Daemon:
    def __init__(self, name, build, idx, log_level, template_tar, warm=0):
        self.name = name
        self.state = tempfile.mkdtemp(prefix=f"space-bench-ab-{name}-")
        try:
            self._setup(name, build, idx, log_level, template_tar, warm)
        except BaseException:
            # nothing left behind by a daemon that did not come up (its log first, to stderr)
            log = os.path.join(self.state, "spaced.log")
            if os.path.exists(log):
                with open(log, "rb") as f:
                    sys.stderr.write(f.read()[-4000:].decode(errors="replace"))
            if getattr(self, "proc", None) is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.state, ignore_errors=True)
            raise

    def _setup(self, name, build, idx, log_level, template_tar, warm):
        self.templates = os.path.join(self.state, "templates-in")
        os.makedirs(self.templates)
        shutil.copyfile(template_tar, os.path.join(self.templates, "base.tar"))
        self.port = free_port()
        tag = f"{os.getpid() % 10000}{name}"
        self.cgroup_root = f"space-bench-ab-{tag}"
        args = [os.path.join(build, "src", "spaced", "spaced"), "--state-dir", os.path.join(self.state, "s"),
                "--listen", f"127.0.0.1:{self.port}", "--template-dir", self.templates,
                "--cgroup-root", self.cgroup_root, "--pool-size-mb", "4096", "--log-level", log_level,
                "--net-table", f"spaceab{tag}", "--net-link-prefix", f"ab{tag}-",
                "--net-pool", f"10.{232 + os.getpid() % 16}.{idx * 64}.0/18", "--slots-max", "1024"]
        if warm:
            args.append(f"--warm-pool=base:{warm}")
        # a build with disk admission admits two sandboxes of the default disk_mb on this pool at 1.0
        if "disk_overcommit" in subprocess.run([args[0], "--help"], capture_output=True, text=True).stdout:
            args.append("--disk-overcommit=100")
        self.log = open(os.path.join(self.state, "spaced.log"), "wb")
        self._start(args)
        with open(os.path.join(self.state, "s", "admin.key")) as f:
            key = f.read().strip()
        self.h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)

    def _start(self, args):
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        for _ in range(3000):
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/healthz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("spaced exited: see " + self.log.name)
            time.sleep(0.1)

    def tree(self):
        """spaced and its processes (worker, spawner, gateway) as they are now"""
        kids = {}
        for e in os.listdir("/proc"):
            if e.isdigit():
                try:
                    with open(f"/proc/{e}/stat") as f:
                        st = f.read()
                except OSError:
                    continue
                ppid = int(st[st.rindex(")") + 2:].split()[1])
                kids.setdefault(ppid, []).append(int(e))
        out, todo = [], [self.proc.pid]
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(kids.get(p, []))
        self.pids = out

    def cpu(self):
        """CPU seconds of spaced's processes, with what they reaped (sandboxes, helpers)"""
        t = 0
        for p in self.pids:
            try:
                with open(f"/proc/{p}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            v = st[st.rindex(")") + 2:].split()
            t += sum(int(x) for x in v[11:15])  # utime stime cutime cstime
        return t / os.sysconf("SC_CLK_TCK")

    def warm_ready(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", "/metrics")
        for line in c.getresponse().read().decode().splitlines():
            if line.startswith('space_warm_pool_size{template="base"}'):
                return int(line.split()[-1])
        return 0

    def call(self, method, path, body=None, ok=(200, 201, 204)):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.h)
        r = self.conn.getresponse()
        data = r.read()
        if r.status not in ok:
            raise RuntimeError(f"{self.name}: {method} {path}: {r.status} {data[:300]!r}")
        return json.loads(data) if data else None

    def timed(self, method, path, body=None):
        t0 = time.perf_counter()
        v = self.call(method, path, body)
        return time.perf_counter() - t0, v

    def stop(self, keep):
        if any(x.startswith("--warm-pool") for x in self.proc.args):
            # warm sandboxes are the system's: a restart without the pool removes them
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)
            self._start([x for x in self.proc.args if not x.startswith("--warm-pool")])
            for _ in range(600):
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                c.request("GET", "/metrics")
                if 'state="paused"} 0' in c.getresponse().read().decode():
                    break
                time.sleep(0.2)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        if keep:
            print(f"{self.name}: log in {self.log.name}")
        else:
            shutil.rmtree(self.state, ignore_errors=True)
        for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            if not os.path.isdir(base):
                continue
            for h in [base] + [os.path.join(base, x) for x in os.listdir(base)]:
                try:
                    os.rmdir(os.path.join(h, self.cgroup_root))
                except OSError:
                    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="build directory A (the baseline)")
    ap.add_argument("--b", required=True, help="build directory B")
    ap.add_argument("-n", type=int, default=20, help="create samples per build")
    ap.add_argument("--branch", type=int, default=15, help="branch x10 samples per build (0: none)")
    ap.add_argument("--warm", type=int, default=0,
                    help="a warm pool of base of this size in both, and creates from it measured too")
    ap.add_argument("--log-level", default="warning")
    ap.add_argument("--keep", action="store_true", help="keep the state directories (logs)")
    a = ap.parse_args()

    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tar = next((t for t in (os.path.join(a.a, "templates", "base.tar"), os.path.join(a.b, "templates", "base.tar"),
                            os.path.join(top, "build", "templates", "base.tar"), "/tmp/space-e2e-cache/base.tar")
                if os.path.exists(t)), None)
    if not tar:
        sys.exit("no base.tar: ./templates/base/build.sh BUILD/templates/base.tar")
    ds, made = [], {}
    res = {}
    try:
        for i, (name, build) in enumerate((("A", a.a), ("B", a.b))):
            ds.append(Daemon(name, os.path.abspath(build), i, a.log_level, tar, a.warm))
        for d in ds:
            made[d.name] = [d.call("POST", "/v1/sandboxes", {})["id"]]
        for d in ds:
            d.tree()
        print(f"space A/B (A = {a.a}, B = {a.b}), interleaved; CPU: utime+stime(+reaped children) of each "
              f"spaced's processes per operation", flush=True)

        def create(d):
            # with a warm pool, a disk_mb other than the default never matches a warm sandbox
            t, v = d.timed("POST", "/v1/sandboxes", {"disk_mb": 2049} if a.warm else {})
            d.call("DELETE", f"/v1/sandboxes/{v['id']}")
            return t

        def create_warm(d):
            # the pool full again: no refill in flight (the single-threaded worker would make the create
            # wait behind it; lifecycle.py measures that case)
            for _ in range(1200):
                if d.warm_ready() >= a.warm:
                    break
                time.sleep(0.05)
            t, v = d.timed("POST", "/v1/sandboxes", {})
            d.call("DELETE", f"/v1/sandboxes/{v['id']}")
            return t

        branch_cpu = {}  # (count, name): CPU of each branch call, the children's set-up included

        def branch(count):
            # each sample after the previous one's deletes settled (lifecycle.settle), its CPU noted: the
            # daemon's host processes and the children's cgroups until the call returns
            def f(d):
                pool = os.path.join(d.state, "s", "pool")
                ns0, c0 = netns_live(), daemon_cpu_ticks(d.proc.pid)
                t, v = d.timed("POST", f"/v1/sandboxes/{made[d.name][0]}/branch", {"count": count})
                c = (daemon_cpu_ticks(d.proc.pid) - c0) / os.sysconf("SC_CLK_TCK") + \
                    sum(cgroup_cpu_usec(d.cgroup_root, k["id"]) for k in v["sandboxes"]) / 1e6
                branch_cpu.setdefault((count, d.name), []).append(c)
                for k in v["sandboxes"]:
                    d.call("DELETE", f"/v1/sandboxes/{k['id']}")
                settle(pool if os.path.ismount(pool) else None, ns0)
                return t
            return f

        def run(label, f, n):
            xs = {d.name: [] for d in ds}
            cpu = {d.name: 0.0 for d in ds}
            for i in range(n):
                for d in (ds if i % 2 == 0 else ds[::-1]):
                    c0 = d.cpu()
                    xs[d.name].append(f(d))
                    cpu[d.name] += d.cpu() - c0
            res[label] = xs
            pa, pb = pct(xs["A"], 50) * 1000, pct(xs["B"], 50) * 1000
            ca, cb = cpu["A"] * 1000 / n, cpu["B"] * 1000 / n
            print(f"  {label:<12} A p50 {pa:7.1f} p90 {pct(xs['A'], 90) * 1000:7.1f} ms   "
                  f"B p50 {pb:7.1f} p90 {pct(xs['B'], 90) * 1000:7.1f} ms   B/A {pb / pa:.2f}   "
                  f"CPU A {ca:5.1f} B {cb:5.1f} ms   (n={n}, load {os.getloadavg()[0]:.1f})", flush=True)

        if a.warm:
            run("create warm", create_warm, a.n)
        run("create", create, a.n)
        if a.branch:
            print("  (branch samples: each after the previous deletes settled: btrfs filesystem sync + subvolume "
                  "sync of the pool, host netns count back, 5 s at most)", flush=True)
            run("branch x1", branch(1), max(a.branch, 5))
            run("branch x10", branch(10), a.branch)
            for count in (1, 10):
                ca, cb = (statistics.median(branch_cpu[(count, x)]) * 1000 for x in ("A", "B"))
                print(f"  {'CPU x' + str(count):<12} A p50 {ca:7.1f} ms{'':13}B p50 {cb:7.1f} ms{'':13}B/A {cb / ca:.2f}"
                      "   (daemon processes + children's cgroups)", flush=True)
    finally:
        for d in ds:
            for s in made.get(d.name, []):
                try:
                    d.call("DELETE", f"/v1/sandboxes/{s}", ok=(200, 204, 404))
                except Exception as e:  # noqa: BLE001 - cleanup goes on
                    print(f"cleanup: {s}: {e}", file=sys.stderr)
            d.stop(a.keep)


if __name__ == "__main__":
    main()
