#!/usr/bin/env python3
"""The cost of a volume on create: interleaved creates of the same sandbox
with no volume, with one volume (read-write) and with four (read-only,
shared by nothing else), on one private spaced; p50/p90 of the create call
and of create → first output, and the delete. Not a test: it reports.

  meson setup build-release --buildtype=release && ninja -C build-release
  sudo bench/volume-mount.py [--build build-release] [--runs 100]
"""
import argparse, importlib.util, os, subprocess, sys, time, uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import pct  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def hardening_cost():
    spec = importlib.util.spec_from_file_location("hcost", os.path.join(TOP, "bench/hardening-cost.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(TOP, "build-release"))
    ap.add_argument("--template", default=os.path.join(TOP, "build-release/templates/base.tar"))
    ap.add_argument("--runs", type=int, default=100)
    a = ap.parse_args()
    if not os.path.exists(a.template):
        subprocess.run([os.path.join(TOP, "templates/base/build.sh"), a.template], check=True)
    hc = hardening_cost()
    d = hc.Daemon("volumes", a.build, 20000 + os.getpid() % 20000, 1850000000, a.template, 3)
    names = [f"bench-{uuid.uuid4().hex[:8]}" for _ in range(5)]
    try:
        for n in names:
            d.api.call("POST", "/v1/volumes", {"name": n, "size_mb": 64})
        shapes = {
            "no volume": {},
            "1 volume (rw)": {"volumes": [{"name": names[0], "path": "/data"}]},
            "4 volumes (ro)": {"volumes": [{"name": n, "path": f"/v/{i}", "read_only": True}
                                           for i, n in enumerate(names[1:])]},
        }
        res = {k: {"create": [], "create → first output": [], "delete": []} for k in shapes}
        load0 = os.getloadavg()
        for i in range(a.runs):
            order = list(shapes) if i % 2 == 0 else list(shapes)[::-1]
            for k in order:
                t0 = time.perf_counter()
                sb = d.api.call("POST", "/v1/sandboxes", shapes[k])
                t1 = time.perf_counter()
                first, _ = d.api.exec_first_output(sb["id"], ["/bin/echo", "hi"])
                t2 = time.perf_counter()
                d.api.call("DELETE", f"/v1/sandboxes/{sb['id']}")
                res[k]["create"].append(t1 - t0)
                res[k]["create → first output"].append(t1 - t0 + first)
                res[k]["delete"].append(time.perf_counter() - t2)
        load1 = os.getloadavg()
        print(f"volume mount cost ({a.runs} interleaved runs each, {os.cpu_count()} cpus, "
              f"{time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load0[0]:.1f} at the start, "
              f"{load1[0]:.1f} at the end): p50 / p90 in ms")
        base = res["no volume"]
        for k in shapes:
            for m, xs in res[k].items():
                extra = "" if k == "no volume" else f"  (p50 {(pct(xs, 50) - pct(base[m], 50)) * 1e3:+.2f})"
                print(f"  {k:16s} {m:24s} {pct(xs, 50) * 1e3:7.2f} / {pct(xs, 90) * 1e3:7.2f}{extra}")
    finally:
        for n in names:
            try:
                d.api.call("DELETE", f"/v1/volumes/{n}")
            except Exception:  # noqa: BLE001 - the daemon's state goes with it anyway
                pass
        d.stop()


if __name__ == "__main__":
    main()
