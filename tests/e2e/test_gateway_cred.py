# SPDX-License-Identifier: MIT
"""Credentials in the egress gateway, standalone (the topology of
test_gateway.py: `sb` plays a sandbox, `gw` the host with the gateway, `srv`
the upstreams with their own CA: a Python HTTP/1.1 server on SRV, nghttpd,
HTTP/2 only, on SRV_H2 for test_gateway_h2.py). The sandbox's link and the
host firewall are production's, made by build/tests/sandbox-link as in
test_gateway.py (sandbox_link), not a copy of its rules. The gateway gets a
master key, the upstreams' CA as its trust store, a sandbox CA and sealed
credentials (tests/gateway/cred-seal, the API's sealing); curl and python3
in `sb` trust the sandbox CA. Fast, and without the debian template
(test_cred_wire.py does the same through a real spaced with the template's
clients)."""

import base64
import json
import os
import secrets
import shutil
import subprocess
import time

import pytest

from e2e_host import netns_exec

from test_gateway import (BUILD, GATEWAY_RUN, PY, SANDBOX_LINK, SERVERS, CutClient, Gateway, cut_events, sandbox_link,
                          sh)

CRED_SEAL = os.path.join(BUILD, "tests", "cred-seal")
HOST_END, SB_IP = "10.232.0.0", "10.232.0.1"
SRV, SRV_GW, SRV_H2, SRV_GRPC = "192.168.232.2", "192.168.232.1", "192.168.232.3", "192.168.232.4"
CRED_HOST, OTHER, BADNAME, H2HOST, FLIPHOST = "cred.test", "plain.test", "badname.test", "h2.test", "flip.test"
GRPCHOST = "grpc.test"
# a name under a public suffix (github.io): only in this test's own zone, served from SRV
PAGESHOST = "someone.github.io"
ZONE = {"_listen": [SRV], "_bind": SRV, CRED_HOST: [SRV], OTHER: [SRV], BADNAME: [SRV], H2HOST: [SRV_H2],
        FLIPHOST: [SRV_H2], GRPCHOST: [SRV_GRPC], PAGESHOST: [SRV]}
POLICY = {"allow": [CRED_HOST, OTHER, BADNAME, H2HOST, GRPCHOST, PAGESHOST, {"host": CRED_HOST, "ports": [8443]},
                    {"host": FLIPHOST, "ports": [8443]}]}
NGHTTPD = "/usr/sbin/nghttpd"
TENANT = "t1"


@pytest.fixture(scope="module")
def cnet(tmp_path_factory):
    for p in (GATEWAY_RUN, SANDBOX_LINK, CRED_SEAL):
        if not os.path.exists(p):
            pytest.skip(f"{p} missing")
    tag = secrets.token_hex(3)
    ns = {k: f"spgc-{tag}-{k}" for k in ("sb", "gw", "srv")}
    tmp = tmp_path_factory.mktemp("gwcred")
    etc = f"/etc/netns/{ns['sb']}"
    procs, gw, net = [], None, None
    try:
        for n in ns.values():
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        # the sandbox's link and the host firewall: production's (test_gateway.sandbox_link)
        sandbox_link(ns["gw"], ns["sb"], f"spgc-{tag}", f"vsb-{tag}", HOST_END, SB_IP)
        sh("ip", "-n", ns["gw"], "link", "add", "vsrv", "type", "veth", "peer", "name", "eth0", "netns", ns["srv"])
        sh("ip", "-n", ns["gw"], "addr", "add", f"{SRV_GW}/24", "dev", "vsrv")
        sh("ip", "-n", ns["srv"], "addr", "add", f"{SRV}/24", "dev", "eth0")
        sh("ip", "-n", ns["srv"], "addr", "add", f"{SRV_H2}/24", "dev", "eth0")
        sh("ip", "-n", ns["srv"], "addr", "add", f"{SRV_GRPC}/24", "dev", "eth0")
        for n, dev in ((ns["gw"], "vsrv"), (ns["srv"], "eth0")):
            sh("ip", "-n", n, "link", "set", dev, "up")
        os.makedirs(etc, exist_ok=True)
        with open(f"{etc}/resolv.conf", "w") as f:
            f.write(f"nameserver {HOST_END}\n")
        # the upstreams' CA and certificate (not for BADNAME), and the sandbox's CA (EC, as the worker makes it)
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=space test upstream CA",
           "-keyout", f"{tmp}/ca.key", "-out", f"{tmp}/ca.pem")
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={CRED_HOST}",
           "-keyout", f"{tmp}/srv.key", "-out", f"{tmp}/srv.csr")
        with open(f"{tmp}/ext", "w") as f:
            f.write(f"subjectAltName=DNS:{CRED_HOST},DNS:{OTHER},DNS:{H2HOST},DNS:{FLIPHOST},DNS:{GRPCHOST},"
                    f"DNS:{PAGESHOST}\n")
        sh("openssl", "x509", "-req", "-in", f"{tmp}/srv.csr", "-CA", f"{tmp}/ca.pem", "-CAkey", f"{tmp}/ca.key",
           "-CAcreateserial", "-days", "2", "-extfile", f"{tmp}/ext", "-out", f"{tmp}/srv.pem")
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
           "-subj", "/CN=space sandbox sb1", "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
           "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", f"{tmp}/sbca.key", "-out", f"{tmp}/sbca.pem")
        os.makedirs(f"{tmp}/state", mode=0o700)
        seal(str(tmp), "cr_warmup", "warmup", "x")   # makes the master key before the gateway reads it
        log = f"{tmp}/upstream.log"
        open(log, "w").close()
        srv = subprocess.Popen([*netns_exec(ns["srv"]), PY, SERVERS, log, f"{tmp}/srv.pem",
                                f"{tmp}/srv.key", json.dumps(ZONE)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(srv)
        assert srv.stdout.readline().strip() == "ready"
        h2log = None
        if os.path.exists(NGHTTPD):
            # HTTP/2 only (ALPN h2), every frame logged; it would push pushed.html with index.html and
            # send a trailer after every response body
            os.makedirs(f"{tmp}/www")
            with open(f"{tmp}/www/index.html", "w") as f:
                f.write("hello h2\n")
            with open(f"{tmp}/www/pushed.html", "w") as f:
                f.write("pushed\n")
            with open(f"{tmp}/www/big", "wb") as f:
                f.write(os.urandom(3 * 1024 * 1024 + 17))
            # more than the socket buffers and windows on the way can hold (a download cut midway
            # must still be midway once what was in flight arrives): sparse, free to make
            with open(f"{tmp}/www/huge", "wb") as f:
                f.truncate(64 * 1024 * 1024)
            h2log = f"{tmp}/nghttpd.log"
            h2out = open(h2log, "w")
            h2 = subprocess.Popen([*netns_exec(ns["srv"]), NGHTTPD, "-v", "-a", SRV_H2, "-d", f"{tmp}/www",
                                   "-p", "/index.html=/pushed.html", "--trailer", "x-space-trailer: done",
                                   "443", f"{tmp}/srv.key", f"{tmp}/srv.pem"],
                                  stdin=subprocess.PIPE, stdout=h2out, stderr=subprocess.STDOUT)
            h2out.close()
            procs.append(h2)
            wait_listening(ns["srv"], SRV_H2, 443)
        net = {"ns": ns, "gw": None, "tmp": str(tmp), "log": log, "h2log": h2log}
        net["gw"] = gw = cnet_gateway(net)
        yield net
    finally:
        rc, err = 1, "the gateway did not close"
        try:
            gw = net["gw"] if net else gw   # a test may have replaced it (gateway_options)
            rc, err = gw.close() if gw else (0, "")
        finally:   # the upstreams and namespaces go even if closing the gateway failed
            for p in procs:
                if p.stdin:
                    p.stdin.close()
                p.kill()
                p.wait()
            for n in ns.values():
                subprocess.run(["ip", "netns", "del", n], capture_output=True)
            shutil.rmtree(etc, ignore_errors=True)
    assert rc == 0 and "Sanitizer" not in err and "runtime error" not in err, err
    assert "sk-gw-" not in err   # no value in the gateway's log


def cnet_gateway(net, extra=(), env=None):
    """cnet's gateway (with extra options, in env if given), sb1 registered with POLICY."""
    tmp = net["tmp"]
    gw = Gateway(net["ns"]["gw"], f"{SRV}:53", ["--events-per-sec", "1000", "--state-dir", f"{tmp}/state",
                                                "--ca-file", f"{tmp}/ca.pem", *extra], env=env)
    try:
        r = gw.request("register", id="sb1", tenant=TENANT, sandbox_ip=SB_IP, host_ip=HOST_END, policy=POLICY)
        assert r["ok"], r
    except BaseException:
        gw.close()
        raise
    return gw


def wait_listening(ns, addr, port):
    for _ in range(100):
        if subprocess.run([*netns_exec(ns), "ss", "-Htln", f"src {addr}:{port}"], capture_output=True,
                          text=True).stdout.strip():
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {addr}:{port}")


def seal(tmp, cid, name, value):
    r = subprocess.run([CRED_SEAL, f"{tmp}/state", cid, TENANT, name], input=value, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def cred(net, name, value, hosts, **kw):
    cid = "cr_" + secrets.token_hex(8)
    c = {"id": cid, "tenant": TENANT, "name": name, "hosts": hosts, "apply": "header",
         "header_name": "Authorization", "header_format": "Bearer {value}", **seal(net["tmp"], cid, name, value)}
    c.update(kw)
    return c


def set_creds(net, creds):
    ca = open(f"{net['tmp']}/sbca.pem").read()
    key = open(f"{net['tmp']}/sbca.key").read()
    return net["gw"].request("credentials", id="sb1", ca_cert=ca, ca_key=key, creds=creds)


def curl(net, *args):
    r = subprocess.run([*netns_exec(net["ns"]["sb"]), "curl", "-sS", "--max-time", "10",
                        "--cacert", f"{net['tmp']}/sbca.pem", *args], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout, r.stderr


def upstream(net, tok):
    with open(net["log"]) as f:
        return [e for e in (json.loads(l) for l in f if l.strip()) if e.get("kind") == "http" and tok in e["path"]]


def test_header_added_transparent_and_connect(cnet):
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(cnet, [cred(cnet, "api", v, [CRED_HOST])])["ok"]
    tok = secrets.token_hex(4)
    rc, out, err = curl(cnet, f"https://{CRED_HOST}/{tok}/transparent")
    assert rc == 0 and "hello host=cred.test" in out, err
    rc, out, err = curl(cnet, "-x", f"http://{HOST_END}:10080", f"https://{CRED_HOST}/{tok}/connect")
    assert rc == 0, err
    rc, out, err = curl(cnet, "-x", f"http://{HOST_END}:10080", f"https://{CRED_HOST}:8443/{tok}/connect8443")
    assert rc == 0, err
    got = upstream(cnet, tok)
    assert len(got) == 3 and all(e["auth"] == f"Bearer {v}" and e["tls"] for e in got), got
    assert cnet["gw"].wait_event(lambda e: e["event"] == "credential.used" and e["data"] == {
        "credential": "api", "host": CRED_HOST})
    assert not any(v in json.dumps(e) for e in cnet["gw"].events)


def test_placeholder_replaced_keepalive_and_rotation(cnet):
    v1, v2 = "sk-gw-" + secrets.token_hex(12), "sk-gw-" + secrets.token_hex(12)
    c = cred(cnet, "ph", v1, [CRED_HOST], header_name="X-Api-Key", header_format="{value}")
    assert set_creds(cnet, [c])["ok"]
    tok = secrets.token_hex(4)
    # two requests on one connection, the second after a rotation
    code = (f"import http.client, ssl, sys\n"
            f"c = http.client.HTTPSConnection('{CRED_HOST}', context=ssl.create_default_context(cafile=sys.argv[1]))\n"
            f"c.request('GET', '/{tok}/1', headers={{'Authorization': 'Token space-cred-ph'}}); r = c.getresponse(); r.read()\n"
            f"print(r.status, flush=True); sys.stdin.readline()\n"
            f"c.request('GET', '/{tok}/2', headers={{'Authorization': 'Token space-cred-ph'}}); r = c.getresponse(); r.read()\n"
            f"print(r.status, flush=True)\n")
    p = subprocess.Popen([*netns_exec(cnet["ns"]["sb"]), PY, "-c", code, f"{cnet['tmp']}/sbca.pem"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "200", p.stderr.read()
        c2 = dict(c, **seal(cnet["tmp"], c["id"], "ph", v2))
        assert set_creds(cnet, [c2])["ok"]
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "200", p.stderr.read()
    finally:
        p.kill()
        p.wait()
    got = upstream(cnet, tok)
    assert [e["auth"] for e in got] == [f"Token {v1}", f"Token {v2}"], got


def test_revoked_expired_and_other_hosts_get_nothing(cnet):
    v = "sk-gw-" + secrets.token_hex(12)
    c = cred(cnet, "rv", v, [CRED_HOST])
    assert set_creds(cnet, [dict(c, revoked_usec=1)])["ok"]
    tok = secrets.token_hex(4)
    rc, out, err = curl(cnet, "-k", "-H", "Authorization: Bearer space-cred-rv", f"https://{CRED_HOST}/{tok}/revoked")
    assert rc == 0, err
    assert set_creds(cnet, [dict(c, expires_usec=1000)])["ok"]
    rc, out, err = curl(cnet, "-k", "-H", "Authorization: Bearer space-cred-rv", f"https://{CRED_HOST}/{tok}/expired")
    assert rc == 0, err
    got = upstream(cnet, tok)
    assert [e["auth"] for e in got] == ["Bearer space-cred-rv"] * 2, got


def test_stored_pattern_over_a_public_suffix_is_not_injected(cnet):
    # a credential stored before the API refused "*.github.io" (or before the
    # list grew): the gateway keeps its other hosts but never puts the value on
    # a request to a name under the public suffix
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(cnet, [cred(cnet, "ps", v, ["*.github.io", CRED_HOST])])["ok"]
    tok = secrets.token_hex(4)
    rc, out, err = curl(cnet, f"https://{CRED_HOST}/{tok}/kept")
    assert rc == 0, err
    # not intercepted: the upstream's own certificate (not the sandbox CA's), so -k
    rc, out, err = curl(cnet, "-k", "-H", "Authorization: Bearer space-cred-ps", f"https://{PAGESHOST}/{tok}/suffix")
    assert rc == 0, err
    got = upstream(cnet, tok)
    assert [(e["path"].rsplit("/", 1)[1], e["auth"]) for e in got] == [
        ("kept", f"Bearer {v}"), ("suffix", "Bearer space-cred-ps")], got
    assert set_creds(cnet, [])["ok"]


def test_tunnelled_host_and_plain_http(cnet):
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(cnet, [cred(cnet, "api", v, [CRED_HOST])])["ok"]
    tok = secrets.token_hex(4)
    # no credential for OTHER: tunnelled, the client sees the upstream's certificate (its CA, not the sandbox's)
    rc, out, err = curl(cnet, "--cacert", f"{cnet['tmp']}/ca.pem", f"https://{OTHER}/{tok}/tunnel")
    assert rc == 0, err
    rc, out, err = curl(cnet, f"https://{OTHER}/{tok}/tunnel-sbca")
    assert rc != 0, out
    # plain HTTP to the credential host: refused, never sent
    rc, out, err = curl(cnet, "-w", " %{http_code}", f"http://{CRED_HOST}/{tok}/plain")
    assert rc == 0 and out.endswith(" 403") and "use https" in out, out
    assert [e["path"].rsplit("/", 1)[1] for e in upstream(cnet, tok)] == ["tunnel"]
    assert [e["auth"] for e in upstream(cnet, tok)] == [None]


def test_bad_upstream_certificate_and_host_mismatch(cnet):
    v = "sk-gw-" + secrets.token_hex(12)
    assert set_creds(cnet, [cred(cnet, "bad", v, [BADNAME, CRED_HOST])])["ok"]
    tok = secrets.token_hex(4)
    rc, out, err = curl(cnet, "-w", " %{http_code}", f"https://{BADNAME}/{tok}/bad")
    assert rc == 0 and out.endswith(" 502") and "certificate" in out, (out, err)
    assert cnet["gw"].wait_event(lambda e: e["event"] == "network.deny" and "certificate" in e["reason"])
    # TLS to CRED_HOST with a Host header naming another host: refused inside TLS
    rc, out, err = curl(cnet, "-w", " %{http_code}", "-H", f"Host: {OTHER}", f"https://{CRED_HOST}/{tok}/mismatch")
    assert rc == 0 and out.endswith(" 421"), (out, err)
    assert upstream(cnet, tok) == []


def test_no_master_key_value_fails_closed(cnet):
    v = "sk-gw-" + secrets.token_hex(12)
    c = cred(cnet, "tamper", v, [CRED_HOST])
    ok = set_creds(cnet, [c])
    assert ok["ok"]
    bad = dict(c, name="other-name")   # sealed for another name: does not open
    r = set_creds(cnet, [bad])
    assert not r["ok"] and "does not open" in r["error"], r
    tok = secrets.token_hex(4)
    rc, out, err = curl(cnet, "--cacert", f"{cnet['tmp']}/ca.pem", f"https://{CRED_HOST}/{tok}/closed")
    assert rc == 0, err
    assert [e["auth"] for e in upstream(cnet, tok)] == [None]   # tunnelled, nothing added


@pytest.mark.parametrize("via", ["transparent", "connect"])
def test_policy_change_cuts_an_intercepted_connection(cnet, via):
    """An intercepted connection (TLS ended here, the credential on each
    request) to a host the policy then denies: reset at once mid-download,
    with a network.deny event; an intercepted download from a host that stays
    allowed goes on byte-exact."""
    gw = cnet["gw"]
    assert set_creds(cnet, [cred(cnet, "api", "sk-gw-" + secrets.token_hex(12), [CRED_HOST, OTHER])])["ok"]
    ca = f"{cnet['tmp']}/sbca.pem"
    size = 64 << 20
    cut = CutClient(cnet, via, CRED_HOST, size, ca=ca, proxy=HOST_END)
    kept = None
    try:
        kept = CutClient(cnet, via, OTHER, 8 << 20, ca=ca, proxy=HOST_END)
        since = len(gw.events)
        r = gw.request("policy", id="sb1", policy={**POLICY, "deny": [CRED_HOST]})
        assert r["ok"], r
        assert gw.wait_event(lambda e: cut_events(gw, CRED_HOST, since)), gw.events[since:]
        ev = cut_events(gw, CRED_HOST, since)
        assert len(ev) == 1 and "deny cred.test" in ev[0]["reason"], ev
        assert cut_events(gw, OTHER, since) == []
        got, _, end = cut.resume()
        assert got < size // 2, (got, end)
        got, exact, end = kept.resume()
        assert (got, exact) == (8 << 20, True), end
    finally:
        cut.kill()
        if kept:
            kept.kill()
        assert gw.request("policy", id="sb1", policy=POLICY)["ok"]
        set_creds(cnet, [])
