# SPDX-License-Identifier: MIT
"""Credentials in a vm sandbox (a microVM, its own guest kernel; TCG where
the host has no usable KVM, so slow: marker `vm`). Its tap goes through the
same per-sandbox gateway as an ns sandbox's veth: the worker puts the
sandbox's CA into the guest's trust store through its agent (the files are
in the guest's disk image), the guest sees only the placeholder, and the
gateway puts the value on its HTTPS requests to the credential's host.

The upstream (gateway_servers.py: DNS, HTTPS with this module's own CA) runs
in a network namespace this module creates; the daemon asks its DNS and
verifies it against its CA. The client is the debian template's curl, which
verifies the gateway's certificate against the trust store the worker wrote
(busybox's TLS offers no ECDSA, the sandbox CA's key type). Needs the debian
template (templates/debian/build.sh build/templates/debian.tar, or
$SPACE_DEBIAN_TAR)."""

import os
import secrets
import subprocess

import pytest

import e2e_residue as residue
from e2e_upstream import HttpsUpstream
from test_vm import QEMU, kernel_dir

pytestmark = pytest.mark.vm

API_HOST = "api.vmcred.test"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SPACE_BUILD_DIR", os.path.join(REPO, "build"))
DEBIAN_TAR = os.environ.get("SPACE_DEBIAN_TAR", os.path.join(BUILD, "templates", "debian.tar"))


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60, **kw)


@pytest.fixture(scope="module")
def vmcred(e2e_session, tmp_path_factory, request):
    if not os.access(QEMU, os.X_OK):
        pytest.skip(f"QEMU is not installed ({QEMU})")
    if not os.path.exists(DEBIAN_TAR):
        pytest.skip(f"the debian template is not built ({DEBIAN_TAR}: templates/debian/build.sh)")
    kdir = kernel_dir()
    up, d = None, None
    try:
        up = HttpsUpstream("spvc", "172.28", tmp_path_factory.mktemp("vmcred"), [API_HOST],
                           "space e2e vm upstream CA")
        d = e2e_session.new_daemon(extra_args=[f"--vm-kernel-dir={kdir}", f"--gateway-dns-upstream={up.srv_ip}:53",
                                               f"--gateway-ca-file={up.ca_pem}"])
        d.start()
        r = d.cli("template", "import", "debian", DEBIAN_TAR, timeout=600)
        assert r.rc == 0, r
        yield {"d": d, "up": up}
    finally:
        if up is not None:
            up.close()
        if d is not None:
            residue.finish_daemon(d, request)


def upstream(ctx, token):
    return ctx["up"].requests(token)


@pytest.mark.timeout(900)
def test_vm_sandbox_uses_a_credential(vmcred):
    d = vmcred["d"]
    name, value = "vmc" + secrets.token_hex(4), "sk-vm-" + secrets.token_hex(16)
    r = d.api("POST", "/v1/credentials", json={"name": name, "value": value, "hosts": [API_HOST], "env": "API_KEY"})
    assert r.status == 201, r
    sb = d.create(runtime="vm", template="debian", memory_mb=512, credentials=[name],
                  network={"allow": [API_HOST]})
    sid = sb["id"]
    try:
        assert sb["runtime"] == "vm", sb
        # the placeholder and the CA variables, never the value
        env = d.sh(sid, 'echo "$API_KEY $SSL_CERT_FILE $NODE_EXTRA_CA_CERTS"').split()
        assert env == [f"space-cred-{name}", "/etc/ssl/certs/ca-certificates.crt",
                       "/etc/ssl/certs/space-sandbox-ca.pem"], env
        # the sandbox's own CA in the guest's trust store (the bundle holds one block of ours)
        pem = d.sh(sid, "cat /etc/ssl/certs/space-sandbox-ca.pem")
        subj = subprocess.run(["openssl", "x509", "-noout", "-subject"], input=pem, capture_output=True, text=True)
        assert subj.returncode == 0 and subj.stdout.strip().endswith(f"CN = space sandbox {sid}"), (subj, pem)
        bundle = d.sh(sid, "cat /etc/ssl/certs/ca-certificates.crt")
        assert bundle.count("space sandbox CA (written by space") == 1 and pem.strip() in bundle, bundle
        # HTTPS from the guest: the gateway terminates it with that CA and puts the value on the request
        tok = secrets.token_hex(4)
        out = d.sh(sid, f"curl -sS --fail --noproxy '*' https://{API_HOST}/{tok}/vm 2>&1; true")
        assert "hello host=" in out, out
        got = upstream(vmcred, tok)
        assert [e["auth"] for e in got] == [f"Bearer {value}"] and got[0]["tls"], (out, got)
        # suspended with its memory and resumed: its processes continue, so it keeps its CA (the
        # trust store they loaded) and the gateway goes on using it
        for step in ("suspend", "resume"):
            r = d.api("POST", f"/v1/sandboxes/{sid}/{step}")
            assert r.status == 200, r
        assert d.sh(sid, "cat /etc/ssl/certs/space-sandbox-ca.pem") == pem
        # (the guest's first packets after a resume can go unanswered for some seconds: it still
        # has the old tap's address in its neighbour cache; waited for with DNS, the first step)
        out = d.sh(sid, f"for i in $(seq 30); do getent hosts {API_HOST} >/dev/null && break; sleep 1; done; "
                        f"curl -sS --fail --noproxy '*' https://{API_HOST}/{tok}/resumed 2>&1; true")
        assert "hello host=" in out, out
        assert [e["auth"] for e in upstream(vmcred, tok)] == [f"Bearer {value}"] * 2
        # checkpointed with its memory and restored in place (twice: the checkpoint stays whole):
        # the processes of that moment trust the CA they had then, so it is kept, and the gateway
        # signs with it
        r = d.api("POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "withca"}, timeout=300)
        assert r.status == 201 and r.json()["with_memory"] is True, r
        d.sh(sid, "echo 'space sandbox CA (written by space' > /etc/ssl/certs/space-sandbox-ca.pem")  # moved on
        for i in range(2):
            r = d.api("POST", f"/v1/sandboxes/{sid}/restore", json={"checkpoint": "withca"}, timeout=600)
            assert r.status == 200 and r.json()["processes_preserved"] is True, r
            assert d.sh(sid, "cat /etc/ssl/certs/space-sandbox-ca.pem") == pem
            out = d.sh(sid, f"for i in $(seq 30); do getent hosts {API_HOST} >/dev/null && break; sleep 1; done; "
                            f"curl -sS --fail --noproxy '*' https://{API_HOST}/{tok}/restored{i} 2>&1; true")
            assert "hello host=" in out, out
        assert [e["auth"] for e in upstream(vmcred, tok)] == [f"Bearer {value}"] * 4
        # a child branched from that memory is another sandbox: a CA of its own, in its trust store
        r = d.api("POST", f"/v1/sandboxes/{sid}/branch", json={"from": "withca", "count": 1, "with_memory": True},
                  timeout=600)
        assert r.status == 201, r
        kid = r.json()["sandboxes"][0]["id"]
        try:
            kpem = d.sh(kid, "cat /etc/ssl/certs/space-sandbox-ca.pem")
            subj = subprocess.run(["openssl", "x509", "-noout", "-subject"], input=kpem, capture_output=True,
                                  text=True)
            assert subj.returncode == 0 and subj.stdout.strip().endswith(f"CN = space sandbox {kid}"), (subj, kpem)
        finally:
            d.delete(kid)
        # revoked: at once, the next request goes without it
        assert d.api("POST", f"/v1/credentials/{name}/revoke").status == 200
        d.sh(sid, f"curl -sS -k --fail --noproxy '*' https://{API_HOST}/{tok}/after 2>&1; true")
        assert [e["auth"] for e in upstream(vmcred, tok)] == [f"Bearer {value}"] * 4 + [None]
        # the value nowhere in the guest's files or environment
        hits = d.sh(sid, f"grep -rl '{value}' /etc /root /tmp /proc/[0-9]*/environ 2>/dev/null; true")
        assert hits.strip() == "", hits
        assert value not in d.log_text()
    finally:
        d.delete(sid)
