# SPDX-License-Identifier: MIT
"""Every bypass class of the egress policy, from inside a sandbox of a real
spaced with its real gateway: forged DNS answers, direct IPs, SNI/Host
mismatches (both ways, transparent and through the proxy), CONNECT to
internal addresses, IPv6, UDP (incl. QUIC), DNS TXT/ANY exfiltration, the
metadata address, the host's loopback services, another sandbox and a
spoofed source. Each asserts the refusal and that nothing reached the
upstream it aimed at; a baseline shows the same clients get through where
the policy allows.

So that no check can reach anything real if it failed, spaced runs in a
network namespace of its own (`D`, the "host": its gateway, nft table and
sandbox links live there) whose only route out is a second namespace (`F`,
the far side) holding every upstream: DNS, HTTP(S) with the test's own CA,
TCP and UDP echoes, on 10.251.0.2/.3 and on 169.254.169.254 (so the metadata
address is a test host: a request that got there shows in F's log). The test
reaches spaced's API over a veth from the host to D. The clients are the
`net` probe (tests/e2e/security/probes/net.c, static) sending real bytes:
HTTP requests, TLS ClientHellos made by Python's ssl module, DNS queries."""

import json
import os
import random
import secrets
import socket
import ssl
import struct
import subprocess
import time

import pytest

import e2e_host as host
import e2e_residue as residue
from attack_util import install_probes

A, B, FAR_GW = "10.251.0.2", "10.251.0.3", "10.251.0.1"
META = "169.254.169.254"
SERVERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gateway_servers.py")
PY = "/usr/bin/python3"
MS = 3000
ZONE = {
    "_listen": [A],
    "allowed.test": [A],
    "other.test": [B],
    "meta.test": [META],
    "rebind.test": ["127.0.0.1"],
    "hostaddr.test": [FAR_GW],
    "udp.test": [A],
}
POLICY = {"allow": ["allowed.test", "other-allowed.test", "meta.test", "rebind.test", "hostaddr.test"],
          "deny": ["other.test"]}


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60, **kw)


def free_octet():
    used = sh("ip", "-4", "-o", "addr").stdout + sh("ip", "-4", "route").stdout
    for x in random.sample(range(1, 255), 254):
        if f"10.250.{x}." not in used:
            return x
    pytest.skip("no free 10.250.x.0/24 for the test's link")


@pytest.fixture(scope="module")
def world(e2e_session, request, tmp_path_factory, probes):
    tag = secrets.token_hex(3)
    D, F, link = f"spbp-{tag}-d", f"spbp-{tag}-f", f"spbp{tag}"
    x = free_octet()
    here, api = f"10.250.{x}.1", f"10.250.{x}.2"
    tmp = tmp_path_factory.mktemp("bypass")
    procs, d = [], None
    try:
        sh("ip", "netns", "add", D)
        sh("ip", "netns", "add", F)
        sh("ip", "link", "add", link, "type", "veth", "peer", "name", "up0", "netns", D)
        sh("ip", "addr", "add", f"{here}/24", "dev", link)
        sh("ip", "link", "set", link, "up")
        sh("ip", "-n", D, "addr", "add", f"{api}/24", "dev", "up0")
        sh("ip", "-n", D, "link", "add", "far0", "type", "veth", "peer", "name", "eth0", "netns", F)
        sh("ip", "-n", D, "addr", "add", f"{FAR_GW}/24", "dev", "far0")
        for a in (f"{A}/24", f"{B}/24", f"{META}/32"):
            sh("ip", "-n", F, "addr", "add", a, "dev", "eth0")
        for ns, dev in ((D, "lo"), (D, "up0"), (D, "far0"), (F, "lo"), (F, "eth0")):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", D, "route", "add", "default", "via", A)       # everything else: the far side
        sh("ip", "-n", F, "route", "add", "default", "via", FAR_GW)
        # the upstreams' CA and certificate
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=space bypass CA",
           "-keyout", f"{tmp}/ca.key", "-out", f"{tmp}/ca.pem")
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=allowed.test",
           "-keyout", f"{tmp}/srv.key", "-out", f"{tmp}/srv.csr")
        with open(f"{tmp}/ext", "w") as f:
            f.write("subjectAltName=DNS:allowed.test,DNS:other.test\n")
        sh("openssl", "x509", "-req", "-in", f"{tmp}/srv.csr", "-CA", f"{tmp}/ca.pem", "-CAkey", f"{tmp}/ca.key",
           "-CAcreateserial", "-days", "2", "-extfile", f"{tmp}/ext", "-out", f"{tmp}/srv.pem")
        log = f"{tmp}/upstream.log"
        open(log, "w").close()
        srv = subprocess.Popen([*host.netns_exec(F), PY, SERVERS, log, f"{tmp}/srv.pem", f"{tmp}/srv.key",
                                json.dumps(ZONE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(srv)
        assert srv.stdout.readline().strip() == "ready"
        # services of the "host" (D) that no sandbox may reach: loopback and every address, TCP and UDP
        hostlog = f"{tmp}/host.log"
        svc = subprocess.Popen([*host.netns_exec(D), PY, "-c", HOST_SERVICES, hostlog],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(svc)
        assert svc.stdout.readline().strip() == "ready"
        d = e2e_session.new_daemon(netns=D, listen_host=api, extra_args=[f"--gateway-dns-upstream={A}:53"])
        d.start()
        yield {"d": d, "log": log, "hostlog": hostlog, "tmp": str(tmp), "probes": probes, "api": api}
    finally:
        problems = residue.teardown_daemon(d) if d else []
        for p in procs:
            p.stdin.close()
            p.kill()
            p.wait()
        for ns in (D, F):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", link], capture_output=True)
        if d and not problems:
            residue.remove_daemon_dir(d)
        elif problems:
            residue.teardown_failed(request, "bypass daemon teardown:\n  " + "\n  ".join(problems))


HOST_PORT, HOST_UDP = 7777, 7778
HOST_SERVICES = r"""
import select, socket, sys
log = open(sys.argv[1], "a")
ls = []
for addr in ("127.0.0.1", "0.0.0.0"):
    t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((addr, 7777 if addr == "0.0.0.0" else 7779)); t.listen(16); ls.append(t)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 7778)); ls.append(u)
print("ready", flush=True)
while True:
    r, _, _ = select.select(ls, [], [])
    for s in r:
        if s is u:
            d, p = u.recvfrom(4096); log.write(f"udp {p[0]} {d[:32]!r}\n")
        else:
            c, p = s.accept(); log.write(f"tcp {p[0]} -> {c.getsockname()}\n"); c.close()
        log.flush()
"""


@pytest.fixture(scope="module")
def box(world):
    d = world["d"]
    sid = d.create(network=POLICY)["id"]
    install_probes(d, sid, world["probes"], ["net"])
    yield sid
    d.delete(sid)


def set_policy(world, sid, policy):
    r = world["d"].api("PUT", f"/v1/sandboxes/{sid}/policy", json=policy)
    assert r.status == 200, r


def host_end(world, sid):
    out = world["d"].sh(sid, "ip -4 -o addr show dev eth0")
    me = out.split("inet ")[1].split("/")[0]
    a = list(map(int, me.split(".")))
    a[3] -= 1
    return me, ".".join(map(str, a))


def xchg(world, sid, proto, addr, port, data, ms=MS, then=None):
    """Sends data (TCP: and after the first answer `then`); the bytes that came back, or the probe's word."""
    hexdata = data.hex() + ("." + then.hex() if then is not None else "")
    out = world["d"].sh(sid, f"net xchg {proto} {addr} {port} {hexdata} {ms}").strip()
    if out.startswith("reply "):
        return bytes.fromhex(out[6:])
    return out


def http(world, sid, addr, port, host_hdr, target="/", method="GET"):
    """The status line of the answer, or what the probe saw (closed, none, ...)."""
    req = f"{method} {target} HTTP/1.1\r\nHost: {host_hdr}\r\nConnection: close\r\n\r\n".encode()
    r = xchg(world, sid, "tcp", addr, port, req)
    return r.split(b"\r\n")[0].decode(errors="replace") if isinstance(r, bytes) else r


def client_hello(sni):
    """The first flight of a real TLS client (Python's ssl); sni None: no server_name at all."""
    ctx = ssl.create_default_context()
    if sni is None:
        ctx.check_hostname = False
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


CONNECT_ALLOWED = b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n"


def tls(world, sid, addr, port, sni, prefix=b"", split=False):
    """True if a TLS server answered the ClientHello (a handshake record came back); prefix: a CONNECT
    head, sent with the ClientHello or (split) before it, waiting for the proxy's answer."""
    if split:
        r = xchg(world, sid, "tcp", addr, port, prefix, then=client_hello(sni))
    else:
        r = xchg(world, sid, "tcp", addr, port, prefix + client_hello(sni))
    if not isinstance(r, bytes):
        return r
    if prefix:
        head, _, r = r.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            return head.split(b"\r\n")[0].decode()
        if not r:
            return "closed"      # the tunnel was closed without a byte of the server's
        if r.startswith(b"HTTP/1.1 403"):
            return "refused"     # the gateway's refusal in place of the server's hello
    return bool(r) and r[0] == 0x16


def dns(world, sid, name, qtype=1, server=None):
    """(rcode, [A addresses]) from the sandbox's resolver (port 53 of its host end)."""
    qid = random.randrange(65536)
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack("!HH", qtype, 1)
    r = xchg(world, sid, "udp", server or host_end(world, sid)[1], 53, q)
    assert isinstance(r, bytes), r
    assert struct.unpack("!H", r[:2])[0] == qid
    an, off, ips = struct.unpack("!H", r[6:8])[0], len(q), []
    for _ in range(an):
        off += 2
        t, _c, _ttl, rl = struct.unpack("!HHIH", r[off:off + 10])
        off += 10
        if t == 1:
            ips.append(socket.inet_ntoa(r[off:off + 4]))
        off += rl
    return r[3] & 15, ips


def upstream(world, since=0):
    with open(world["log"]) as f:
        return [json.loads(l) for l in f if l.strip()][since:]


def mark(world):
    return len(upstream(world))


def reached(world, since):
    """What reached an upstream other than the DNS server (where the gateway itself resolves)."""
    return [e for e in upstream(world, since) if e["kind"] != "dns"]


def host_log(world):
    with open(world["hostlog"]) as f:
        return f.read()


def events(world, sid, kind=None):
    r = world["d"].api("GET", "/v1/events", params={"sandbox": sid, "limit": 1000})
    assert r.status == 200, r
    evs = [e for e in r.json()["events"] if e["type"] in ("network.allow", "network.deny")]
    return [e for e in evs if kind is None or e["data"].get("kind") == kind]


def wait_deny(world, sid, pred):
    ok = host.wait_until(lambda: any(e["type"] == "network.deny" and pred(e["data"]) for e in events(world, sid)), 10)
    assert ok, [e["data"] for e in events(world, sid)][-20:]


# ---- the baseline: where the policy allows, the same clients get through ----

def test_baseline_allowed(world, box):
    assert dns(world, box, "allowed.test") == (0, [A])
    assert http(world, box, A, 80, "allowed.test") == "HTTP/1.1 200 OK"
    assert tls(world, box, A, 443, "allowed.test") is True
    _, gw = host_end(world, box)
    assert tls(world, box, gw, 10080, "allowed.test", prefix=CONNECT_ALLOWED) is True
    assert tls(world, box, gw, 10080, "allowed.test", prefix=CONNECT_ALLOWED, split=True) is True
    assert any(e["type"] == "network.allow" for e in events(world, box))


# ---- forged DNS, direct IPs ----

def test_forged_dns_answer(world, box):
    """The sandbox's own idea of allowed.test's address (B, another host) gets nothing."""
    assert dns(world, box, "allowed.test") == (0, [A])
    m = mark(world)
    assert http(world, box, B, 80, "allowed.test") == "HTTP/1.1 403 Forbidden"
    assert tls(world, box, B, 443, "allowed.test") == "closed"
    assert http(world, box, B, 8080, "allowed.test:8080") == "closed"   # no rule names 8080: not even parsed
    assert reached(world, m) == []
    wait_deny(world, box, lambda e: "was not resolved for allowed.test" in e["why"])


def test_direct_ip(world, box):
    m = mark(world)
    assert http(world, box, A, 80, A) == "HTTP/1.1 403 Forbidden"
    assert tls(world, box, A, 443, None) == "closed"     # no SNI at all: a raw address
    assert xchg(world, box, "tcp", A, 2222, b"hello\n") == "closed"
    _, gw = host_end(world, box)
    assert http(world, box, gw, 10080, A, target=f"http://{A}/") == "HTTP/1.1 403 Forbidden"
    assert reached(world, m) == []
    wait_deny(world, box, lambda e: "a raw address needs a CIDR rule" in e["why"])


# ---- SNI and Host: all must agree ----

def test_sni_allowed_host_denied_and_reverse(world, box):
    _, gw = host_end(world, box)
    assert dns(world, box, "allowed.test") == (0, [A])
    m = mark(world)
    # transparent: Host of a denied name to the allowed name's address; SNI likewise
    assert http(world, box, A, 80, "other.test") == "HTTP/1.1 403 Forbidden"
    assert tls(world, box, A, 443, "other.test") == "closed"
    # through the proxy: CONNECT to the allowed name with a ClientHello for the denied one, and the reverse
    r = xchg(world, box, "tcp", gw, 10080, b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n"
             + client_hello("other.test"))
    assert isinstance(r, bytes) and r.startswith(b"HTTP/1.1 403"), r   # the eager ClientHello is checked at once
    # the same with the ClientHello after the 200 (as curl does): the tunnel closes, no server answer
    assert tls(world, box, gw, 10080, "other.test", prefix=CONNECT_ALLOWED, split=True) in ("closed", "refused")
    r = xchg(world, box, "tcp", gw, 10080, b"CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n"
             + client_hello("allowed.test"))
    assert isinstance(r, bytes) and r.startswith(b"HTTP/1.1 403"), r
    # plain HTTP in a CONNECT tunnel to the allowed name, with the Host of the denied one
    r = xchg(world, box, "tcp", gw, 10080, b"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n",
             then=b"GET / HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n")
    assert isinstance(r, bytes) and b"HTTP/1.1 403" in r and b"hello" not in r, r
    # absolute URI of one name with the Host of the other, both ways
    assert http(world, box, gw, 10080, "other.test", target="http://allowed.test/") == "HTTP/1.1 403 Forbidden"
    assert http(world, box, gw, 10080, "allowed.test", target="http://other.test/") == "HTTP/1.1 403 Forbidden"
    assert reached(world, m) == []
    wait_deny(world, box, lambda e: "does not match" in e["why"])


# ---- CONNECT to internal addresses ----

def test_connect_internal_addresses(world, box):
    d = world["d"]
    me, gw = host_end(world, box)
    other = d.create()["id"]
    try:
        other_ip, _ = host_end(world, other)
        set_policy(world, box, {"allow": [{"cidr": "0.0.0.0/0", "ports": ["1-65535"]}, "meta.test", "rebind.test"]})
        m = mark(world)
        for target in ("127.0.0.1:7779", f"{META}:80", f"{gw}:22", f"{gw}:10080", f"{FAR_GW}:7777",
                       f"{world['api']}:{d.port}", f"{other_ip}:22", "0.0.0.0:80", "224.0.0.1:80"):
            r = xchg(world, box, "tcp", gw, 10080, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            assert isinstance(r, bytes) and r.startswith(b"HTTP/1.1 403"), (target, r)
        for name in ("meta.test:80", "rebind.test:80"):  # names that resolve to refused addresses
            r = xchg(world, box, "tcp", gw, 10080, f"CONNECT {name} HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
            assert isinstance(r, bytes) and r.startswith(b"HTTP/1.1 502"), (name, r)
        assert reached(world, m) == []   # the gateway resolved the names
        assert host_log(world) == ""
    finally:
        set_policy(world, box, POLICY)
        d.delete(other)


# ---- IPv6 ----

def test_ipv6(world, box):
    _, gw = host_end(world, box)
    m = mark(world)
    for addr in ("::1", "fd00::1", "::"):
        res = world["d"].sh(box, f"net tcp {addr} 80 {MS}").strip()
        assert res != "connected", (addr, res)
    # an IPv4-mapped address is IPv4 on the wire: the gateway's, and refused as a raw address
    assert http(world, box, "::ffff:10.251.0.2", 80, "[::ffff:10.251.0.2]") in ("HTTP/1.1 400 Bad Request",
                                                                              "HTTP/1.1 403 Forbidden")
    assert reached(world, m) == []
    r = xchg(world, box, "tcp", gw, 10080, b"CONNECT [::1]:80 HTTP/1.1\r\nHost: [::1]:80\r\n\r\n")
    assert isinstance(r, bytes) and r.startswith(b"HTTP/1.1 400"), r
    assert dns(world, box, "allowed.test", qtype=28) == (0, [])     # AAAA: empty, IPv6 is off inside
    assert world["d"].sh(box, "cat /proc/sys/net/ipv6/conf/all/disable_ipv6").strip() == "1"


# ---- UDP ----

def test_udp_only_where_a_rule_names_it(world, box):
    m = mark(world)
    assert xchg(world, box, "udp", A, 5000, b"no-rule") == "none"
    wait_deny(world, box, lambda e: e.get("kind") == "udp" and e.get("port") == 5000)
    set_policy(world, box, {"allow": [{"cidr": f"{A}/32", "proto": "udp", "ports": ["1-65535"]},
                                      {"host": "udp.test", "proto": "udp", "ports": [5001]}]})
    try:
        assert xchg(world, box, "udp", A, 5000, b"ruled") == b"echo:ruled"
        assert xchg(world, box, "udp", A, 443, b"quic") == "none"      # QUIC: never
        wait_deny(world, box, lambda e: e.get("kind") == "udp" and e.get("port") == 443 and "QUIC" in e["why"])
        assert xchg(world, box, "udp", B, 5001, b"no-name") == "none"  # udp.test was never resolved to B
        assert dns(world, box, "udp.test") == (0, [A])
        assert xchg(world, box, "udp", A, 5001, b"named") == b"echo:named"
        got = [e["data"] for e in upstream(world, m) if e["kind"] == "udp"]
        assert got == ["ruled", "named"], got
        assert all(e["peer"] == FAR_GW for e in upstream(world, m) if e["kind"] == "udp")  # relayed by the gateway
    finally:
        set_policy(world, box, POLICY)
    assert xchg(world, box, "udp", A, 5000, b"after") == "none"      # the policy change ended the flow


# ---- DNS exfiltration ----

def test_dns_txt_any_exfiltration(world, box):
    m = mark(world)
    for name, qtype in (("allowed.test", 16), ("c2VjcmV0LWRhdGE.allowed.test", 16), ("allowed.test", 255),
                        ("c2VjcmV0LWRhdGE.exfil.test", 1), ("c2VjcmV0LWRhdGE.exfil.test", 16),
                        ("allowed.test", 10), ("allowed.test", 99)):
        rcode, ips = dns(world, box, name, qtype)
        assert rcode in (3, 5) and ips == [], (name, qtype, rcode)
    # and straight to a resolver elsewhere: port 53 anywhere is the gateway's
    assert dns(world, box, "c2VjcmV0.exfil.test", 16, server=A)[0] in (3, 5)
    asked = [e for e in upstream(world, m) if e["kind"] == "dns"]
    assert not any("exfil" in e["name"] or "c2vj" in e["name"] or e["qtype"] != 1 for e in asked), asked


# ---- the metadata address ----

META_RANGE = "168.0.0.0/6"   # 168.0.0.0-171.255.255.255: the metadata address and ordinary ones

def test_metadata_unreachable(world, box):
    """169.254.169.254 is a test host here: anything that got there would show in its log.
    The policy allows a range holding it (an allow entry wholly inside
    169.254.0.0/16 is refused by the API: test_network_policy.py)."""
    _, gw = host_end(world, box)
    set_policy(world, box, {"allow": [{"cidr": META_RANGE, "ports": ["1-65535"]}, "meta.test",
                                      {"cidr": META_RANGE, "proto": "udp", "ports": ["1-65535"]}]})
    try:
        m = mark(world)
        assert dns(world, box, "meta.test") == (3, [])      # the only answer is refused: NXDOMAIN
        assert http(world, box, META, 80, META) == "HTTP/1.1 403 Forbidden"
        assert http(world, box, META, 80, "meta.test") == "HTTP/1.1 403 Forbidden"
        assert http(world, box, gw, 10080, META, target=f"http://{META}/latest/meta-data/") == \
            "HTTP/1.1 403 Forbidden"
        assert http(world, box, gw, 10080, "meta.test", target="http://meta.test/") == "HTTP/1.1 502 Bad Gateway"
        assert xchg(world, box, "udp", META, 5000, b"meta") == "none"
        assert reached(world, m) == []
        wait_deny(world, box, lambda e: "metadata" in e["why"])
    finally:
        set_policy(world, box, POLICY)


# ---- the host's services ----

def test_host_loopback_services(world, box):
    me, gw = host_end(world, box)
    set_policy(world, box, {"allow": [{"cidr": "0.0.0.0/0", "ports": ["1-65535"]},
                                      {"cidr": "0.0.0.0/0", "proto": "udp", "ports": ["1-65535"]}]})
    try:
        for addr, port in (("127.0.0.1", 7779), ("127.0.0.1", HOST_PORT), (gw, HOST_PORT), (FAR_GW, HOST_PORT),
                           (world["api"], HOST_PORT), (world["api"], world["d"].port)):
            res = xchg(world, box, "tcp", addr, port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert not (isinstance(res, bytes) and b"200" in res[:20]), (addr, port, res)
            assert xchg(world, box, "udp", addr, HOST_UDP, b"host-udp") == "none", addr
        # and by name: a DNS answer naming the host's own address is dropped
        assert dns(world, box, "hostaddr.test") == (3, [])
        assert dns(world, box, "rebind.test") == (3, [])
        assert host_log(world) == ""
    finally:
        set_policy(world, box, POLICY)


# ---- other sandboxes ----

def test_other_sandbox_unreachable_and_spoofing_it(world, box):
    d = world["d"]
    victim = d.create(network={"allow": [{"cidr": f"{A}/32", "proto": "udp", "ports": [5000]}]})["id"]
    try:
        install_probes(d, victim, world["probes"], ["net"])
        v_ip, v_gw = host_end(world, victim)
        me, gw = host_end(world, box)
        set_policy(world, box, {"allow": [{"cidr": "0.0.0.0/0", "ports": ["1-65535"]},
                                          {"cidr": "0.0.0.0/0", "proto": "udp", "ports": ["1-65535"]}]})
        port = 18000 + secrets.randbelow(1000)
        listener = subprocess.Popen([d.s.space_bin, "exec", victim, "--", "net", "listen", "0.0.0.0", str(port), "8000"],
                                    stdout=subprocess.PIPE, text=True,
                                    env={"SPACE_URL": d.url, "SPACE_API_KEY": d.admin_key, "PATH": os.environ["PATH"]})
        try:
            time.sleep(1.5)
            assert xchg(world, box, "tcp", v_ip, port, b"hello") in ("closed", "none")
            assert xchg(world, box, "udp", v_ip, port, b"hello") == "none"
            for p in (10080, 10081, 10053):   # the victim's host end, its gateway ports
                assert d.sh(box, f"net tcp {v_gw} {p} 1500").strip() == "timeout", p
        finally:
            out, _ = listener.communicate(timeout=60)
        assert out.strip().splitlines()[-1:] == ["none"], out
        # a datagram from the victim's address (IP_TRANSPARENT inside the attacker's namespace), to where
        # the victim's policy would let it go: dropped, never relayed
        m = mark(world)
        assert d.sh(box, f"net spoof {v_ip} {A} 5000").strip() in ("sent", "error:EPERM")
        time.sleep(1.0)
        assert [e for e in upstream(world, m) if e["kind"] == "udp"] == []
        # while the victim itself gets there
        assert xchg(world, victim, "udp", A, 5000, b"victim") == b"echo:victim"
    finally:
        set_policy(world, box, POLICY)
        d.delete(victim)



# ---- E2B's model: allow wins, internet by default, names by their address ----

E2B_OPEN = {"allow": [{"cidr": "0.0.0.0/0", "ports": ["1-65535"]},
                      {"cidr": "0.0.0.0/0", "proto": "udp", "ports": ["1-65535"]}],
            "deny": ["other.test"], "precedence": "allow", "default": "allow"}


def test_e2b_model_never_opens_the_guarded_addresses(world, box):
    """What E2B's allowOut 0.0.0.0/0 with internet access maps to: every name
    is decided by the address it resolves to, which is where the guard
    stands: the metadata address, the host's own and loopback, by raw
    address, through the proxy by name, and by SNI/Host, get nothing."""
    me, gw = host_end(world, box)
    set_policy(world, box, E2B_OPEN)
    try:
        assert http(world, box, A, 80, "allowed.test").startswith("HTTP/1.1 200")   # the baseline
        assert http(world, box, A, 8080, A).startswith("HTTP/1.1 200")              # any address, any port
        m = mark(world)
        for name in ("meta.test", "rebind.test", "hostaddr.test"):
            assert dns(world, box, name) == (3, []), name          # answers with guarded addresses: dropped
            assert http(world, box, gw, 10080, name, target=f"http://{name}/") == "HTTP/1.1 502 Bad Gateway", name
            assert http(world, box, gw, 10080, f"{name}:443", target=f"{name}:443", method="CONNECT") \
                == "HTTP/1.1 502 Bad Gateway", name
        for addr in (META, FAR_GW, gw):
            # a name no host entry decides goes by this address: the guard's
            assert http(world, box, addr, 80, "allowed.test") == "HTTP/1.1 403 Forbidden", addr
            assert tls(world, box, addr, 443, "allowed.test") is not True, addr
            assert xchg(world, box, "udp", addr, 5000, b"x") == "none", addr
        for addr in (META, FAR_GW, gw, "127.0.0.1"):
            assert http(world, box, gw, 10080, addr, target=f"http://{addr}/") == "HTTP/1.1 403 Forbidden", addr
        # a host deny entry still holds by name under allow-wins (no allow host entry names it)
        assert http(world, box, gw, 10080, "other.test", target="http://other.test/") == "HTTP/1.1 403 Forbidden"
        assert reached(world, m) == []
        assert host_log(world) == ""
    finally:
        set_policy(world, box, POLICY)
