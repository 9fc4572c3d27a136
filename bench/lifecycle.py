#!/usr/bin/env python3
"""space lifecycle benchmark: pause, resume, checkpoint (1 MiB vs 1 GiB of
data), branch x1 and x10, suspend and resume, create from a warm pool vs a
cold create, through the HTTP API; p50/p90 of each. Not a test: it reports.

One command: `python3 bench/lifecycle.py` (as root) starts a private spaced
from --build-dir (default build-release, as bench/run.sh builds it; else
build) on a temporary state directory and port, with a warm pool of the base
template, runs, and cleans up (it deletes every sandbox it made, stops spaced
and removes the state directory). --url/--key/--state-dir use a running one
instead (its warm pool, if any, is measured as found)."""
import argparse, http.client, json, os, shutil, signal, statistics, subprocess, sys, tempfile, time
import urllib.parse
from common import pct, free_port  # noqa: E402

MiB = 1024 * 1024
CGROUP_ROOT = "space-bench-lifecycle"


class Api:
    def __init__(self, url, key):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port or 80
        self.h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=600)

    def call(self, method, path, body=None, ok=(200, 201, 204)):
        try:
            self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.h)
            r = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # the server closed an idle keep-alive connection (a long settle() before): once more, anew
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
            self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.h)
            r = self.conn.getresponse()
        data = r.read()
        if r.status not in ok:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:300]!r}")
        return json.loads(data) if data else None

    def timed(self, method, path, body=None):
        t0 = time.perf_counter()
        v = self.call(method, path, body)
        return time.perf_counter() - t0, v

    def sh(self, sid, script):
        self.conn.request("POST", f"/v1/sandboxes/{sid}/exec", body=json.dumps({"shell": script}), headers=self.h)
        r = self.conn.getresponse()
        out, code = b"", None
        while True:
            line = r.readline()
            if not line:
                break
            ev = json.loads(line)
            if ev["type"] == "stdout":
                out += ev["data"].encode()
            if ev["type"] == "exit":
                code = ev.get("code")
                break
        r.read()
        if code != 0:
            raise RuntimeError(f"{script!r} exited {code}")
        return out.decode()


class Daemon:
    """A private spaced on a temporary state directory."""

    def __init__(self, build, warm, extra=(), log_level="warning"):
        self.state = tempfile.mkdtemp(prefix="space-bench-lc-")
        self.templates = os.path.join(self.state, "templates-in")
        os.makedirs(self.templates)
        tar = os.path.join(build, "templates", "base.tar")
        if not os.path.exists(tar):
            tar = "/tmp/space-e2e-cache/base.tar"
        if not os.path.exists(tar):
            subprocess.run([os.path.join(os.path.dirname(build), "templates", "base", "build.sh"),
                            os.path.join(self.templates, "base.tar")], check=True)
        else:
            shutil.copyfile(tar, os.path.join(self.templates, "base.tar"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # names global on the host are this run's own (others may run spaced beside it)
        tag = f"{os.getpid() % 100000}"
        self.cgroup_root = f"{CGROUP_ROOT}-{tag}"
        args = [os.path.join(build, "src", "spaced", "spaced"), "--state-dir", os.path.join(self.state, "s"),
                "--listen", f"127.0.0.1:{self.port}", "--template-dir", self.templates,
                "--cgroup-root", self.cgroup_root, "--pool-size-mb", "8192", "--disk-overcommit", "100",
                "--log-level", log_level, *([f"--warm-pool=base:{warm}"] if warm else []),
                "--net-table", f"spacelc{tag}", "--net-link-prefix", f"lc{tag}-",
                "--net-pool", f"10.{216 + os.getpid() % 16}.0.0/18", "--slots-max", "1024", *extra]
        self.log = open(os.path.join(self.state, "spaced.log"), "wb")
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
        with open(os.path.join(self.state, "s", "admin.key")) as f:
            self.key = f.read().strip()

    def stop(self, api):
        # warm sandboxes are the system's: a restart without the pool removes them
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        args = [a for a in self.proc.args if not a.startswith("--warm-pool")]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/metrics")
                r = c.getresponse()
                body = r.read().decode()
                if r.status == 200 and 'state="paused"} 0' in body:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()
        shutil.rmtree(self.state, ignore_errors=True)
        for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            for h in [base] + [os.path.join(base, x) for x in os.listdir(base)]:
                try:
                    os.rmdir(os.path.join(h, self.cgroup_root))  # our empty root, if spaced left it
                except OSError:
                    pass


def proc_cpu_ticks(pid):
    """utime+stime+cutime+cstime of a process (clock ticks); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]), fields[0]
    except (OSError, IndexError, ValueError):
        return None


def daemon_cpu_ticks(root):
    """CPU of spaced and its host processes (worker, spawner, gateway and what they reaped: the branch's
    helpers), not of sandbox processes (an agent's subtree is left out)."""
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().startswith("memfd:"):
                    continue  # a sandbox's PID 1 (its CPU is its cgroup's)
        except OSError:
            continue
        v = proc_cpu_ticks(pid)
        if v is None:
            continue
        total += v[0]
        try:
            for t in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{t}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return total


def cgroup_cpu_usec(cgroup_root, sid):
    """CPU used so far in a sandbox's cgroup (its pre-exec set-up and its agent), or 0."""
    for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct"):
        d = os.path.join(base, cgroup_root, sid)
        try:
            with open(os.path.join(d, "cpu.stat")) as f:
                for line in f:
                    if line.startswith("usage_usec "):
                        return int(line.split()[1])
        except OSError:
            pass
        try:
            with open(os.path.join(d, "cpuacct.usage")) as f:
                return int(f.read()) // 1000
        except OSError:
            pass
    return 0


def netns_live():
    """Network namespaces allocated on the host (the net_namespace slab's active objects), or None."""
    try:
        with open("/proc/slabinfo") as f:
            for line in f:
                if line.startswith("net_namespace "):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def settle(pool, netns_before, timeout=120.0, netns_timeout=5.0):
    """Waits until the background work of the last deletes is done: the pool's deleted subvolumes
    cleaned (`btrfs filesystem sync` then `btrfs subvolume sync`) and the host's count of network namespaces back to what it was
    before the branch (the kernel frees them in a work queue; others' sandboxes move it too, hence a
    shorter deadline). Returns the seconds waited and whether the netns count came back."""
    t0 = time.perf_counter()
    if pool:
        # a sync commits and wakes the cleaner (else it waits for the next periodic commit, up to 30 s)
        for cmd in (["filesystem", "sync"], ["subvolume", "sync"]):
            subprocess.run(["btrfs", *cmd, pool], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=timeout)
    ok, t1 = netns_before is None, time.perf_counter()
    while not ok and time.perf_counter() - t1 < netns_timeout:
        ok = netns_live() <= netns_before
        if not ok:
            time.sleep(0.02)
    return time.perf_counter() - t0, ok


def branches(api, daemon, src, a, res):
    """branch x1 and x10 of src, each sample after the previous one's deletes have settled (settle()); with
    our own daemon, the CPU of a branch too: its host processes' (daemon_cpu_ticks) plus its children's
    cgroups until the call returns."""
    pool = os.path.join(daemon.state, "s", "pool") if daemon else None
    if pool and not os.path.ismount(pool):
        pool = None
    hz = os.sysconf("SC_CLK_TCK")
    print(f"  (branch samples: each after the previous one's deletes settled: "
          f"{'btrfs filesystem sync + subvolume sync of the pool, ' if pool else ''}"
          f"{'and the host netns count back to its value before (net_namespace slab)' if netns_live() is not None else 'no netns count'})",
          flush=True)
    for count, n in ((1, max(5, a.n // 2)), (10, a.branch_n)):
        xs, cpu, waits, late = [], [], [], 0
        for _ in range(n):
            ns0 = netns_live()
            c0 = daemon_cpu_ticks(daemon.proc.pid) if daemon else 0
            t, v = api.timed("POST", f"/v1/sandboxes/{src}/branch", {"count": count})
            if daemon:
                c1 = daemon_cpu_ticks(daemon.proc.pid)
                kids = sum(cgroup_cpu_usec(daemon.cgroup_root, k["id"]) for k in v["sandboxes"])
                cpu.append((c1 - c0) / hz + kids / 1e6)
            xs.append(t)
            for k in v["sandboxes"]:
                api.call("DELETE", f"/v1/sandboxes/{k['id']}")
            w, ok = settle(pool, ns0)
            waits.append(w)
            late += not ok
        name = f"branch x{count}"
        res[name] = xs
        extra = f"   CPU {statistics.median(cpu) * 1000:6.1f} ms p50" if cpu else ""
        print(f"  {name:<28} p50 {pct(xs, 50) * 1000:8.1f} ms   p90 {pct(xs, 90) * 1000:8.1f} ms   (n={n}){extra}"
              f"   [settled in {statistics.median(waits) * 1000:.0f} ms p50"
              f"{f', {late} netns count not back within 5 s' if late else ''}]", flush=True)
        if cpu:
            res[name + " cpu"] = cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=None)
    ap.add_argument("--url")
    ap.add_argument("--key")
    ap.add_argument("-n", type=int, default=20, help="samples of the quick operations")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    ap.add_argument("--log-level", default="warning", help="of the private spaced (debug: the worker's per-step "
                    "timings in its log, kept with --log)")
    ap.add_argument("--log", help="copy the private spaced's log to this file at the end")
    ap.add_argument("--branch-n", type=int, default=15, help="samples of branch x10")
    ap.add_argument("--only", choices=["create", "branch"], help="only the creates (warm pool and cold), or only the branches")
    a = ap.parse_args()

    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    daemon = None
    if a.url:
        url, key = a.url, a.key
    else:
        build = a.build_dir or next((os.path.join(top, b) for b in ("build-release", "build")
                                     if os.path.exists(os.path.join(top, b, "src", "spaced", "spaced"))), None)
        if not build:
            sys.exit("no build: run bench/run.sh once, or give --build-dir")
        daemon = Daemon(os.path.abspath(build), warm=0 if a.only == "branch" else 2, log_level=a.log_level)
        url, key = daemon.url, daemon.key
    api = Api(url, key)
    made = []
    res = {}

    def sample(name, f, n):
        xs = []
        for _ in range(n):
            xs.append(f())
        res[name] = xs
        print(f"  {name:<28} p50 {pct(xs, 50) * 1000:8.1f} ms   p90 {pct(xs, 90) * 1000:8.1f} ms   (n={n})",
              flush=True)

    def new(**body):
        v = api.call("POST", "/v1/sandboxes", body)
        made.append(v["id"])
        return v["id"]

    try:
        print("space lifecycle benchmark (" + url + ")")
        if a.only == "branch":
            small = new()
            api.sh(small, "head -c 1048576 /dev/urandom > /root/data; sync")
            branches(api, daemon, small, a, res)
        if a.only is None:
            sid = new(disk_mb=4096)
            api.sh(sid, "i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.01; done >/dev/null 2>&1 &")

            def pause_resume():
                t, _ = api.timed("POST", f"/v1/sandboxes/{sid}/pause", {})
                pause_resume.resume.append(api.timed("POST", f"/v1/sandboxes/{sid}/resume", {})[0])
                return t
            pause_resume.resume = []
            sample("pause", pause_resume, a.n)
            res["resume (from paused)"] = pause_resume.resume
            xs = pause_resume.resume
            print(f"  {'resume (from paused)':<28} p50 {pct(xs, 50) * 1000:8.1f} ms   p90 {pct(xs, 90) * 1000:8.1f} ms"
                  f"   (n={len(xs)})", flush=True)

            small = new()
            api.sh(small, "head -c 1048576 /dev/urandom > /root/data; sync")
            api.sh(sid, "head -c 1073741824 /dev/urandom > /root/data; sync")

            def ckpt(box):
                def f():
                    t, c = api.timed("POST", f"/v1/sandboxes/{box}/checkpoints", {})
                    api.call("DELETE", f"/v1/sandboxes/{box}/checkpoints/{c['id']}")
                    return t
                return f
            sample("checkpoint (1 MiB of data)", ckpt(small), a.n)
            sample("checkpoint (1 GiB of data)", ckpt(sid), a.n)

            branches(api, daemon, small, a, res)

            def suspend_resume():
                t, _ = api.timed("POST", f"/v1/sandboxes/{small}/suspend", {})
                suspend_resume.resume.append(api.timed("POST", f"/v1/sandboxes/{small}/resume", {})[0])
                return t
            suspend_resume.resume = []
            sample("suspend", suspend_resume, max(5, a.n // 2))
            xs = suspend_resume.resume
            res["resume (from suspended)"] = xs
            print(f"  {'resume (from suspended)':<28} p50 {pct(xs, 50) * 1000:8.1f} ms   p90 {pct(xs, 90) * 1000:8.1f} ms"
                  f"   (n={len(xs)})", flush=True)

        def ready():
            c = http.client.HTTPConnection(api.host, api.port, timeout=10)
            c.request("GET", "/metrics")
            body = c.getresponse().read().decode()
            for line in body.splitlines():
                if line.startswith('space_warm_pool_size{template="base"}'):
                    return int(line.split()[-1])
            return 0

        def create(warm):
            def f():
                if warm:
                    for _ in range(600):
                        if ready() > 0:
                            break
                        time.sleep(0.05)
                t0 = time.perf_counter()
                # a disk_mb other than the default never matches a warm sandbox
                v = api.call("POST", "/v1/sandboxes", {} if warm else {"disk_mb": 2049})
                t = time.perf_counter() - t0
                api.call("DELETE", f"/v1/sandboxes/{v['id']}")
                return t
            return f
        if a.only != "branch":
            if ready() or daemon:
                sample("create (warm pool)", create(True), max(5, a.n // 2))
            sample("create (cold)", create(False), max(5, a.n // 2))
        if "create (warm pool)" in res:
            w, c = statistics.median(res["create (warm pool)"]), statistics.median(res["create (cold)"])
            print(f"  warm/cold create p50 ratio: {w / c:.2f}")
        if a.json:
            print(json.dumps({k: {"p50_ms": pct(v, 50) * 1000, "p90_ms": pct(v, 90) * 1000, "n": len(v)}
                              for k, v in res.items()}, indent=1))
    finally:
        for s in made:
            try:
                api.call("DELETE", f"/v1/sandboxes/{s}", ok=(200, 404))
            except Exception as e:  # noqa: BLE001 - cleanup goes on
                print(f"cleanup: {s}: {e}", file=sys.stderr)
        if daemon:
            if a.log:
                daemon.log.flush()
                shutil.copyfile(daemon.log.name, a.log)
            daemon.stop(api)


if __name__ == "__main__":
    main()
