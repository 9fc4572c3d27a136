# SPDX-License-Identifier: MIT
"""Credentials on the wire, through a real spaced: real clients of the debian
template (curl, python3 urllib, wget, git) reach an upstream over HTTPS and
the upstream receives the credential's header, while the sandbox holds only
the placeholder. Rotation and revocation hold from the next request on, an
upstream with a bad certificate is refused, a host without a credential is
tunnelled (the client sees the upstream's own certificate), and the value is
found nowhere in the sandbox: not in its files, not in /proc/*/environ, not
in the memory of its processes (read from the host).

The upstreams (gateway_servers.py: DNS, HTTP, HTTPS with this module's own
CA) run in a network namespace this module creates, linked to the host by a
veth; the daemon asks their DNS server and verifies them against their CA
(`--gateway-dns-upstream`, `--gateway-ca-file`). Nothing leaves the host.

Needs the debian template (templates/debian/build.sh build/templates/debian.tar,
or $SPACE_DEBIAN_TAR)."""

import base64
import os
import re
import secrets
import subprocess
import time
import uuid

import pytest

import e2e_host as host
import e2e_residue as residue
from e2e_upstream import HttpsUpstream

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SPACE_BUILD_DIR", os.path.join(REPO, "build"))
DEBIAN_TAR = os.environ.get("SPACE_DEBIAN_TAR", os.path.join(BUILD, "templates", "debian.tar"))

API_HOST, OTHER_HOST, BADNAME_HOST, GIT_HOST = "api.cred.test", "other.cred.test", "badname.cred.test", "git.cred.test"
H2_HOST, H2_PORT = "h2.cred.test", 9443   # nghttpd: HTTP/2 only, frames logged
CERT_NAMES = (API_HOST, OTHER_HOST, GIT_HOST, H2_HOST)  # not BADNAME_HOST: its certificate does not name it
NGHTTPD = "/usr/sbin/nghttpd"


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60, **kw)


@pytest.fixture(scope="module")
def wire(e2e_session, tmp_path_factory, request):
    if not os.path.exists(DEBIAN_TAR):
        pytest.skip(f"the debian template is not built ({DEBIAN_TAR}: templates/debian/build.sh)")
    up, d, h2 = None, None, None
    try:
        up = HttpsUpstream("spcw", "172.29", tmp_path_factory.mktemp("credwire"),
                           [API_HOST, OTHER_HOST, BADNAME_HOST, GIT_HOST, H2_HOST], "space e2e upstream CA",
                           cert_names=CERT_NAMES)
        h2 = None
        if os.path.exists(NGHTTPD):
            os.makedirs(f"{up.tmp}/www", exist_ok=True)
            with open(f"{up.tmp}/www/index.html", "w") as f:
                f.write("hello h2\n")
            h2log = open(f"{up.tmp}/nghttpd.log", "w")
            h2 = subprocess.Popen(["nsenter", f"--net=/run/netns/{up.ns}", "--", NGHTTPD, "-v", "-a", up.srv_ip,
                                   "-d", f"{up.tmp}/www", str(H2_PORT), f"{up.tmp}/srv.key", f"{up.tmp}/srv.pem"],
                                  stdin=subprocess.DEVNULL, stdout=h2log, stderr=subprocess.STDOUT)
            h2log.close()
        d = e2e_session.new_daemon(extra_args=[f"--gateway-dns-upstream={up.srv_ip}:53",
                                               f"--gateway-ca-file={up.ca_pem}"])
        d.start()
        r = d.cli("template", "import", "debian", DEBIAN_TAR, timeout=600)
        assert r.rc == 0, r
        yield {"d": d, "up": up, "h2log": f"{up.tmp}/nghttpd.log" if h2 else None}
    finally:
        if h2 is not None:
            h2.kill()
            h2.wait()
        # the test host first: the daemon's teardown checks the host for anything left
        if up is not None:
            up.close()
        if d is not None:
            residue.finish_daemon(d, request)


def upstream(wire, token):
    """The requests that reached the upstreams with token in their path."""
    return wire["up"].requests(token)


def new_cred(d, hosts, **fields):
    name = "c" + uuid.uuid4().hex[:10]
    value = "sk-wire-" + secrets.token_hex(16)
    body = {"name": name, "value": value, "hosts": hosts, **fields}
    r = d.api("POST", "/v1/credentials", json=body)
    assert r.status == 201, r
    return name, value


class Box:
    def __init__(self, wire, creds, allow):
        self.d = wire["d"]
        self.sb = self.d.create(template="debian", credentials=creds, network={"allow": allow})
        self.id = self.sb["id"]

    def run(self, script, timeout=120):
        return self.d.exec(self.id, shell=script, timeout=timeout)

    def close(self):
        self.d.delete(self.id)


@pytest.fixture
def box(wire):
    made = []

    def make(creds, allow):
        b = Box(wire, creds, allow)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def bearer(v):
    return f"Bearer {v}"


def test_real_clients_get_the_header(wire, box):
    d = wire["d"]
    name, value = new_cred(d, [API_HOST], env="API_KEY")
    gname, gvalue = new_cred(d, [GIT_HOST], basic_user="git")
    b = box([name, gname], [API_HOST, GIT_HOST])
    tok = secrets.token_hex(4)
    env = b.run("echo $API_KEY; echo $SSL_CERT_FILE; echo $NODE_EXTRA_CA_CERTS").out.split()
    assert env == [f"space-cred-{name}", "/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/space-sandbox-ca.pem"]
    # explicit proxy (HTTPS_PROXY is set in the sandbox: CONNECT) and transparent 443
    clients = {
        "curl-proxy": f'curl -sS --fail -H "Authorization: Bearer $API_KEY" https://{API_HOST}/{tok}/curl-proxy',
        "curl-transparent": f"curl -sS --fail --noproxy '*' https://{API_HOST}/{tok}/curl-transparent",
        "python": (f"python3 -c 'import urllib.request as u; "
                   f"print(u.urlopen(\"https://{API_HOST}/{tok}/python\").read().decode())'"),
        "wget": f"wget -q -O - https://{API_HOST}/{tok}/wget",
    }
    for what, cmd in clients.items():
        r = b.run(cmd)
        assert r.code == 0 and b"hello host=" in r.stdout, (what, r)
    got = {e["path"].rsplit("/", 1)[1]: e for e in upstream(wire, tok)}
    assert set(got) == set(clients), got
    for what, e in got.items():
        assert e["tls"] and e["auth"] == bearer(value), (what, e)
    # git over https: the basic credential on every request of the smart protocol
    r = b.run(f"git clone https://{GIT_HOST}/{tok}/repo.git /tmp/repo 2>&1; true")
    reqs = upstream(wire, f"{tok}/repo.git")
    assert reqs, r
    want = "Basic " + base64.b64encode(f"git:{gvalue}".encode()).decode()
    assert all(e["auth"] == want for e in reqs), reqs
    # every use is an event: sandbox, host, credential name; never the value
    ev = d.api("GET", "/v1/events", params={"sandbox": b.id, "type": "credential.", "limit": 1000})
    assert ev.status == 200
    used = [e for e in ev.json()["events"] if e["type"] == "credential.used"]
    assert any(e["data"].get("credential") == name and e["data"].get("host") == API_HOST for e in used), used
    assert any(e["data"].get("credential") == gname for e in used), used
    assert value not in ev.body.decode() and gvalue not in ev.body.decode()
    assert value not in d.log_text() and gvalue not in d.log_text()


def test_http2_curl_gets_the_header_on_every_stream(wire, box):
    """curl of the template offers h2 through the explicit proxy (CONNECT, port 9443): the upstream
    (nghttpd) chose h2, so the gateway speaks h2 on both legs and every stream carries the credential."""
    if not wire["h2log"]:
        pytest.skip("nghttpd missing (Debian package nghttp2-server)")
    d = wire["d"]
    name, value = new_cred(d, [H2_HOST], env="H2_KEY")
    b = box([name], [{"host": H2_HOST, "ports": [H2_PORT]}])
    tok = secrets.token_hex(4)
    urls = " ".join(f"-o /dev/null https://{H2_HOST}:{H2_PORT}/index.html?{tok}={i}" for i in range(3))
    r = b.run(f"curl -sS --http2 --parallel -w '%{{http_version}} %{{http_code}}\\n' {urls}")
    assert r.code == 0 and r.stdout.decode().split() == ["2", "200"] * 3, r
    with open(wire["h2log"]) as f:
        text = f.read()
    paths = re.findall(rf"^\[id=(\d+)\] .* recv \(stream_id=(\d+)\) :path: /index.html\?{tok}=\d$", text, re.M)
    assert len(paths) == 3 and len({c for c, _ in paths}) == 1, text[-3000:]   # one connection, three streams
    auths = re.findall(rf"^\[id={paths[0][0]}\] .* recv \(stream_id=\d+, sensitive\) authorization: (.*)$", text, re.M)
    assert auths.count(bearer(value)) >= 3, auths
    # :authority of another host on that connection: 421, nothing upstream
    r = b.run(f"curl -sS --http2 -w ' %{{http_code}}' -H 'Host: {API_HOST}:{H2_PORT}' "
              f"https://{H2_HOST}:{H2_PORT}/index.html?{tok}x")
    assert r.code == 0 and r.stdout.decode().endswith(" 421"), r
    with open(wire["h2log"]) as f:
        assert f"{tok}x" not in f.read()


def test_placeholder_never_leaves_for_other_hosts(wire, box):
    """The credential is for API_HOST only: a request to another host keeps the placeholder."""
    d = wire["d"]
    name, value = new_cred(d, [API_HOST], env="API_KEY")
    b = box([name], [API_HOST, OTHER_HOST])
    tok = secrets.token_hex(4)
    r = b.run(f'curl -sS -k -H "Authorization: Bearer $API_KEY" https://{OTHER_HOST}/{tok}/other')
    assert r.code == 0, r
    (e,) = upstream(wire, tok)
    assert e["auth"] == f"Bearer space-cred-{name}", e


def issuer(b, host):
    r = b.run(f"openssl s_client -connect {host}:443 -servername {host} </dev/null 2>/dev/null "
              f"| openssl x509 -noout -issuer")
    assert r.code == 0, r
    return r.out.strip()


def test_intercepted_only_where_a_credential_applies(wire, box):
    d = wire["d"]
    name, _ = new_cred(d, [API_HOST])
    b = box([name], [API_HOST, OTHER_HOST])
    # the credential host: the sandbox's own CA; any other host: the upstream's certificate, tunnelled
    assert issuer(b, API_HOST).endswith(f"CN = space sandbox {b.id}")
    assert issuer(b, OTHER_HOST) == "issuer=CN = space e2e upstream CA"
    # the tunnelled host is not trusted by the sandbox (its CA is not in the sandbox): the upstream's own chain
    r = b.run(f"curl -sS --noproxy '*' https://{OTHER_HOST}/x")
    assert r.code != 0 and b"certificate" in r.stderr, r


def test_plain_http_to_a_credential_host_refused(wire, box):
    d = wire["d"]
    name, _ = new_cred(d, [API_HOST])
    b = box([name], [API_HOST])
    tok = secrets.token_hex(4)
    for proxy in ("", "--noproxy '*'"):
        r = b.run(f"curl -sS {proxy} -w ' %{{http_code}}' http://{API_HOST}/{tok}")
        assert r.code == 0 and r.out.endswith(" 403") and "use https" in r.out, r
    assert upstream(wire, tok) == []


def test_rotation_and_revocation_take_effect_on_the_next_request(wire, box):
    d = wire["d"]
    name, v1 = new_cred(d, [API_HOST])
    b = box([name], [API_HOST])
    tok = secrets.token_hex(4)
    def fetch(step, intercepted=True):
        # without a credential the host is tunnelled: the upstream's own certificate (its test CA,
        # which the sandbox does not trust: -k)
        r = b.run(f"curl -sS --fail {'' if intercepted else '-k'} https://{API_HOST}/{tok}/{step}")
        assert r.code == 0, r
        (e,) = [e for e in upstream(wire, tok) if e["path"].endswith("/" + step)]
        return e["auth"]

    assert fetch("one") == bearer(v1)
    v2 = "sk-wire-" + secrets.token_hex(16)
    r = d.api("PATCH", f"/v1/credentials/{name}", json={"value": v2})
    assert r.status == 200, r
    assert fetch("two") == bearer(v2)
    r = d.api("POST", f"/v1/credentials/{name}/revoke")
    assert r.status == 200, r
    assert fetch("three", intercepted=False) is None
    # a grant removed: the same, at once
    name2, v3 = new_cred(d, [API_HOST])
    assert d.api("POST", f"/v1/sandboxes/{b.id}/credentials/{name2}").status == 201
    assert fetch("four") == bearer(v3)
    assert d.api("DELETE", f"/v1/sandboxes/{b.id}/credentials/{name2}").status == 204
    assert fetch("five", intercepted=False) is None
    for v in (v1, v2, v3):
        assert v not in d.log_text()


def test_expiry_takes_effect_on_a_running_sandbox(wire, box):
    """A credential that expires while the sandbox runs: its value is on the requests before, on none
    after (the gateway checks the expiry on every request; nothing tells it the moment)."""
    d = wire["d"]
    name, value = new_cred(d, [API_HOST])
    b = box([name], [API_HOST])
    tok = secrets.token_hex(4)

    def fetch(step):
        r = b.run(f"curl -sS --fail -k https://{API_HOST}/{tok}/{step}")
        assert r.code == 0, r
        (e,) = [e for e in upstream(wire, tok) if e["path"].endswith("/" + step)]
        return e["auth"]

    assert fetch("before") == bearer(value)
    at_s = int(time.time()) + 10
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at_s))
    r = d.api("PATCH", f"/v1/credentials/{name}", json={"expires_at": at})
    assert r.status == 200 and r.json()["state"] == "active", r
    still = fetch("still")
    # not yet expired: applied, where the fetch ended before expires_at (on a slow host it may not
    # have; what is guaranteed is only the value before the expiry, and its absence after it)
    if time.time() < at_s - 1:
        assert still == bearer(value)
    deadline = time.monotonic() + 60
    while d.api("GET", f"/v1/credentials/{name}").json()["state"] != "expired":
        assert time.monotonic() < deadline, "the credential never expired"
        time.sleep(0.5)
    got = fetch("after")
    assert value not in str(got), got
    used = d.api("GET", "/v1/events", params={"sandbox": b.id, "type": "credential.used", "limit": 1000}).json()
    assert len([e for e in used["events"] if e["data"]["credential"] == name]) <= 2, used


def test_bad_upstream_certificate_refused(wire, box):
    d = wire["d"]
    name, _ = new_cred(d, [BADNAME_HOST])
    b = box([name], [BADNAME_HOST])
    tok = secrets.token_hex(4)
    r = b.run(f"curl -sS -w ' %{{http_code}}' https://{BADNAME_HOST}/{tok}")
    assert r.code == 0 and r.out.endswith(" 502") and "certificate" in r.out, r
    assert upstream(wire, tok) == []
    ev = d.api("GET", "/v1/events", params={"sandbox": b.id, "type": "network.deny", "limit": 100}).json()["events"]
    assert any("certificate" in e["reason"] and BADNAME_HOST in e["reason"] for e in ev), ev


def sandbox_files_contain(root, needle):
    hits = []
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel.split(os.sep)[0] in ("proc", "sys", "dev"):
            dirs[:] = []
            continue
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                with open(p, "rb") as fh:
                    if needle in fh.read():
                        hits.append(p)
            except OSError:
                pass
    return hits


def test_value_nowhere_in_the_sandbox(wire, box):
    d = wire["d"]
    name, value = new_cred(d, [API_HOST], env="API_KEY")
    b = box([name], [API_HOST])
    tok = secrets.token_hex(4)
    # a process that used the credential and is still alive: its memory is read below
    script = (f"import urllib.request as u, time\n"
              f"print(u.urlopen('https://{API_HOST}/{tok}/mem').read().decode(), flush=True)\n"
              f"time.sleep(300)\n")
    b.run(f"cat > /tmp/use.py <<'EOF'\n{script}EOF\nnohup python3 /tmp/use.py > /tmp/use.out 2>&1 &")
    assert any(e["auth"] == bearer(value) for e in _wait_upstream(wire, tok)), upstream(wire, tok)
    b.run(f"curl -sS -H 'Authorization: Bearer $API_KEY' https://{API_HOST}/{tok}/files -o /tmp/resp.txt")
    needle = value.encode()
    pids = d.sandbox_pids(b.id)
    assert len(pids) >= 2, pids
    agent = d.agent_pid(b.id)
    assert sandbox_files_contain(f"/proc/{agent}/root", needle) == []
    for pid in pids:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
        assert needle not in env
        assert host.memory_hits(pid, needle) == 0, f"the value is in the memory of sandbox process {pid}"
    # the placeholder is there (the search can see what it looks for)
    assert any(b"API_KEY=space-cred-" + name.encode() in open(f"/proc/{p}/environ", "rb").read() for p in pids)
    assert any(host.memory_hits(p, b"API_KEY=space-cred-" + name.encode()) > 0 for p in pids)  # and the memory scan
    # the gateway, which holds the value, is not dumpable: its /proc files belong to root
    gws = [p for p in d.daemon_pids() if open(f"/proc/{p}/comm").read().strip() == "space-gateway"]
    assert gws, d.daemon_pids()
    for p in gws:
        st = os.stat(f"/proc/{p}/mem")
        uid = int(re.search(r"^Uid:\s+(\d+)", open(f"/proc/{p}/status").read(), re.M).group(1))
        assert uid != 0 and st.st_uid == 0, (uid, st.st_uid)


def _wait_upstream(wire, tok, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = upstream(wire, tok)
        if got:
            return got
        time.sleep(0.2)
    return []


def test_ca_follows_restore_and_resume(wire, box):
    d = wire["d"]
    name, value = new_cred(d, [API_HOST])
    b = box([name], [API_HOST])
    tok = secrets.token_hex(4)
    ck = d.api("POST", f"/v1/sandboxes/{b.id}/checkpoints", json={"name": "c1"})
    assert ck.status == 201, ck
    for step in ("suspend", "resume"):
        r = d.api("POST", f"/v1/sandboxes/{b.id}/{step}")
        assert r.status == 200, r
    r = b.run(f"curl -sS --fail https://{API_HOST}/{tok}/after-resume")
    assert r.code == 0, r
    r = d.api("POST", f"/v1/sandboxes/{b.id}/restore", json={"checkpoint": "c1"})
    assert r.status == 200, r
    r = b.run(f"curl -sS --fail https://{API_HOST}/{tok}/after-restore")
    assert r.code == 0, r
    # the bundle holds exactly one block of ours
    assert b.run("grep -c 'BEGIN space sandbox CA\\|space sandbox CA (written' "
                 "/etc/ssl/certs/ca-certificates.crt").out.strip() == "1"
    got = upstream(wire, tok)
    assert len(got) == 2 and all(e["auth"] == bearer(value) for e in got), got


def test_branched_children_inherit_their_own_grants(wire):
    """Each child of a branch (from now, and from a checkpoint) gets a copy of
    its parent's grants: its gateway puts the value on its requests, with a
    CA of its own; revoking the grant on one child stops it there only, and
    deleting the parent leaves the children's grants alone."""
    d = wire["d"]
    name, value = new_cred(d, [API_HOST], env="API_KEY")
    b = Box(wire, [name], [API_HOST])
    parent_gone, kids = False, []
    tok = secrets.token_hex(4)
    try:
        ck = d.api("POST", f"/v1/sandboxes/{b.id}/checkpoints", json={"name": "before"})
        assert ck.status == 201, ck
        r = d.api("POST", f"/v1/sandboxes/{b.id}/branch", json={"count": 2})
        assert r.status == 201, r
        kids += [s["id"] for s in r.json()["sandboxes"]]
        r = d.api("POST", f"/v1/sandboxes/{b.id}/branch", json={"count": 1, "from": "before"})
        assert r.status == 201, r
        kids += [s["id"] for s in r.json()["sandboxes"]]
        def fetch(sid, step, intercepted=True):
            r = d.exec(sid, shell=f"curl -sS --fail {'' if intercepted else '-k'} "
                                  f"https://{API_HOST}/{tok}/{sid}-{step}", timeout=120)
            assert r.code == 0, (sid, r)
            (e,) = [e for e in upstream(wire, tok) if e["path"].endswith(f"/{sid}-{step}")]
            return e["auth"]

        for k in kids:
            got = d.api("GET", f"/v1/sandboxes/{k}/credentials")
            assert got.status == 200 and [c["name"] for c in got.json()["credentials"]] == [name], got
            assert d.exec(k, shell="echo $API_KEY").out.strip() == f"space-cred-{name}"
            assert fetch(k, "one") == bearer(value)
            # its own CA, not its parent's (nor a sibling's)
            r = d.exec(k, shell=f"openssl s_client -connect {API_HOST}:443 -servername {API_HOST} </dev/null "
                                f"2>/dev/null | openssl x509 -noout -issuer")
            assert r.out.strip().endswith(f"CN = space sandbox {k}"), r
            ev = d.api("GET", "/v1/events", params={"sandbox": k, "type": "credential.granted"}).json()["events"]
            assert any(e["reason"] == f"inherited from {b.id}" and e["data"]["credential"] == name for e in ev), ev
        # revoked on the first child only
        assert d.api("DELETE", f"/v1/sandboxes/{kids[0]}/credentials/{name}").status == 204
        assert fetch(kids[0], "two", intercepted=False) is None
        assert fetch(kids[1], "two") == bearer(value)
        assert fetch(b.id, "two") == bearer(value)
        # the parent gone: the other children keep theirs
        b.close()
        parent_gone = True
        assert fetch(kids[1], "three") == bearer(value)
        assert fetch(kids[2], "three") == bearer(value)
        assert d.api("GET", f"/v1/sandboxes/{kids[0]}/credentials").json()["credentials"] == []
    finally:
        for k in kids:
            d.delete(k)
        if not parent_gone:
            b.close()


HELD_DOWNLOAD = r"""
import hashlib, os, socket, ssl, sys, time
host, size, tag, verify = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "verify"
ctx = ssl.create_default_context()
if not verify:                 # a tunnelled host: its own certificate, from a CA the sandbox does not trust
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
s = ctx.wrap_socket(socket.create_connection((host, 443), timeout=60), server_hostname=host)
s.sendall(b"GET /big/%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (size, host.encode()))
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
got, h = 0, hashlib.sha256()
d = s.recv(65536)
got += len(d); h.update(d)
open(f"/tmp/{tag}.started", "w").close()
while not os.path.exists("/tmp/go"):     # held: the rest waits in buffers, the connection open
    time.sleep(0.05)
end = "eof"
try:
    while got < size:
        d = s.recv(65536)
        if not d:
            break
        got += len(d); h.update(d)
except OSError as e:
    end = type(e).__name__
with open(f"/tmp/{tag}.tmp", "w") as f:
    f.write(f"{got} {h.hexdigest()} {end}\n")
os.rename(f"/tmp/{tag}.tmp", f"/tmp/{tag}.out")
"""


def test_policy_change_cuts_open_connections_of_a_running_sandbox(wire, box):
    """PUT /v1/sandboxes/{id}/policy on a running sandbox with two downloads
    open (python3 in the sandbox, each held after its first bytes): the one
    to the host the new policy denies (intercepted, a credential applies) is
    reset, with a network.deny event "the policy changed"; the other (a
    tunnel to a host still allowed) finishes byte-exact."""
    import hashlib
    d = wire["d"]
    name, _ = new_cred(d, [API_HOST])
    b = box([name], [API_HOST, OTHER_HOST])
    cut_size, kept_size = 64 << 20, 4 << 20
    b.run(f"cat > /tmp/held.py <<'EOF'\n{HELD_DOWNLOAD}EOF\n"
          f"nohup python3 /tmp/held.py {API_HOST} {cut_size} cut verify > /tmp/cut.log 2>&1 &\n"
          f"nohup python3 /tmp/held.py {OTHER_HOST} {kept_size} kept noverify > /tmp/kept.log 2>&1 &")
    deadline = time.monotonic() + 60
    while b.run("test -e /tmp/cut.started -a -e /tmp/kept.started").code != 0:
        assert time.monotonic() < deadline, b.run("cat /tmp/cut.log /tmp/kept.log").stdout
        time.sleep(0.2)
    r = d.api("PUT", f"/v1/sandboxes/{b.id}/policy", json={"allow": [API_HOST, OTHER_HOST], "deny": [API_HOST]})
    assert r.status == 200, r
    b.run("touch /tmp/go")
    deadline = time.monotonic() + 120
    while b.run("test -e /tmp/cut.out -a -e /tmp/kept.out").code != 0:
        assert time.monotonic() < deadline, b.run("cat /tmp/cut.log /tmp/kept.log").stdout
        time.sleep(0.2)
    got, _, end = b.run("cat /tmp/cut.out").stdout.decode().split()
    assert int(got) < cut_size // 2, (got, end)
    got, digest, end = b.run("cat /tmp/kept.out").stdout.decode().split()
    assert (int(got), digest) == (kept_size, hashlib.sha256(b"x" * kept_size).hexdigest()), end
    def cuts():
        ev = d.api("GET", "/v1/events", params={"sandbox": b.id, "limit": 1000})
        assert ev.status == 200, ev
        return [e for e in ev.json()["events"]
                if e["type"] == "network.deny" and "the policy changed" in e["data"].get("why", "")]
    deadline = time.monotonic() + 20     # the gateway's events reach the store through the worker
    while not cuts() and time.monotonic() < deadline:   # (with the reply: not left queued there)
        time.sleep(0.2)
    assert [(e["data"]["host"], e["data"]["port"]) for e in cuts()] == [(API_HOST, 443)], cuts()
