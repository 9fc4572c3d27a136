# SPDX-License-Identifier: MIT
"""The sandbox network: each sandbox has eth0 with its own /31 address and a
default route via the host end, and reaches nothing but the gateway's ports on
its own host end. The test plays the gateway: it listens on the host end's
proxy, transparent and DNS ports and checks where each connection lands (and,
for redirected ones, the original destination from conntrack).

The firewall tests run on a daemon of their own with `gateway = off`, so the
test's listeners stand in for the gateway; the last test checks the wiring of
the real gateway on the session's daemon.

Traffic goes only to the sandbox links' own addresses, the host's own
addresses and a test host in a network namespace this module creates."""

import ipaddress
import os
import re
import secrets
import select
import socket
import struct
import subprocess
import threading
import time

import pytest

import e2e_host as host
import e2e_residue as residue
from attack_util import Sandboxes, delete_and_check, install_probes

SO_ORIGINAL_DST = 80
SO_RCVMARK, SO_RCVPRIORITY, SO_MARK, SO_PRIORITY = 75, 82, 36, 12
UDP_PORTS = 8          # the gateway's UDP ports from gateway_ports.udp
WAIT = 3.0
PROBE_MS = 1500


# ---- helpers ----

def net_info(spaced):
    r = spaced.api("GET", "/v1/info")
    assert r.status == 200, r
    return r.json()["network"]


def addrs(spaced, sid):
    """(sandbox address, host end), as the sandbox sees its eth0."""
    out = spaced.sh(sid, "ip -4 -o addr show dev eth0")
    m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/31", out)
    assert m, f"eth0 of {sid} has no /31: {out!r}"
    me = ipaddress.ip_address(m.group(1))
    return str(me), str(me - 1)


def link_of(spaced, addr):
    pool = ipaddress.ip_network(spaced.net_pool)
    slot = (int(ipaddress.ip_address(addr)) - int(pool.network_address)) // 2
    return f"{spaced.net_prefix}{slot}"


def set_elements(spaced):
    r = subprocess.run(["nft", "list", "set", "inet", spaced.net_table, "links"], capture_output=True, text=True,
                       timeout=30)
    return r.stdout if r.returncode == 0 else ""


def probe(spaced, sid, *args):
    return spaced.sh(sid, "net " + " ".join(str(a) for a in args)).strip()


class Listener:
    """A TCP or UDP socket on the host, bound to one address and port."""

    def __init__(self, addr, port, udp=False, origin=False):
        self.udp = udp
        self.origin = origin
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if udp else socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if origin:   # like the gateway's UDP ports: the firewall's copy of the original destination
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVMARK, 1)
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVPRIORITY, 1)
        self.sock.bind((addr, port))
        if not udp:
            self.sock.listen(16)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def take(self, timeout=0.5):
        """TCP: the original destination (addr, port) of one accepted
        connection; UDP: (payload, source address). None if nothing came."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return None
        if self.udp and self.origin:
            data, anc, _, src = self.sock.recvmsg(4096, 256)
            cm = {(lvl, t): c for lvl, t, c in anc}
            mark, prio = cm.get((socket.SOL_SOCKET, SO_MARK)), cm.get((socket.SOL_SOCKET, SO_PRIORITY))
            dst = (socket.inet_ntoa(mark[:4]), struct.unpack("!H", prio[2:4])[0]) if mark and prio else None
            return data, src[0], dst
        if self.udp:
            data, src = self.sock.recvfrom(4096)
            return data, src[0]
        c, _ = self.sock.accept()
        with c:
            raw = c.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
            port, a = struct.unpack("!2xH4s8x", raw)
            return socket.inet_ntoa(a), port

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def netd(e2e_session, request):
    """A daemon without the gateway process: the tests play the gateway."""
    d = e2e_session.new_daemon(extra_args=["--gateway=off"])
    d.start()
    yield d
    residue.finish_daemon(d, request)


@pytest.fixture
def boxes(netd, probes):
    sb = Sandboxes(netd, probes)
    yield sb
    problems = sb.cleanup()
    if problems:
        pytest.fail("cleaning up the test's sandboxes:\n  " + "\n  ".join(problems), pytrace=False)


@pytest.fixture
def gateway(netd):
    """Listeners on a host end's gateway ports: a factory (host end -> dict)."""
    info = net_info(netd)["gateway_ports"]
    made = []

    def make(host_end):
        g = {"proxy": Listener(host_end, info["proxy"]), "transparent": Listener(host_end, info["transparent"]),
             "dns_udp": Listener(host_end, info["dns"], udp=True), "dns_tcp": Listener(host_end, info["dns"]),
             "udp": [Listener(host_end, info["udp"] + i, udp=True, origin=True) for i in range(UDP_PORTS)],
             "ports": info}
        made.extend(g["udp"])
        made.extend(v for v in g.values() if isinstance(v, Listener))
        return g

    yield make
    for l in made:
        l.close()


@pytest.fixture(scope="module")
def net_box(netd, probes):
    sid = netd.create()["id"]
    try:
        install_probes(netd, sid, probes, ["net"])
        yield sid
    finally:
        if netd.running:
            delete_and_check(netd, sid)


def host_addresses():
    """The host's own IPv4 addresses on the interfaces of its default routes
    (not the links that tests running beside us add and remove)."""
    routes = subprocess.run(["ip", "-4", "route", "show", "default"], capture_output=True, text=True,
                            timeout=30).stdout
    devs = set(re.findall(r"\bdev (\S+)", routes))
    res = []
    for dev in sorted(devs):
        out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", dev], capture_output=True, text=True,
                             timeout=30).stdout
        for a in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out):
            if not ipaddress.ip_address(a).is_loopback:
                res.append((dev, a))
    return res


# ---- the link ----

def test_eth0_address_route_resolver_proxy(netd, net_box):
    me, gw = addrs(netd, net_box)
    assert ipaddress.ip_address(me) in ipaddress.ip_network(netd.net_pool)
    route = netd.sh(net_box, "ip -4 route show default")
    assert f"default via {gw} dev eth0" in route, route
    resolv = netd.sh(net_box, "cat /etc/resolv.conf")
    assert re.findall(r"^nameserver (\S+)$", resolv, re.M) == [gw], resolv
    port = net_info(netd)["gateway_ports"]["proxy"]
    env = dict(l.split("=", 1) for l in netd.sh(net_box, "env").splitlines() if "=" in l)
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert env.get(k) == f"http://{gw}:{port}", (k, env.get(k))
    assert "NO_PROXY" in env and "no_proxy" in env
    # the host end: this daemon's prefix, the even address, no IPv6 at all
    link = link_of(netd, me)
    assert link in netd.net_links()
    out = subprocess.run(["ip", "-o", "addr", "show", "dev", link], capture_output=True, text=True).stdout
    assert f"inet {gw}/31" in out and "inet6" not in out, out
    assert f'"{link}" . {me} . {gw}' in set_elements(netd)


def test_info_reports_the_network(netd):
    n = net_info(netd)
    assert n["gateway"] is False
    assert n["pool"] == netd.net_pool
    assert n["nft_table"] == netd.net_table and n["link_prefix"] == netd.net_prefix
    assert n["ipv6"] is False and n["default_egress"] == "none"
    assert set(n["gateway_ports"]) == {"dns", "proxy", "transparent", "udp"}


# ---- where traffic goes ----

def test_gateway_ports_and_redirects(netd, net_box, gateway):
    me, gw = addrs(netd, net_box)
    g = gateway(gw)
    p = g["ports"]
    # the explicit proxy port: straight through, from the sandbox's own address
    assert probe(netd, net_box, "tcp", gw, p["proxy"], PROBE_MS) == "connected"
    assert g["proxy"].take(WAIT) == (gw, p["proxy"])
    # any other TCP port of the host end: to the transparent port, original destination kept
    other = Listener(gw, 0)
    try:
        assert probe(netd, net_box, "tcp", gw, other.port, PROBE_MS) == "connected"
        assert g["transparent"].take(WAIT) == (gw, other.port)
        assert other.take(0.5) is None
    finally:
        other.close()
    # DNS on port 53, UDP and TCP, whatever the address: the gateway's DNS port
    tag = secrets.token_hex(4)
    assert probe(netd, net_box, "udp", gw, 53, tag) == "sent"
    assert g["dns_udp"].take(WAIT) == (tag.encode(), me)
    assert probe(netd, net_box, "tcp", gw, 53, PROBE_MS) == "connected"
    assert g["dns_tcp"].take(WAIT) is not None
    # UDP to any other port: never there, but at one of the gateway's UDP ports, with the
    # original destination in the packet's mark and priority
    u = Listener(gw, 0, udp=True)
    try:
        assert probe(netd, net_box, "udp", gw, u.port, tag) == "sent"
        assert u.take(1.0) is None
        got = [x for x in (l.take(0.2) for l in g["udp"]) if x]
        assert got == [(tag.encode(), me, (gw, u.port))], got
        # the same for an address beyond the host end (the pool's last address: no sandbox of this test's)
        far = str(ipaddress.ip_network(netd.net_pool).broadcast_address)
        assert probe(netd, net_box, "udp", far, 5000, tag + "b") == "sent"
        got = [x for x in (l.take(0.2) for l in g["udp"]) if x]
        assert got == [((tag + "b").encode(), me, (far, 5000))], got
    finally:
        u.close()


def test_without_gateway_nothing_answers(netd, net_box):
    """Default: no egress. With no gateway listening, a redirected connection is refused."""
    me, gw = addrs(netd, net_box)
    res = probe(netd, net_box, "tcp", gw, 22, PROBE_MS)
    assert res in ("refused", "timeout"), res


def test_host_services_unreachable(netd, net_box, gateway):
    """Services of the host on 127.0.0.1 or on every address: not reachable
    through the host end or the host's other addresses."""
    me, gw = addrs(netd, net_box)
    g = gateway(gw)
    lo = Listener("127.0.0.1", 0)
    anyaddr = Listener("0.0.0.0", 0)
    try:
        # sanity: from the host the 0.0.0.0 service answers on the host end
        with socket.create_connection((gw, anyaddr.port), timeout=WAIT):
            pass
        assert anyaddr.take(WAIT) is not None
        targets = [(gw, anyaddr.port), (gw, lo.port), ("127.0.0.1", lo.port)]
        others = [a for _, a in host_addresses() if a != gw]
        assert others, "the host has no address but its sandbox links"
        targets += [(a, anyaddr.port) for a in others]
        for addr, port in targets:
            res = probe(netd, net_box, "tcp", addr, port, PROBE_MS)
            if addr != "127.0.0.1":
                # intercepted: the gateway sees where it was going (and would refuse it)
                assert res == "connected", (addr, res)
                assert g["transparent"].take(WAIT) == (addr, port)
            assert anyaddr.take(0.3) is None and lo.take(0.1) is None, (addr, port)
        # the gateway's own ports on the host's other addresses: dropped
        for a in others:
            assert probe(netd, net_box, "tcp", a, g["ports"]["proxy"], PROBE_MS) == "timeout", a
    finally:
        lo.close()
        anyaddr.close()


def test_other_sandbox_unreachable(netd, boxes, gateway):
    a = boxes.new(with_probes=["net"])
    b = boxes.new(with_probes=["net"])
    a_me, a_gw = addrs(netd, a)
    b_me, b_gw = addrs(netd, b)
    assert a_me != b_me
    ga, gb = gateway(a_gw), gateway(b_gw)
    port = 18000 + secrets.randbelow(1000)
    heard = {}
    t = threading.Thread(target=lambda: heard.update(out=probe(netd, b, "listen", "0.0.0.0", port, 6000)))
    t.start()
    try:
        time.sleep(1.0)
        # A → B's address: intercepted (the gateway sees B's address), B hears nothing
        assert probe(netd, a, "tcp", b_me, port, PROBE_MS) == "connected"
        assert ga["transparent"].take(WAIT) == (b_me, port)
        # A → B's host end on the gateway's ports: dropped, and B's gateway hears nothing
        for name in ("proxy", "transparent", "dns"):
            assert probe(netd, a, "tcp", b_gw, gb["ports"][name], PROBE_MS) == "timeout", name
        assert gb["proxy"].take(0.3) is None and gb["transparent"].take(0.1) is None
    finally:
        t.join(30)
    assert heard.get("out", "").splitlines()[-1:] == ["none"], heard


def test_spoofed_source_gets_nothing(netd, boxes, gateway):
    a = boxes.new(with_probes=["net"])
    b = boxes.new()
    a_me, a_gw = addrs(netd, a)
    b_me, _ = addrs(netd, b)
    g = gateway(a_gw)
    # inside, a forged source cannot even be bound (no CAP_NET_ADMIN/NET_RAW)
    assert probe(netd, a, "spoof", b_me, a_gw, 53).startswith("error:E")
    # the host's root in the sandbox's namespace can forge one: the firewall drops it
    pid = netd.agent_pid(a)
    script = (
        "import socket,sys\n"
        "def send(src, text):\n"
        "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "    s.setsockopt(socket.SOL_IP, 15, 1)\n"   # IP_FREEBIND
        "    s.setsockopt(socket.SOL_IP, 19, 1)\n"   # IP_TRANSPARENT
        "    s.bind((src, 0))\n"
        "    s.sendto(text.encode(), (sys.argv[2], 53))\n"
        "send(sys.argv[1], 'forged')\n"
        "send(sys.argv[3], 'legit')\n")
    r = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "/usr/bin/python3", "-c", script, b_me, a_gw, a_me],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    got = []
    while True:
        x = g["dns_udp"].take(1.5)
        if x is None:
            break
        got.append(x)
    assert got == [(b"legit", a_me)], got


# ---- a test host on another route: no forwarding ----

@pytest.fixture
def far_host():
    """A network namespace with a veth to the host: (address, name)."""
    pid = os.getpid()
    ns = f"space-e2e-th{pid}"
    hl = f"sth{pid % 1000000}"
    net = ipaddress.ip_network(f"172.30.{(pid >> 6) & 255}.{(pid & 63) * 4}/30")
    h, t = str(net[1]), str(net[2])
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "link", "add", hl, "type", "veth", "peer", "name", "eth0", "netns", ns], check=True)
        subprocess.run(["ip", "addr", "add", f"{h}/30", "dev", hl], check=True)
        subprocess.run(["ip", "link", "set", hl, "up"], check=True)
        subprocess.run(["ip", "-n", ns, "addr", "add", f"{t}/30", "dev", "eth0"], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "-n", ns, "route", "add", "default", "via", h], check=True)
        yield t, ns
    finally:
        subprocess.run(["ip", "link", "del", hl], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def far_host_listen(ns, addr, port, seconds):
    """Starts a UDP+TCP listener in the test host; returns the process (prints what arrives)."""
    script = (
        "import socket,select,sys,time\n"
        "u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);u.bind((sys.argv[1],int(sys.argv[2])))\n"
        "t=socket.socket();t.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
        "t.bind((sys.argv[1],int(sys.argv[2])));t.listen(4)\n"
        "print('ready',flush=True)\n"
        "end=time.time()+float(sys.argv[3])\n"
        "while time.time()<end:\n"
        "    r,_,_=select.select([u,t],[],[],0.2)\n"
        "    for s in r:\n"
        "        if s is u: print('udp',u.recvfrom(100)[0].decode(),flush=True)\n"
        "        else: c,_=t.accept(); print('tcp',flush=True); c.close()\n")
    p = subprocess.Popen([*host.netns_exec(ns), "/usr/bin/python3", "-c", script, addr, str(port), str(seconds)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_no_forwarding_to_test_host(netd, net_box, gateway, far_host):
    th, ns = far_host
    me, gw = addrs(netd, net_box)
    link = link_of(netd, me)
    g = gateway(gw)
    port = 19000 + secrets.randbelow(1000)
    # forwarding on for this sandbox link alone, so only the firewall stands between
    with open(f"/proc/sys/net/ipv4/conf/{link}/forwarding", "w") as f:
        f.write("1")
    p = far_host_listen(ns, th, port, 8)
    try:
        # sanity: from the host the test host hears UDP
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"from-host", (th, port))
        assert probe(netd, net_box, "udp", th, port, "from-sandbox") == "sent"
        assert probe(netd, net_box, "tcp", th, port, PROBE_MS) == "connected"
        assert g["transparent"].take(WAIT) == (th, port)      # intercepted, not forwarded
    finally:
        out, _ = p.communicate(timeout=30)
    assert "udp from-host" in out, out
    assert "from-sandbox" not in out and "tcp" not in out, out


# ---- IPv6, raw sockets ----

def test_ipv6_off(netd, net_box):
    assert netd.sh(net_box, "cat /proc/sys/net/ipv6/conf/all/disable_ipv6").strip() == "1"
    assert netd.sh(net_box, "cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6").strip() == "1"
    assert netd.sh(net_box, "cat /proc/net/if_inet6 2>/dev/null || true").strip() == ""
    # and the sandbox cannot turn it back on (no CAP_NET_ADMIN over its network namespace)
    for conf in ("all", "default", "eth0"):
        out = netd.sh(net_box, f"echo 0 > /proc/sys/net/ipv6/conf/{conf}/disable_ipv6 2>/dev/null; "
                               f"cat /proc/sys/net/ipv6/conf/{conf}/disable_ipv6")
        assert out.strip() == "1", (conf, out)
    assert netd.sh(net_box, "cat /proc/net/if_inet6 2>/dev/null || true").strip() == ""
    for addr in ("fd00::1", "::1"):
        res = probe(netd, net_box, "tcp", addr, 80, PROBE_MS)
        assert res.startswith("error:") or res == "refused" and addr == "::1", (addr, res)
        assert res != "connected"


def test_raw_sockets_refused(netd, net_box):
    out = probe(netd, net_box, "raw")
    lines = dict(l.split(" ", 1) for l in out.splitlines())
    assert set(lines) == {"raw-icmp", "raw-ip", "raw-udp", "packet", "packet-dgram"}, out
    for name, res in lines.items():
        assert res.startswith("error:E"), (name, res)   # EPERM: CAP_NET_RAW is not kept


# ---- lifecycle ----

def test_link_and_element_follow_the_sandbox(netd, boxes):
    sid = boxes.new()
    me, gw = addrs(netd, sid)
    link = link_of(netd, me)
    assert link in netd.net_links() and f'"{link}"' in set_elements(netd)
    r = netd.api("POST", f"/v1/sandboxes/{sid}/suspend")
    assert r.status == 200, r
    assert host.wait_until(lambda: link not in netd.net_links(), 10)
    assert f'"{link}"' not in set_elements(netd)
    r = netd.api("POST", f"/v1/sandboxes/{sid}/resume")
    assert r.status == 200, r
    assert addrs(netd, sid) == (me, gw)
    assert link in netd.net_links() and f'"{link}"' in set_elements(netd)
    boxes.delete(sid)
    assert link not in netd.net_links()
    assert f'"{link}"' not in set_elements(netd)


# ---- the real gateway (the session's daemon) ----

def test_gateway_wired(spaced, probes):
    """The worker forks the gateway and registers each sandbox with it: the
    sandbox reaches the gateway's ports on its host end, a connection the
    gateway refuses is an event of the sandbox, and after delete nothing
    listens there any more."""
    assert net_info(spaced)["gateway"] is True
    sid = spaced.create()["id"]
    try:
        install_probes(spaced, sid, probes, ["net"])
        me, gw = addrs(spaced, sid)
        ports = net_info(spaced)["gateway_ports"]
        assert probe(spaced, sid, "tcp", gw, ports["proxy"], PROBE_MS) == "connected"
        # the host end itself on another port: the transparent port, and the gateway refuses it
        probe(spaced, sid, "tcp", gw, 22, PROBE_MS)

        def network_events():
            r = spaced.api("GET", "/v1/events", params={"sandbox": sid, "limit": 100})
            assert r.status == 200, r
            return [e for e in r.json().get("events", []) if e.get("type", "").startswith("network.")]

        assert host.wait_until(lambda: network_events(), 10), "no network event for the refused connection"
        assert any(e["type"] == "network.deny" for e in network_events()), network_events()
        assert listening(gw, ports["proxy"]) and listening(gw, ports["transparent"])
    finally:
        delete_and_check(spaced, sid)
    # unregistered: the gateway's listeners on that host end are gone (read
    # from /proc: the address is no longer on this host, a connect would leave it)
    assert host.wait_until(lambda: not listening(gw, ports["proxy"]) and not listening(gw, ports["transparent"]), 10)


def listening(addr, port):
    """A TCP socket of the host's namespace listens on addr:port (/proc/net/tcp)."""
    want = f"{socket.htonl(int(ipaddress.ip_address(addr))):08X}:{port:04X}"
    with open("/proc/net/tcp") as f:
        next(f)
        return any(line.split()[1] == want and line.split()[3] == "0A" for line in f)
