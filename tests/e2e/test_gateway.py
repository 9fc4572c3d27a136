# SPDX-License-Identifier: MIT
"""The egress gateway, standalone, with real clients and servers.

Three network namespaces the test creates: `sb` plays a sandbox, `gw` the
host (the gateway process), `srv` holds the test upstreams (DNS, HTTP, HTTPS
with the test's own CA, TCP echo) on 192.168.231.2 and .3. Clients are curl
and python3 run inside `sb`. Nothing leaves these namespaces.

The sandbox's link and the host firewall are production's, not a copy:
build/tests/sandbox-link (tests/gateway/sandbox-link.c) makes them with the
calls the ns runtime makes (src/worker/worker-net.c, src/net/firewall.c): a
veth /31 from `gw` to `sb`'s eth0 (default route via the host end, IPv6 off
in the sandbox) and the inet nftables table that redirects the sandbox's DNS
and every other TCP connection and UDP datagram to the gateway's ports,
accepts on the host only the gateway's ports from the link's own address
(source-address validation) and forwards nothing. resolv.conf in `sb` names
the host end. A second gateway on other ports gets a second sandbox with its
own link and table (other_sandbox), as a second worker would."""

import contextlib
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import threading
import time

import pytest

from e2e_host import netns_exec

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SPACE_BUILD_DIR", os.path.join(REPO, "build"))
GATEWAY_RUN = os.path.join(BUILD, "tests", "gateway-run")
SANDBOX_LINK = os.path.join(BUILD, "tests", "sandbox-link")
SERVERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gateway_servers.py")
PY = "/usr/bin/python3"

HOST_END, SB_IP = "10.231.0.0", "10.231.0.1"
# the link of other_sandbox(), for a second gateway
OTHER_HOST_END, OTHER_SB_IP = "10.231.0.2", "10.231.0.3"
SRV_A, SRV_B, SRV_GW = "192.168.231.2", "192.168.231.3", "192.168.231.1"
ZONE = {
    "_listen": [SRV_A],
    "allowed.test": [SRV_A],
    "www.allowed.test": [SRV_A],
    "other.test": [SRV_B],
    "rebind.test": ["127.0.0.1"],
    "meta.test": ["169.254.169.254"],
    "pool.test": ["10.231.0.5"],
    "mixed.test": ["127.0.0.1", SRV_B],
    "udp.test": [SRV_A],     # resolved only by the UDP test
    "udp2.test": [SRV_B],    # never resolved
}
POLICY = {"allow": ["allowed.test", "*.allowed.test", {"host": "allowed.test", "ports": [2222]},
                    "rebind.test", "meta.test", "pool.test", "mixed.test"],
          "deny": ["blocked.allowed.test"]}


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60, **kw)


def sandbox_link(ns_gw, ns_sb, table, link, host_end, sb_ip, ports=(10053, 10080, 10081, 10082)):
    """The sandbox's link and the host firewall exactly as production makes
    them: tests/sandbox-link (tests/gateway/sandbox-link.c) calls what the ns
    runtime calls (src/worker/worker-net.c: veth_create, veth_configure_host,
    veth_configure_peer_here, firewall_setup, firewall_add_link), in `ns_gw`:
    the veth `link` there, its peer eth0 in `ns_sb` (host_end/31 and
    sb_ip/31, default route, lo up, IPv6 off in the sandbox) and the inet
    table `table` for the link prefix (up to the last '-' of `link`) with the
    gateway's ports `ports` (DNS, proxy, transparent, first UDP port). Both
    stay in `ns_gw`: deleting the namespaces (or `drop_table`) removes them."""
    r = subprocess.run([*netns_exec(ns_gw), SANDBOX_LINK, table, link, f"/run/netns/{ns_sb}", host_end,
                        sb_ip, *map(str, ports)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def drop_table(ns_gw, table):
    subprocess.run([*netns_exec(ns_gw), "nft", "delete", "table", "inet", table], capture_output=True)


@contextlib.contextmanager
def other_sandbox(net, ports):
    """A second sandbox for a second gateway listening on `ports` in `gw`: as
    production has it for a second worker, its own namespace, link (another
    link prefix) and table, made by sandbox_link; OTHER_SB_IP behind
    OTHER_HOST_END. Yields `net` with this sandbox as `sb` and the second
    gateway's port options as `gateway_ports`; the table and the
    namespace (with the link) go when the block ends, however it ends."""
    tag = secrets.token_hex(3)
    ns_gw, ns_sb, table = net["ns"]["gw"], f"spgw-{tag}-sbx", f"spgwx-{tag}"
    try:
        sh("ip", "netns", "add", ns_sb)
        sandbox_link(ns_gw, ns_sb, table, f"vsx-{tag}", OTHER_HOST_END, OTHER_SB_IP, ports)
        dns, proxy, transparent, udp = ports
        yield dict(net, ns=dict(net["ns"], sb=ns_sb),
                   gateway_ports=["--dns-port", str(dns), "--proxy-port", str(proxy),
                                  "--transparent-port", str(transparent), "--udp-port", str(udp)])
    finally:
        drop_table(ns_gw, table)
        subprocess.run(["ip", "netns", "del", ns_sb], capture_output=True)


class Gateway:
    """The gateway process and its control socket (fd 3)."""

    def __init__(self, ns, upstream, extra=(), env=None):
        self.sock, child = socket.socketpair()
        cfd = child.fileno()
        self.proc = subprocess.Popen([*netns_exec(ns), GATEWAY_RUN, "--upstream", upstream,
                                      "--pool", "10.231.0.0/16", "--control-fd", str(cfd), *extra],
                                     pass_fds=(cfd,), stderr=subprocess.PIPE, env=env)
        child.close()
        self.seq = 0
        self.events = []
        self.replies = {}
        self.cv = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        buf = b""
        while True:
            try:
                d = self.sock.recv(65536)
            except OSError:
                return
            if not d:
                return
            buf += d
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                v = json.loads(line)
                with self.cv:
                    if "event" in v:
                        self.events.append(v)
                    else:
                        self.replies[v["seq"]] = v
                    self.cv.notify_all()

    def request(self, op, **kw):
        self.seq += 1
        seq = self.seq
        self.sock.sendall((json.dumps({"seq": seq, "op": op, **kw}) + "\n").encode())
        with self.cv:
            assert self.cv.wait_for(lambda: seq in self.replies, timeout=10), "no reply from the gateway"
            return self.replies.pop(seq)

    def wait_event(self, pred, timeout=10):
        with self.cv:
            ok = self.cv.wait_for(lambda: any(pred(e) for e in self.events), timeout=timeout)
            return ok

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)   # EOF for the gateway even while the reader is in recv()
        except OSError:
            pass
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        err = self.proc.stderr.read().decode(errors="replace")
        self.proc.stderr.close()
        return self.proc.returncode, err


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    for p in (GATEWAY_RUN, SANDBOX_LINK):
        if not os.path.exists(p):
            pytest.skip(f"{p} missing")
    tag = secrets.token_hex(3)
    ns = {k: f"spgw-{tag}-{k}" for k in ("sb", "gw", "srv")}
    tmp = tmp_path_factory.mktemp("gw")
    etc = f"/etc/netns/{ns['sb']}"
    procs = []
    gw = None
    try:
        for n in ns.values():
            sh("ip", "netns", "add", n)
        for n in ns.values():
            sh("ip", "-n", n, "link", "set", "lo", "up")
        # the sandbox's link and the host firewall: production's (sandbox_link)
        sandbox_link(ns["gw"], ns["sb"], f"spgw-{tag}", f"vsb-{tag}", HOST_END, SB_IP)
        sh("ip", "-n", ns["gw"], "link", "add", "vsrv", "type", "veth", "peer", "name", "eth0", "netns", ns["srv"])
        sh("ip", "-n", ns["gw"], "addr", "add", f"{SRV_GW}/24", "dev", "vsrv")
        sh("ip", "-n", ns["srv"], "addr", "add", f"{SRV_A}/24", "dev", "eth0")
        sh("ip", "-n", ns["srv"], "addr", "add", f"{SRV_B}/24", "dev", "eth0")
        for n, dev in ((ns["gw"], "vsrv"), (ns["srv"], "eth0")):
            sh("ip", "-n", n, "link", "set", dev, "up")
        os.makedirs(etc, exist_ok=True)
        with open(f"{etc}/resolv.conf", "w") as f:
            f.write(f"nameserver {HOST_END}\n")
        # the upstreams' CA and certificate
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=space test CA",
           "-keyout", f"{tmp}/ca.key", "-out", f"{tmp}/ca.pem")
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=allowed.test",
           "-keyout", f"{tmp}/srv.key", "-out", f"{tmp}/srv.csr")
        with open(f"{tmp}/ext", "w") as f:
            f.write("subjectAltName=DNS:allowed.test,DNS:www.allowed.test,DNS:other.test\n")
        sh("openssl", "x509", "-req", "-in", f"{tmp}/srv.csr", "-CA", f"{tmp}/ca.pem", "-CAkey", f"{tmp}/ca.key",
           "-CAcreateserial", "-days", "2", "-extfile", f"{tmp}/ext", "-out", f"{tmp}/srv.pem")
        log = f"{tmp}/upstream.log"
        open(log, "w").close()
        srv = subprocess.Popen([*netns_exec(ns["srv"]), PY, SERVERS, log, f"{tmp}/srv.pem",
                                f"{tmp}/srv.key", json.dumps(ZONE)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(srv)
        assert srv.stdout.readline().strip() == "ready"
        # a service on the host's loopback that no sandbox may reach
        lo = subprocess.Popen([*netns_exec(ns["gw"]), PY, "-c",
                               "import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                               "s.bind(('127.0.0.1',5555));s.listen();print('ready',flush=True)\n"
                               "s.settimeout(None)\nwhile True:\n c,_=s.accept();print('accepted',flush=True);c.close()"],
                              stdout=subprocess.PIPE, text=True)
        procs.append(lo)
        assert lo.stdout.readline().strip() == "ready"
        gw = Gateway(ns["gw"], f"{SRV_A}:53", ["--events-per-sec", "1000", "--udp-port", "10082"])
        r = gw.request("register", id="sb1", tenant="t1", sandbox_ip=SB_IP, host_ip=HOST_END, policy=POLICY)
        assert r["ok"], r
        yield {"ns": ns, "gw": gw, "tmp": str(tmp), "log": log, "lo": lo, "table": f"spgw-{tag}", "link": f"vsb-{tag}"}
    finally:
        rc, err = gw.close() if gw else (0, "")
        for p in procs:
            if p.stdin:
                p.stdin.close()
            p.kill()
            p.wait()
        for n in ns.values():
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        shutil.rmtree(etc, ignore_errors=True)
    # the gateway exits cleanly on EOF of its control socket, sanitizers silent
    assert rc == 0 and "Sanitizer" not in err and "runtime error" not in err, err


def in_sb(net, *args, timeout=20):
    return subprocess.run([*netns_exec(net["ns"]["sb"]), *args], capture_output=True, text=True,
                          timeout=timeout)


def curl(net, *args):
    noproxy = () if "-x" in args else ("--noproxy", "*")
    r = in_sb(net, "curl", "-sS", "--max-time", "8", *noproxy, "--cacert", f"{net['tmp']}/ca.pem", *args)
    return r.returncode, r.stdout, r.stderr


def upstream_log(net):
    with open(net["log"]) as f:
        return [json.loads(l) for l in f if l.strip()]


def py_in_sb(net, code, timeout=20):
    r = in_sb(net, PY, "-c", code, timeout=timeout)
    return r.returncode, r.stdout.strip(), r.stderr.strip()


DNS_QUERY = r"""
import socket, struct, sys, random
name, qtype, tcp = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "tcp"
qid = random.randrange(65536)
q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
for l in name.split("."):
    q += bytes([len(l)]) + l.encode()
q += b"\0" + struct.pack("!HH", qtype, 1)
if tcp:
    s = socket.create_connection(("10.231.0.0", 53), timeout=5)
    s.sendall(struct.pack("!H", len(q)) + q)
    n = struct.unpack("!H", s.recv(2))[0]
    a = b""
    while len(a) < n:
        a += s.recv(n - len(a))
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
    s.sendto(q, ("10.231.0.0", 53)); a = s.recv(4096)
assert struct.unpack("!H", a[:2])[0] == qid
rcode = a[3] & 15; an = struct.unpack("!H", a[6:8])[0]
ips = []
off = 12 + len(q) - 12
for i in range(an):
    off += 2; t, c, ttl, rl = struct.unpack("!HHIH", a[off:off+10]); off += 10
    if t == 1: ips.append(socket.inet_ntoa(a[off:off+4]))
    off += rl
print(rcode, ",".join(ips))
"""


def dns(net, name, qtype=1, tcp=False):
    rc, out, err = py_in_sb(net, DNS_QUERY.replace("sys.argv[1]", repr(name)).replace("int(sys.argv[2])", str(qtype))
                            .replace('sys.argv[3] == "tcp"', str(tcp)))
    assert rc == 0, err
    rcode, ips = out.split(" ") if " " in out else (out, "")
    return int(rcode), [i for i in ips.split(",") if i]


def set_policy(net, policy):
    r = net["gw"].request("policy", id="sb1", policy=policy)
    assert r["ok"], r


# ---- DNS ----

def test_dns_allowed_names_resolve_udp_and_tcp(net):
    assert dns(net, "allowed.test") == (0, [SRV_A])
    assert dns(net, "WWW.Allowed.Test") == (0, [SRV_A])
    assert dns(net, "allowed.test", tcp=True) == (0, [SRV_A])
    rc, out, _ = py_in_sb(net, "import socket; print(socket.gethostbyname('allowed.test'))")
    assert (rc, out) == (0, SRV_A)


def test_dns_denied_names_nxdomain_and_never_asked_upstream(net):
    before = len(upstream_log(net))
    assert dns(net, "other.test") == (3, [])
    assert dns(net, "blocked.allowed.test") == (3, [])   # the deny list wins over *.allowed.test
    assert dns(net, "secret-data-1234.other.test", tcp=True) == (3, [])
    asked = [e["name"] for e in upstream_log(net)[before:] if e["kind"] == "dns"]
    assert asked == []
    assert net["gw"].wait_event(lambda e: e["event"] == "network.deny" and e["data"].get("host") == "other.test")


def test_dns_txt_any_and_other_types_refused_no_exfiltration(net):
    before = len(upstream_log(net))
    for qtype in (16, 255, 15, 33, 65, 12):   # TXT, ANY, MX, SRV, HTTPS, PTR
        assert dns(net, "exfil-4142434445.allowed.test", qtype=qtype)[0] == 5
        assert dns(net, "exfil-4142434445.allowed.test", qtype=qtype, tcp=True)[0] == 5
    assert [e for e in upstream_log(net)[before:] if e["kind"] == "dns"] == []
    assert net["gw"].wait_event(lambda e: "query type TXT refused" in e["reason"])


def test_dns_tcp_pipelined_queries_all_answered(net):
    code = r"""
import socket, struct
def q(i, name):
    b = struct.pack("!HHHHHH", i, 0x100, 1, 0, 0, 0)
    for l in name.split("."):
        b += bytes([len(l)]) + l.encode()
    b += b"\0" + struct.pack("!HH", 1, 1)
    return struct.pack("!H", len(b)) + b
s = socket.create_connection(("10.231.0.0", 53), timeout=5)
s.sendall(q(1, "allowed.test") + q(2, "other.test") + q(3, "www.allowed.test"))
got = []
buf = b""
while len(got) < 3:
    buf += s.recv(4096)
    while len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0]:
        n = struct.unpack("!H", buf[:2])[0]
        m = buf[2:2 + n]; buf = buf[2 + n:]
        got.append((struct.unpack("!H", m[:2])[0], m[3] & 15))
print(sorted(got))
"""
    rc, out, err = py_in_sb(net, code)
    assert rc == 0, err
    assert out == "[(1, 0), (2, 3), (3, 0)]"


def test_dns_aaaa_empty_for_allowed(net):
    assert dns(net, "allowed.test", qtype=28) == (0, [])
    assert dns(net, "other.test", qtype=28) == (3, [])


def test_sandbox_has_no_ipv6(net):
    # production's link turns IPv6 off inside: no v6 address, not even link-local, and a v6 socket
    # reaches not even the link (a v4-mapped address is IPv4 on the wire, policed as such)
    r = in_sb(net, "ip", "-6", "-o", "addr")
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout
    rc, out, err = py_in_sb(net, "import socket\ns=socket.socket(socket.AF_INET6)\ns.settimeout(3)\n"
                                 "try:\n s.connect(('fe80::1', 80, 0, socket.if_nametoindex('eth0')))\n print('connected')\n"
                                 "except OSError as e:\n print(type(e).__name__, e.errno)")
    # refused on the spot (no source address: EADDRNOTAVAIL), not sent and left unanswered (a timeout)
    assert rc == 0 and out == "OSError 99", (out, err)


def test_dns_answers_with_refused_addresses_dropped(net):
    # allowed names whose upstream answer points inside: DNS rebinding
    assert dns(net, "rebind.test") == (3, [])
    assert dns(net, "meta.test") == (3, [])
    assert dns(net, "pool.test") == (3, [])
    assert dns(net, "mixed.test") == (0, [SRV_B])


def test_dns_from_another_source_ignored(net):
    # from the gw namespace itself (source 10.231.0.0, not the sandbox's): no answer
    code = DNS_QUERY.replace("sys.argv[1]", "'allowed.test'").replace("int(sys.argv[2])", "1") \
        .replace('sys.argv[3] == "tcp"', "False").replace('("10.231.0.0", 53)', '("10.231.0.0", 10053)')
    r = subprocess.run([*netns_exec(net["ns"]["gw"]), PY, "-c", code], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode != 0 and "timed out" in r.stderr


# ---- transparent HTTP / TLS ----

def test_transparent_http_allowed(net):
    rc, out, err = curl(net, "http://allowed.test/x")
    assert rc == 0, err
    assert out.startswith("hello host=allowed.test local=192.168.231.2:80")
    rc, out, err = curl(net, "-d", "payload", "http://www.allowed.test/post")
    assert rc == 0 and "body=7" in out, err


def test_transparent_https_allowed(net):
    rc, out, err = curl(net, "https://allowed.test/")
    assert rc == 0, err
    assert out.startswith("hello host=allowed.test local=192.168.231.2:443")


def test_forged_dns_refused(net):
    # the sandbox makes up an address for an allowed name (forged DNS)
    before = len(upstream_log(net))
    rc, out, _ = curl(net, "--resolve", f"allowed.test:80:{SRV_B}", "http://allowed.test/")
    assert "not resolved for allowed.test" in out
    rc, out, _ = curl(net, "--resolve", f"allowed.test:443:{SRV_B}", "https://allowed.test/")
    assert rc != 0
    # and a denied name with a made-up address
    rc, out, _ = curl(net, "--resolve", f"other.test:80:{SRV_B}", "http://other.test/")
    assert "403" not in out or "space gateway" in out
    assert "hello" not in out
    assert [e for e in upstream_log(net)[before:] if e["kind"] == "http"] == []


def test_direct_ip_refused(net):
    before = len(upstream_log(net))
    rc, out, _ = curl(net, f"http://{SRV_A}/")
    assert "space gateway" in out and "CIDR" in out
    rc, out, _ = curl(net, "-k", f"https://{SRV_A}/")
    assert rc != 0
    assert [e for e in upstream_log(net)[before:] if e["kind"] == "http"] == []


def test_direct_ip_allowed_by_a_cidr_rule_only(net):
    # the other half of "raw IPs are refused unless a CIDR rule allows them": a /32 rule lets
    # plain and TLS connections to that address through (transparent and through the proxy), an
    # address outside it stays refused, and a deny CIDR inside an allowing one wins
    set_policy(net, {"allow": [{"cidr": f"{SRV_A}/32", "ports": [80, 443]},
                               {"cidr": "192.168.231.0/24", "ports": [8080]}],
                     "deny": [{"cidr": f"{SRV_B}/32"}]})
    try:
        before = len(upstream_log(net))
        rc, out, err = curl(net, f"http://{SRV_A}/cidr-plain")
        assert rc == 0 and out.startswith(f"hello host={SRV_A}"), (out, err)
        rc, out, err = curl(net, "-k", f"https://{SRV_A}/cidr-tls")
        assert rc == 0 and out.startswith(f"hello host={SRV_A}"), (out, err)
        rc, out, err = curl(net, "-x", f"http://{HOST_END}:10080", f"http://{SRV_A}/cidr-proxy")
        assert rc == 0 and out.startswith(f"hello host={SRV_A}"), (out, err)
        rc, out, err = curl(net, f"http://{SRV_B}/cidr-outside")           # port 80: no rule names B
        assert "space gateway" in out, (out, err)
        rc, out, err = curl(net, "--connect-timeout", "3", f"http://{SRV_B}:8080/cidr-denied")  # the /24 allows, deny wins
        assert not out.startswith("hello"), (out, err)
        paths = [e["path"] for e in upstream_log(net)[before:] if e["kind"] == "http"]
        assert paths == ["/cidr-plain", "/cidr-tls", "/cidr-proxy"], paths
        # without the deny the same connection gets there: it was the deny that stopped it
        set_policy(net, {"allow": [{"cidr": "192.168.231.0/24", "ports": [8080]}]})
        rc, out, err = curl(net, f"http://{SRV_B}:8080/cidr-undenied")
        assert rc == 0 and out.startswith("hello"), (out, err)
    finally:
        set_policy(net, POLICY)


def test_host_header_fronting_refused(net):
    # connection to allowed.test's address, Host of a denied name
    before = len(upstream_log(net))
    rc, out, _ = curl(net, "-H", "Host: other.test", "http://allowed.test/")
    assert "space gateway" in out and "hello" not in out
    assert [e for e in upstream_log(net)[before:] if e["kind"] == "http"] == []


def test_sni_of_denied_name_to_allowed_address_refused(net):
    # SNI other.test (denied) sent to allowed.test's address
    before = len(upstream_log(net))
    rc, out, _ = curl(net, "--resolve", f"other.test:443:{SRV_A}", "https://other.test/")
    assert rc != 0
    assert [e for e in upstream_log(net)[before:] if e["kind"] == "http"] == []
    assert net["gw"].wait_event(lambda e: e["data"].get("kind") == "tls" and e["data"].get("host") == "other.test")


def test_other_ports_only_when_named(net):
    code = ("import socket\ns=socket.create_connection(('%s', %d), timeout=5)\n"
            "try:\n print(s.recv(100).decode().strip())\nexcept Exception as e:\n print('error', type(e).__name__)")
    dns(net, "allowed.test")
    rc, out, _ = py_in_sb(net, code % ("allowed.test", 2222))
    assert out == "echo-banner"
    rc, out, _ = py_in_sb(net, code % (SRV_B, 2222))       # no name, no CIDR rule
    assert out != "echo-banner"
    rc, out, _ = py_in_sb(net, code % ("allowed.test", 8080))  # no rule names 8080
    assert "hello" not in out and out != "echo-banner"


UDP_CLIENT = r"""
import socket, sys, json
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
out = []
for dst, port, text in json.loads(sys.argv[1]):
    try:
        s.sendto(text.encode(), (dst, port))
        d, peer = s.recvfrom(4096)
        out.append([d.decode(), peer[0], peer[1]])
    except OSError as e:
        out.append(["none", type(e).__name__, 0])
print(json.dumps(out))
"""


NONE = ["none", "TimeoutError", 0]


def udp(net, *sends):
    """Datagrams from one socket of the sandbox, each waiting for its reply: [text, peer, port] or ["none", ...]."""
    r = in_sb(net, PY, "-c", UDP_CLIENT, json.dumps(sends))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def udp_log(net, since):
    return [e for e in upstream_log(net)[since:] if e["kind"] == "udp"]


def udp_events(net, allow=None):
    return [e for e in net["gw"].events if e["data"].get("kind") == "udp" and
            (allow is None or e["data"]["verdict"] == ("allow" if allow else "deny"))]


def test_udp_without_a_rule_goes_nowhere(net):
    # no rule, no relay (and no forwarding): the datagram never reaches the test host; a deny event says so
    before = len(upstream_log(net))
    assert udp(net, [SRV_A, 5000, "no-rule"]) == [NONE]
    assert udp_log(net, before) == []
    assert net["gw"].wait_event(lambda e: e["data"].get("kind") == "udp" and e["data"].get("port") == 5000 and
                                e["data"]["verdict"] == "deny" and "no rule" in e["data"]["why"])


def test_udp_cidr_rule_relays_both_ways(net):
    set_policy(net, {"allow": [{"cidr": f"{SRV_A}/32", "proto": "udp", "ports": [5000, 5001]}]})
    try:
        before = len(upstream_log(net))
        # one socket, two destinations, twice each: replies come from the original destinations
        got = udp(net, [SRV_A, 5000, "a1"], [SRV_A, 5001, "b1"], [SRV_A, 5000, "a2"], [SRV_A, 5001, "b2"])
        assert got == [["echo:a1", SRV_A, 5000], ["echo:b1", SRV_A, 5001],
                       ["echo:a2", SRV_A, 5000], ["echo:b2", SRV_A, 5001]], got
        seen = udp_log(net, before)
        assert [e["data"] for e in seen] == ["a1", "b1", "a2", "b2"]
        assert all(e["peer"] == SRV_GW for e in seen), seen      # sent by the gateway, not forwarded
        # the rule names UDP, not TCP: the TCP echo on a named port is not reachable
        assert udp(net, [SRV_B, 5000, "other-host"]) == [NONE]
        assert net["gw"].wait_event(lambda e: e["data"].get("kind") == "udp" and e["data"]["verdict"] == "allow" and
                                    e["data"].get("ip") == SRV_A and e["data"].get("port") == 5000 and
                                    "udp" in e["data"]["why"])
    finally:
        set_policy(net, POLICY)


def test_udp_host_rule_bound_to_the_dns_answer(net):
    set_policy(net, {"allow": [{"host": "udp.test", "proto": "udp", "ports": [5000]},
                               {"host": "udp2.test", "proto": "udp", "ports": [5001]}]})
    try:
        before = len(upstream_log(net))
        # before the sandbox asked the gateway's DNS, the address is no allowed name's: refused
        assert udp(net, [SRV_A, 5000, "early"]) == [NONE]
        assert dns(net, "udp.test") == (0, [SRV_A])
        assert udp(net, [SRV_A, 5000, "named"]) == [["echo:named", SRV_A, 5000]]
        # the other name's port on this name's address: no (udp2.test was never resolved to it)
        assert udp(net, [SRV_A, 5001, "wrong-port"]) == [NONE]
        # the sandbox's own idea of udp2.test's address (a forged answer): not the gateway's
        assert udp(net, [SRV_B, 5001, "unresolved"]) == [NONE]
        assert [e["data"] for e in udp_log(net, before)] == ["named"]
        assert net["gw"].wait_event(lambda e: e["data"].get("kind") == "udp" and e["data"]["verdict"] == "allow" and
                                    e["data"].get("host") == "udp.test")
    finally:
        set_policy(net, POLICY)


def test_udp_quic_refused_whatever_the_rules_say(net):
    set_policy(net, {"allow": [{"cidr": f"{SRV_A}/32", "proto": "udp", "ports": ["1-65535"]}]})
    try:
        before = len(upstream_log(net))
        assert udp(net, [SRV_A, 443, "quic"]) == [NONE]
        assert udp_log(net, before) == []
        assert net["gw"].wait_event(lambda e: e["data"].get("kind") == "udp" and e["data"].get("port") == 443 and
                                    e["data"]["verdict"] == "deny" and "QUIC" in e["data"]["why"])
        # while the same rule relays another port
        assert udp(net, [SRV_A, 5000, "not-quic"]) == [["echo:not-quic", SRV_A, 5000]]
    finally:
        set_policy(net, POLICY)
    r = net["gw"].request("policy", id="sb1", policy={"allow": [{"cidr": f"{SRV_A}/32", "proto": "udp", "ports": [443]}]})
    assert not r["ok"] and "QUIC" in r["error"], r


def test_udp_refused_addresses_and_deny_rules(net):
    set_policy(net, {"allow": [{"cidr": "0.0.0.0/0", "proto": "udp", "ports": [5000, 5001]}],
                     "deny": [{"cidr": f"{SRV_B}/32", "proto": "udp"}]})
    try:
        before = len(upstream_log(net))
        # the host end itself, another sandbox's address, metadata, loopback: never, whatever the rule says
        got = udp(net, [HOST_END, 5000, "host-end"], ["10.231.0.5", 5000, "pool"], ["169.254.169.254", 5000, "meta"],
                  [SRV_B, 5000, "denied"], [SRV_A, 5001, "fine"])
        assert got[:4] == [NONE] * 4, got
        assert got[4] == ["echo:fine", SRV_A, 5001], got
        assert [e["data"] for e in udp_log(net, before)] == ["fine"]
        whys = " | ".join(e["data"]["why"] for e in udp_events(net, allow=False))
        for reason in ("sandbox address pool", "link-local", "deny " + SRV_B):
            assert reason in whys, whys
        # a policy change ends the flows: the next datagram is decided again
        set_policy(net, {"allow": []})
        assert udp(net, [SRV_A, 5001, "after-change"]) == [NONE]
    finally:
        set_policy(net, POLICY)


def input_drops(net):
    """Packets the production table's input chain dropped so far (its `counter drop` rule)."""
    out = sh(*netns_exec(net["ns"]["gw"]), "nft", "-j", "list", "chain", "inet", net["table"], "input").stdout
    rules = [o["rule"]["expr"] for o in json.loads(out)["nftables"] if "rule" in o]
    drops = [e for r in rules if {"drop": None} in r for e in r if "counter" in e]
    assert len(drops) == 1, rules
    return drops[0]["counter"]["packets"]


def test_udp_forged_source_not_relayed(net):
    """A datagram from an address that is not the sandbox's (root of its
    namespace can add any: here a second address on the sandbox's link):
    production's firewall drops it before the gateway (source-address
    validation: the link . address . host end set); and were the firewall to
    let it through, the gateway itself relays nothing from an address it
    does not know."""
    set_policy(net, {"allow": [{"cidr": f"{SRV_A}/32", "proto": "udp", "ports": [5000]}]})
    forged = '"%s" . 10.231.0.9 . %s' % (net["link"], HOST_END)
    code = ("import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(2)\n"
            "s.bind(('10.231.0.9',0))\n"
            f"s.sendto(b'forged',('{SRV_A}',5000))\ntry:\n s.recv(10);print('reply')\nexcept Exception:\n print('none')")
    try:
        before = len(upstream_log(net))
        in_sb(net, "ip", "addr", "add", "10.231.0.9/32", "dev", "eth0")
        try:
            drops = input_drops(net)
            rc, out, _ = py_in_sb(net, code)
            assert out == "none"
            assert input_drops(net) > drops     # the firewall dropped it
            # the gateway's own check: the forged source let through by the table's set
            sh(*netns_exec(net["ns"]["gw"]), "nft", "add", "element", "inet", net["table"], "links",
               f"{{ {forged} }}")
            try:
                drops = input_drops(net)
                rc, out, _ = py_in_sb(net, code)
                assert out == "none"
                assert input_drops(net) == drops    # past the firewall this time
            finally:
                sh(*netns_exec(net["ns"]["gw"]), "nft", "delete", "element", "inet", net["table"], "links",
                   f"{{ {forged} }}")
        finally:
            in_sb(net, "ip", "addr", "del", "10.231.0.9/32", "dev", "eth0")
        assert udp_log(net, before) == []
        # and the sandbox's own address is relayed by the same rule
        assert udp(net, [SRV_A, 5000, "genuine"]) == [["echo:genuine", SRV_A, 5000]]
    finally:
        set_policy(net, POLICY)


# ---- explicit proxy ----

def proxy(*args):
    return ("-x", f"http://{HOST_END}:10080", *args)


def test_proxy_http_and_connect_allowed(net):
    rc, out, err = curl(net, *proxy("http://allowed.test/p"))
    assert rc == 0 and out.startswith("hello host=allowed.test"), err
    rc, out, err = curl(net, *proxy("https://www.allowed.test/"))
    assert rc == 0 and out.startswith("hello host=www.allowed.test"), err


def test_proxy_denied(net):
    before = len(upstream_log(net))
    rc, out, _ = curl(net, *proxy("http://other.test/"))
    assert "403" in out or "space gateway" in out
    rc, out, _ = curl(net, *proxy("https://other.test/"))
    assert rc != 0
    assert [e for e in upstream_log(net)[before:] if e["kind"] == "http"] == []


RAW = r"""
import socket, ssl, sys
s = socket.create_connection(("10.231.0.0", 10080), timeout=8)
s.sendall(REQ)
out = b""
try:
    while True:
        d = s.recv(4096)
        if not d: break
        out += d
        if MODE == "tls" and b"\r\n\r\n" in out: break
except Exception as e:
    pass
if MODE == "tls" and out.startswith(b"HTTP/1.1 200"):
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    try:
        t = ctx.wrap_socket(s, server_hostname=SNI)
        t.sendall(b"GET / HTTP/1.1\r\nHost: " + SNI.encode() + b"\r\nConnection: close\r\n\r\n")
        print("TLS-OK", t.recv(200).decode(errors="replace"))
    except Exception as e:
        print("TLS-FAIL", type(e).__name__)
else:
    print(out.decode(errors="replace"))
"""


def raw_proxy(net, req, mode="http", sni=""):
    code = RAW.replace("REQ", repr(req)).replace("MODE", repr(mode)).replace("SNI", repr(sni))
    return py_in_sb(net, code)[1]


def test_proxy_host_mismatch_refused(net):
    before = len(upstream_log(net))
    out = raw_proxy(net, b"GET http://allowed.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n")
    assert out.startswith("HTTP/1.1 403") and "does not match" in out
    out = raw_proxy(net, b"GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
    assert out.startswith("HTTP/1.1 403")
    assert [e for e in upstream_log(net)[before:] if e["kind"] == "http"] == []


def test_proxy_connect_sni_mismatch_refused(net):
    before = len(upstream_log(net))
    out = raw_proxy(net, b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n", "tls", "other.test")
    assert out.startswith("TLS-FAIL")
    out = raw_proxy(net, b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n", "tls", "allowed.test")
    assert out.startswith("TLS-OK HTTP/1.1 200")
    assert [e["host"] for e in upstream_log(net)[before:] if e["kind"] == "http"] == ["allowed.test"]
    assert net["gw"].wait_event(lambda e: "does not match the CONNECT host" in e["reason"])


EAGER = r"""
import socket, ssl, sys
def hello(sni):
    ctx = ssl.create_default_context(); i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    t = ctx.wrap_bio(i, o, server_hostname=sni)
    try: t.do_handshake()
    except ssl.SSLWantReadError: pass
    return o.read()
s = socket.create_connection(("10.231.0.0", 10080), timeout=5)
s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n" + hello(sys.argv[1]))
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d: break
        out += d
        if b"\r\n\r\n" in out and len(out.partition(b"\r\n\r\n")[2]) > 0: break
except socket.timeout:
    pass
head, _, rest = out.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode() if head else "closed", "tls" if rest[:1] == b"\x16" else "-")
"""


def test_proxy_connect_plain_client_first(net):
    """After CONNECT, plain HTTP whose Host is the CONNECT host goes through
    at once, not only once the upstream speaks or another event arrives."""
    rc, out, err = py_in_sb(net, r"""
import socket
s = socket.create_connection(("10.231.0.0", 10080), timeout=5)
s.sendall(b"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(1)
assert buf.startswith(b"HTTP/1.1 200"), buf
s.sendall(b"GET /plain HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
print(out.decode(errors="replace"))
""")
    assert rc == 0, err
    assert out.startswith("HTTP/1.1 200") and "hello host=allowed.test" in out, out


CONNECT_PLAIN = r"""
import socket, sys, time
target, payload, bytewise = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3] == "1"
s = socket.create_connection(("10.231.0.0", 10080), timeout=5)
s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(1)
assert buf.startswith(b"HTTP/1.1 200"), buf
if bytewise:                      # one byte per segment: the check must not decide on a prefix
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for i in range(len(payload)):
        s.sendall(payload[i:i + 1])
        time.sleep(0.002)
else:
    s.sendall(payload)
s.shutdown(socket.SHUT_WR)        # the echo ends when its input does
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
except socket.timeout:
    pass
sys.stdout.write(out.decode(errors="replace"))
"""


def connect_plain(net, target, payload, bytewise=False):
    rc, out, err = py_in_sb(net, CONNECT_PLAIN.replace("sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3]",
                                                       f"{target!r}, bytes.fromhex({payload.hex()!r}), {'1' if bytewise else '0'!r}"))
    assert rc == 0, err
    return out


def test_proxy_connect_plain_http_host_must_match(net):
    """Domain fronting over the explicit proxy: CONNECT to an allowed host,
    then plain HTTP whose Host (or absolute URI) names another. Refused with an
    event, and no request reaches any upstream; so are the variants a lenient
    server would still read as HTTP (blank lines first, tabs, a head sent byte
    by byte, a Host that differs only in its port)."""
    fronted = [
        b"GET / HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n",
        b"\r\n\r\nGET / HTTP/1.1\r\nHost: other.test\r\n\r\n",
        b"GET\t/\tHTTP/1.1\r\nHost: other.test\r\n\r\n",
        b"GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: allowed.test:81\r\n\r\n",
        b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
    ]
    before = len(upstream_log(net))
    for payload in fronted:
        out = connect_plain(net, "allowed.test:80", payload)
        assert out.startswith("HTTP/1.1 4"), (payload, out)
        assert "hello" not in out, (payload, out)
    out = connect_plain(net, "allowed.test:80", fronted[0], bytewise=True)
    assert out.startswith("HTTP/1.1 403"), out
    assert [e for e in upstream_log(net)[before:] if e["kind"] == "http"] == []
    assert net["gw"].wait_event(lambda e: e["event"] == "network.deny" and
                                "does not match the CONNECT host" in e["reason"])


def test_proxy_connect_plain_http_one_request(net):
    """A second, pipelined request in the tunnel (with another Host) never
    reaches the upstream: plain HTTP through CONNECT is one request per
    connection, as on the transparent port 80."""
    before = len(upstream_log(net))
    out = connect_plain(net, "allowed.test:80",
                        b"GET /a HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /b HTTP/1.1\r\nHost: other.test\r\n\r\n")
    assert out.startswith("HTTP/1.1 200") and "hello host=allowed.test" in out, out
    assert "other.test" not in out, out
    assert [(e["host"], e["path"]) for e in upstream_log(net)[before:] if e["kind"] == "http"] == [("allowed.test", "/a")]


def test_proxy_connect_other_client_first_protocol_relayed(net):
    """A client-first protocol that is neither TLS nor HTTP (an SSH-style
    banner) still goes through a CONNECT tunnel to a port a rule names."""
    out = connect_plain(net, "allowed.test:2222", b"SSH-2.0-space_test client\r\nmore\n")
    assert out.startswith("echo-banner\n"), out
    assert "SSH-2.0-space_test client\nmore" in out, out   # (text mode: \r\n read as \n)


def test_refusal_reaches_a_client_that_sent_more(net):
    """A refusal is read by the client even when it sent more than the gateway
    read (a request body): the gateway reads the rest away before it closes,
    so the close is a FIN, not a reset that can make the client's kernel drop
    the refusal unread (RFC 9112 9.6)."""
    for i in range(5):
        rc, out, err = py_in_sb(net, r"""
import socket
s = socket.create_connection(("10.231.0.0", 10080), timeout=5)
body = b"b" * 60000
s.sendall(b"POST http://other.test/ HTTP/1.1\r\nHost: other.test\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
print(out.split(b"\r\n")[0].decode())
""")
        assert rc == 0 and out == "HTTP/1.1 403 Forbidden", (i, out, err)


def test_proxy_connect_eager_client_hello(net):
    # a ClientHello in the same segment as the CONNECT head is checked once connected (it used to wait
    # for a next read that never comes: the client waits for the server's hello)
    r = in_sb(net, PY, "-c", EAGER, "allowed.test")
    assert r.stdout.strip() == "HTTP/1.1 200 Connection established tls", (r.stdout, r.stderr)
    r = in_sb(net, PY, "-c", EAGER, "other.test")
    assert r.stdout.strip() == "HTTP/1.1 403 Forbidden -", (r.stdout, r.stderr)


def test_proxy_connect_internal_addresses_refused(net):
    for target in ("169.254.169.254:80", "127.0.0.1:5555", "10.231.0.0:10053", "10.231.0.7:80", "0.0.0.0:80",
                   f"{SRV_GW}:22", "224.0.0.1:80", "[::1]:80", "rebind.test:80", "meta.test:80", "localhost:5555"):
        out = raw_proxy(net, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        assert out.startswith("HTTP/1.1 4") or out.startswith("HTTP/1.1 502"), (target, out)
    # even with a policy that allows every address and port
    set_policy(net, {"allow": [{"cidr": "0.0.0.0/0", "ports": ["1-65535"]}]})
    try:
        for target in ("169.254.169.254:80", "127.0.0.1:5555", "10.231.0.0:10080", "10.231.0.9:80", f"{SRV_GW}:22"):
            out = raw_proxy(net, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            assert out.startswith("HTTP/1.1 403"), (target, out)
        rc, out, _ = curl(net, "http://169.254.169.254/")
        assert "space gateway" in out and "metadata" in out
        # a CIDR rule does allow a raw test-host address
        rc, out, _ = curl(net, f"http://{SRV_B}/")
        assert out.startswith("hello host=192.168.231.3")
    finally:
        set_policy(net, POLICY)
    net["lo"].stdout.flush()
    import select
    assert not select.select([net["lo"].stdout], [], [], 0.2)[0], "the loopback service was reached"


def test_policy_change_takes_effect_at_once(net):
    assert dns(net, "other.test") == (3, [])
    set_policy(net, {"allow": ["other.test"]})
    try:
        assert dns(net, "other.test") == (0, [SRV_B])
        rc, out, err = curl(net, "http://other.test/")
        assert rc == 0 and out.startswith("hello host=other.test"), err
        assert dns(net, "allowed.test") == (3, [])
    finally:
        set_policy(net, POLICY)
    assert dns(net, "allowed.test") == (0, [SRV_A])


def test_bad_control_requests(net):
    gw = net["gw"]
    r = gw.request("policy", id="sb1", policy={"allow": ["*.com"]})
    assert not r["ok"] and "top-level" in r["error"]
    assert dns(net, "allowed.test") == (0, [SRV_A])  # unchanged
    r = gw.request("register", id="sb1", tenant="t1", sandbox_ip=SB_IP, host_ip=HOST_END)
    assert not r["ok"]
    r = gw.request("register", id="sb2", tenant="t1", sandbox_ip="10.231.0.3", host_ip=HOST_END)
    assert not r["ok"] and "already used" in r["error"]
    r = gw.request("unregister", id="nope")
    assert not r["ok"]


def test_events_rate_limited(net, tmp_path):
    # a separate gateway with a low event rate: a flood of denied queries
    # yields a bounded number of events and a "dropped" summary
    with other_sandbox(net, (11053, 11080, 11081, 11082)) as sbx:
        gw = Gateway(net["ns"]["gw"], f"{SRV_A}:53", ["--events-per-sec", "2", "--dns-per-sec", "1000",
                                                       *sbx["gateway_ports"]])
        try:
            r = gw.request("register", id="sbx", tenant="t1", sandbox_ip=OTHER_SB_IP, host_ip=OTHER_HOST_END)
            assert r["ok"], r
            code = ("import socket,struct\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(5)\n"
                    "for i in range(300):\n q=struct.pack('!HHHHHH',i,0x100,1,0,0,0)+b'\\x05other\\x04test\\x00'+struct.pack('!HH',1,1)\n"
                    f" s.sendto(q,('{OTHER_HOST_END}',11053)); s.recv(512)\nprint('done')")
            rc, out, err = py_in_sb(sbx, code, timeout=60)
            assert out == "done", err
            assert gw.wait_event(lambda e: e["event"] == "network.dropped", timeout=15)
            denies = [e for e in gw.events if e["event"] == "network.deny"]
            assert 1 <= len(denies) < 300
        finally:
            rc, err = gw.close()
    assert rc == 0 and "Sanitizer" not in err and "runtime error" not in err, err


def test_another_gateways_ports_out_of_reach(net):
    """Two gateways on one host (two workers: each its own link prefix,
    table and ports): a sandbox reaches only its own. Its connections to the
    other gateway's proxy port, at either host end, are redirected by its own
    table to its own gateway's transparent port, which refuses the host's
    addresses; the other sandbox, the other way round, likewise. Each proxy
    port works from its own sandbox (the refusal is the link's, not a dead
    port)."""
    with other_sandbox(net, (12053, 12080, 12081, 12082)) as sbx:
        gw2 = Gateway(net["ns"]["gw"], f"{SRV_A}:53", ["--events-per-sec", "1000", *sbx["gateway_ports"]])
        try:
            assert gw2.request("register", id="sbo", tenant="t1", sandbox_ip=OTHER_SB_IP, host_ip=OTHER_HOST_END,
                               policy=POLICY)["ok"]
            tok = secrets.token_hex(4)
            before = len(upstream_log(net))
            rc, out, err = curl(sbx, "-x", f"http://{OTHER_HOST_END}:12080", f"http://allowed.test/{tok}/own2")
            assert rc == 0 and out.startswith("hello host=allowed.test"), err
            rc, out, err = curl(net, "-x", f"http://{HOST_END}:10080", f"http://allowed.test/{tok}/own1")
            assert rc == 0 and out.startswith("hello host=allowed.test"), err
            since1, since2 = len(net["gw"].events), len(gw2.events)
            for who, target in ((net, f"{OTHER_HOST_END}:12080"), (net, f"{HOST_END}:12080"),
                                (sbx, f"{HOST_END}:10080"), (sbx, f"{OTHER_HOST_END}:10080")):
                rc, out, err = curl(who, "-x", f"http://{target}", f"http://allowed.test/{tok}/cross")
                assert not out.startswith("hello"), (target, out, err)
            paths = [e["path"] for e in upstream_log(net)[before:] if e["kind"] == "http"]
            assert paths == [f"/{tok}/own2", f"/{tok}/own1"], paths
            # each refused by its own gateway (the events name the sandbox), none by the other
            for g, since, sid, port in ((net["gw"], since1, "sb1", 12080), (gw2, since2, "sbo", 10080)):
                assert g.wait_event(lambda e: len(g.events) >= since + 2)
                got = sorted((e["sandbox"], e["data"]["ip"], e["data"]["port"], e["data"]["why"])
                             for e in g.events[since:] if e["event"] == "network.deny")
                assert got == [(sid, a, port, "sandbox address pool") for a in (HOST_END, OTHER_HOST_END)], got
        finally:
            rc, err = gw2.close()
    assert rc == 0 and "Sanitizer" not in err and "runtime error" not in err, err


def test_dns_query_rate_limited(net):
    # a gateway answering 2 queries a second (burst 4): a sandbox that asks an
    # allowed name 300 times back to back gets REFUSED past the budget (and a
    # network.deny event saying why), answers within it
    with other_sandbox(net, (11053, 11080, 11081, 11082)) as sbx:
        gw = Gateway(net["ns"]["gw"], f"{SRV_A}:53", ["--dns-per-sec", "2", "--events-per-sec", "1000",
                                                       *sbx["gateway_ports"]])
        try:
            assert gw.request("register", id="sbd", tenant="t1", sandbox_ip=OTHER_SB_IP, host_ip=OTHER_HOST_END,
                              policy=POLICY)["ok"]
            code = ("import socket,struct\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(5)\n"
                    "rc={}\n"
                    "for i in range(300):\n q=struct.pack('!HHHHHH',i,0x100,1,0,0,0)+b'\\x07allowed\\x04test\\x00'"
                    "+struct.pack('!HH',1,1)\n"
                    f" s.sendto(q,('{OTHER_HOST_END}',11053)); a=s.recv(512); rc[a[3]&15]=rc.get(a[3]&15,0)+1\n"
                    "print(rc.get(0,0), rc.get(5,0), sum(rc.values()))")
            rc, out, err = py_in_sb(sbx, code, timeout=120)
            assert rc == 0, err
            ok, refused, total = map(int, out.split())
            assert total == 300 and ok >= 1 and refused >= 1 and ok + refused == 300, out
            assert gw.wait_event(lambda e: e["event"] == "network.deny" and "query rate limit" in e["reason"])
        finally:
            rc, err = gw.close()
    assert rc == 0 and "Sanitizer" not in err and "runtime error" not in err, err


def test_connection_limit_and_handshake_timeout(net):
    # a gateway with a small per-sandbox limit and a short handshake timeout:
    # idle connections (slowloris) are closed, and past the limit a new one
    # is refused at once; both are events
    with other_sandbox(net, (12053, 12080, 12081, 12082)) as sbx:
        gw = Gateway(net["ns"]["gw"], f"{SRV_A}:53", ["--conns", "4", "--handshake-timeout", "2",
                                                       *sbx["gateway_ports"]])
        try:
            assert gw.request("register", id="sbl", tenant="t1", sandbox_ip=OTHER_SB_IP, host_ip=OTHER_HOST_END,
                              policy=POLICY)["ok"]
            code = r"""
import socket, sys, time
gw = (sys.argv[1], 12080)
held = [socket.create_connection(gw, timeout=10) for _ in range(4)]
time.sleep(0.5)
extra = socket.create_connection(gw, timeout=10)
print("extra", "closed" if extra.recv(10) == b"" else "open")
# the held ones say nothing: the handshake timeout closes them
print("held", ["closed" if h.recv(10) == b"" else "data" for h in held])
"""
            r = in_sb(sbx, PY, "-c", code, OTHER_HOST_END, timeout=60)
            assert r.returncode == 0, r.stderr
            assert r.stdout.splitlines() == ["extra closed", "held ['closed', 'closed', 'closed', 'closed']"], r.stdout
            assert gw.wait_event(lambda e: "connection limit reached" in e["reason"]), gw.events
            assert gw.wait_event(lambda e: "handshake timeout" in e["reason"])
            # and the limit counted them back: a normal request works again
            rc, out, err = curl(sbx, "-x", f"http://{OTHER_HOST_END}:12080", "http://allowed.test/again")
            assert rc == 0 and out.startswith("hello host=allowed.test"), err
        finally:
            rc, err = gw.close()
    assert rc == 0 and "Sanitizer" not in err and "runtime error" not in err, err


@pytest.mark.parametrize("via", ["transparent-http", "transparent-tls", "proxy-http", "proxy-connect"])
def test_large_download_intact(net, via):
    size = 20 * 1024 * 1024 + 12345
    scheme = "https" if via.endswith("tls") or via == "proxy-connect" else "http"
    args = proxy() if via.startswith("proxy") else ()
    r = in_sb(net, "sh", "-c", f"curl -sS --max-time 60 {'--noproxy *' if not args else ' '.join(args)} "
                               f"--cacert {net['tmp']}/ca.pem {scheme}://allowed.test/big/{size} | sha256sum",
              timeout=90)
    import hashlib
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == hashlib.sha256(b"x" * size).hexdigest()


STALLED_READER = r"""
import socket, sys
via = sys.argv[1]
if via == "connect":
    s = socket.create_connection(("10.231.0.0", 10080), timeout=10)
    s.sendall(b"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(1)
    assert buf.startswith(b"HTTP/1.1 200"), buf
else:
    s = socket.create_connection((socket.gethostbyname("allowed.test"), 80), timeout=10)
s.sendall(b"GET /big/%d HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n" % (256 << 20))
assert s.recv(12).startswith(b"HTTP/1.1 200")
print("stalled", flush=True)
sys.stdin.read()       # reads nothing more until the test is done
"""


def gw_socket_info(net, port):
    """ss -ti of the gateway's (single) socket on local port `port` in the host namespace."""
    out = sh(*netns_exec(net["ns"]["gw"]), "ss", "-tinH", "state", "established",
             f"( sport = :{port} )").stdout
    return out


@pytest.mark.parametrize("via", ["transparent", "connect"])
def test_relay_keeps_unsent_bytes_in_the_gateway(net, via):
    """A sandbox that stops reading: the gateway's socket towards it holds at
    most TCP_NOTSENT_LOWAT (GW_NOTSENT_LOWAT, 4 KiB) plus the skb being filled
    (64 KiB) unsent, the rest waits in the gateway's pipe and the upstream's
    socket.
    Without the option the socket fills its whole send buffer (about 650 KiB on
    this kernel at the start, MiBs once grown), and each window update from the
    sandbox's reader then transmits the gateway's bytes in the reader's own
    softirq, on its CPU: the tunnel's throughput halves on an idle host
    (bench/gateway.py)."""
    port = 10081 if via == "transparent" else 10080
    p = subprocess.Popen([*netns_exec(net["ns"]["sb"]), PY, "-c", STALLED_READER, via],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "stalled", p.stderr.read() if p.poll() is not None else ""
        # steady state: the sandbox's window is shut, so the gateway stops at its limits
        last, notsent = None, None
        for _ in range(100):
            info = gw_socket_info(net, port)
            assert info.count("\n") <= 2, info      # one connection: the stalled reader's
            m = [int(f.split(":")[1]) for f in info.split() if f.startswith("notsent:")]
            notsent = m[0] if m else 0
            if notsent > 0 and notsent == last:
                break
            last = notsent
            time.sleep(0.2)
        assert notsent == last and notsent > 0, info
        assert notsent <= 4 * 1024 + 64 * 1024, info
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
        p.stderr.close()


@pytest.mark.parametrize("via", ["transparent", "connect"])
def test_relay_sandbox_leg_unpaced(net, via):
    """The gateway's socket towards the sandbox uses Reno (GW_SANDBOX_LEG_CC):
    the host's default (BBR here) paces, and TCP's internal pacing on a link
    without an fq qdisc cost the gateway ~40% more CPU per download
    (bench/gateway.py). The upstream socket keeps the host's default."""
    default = sh(*netns_exec(net["ns"]["gw"]), "sysctl", "-n", "net.ipv4.tcp_congestion_control").stdout.strip()
    if default == "reno":
        pytest.skip("the host's default congestion control is Reno: nothing to tell apart")
    port = 10081 if via == "transparent" else 10080
    p = subprocess.Popen([*netns_exec(net["ns"]["sb"]), PY, "-c", STALLED_READER, via],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "stalled", p.stderr.read() if p.poll() is not None else ""
        towards_sb = gw_socket_info(net, port)
        assert towards_sb.count("\n") <= 2 and "reno" in towards_sb.split(), towards_sb
        upstream = sh(*netns_exec(net["ns"]["gw"]), "ss", "-tinH", "state", "established",
                      "( dport = :80 )").stdout
        assert upstream.count("\n") <= 2 and default in upstream.split(), upstream
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
        p.stderr.close()


@pytest.mark.parametrize("via", ["transparent", "connect"])
def test_stalled_reader_bounds_what_the_gateway_takes_in(net, via):
    """A sandbox that stops reading a download: what the gateway accepts from
    the upstream stays bounded (the upstream socket's receive buffer, the
    pipe, the socket towards the sandbox) and stops growing: the upstream's
    window shuts. An in-kernel relay (SK_SKB verdict redirect through a
    SOCKHASH, tried: docs/network.md) fails this: the kernel takes the whole
    256 MiB within 0.2 s and holds it, unaccounted, on the peer's psock."""
    p = subprocess.Popen([*netns_exec(net["ns"]["sb"]), PY, "-c", STALLED_READER, via],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "stalled", p.stderr.read() if p.poll() is not None else ""
        taken = []
        # sampled every 0.2 s (the upstream could send far more than any buffer in a second) until
        # it stopped growing for 1 s, within a bounded poll: how soon the buffers fill on a loaded
        # host is not asserted, only that they stay bounded and fill
        deadline = time.monotonic() + 60
        while len(taken) < 15 or taken[-1] != taken[-6]:
            assert time.monotonic() < deadline, f"what the gateway takes in never stopped growing: {taken[-20:]}"
            time.sleep(0.2)
            out = sh(*netns_exec(net["ns"]["gw"]), "ss", "-tinH", "( dport = :80 )").stdout
            m = [int(f.split(":")[1]) for f in out.split() if f.startswith("bytes_received:")]
            assert len(m) == 1, out             # the stalled reader's upstream connection, still open
            taken.append(m[0])
            assert taken[-1] < 32 << 20, taken[-20:]
    finally:
        p.kill()
        p.wait()
        p.stdout.close()
        p.stderr.close()


# ---- a policy change cuts the open connections it denies ----

CUT_CLIENT = r"""
import hashlib, socket, ssl, sys
via, host, size, ca, proxy = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
if via == "connect":
    s = socket.create_connection((proxy, 10080), timeout=20)
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(), host.encode()))
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(1)
    assert buf.startswith(b"HTTP/1.1 200"), buf
elif via == "proxy-http":
    s = socket.create_connection((proxy, 10080), timeout=20)
else:
    s = socket.create_connection((socket.gethostbyname(host), 80 if via == "http" else 443), timeout=20)
target = b"/big/%d" % size
if via == "proxy-http":
    target = b"http://" + host.encode() + target
elif via != "http":
    s = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname=host)
s.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (target, host.encode()))
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
assert head.startswith(b"HTTP/1.1 200"), head
got, h = 0, hashlib.sha256()
d = s.recv(65536)
got += len(d); h.update(d)
print("started", flush=True)
sys.stdin.readline()          # the test changes the policy meanwhile; the upstream waits on the shut window
end = "eof"
try:
    while got < size:
        d = s.recv(65536)
        if not d:
            break
        got += len(d); h.update(d)
except (OSError, ssl.SSLError) as e:
    end = type(e).__name__
print(got, h.hexdigest(), end, flush=True)
"""


class CutClient:
    """A download through the gateway that stops reading after its first
    bytes until resume() (the rest waits in buffers: the connection is open
    whatever the timing)."""

    def __init__(self, net, via, host, size, ca=None, proxy=HOST_END):
        self.size = size
        self.p = subprocess.Popen([*netns_exec(net["ns"]["sb"]), PY, "-c", CUT_CLIENT, via, host, str(size),
                                   ca or f"{net['tmp']}/ca.pem", proxy],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline().strip()
        assert line == "started", self.p.stderr.read() if self.p.poll() is not None else line

    def resume(self):
        import hashlib
        out, err = self.p.communicate("go\n", timeout=60)
        assert self.p.returncode == 0, err
        got, digest, end = out.split()
        return int(got), digest == hashlib.sha256(b"x" * self.size).hexdigest(), end

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.communicate()


def cut_events(gw, host=None, since=0):
    return [e for e in gw.events[since:] if e["event"] == "network.deny" and "the policy changed" in e["reason"]
            and (host is None or e["data"].get("host") == host)]


@pytest.mark.parametrize("via", ["transparent", "connect", "http", "proxy-http"])
def test_policy_change_cuts_open_tunnels_it_denies(net, via):
    """A host put on the deny list mid-download: its open TLS tunnel
    (transparent, CONNECT) or plain-HTTP relay (transparent port 80, proxy) is
    reset at once (the client gets far less than the whole body) with a
    network.deny event; one to a host that stays allowed (on the same address)
    goes on byte-exact across the same change."""
    gw = net["gw"]
    size = 64 << 20
    dns(net, "allowed.test")
    cut = CutClient(net, via, "allowed.test", size)
    kept = None
    try:
        kept = CutClient(net, via, "www.allowed.test", 16 << 20)
        since = len(gw.events)
        set_policy(net, {**POLICY, "deny": POLICY["deny"] + ["allowed.test"]})
        # cut before the gateway answered the change: its events come ahead of its reply
        ev = cut_events(gw, "allowed.test", since)
        assert len(ev) == 1, ev
        assert ev[0]["data"]["kind"] == {"transparent": "tls", "connect": "connect"}.get(via, "http"), ev
        assert ev[0]["data"]["port"] == (443 if via in ("transparent", "connect") else 80), ev
        assert "the policy changed: deny allowed.test" in ev[0]["reason"], ev
        assert cut_events(gw, "www.allowed.test", since) == []
        got, _, end = cut.resume()
        assert got < size // 2, (got, end)
        assert end != "eof" or got < size, end
        got, exact, end = kept.resume()
        assert (got, exact) == (16 << 20, True), end
        # and a new connection to the denied host is refused as usual
        scheme = "https" if via in ("transparent", "connect") else "http"
        rc, out, _ = curl(net, *((proxy() if via in ("connect", "proxy-http") else ()) + (f"{scheme}://allowed.test/",)))
        assert rc != 0 or "hello" not in out
    finally:
        cut.kill()
        if kept:
            kept.kill()
        set_policy(net, POLICY)


@pytest.mark.parametrize("via", ["transparent", "connect", "http", "proxy-http"])
def test_policy_change_more_permissive_cuts_nothing(net, via):
    gw = net["gw"]
    size = 16 << 20
    dns(net, "allowed.test")
    c = CutClient(net, via, "allowed.test", size)
    try:
        since = len(gw.events)
        set_policy(net, {**POLICY, "allow": POLICY["allow"] + ["other.test", {"cidr": "192.168.231.0/24"}]})
        set_policy(net, POLICY)      # back: the same verdict for it as before
        got, exact, end = c.resume()
        assert (got, exact) == (size, True), end
        assert cut_events(gw, since=since) == []
    finally:
        c.kill()
        set_policy(net, POLICY)


TCP_RELAY = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
f = s.makefile("rb")
assert f.readline() == b"echo-banner\n"
s.sendall(b"one\n")
assert f.readline() == b"one\n"
print("relaying", flush=True)
sys.stdin.readline()
try:
    s.sendall(b"two\n")
    line = f.readline()
    print("echo" if line == b"two\n" else "ended %r" % line, flush=True)
except OSError as e:
    print("ended", type(e).__name__, flush=True)
"""


def test_policy_change_cuts_a_tcp_relay_when_its_rule_goes(net):
    """A relayed other-port connection allowed by a CIDR rule: removing the
    rule resets it (event with the address and port); with the rule kept
    (another one removed), the relay goes on."""
    gw = net["gw"]
    rule = {"cidr": f"{SRV_B}/32", "ports": [2222]}
    with_rule = {**POLICY, "allow": POLICY["allow"] + [rule, "other.test"]}
    set_policy(net, with_rule)
    procs = []
    try:
        def relay():
            p = subprocess.Popen([*netns_exec(net["ns"]["sb"]), PY, "-c", TCP_RELAY, SRV_B, "2222"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(p)
            assert p.stdout.readline().strip() == "relaying", p.stderr.read() if p.poll() is not None else ""
            return p
        kept = relay()
        since = len(gw.events)
        set_policy(net, {**POLICY, "allow": POLICY["allow"] + [rule]})   # other.test goes, the CIDR rule stays
        out, _ = kept.communicate("go\n", timeout=20)
        assert out.strip() == "echo", out
        assert cut_events(gw, since=since) == []
        for _ in range(100):        # the kept relay's end goes through the gateway to the upstream
            open_ = sh(*netns_exec(net["ns"]["gw"]), "ss", "-tnH", "( dport = :2222 )").stdout.strip()
            if not open_:
                break
            time.sleep(0.1)
        assert not open_, open_
        cut = relay()
        since = len(gw.events)
        set_policy(net, POLICY)
        assert gw.wait_event(lambda e: cut_events(gw, since=since)), gw.events[since:]
        ev = cut_events(gw, since=since)
        assert len(ev) == 1 and ev[0]["data"]["kind"] == "tcp", ev
        assert ev[0]["data"]["ip"] == SRV_B and ev[0]["data"]["port"] == 2222, ev
        out, _ = cut.communicate("go\n", timeout=20)
        assert out.startswith("ended"), out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        set_policy(net, POLICY)


def test_policy_change_refuses_a_proxy_request_still_resolving(net):
    """A proxy request whose name the gateway is still resolving (its
    resolver here never answers) when the policy denies the name: refused at
    once with the 403 a new request gets and the event saying why (not left
    to the lookup, which would connect it)."""
    ns = net["ns"]
    silent = subprocess.Popen([*netns_exec(ns["srv"]), PY, "-c",
                               "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                               f"s.bind(('{SRV_A}',5399));print('ready',flush=True)\n"
                               "while True:\n q=s.recv(512);print('query',flush=True)"],
                              stdout=subprocess.PIPE, text=True)
    gw = None
    client = None
    try:
        with other_sandbox(net, (12053, 12080, 12081, 12082)) as sbx:
            try:
                assert silent.stdout.readline().strip() == "ready"
                gw = Gateway(ns["gw"], f"{SRV_A}:5399", ["--events-per-sec", "1000", *sbx["gateway_ports"]])
                assert gw.request("register", id="sbr", tenant="t1", sandbox_ip=OTHER_SB_IP,
                                  host_ip=OTHER_HOST_END, policy=POLICY)["ok"]
                client = subprocess.Popen([*netns_exec(sbx["ns"]["sb"]), "curl", "-sS", "--max-time", "30",
                                           "-x", f"http://{OTHER_HOST_END}:12080", "http://allowed.test/"],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                assert silent.stdout.readline().strip() == "query"      # the gateway is resolving
                since = len(gw.events)
                assert gw.request("policy", id="sbr", policy={"allow": POLICY["allow"], "deny": ["allowed.test"]})["ok"]
                out, err = client.communicate(timeout=30)
                assert "the policy changed: deny allowed.test" in out, (out, err)
                ev = cut_events(gw, "allowed.test", since)
                assert len(ev) == 1 and ev[0]["data"]["kind"] == "http", ev
            finally:
                if client and client.poll() is None:
                    client.kill()
                    client.communicate()
                rc, err = gw.close() if gw else (0, "")
    finally:
        silent.kill()
        silent.wait()
        silent.stdout.close()
    assert rc == 0 and "Sanitizer" not in err and "runtime error" not in err, err
