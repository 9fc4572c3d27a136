# SPDX-License-Identifier: MIT
"""Rotating the credentials' master key (`spaced rotate-master-key`) on a live
installation, on SQLite and on a real PostgreSQL: a real spaced with a
running sandbox of the debian template whose curl reaches an HTTPS upstream
(e2e_upstream.py: a network namespace of this module's own) through the
gateway, which puts the credential's header on the request.

- a bad new key file (missing, mode, size, symlink, another owner, the
  previous key) is refused with a clear message, nothing changed;
- a rotation killed in the middle of its transaction (SIGKILL while it holds
  re-sealed rows not yet committed) leaves every credential under the old
  key, and everything goes on working with it;
- a rotation under a running spaced that holds only the old key: the
  sandbox's gateway keeps injecting, the API refuses to seal (503) rather
  than seal under a key that is no longer the store's; restarted with the
  new key (and the old one as master_key_previous_file) all works, the
  running sandbox included; a spaced started with only the old key is
  refused with a message that says why;
- a second rotation with spaced ready for it (the next key as
  master_key_file, the current one as master_key_previous_file): no restart,
  the API seals under the new key from the commit on, the sandbox keeps its
  header, a new grant works at once.
Values never appear in the tool's output or the daemon's log."""

import hashlib
import hmac
import os
import secrets
import signal
import sqlite3
import subprocess
import threading
import time
import uuid

import pytest

import e2e_host as host
import e2e_residue as residue
from e2e_daemon import clean_env
from e2e_upstream import HttpsUpstream

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SPACE_BUILD_DIR", os.path.join(REPO, "build"))
DEBIAN_TAR = os.environ.get("SPACE_DEBIAN_TAR", os.path.join(BUILD, "templates", "debian.tar"))
PG_SCRIPT = os.path.join(REPO, "tests", "pg-test-server.sh")
API_HOST = "api.rot.test"
LABEL = b"space credentials master key fingerprint v1"


def fingerprint(key):
    return hmac.new(key, LABEL, hashlib.sha256).hexdigest()[:32]


def key_id(key):
    return hashlib.sha256(key).hexdigest()[:16]


class Keys:
    """Master key files in a private directory."""

    def __init__(self, d):
        self.dir = d
        os.chmod(d, 0o700)

    def make(self, name, data=None, mode=0o600):
        path = os.path.join(self.dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32) if data is None else data)
        os.chmod(path, mode)
        return path

    @staticmethod
    def read(path):
        with open(path, "rb") as f:
            return f.read()


class Rot:
    def __init__(self, backend, d, up, keys, pg_url):
        self.backend, self.d, self.up, self.keys, self.pg_url = backend, d, up, keys, pg_url
        self.base_args = list(d.extra_args)

    def store_args(self):
        return ["--store-url", self.pg_url] if self.pg_url else []

    def key_args(self, cur, prev=None):
        return ["--master-key-file", cur] + (["--master-key-previous-file", prev] if prev else [])

    def set_keys(self, cur, prev=None):
        self.d.extra_args = self.base_args + self.key_args(cur, prev)

    def rotate(self, new, cur, prev=None, extra=(), wait=True):
        args = [self.d.s.spaced_bin, "rotate-master-key", "--state-dir", self.d.state_dir, *self.store_args(),
                *self.key_args(cur, prev), *extra] + (["--new-key", new] if new else [])
        if not wait:
            return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=clean_env())
        return subprocess.run(args, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                              env=clean_env())

    def query(self, sql):
        if self.pg_url:
            r = subprocess.run(["psql", "-tA", "-F", "|", self.pg_url, "-c", sql], capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0, r.stderr
            return [tuple(line.split("|")) for line in r.stdout.splitlines() if line]
        db = os.path.join(self.d.state_dir, "space.db")
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
            return [tuple(str(x) for x in row) for row in conn.execute(sql).fetchall()]

    def rows(self):
        """{(tenant, name): (key_id, ciphertext)} of every credential."""
        return {(t, n): (k, c) for t, n, k, c in
                self.query("SELECT tenant_id, name, key_id, ciphertext FROM credentials ORDER BY 1, 2")}

    def setting(self, name):
        got = self.query(f"SELECT value FROM cluster_settings WHERE name = '{name}'")
        return got[0][0] if got else None


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def rot(request, e2e_session, tmp_path_factory):
    if not os.path.exists(DEBIAN_TAR):
        pytest.skip(f"the debian template is not built ({DEBIAN_TAR}: templates/debian/build.sh)")
    pg_url, up, d, x = None, None, None, None
    if request.param == "postgres":
        r = subprocess.run(["sh", PG_SCRIPT, "start"], capture_output=True, text=True, timeout=120)
        if r.returncode == 77:
            pytest.skip("no PostgreSQL here")
        assert r.returncode == 0, r.stderr
        pg_url = r.stdout.strip()
    try:
        keys = Keys(str(tmp_path_factory.mktemp("rotkeys")))
        up = HttpsUpstream("spkr", "172.26", tmp_path_factory.mktemp("rotup"), [API_HOST], "space e2e rotation CA")
        d = e2e_session.new_daemon(extra_args=[f"--gateway-dns-upstream={up.srv_ip}:53",
                                               f"--gateway-ca-file={up.ca_pem}"]
                                   + (["--store-url", pg_url] if pg_url else []))
        x = Rot(request.param, d, up, keys, pg_url)
        x.box = None
        x.k1 = keys.make("k1")
        x.cur, x.prev = x.k1, None
        x.set_keys(x.k1)
        d.start()
        r = d.cli("template", "import", "debian", DEBIAN_TAR, timeout=600)
        assert r.rc == 0, r
        x.name, x.value = new_cred(d)
        x.box = d.create(template="debian", credentials=[x.name], network={"allow": [API_HOST]})["id"]
        assert header_seen(x, x.box) == f"Bearer {x.value}"
        yield x
    finally:
        try:
            if up is not None:
                up.close()
            if d is not None and d.running and x is not None and x.box:
                # adopted across restarts: its PID 1 is not the worker's child, wait for it to be gone
                pid = d.agent_pid(x.box)
                d.delete(x.box)
                assert not host.wait_gone([pid] if pid else [], 30)
            if d is not None:
                residue.finish_daemon(d, request)
        finally:
            if pg_url:   # also when the teardown above failed
                subprocess.run(["sh", PG_SCRIPT, "stop", pg_url], capture_output=True, timeout=120)


def new_cred(d, expect=201):
    name = "c" + uuid.uuid4().hex[:10]
    value = "sk-rot-" + secrets.token_hex(16)
    r = d.api("POST", "/v1/credentials", json={"name": name, "value": value, "hosts": [API_HOST]})
    assert r.status == expect, r
    return name, value


def header_seen(x, sid):
    """What the upstream got as Authorization from curl in the sandbox."""
    tok = secrets.token_hex(6)
    r = x.d.exec(sid, shell=f"curl -sS --fail --noproxy '*' https://{API_HOST}/{tok}", timeout=120)
    assert r.code == 0, r
    got = x.up.requests(tok)
    assert len(got) == 1 and got[0]["tls"], got
    return got[0]["auth"]


def rotated_events(x, key=None):
    """The rotations' audit records, as an admin (or the given key) sees them."""
    kw = {} if key is None else {"key": key}
    r = x.d.api("GET", "/v1/events", params={"type": "credential.master_key_rotated"}, **kw)
    assert r.status == 200, r
    return r.json()["events"]


def assert_rotated_event(x, ev, resealed, total, new, prev, *values):
    """A system-wide event with counts and fingerprints, nothing of a key or a value."""
    assert ev["tenant"] == "" and ev["sandbox"] is None, ev
    assert ev["actor"] == "rotate-master-key", ev
    d = ev["data"]
    assert (d["resealed"], d["credentials"]) == (resealed, total), ev
    assert d["fingerprint"] == fingerprint(Keys.read(new)), ev
    assert d["previous_fingerprint"] == (fingerprint(Keys.read(prev)) if prev else None), ev
    assert d["host"] and f"{resealed} of {total} credentials re-sealed" in ev["reason"], ev
    text = repr(ev)
    for v in values:
        assert v not in text
    for f in os.listdir(x.keys.dir):
        assert Keys.read(os.path.join(x.keys.dir, f)).hex() not in text


def assert_quiet(x, p, *values):
    """No value and no key in the tool's output."""
    text = p.stdout + p.stderr
    for v in values:
        assert v not in text
    for f in os.listdir(x.keys.dir):
        assert Keys.read(os.path.join(x.keys.dir, f)).hex() not in text


def test_bad_new_key_refused(rot):
    x = rot
    before = x.rows()
    fp = x.setting("master_key_fingerprint")
    assert fp == fingerprint(Keys.read(x.cur))
    good = os.urandom(32)
    cases = {
        "missing": (os.path.join(x.keys.dir, "nope"), "No such file"),
        "mode": (x.keys.make("bad-mode", good, 0o640), "0640"),
        "size": (x.keys.make("bad-size", good[:16]), "16 bytes"),
        "owner": (x.keys.make("bad-owner", good), "owned by uid 65534"),
        "symlink": (os.path.join(x.keys.dir, "bad-link"), "symbolic link"),
    }
    os.chown(cases["owner"][0], 65534, 65534)
    os.symlink(x.keys.make("link-target", good), cases["symlink"][0])
    for what, (path, words) in cases.items():
        p = x.rotate(path, x.cur, x.prev)
        assert p.returncode != 0, (what, p)
        assert "new master key" in p.stderr and words in p.stderr, (what, p.stderr)
        assert_quiet(x, p, x.value)
    p = x.rotate(None, x.cur, x.prev)
    assert p.returncode != 0 and "--new-key" in p.stderr, p
    # the key the store's credentials are sealed under is not master_key_file: refused
    other = x.keys.make("other", os.urandom(32))
    p = x.rotate(x.keys.make("k-next-unused"), other)
    assert p.returncode != 0 and "neither" in p.stderr and "nothing changed" in p.stderr, p.stderr
    assert x.rows() == before and x.setting("master_key_fingerprint") == fp
    assert rotated_events(x) == []   # a refused rotation leaves no record of one
    assert header_seen(x, x.box) == f"Bearer {x.value}"


def test_crash_mid_rotation_changes_nothing(rot):
    """SIGKILL while the rotation holds re-sealed rows not yet committed."""
    x = rot
    extra_name, _ = new_cred(x.d)   # at least two rows: it stalls after the first
    before = x.rows()
    assert len(before) >= 2
    fp = x.setting("master_key_fingerprint")
    k_crash = x.keys.make("k-crash")
    p = x.rotate(k_crash, x.cur, x.prev, extra=["--stall-after", "1"], wait=False)
    try:
        line = p.stderr.readline()
        assert "stalled after re-sealing 1 credentials" in line, line
        if x.backend == "postgres":
            # only credential writes wait for it: the API and the sandbox go on
            # (SQLite has one writer: every write of the store waits, and this
            # stall holds it indefinitely where a rotation takes milliseconds)
            assert x.d.api("GET", "/v1/credentials").status == 200
            assert header_seen(x, x.box) == f"Bearer {x.value}"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    assert p.returncode == -signal.SIGKILL
    # nothing half re-sealed: every row as it was, the store's key unchanged
    assert x.rows() == before
    assert x.setting("master_key_fingerprint") == fp
    assert all(k == key_id(Keys.read(x.cur)) for k, _ in before.values())
    assert rotated_events(x) == []   # the audit record commits with the rotation or not at all
    # the old key still opens everything: a new sandbox with both credentials
    sid = x.d.create(template="debian", credentials=[x.name, extra_name], network={"allow": [API_HOST]})["id"]
    try:
        assert header_seen(x, sid).startswith("Bearer sk-rot-")
    finally:
        x.d.delete(sid)
    assert x.d.api("DELETE", f"/v1/credentials/{extra_name}").status == 204


def test_rotate_live_restart_stale_refused_and_rotate_again(rot):
    x = rot
    d = x.d
    k1 = x.cur
    k2 = x.keys.make("k2")
    old = x.rows()
    log0 = d.log_size()

    # 1. rotate under a running spaced that holds only k1
    p = x.rotate(k2, k1)
    assert p.returncode == 0, p.stderr
    assert "re-sealed" in p.stderr and fingerprint(Keys.read(k2)) in p.stderr, p.stderr
    assert_quiet(x, p, x.value)
    assert os.path.exists(k1) and os.path.exists(k2)   # no key file deleted
    rows = x.rows()
    assert set(rows) == set(old)
    assert all(k == key_id(Keys.read(k2)) for k, _ in rows.values()), rows
    assert all(rows[r][1] != old[r][1] for r in rows)
    assert x.setting("master_key_fingerprint") == fingerprint(Keys.read(k2))
    assert x.setting("master_key_previous_fingerprint") == fingerprint(Keys.read(k1))
    assert x.setting("master_key_id") == key_id(Keys.read(k2))
    # the audit record operators see: system-wide, for admin keys only
    evs = rotated_events(x)
    assert len(evs) == 1, evs
    assert_rotated_event(x, evs[0], len(rows), len(rows), k2, k1, x.value)
    other = d.api("POST", "/v1/keys", json={"name": "rot-viewer", "tenant": "rot-other"})
    assert other.status == 201, other
    assert rotated_events(x, key=other.json()["key"]) == []
    # the running sandbox's gateway holds the opened value: still injected
    assert header_seen(x, x.box) == f"Bearer {x.value}"
    # this API server does not hold k2: it seals nothing under k1 any more
    r = d.api("POST", "/v1/credentials", json={"name": "c" + uuid.uuid4().hex[:10], "value": "sk-rot-x",
                                               "hosts": [API_HOST]})
    assert r.status == 503 and "restarted with the new master_key_file" in r.json()["error"]["message"], r
    # running it again is harmless (all rows are under k2 already)
    p = x.rotate(k2, k2, k1)
    assert p.returncode == 0 and "already" in p.stderr, p.stderr
    assert x.rows() == rows
    evs = rotated_events(x)
    assert len(evs) == 2 and "run again" in evs[1]["reason"], evs
    assert_rotated_event(x, evs[1], 0, len(rows), k2, None, x.value)

    # 2. a spaced with only the old key is refused, and says why
    assert not d.stop()
    x.set_keys(k1)
    p = subprocess.run(d.args(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                       env=clean_env())
    assert p.returncode != 0, p
    assert "before the last master key rotation" in p.stderr and "master_key_file" in p.stderr, p.stderr[-2000:]
    # 3. restarted with k2 (k1 as the previous key): the running sandbox is adopted and keeps its header
    x.set_keys(k2, k1)
    x.cur, x.prev = k2, k1
    d.start()
    assert header_seen(x, x.box) == f"Bearer {x.value}"
    n2, v2 = new_cred(d)
    assert x.rows()[(tenant_of(x), n2)][0] == key_id(Keys.read(k2))

    # 4. a second rotation, zero downtime: spaced restarted ready for it
    #    (k3 as master_key_file, k2 as master_key_previous_file) before it runs
    k3 = x.keys.make("k3")
    assert not d.stop()
    x.set_keys(k3, k2)
    d.start()
    assert "sealed under master_key_previous_file" in d.log_text(log0)
    n3, v3 = new_cred(d)   # sealed under the store's key, k2, until the rotation
    assert x.rows()[(tenant_of(x), n3)][0] == key_id(Keys.read(k2))
    # a credential written while the rotation's transaction is open waits for
    # it, and is not left behind under the key it replaces
    before3 = x.rows()
    p = x.rotate(k3, k3, k2, extra=["--stall-after", "1"], wait=False)
    racer = {}
    try:
        assert "stalled after re-sealing 1 credentials" in p.stderr.readline()
        t = threading.Thread(target=lambda: racer.update(r=d.api(
            "POST", "/v1/credentials", json={"name": "racer", "value": "sk-rot-racer-" + secrets.token_hex(8),
                                             "hosts": [API_HOST]})))
        t.start()
        time.sleep(1)
        waited = t.is_alive()
        p.send_signal(signal.SIGUSR1)   # on to the commit
        t.join(60)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
    assert p.returncode == 0, err
    r = racer["r"]
    if x.backend == "postgres":
        # sealed under k2 before the commit, inserted after it: refused, nothing kept
        assert waited, "the credential write did not wait for the rotation's transaction"
        assert r.status == 409 and "rotated while this request ran" in r.json()["error"]["message"], r
        assert "racer" not in {n for _, n in x.rows()}
    else:
        # SQLite: the request waited for the one writer, then sealed under the new key
        assert r.status == 201, r
    rows = x.rows()
    assert all(k == key_id(Keys.read(k3)) for k, _ in rows.values()), rows
    assert x.setting("master_key_previous_fingerprint") == fingerprint(Keys.read(k2))
    evs = rotated_events(x)
    assert len(evs) == 3, evs
    # the racer (SQLite) was written after the commit: not among the rotation's rows
    assert_rotated_event(x, evs[2], len(before3), len(before3), k3, k2, x.value, v2, v3)
    # no restart: the API seals under k3 from the commit on, the sandbox keeps its header
    n4, v4 = new_cred(d)
    assert x.rows()[(tenant_of(x), n4)][0] == key_id(Keys.read(k3))
    assert header_seen(x, x.box) == f"Bearer {x.value}"
    # a new sandbox granted a re-sealed credential gets its value
    sid = d.create(template="debian", credentials=[n3], network={"allow": [API_HOST]})["id"]
    try:
        assert header_seen(x, sid) == f"Bearer {v3}"
    finally:
        d.delete(sid)
    # k1 is two rotations old: refused too (another key than the store's)
    assert not d.stop()
    x.set_keys(k1)
    p = subprocess.run(d.args(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                       env=clean_env())
    assert p.returncode != 0 and "is not the one this store's credentials are sealed under" in p.stderr, p.stderr
    # k3 alone is enough now
    x.set_keys(k3)
    x.cur, x.prev = k3, None
    d.start()
    assert header_seen(x, x.box) == f"Bearer {x.value}"
    # never a value in the log
    text = d.log_text()
    for v in (x.value, v2, v3, v4):
        assert v not in text


def tenant_of(x):
    t = x.query("SELECT tenant_id FROM credentials ORDER BY created_usec LIMIT 1")
    return t[0][0]
