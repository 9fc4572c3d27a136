#!/usr/bin/env python3
"""space vm runtime benchmark: create (cold boot of a microVM, which saves the
base snapshot of its shape; and from that base snapshot), first exec, exec
round trip, pause, resume, suspend with memory, resume from it, branch with
memory x3 (and the slowest answer of GET /v1/info meanwhile: the worker's
event loop held up or not), restore in place from a checkpoint with memory
and delete through the HTTP API, p50/p90,
with the accelerator (kvm or tcg) named in every line. Not a test: it reports.

One command: `python3 bench/vm.py` (as root) starts a private spaced from
--build-dir (default build-release, else build) with the guest kernel from
--kernel-dir (default: vm/kernel/build.sh into /tmp/space-e2e-cache/vm-kernel,
shared with the e2e tests), runs, deletes what it made, stops spaced and
removes its state directory. Under TCG (no usable KVM) the figures are
software-emulation figures: for comparing changes on the same machine only."""
import argparse, http.client, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from lifecycle import Api, pct, free_port  # noqa: E402

CGROUP_ROOT = "space-bench-vm"


def kernel_dir(arg):
    if arg:
        return arg
    out = "/tmp/space-e2e-cache/vm-kernel"
    if not os.path.exists(os.path.join(out, "vmlinux")):
        subprocess.run([os.path.join(REPO, "vm", "kernel", "build.sh"), out], check=True)
    return out


def start_spaced(build, kdir, state):
    tpl = os.path.join(state, "templates-in")
    os.makedirs(tpl)
    tar = os.path.join(build, "templates", "base.tar")
    if not os.path.exists(tar):
        tar = "/tmp/space-e2e-cache/base.tar"
    if os.path.exists(tar):
        shutil.copyfile(tar, os.path.join(tpl, "base.tar"))
    else:
        subprocess.run([os.path.join(REPO, "templates", "base", "build.sh"), os.path.join(tpl, "base.tar")], check=True)
    port = free_port()
    args = [os.path.join(build, "src", "spaced", "spaced"), "--state-dir", os.path.join(state, "s"),
            "--listen", f"127.0.0.1:{port}", "--template-dir", tpl, "--cgroup-root", f"{CGROUP_ROOT}-{os.getpid()}",
            # names global on the host, unique to this run (other spaced may run beside)
            "--net-table", f"bvm{os.getpid() % 100000}", "--net-link-prefix", f"bv{os.getpid() % 10000}-",
            "--net-pool", f"10.{248 + os.getpid() % 8}.0.0/18",
            "--pool-size-mb", "8192", "--disk-overcommit", "100", "--log-level", "warning", f"--vm-kernel-dir={kdir}"]
    log = open(os.path.join(state, "spaced.log"), "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    for _ in range(3000):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("spaced exited: see " + log.name)
        time.sleep(0.1)
    with open(os.path.join(state, "s", "admin.key")) as f:
        key = f.read().strip()
    return proc, log, f"http://127.0.0.1:{port}", key


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=None)
    ap.add_argument("--kernel-dir", default=None)
    ap.add_argument("-n", type=int, default=3, help="vm sandboxes created (each a cold boot)")
    ap.add_argument("--execs", type=int, default=20, help="exec round trips measured")
    ap.add_argument("--memory-mb", type=int, default=256)
    ap.add_argument("--branches", type=int, default=2, help="branch with memory x3 calls measured")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    build = a.build_dir or next((os.path.join(REPO, d) for d in ("build-release", "build")
                                 if os.path.exists(os.path.join(REPO, d, "src", "spaced", "spaced"))), None)
    if not build:
        sys.exit("no build (meson setup build-release --buildtype=release && ninja -C build-release)")
    if not os.access("/usr/bin/qemu-system-x86_64", os.X_OK):
        sys.exit("QEMU is not installed (scripts/install-deps.sh installs qemu-system-x86)")
    kdir = kernel_dir(a.kernel_dir)
    state = tempfile.mkdtemp(prefix="space-bench-vm-")
    proc, log, url, key = start_spaced(build, kdir, state)
    res, made = {}, []
    try:
        api = Api(url, key)
        info = api.call("GET", "/v1/info")
        vm = info.get("vm", {})
        if not vm.get("available"):
            sys.exit(f"vm runtime unavailable: {vm.get('reason')}")
        accel = vm["accelerator"]
        load0 = os.getloadavg()
        create, first, create_base = [], [], []
        # each of a new shape (disk size): a cold boot, which also saves that shape's base snapshot
        for i in range(a.n):
            body = {"runtime": "vm", "memory_mb": a.memory_mb, "disk_mb": 2048 + i}
            dt, sb = api.timed("POST", "/v1/sandboxes", body)
            made.append(sb["id"])
            create.append(dt)
            t0 = time.perf_counter()
            api.sh(sb["id"], "true")
            first.append(time.perf_counter() - t0)
        # the first shape again: restored from its base snapshot
        for _ in range(a.n):
            dt, sb = api.timed("POST", "/v1/sandboxes", {"runtime": "vm", "memory_mb": a.memory_mb, "disk_mb": 2048})
            made.append(sb["id"])
            create_base.append(dt)
            api.sh(sb["id"], "true")
        for s in made[a.n:]:
            api.call("DELETE", f"/v1/sandboxes/{s}")
        del made[a.n:]
        accel = api.call("GET", "/v1/info")["vm"]["accelerator"]  # after the first boot (a KVM probe may fall back)
        sid = made[0]
        rt = []
        for _ in range(a.execs):
            t0 = time.perf_counter()
            api.sh(sid, "true")
            rt.append(time.perf_counter() - t0)
        pause, resume = [], []
        for _ in range(5):
            pause.append(api.timed("POST", f"/v1/sandboxes/{sid}/pause")[0])
            resume.append(api.timed("POST", f"/v1/sandboxes/{sid}/resume")[0])
        suspend, resume_mem = [], []
        for _ in range(2):
            suspend.append(api.timed("POST", f"/v1/sandboxes/{sid}/suspend")[0])
            resume_mem.append(api.timed("POST", f"/v1/sandboxes/{sid}/resume")[0])
            api.sh(sid, "true")
        # restore in place from a checkpoint with memory: the machine of that moment runs on
        api.call("POST", f"/v1/sandboxes/{sid}/checkpoints", {"name": "bench", "with_memory": True})
        restore = []
        for _ in range(2):
            restore.append(api.timed("POST", f"/v1/sandboxes/{sid}/restore", {"checkpoint": "bench"})[0])
            api.sh(sid, "true")
        # branch with memory x3: one saved machine restored three times, each child told its identity
        api.sh(sid, "sh -c 'n=0; while true; do n=$((n+1)); echo $n > /tmp/c; sleep 0.2; done' >/dev/null 2>&1 &")
        branch, info_worst = [], []
        for _ in range(a.branches):
            # meanwhile, on a connection of its own, a call the worker answers (info): its slowest answer
            # shows whether the branch holds up the worker's event loop
            stop, poller = threading.Event(), Api(url, key)

            def poll():
                worst = 0.0
                while not stop.is_set():
                    t0 = time.perf_counter()
                    poller.call("GET", "/v1/info")
                    worst = max(worst, time.perf_counter() - t0)
                    time.sleep(0.05)
                info_worst.append(worst)
            th = threading.Thread(target=poll)
            th.start()
            dt, res = api.timed("POST", f"/v1/sandboxes/{sid}/branch", {"count": 3, "with_memory": True})
            stop.set()
            th.join()
            branch.append(dt)
            kids = [k["id"] for k in res["sandboxes"]]
            made.extend(kids)
            for k in kids:
                api.sh(k, "cat /tmp/c")
            for k in kids:
                api.call("DELETE", f"/v1/sandboxes/{k}")
                made.remove(k)
        delete = []
        for s in list(made):
            delete.append(api.timed("DELETE", f"/v1/sandboxes/{s}")[0])
            made.remove(s)
        res = {"create (cold boot + base save)": create, "create (from base snapshot)": create_base,
               "first exec after create": first, "exec round trip (true)": rt,
               "pause": pause, "resume": resume, "suspend (memory to file)": suspend,
               "resume from suspend (memory)": resume_mem, "restore in place (memory)": restore,
               "branch with memory x3": branch, "info during branch (slowest)": info_worst, "delete": delete}
        load1 = os.getloadavg()
        print(f"vm runtime: {vm['vmm']}, guest kernel {vm.get('guest_kernel')}, accelerator {accel}"
              + (" (software emulation: slow, development only)" if accel == "tcg" else "")
              + f"; {os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load0[0]:.1f} at the"
              f" start, {load1[0]:.1f} at the end")
        for k, xs in res.items():
            print(f"  vm/{accel} {k:30s} p50 {pct(xs, 50) * 1000:9.1f} ms   p90 {pct(xs, 90) * 1000:9.1f} ms"
                  f"   (n={len(xs)})")
        if a.json:
            print(json.dumps({"accelerator": accel, **{k: {"p50_ms": pct(v, 50) * 1000, "p90_ms": pct(v, 90) * 1000}
                                                       for k, v in res.items()}}))
    finally:
        try:
            api = Api(url, key)
            for s in made:
                api.call("DELETE", f"/v1/sandboxes/{s}")
        except Exception as e:  # noqa: BLE001 - best effort on the way out
            print(f"cleanup: {e}", file=sys.stderr)
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        log.close()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
