# SPDX-License-Identifier: MIT
"""Mutual TLS between cluster nodes (docs/operations.md, Cluster TLS): a
cluster of two workers, an API server and a controller whose certificates
scripts/cluster-certs.sh made. Create, exec, files and a checkpoint shipped
to the other worker all run over TLS, and a certificate replaced in place is
used by the next connection; a plaintext client, a client whose
certificate is of another CA, and a worker whose certificate names another
worker are refused; the bytes on the wire (a relay in the test records them)
hold neither the cluster token nor a request. Handshakes resume TLS 1.3
sessions, and a certificate or CA replaced ends them: the next handshake
is a full one, verified against the new files."""
import ctypes
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading

import pytest

import test_scaleout as so
from test_scaleout import Cluster, Proc, _wait

CERTS = os.path.join(so.REPO, "scripts", "cluster-certs.sh")


def _certs(d, *nodes):
    subprocess.run(["sh", CERTS, d, "ca"], check=True, capture_output=True)
    for n, *ips in nodes:
        subprocess.run(["sh", CERTS, d, "node", n, *ips], check=True, capture_output=True)


@pytest.fixture(scope="module")
def tls_cluster(e2e_session):
    s = e2e_session
    s.check_binaries()
    r = subprocess.run(["sh", so.PG_SCRIPT, "start"], capture_output=True, text=True, timeout=120)
    if r.returncode == 77:
        pytest.skip("no PostgreSQL here")
    assert r.returncode == 0, r.stderr
    c = Cluster(s)
    c.pg_url = r.stdout.strip()
    try:
        c.token_file = os.path.join(c.base, "cluster.token")
        with open(os.open(c.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(os.urandom(24).hex() + "\n")
        c.template_dir = os.path.join(c.base, "templates")
        os.makedirs(c.template_dir)
        os.link(s.base_template(), os.path.join(c.template_dir, "base.tar"))
        c.subnet = c.pick_subnet()
        c.master_key_file = os.path.join(c.base, "master.key")
        with open(os.open(c.master_key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(os.urandom(32))
        c.addresses = {}
        for i in range(2):
            ns, addr = c.add_host(i)
            c.addresses[f"w{i + 1}"] = (i, addr, ns)
        c.tls = os.path.join(c.base, "tls")
        _certs(c.tls, *[(n, a.rsplit(":", 1)[0]) for n, (i, a, ns) in c.addresses.items()], ("api",))
        c.other_ca = os.path.join(c.base, "tls-other")
        _certs(c.other_ca, ("api",))
        for name, (i, addr, ns) in c.addresses.items():
            c.workers[name] = c.start_worker(name, i, addr, ns)
        c.apis = [c.start_api(1)]
        with open(os.path.join(c.base, "api1", "admin.key")) as f:
            c.key = f.read().strip()
        c.controllers = [c.start_controller(1)]
        yield c
    finally:
        problems = c.teardown()
        if problems:
            pytest.fail("cluster teardown:\n  " + "\n  ".join(problems))


def _tls_client(c, certs, worker):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(os.path.join(c.tls, "ca.crt"))
    ctx.load_cert_chain(os.path.join(certs, "api.crt"), os.path.join(certs, "api.key"))
    return ctx


def _token(c):
    with open(c.token_file) as f:
        return f.read().strip()


class _Recorder:
    """A TCP relay on loopback to a worker that keeps every byte it carries."""

    def __init__(self, target):
        self.target = target
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        self.seen = bytearray()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        conn, _ = self.lsock.accept()
        up = socket.create_connection(self.target, timeout=10)

        def pump(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    self.seen += d
                    b.sendall(d)
            except OSError:
                pass
            try:
                b.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        t = threading.Thread(target=pump, args=(up, conn), daemon=True)
        t.start()
        pump(conn, up)
        t.join(10)
        conn.close()
        up.close()
        self.lsock.close()


def test_cluster_over_tls_create_exec_files_ship(tls_cluster):
    c = tls_cluster
    api = c.apis[0]
    r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 256})
    assert r.status == 201, r
    sid, worker = r.json()["id"], r.json()["worker"]
    code, out = c.exec_out(api, sid, "echo over-tls")
    assert code == 0 and out == "over-tls\n", (code, out)
    body = b"file content over mutual TLS\n" * 1000
    r = c.req(api, "PUT", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/x"}, data=body)
    assert r.status in (200, 201, 204), r
    r = c.req(api, "GET", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/x"})
    assert r.status == 200 and r.body == body, r
    # a checkpoint, shipped by the controller to the other worker (worker to worker, TLS both ways)
    r = c.req(api, "POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "tls"})
    assert r.status in (200, 201), r
    ev = _wait(lambda: c.req(api, "GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.checkpoint_shipped"})
               .json()["events"], 60, "the checkpoint shipped")
    assert ev[0]["data"]["from_worker"] == worker and ev[0]["data"]["worker"] != worker, ev
    # the controller, which asked for the ship over TLS, counts its handshakes on its probe's /metrics
    status, metrics = so._probe(c.controllers[0], "/metrics")
    assert status == 200 and "# TYPE space_cluster_tls_handshakes_total counter\n" in metrics, metrics
    full = re.search(r'^space_cluster_tls_handshakes_total\{resumed="false"\} (\d+)$', metrics, re.M)
    assert full and int(full.group(1)) >= 1, metrics
    # rotation: the files are read again for each new connection. The worker's
    # certificate replaced in place by one of another CA: refused at once; the
    # cluster's back (re-issued by scripts/cluster-certs.sh): served again
    saved = {}
    for ext in ("crt", "key"):
        with open(f"{c.tls}/{worker}.{ext}", "rb") as f:
            saved[ext] = f.read()
        shutil.copy(f"{c.other_ca}/api.{ext}", f"{c.tls}/{worker}.{ext}")
    r = c.req(api, "POST", f"/v1/sandboxes/{sid}/exec", json={"shell": "true"})
    assert r.status >= 500, r
    subprocess.run(["sh", CERTS, c.tls, "node", worker], check=True, capture_output=True)
    assert open(f"{c.tls}/{worker}.crt", "rb").read() != saved["crt"]
    code, out = c.exec_out(api, sid, "echo rotated")
    assert code == 0 and out == "rotated\n", (code, out)
    assert c.req(api, "DELETE", f"/v1/sandboxes/{sid}").status == 200


def test_plaintext_and_other_ca_refused_wire_encrypted(tls_cluster):
    c = tls_cluster
    i, addr, ns = c.addresses["w1"]
    host_, port = addr.rsplit(":", 1)
    hello = json.dumps({"op": "hello", "token": _token(c), "worker": "w1"}).encode() + b"\n"
    # plaintext, with the right token: no answer but the end of the connection
    with socket.create_connection((host_, int(port)), timeout=10) as sock:
        sock.sendall(hello)
        data = b""
        try:
            while chunk := sock.recv(4096):
                data += chunk
        except ConnectionResetError:
            pass
    assert b"ok" not in data, data
    assert c.workers["w1"].wait_log("Refused an internal connection from", 10)
    # a client certificate of another CA: the handshake is refused
    ctx = _tls_client(c, c.other_ca, "w1")
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        with socket.create_connection((host_, int(port)), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="w1") as t:
                t.sendall(hello)
                if not t.recv(4096):
                    raise ConnectionResetError("closed")
    # the cluster's certificate through a recording relay: the hello answered,
    # neither the token nor the request on the wire
    rec = _Recorder((host_, int(port)))
    ctx = _tls_client(c, c.tls, "w1")
    with socket.create_connection(("127.0.0.1", rec.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="w1") as t:
            t.sendall(hello)
            f = t.makefile("rb")
            assert json.loads(f.readline()) == {"ok": True, "worker": "w1"}
            t.sendall(b'{"op":"info"}\n')
            assert json.loads(f.readline())["ok"] is not False
            f.close()  # else its reference keeps the connection open
    rec.t.join(10)
    assert not rec.t.is_alive(), "the worker did not close the connection"
    assert len(rec.seen) > 1000 and rec.seen[0] == 0x16, bytes(rec.seen[:16])  # a TLS handshake record
    for plain in (_token(c).encode(), b'"op":"hello"', b'"op":"info"', b'"worker":"w1"'):
        assert plain not in rec.seen, plain


def _handshakes(c, api):
    """space_cluster_tls_handshakes_total of api: {"false": full, "true": resumed}."""
    r = c.req(api, "GET", "/metrics", key=None)
    assert r.status == 200, r
    assert "\n# TYPE space_cluster_tls_handshakes_total counter\n" in r.body.decode()
    got = {}
    for line in r.body.decode().splitlines():
        if line.startswith("space_cluster_tls_handshakes_total{resumed="):
            got[line.split('"')[1]] = int(line.split()[-1])
    assert set(got) == {"false", "true"}, got
    return got


def _sessions(api, mark, worker):
    """api's handshakes with worker since mark, from its log: "resumed",
    "full" or "refused" each."""
    out = []
    for line in api.log()[mark:].splitlines():
        if f'msg="Worker {worker} (' not in line:
            continue
        if "TLS session resumed" in line:
            out.append("resumed")
        elif "TLS session made" in line:
            out.append("full")
        elif "TLS handshake refused" in line:
            out.append("refused")
    return out


def _hello_session(c, ctx, addr, session=None):
    """One hello to the worker at addr with ctx (the cluster's certificate):
    (the session to resume later, whether this one was resumed)."""
    host_, port = addr.rsplit(":", 1)
    hello = json.dumps({"op": "hello", "token": _token(c), "worker": "w1"}).encode() + b"\n"
    with socket.create_connection((host_, int(port)), timeout=10) as raw:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as spaced's clients
        with ctx.wrap_socket(raw, server_hostname="w1", session=session) as t:
            t.sendall(hello)
            f = t.makefile("rb")
            assert json.loads(f.readline()) == {"ok": True, "worker": "w1"}  # the ticket came before it
            f.close()
            return t.session, t.session_reused


def test_sessions_resumed_and_ended_by_rotation(tls_cluster):
    """A second API server with files of its own. Its second call to a
    worker resumes the session; its CA replaced by another (the attack a
    cached session would let through: the worker's certificate is no
    longer one it trusts) ends its sessions: refused, not resumed; its
    CA back: a full handshake, verified. The worker's certificate replaced
    by one of another CA (after resumed sessions): its tickets die with its
    old context, the handshake is a full one and refused. The worker's side
    seen by a client of its own: a ticket resumes until the CA file is
    written again."""
    c = tls_cluster
    d = os.path.join(c.base, "tls-api2")
    os.makedirs(d, mode=0o700)
    for f in ("api.crt", "api.key", "ca.crt"):
        shutil.copy(os.path.join(c.tls, f), os.path.join(d, f))
    api = c.start_api(2, extra=[f"--cluster-tls-cert={d}/api.crt", f"--cluster-tls-key={d}/api.key",
                                f"--cluster-tls-ca={d}/ca.crt"])
    c.extra.append(api)
    sid = None
    try:
        r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 64})
        assert r.status == 201, r
        sid, worker = r.json()["id"], r.json()["worker"]
        c.exec_out(api, sid, "true")
        mark = len(api.log())
        assert c.exec_out(api, sid, "echo again") == (0, "again\n")
        got = _sessions(api, mark, worker)
        assert got and set(got) == {"resumed"}, got
        # the client's CA replaced: its cached sessions go with its context
        shutil.copy(os.path.join(c.other_ca, "ca.crt"), os.path.join(d, "ca.crt"))
        mark = len(api.log())
        r = c.req(api, "POST", f"/v1/sandboxes/{sid}/exec", json={"shell": "true"})
        assert r.status >= 500, r
        got = _sessions(api, mark, worker)
        assert got and set(got) == {"refused"}, got
        assert "TLS handshake refused: the peer's certificate" in api.log()[mark:]
        shutil.copy(os.path.join(c.tls, "ca.crt"), os.path.join(d, "ca.crt"))
        mark = len(api.log())
        assert c.exec_out(api, sid, "echo trusted") == (0, "trusted\n")
        got = _sessions(api, mark, worker)
        assert got and got[0] == "full" and "refused" not in got, got
        # the worker's certificate of another CA, after resumed sessions: a full handshake, refused
        mark = len(api.log())
        assert c.exec_out(api, sid, "true")[0] == 0
        assert "resumed" in _sessions(api, mark, worker)
        for ext in ("crt", "key"):
            shutil.copy(f"{c.other_ca}/api.{ext}", f"{c.tls}/{worker}.{ext}")
        try:
            mark = len(api.log())
            r = c.req(api, "POST", f"/v1/sandboxes/{sid}/exec", json={"shell": "true"})
            assert r.status >= 500, r
            got = _sessions(api, mark, worker)
            assert got and set(got) == {"refused"}, got
        finally:
            subprocess.run(["sh", CERTS, c.tls, "node", worker, c.addresses[worker][1].rsplit(":", 1)[0]],
                           check=True, capture_output=True)
        mark = len(api.log())
        assert c.exec_out(api, sid, "echo back") == (0, "back\n")
        got = _sessions(api, mark, worker)
        assert got and got[0] == "full" and "refused" not in got, got
        h = _handshakes(c, api)
        assert h["true"] >= 2 and h["false"] >= 2, h
    finally:
        if sid:
            c.req(c.apis[0], "DELETE", f"/v1/sandboxes/{sid}")
        api.stop()
        c.extra.remove(api)
    # the worker's tickets: resumed by a client of our own, until its CA file is written again
    ctx = _tls_client(c, c.tls, "w1")
    addr = c.addresses["w1"][1]
    sess, reused = _hello_session(c, ctx, addr)
    assert not reused
    sess, reused = _hello_session(c, ctx, addr, sess)
    assert reused
    with open(os.path.join(c.tls, "ca.crt"), "rb") as f:
        ca = f.read()
    with open(os.path.join(c.tls, "ca.crt"), "wb") as f:
        f.write(ca)
    _, reused = _hello_session(c, ctx, addr, sess)
    assert not reused


def test_worker_certificate_of_another_name_refused(tls_cluster):
    """A third worker that presents w1's certificate: the API server checks
    the certificate names the worker it wants, and refuses it."""
    c = tls_cluster
    ns, addr = c.add_host(2)
    link = c.last_link
    args = c.worker_args("w3", 2, addr)
    args = [a.replace(f"{c.tls}/w3.", f"{c.tls}/w1.") for a in args]
    p = Proc(c, "w3", args, ns).start()
    c.extra.append(p)
    api = c.apis[0]
    made = []
    try:
        assert p.wait_log("worker w3 serving on", 120, p.mark), p.log()[-3000:]
        mark = len(api.log())
        # creates go to either worker: those placed on w3 fail to reach it and go elsewhere
        for _ in range(6):
            r = c.req(api, "POST", "/v1/sandboxes", json={"disk_mb": 64})
            if r.status == 201:
                made.append(r.json()["id"])
                assert r.json()["worker"] != "w3", r.json()
            if "hostname mismatch" in api.log()[mark:]:
                break
        log = api.log()[mark:]
        assert "Worker w3" in log and "hostname mismatch" in log, log[-3000:]
        assert p.wait_log("Refused an internal connection from", 10, p.mark)
    finally:
        for sid in made:
            c.req(api, "DELETE", f"/v1/sandboxes/{sid}")
        p.stop()
        c.extra.remove(p)
        c.remove_host(ns, link)


def test_controller_probe_503_when_its_loop_stalls(tls_cluster):
    """controller_stall_s: /healthz answers 503 once the controller loop has
    not turned for that long. Only the loop's thread (the main one) is
    stopped (ptrace's interrupt of one thread): the probe thread answers."""
    c = tls_cluster
    port = so._free_port()
    p = Proc(c, "ctlstall", [c.s.spaced_bin, "--role", "controller", "--state-dir", c.state_dir("ctlstall"),
                             f"--controller-lease-s={so.LEASE_S}", "--controller-stall-s=2",
                             f"--controller-listen=127.0.0.1:{port}"] + c.key_args() + c.common()).start()
    p.probe_port = port
    c.extra.append(p)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
    try:
        _wait(lambda: _probe_ok(p) == 200, 30, "the controller's probe healthy")
        assert libc.ptrace(PTRACE_SEIZE, p.pid, None, None) == 0, os.strerror(ctypes.get_errno())
        try:
            assert libc.ptrace(PTRACE_INTERRUPT, p.pid, None, None) == 0, os.strerror(ctypes.get_errno())
            os.waitpid(p.pid, getattr(os, "__WALL", 0x40000000))
            status, body = _wait(lambda: (lambda r: r if r[0] == 503 else None)(so._probe(p, "/healthz")), 15,
                                 "the probe's 503")
            assert json.loads(body)["ok"] is False and json.loads(body)["loop_age_s"] >= 2, body
        finally:
            libc.ptrace(PTRACE_DETACH, p.pid, None, None)
        _wait(lambda: _probe_ok(p) == 200, 15, "the probe healthy again once the loop turns")
    finally:
        p.stop()
        c.extra.remove(p)


def _probe_ok(p):
    try:
        return so._probe(p, "/healthz")[0]
    except OSError:
        return None
