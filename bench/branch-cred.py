#!/usr/bin/env python3
"""What inherited credentials cost a branch: branch x10 of a sandbox holding
one credential (each child gets its own grant row, its own CA in its trust
store and its credentials in the gateway) against one holding none,
alternating in the same window, on a private spaced of the release build
(its own nftables table, link prefix, address pool, uid range and cgroup
root). Not a test: it reports p50/p90 and the load average.

  python3 bench/branch-cred.py [N]      (as root; N rounds, default 10)"""
import http.client, os, shutil, signal, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lifecycle import Api, free_port, pct  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = os.path.join(REPO, "build-release")
state = tempfile.mkdtemp(prefix="space-credbench-")
tpl = os.path.join(state, "tpl"); os.makedirs(tpl)
for t in (os.path.join(build, "templates", "base.tar"), os.path.join(REPO, "build", "templates", "base.tar"),
          "/tmp/space-e2e-cache/base.tar"):
    if os.path.exists(t):
        shutil.copyfile(t, os.path.join(tpl, "base.tar"))
        break
else:
    sys.exit("no base.tar: templates/base/build.sh build-release/templates/base.tar")
port = free_port()
tag = f"cb{os.getpid() % 10000}"
args = [os.path.join(build, "src", "spaced", "spaced"), "--state-dir", os.path.join(state, "s"),
        "--listen", f"127.0.0.1:{port}", "--template-dir", tpl, "--cgroup-root", f"space-{tag}",
        "--pool-size-mb", "4096", "--disk-overcommit", "100", "--log-level", "warning", "--net-table", f"space-{tag}",
        "--net-link-prefix", f"{tag}-", "--net-pool", f"10.177.{20 + os.getpid() % 200}.0/24", "--slots-max=64",
        "--uid-base=3900000000"]
log = open(os.path.join(state, "spaced.log"), "wb")
p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
try:
    for _ in range(3000):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2); c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        assert p.poll() is None, open(log.name).read()[-2000:]
        time.sleep(0.1)
    key = open(os.path.join(state, "s", "admin.key")).read().strip()
    api = Api(f"http://127.0.0.1:{port}", key)
    api.call("POST", "/v1/credentials", {"name": "bench", "value": "sk-bench-x", "hosts": ["api.example.com"]})
    plain = api.call("POST", "/v1/sandboxes", {"memory_mb": 64})["id"]
    cred = api.call("POST", "/v1/sandboxes", {"memory_mb": 64, "credentials": ["bench"]})["id"]
    res = {"none": [], "one credential": []}
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    for i in range(n):
        for name, sid in (("none", plain), ("one credential", cred)) if i % 2 == 0 else (("one credential", cred), ("none", plain)):
            t, v = api.timed("POST", f"/v1/sandboxes/{sid}/branch", {"count": 10})
            res[name].append(t * 1000)
            for k in v["sandboxes"]:
                api.call("DELETE", f"/v1/sandboxes/{k['id']}")
    for name, xs in res.items():
        print(f"branch x10, parent with {name}: p50 {pct(xs, 50):.1f} ms, p90 {pct(xs, 90):.1f} ms (n={len(xs)})")
    print("load average:", open("/proc/loadavg").read().split()[:3])
    for sid in (plain, cred):
        api.call("DELETE", f"/v1/sandboxes/{sid}")
finally:
    p.send_signal(signal.SIGTERM); p.wait(120); log.close()
    shutil.rmtree(state, ignore_errors=True)
    for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        try:
            os.rmdir(os.path.join(base, f"space-{tag}"))
        except OSError:
            pass
