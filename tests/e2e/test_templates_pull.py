# SPDX-License-Identifier: MIT
"""Templates pulled from a registry (space template pull NAME REF): Debian's
docker-registry on loopback with its own TLS certificate from a test CA,
images the test makes by hand and pushes there with skopeo; pulls by tag and
by digest, a multi-arch index resolved to linux/amd64, Basic auth with a
stored credential, and the refusals: no or a wrong credential, a credential
for another host, a tampered blob, an untrusted certificate, an unknown tag,
a bad reference. No public registry is ever asked."""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

import http.server
import ssl
import threading

import e2e_residue as residue
from e2e_daemon import assert_error_shape
from test_templates_oci import OCI_CONFIG, OCI_LAYER, OCI_MANIFEST, config_doc, layer_tar, member, sha

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
REGISTRY_BIN = "/usr/bin/docker-registry"
USER, PASSWORD = "puller", "s3cret-" + uuid.uuid4().hex[:8]

pytestmark = pytest.mark.skipif(not (os.path.exists(REGISTRY_BIN) and shutil.which("skopeo")
                                     and shutil.which("htpasswd") and shutil.which("openssl")),
                                reason="needs docker-registry, skopeo, apache2-utils and openssl (scripts/install-deps.sh)")


def tname(prefix="pull"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)
    assert p.returncode == 0, f"{args}: {p.stdout}{p.stderr}"
    return p.stdout


def make_ca(d, name):
    key, crt = os.path.join(d, f"{name}.key"), os.path.join(d, f"{name}.crt")
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt, "-days", "2",
        "-subj", f"/CN=space e2e {name}", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return key, crt


def make_cert(d, name, ca, dns, *more):
    key, csr, crt, ext = (os.path.join(d, f"{name}.{x}") for x in ("key", "csr", "crt", "ext"))
    alt = ",".join(f"DNS:{n}" for n in (dns,) + more)
    with open(ext, "w") as f:
        f.write(f"subjectAltName={alt},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", f"/CN={dns}")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial", "-out", crt,
        "-days", "2", "-extfile", ext)
    return key, crt


class Registry:
    """One docker-registry process of this test (killed by its PID alone)."""

    def __init__(self, d, name, cert, htpasswd=None):
        self.dir = os.path.join(d, name)
        self.storage = os.path.join(self.dir, "storage")
        os.makedirs(self.storage)
        self.port = free_port()
        self.name = name
        auth = f"auth:\n  htpasswd:\n    realm: e2e\n    path: {htpasswd}\n" if htpasswd else ""
        cfg = os.path.join(self.dir, "config.yml")
        with open(cfg, "w") as f:
            f.write(f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {self.storage}\n"
                    f"http:\n  addr: 127.0.0.1:{self.port}\n  secret: {uuid.uuid4().hex}\n"
                    f"  tls:\n    certificate: {cert[1]}\n    key: {cert[0]}\n{auth}")
        self.log = open(os.path.join(self.dir, "registry.log"), "wb")
        self.proc = subprocess.Popen([REGISTRY_BIN, "serve", cfg], stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, f"docker-registry {name} exited: {open(self.log.name).read()}"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"docker-registry {name} did not listen"
                time.sleep(0.1)

    @property
    def addr(self):
        return f"127.0.0.1:{self.port}"

    def host(self, dns):
        return f"{dns}:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()

    def blob_path(self, digest):
        h = digest.split(":", 1)[1]
        return os.path.join(self.storage, "docker/registry/v2/blobs/sha256", h[:2], h, "data")


@pytest.fixture(scope="module")
def reg(e2e_session, request):
    """Three registries (anonymous, htpasswd, one whose certificate a CA spaced
    does not trust signed) and a spaced that trusts the test CA."""
    d = tempfile.mkdtemp(prefix="space-e2e-registry-")
    regs = []

    def fin():
        for r in regs:
            r.stop()
        shutil.rmtree(d, ignore_errors=True)
    request.addfinalizer(fin)

    ca, rogue_ca = make_ca(d, "ca"), make_ca(d, "rogue-ca")
    certs = os.path.join(d, "certs")   # skopeo's --dest-cert-dir: *.crt are CAs
    os.makedirs(certs)
    shutil.copy(ca[1], os.path.join(certs, "ca.crt"))
    shutil.copy(rogue_ca[1], os.path.join(certs, "rogue.crt"))
    htpasswd = os.path.join(d, "htpasswd")
    run("htpasswd", "-B", "-b", "-c", htpasswd, USER, PASSWORD)
    anon = Registry(d, "anon", make_cert(d, "anon", ca, "registry.test"))
    regs.append(anon)
    authed = Registry(d, "authed", make_cert(d, "authed", ca, "auth.test"), htpasswd=htpasswd)
    regs.append(authed)
    rogue = Registry(d, "rogue", make_cert(d, "rogue", rogue_ca, "rogue.test"))
    regs.append(rogue)

    daemon = e2e_session.new_daemon(extra_args=[
        f"--registry-ca-file={ca[1]}",
        "--registry-resolve=registry.test=127.0.0.1,auth.test=127.0.0.1,rogue.test=127.0.0.1,"
        "tok.test=127.0.0.1,blobs.test=127.0.0.1",
        "--registry-timeout-s=30"])
    daemon.start()

    class R:
        pass
    r = R()
    r.dir, r.certs, r.anon, r.authed, r.rogue, r.spaced = d, certs, anon, authed, rogue, daemon
    r.ca = ca
    yield r
    residue.finish_daemon(daemon, request)


@pytest.fixture(scope="module")
def base_layer(reg):
    with open(reg.spaced.s.base_template(), "rb") as f:
        return f.read()


def image(layers, cfg=None, arch="amd64"):
    """(manifest bytes, {digest hex: blob}) of an OCI image of uncompressed layers."""
    blobs = {sha(l): l for l in layers}
    c = config_doc([sha(l) for l in layers], arch, cfg)
    blobs[sha(c)] = c
    m = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                    "config": {"mediaType": OCI_CONFIG, "digest": "sha256:" + sha(c), "size": len(c)},
                    "layers": [{"mediaType": OCI_LAYER, "digest": "sha256:" + sha(l), "size": len(l)}
                               for l in layers]}).encode()
    blobs[sha(m)] = m
    return m, blobs


def write_layout(d, top, blobs, tag):
    """An OCI layout directory whose index.json names top (a (media type, bytes)) as tag."""
    os.makedirs(os.path.join(d, "blobs/sha256"), exist_ok=True)
    with open(os.path.join(d, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    for h, b in blobs.items():
        with open(os.path.join(d, "blobs/sha256", h), "wb") as f:
            f.write(b)
    mt, doc = top
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [{"mediaType": mt, "digest": "sha256:" + sha(doc),
                                                      "size": len(doc),
                                                      "annotations": {"org.opencontainers.image.ref.name": tag}}]},
                  f)


def push(reg, registry, d, tag, repo, multi=False, creds=None, fmt=None):
    """Pushes the layout's tag; the digest of the manifest the registry holds
    now (skopeo compresses the layers on the way, so it is not the layout's)."""
    digestfile = os.path.join(reg.dir, "digest-" + uuid.uuid4().hex[:8])
    args = ["skopeo", "--insecure-policy", "copy", "-q", "--dest-cert-dir", reg.certs, "--digestfile", digestfile]
    if multi:
        args += ["--all"]
    if creds:
        args += ["--dest-creds", creds]
    if fmt:
        args += ["--format", fmt]
    run(*args, f"oci:{d}:{tag}", f"docker://{registry.addr}/{repo}:{tag}")
    with open(digestfile) as f:
        return f.read().strip()


def registry_manifest(reg, registry, repo, reference, creds=None):
    args = ["skopeo", "inspect", "--raw", "--cert-dir", reg.certs]
    if creds:
        args += ["--creds", creds]
    sep = "@" if reference.startswith("sha256:") else ":"
    return json.loads(run(*args, f"docker://{registry.addr}/{repo}{sep}{reference}"))


def push_image(reg, registry, layers, cfg=None, repo="e2e/app", tag="v1", creds=None, fmt=None):
    m, blobs = image(layers, cfg)
    d = os.path.join(reg.dir, "layout-" + uuid.uuid4().hex[:8])
    write_layout(d, (OCI_MANIFEST, m), blobs, tag)
    return push(reg, registry, d, tag, repo, creds=creds, fmt=fmt)


def pull(spaced, name, ref, credential=None):
    body = {"ref": ref}
    if credential:
        body["credential"] = credential
    return spaced.api("POST", f"/v1/templates/{name}/pull", json=body, timeout=600)


def templates(spaced):
    r = spaced.api("GET", "/v1/templates")
    assert r.status == 200, r
    return {t["name"]: t for t in r.json()["templates"]}


def remove(spaced, name):
    r = spaced.api("DELETE", f"/v1/templates/{name}")
    assert r.status == 204, r


def no_pull_leftovers(spaced):
    tmp = os.path.join(spaced.state_dir, "tmp")
    left = [f for f in os.listdir(tmp) if f.startswith("pull-")] if os.path.isdir(tmp) else []
    assert not left, f"a failed pull left {left} in {tmp}"


CFG = {"Env": ["PATH=/usr/bin:/bin:/usr/sbin:/sbin", "PULL_E2E=from-the-registry"], "WorkingDir": "/srv"}


def app_layer(text):
    return layer_tar([member("srv/", type=__import__("tarfile").DIRTYPE), member("srv/hello", text.encode())])


def test_pull_by_tag_and_digest(reg, base_layer):
    s = reg.spaced
    marker = uuid.uuid4().hex
    digest = push_image(reg, reg.anon, [base_layer, app_layer(marker + "\n")], CFG, repo="e2e/app", tag="v1")

    name = tname()
    c = s.cli("template", "pull", name, f"{reg.anon.host('registry.test')}/e2e/app:v1", timeout=600)
    assert c.rc == 0, c
    assert digest in c.out, c
    t = templates(s)[name]
    assert t["state"] == "ready" and t["size_bytes"] > 0, t
    sb = s.create(template=name)
    try:
        assert s.sh(sb["id"], 'pwd; cat hello; echo "$PULL_E2E"') == f"/srv\n{marker}\nfrom-the-registry\n"
    finally:
        s.delete(sb["id"])

    # by digest, over the IP literal (its certificate names 127.0.0.1 as well)
    by_digest = tname()
    r = pull(s, by_digest, f"{reg.anon.addr}/e2e/app@{digest}")
    assert r.status == 201, r
    assert r.json()["digest"] == digest and r.json()["name"] == by_digest, r.json()
    assert r.json()["ref"] == f"{reg.anon.addr}/e2e/app@{digest}"
    sb = s.create(template=by_digest)
    try:
        assert s.sh(sb["id"], "cat /srv/hello") == marker + "\n"
    finally:
        s.delete(sb["id"])

    # the name again: a new version of it
    r = pull(s, name, f"{reg.anon.host('registry.test')}/e2e/app:v1")
    assert r.status == 201, r
    vs = s.api("GET", f"/v1/templates/{name}/versions").json()["versions"]
    assert vs[0]["latest"] and vs[0]["digest"] == digest, vs
    ev = s.api("GET", "/v1/events", params={"type": "template.imported"}).json()["events"]
    assert any(e["data"].get("name") == name and e["data"].get("digest") == digest for e in ev), ev
    remove(s, name)
    remove(s, by_digest)


def test_docker_v2_manifest(reg, base_layer):
    """A Docker v2 schema 2 image (what docker push writes): its media types
    for the manifest, the config and gzip layers."""
    s = reg.spaced
    marker = uuid.uuid4().hex
    digest = push_image(reg, reg.anon, [base_layer, app_layer(marker + "\n")], CFG, repo="e2e/docker", tag="v2",
                        fmt="v2s2")
    m = registry_manifest(reg, reg.anon, "e2e/docker", digest)
    assert m["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json", m
    name = tname()
    r = pull(s, name, f"{reg.anon.host('registry.test')}/e2e/docker:v2")
    assert r.status == 201, r
    assert r.json()["digest"] == digest
    sb = s.create(template=name)
    try:
        assert s.sh(sb["id"], 'cat /srv/hello; echo "$PULL_E2E"') == f"{marker}\nfrom-the-registry\n"
    finally:
        s.delete(sb["id"])
    remove(s, name)


def test_cached_layers_are_not_fetched(reg, base_layer):
    """A layer the worker's layer cache holds (an earlier pull or import of
    the same chain) is not downloaded again: with its blob gone from the
    registry, a second pull still makes the template."""
    s = reg.spaced
    marker = uuid.uuid4().hex
    digest = push_image(reg, reg.anon, [base_layer, app_layer(marker + "\n")], CFG, repo="e2e/cached", tag="v1")
    first = tname()
    r = pull(s, first, f"{reg.anon.host('registry.test')}/e2e/cached:v1")
    assert r.status == 201, r
    if not os.path.isdir(s.pool_path("layers")) or not os.listdir(s.pool_path("layers")):
        remove(s, first)
        pytest.skip("the pool has no layer cache (overlay)")
    top = registry_manifest(reg, reg.anon, "e2e/cached", digest)["layers"][1]["digest"]
    blob = reg.anon.blob_path(top)
    os.rename(blob, blob + ".away")
    try:
        second = tname()
        r = pull(s, second, f"{reg.anon.host('registry.test')}/e2e/cached@{digest}")
        assert r.status == 201, r
    finally:
        os.rename(blob + ".away", blob)
    sb = s.create(template=second)
    try:
        assert s.sh(sb["id"], "cat /srv/hello") == marker + "\n"
    finally:
        s.delete(sb["id"])
    remove(s, first)
    remove(s, second)


def test_multi_arch_index_pulls_amd64(reg, base_layer):
    s = reg.spaced
    amd, amd_blobs = image([base_layer, app_layer("amd64\n")], CFG, arch="amd64")
    arm, arm_blobs = image([base_layer, app_layer("arm64\n")], CFG, arch="arm64")
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": "sha256:" + sha(arm), "size": len(arm),
         "platform": {"os": "linux", "architecture": "arm64"}},
        {"mediaType": OCI_MANIFEST, "digest": "sha256:" + sha(amd), "size": len(amd),
         "platform": {"os": "linux", "architecture": "amd64"}}]}).encode()
    blobs = {**amd_blobs, **arm_blobs, sha(index): index}
    d = os.path.join(reg.dir, "multi")
    write_layout(d, (OCI_INDEX, index), blobs, "multi")
    index_digest = push(reg, reg.anon, d, "multi", "e2e/multi", multi=True)
    pushed = registry_manifest(reg, reg.anon, "e2e/multi", index_digest)
    amd_digest = [m["digest"] for m in pushed["manifests"] if m["platform"]["architecture"] == "amd64"]
    assert len(amd_digest) == 1 and len(pushed["manifests"]) == 2, pushed

    name = tname()
    r = pull(s, name, f"{reg.anon.host('registry.test')}/e2e/multi:multi")
    assert r.status == 201, r
    assert r.json()["digest"] == amd_digest[0], (r.json(), pushed)
    sb = s.create(template=name)
    try:
        assert s.sh(sb["id"], "cat /srv/hello") == "amd64\n"
    finally:
        s.delete(sb["id"])
    remove(s, name)

    # an index without linux/amd64
    only = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": "sha256:" + sha(arm), "size": len(arm),
         "platform": {"os": "linux", "architecture": "arm64"}}]}).encode()
    d = os.path.join(reg.dir, "armonly")
    write_layout(d, (OCI_INDEX, only), {**arm_blobs, sha(only): only}, "arm")
    push(reg, reg.anon, d, "arm", "e2e/armonly", multi=True)
    name = tname()
    r = pull(s, name, f"{reg.anon.host('registry.test')}/e2e/armonly:arm")
    assert r.status == 400, r
    assert "linux/amd64" in r.json()["error"]["message"] and "arm64" in r.json()["error"]["message"], r.json()
    assert name not in templates(s)
    no_pull_leftovers(s)


def cred_add(s, name, host, password):
    c = s.cli("cred", "add", name, "--basic-user", USER, "--host", host, input=password + "\n")
    assert c.rc == 0, c


def test_basic_auth_with_a_stored_credential(reg, base_layer):
    s = reg.spaced
    marker = uuid.uuid4().hex
    push_image(reg, reg.authed, [base_layer, app_layer(marker + "\n")], CFG, repo="private/app", tag="v1",
               creds=f"{USER}:{PASSWORD}")
    ref = f"{reg.authed.host('auth.test')}/private/app:v1"

    name = tname()
    r = pull(s, name, ref)
    assert r.status == 403, r
    msg = r.json()["error"]["message"]
    assert "requires authentication" in msg and reg.authed.host("auth.test") in msg, msg

    good, wrong, elsewhere = (f"reg-{x}-{uuid.uuid4().hex[:6]}" for x in ("good", "wrong", "else"))
    cred_add(s, good, "auth.test", PASSWORD)
    cred_add(s, wrong, "auth.test", "not-the-password")
    cred_add(s, elsewhere, "other.example.com", PASSWORD)

    r = pull(s, name, ref, credential=wrong)
    assert r.status == 403, r
    assert f"refused credential '{wrong}'" in r.json()["error"]["message"], r.json()
    r = pull(s, name, ref, credential=elsewhere)
    assert r.status == 403, r
    assert "no host pattern" in r.json()["error"]["message"], r.json()
    r = pull(s, name, ref, credential="no-such-cred")
    assert r.status == 404, r
    assert name not in templates(s)

    # the CLI takes the credential's name, never a password
    c = s.cli("template", "pull", name, ref, "--credential", good, timeout=600)
    assert c.rc == 0, c
    assert PASSWORD not in c.out + c.err
    sb = s.create(template=name)
    try:
        assert s.sh(sb["id"], "cat /srv/hello") == marker + "\n"
    finally:
        s.delete(sb["id"])
    remove(s, name)
    with open(s.log_path, errors="replace") as f:
        assert PASSWORD not in f.read(), "the registry password reached the log"
    no_pull_leftovers(s)


def test_tampered_blob_is_refused(reg, base_layer):
    s = reg.spaced
    layer = app_layer(uuid.uuid4().hex + "\n")
    digest = push_image(reg, reg.anon, [base_layer, layer], CFG, repo="e2e/tampered", tag="v1")
    layer_digest = registry_manifest(reg, reg.anon, "e2e/tampered", digest)["layers"][1]["digest"]
    path = reg.anon.blob_path(layer_digest)
    with open(path, "r+b") as f:   # same size, other bytes
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0xff
        f.seek(0)
        f.write(data)

    name = tname()
    r = pull(s, name, f"{reg.anon.host('registry.test')}/e2e/tampered:v1")
    assert r.status == 502, r
    assert_error_shape(r, 502)
    msg = r.json()["error"]["message"]
    assert "does not match its digest" in msg and layer_digest in msg, msg
    assert name not in templates(s)
    no_pull_leftovers(s)
    assert not os.path.exists(s.pool_path("templates", name))


def test_untrusted_certificate_is_refused(reg, base_layer):
    s = reg.spaced
    push_image(reg, reg.rogue, [app_layer("rogue\n")], repo="e2e/rogue", tag="v1")
    name = tname()
    r = pull(s, name, f"{reg.rogue.host('rogue.test')}/e2e/rogue:v1")
    assert r.status == 502, r
    msg = r.json()["error"]["message"]
    assert "does not verify" in msg and "rogue.test" in msg, msg
    # a trusted certificate for another name: registry.test's, reached as auth.test's port... by its
    # own port under a name it does not carry
    r = pull(s, name, f"rogue.test:{reg.anon.port}/e2e/app:v1")
    assert r.status == 502, r
    assert "does not verify" in r.json()["error"]["message"], r.json()
    assert name not in templates(s)
    no_pull_leftovers(s)


def test_errors(reg):
    s = reg.spaced
    name = tname()
    for ref, why in [("python:3.12", "names no registry"), ("registry.test/App", "lowercase"),
                     ("registry.test/a@sha256:12", "digest"), ("", "empty")]:
        r = pull(s, name, ref)
        assert r.status == 400, (ref, r)
        assert_error_shape(r, 400, "invalid_argument")
        assert why in r.json()["error"]["message"], (ref, r.json())
    r = s.api("POST", f"/v1/templates/{name}/pull", json={"ref": "registry.test/a", "password": "x"})
    assert r.status == 400 and r.json()["error"]["code"] == "unknown_field", r
    r = s.api("POST", "/v1/templates/Bad..Name/pull", json={"ref": "registry.test/a"})
    assert r.status == 400, r
    r = pull(s, name, f"{reg.anon.host('registry.test')}/e2e/nothing-here:v9")
    assert r.status == 404, r
    assert_error_shape(r, 404, "not_found")
    assert "registry.test" in r.json()["error"]["message"], r.json()
    r = pull(s, name, f"{reg.anon.host('registry.test')}/e2e/app:v1@sha256:" + "0" * 64)
    assert r.status == 404, r
    assert "e2e/app@sha256:" in r.json()["error"]["message"], r.json()
    # an admin's business
    k = s.api("POST", "/v1/keys", json={"name": "pull-user"}).json()
    r = s.api("POST", f"/v1/templates/{name}/pull", json={"ref": "registry.test/a"}, key=k["key"])
    assert r.status == 403, r
    assert name not in templates(s)
    no_pull_leftovers(s)


class FakeRegistry(http.server.BaseHTTPRequestHandler):
    """A hostile registry: a manifest past the 4 MiB bound, a redirect down
    to plain http, a manifest that is not what the digest asked for."""
    protocol_version = "HTTP/1.1"
    plain_port = None

    def log_message(self, *a):
        pass

    def handle(self):
        try:
            super().handle()
        except (OSError, ssl.SSLError):
            pass   # spaced hangs up on what it refuses

    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v2/":
            return self.send(200, b"{}")
        if self.path == "/v2/e2e/big/manifests/v1":
            return self.send(200, b"{" + b" " * (5 * 1024 * 1024) + b"}",
                             [("Content-Type", OCI_MANIFEST)])
        if self.path == "/v2/e2e/big-chunked/manifests/v1":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b" " * 65536
            for _ in range(100):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/v2/e2e/down/manifests/v1":
            return self.send(307, headers=[("Location", f"http://registry.test:{self.plain_port}/m")])
        if self.path.startswith("/v2/e2e/swapped/manifests/sha256:"):
            return self.send(200, b'{"schemaVersion":2}', [("Content-Type", OCI_MANIFEST)])
        return self.send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass   # a failed handshake (spaced refusing) is what some cases want


@pytest.fixture(scope="module")
def fake(reg):
    servers = []
    plain = QuietServer(("127.0.0.1", 0), FakeRegistry)
    servers.append(plain)
    handler = type("Handler", (FakeRegistry,), {"plain_port": plain.server_address[1]})
    tls = QuietServer(("127.0.0.1", 0), handler)
    servers.append(tls)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(reg.dir, "anon.crt"), os.path.join(reg.dir, "anon.key"))
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    threads = [threading.Thread(target=srv.serve_forever, daemon=True) for srv in servers]
    for t in threads:
        t.start()
    yield tls.server_address[1], plain.server_address[1]
    for srv in servers:
        srv.shutdown()
        srv.server_close()
    for t in threads:
        t.join(10)


def test_hostile_registry(reg, fake):
    s = reg.spaced
    tls_port, plain_port = fake
    name = tname()
    for repo in ("big", "big-chunked"):
        r = pull(s, name, f"registry.test:{tls_port}/e2e/{repo}:v1")
        assert r.status == 502, (repo, r)
        assert "larger than 4194304 bytes" in r.json()["error"]["message"], r.json()
    r = pull(s, name, f"registry.test:{tls_port}/e2e/down:v1")
    assert r.status == 502, r
    assert "plain http" in r.json()["error"]["message"], r.json()
    r = pull(s, name, f"registry.test:{tls_port}/e2e/swapped@sha256:" + "1" * 64)
    assert r.status == 502, r
    assert "does not match its digest" in r.json()["error"]["message"], r.json()
    # a registry without TLS, asked over https
    r = pull(s, name, f"registry.test:{plain_port}/e2e/app:v1")
    assert r.status == 502, r
    assert "TLS handshake" in r.json()["error"]["message"], r.json()
    assert name not in templates(s)
    no_pull_leftovers(s)


class TokenRegistry(http.server.BaseHTTPRequestHandler):
    """A registry with a token service (Bearer, the distribution spec's token
    auth) that sends its blobs to another host by a redirect, as registries
    backed by object storage do."""
    protocol_version = "HTTP/1.1"
    valid = []          # tokens handed out and not expired
    expire_once = False # the next blob request finds its token expired
    blobs = {}
    manifest = b""
    seen = []           # (host, path, Authorization) of every request
    realm = ""
    blob_base = ""

    def log_message(self, *a):
        pass

    def handle(self):
        try:
            super().handle()
        except (OSError, ssl.SSLError):
            pass

    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        auth = self.headers.get("Authorization")
        self.seen.append((self.headers.get("Host"), self.path, auth))
        bearer = auth is not None and auth.startswith("Bearer ") and auth[7:] in self.valid
        if self.path.startswith("/blob/"):          # the blob store: no auth of its own
            b = self.blobs.get(self.path[6:])
            return self.send(200, b) if b is not None else self.send(404)
        if self.path.startswith("/token?"):
            if auth != "Basic " + __import__("base64").b64encode(f"{USER}:{PASSWORD}".encode()).decode():
                return self.send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}')
            token = "tok-" + uuid.uuid4().hex
            self.valid.append(token)
            return self.send(200, json.dumps({"token": token, "expires_in": 300}).encode(),
                             [("Content-Type", "application/json")])
        challenge = [("WWW-Authenticate", f'Bearer realm="{self.realm}",service="fake-registry"')]
        if not bearer:
            return self.send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', challenge)
        if self.path == "/v2/":
            return self.send(200, b"{}")
        if self.path == "/v2/e2e/tok/manifests/v1":
            return self.send(200, self.manifest, [("Content-Type", OCI_MANIFEST),
                                                  ("Docker-Content-Digest", "sha256:" + sha(self.manifest))])
        if self.path.startswith("/v2/e2e/tok/blobs/sha256:"):
            if type(self).expire_once:
                type(self).expire_once = False
                del self.valid[:]
                return self.send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', challenge)
            h = self.path.rsplit(":", 1)[1]
            return self.send(307, headers=[("Location", f"{self.blob_base}/blob/{h}")])
        return self.send(404)


@pytest.fixture(scope="module")
def token_registry(reg):
    cert = make_cert(reg.dir, "tok", reg.ca, "tok.test", "blobs.test")
    handler = type("Handler", (TokenRegistry,), {"seen": [], "blobs": {}, "valid": []})
    servers = [QuietServer(("127.0.0.1", 0), handler) for _ in range(2)]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert[1], cert[0])
    for srv in servers:
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    tok_port, blob_port = (srv.server_address[1] for srv in servers)
    handler.realm = f"https://tok.test:{tok_port}/token"
    handler.blob_base = f"https://blobs.test:{blob_port}"
    threads = [threading.Thread(target=srv.serve_forever, daemon=True) for srv in servers]
    for t in threads:
        t.start()
    yield handler, tok_port, blob_port
    for srv in servers:
        srv.shutdown()
        srv.server_close()
    for t in threads:
        t.join(10)


def test_bearer_token_and_blob_redirect(reg, token_registry):
    s = reg.spaced
    h, tok_port, blob_port = token_registry
    marker = uuid.uuid4().hex
    h.manifest, blobs = image([app_layer(marker + "\n")])
    h.blobs.update(blobs)
    ref = f"tok.test:{tok_port}/e2e/tok:v1"

    name = tname()
    r = pull(s, name, ref)   # the token service wants the credential
    assert r.status == 403, r
    msg = r.json()["error"]["message"]
    assert "requires authentication" in msg and f"tok.test:{tok_port}" in msg, msg

    cred = f"reg-tok-{uuid.uuid4().hex[:6]}"
    cred_add(s, cred, "tok.test", PASSWORD)
    del h.seen[:]
    r = pull(s, name, ref, credential=cred)
    assert r.status == 201, r
    assert r.json()["digest"] == "sha256:" + sha(h.manifest), r.json()
    root = s.host_view(s.pool_path("templates", name))
    with open(os.path.join(root, "srv/hello")) as f:
        assert f.read() == marker + "\n"
    token_asks = [p for host, p, a in h.seen if p.startswith("/token?")]
    assert token_asks and "scope=repository:e2e/tok:pull" in token_asks[0] and "service=fake-registry" in token_asks[0], h.seen
    blob_gets = [(host, a) for host, p, a in h.seen if p.startswith("/blob/")]
    assert len(blob_gets) == 2, h.seen     # the config and the layer, both from the other host
    assert all(host == f"blobs.test:{blob_port}" and a is None for host, a in blob_gets), \
        f"the registry's token went along a redirect to another host: {blob_gets}"
    remove(s, name)

    # a token that runs out during the pull: a new one is fetched, once
    h.expire_once = True
    del h.seen[:]
    r = pull(s, name, ref, credential=cred)
    assert r.status == 201, r
    assert not h.expire_once
    assert len([p for _, p, _ in h.seen if p.startswith("/token?")]) == 2, h.seen
    remove(s, name)

    # a token service on a host no pattern of the credential names gets nothing
    h.realm = f"https://blobs.test:{blob_port}/token"
    try:
        del h.seen[:]
        r = pull(s, name, ref, credential=cred)
        assert r.status == 403, r
        assert "no host pattern" in r.json()["error"]["message"], r.json()
        assert not any(p.startswith("/token") for _, p, _ in h.seen), h.seen
    finally:
        h.realm = f"https://tok.test:{tok_port}/token"
    assert name not in templates(s)
    no_pull_leftovers(s)


def test_build_from_an_image_reference(reg, base_layer):
    """A Dockerfile FROM a registry reference: pulled through the same code, cached by its digest."""
    import test_templates_build as tb
    s = reg.spaced
    marker = uuid.uuid4().hex
    push_image(reg, reg.anon, [base_layer, app_layer(marker + "\n")], CFG, repo="e2e/buildbase", tag="v1")
    name = tname()
    # the image's config is where the build starts: RUN sees its env and cwd, the template keeps them
    df = (f"FROM {reg.anon.host('registry.test')}/e2e/buildbase:v1\n"
          'RUN cat hello > /copied; echo "$PULL_E2E" >> /copied\n').encode()
    st, lines = tb.build(s, name, {"Dockerfile": df})
    assert st == 200 and tb.result(lines)["run"] == 1, lines[-1]
    sb = s.create(template=name)
    try:
        assert s.sh(sb["id"], 'cat /copied; pwd; echo "$PULL_E2E"') == \
            f"{marker}\nfrom-the-registry\n/srv\nfrom-the-registry\n"
    finally:
        s.delete(sb["id"])
    st, lines = tb.build(s, name, {"Dockerfile": df})
    assert tb.result(lines)["run"] == 0, lines[-1]
    st, lines = tb.build(s, tname(), {"Dockerfile": f"FROM {reg.anon.host('registry.test')}/e2e/nosuch:v1\n".encode()})
    assert lines[-1]["type"] == "error" and "line 1: FROM" in lines[-1]["message"], lines[-1]
    assert not [t for t in templates(s) if t.startswith("build-")]
    remove(s, name)


def test_e2b_template_build_from_image(reg, base_layer):
    """E2B's fromImage (POST /v2/templates/{id}/builds/{b} as the SDK sends it) pulls like FROM."""
    import e2e_http

    s = reg.spaced
    marker = uuid.uuid4().hex
    push_image(reg, reg.anon, [base_layer, app_layer(marker + "\n")], CFG, repo="e2e/e2b", tag="v1")
    r = s.api("POST", "/v1/keys", json={"name": "e2b-img", "tenant": "img" + uuid.uuid4().hex[:8]})
    assert r.status == 201, r
    key = r.json()["key"]
    h = {"X-API-KEY": key}
    name = tname("e2bimg")
    r = e2e_http.request(s.url, "POST", "/v3/templates", json={"name": name}, headers=h, key=None)
    assert r.status == 202, r
    bid = r.json()["buildID"]
    body = {"fromImage": f"{reg.anon.host('registry.test')}/e2e/e2b:v1",
            "steps": [{"type": "RUN", "args": ["cat hello > copied"]}]}
    r = e2e_http.request(s.url, "POST", f"/v2/templates/{name}/builds/{bid}", json=body, headers=h, key=None)
    assert r.status == 202, r
    for _ in range(600):
        r = e2e_http.request(s.url, "GET", f"/templates/{name}/builds/{bid}/status", headers=h, key=None)
        assert r.status == 200, r
        if r.json()["status"] in ("ready", "error"):
            break
        time.sleep(0.2)
    assert r.json()["status"] == "ready", r.json()
    r = e2e_http.request(s.url, "POST", "/sandboxes", json={"templateID": name}, headers=h, key=None, timeout=180)
    assert r.status == 201, r
    sid = r.json()["sandboxID"]
    try:
        assert s.sh(sid, 'pwd; cat copied; echo "$PULL_E2E"', key=key) == f"/srv\n{marker}\nfrom-the-registry\n"
    finally:
        s.delete(sid, key=key)
    remove(s, name)
