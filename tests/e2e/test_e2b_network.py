# SPDX-License-Identifier: MIT
"""E2B's network model (allow_internet_access, network.allowOut/denyOut,
PUT /sandboxes/{id}/network) over raw HTTP against a real spaced: the
policy each maps to, what it lets a sandbox reach (curl inside, to a test
host in a network namespace this module creates: DNS and HTTP on 80 and
8080), allow beating deny, the live update, what cannot be mapped as an
E2B-shaped 400, and the guard: allowOut 0.0.0.0/0 with internet access
still reaches neither the host's addresses nor another sandbox. Nothing
leaves the host."""

import secrets
import socket
import threading

import pytest

import e2e_residue as residue
from e2e_upstream import HttpsUpstream
from test_e2b_resume import rest

A, B, HOSTNAME = "a.e2bnet.test", "b.e2bnet.test", "host.e2bnet.test"


@pytest.fixture(scope="module")
def net(e2e_session, tmp_path_factory, request):
    up = HttpsUpstream("spen", "172.26", tmp_path_factory.mktemp("e2bnet"), [A, B], "space e2e e2b network CA")
    d = None
    try:
        # a name that resolves to the host's own address (the host end of the test host's link)
        up_zone_extra(up)
        d = e2e_session.new_daemon(extra_args=[f"--gateway-dns-upstream={up.srv_ip}:53",
                                               f"--gateway-ca-file={up.ca_pem}"])
        d.start()
        yield {"d": d, "up": up}
    finally:
        problems = residue.teardown_daemon(d) if d else []
        up.close()
        if d and not problems:
            residue.remove_daemon_dir(d)
        if problems:
            residue.teardown_failed(request, "e2b network daemon teardown:\n  " + "\n  ".join(problems))


def up_zone_extra(up):
    """HOSTNAME → the host's address: restart the servers with it in the zone."""
    import json
    import subprocess
    from e2e_upstream import PY, SERVERS
    up.proc.stdin.close()
    up.proc.kill()
    up.proc.wait()
    zone = {"_listen": [up.srv_ip], A: [up.srv_ip], B: [up.srv_ip], HOSTNAME: [up.host_ip]}
    up.proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{up.ns}", "--", PY, SERVERS, up.log,
                                f"{up.tmp}/srv.pem", f"{up.tmp}/srv.key", json.dumps(zone)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert up.proc.stdout.readline().strip() == "ready"


def create(net, **body):
    r = rest(net["d"], "POST", "/v2/sandboxes", {"templateID": "base", "timeout": 600, **body})
    assert r.status == 201, r
    sid = r.json()["sandboxID"]
    net["d"].known_alive.add(sid)
    return sid


def kill(net, sid):
    rest(net["d"], "DELETE", f"/sandboxes/{sid}")
    net["d"].known_alive.discard(sid)


def policy(net, sid):
    r = net["d"].show(sid)
    assert r.status == 200, r
    return r.json()["network"]


def reaches(net, sid, url, proxy=True):
    """Whether curl in the sandbox gets url (ending in "/") from the test host, and the host saw it.
    proxy False: straight to the address (the gateway's transparent port), not through HTTP_PROXY."""
    tok = secrets.token_hex(6)
    r = net["d"].exec(sid, shell=f"curl -sf -m 10 {'' if proxy else '--noproxy *'} {url}{tok}")
    got = bool(net["up"].requests(tok))
    assert got == (r.code == 0 and "hello" in r.out), (url, r, got)
    return got


def allow_ip(ip):
    return [{"cidr": f"{ip}/32", "ports": ["1-65535"]}, {"cidr": f"{ip}/32", "proto": "udp", "ports": ["1-65535"]}]


def test_allow_out_beats_deny_out(net):
    ip = net["up"].srv_ip
    sid = create(net, network={"allowOut": [A], "denyOut": ["0.0.0.0/0"]})
    try:
        assert policy(net, sid) == {"allow": [{"host": A, "ports": [80, 443]}], "deny": [{"cidr": "0.0.0.0/0"}],
                                    "precedence": "allow"}
        got = rest(net["d"], "GET", f"/sandboxes/{sid}").json()
        assert got["allowInternetAccess"] is False, got
        assert got["network"] == {"allowPublicTraffic": False, "allowOut": [A], "denyOut": ["0.0.0.0/0"]}, got
        assert reaches(net, sid, f"http://{A}/")                  # the allowed name, over the deny-all
        assert not reaches(net, sid, f"http://{B}/")              # another name at the same address
        assert not reaches(net, sid, f"http://{ip}:8080/", proxy=False)
        assert not reaches(net, sid, f"http://{A}:8080/")         # E2B matches domains on 80/443 only
    finally:
        kill(net, sid)


def test_an_allowed_address_is_every_port_and_every_name_of_it(net):
    ip = net["up"].srv_ip
    sid = create(net, allow_internet_access=False, network={"allowOut": [ip]})
    try:
        assert policy(net, sid) == {"allow": allow_ip(ip), "deny": [], "precedence": "allow"}
        assert rest(net["d"], "GET", f"/sandboxes/{sid}").json()["network"]["allowOut"] == [f"{ip}/32"]
        assert reaches(net, sid, f"http://{ip}:8080/", proxy=False)
        assert reaches(net, sid, f"http://{ip}/")
        assert reaches(net, sid, f"http://{B}:8080/")             # a name goes by its address, as E2B's firewall
    finally:
        kill(net, sid)


def test_internet_access_and_deny_out(net):
    ip = net["up"].srv_ip
    sid = create(net, allow_internet_access=True)
    try:
        assert policy(net, sid) == {"allow": [], "deny": [], "precedence": "allow", "default": "allow"}
        assert rest(net["d"], "GET", f"/sandboxes/{sid}").json()["allowInternetAccess"] is True
        assert reaches(net, sid, f"http://{A}/")
        assert reaches(net, sid, f"http://{ip}:8080/", proxy=False)
        # live: deny the test host's address; a domain in allowOut still wins, other names of it do not
        r = rest(net["d"], "PUT", f"/sandboxes/{sid}/network",
                 {"allow_internet_access": True, "allowOut": [A], "denyOut": [f"{ip}/32"]})
        assert r.status == 204 and r.body == b"", r
        assert policy(net, sid) == {"allow": [{"host": A, "ports": [80, 443]}], "deny": [{"cidr": f"{ip}/32"}],
                                    "precedence": "allow", "default": "allow"}
        assert reaches(net, sid, f"http://{A}/")
        assert not reaches(net, sid, f"http://{B}/")
        assert not reaches(net, sid, f"http://{ip}:8080/", proxy=False)
        # an update omitting a field clears it: internet access unset is space's default (no egress)
        r = rest(net["d"], "PUT", f"/sandboxes/{sid}/network", {})
        assert r.status == 204, r
        assert policy(net, sid) == {"allow": [], "deny": []}
        assert not reaches(net, sid, f"http://{A}/")
        r = rest(net["d"], "PUT", f"/sandboxes/{sid}/network", {"allow_internet_access": False, "allowOut": [B]})
        assert r.status == 204, r
        assert reaches(net, sid, f"http://{B}/") and not reaches(net, sid, f"http://{A}/")
    finally:
        kill(net, sid)


def test_unset_internet_is_the_deployment_default(net):
    sid = create(net)
    try:
        assert policy(net, sid) == {"allow": [], "deny": []}      # space's default: no egress
        got = rest(net["d"], "GET", f"/sandboxes/{sid}").json()
        assert got["allowInternetAccess"] is None and got["network"] == {"allowPublicTraffic": False}, got
        assert not reaches(net, sid, f"http://{A}/")
    finally:
        kill(net, sid)


BAD = [
    ({"network": {"denyOut": ["example.com"]}}, "domain names are not supported for deny rules"),
    ({"network": {"allowOut": ["*.com"]}}, "top-level domain"),
    ({"network": {"allowOut": ["*.co.uk"]}}, "public suffix \"co.uk\""),
    ({"network": {"allowOut": ["10.0.0.1/8"]}}, "invalid CIDR"),
    ({"network": {"allowOut": "a.example"}}, "network.allowOut must be an array of strings"),
    ({"network": {"allowOut": [1]}}, "network.allowOut[0] must be a non-empty string"),
    ({"network": {"denyOut": [""]}}, "network.denyOut[0] must be a non-empty string"),
    ({"network": {"allowOut": ["127.0.0.1"]}}, "never reachable"),
    ({"network": {"egressProxy": {"address": "proxy.example.com:1080"}}}, "egressProxy is not supported"),
    ({"network": {"rules": {"api.example.com": [{"transform": {"headers": {"X": "y"}}}]}}},
     "header X: space puts only stored secrets"),
    ({"network": {"rules": {"api.example.com": [{"transform": {"headers": {"X": "${e2b.identity.tokens.aws}"}}}]}}},
     "workload identity tokens are not supported"),
    ({"network": {"rules": {"api.example.com": [{"transform": {"headers": {"X": "${e2b.secrets.nope-none}"}}}]}}},
     "secret 'nope-none': the tenant has no space credential of that name"),
    ({"network": {"rules": {"*": [{}]}}}, "network.rules: \"*\" is not a host name"),
    ({"network": {"rules": {"a.example": {}}}}, "must be an array of rules"),
    ({"network": {"rules": []}}, "network.rules must be an object"),
    ({"network": {"maskRequestHost": "${PORT}-x.example.com\r\nX-Evil: 1"}}, "maskRequestHost '${PORT}-x.example.com"),
    ({"network": {"httpsPorts": [3000]}}, "httpsPorts is not supported"),
    ({"network": {"allowOutt": []}}, "network: unknown field \"allowOutt\""),
    ({"network": []}, "network must be an object"),
    ({"allow_internet_access": "yes"}, "allow_internet_access must be a boolean"),
]


@pytest.mark.parametrize("body,msg", BAD, ids=[str(i) for i in range(len(BAD))])
def test_what_cannot_be_mapped_is_a_400(net, body, msg):
    before = len(net["d"].api("GET", "/v1/sandboxes").json()["sandboxes"])
    r = rest(net["d"], "POST", "/v2/sandboxes", {"templateID": "base", **body})
    assert r.status == 400, r
    assert r.json()["code"] == 400 and msg in r.json()["message"], r.json()
    assert len(net["d"].api("GET", "/v1/sandboxes").json()["sandboxes"]) == before


def test_update_bad_input_and_unknown_sandbox(net):
    sid = create(net, network={"allowOut": [A], "denyOut": ["0.0.0.0/0"]})
    try:
        want = policy(net, sid)
        for body, msg in [({"denyOut": ["a.example"]}, "domain names are not supported"),
                          ({"rules": {"h.example": [{"transform": {"headers": {"X": "v"}}}]}},
                           "space puts only stored secrets"),
                          ({"allowPublicTraffic": True}, "unknown field \"allowPublicTraffic\""),
                          ({"allow_internet_access": 1}, "must be a boolean")]:
            r = rest(net["d"], "PUT", f"/sandboxes/{sid}/network", body)
            assert r.status == 400 and r.json()["code"] == 400 and msg in r.json()["message"], (body, r)
            assert policy(net, sid) == want
        r = rest(net["d"], "PUT", f"/sandboxes/{sid}/network", [1])
        assert r.status == 400, r
        r = rest(net["d"], "PUT", "/sandboxes/zzzzzzzzzzzzzzzz/network", {})
        assert r.status == 404 and r.json()["code"] == 404, r
        r = rest(net["d"], "GET", f"/sandboxes/{sid}/network")
        assert r.status == 405, r
        assert reaches(net, sid, f"http://{A}/")
    finally:
        kill(net, sid)


class Listener:
    """A TCP listener on the host at addr: every connection it gets is counted."""

    def __init__(self, addr):
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind((addr, 0))
        self.s.listen(16)
        self.port = self.s.getsockname()[1]
        self.got = 0
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            self.got += 1
            c.close()

    def close(self):
        self.s.shutdown(socket.SHUT_RDWR)
        self.s.close()
        self.t.join(10)


def test_allow_all_never_opens_the_host_or_another_sandbox(net):
    """The attack: internet access, allowOut 0.0.0.0/0 (which wins over any
    deny). The gateway's guard still refuses the host's own addresses (a
    listener on the host end of the test host's link), by address and by a
    name resolving there, and another sandbox's address."""
    d, up = net["d"], net["up"]
    victim = create(net, allow_internet_access=True)
    attacker = create(net, allow_internet_access=True, network={"allowOut": ["0.0.0.0/0"]})
    lst = Listener(up.host_ip)
    try:
        assert policy(net, attacker)["allow"] == [{"cidr": "0.0.0.0/0", "ports": ["1-65535"]},
                                                  {"cidr": "0.0.0.0/0", "proto": "udp", "ports": ["1-65535"]}]
        assert reaches(net, attacker, f"http://{up.srv_ip}:8080/", proxy=False)   # the baseline gets through
        for url, proxy in [(f"http://{up.host_ip}:{lst.port}/", False), (f"http://{up.host_ip}:{lst.port}/", True),
                           (f"http://{HOSTNAME}:{lst.port}/", True), ("http://169.254.169.254/", True),
                           ("http://169.254.169.254/", False)]:
            r = d.exec(attacker, shell=f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' {'' if proxy else '--noproxy *'} {url}")
            assert r.code != 0 or r.out.strip() in ("403", "502"), (url, r)
        assert lst.got == 0, "a connection reached the host"
        # the victim serves on its own address; the attacker gets nothing from it
        port = 18000 + secrets.randbelow(1000)
        d.sh(victim, f"mkdir -p /tmp/www && echo victim > /tmp/www/index.html && httpd -p {port} -h /tmp/www")
        v_ip = d.sh(victim, "ip -4 -o addr show dev eth0").split("inet ")[1].split("/")[0]
        assert "victim" in d.sh(victim, f"curl -s -m 5 --noproxy '*' http://127.0.0.1:{port}/")
        for proxy in (False, True):
            r = d.exec(attacker, shell=f"curl -s -m 5 {'' if proxy else '--noproxy *'} http://{v_ip}:{port}/")
            assert "victim" not in r.out, r
        events = d.api("GET", "/v1/events", params={"sandbox": attacker, "limit": "500"}).json()["events"]
        whys = " ".join(str(e.get("data", {}).get("why", "")) + " " + e.get("reason", "")
                        for e in events if e["type"] == "network.deny")
        assert "host address" in whys, whys
    finally:
        lst.close()
        kill(net, attacker)
        kill(net, victim)


def test_cli_policy_keeps_precedence_and_default(net):
    d = net["d"]
    sid = create(net, allow_internet_access=True, network={"denyOut": ["203.0.113.0/24"]})
    try:
        r = d.cli("policy", sid)
        assert r.rc == 0 and "an allow rule wins over a deny rule" in r.out and "what no rule names is allowed" in r.out, r
        assert "no egress" not in r.out, r
        r = d.cli("policy", sid, "--allow", A)
        assert r.rc == 0, r
        assert policy(net, sid) == {"allow": [{"host": A, "ports": [80, 443]}], "deny": [{"cidr": "203.0.113.0/24"}],
                                    "precedence": "allow", "default": "allow"}
        assert d.cli("policy", sid, "--clear").rc == 0
        assert policy(net, sid) == {"allow": [], "deny": []}
    finally:
        kill(net, sid)


def test_e2b_internet_makes_internet_access_the_default(e2e_session, net, request):
    """e2b_internet = 1: what leaves allowInternetAccess unset gets it (E2B's
    default), the guard still holds; false and denyOut still close it."""
    up = net["up"]
    d = e2e_session.new_daemon(extra_args=[f"--gateway-dns-upstream={up.srv_ip}:53", "--e2b-internet=1"])
    d.start()
    other = {"d": d, "up": up}
    try:
        sid = create(other)
        assert policy(other, sid) == {"allow": [], "deny": [], "precedence": "allow", "default": "allow"}
        assert reaches(other, sid, f"http://{A}/") and reaches(other, sid, f"http://{up.srv_ip}:8080/", proxy=False)
        r = d.exec(sid, shell=f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' http://{HOSTNAME}:7/")
        assert r.code != 0 or r.out.strip() in ("403", "502"), r    # the host's own address: never
        r = rest(d, "PUT", f"/sandboxes/{sid}/network", {"allowOut": [A], "denyOut": ["0.0.0.0/0"]})
        assert r.status == 204, r
        assert reaches(other, sid, f"http://{A}/") and not reaches(other, sid, f"http://{B}/")
        kill(other, sid)
        sid = create(other, allow_internet_access=False)
        assert policy(other, sid) == {"allow": [], "deny": [], "precedence": "allow"}
        assert not reaches(other, sid, f"http://{A}/")
        kill(other, sid)
        # the space API keeps its own default
        sb = d.create()
        assert sb["network"] == {"allow": [], "deny": []}
        d.delete(sb["id"])
    finally:
        problems = residue.teardown_daemon(d)
        if not problems:
            residue.remove_daemon_dir(d)
        else:
            residue.teardown_failed(request, "e2b_internet daemon teardown:\n  " + "\n  ".join(problems))


def test_create_from_a_snapshot_takes_the_network_options(net):
    src = create(net, allow_internet_access=True)
    made = [src]
    try:
        r = rest(net["d"], "POST", f"/sandboxes/{src}/snapshots", {})
        assert r.status in (200, 201), r
        snap = r.json()["snapshotID"]
        # without options the child keeps its source's policy, as a branch does
        made.append(create(net, templateID=snap))
        assert policy(net, made[-1]) == policy(net, src)
        made.append(create(net, templateID=snap, network={"allowOut": [A], "denyOut": ["0.0.0.0/0"]}))
        assert policy(net, made[-1]) == {"allow": [{"host": A, "ports": [80, 443]}], "deny": [{"cidr": "0.0.0.0/0"}],
                                         "precedence": "allow"}
        assert reaches(net, made[-1], f"http://{A}/") and not reaches(net, made[-1], f"http://{B}/")
        before = len(net["d"].api("GET", "/v1/sandboxes").json()["sandboxes"])
        for bad in ({"network": {"denyOut": ["a.example"]}}, {"network": {"allowOut": ["*.com"]}}):
            r = rest(net["d"], "POST", "/v2/sandboxes", {"templateID": snap, **bad})
            assert r.status == 400 and r.json()["code"] == 400, (bad, r)
        assert len(net["d"].api("GET", "/v1/sandboxes").json()["sandboxes"]) == before   # refused before anything is made
    finally:
        for sid in made:
            kill(net, sid)


def test_rules_header_transforms_are_space_credentials(net):
    """A transform naming ${e2b.secrets.NAME} is space's credential NAME
    granted to the sandbox: the gateway puts the value on its HTTPS requests
    to the host, and the value is nowhere inside."""
    d, up = net["d"], net["up"]
    name, value = "e2btok" + secrets.token_hex(3), "s3cret-" + secrets.token_hex(8)
    r = d.api("POST", "/v1/credentials", json={"name": name, "value": value, "hosts": [A]})
    assert r.status == 201, r
    rules = {A: [{"transform": {"headers": {"Authorization": "Bearer ${e2b.secrets.%s}" % name}}}]}
    sid = None
    try:
        # a credential that applies otherwise, or not to that host: refused with what it does
        for bad, msg in [({A: [{"transform": {"headers": {"X-Key": "${e2b.secrets.%s}" % name}}}]},
                          f"credential '{name}' applies as 'Authorization: Bearer {{value}}', the transform asks "
                          "'X-Key: {value}'"),
                         ({B: rules[A]}, f"credential '{name}' is not for that host")]:
            r = rest(d, "POST", "/v2/sandboxes", {"templateID": "base", "network": {"rules": bad}})
            assert r.status == 400 and msg in r.json()["message"], (bad, r)
        sid = create(net, network={"allowOut": [A], "denyOut": ["0.0.0.0/0"], "rules": rules})
        grants = d.api("GET", f"/v1/sandboxes/{sid}/credentials").json()
        assert [g["name"] for g in grants["credentials"]] == [name], grants
        tok = secrets.token_hex(6)
        r = d.exec(sid, shell=f"curl -sf -m 10 https://{A}/{tok}")
        assert r.code == 0 and "hello" in r.out, r
        got = up.requests(tok)
        assert got and got[0]["auth"] == f"Bearer {value}", got
        r = d.exec(sid, shell="cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; cat /etc/ssl/certs/*.pem 2>/dev/null")
        assert value not in r.out
        # an update saying the same rules is fine; one changing them is the space API's
        r = rest(d, "PUT", f"/sandboxes/{sid}/network", {"allowOut": [A], "denyOut": ["0.0.0.0/0"], "rules": rules})
        assert r.status == 204, r
        other = "e2bother" + secrets.token_hex(3)
        assert d.api("POST", "/v1/credentials", json={"name": other, "value": "x", "hosts": [B]}).status == 201
        try:
            r = rest(d, "PUT", f"/sandboxes/{sid}/network", {"rules": {B: [{"transform": {"headers": {
                "Authorization": "Bearer ${e2b.secrets.%s}" % other}}}]}})
            assert r.status == 400 and "would change the sandbox's credentials" in r.json()["message"], r
        finally:
            d.api("DELETE", f"/v1/credentials/{other}")
        assert policy(net, sid)["deny"] == [{"cidr": "0.0.0.0/0"}]
    finally:
        if sid:
            kill(net, sid)
        d.api("DELETE", f"/v1/credentials/{name}")


def test_secrets_are_credentials_never_shown(net):
    """/secrets over raw HTTP: create, list, get (by id and name), update,
    delete in E2B's shapes; no response carries the value; bad input is an
    E2B-shaped 400; another tenant sees nothing and cannot name it."""
    d = net["d"]
    name, value = "E2bSec" + secrets.token_hex(3), "sv-" + secrets.token_hex(12)
    low = name.lower()
    bodies = []

    def call(method, path, body=None, key=None):
        r = rest(d, method, path, body, key=key)
        bodies.append(r.body)
        return r

    r = call("POST", "/secrets", {"name": name, "value": value})
    assert r.status == 201, r
    s = r.json()
    assert s["name"] == low and s["currentVersion"] == 1 and s["metadata"] == {}, s
    assert s["secretID"].startswith("cr_") and s["createdAt"] and s["updatedAt"], s
    sid_ = s["secretID"]
    try:
        assert call("POST", "/secrets", {"name": low, "value": "x"}).status == 409
        for bad, msg in [({"value": "x"}, "name is required"),
                         ({"name": "a{b}", "value": "x"}, "a secret name is"),
                         ({"name": "sec_x", "value": "x"}, "reserved"),
                         ({"name": "okname", "value": ""}, "value must not be empty"),
                         ({"name": "okname"}, "value is required"),
                         ({"name": "okname", "value": 5}, "value must be a string"),
                         ({"name": "okname", "value": "x", "metadata": {"k": "v"}}, "metadata is not supported"),
                         ({"name": "okname", "value": "x", "other": 1}, "unknown field 'other'")]:
            r = call("POST", "/secrets", bad)
            assert r.status == 400 and r.json()["code"] == 400 and msg in r.json()["message"], (bad, r)
        r = call("GET", "/secrets?limit=0")
        assert r.status == 400 and r.json()["code"] == 400, r
        r = call("GET", "/secrets")
        assert r.status == 200 and [x for x in r.json() if x["secretID"] == sid_][0]["name"] == low, r
        for ref in (sid_, low, name):
            r = call("GET", f"/secrets/{ref}")
            assert r.status == 200 and r.json()["secretID"] == sid_, (ref, r)
        r = call("POST", f"/secrets/{low}", {"value": value + "2"})
        assert r.status == 200 and r.json()["currentVersion"] == 2, r
        r = call("POST", f"/secrets/{low}", {"value": ""})
        assert r.status == 400 and r.json()["code"] == 400, r
        assert call("POST", "/secrets/nosuchsecret", {"value": "x"}).status == 404
        # the space API shows it as a credential without hosts, and will not grant it bare
        r = d.api("GET", f"/v1/credentials/{low}")
        assert r.status == 200 and r.json()["hosts"] == [], r
        bodies.append(r.body)
        # another tenant: nothing to see, nothing to name
        r = d.api("POST", "/v1/keys", json={"name": "e2bsec-other", "tenant": "sec" + secrets.token_hex(4)})
        assert r.status == 201, r
        other = r.json()["key"]
        assert call("GET", f"/secrets/{sid_}", key=other).status == 404
        assert call("GET", f"/secrets/{low}", key=other).status == 404
        assert call("DELETE", f"/secrets/{low}", key=other).status == 404
        assert call("POST", f"/secrets/{low}", {"value": "stolen"}, key=other).status == 404
        assert all(x["secretID"] != sid_ for x in call("GET", "/secrets", key=other).json())
        r = call("POST", "/v2/sandboxes", {"templateID": "base", "network": {"rules": {A: [{"transform": {
            "headers": {"Authorization": "Bearer ${e2b.secrets.%s}" % low}}}]}}}, key=other)
        assert r.status == 400 and "has no space credential of that name" in r.json()["message"], r
    finally:
        r = call("DELETE", f"/secrets/{sid_}")
    assert r.status == 204, r
    assert call("GET", f"/secrets/{low}").status == 404
    assert call("DELETE", f"/secrets/{low}").status == 404
    for b in bodies:
        assert value.encode() not in b


def test_a_secret_goes_only_where_the_rules_put_it(net):
    """A /secrets secret named in network.rules for host A: the gateway puts
    it on requests to A in the rule's header, not on requests to B (allowed
    too), never inside the sandbox; an update reaches the running sandbox."""
    d, up = net["d"], net["up"]
    name, value = "e2bscope" + secrets.token_hex(3), "scoped-" + secrets.token_hex(10)
    r = rest(d, "POST", "/secrets", {"name": name, "value": value})
    assert r.status == 201, r
    sid = None
    try:
        # a bare grant through the space API is refused: it has no hosts
        rules = {A: [{"transform": {"headers": {"X-Api-Key": "key=${e2b.secrets.%s}" % name.upper()}}}]}
        r = rest(d, "POST", "/v2/sandboxes", {"templateID": "base", "network": {"rules": {
            A: [{"transform": {"headers": {"X-Api-Key": "${e2b.secrets.%s}" % name}}}],
            B: [{"transform": {"headers": {"Authorization": "${e2b.secrets.%s}" % name}}}]}}})
        assert r.status == 400 and "in one header only" in r.json()["message"], r
        sid = create(net, network={"allowOut": [A, B], "denyOut": ["0.0.0.0/0"], "rules": rules})
        r = d.api("POST", f"/v1/sandboxes/{sid}/credentials/{name}")
        assert r.status == 400 and "names no hosts" in r.json()["error"]["message"], r
        for host, want in ((A, f"key={value}"), (B, None)):
            tok = secrets.token_hex(6)
            # B is not intercepted (nothing to put on it): its own certificate, which the sandbox does not trust
            r = d.exec(sid, shell=f"curl -sf -m 10 {'' if want else '-k'} https://{host}/{tok}")
            assert r.code == 0 and "hello" in r.out, r
            got = up.requests(tok)
            assert got and got[0]["x_api_key"] == want, got
        r = d.exec(sid, shell="cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; env; "
                              "grep -rs . /etc /root /tmp /home 2>/dev/null | head -c 2000000")
        assert value not in r.out
        # updateNetwork may repeat the rules; naming the secret for another host changes the grant: refused
        r = rest(d, "PUT", f"/sandboxes/{sid}/network", {"allowOut": [A, B], "denyOut": ["0.0.0.0/0"], "rules": rules})
        assert r.status == 204, r
        r = rest(d, "PUT", f"/sandboxes/{sid}/network", {"rules": {B: rules[A]}})
        assert r.status == 400 and "would change the sandbox's credentials" in r.json()["message"], r
        assert rest(d, "POST", f"/secrets/{name}", {"value": value + "-v2"}).status == 200
        tok = secrets.token_hex(6)
        r = d.exec(sid, shell=f"curl -sf -m 10 https://{A}/{tok}")
        assert r.code == 0, r
        got = up.requests(tok)
        assert got and got[0]["x_api_key"] == f"key={value}-v2", got
    finally:
        if sid:
            kill(net, sid)
        rest(d, "DELETE", f"/secrets/{name}")
