# SPDX-License-Identifier: MIT
"""Warm-pool creates and the network, through a real spaced with a warm pool
of the base template: a taken warm sandbox is the taker's at the gateway from
its very first packet (the registration that makes it so is sent to the
gateway without waiting for its answer; the gateway carries it out before it
decides anything after). One created with an allow rule reaches the allowed
upstream at its first exec; one created without a policy is refused there;
the decisions are events of the taker's tenant. And E2B creates
(POST /v2/sandboxes) take warm sandboxes too, with the request's envVars,
metadata and timeout applied as to a sandbox created afresh.

The upstreams (gateway_servers.py: DNS and HTTP) run in a network namespace
this module creates, linked to the host by a veth; the daemon's gateway asks
their DNS server. Nothing leaves the host."""

import base64
import calendar
import json
import os
import random
import re
import secrets
import sqlite3
import subprocess
import time

import pytest

import e2e_host as host
import e2e_http
import e2e_residue as residue
from test_e2b_connect import envd_headers, envelope, parse_envelopes

SERVERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gateway_servers.py")
PY = "/usr/bin/python3"
ALLOWED, OTHER = "allowed.warm.test", "other.warm.test"


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60, **kw)


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    tag = secrets.token_hex(3)
    ns, link = f"spwn-{tag}", f"spwn{tag}"
    octet = random.randrange(16, 250)
    host_ip, srv_ip = f"172.30.{octet}.1", f"172.30.{octet}.2"
    tmp = tmp_path_factory.mktemp("warmnet")
    zone = {"_listen": [srv_ip], ALLOWED: [srv_ip], OTHER: [srv_ip]}
    procs = []
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "addr", "add", f"{host_ip}/30", "dev", link)
        sh("ip", "link", "set", link, "up")
        sh("ip", "-n", ns, "addr", "add", f"{srv_ip}/30", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={ALLOWED}",
           "-keyout", f"{tmp}/srv.key", "-out", f"{tmp}/srv.pem")
        log = f"{tmp}/upstream.log"
        open(log, "w").close()
        # nsenter, not `ip netns exec` (its mount namespace would hold a copy of the pool's mount)
        srv = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "--", PY, SERVERS, log, f"{tmp}/srv.pem",
                                f"{tmp}/srv.key", json.dumps(zone)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
        procs.append(srv)
        assert srv.stdout.readline().strip() == "ready"
        yield {"log": log, "dns": f"{srv_ip}:53", "tag": tag}
    finally:
        for p in procs:
            p.stdin.close()
            p.kill()
            p.wait()
        subprocess.run(["ip", "link", "del", link], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def warm_store_ids(d, where="warm_pool <> '' AND state <> 'deleted'"):
    db = sqlite3.connect(os.path.join(d.state_dir, "space.db"), timeout=10)
    try:
        return {r[0] for r in db.execute(f"SELECT id FROM sandboxes WHERE {where}")}
    finally:
        db.close()


@pytest.mark.timeout(900)
def test_warm_pool_network_and_e2b(e2e_session, upstreams):
    """One spaced with a warm pool for the three parts (its warm sandboxes are
    the system tenant's: a restart without the pool removes them at the end,
    so nothing is left for the residue checks)."""
    d = e2e_session.new_daemon(extra_args=["--warm-pool=base:2", f"--gateway-dns-upstream={upstreams['dns']}"])
    d.start()
    problems = []
    try:
        keys = []
        for i in range(2):
            r = d.api("POST", "/v1/keys", json={"name": f"wn{i}", "tenant": f"warmnet{i}-{upstreams['tag']}"})
            assert r.status == 201, r
            keys.append(r.json()["key"])
        warm = {"d": d, "log": upstreams["log"], "keys": keys}
        allow_rule_reaches_upstream_at_first_exec(warm)
        no_policy_is_refused(warm)
        e2b_create_takes_a_warm_sandbox(warm)
        # without a warm pool the controller removes the warm sandboxes (stopped once the pool
        # is full: no warm create is cut short)
        warm_ids(d)
        d.stop()
        d.extra_args = [a for a in d.extra_args if not a.startswith("--warm-pool")]
        d.start()
        assert host.wait_until(lambda: not warm_store_ids(d), 60), warm_store_ids(d)
    finally:
        problems = residue.teardown_daemon(d)
        if not problems:
            residue.remove_daemon_dir(d)
    assert not problems, problems


def warm_ids(d):
    """The ready warm sandboxes, once the pool is full."""
    def full():
        r = d.api("GET", "/metrics", key=None)
        m = re.search(r'^space_warm_pool_size\{template="base"\} (\d+)$', r.text(), re.M)
        return m and int(m.group(1)) == 2
    assert host.wait_until(full, 120), d.log_tail(40)
    ids = warm_store_ids(d, "warm_pool <> '' AND state = 'paused'")
    assert len(ids) == 2, ids
    return ids


def upstream(log, token):
    with open(log) as f:
        return [e for e in (json.loads(l) for l in f if l.strip()) if e.get("kind") == "http" and token in e["path"]]


def events(d, sid, key, type_):
    return d.api("GET", "/v1/events", params={"sandbox": sid, "type": type_}, key=key).json()["events"]


def allow_rule_reaches_upstream_at_first_exec(warm):
    d, key = warm["d"], warm["keys"][0]
    ids = warm_ids(d)
    sb = d.create(key=key, network={"allow": [ALLOWED]})
    try:
        assert sb["id"] in ids and sb["state"] == "running", sb
        tok = secrets.token_hex(6)
        # the first thing the sandbox does: through the explicit proxy (HTTP_PROXY), then a
        # direct connection (transparently redirected), then a name the policy does not allow
        out = d.sh(sb["id"], f"wget -q -O - http://{ALLOWED}/{tok}-proxy; "
                             f"wget -q -Y off -O - http://{ALLOWED}/{tok}-direct; "
                             f"wget -q -O - http://{OTHER}/{tok}-other 2>&1; true", key=key)
        assert out.count(f"hello host={ALLOWED}") == 2, out
        assert "403" in out, out
        assert [e["path"] for e in upstream(warm["log"], tok)] == [f"/{tok}-proxy", f"/{tok}-direct"]
        # the decisions are the taker's events (they would be the pool's under the old registration)
        assert host.wait_until(lambda: any(ALLOWED in e["reason"] for e in events(d, sb["id"], key, "network.allow")),
                               30)
        assert host.wait_until(lambda: any(OTHER in e["reason"] for e in events(d, sb["id"], key, "network.deny")),
                               30)
        assert not [e for e in events(d, sb["id"], key, "network.deny") if ALLOWED in e["reason"]]
        assert not events(d, sb["id"], key, "network.error")
    finally:
        d.delete(sb["id"], key=key)


def no_policy_is_refused(warm):
    d, key = warm["d"], warm["keys"][1]
    ids = warm_ids(d)
    sb = d.create(key=key)
    try:
        assert sb["id"] in ids, sb
        tok = secrets.token_hex(6)
        r = d.exec(sb["id"], shell=f"wget -q -O - http://{ALLOWED}/{tok}", key=key)
        assert r.code != 0 and "hello" not in r.out, r
        assert host.wait_until(lambda: any(ALLOWED in e["reason"] for e in events(d, sb["id"], key, "network.deny")),
                               30)
        assert not upstream(warm["log"], tok)
    finally:
        d.delete(sb["id"], key=key)


def e2b(d, method, path, key, **kw):
    return e2e_http.request(d.url, method, path, key=None, headers={"X-API-KEY": key}, **kw)


def e2b_run(d, sb_id, token, script, envs=None):
    """process.Start of bash -l -c script (as the SDK runs commands): its stdout."""
    proc = {"cmd": "/bin/bash", "args": ["-l", "-c", script]}
    if envs is not None:
        proc["envs"] = envs
    r = e2e_http.request(d.url, "POST", "/process.Process/Start", data=envelope({"process": proc}), timeout=120,
                         headers=envd_headers(sb_id, token, "application/connect+json"))
    assert r.status == 200, r
    out = b""
    for flags, m in parse_envelopes(r.body):
        data = m.get("event", {}).get("data") if flags == 0 else None
        if data and "stdout" in data:
            out += base64.b64decode(data["stdout"])
    return out.decode()


def e2b_create_takes_a_warm_sandbox(warm):
    d, key = warm["d"], warm["keys"][0]
    ids = warm_ids(d)
    t0 = time.time()
    r = e2b(d, "POST", "/v2/sandboxes", key, json={"templateID": "base", "timeout": 321,
                                                   "envVars": {"FOO": "from-create", "BAR": "b"},
                                                   "metadata": {"who": "e2b-warm"}})
    assert r.status == 201, r
    sid, token = r.json()["sandboxID"], r.json()["envdAccessToken"]
    try:
        assert sid in ids
        ev = d.api("GET", "/v1/events", params={"sandbox": sid}, key=key).json()["events"]
        created = [e for e in ev if e["type"] == "sandbox.created"]
        assert len(created) == 1 and created[0]["data"] == {"template": "base", "warm_pool": True, "via": "e2b"}, ev
        info = e2b(d, "GET", f"/sandboxes/{sid}", key)
        assert info.status == 200, info
        assert info.json()["metadata"] == {"who": "e2b-warm"}
        v1 = d.show(sid, key=key).json()
        assert v1["env"] == {"FOO": "from-create", "BAR": "b"} and v1["timeout_s"] == 321, v1
        # the expiry counts from the create, not from when the warm sandbox was made
        end = info.json()["endAt"]
        m = re.match(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)", end)
        assert m, end
        end_s = calendar.timegm(tuple(int(x) for x in m.groups()))
        assert t0 + 321 - 5 <= end_s <= time.time() + 321 + 1, (end, t0)
        # the create's envVars in every process, under the process's own envs
        assert e2b_run(d, sid, token, "echo $FOO-$BAR") == "from-create-b\n"
        assert e2b_run(d, sid, token, "echo $FOO-$BAR", envs={"FOO": "from-run"}) == "from-run-b\n"
    finally:
        assert e2b(d, "DELETE", f"/sandboxes/{sid}", key).status == 204
