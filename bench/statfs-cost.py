#!/usr/bin/env python3
"""The cost of answering statfs() in the worker (src/runtime/ns/statfs-notify.h):
a sandbox calls statfs("/") in a loop for a moment (the probe of
tests/e2e/security/probes/statfs.c, fewer calls than the worker's budget of
1000 a second), spaced out so that each burst gets a fresh budget; reported:
the time per call inside, the worker's CPU time per call (utime + stime of
the space-worker process), and the kernel's own statfs on the host in the
same run. Not a test: it reports.

  meson setup build-release --buildtype=release && ninja -C build-release
  sudo bench/statfs-cost.py [--build build-release] [--bursts 20]
"""
import argparse, importlib.util, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import daemon_pids, pct  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PROBE = os.path.join(TOP, "tests/e2e/security/probes/statfs.c")
BURST_SECONDS = 0.1   # fewer calls than the budget (1000 a second): the time is the round trip's


def hardening_cost():
    spec = importlib.util.spec_from_file_location("hcost", os.path.join(TOP, "bench/hardening-cost.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def cpu_ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def run(api, sid, cmd):
    api.conn.request("POST", f"/v1/sandboxes/{sid}/exec", body=json.dumps({"cmd": cmd}), headers=api.h)
    r = api.conn.getresponse()
    out = []
    for line in r:
        ev = json.loads(line)
        if ev["type"] == "stdout":
            out.append(ev["data"])
        if ev["type"] == "exit":
            break
    r.read()
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build-release"))
    ap.add_argument("--template", default=os.path.join(TOP, "build-release/templates/base.tar"))
    ap.add_argument("--bursts", type=int, default=20)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="space-statfs-cost-")
    probe = os.path.join(tmp, "statfs")
    subprocess.run(["gcc", "-static", "-O2", "-o", probe, PROBE, "-lpthread"], check=True)
    hc = hardening_cost()
    d = hc.Daemon("statfs", a.build, 20000 + os.getpid() % 20000, 1800000000, a.template, 2)
    try:
        wpid = daemon_pids(os.path.join(d.state, "state"))[-1]
        sid = d.api.call("POST", "/v1/sandboxes", {})["id"]
        with open(probe, "rb") as f:
            body = f.read()
        d.api.conn.request("PUT", f"/v1/sandboxes/{sid}/files?path=/statfs&mode=0755", body=body,
                           headers={"Authorization": d.api.h["Authorization"]})
        d.api.conn.getresponse().read()
        inside, cpu, native = [], [], []
        tick = os.sysconf("SC_CLK_TCK")
        load0 = os.getloadavg()
        for _ in range(a.bursts):
            time.sleep(1.1)
            c0 = cpu_ticks(wpid)
            calls = int(run(d.api, sid, ["/statfs", "flood", str(BURST_SECONDS)]).split()[0].split("=")[1])
            c1 = cpu_ticks(wpid)
            inside.append(BURST_SECONDS / calls)
            cpu.append((c1 - c0) / tick / calls)
            out = subprocess.run([probe, "flood", "0.05"], capture_output=True, text=True, check=True).stdout
            native.append(0.05 / int(out.split()[0].split("=")[1]))
        load1 = os.getloadavg()
        print(f"statfs cost ({a.bursts} bursts of {BURST_SECONDS} s, {time.strftime('%Y-%m-%d %H:%M:%S')}, "
              f"load average {load0[0]:.1f} → {load1[0]:.1f}), p50 / p90 in µs:")
        print(f"  statfs(\"/\") inside, answered by the worker {pct(inside, 50) * 1e6:8.1f} / {pct(inside, 90) * 1e6:8.1f}")
        print(f"  worker CPU per call                      {pct(cpu, 50) * 1e6:8.1f} / {pct(cpu, 90) * 1e6:8.1f}")
        print(f"  statfs(\"/\") on the host (the kernel)     {pct(native, 50) * 1e6:8.1f} / {pct(native, 90) * 1e6:8.1f}")
        d.api.call("DELETE", f"/v1/sandboxes/{sid}")
    finally:
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
