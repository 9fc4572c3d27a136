# SPDX-License-Identifier: MIT
"""Rotating the credentials' master key across a cluster (test_scaleout.py's
cluster on a private PostgreSQL: workers in network namespaces of their own,
two API servers, two controllers), the fleet procedure of
docs/operations.md: every API server and worker restarted one at a time with
the new key as master_key_file and the current one as
master_key_previous_file (they start, and seal under the store's key until
the rotation), then `spaced rotate-master-key` once: from its commit the API
servers seal under the new key and every worker's gateway opens both, with
no restart; sandboxes created before, during and after keep working; an API
server with only the old key is refused at its start, with the reason."""

import os
import subprocess

import pytest

from test_scaleout import Proc, _free_port, cluster  # noqa: F401 - the fixture
import e2e_http
import time

import hashlib


def key_id(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def make_key(c, name):
    path = os.path.join(c.base, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(os.urandom(32))
    return path


def psql(c, sql):
    r = subprocess.run(["psql", "-tA", "-F", "|", c.pg_url, "-c", sql], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split("|") for line in r.stdout.splitlines() if line]


def key_of(c, name):
    return psql(c, f"SELECT key_id FROM credentials WHERE name = '{name}'")[0][0]


def with_keys(args, cur, prev):
    return [a for a in args if not a.startswith(("--master-key-file=", "--master-key-previous-file="))] + \
        [f"--master-key-file={cur}", f"--master-key-previous-file={prev}"]


def restart_api(c, p, cur, prev):
    assert p.stop() == 0
    p.args = with_keys(p.args, cur, prev)
    p.start()
    end = time.monotonic() + 120
    while time.monotonic() < end:
        assert p.running, f"{p.name} exited:\n{p.log()[-3000:]}"
        try:
            if e2e_http.request(p.url, "GET", "/healthz", timeout=5).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{p.name} not healthy:\n{p.log()[-3000:]}")


def restart_worker(c, name, cur, prev):
    p = c.workers[name]
    assert p.stop() == 0
    p.args = with_keys(p.args, cur, prev)
    p.start()
    assert p.wait_log(f"worker {name} serving on", 300, p.mark), f"{name} did not start:\n{p.log()[-3000:]}"


def new_cred(c, api, name, expect=201):
    r = c.req(api, "POST", "/v1/credentials", json={"name": name, "value": "sk-fleet-" + os.urandom(8).hex(),
                                                    "hosts": ["api.fleet.test"]})
    assert r.status == expect, r
    return r


def create_with(c, api, creds):
    r = c.req(api, "POST", "/v1/sandboxes", json={"credentials": creds, "disk_mb": 256})
    assert r.status == 201, r
    return r.json()["id"]


@pytest.mark.timeout(900)
def test_fleet_rotation_without_a_gap(cluster):  # noqa: F811 - the fixture
    c = cluster
    api_a, api_b = c.apis
    k1 = c.master_key_file
    k2 = make_key(c, "master.key.2")
    try:
        new_cred(c, api_a, "fleet-one")
        before = create_with(c, api_b, ["fleet-one"])
        assert key_of(c, "fleet-one") == key_id(k1)

        # 1. the fleet gets ready, one process at a time (sandboxes stay up)
        for name in list(c.workers):
            restart_worker(c, name, k2, k1)
            assert "not yet under" in c.workers[name].log()[c.workers[name].mark:], name
        for p in c.apis:
            restart_api(c, p, k2, k1)
        # still sealed under the store's key, k1
        new_cred(c, api_b, "fleet-two")
        assert key_of(c, "fleet-two") == key_id(k1)
        during = create_with(c, api_a, ["fleet-one", "fleet-two"])

        # 2. the rotation, once, from any host with the store and the keys
        r = subprocess.run([c.s.spaced_bin, "rotate-master-key", "--state-dir", c.state_dir("rotate"),
                            "--store-url", c.pg_url, f"--master-key-file={k2}", f"--master-key-previous-file={k1}",
                            "--new-key", k2], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                           env=c.env)
        assert r.returncode == 0, r.stderr
        assert {row[0] for row in psql(c, "SELECT DISTINCT key_id FROM credentials")} == {key_id(k2)}
        # its audit record, seen through either API server (the store's events)
        ev = c.req(api_b, "GET", "/v1/events", params={"type": "credential.master_key_rotated"})
        assert ev.status == 200, ev
        evs = ev.json()["events"]
        assert len(evs) == 1 and evs[0]["tenant"] == "" and evs[0]["data"]["resealed"] == 2, evs

        # 3. no restart: new values sealed under k2, every gateway opens them
        new_cred(c, api_a, "fleet-three")
        assert key_of(c, "fleet-three") == key_id(k2)
        after = create_with(c, api_b, ["fleet-one", "fleet-two", "fleet-three"])
        for sid in (before, during):
            r = c.req(api_a, "POST", f"/v1/sandboxes/{sid}/credentials/fleet-three")
            assert r.status == 201, r
        for sid in (before, during, after):
            ev = c.req(api_a, "GET", "/v1/events", params={"sandbox": sid, "type": "credential.unavailable"})
            assert ev.status == 200 and not ev.json()["events"], ev.json()

        # 4. an API server with only the old key: refused, with the reason
        p = Proc(c, "stalekeyapi", [c.s.spaced_bin, "--role", "api", "--state-dir", c.state_dir("stalekeyapi"),
                                    "--listen", f"127.0.0.1:{_free_port()}"] + c.common()
                 + [f"--master-key-file={k1}"]).start()
        c.extra.append(p)
        assert p.proc.wait(120) != 0
        assert "before the last master key rotation" in p.log(), p.log()[-3000:]
    finally:
        c.delete_all()
