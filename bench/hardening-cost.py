#!/usr/bin/env python3
"""The cost of the ns runtime's hardening (seccomp filter, capability drop
and securebits, /proc masks and the boot id) on create and exec latency: two
spaced, one built normally and one with -Dbench_no_hardening=true, run side
by side on private state dirs, and measured interleaved (one create → first
output → exec round trip → delete on each in turn), so that the load of the
machine weighs on both alike. Not a test: it reports.

  meson setup build-release --buildtype=release -Dwerror=false && ninja -C build-release
  meson setup build-nohard --buildtype=release -Dwerror=false -Dbench_no_hardening=true && ninja -C build-nohard
  sudo bench/hardening-cost.py --runs 100
"""
import argparse, os, shutil, signal, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Api, pct  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


class Daemon:
    def __init__(self, name, build, port, uid_base, template, idx):
        self.name, self.build = name, build
        self.state = tempfile.mkdtemp(prefix=f"space-hcost-{name}-")
        self.tdir = os.path.join(self.state, "templates")
        os.makedirs(self.tdir)
        shutil.copy(template, os.path.join(self.tdir, "base.tar"))
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(os.path.join(self.state, "spaced.log"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(build, "src/spaced/spaced"), "--state-dir", os.path.join(self.state, "state"),
             "--listen", f"127.0.0.1:{port}", "--template-dir", self.tdir,
             "--agent-path", os.path.join(build, "src/agent/space-agent"), "--pool-size-mb", "4096", "--disk-overcommit", "100",
             "--cgroup-root", f"space-hcost-{os.getpid()}-{name}", f"--uid-base={uid_base}", "--slots-max=64",
             # names global on the host, unique per daemon (other spaced may run beside)
             "--net-table", f"hcost{os.getpid() % 100000}{idx}", "--net-link-prefix", f"hc{os.getpid() % 10000}{idx}-",
             "--net-pool", f"10.{224 + os.getpid() % 8}.{idx * 64}.0/18",
             "--log-level", "warning"], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"{name}: spaced did not come up (log in {self.state})")
        with open(os.path.join(self.state, "state", "admin.key")) as f:
            self.api = Api(self.url, f.read().strip())

    def once(self, out):
        t0 = time.perf_counter()
        sb = self.api.call("POST", "/v1/sandboxes", {})
        t1 = time.perf_counter()
        first, _ = self.api.exec_first_output(sb["id"], ["/bin/echo", "hi"])
        _, rtt = self.api.exec_first_output(sb["id"], ["/bin/true"])
        t2 = time.perf_counter()
        self.api.call("DELETE", f"/v1/sandboxes/{sb['id']}")
        out["create"].append(t1 - t0)
        out["first exec after create"].append(first)
        out["create → first output"].append(t1 - t0 + first)
        out["exec round trip (/bin/true)"].append(rtt)
        out["delete"].append(time.perf_counter() - t2)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.state, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--hardened", default=os.path.join(TOP, "build-release"))
    ap.add_argument("--unhardened", default=os.path.join(TOP, "build-nohard"))
    ap.add_argument("--template", default=os.path.join(TOP, "build-release/templates/base.tar"))
    a = ap.parse_args()
    if not os.path.exists(a.template):
        subprocess.run([os.path.join(TOP, "templates/base/build.sh"), a.template], check=True)
    port = 20000 + os.getpid() % 20000
    ds = []
    try:
        ds.append(Daemon("hardened", a.hardened, port, 1700000000, a.template, 0))
        ds.append(Daemon("unhardened", a.unhardened, port + 1, 1750000000, a.template, 1))
        load0 = os.getloadavg()
        res = {d.name: {k: [] for k in ("create", "first exec after create", "create → first output",
                                        "exec round trip (/bin/true)", "delete")} for d in ds}
        for i in range(a.runs):
            for d in (ds if i % 2 == 0 else ds[::-1]):
                d.once(res[d.name])
        load1 = os.getloadavg()
        print(f"hardening cost ({a.runs} interleaved runs each, {os.cpu_count()} cpus, "
              f"{time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load0[0]:.1f} at the start, "
              f"{load1[0]:.1f} at the end): p50 / p90 in ms")
        print(f"  {'':32s} {'hardened':>17s} {'without':>17s} {'cost p50':>9s}")
        for k in res["hardened"]:
            h, u = res["hardened"][k], res["unhardened"][k]
            print(f"  {k:32s} {pct(h, 50) * 1e3:7.2f} / {pct(h, 90) * 1e3:7.2f} "
                  f"{pct(u, 50) * 1e3:7.2f} / {pct(u, 90) * 1e3:7.2f} {(pct(h, 50) - pct(u, 50)) * 1e3:+8.2f}")
    finally:
        for d in ds:
            d.stop()


if __name__ == "__main__":
    main()
