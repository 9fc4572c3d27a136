#!/usr/bin/env python3
"""Egress gateway benchmark: connection set-up and 100 MiB download through
the gateway beside a direct (routed) connection, in the same run. Not a test:
it reports p50/p90 and ratios. Connection set-up is also measured for a host
the sandbox holds a credential for (TLS intercepted with the sandbox's CA,
the upstream verified, the header added), transparent and through CONNECT,
and for a client offering h2 and http/1.1 (ALPN): its handshake waits for
the upstream's choice (here http/1.1: the upstream is the Python server).

Topology (network namespaces made and removed here, like
tests/e2e/test_gateway.py): `sb` (the client, a sandbox's view), `gw` (the
host: the gateway process) and `srv` (test upstreams). The sandbox link and
the host firewall are production's: tests/sandbox-link makes them in `gw`
with the ns runtime's calls (veth_create and veth_configure_*, then
firewall_setup and firewall_add_link: the same nftables table, redirects and
source validation as a worker's). The direct path is the same client and
server over a second veth pair of the same kind (outside the table's link
prefix; `sb` routes only ports 8080/8443 over it, forwarded in `gw` for those
ports only), so both paths cross two veth links; the gateway path goes
through its transparent port (HTTP: Host checked; TLS: SNI checked, then
spliced) or its explicit proxy (CONNECT).

Downloads: --mib MiB with curl from `openssl s_server -WWW` (C, so the server
is not what limits) on SRV2, over HTTPS: direct (port 8443, forwarded), the
transparent tunnel (443: SNI checked, spliced) and a CONNECT tunnel through
the explicit proxy; and over plain HTTP from the Python server (direct 8080 /
transparent 80). Like with like: the same curl in `sb`, the same file, key and
certificate, veth links of the same kind (same MTU and offloads); direct is ONE
TCP connection routed through `gw`, the tunnel is two (sb-gw, gw-srv2) with
the gateway splicing between them, so the tunnel's cost is the second TCP
connection plus the gateway. One warm-up download per path first (the file
into the page cache), then interleaved runs, the order reversed every other
round; p50/p90 of MiB/s per path, and the CPU time (p50) of curl (rusage),
the serving s_server and the gateway (the scheduler's run time of their
threads, /proc/PID/task/*/schedstat: ns, where utime + stime counts 10 ms
ticks) per download: on a shared machine the MiB/s follow the load, the CPU
per download much less. Two more columns
are machine-wide per download (softirq; all but idle and iowait): kernel work
no process of the benchmark is charged for, and whatever else runs.

    python3 bench/gateway.py [--build-dir build-release] [-n 300] [--mib 100] [--runs 5]

Needs root. Uses build-release/tests/{gateway-run,sandbox-link,cred-seal} (meson setup build-release
--buildtype=release && ninja -C build-release), else build/."""
import argparse, json, os, secrets, shutil, statistics, subprocess, sys, tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVERS = os.path.join(REPO, "tests", "e2e", "gateway_servers.py")
PY = "/usr/bin/python3"
HOST_END, SB_IP, SRV_GW, SRV = "10.231.0.0", "10.231.0.1", "192.168.231.1", "192.168.231.2"
SRV2_GW, SRV2 = "192.168.232.1", "192.168.232.2"     # netns srv2, openssl s_server: the HTTPS downloads
SB_LINK = "spb-0"                                   # the sandbox link (host end), in the table's link prefix
DIRECT_GW, DIRECT_SB = "10.232.0.0", "10.232.0.1"     # the direct path's own link

CLIENT = r"""
import socket, ssl, sys, time, json
n = int(sys.argv[1]); ca = sys.argv[2]; sbca = sys.argv[3]
ip = socket.gethostbyname("allowed.test")          # through the gateway's DNS
cip = socket.gethostbyname("cred.test")
ctx = ssl.create_default_context(cafile=ca)
sbctx = ssl.create_default_context(cafile=sbca)   # the sandbox's CA: intercepted hosts
h2ctx = ssl.create_default_context(cafile=sbca)   # a client offering h2 (curl, gRPC): waits for the upstream's ALPN
h2ctx.set_alpn_protocols(["h2", "http/1.1"])
REQ = b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"

def fetch(addr, port, host, tls, proxy=False, c=None):
    t = time.perf_counter()
    if proxy:
        s = socket.create_connection(("10.231.0.0", 10080))
        s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(4096)
        assert buf.startswith(b"HTTP/1.1 200"), buf
    else:
        s = socket.create_connection((addr, port))
    if tls:
        s = (c or ctx).wrap_socket(s, server_hostname=host)
    s.sendall(REQ % host.encode())
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    s.close()
    assert out.startswith(b"HTTP/1.1 200"), out[:100]
    return (time.perf_counter() - t) * 1000.0

paths = {
    "http direct": lambda: fetch("192.168.231.2", 8080, "allowed.test", False),
    "http gateway": lambda: fetch(ip, 80, "allowed.test", False),
    "tls direct": lambda: fetch("192.168.231.2", 8443, "allowed.test", True),
    "tls gateway": lambda: fetch(ip, 443, "allowed.test", True),
    "tls proxy CONNECT": lambda: fetch(None, 443, "allowed.test", True, proxy=True),
    "tls credential": lambda: fetch(cip, 443, "cred.test", True, c=sbctx),
    "tls credential CONNECT": lambda: fetch(None, 443, "cred.test", True, proxy=True, c=sbctx),
    "tls credential h2 offer": lambda: fetch(cip, 443, "cred.test", True, c=h2ctx),
}
res = {k: [] for k in paths}
for k, f in paths.items():     # warm up
    f()
for i in range(n):             # interleaved: the same noise for every path
    for k, f in paths.items():
        res[k].append(f())
print(json.dumps(res))
"""


def sh(*a, **kw):
    return subprocess.run(list(a), check=True, capture_output=True, text=True, **kw)


def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def cpu_ms(pid):
    """CPU time of a process so far (every thread), ms: the scheduler's nanosecond run time
    (/proc/PID/task/*/schedstat), not utime + stime (whole clock ticks, 10 ms here)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:     # a thread that just ended
            pass
    return total / 1e6


def cpu_stat_ms():
    """Machine-wide CPU time so far, ms: (softirq, everything but idle and iowait). Work that runs in
    softirq or kworkers (an in-kernel relay's) is charged to no process of the benchmark; on a
    shared machine these include everything else that runs."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    tick = 1000.0 / os.sysconf("SC_CLK_TCK")
    return v[6] * tick, (sum(v[:8]) - v[3] - v[4]) * tick


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=None)
    ap.add_argument("-n", type=int, default=300, help="connections per path")
    ap.add_argument("--mib", type=int, default=100, help="download size")
    ap.add_argument("--runs", type=int, default=5, help="downloads per path (p50/p90 reported)")
    a = ap.parse_args()
    bd = a.build_dir or next(d for d in ("build-release", "build") if os.path.exists(os.path.join(REPO, d, "tests", "gateway-run")))
    gwrun = os.path.join(REPO, bd, "tests", "gateway-run")
    tag = secrets.token_hex(3)
    ns = {k: f"spgwb-{tag}-{k}" for k in ("sb", "gw", "srv", "srv2")}
    etc = f"/etc/netns/{ns['sb']}"
    tmp = tempfile.mkdtemp(prefix="space-bench-gw-")
    procs = []
    try:
        for n in ns.values():
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        # the sandbox link and its firewall as the ns runtime makes them (src/worker/worker-net.c's calls,
        # tests/gateway/sandbox-link.c): production's nftables table, not a copy of its rules
        sh("ip", "netns", "exec", ns["gw"], os.path.join(REPO, bd, "tests", "sandbox-link"), "spgwb", SB_LINK,
           f"/run/netns/{ns['sb']}", HOST_END, SB_IP, "10053", "10080", "10081", "10082")
        # the direct path: a second veth pair of the same kind, outside the table's link prefix, that
        # the sandbox uses only for the direct ports (policy routing by destination port)
        sh("ip", "-n", ns["gw"], "link", "add", "vdirect", "type", "veth", "peer", "name", "eth1", "netns", ns["sb"])
        sh("ip", "-n", ns["gw"], "addr", "add", f"{DIRECT_GW}/31", "dev", "vdirect")
        sh("ip", "-n", ns["sb"], "addr", "add", f"{DIRECT_SB}/31", "dev", "eth1")
        sh("ip", "-n", ns["gw"], "link", "add", "vsrv", "type", "veth", "peer", "name", "eth0", "netns", ns["srv"])
        sh("ip", "-n", ns["gw"], "addr", "add", f"{SRV_GW}/24", "dev", "vsrv")
        sh("ip", "-n", ns["srv"], "addr", "add", f"{SRV}/24", "dev", "eth0")
        sh("ip", "-n", ns["gw"], "link", "add", "vsrv2", "type", "veth", "peer", "name", "eth0", "netns", ns["srv2"])
        sh("ip", "-n", ns["gw"], "addr", "add", f"{SRV2_GW}/24", "dev", "vsrv2")
        sh("ip", "-n", ns["srv2"], "addr", "add", f"{SRV2}/24", "dev", "eth0")
        for n, dev in ((ns["gw"], "vsrv2"), (ns["srv2"], "eth0"), (ns["gw"], "vsrv"), (ns["srv"], "eth0"),
                       (ns["gw"], "vdirect"), (ns["sb"], "eth1")):
            sh("ip", "-n", n, "link", "set", dev, "up")
        sh("ip", "-n", ns["srv2"], "route", "add", "default", "via", SRV2_GW)
        sh("ip", "-n", ns["srv"], "route", "add", f"{HOST_END}/31", "via", SRV_GW)
        sh("ip", "-n", ns["srv"], "route", "add", f"{DIRECT_GW}/31", "via", SRV_GW)
        sh("ip", "-n", ns["sb"], "route", "add", "default", "via", DIRECT_GW, "dev", "eth1", "src", DIRECT_SB,
           "table", "100")
        for port in ("8080", "8443"):
            sh("ip", "-n", ns["sb"], "rule", "add", "ipproto", "tcp", "dport", port, "lookup", "100")
        sh("ip", "netns", "exec", ns["gw"], "sysctl", "-qw", "net.ipv4.ip_forward=1")
        rules = f"""
table ip spgwb-direct {{
  chain forwarded {{
    type filter hook forward priority filter; policy drop;
    ct state established,related accept
    iifname "vdirect" ip saddr {DIRECT_SB} ip daddr {{ {SRV}, {SRV2} }} tcp dport {{ 8080, 8443 }} accept
  }}
}}"""
        sh("ip", "netns", "exec", ns["gw"], "nft", "-f", "-", input=rules)
        os.makedirs(etc, exist_ok=True)
        with open(f"{etc}/resolv.conf", "w") as f:
            f.write(f"nameserver {HOST_END}\n")
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=bench CA",
           "-keyout", f"{tmp}/ca.key", "-out", f"{tmp}/ca.pem")
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=allowed.test", "-keyout", f"{tmp}/srv.key",
           "-out", f"{tmp}/srv.csr")
        with open(f"{tmp}/ext", "w") as f:
            f.write("subjectAltName=DNS:allowed.test,DNS:files.test,DNS:cred.test\n")
        sh("openssl", "x509", "-req", "-in", f"{tmp}/srv.csr", "-CA", f"{tmp}/ca.pem", "-CAkey", f"{tmp}/ca.key",
           "-CAcreateserial", "-days", "2", "-extfile", f"{tmp}/ext", "-out", f"{tmp}/srv.pem")
        # the sandbox's CA (EC P-256, as the worker makes it) and a sealed credential for cred.test
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
           "-subj", "/CN=space sandbox bench", "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
           "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", f"{tmp}/sbca.key", "-out", f"{tmp}/sbca.pem")
        os.makedirs(f"{tmp}/state", mode=0o700)
        sealed = json.loads(sh(os.path.join(REPO, bd, "tests", "cred-seal"), f"{tmp}/state", "cr_bench", "t", "bench",
                               input="sk-bench-" + secrets.token_hex(16)).stdout)
        zone = {"_listen": [SRV], "allowed.test": [SRV], "files.test": [SRV2], "cred.test": [SRV]}
        srv = subprocess.Popen(["ip", "netns", "exec", ns["srv"], PY, SERVERS, "-", f"{tmp}/srv.pem", f"{tmp}/srv.key",
                                json.dumps(zone)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(srv)
        assert srv.stdout.readline().strip() == "ready"
        size = a.mib * 1024 * 1024
        www = os.path.join(tmp, "www")
        os.makedirs(www)
        with open(os.path.join(www, "big"), "wb") as f:
            f.truncate(size)
        sserver = {}
        for port in (443, 8443):
            p = subprocess.Popen(["ip", "netns", "exec", ns["srv2"], "openssl", "s_server", "-quiet", "-WWW",
                                  "-accept", f"{SRV2}:{port}", "-cert", f"{tmp}/srv.pem", "-key", f"{tmp}/srv.key"],
                                 cwd=www, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(p)
            sserver[port] = p.pid      # `ip netns exec` execs: the server's own pid
        import socket as so
        ctl, child = so.socketpair()
        gw = subprocess.Popen(["ip", "netns", "exec", ns["gw"], gwrun, "--upstream", f"{SRV}:53", "--pool",
                               "10.231.0.0/16", "--control-fd", str(child.fileno()), "--events-per-sec", "5",
                               "--state-dir", f"{tmp}/state", "--ca-file", f"{tmp}/ca.pem"],
                              pass_fds=(child.fileno(),))
        child.close()
        procs.append(gw)
        ctl.sendall((json.dumps({"seq": 1, "op": "register", "id": "bench", "tenant": "t", "sandbox_ip": SB_IP,
                                 "host_ip": HOST_END, "policy": {"allow": ["allowed.test", "files.test", "cred.test"]}}) + "\n").encode())
        reply = b""
        while b"\"seq\":1" not in reply:
            reply += ctl.recv(65536)
        assert b"\"ok\":true" in reply, reply
        ctl.sendall((json.dumps({"seq": 2, "op": "credentials", "id": "bench", "ca_cert": open(f"{tmp}/sbca.pem").read(),
                                 "ca_key": open(f"{tmp}/sbca.key").read(),
                                 "creds": [{"id": "cr_bench", "tenant": "t", "name": "bench", "hosts": ["cred.test"],
                                            "apply": "header", "header_name": "Authorization",
                                            "header_format": "Bearer {value}", **sealed}]}) + "\n").encode())
        while b"\"seq\":2" not in reply:
            reply += ctl.recv(65536)
        assert reply.count(b"\"ok\":true") == 2, reply

        r = subprocess.run(["ip", "netns", "exec", ns["sb"], PY, "-c", CLIENT, str(a.n), f"{tmp}/ca.pem",
                            f"{tmp}/sbca.pem"],
                           capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            sys.exit(r.stderr)
        res = json.loads(r.stdout)
        print(f"gateway benchmark ({bd}, {a.n} connections per path, interleaved; ms for connect + request + "
              f"response + close)")
        print(f"{'path':24} {'p50':>8} {'p90':>8}")
        for k, xs in res.items():
            print(f"{k:24} {pct(xs, 50):8.3f} {pct(xs, 90):8.3f}")
        for proto in ("http", "tls"):
            d, g = pct(res[f"{proto} direct"], 50), pct(res[f"{proto} gateway"], 50)
            print(f"added by the gateway ({proto}, p50): {g - d:+.3f} ms")
        d, g = pct(res["tls direct"], 50), pct(res["tls proxy CONNECT"], 50)
        print(f"added by the explicit proxy (CONNECT + tls, p50): {g - d:+.3f} ms")
        for k in ("tls credential", "tls credential CONNECT", "tls credential h2 offer"):
            print(f"added by interception with a credential ({k}, p50): {pct(res[k], 50) - d:+.3f} ms "
                  f"(tunnel: {pct(res['tls gateway'], 50) - d:+.3f} ms)")

        ca = f"{tmp}/ca.pem"
        curl = ["ip", "netns", "exec", ns["sb"], "curl", "-sS", "--cacert", ca, "-o", "/dev/null", "-w",
                "%{speed_download} %{size_download}"]
        paths = {
            "http direct": (None, ["--noproxy", "*", f"http://{SRV}:8080/big/{size}"]),
            "http gateway": (None, ["--noproxy", "*", f"http://allowed.test/big/{size}"]),
            "https direct": (8443, ["--noproxy", "*", "--resolve", f"files.test:8443:{SRV2}", "https://files.test:8443/big"]),
            "https tunnel": (443, ["--noproxy", "*", "https://files.test/big"]),
            "https CONNECT": (443, ["-x", f"http://{HOST_END}:10080", "https://files.test/big"]),
        }

        def download(name):
            port, args = paths[name]
            before = (cpu_ms(sserver[port]) if port else 0.0, cpu_ms(gw.pid), cpu_stat_ms())
            p = subprocess.Popen(curl + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            _, status, ru = os.wait4(p.pid, 0)
            out, err = p.communicate()
            assert status == 0, (name, err)
            out = out.split()
            assert int(float(out[1])) == size, (name, out)
            si, busy = cpu_stat_ms()
            return (float(out[0]) / (1024 * 1024), (ru.ru_utime + ru.ru_stime) * 1000.0,
                    cpu_ms(sserver[port]) - before[0] if port else None, cpu_ms(gw.pid) - before[1],
                    si - before[2][0], busy - before[2][1])

        for name in paths:               # warm up: the file in the page cache, both servers and paths once
            download(name)
        speeds = {k: [] for k in paths}
        load0 = open("/proc/loadavg").read().split()[0]
        for i in range(a.runs):          # interleaved, the order reversed every other round: the same noise for every path
            for name in (list(paths) if i % 2 == 0 else list(reversed(paths))):
                speeds[name].append(download(name))
        load1 = open("/proc/loadavg").read().split()[0]
        print(f"{a.mib} MiB downloads ({a.runs} runs per path, interleaved; load average {load0} -> {load1}, "
              f"{os.cpu_count()} CPUs), MiB/s and CPU ms per download (p50):")
        print(f"{'path':22} {'p50':>8} {'p90':>8} {'curl':>8} {'s_server':>8} {'gateway':>8} {'softirq':>8} "
              f"{'all CPU':>8}   (softirq, all CPU: machine-wide, whatever runs)")
        med = lambda xs: statistics.median(xs)
        for k, xs in speeds.items():
            srv_ms = f"{med([x[2] for x in xs]):8.0f}" if xs[0][2] is not None else f"{'-':>8}"
            print(f"{k:22} {pct([x[0] for x in xs], 50):8.0f} {pct([x[0] for x in xs], 90):8.0f} "
                  f"{med([x[1] for x in xs]):8.0f} {srv_ms} {med([x[3] for x in xs]):8.0f} "
                  f"{med([x[4] for x in xs]):8.0f} {med([x[5] for x in xs]):8.0f}")
        for proto, gws in (("http", ("http gateway",)), ("https", ("https tunnel", "https CONNECT"))):
            d = pct([x[0] for x in speeds[f"{proto} direct"]], 50)
            for g in gws:
                per_round = " ".join(f"{x[0] / y[0]:.2f}" for x, y in zip(speeds[g], speeds[f"{proto} direct"]))
                print(f"{g} / {proto} direct (p50): {pct([x[0] for x in speeds[g]], 50) / d:.2f}   "
                      f"(per round: {per_round})")
    finally:
        for p in procs:
            if p.stdin:
                p.stdin.close()
            p.kill()
            p.wait()
        for n in ns.values():
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        shutil.rmtree(etc, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
