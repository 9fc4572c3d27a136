# SPDX-License-Identifier: MIT
"""Tenancy limits: per-key and per-tenant request limits (streams, requests
in flight, request rate) answered 429 with Retry-After and the limit's
name; tenant quotas (sandboxes, CPU, memory, disk, checkpoints) admitted at
create, branch and checkpoint, set by admin keys; and a hostile tenant that
cannot starve another."""

import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import uuid

import pytest

import e2e_host as host
import e2e_http
import e2e_residue as residue
from e2e_daemon import assert_error_shape

HERE = os.path.dirname(os.path.abspath(__file__))


def new_tenant():
    return "t" + uuid.uuid4().hex[:12]


def make_key(spaced, tenant, key=None):
    kw = {} if key is None else {"key": key}
    r = spaced.api("POST", "/v1/keys", json={"name": "tenancy", "tenant": tenant}, **kw)
    assert r.status == 201, r
    return r.json()["key"]


def set_quotas(spaced, tenant, **q):
    r = spaced.api("PUT", f"/v1/tenants/{tenant}", json=q)
    assert r.status == 200, r
    return r.json()


def assert_limited(r, *words):
    assert_error_shape(r, 429, "too_many_requests")
    ra = r.headers.get("retry-after")
    assert ra is not None and ra.isdigit() and int(ra) >= 1, f"429 without a Retry-After: {r!r}"
    msg = r.json()["error"]["message"]
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def follow(spaced, key):
    return spaced.api("GET", "/v1/events", params={"follow": "1"}, key=key, stream=True, timeout=30)


def stream_error(s):
    body = s.read()
    s.close()
    return e2e_http.Response(s.method, s.path, s.status, s.resp.reason, s.resp.getheaders(), body)


# ---- per-key and per-tenant request limits ----

def test_open_streams_over_the_key_limit_get_429_naming_it(spaced):
    t = new_tenant()
    key = make_key(spaced, t)
    other = make_key(spaced, new_tenant())
    held = []
    try:
        for i in range(64):
            s = follow(spaced, key)
            assert s.status == 200, f"stream {i + 1} of 64: {s.status}"
            held.append(s)
        s = follow(spaced, key)
        assert s.status == 429, f"the 65th open stream of a key: {s.status}"
        r = stream_error(s)
        spaced.check_response(r)
        msg = assert_limited(r, "64 open streams", "key_streams_max=64")
        # a key of another tenant, and the admin, are served meanwhile
        s = follow(spaced, other)
        assert s.status == 200, s.status
        s.close()
        assert spaced.api("GET", "/v1/sandboxes").status == 200
        assert spaced.api("GET", "/v1/sandboxes", key=key).status == 200, "a plain request of the key at its " \
            f"stream limit ({msg})"
    finally:
        for s in held:
            s.close()
    # the streams it closed are given back
    deadline = time.monotonic() + 20
    while True:
        s = follow(spaced, key)
        if s.status == 200:
            s.close()
            break
        stream_error(s)
        assert time.monotonic() < deadline, "the key's closed streams were not given back"
        time.sleep(0.2)


def test_tenant_request_rate_429_with_retry_after(spaced):
    t = new_tenant()
    key = make_key(spaced, t)
    other = make_key(spaced, new_tenant())
    q = set_quotas(spaced, t, rps=2)
    assert q["quotas"]["rps"] == 2 and q["overrides"] == {"rps": 2}, q
    statuses = []
    limited = None
    for _ in range(20):
        r = spaced.api("GET", "/v1/sandboxes", key=key)
        statuses.append(r.status)
        if r.status == 429 and limited is None:
            limited = r
        # the other tenant is not limited by this one's rate
        assert spaced.api("GET", "/v1/sandboxes", key=other).status == 200
    assert limited is not None, f"20 requests at once at rps=2 (burst 4): {statuses}"
    assert statuses[:4] == [200] * 4, statuses
    assert_limited(limited, f"tenant '{t}'", "rps=2", "the tenant's quota")
    m = spaced.api("GET", "/metrics", key=None)
    counted = [l for l in m.text().splitlines() if l.startswith("space_http_requests_limited_total ")]
    assert counted and int(counted[0].split()[1]) >= statuses.count(429), counted
    # back to the default: served again
    set_quotas(spaced, t, rps=None)
    r = spaced.api("GET", f"/v1/tenants/{t}")
    assert r.status == 200 and "rps" not in r.json()["overrides"], r
    deadline = time.monotonic() + 10
    while spaced.api("GET", "/v1/sandboxes", key=key).status != 200:
        assert time.monotonic() < deadline, "still limited after the tenant's rps went back to the default"
        time.sleep(0.5)


def test_tenant_stream_quota_spans_its_keys(spaced):
    t = new_tenant()
    keys = [make_key(spaced, t) for _ in range(3)]
    set_quotas(spaced, t, streams=4)
    held = []
    try:
        for i in range(4):
            s = follow(spaced, keys[i % 3])
            assert s.status == 200, s.status
            held.append(s)
        s = follow(spaced, keys[2])
        assert s.status == 429, s.status
        assert_limited(stream_error(s), f"tenant '{t}' has 4 open streams", "streams=4")
    finally:
        for s in held:
            s.close()


# ---- quotas ----

def test_sandbox_quota_refuses_the_create_over_it(spaced):
    t, u = new_tenant(), new_tenant()
    key, key_u = make_key(spaced, t), make_key(spaced, u)
    q = set_quotas(spaced, t, sandboxes=1)
    assert q["name"] == t and q["quotas"]["sandboxes"] == 1 and q["usage"]["sandboxes"] == 0, q
    sb = spaced.create(key=key)
    try:
        r = spaced.api("POST", "/v1/sandboxes", json={}, key=key, timeout=180)
        assert_limited(r, f"tenant '{t}'", "sandboxes=1", "1 in use")
        # another tenant is not touched by it
        sb_u = spaced.create(key=key_u)
        spaced.delete(sb_u["id"], key=key_u)
        # its own key reads its quota and usage; not another's, not the list, never sets them
        r = spaced.api("GET", f"/v1/tenants/{t}", key=key)
        assert r.status == 200 and r.json()["usage"]["sandboxes"] == 1, r
        assert r.json()["usage"]["memory_mb"] == sb["memory_mb"], r
        assert_error_shape(spaced.api("GET", f"/v1/tenants/{u}", key=key), 404, "not_found")
        assert_error_shape(spaced.api("GET", "/v1/tenants", key=key), 403, "forbidden")
        assert_error_shape(spaced.api("PUT", f"/v1/tenants/{t}", json={"sandboxes": 10}, key=key), 403, "forbidden")
        # the admin lists it
        r = spaced.api("GET", "/v1/tenants")
        assert r.status == 200 and t in [x["name"] for x in r.json()["tenants"]], r
    finally:
        spaced.delete(sb["id"], key=key)
    # room again once deleted
    sb = spaced.create(key=key)
    spaced.delete(sb["id"], key=key)


def test_cpu_memory_checkpoint_and_branch_quotas(spaced):
    t = new_tenant()
    key = make_key(spaced, t)
    set_quotas(spaced, t, cpu_millis=1500, memory_mb=1024, checkpoints=1, sandboxes=3)
    a = spaced.create(key=key, cpu=1, memory_mb=256)
    try:
        r = spaced.api("POST", "/v1/sandboxes", json={"cpu": 1, "memory_mb": 256}, key=key, timeout=180)
        assert_limited(r, "cpu_millis=1500", "1000 in use")
        r = spaced.api("POST", "/v1/sandboxes", json={"cpu": 0.5, "memory_mb": 1024}, key=key, timeout=180)
        assert_limited(r, "memory_mb=1024", "256 in use")
        r = spaced.api("POST", f"/v1/sandboxes/{a['id']}/checkpoints", json={}, key=key, timeout=180)
        assert r.status == 201, r
        r = spaced.api("POST", f"/v1/sandboxes/{a['id']}/checkpoints", json={}, key=key, timeout=180)
        assert_limited(r, "checkpoints=1", "1 in use")
        # a branch of 2 children (1000 CPU each) does not fit 1500; nothing of it is left
        r = spaced.api("POST", f"/v1/sandboxes/{a['id']}/branch", json={"count": 2}, key=key, timeout=180)
        assert_limited(r, "cpu_millis=1500", "this branch needs 2000 more")
        listed = spaced.api("GET", "/v1/sandboxes", key=key).json()["sandboxes"]
        assert [s["id"] for s in listed] == [a["id"]], listed
        r = spaced.api("GET", f"/v1/tenants/{t}", key=key).json()
        assert r["usage"] == {"sandboxes": 1, "cpu_millis": 1000, "memory_mb": 256,
                              "disk_mb": a["disk_mb"], "checkpoints": 1}, r
    finally:
        spaced.delete(a["id"], key=key)


def test_concurrent_creates_cannot_pass_the_quota_together(spaced):
    t = new_tenant()
    key = make_key(spaced, t)
    set_quotas(spaced, t, sandboxes=2)
    results = []
    lock = threading.Lock()

    def create():
        r = spaced.api("POST", "/v1/sandboxes", json={}, key=key, timeout=180)
        with lock:
            results.append(r)

    threads = [threading.Thread(target=create) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(200)
    made = [r.json()["id"] for r in results if r.status == 201]
    try:
        assert len(results) == 6
        assert len(made) == 2, [(r.status, r.body[:120]) for r in results]
        for r in results:
            if r.status != 201:
                assert_limited(r, "sandboxes=2")
    finally:
        for sid in made:
            spaced.delete(sid, key=key)


BAD_QUOTAS = [
    ({"sandboxes": -1}, "invalid_argument", "sandboxes must be an integer"),
    ({"cpu_millis": "4000"}, "invalid_argument", "cpu_millis must be an integer"),
    ({"memory_mb": 1.5}, "invalid_argument", "memory_mb must be an integer"),
    ({"disk_mb": True}, "invalid_argument", "disk_mb must be an integer"),
    ({"checkpoints": 2 ** 41}, "invalid_argument", "checkpoints must be an integer"),
    ({"volumes": 3}, "unknown_field", "unknown field 'volumes'"),
    ({}, "invalid_argument", "at least one quota"),
]


@pytest.mark.parametrize("i", range(len(BAD_QUOTAS)))
def test_bad_quota_input_is_a_clear_400(spaced, i):
    body, code, words = BAD_QUOTAS[i]
    t = new_tenant()
    make_key(spaced, t)
    r = spaced.api("PUT", f"/v1/tenants/{t}", json=body)
    assert_error_shape(r, 400, code)
    assert words in r.json()["error"]["message"], r
    # nothing changed
    assert spaced.api("GET", f"/v1/tenants/{t}").json()["overrides"] == {}


def test_bad_tenant_names_and_bodies(spaced):
    assert_error_shape(spaced.api("PUT", "/v1/tenants/Bad_Name", json={"sandboxes": 1}), 400, "invalid_argument")
    assert_error_shape(spaced.api("GET", "/v1/tenants/" + new_tenant()), 404, "not_found")
    assert_error_shape(spaced.api("PUT", f"/v1/tenants/{new_tenant()}", raw_json=b"[1]"), 400, "invalid_json")
    # a tenant may get its quotas before its first key
    t = new_tenant()
    q = set_quotas(spaced, t, sandboxes=5)
    assert q["overrides"] == {"sandboxes": 5}, q
    key = make_key(spaced, t)
    assert spaced.api("GET", f"/v1/tenants/{t}", key=key).json()["quotas"]["sandboxes"] == 5
    # recorded, for the tenant to see
    ev = spaced.api("GET", "/v1/events", params={"type": "tenant.quotas"}, key=key).json()["events"]
    assert len(ev) == 1 and ev[0]["data"]["sandboxes"] == 5 and ev[0]["data"]["rps"] == -1, ev


# ---- fairness ----

VICTIM_PAUSE = 0.04  # seconds between the other tenant's rounds


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def victim_round(spaced, key, sid, times, failures, creates):
    """One list and one exec of the other tenant (and a create and delete when asked), timed."""
    for what, fn in [("list", lambda: spaced.api("GET", "/v1/sandboxes", key=key, timeout=60)),
                     ("exec", lambda: spaced.exec(sid, ["true"], key=key, timeout=60))]:
        t0 = time.monotonic()
        try:
            r = fn()
            ok = (r.status == 200) if what == "list" else (r.code == 0)
            if not ok:
                failures.append(f"{what}: {r!r}"[:300])
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failures.append(f"{what}: {e!r}")
        times.setdefault(what, []).append(time.monotonic() - t0)
    if creates:
        t0 = time.monotonic()
        try:
            r = spaced.api("POST", "/v1/sandboxes", json={}, key=key, timeout=120)
            if r.status != 201:
                failures.append(f"create: {r!r}"[:300])
            else:
                times.setdefault("create", []).append(time.monotonic() - t0)
                d = spaced.api("DELETE", f"/v1/sandboxes/{r.json()['id']}", key=key, timeout=120)
                if d.status != 200:
                    failures.append(f"delete: {d!r}"[:300])
        except Exception as e:  # noqa: BLE001
            failures.append(f"create: {e!r}")


def summary(times):
    return ", ".join(f"{k} n={len(v)} p50={pct(v, 50) * 1000:.0f}ms p99={pct(v, 99) * 1000:.0f}ms"
                     for k, v in sorted(times.items()))


@pytest.mark.timeout(300)
def test_hostile_tenant_cannot_starve_another(e2e_session, request):
    """A hostile tenant (4 keys) opens 1,500 event-follow streams as fast as
    it can, holding each one it gets, and floods the API from 6 keep-alive
    connections for a few seconds; meanwhile another tenant's lists, execs
    and creates all succeed. Prints the other tenant's p50/p99 idle and
    under attack (not asserted: a shared machine). A spaced of its own at
    the default log level, as deployed (the suite's logs every request at
    debug)."""
    spaced = e2e_session.new_daemon(extra_args=["--log-level=info"])
    try:
        spaced.start()
        _hostile_against_victim(spaced)
    finally:
        problems = residue.teardown_daemon(spaced) if spaced.running else []
        if not problems:
            residue.remove_daemon_dir(spaced)
        else:
            residue.teardown_failed(request, "tenancy daemon teardown:\n  " + "\n  ".join(problems))


def _hostile_against_victim(spaced):
    hostile_tenant, victim_tenant = new_tenant(), new_tenant()
    hostile = [make_key(spaced, hostile_tenant) for _ in range(4)]
    victim = make_key(spaced, victim_tenant)
    sb = spaced.create(key=victim)
    sid = sb["id"]
    try:
        idle, failures = {}, []
        # paced well within the other tenant's own key_rps (100): about 2.4 requests a round
        for i in range(40):
            victim_round(spaced, victim, sid, idle, failures, creates=(i % 5 == 0))
            time.sleep(VICTIM_PAUSE)
        assert not failures, failures

        host, port = e2e_http.split_url(spaced.url)
        seconds = 12
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "tenancy_hostile.py"), host, str(port),
                                 str(seconds), "1500"] + hostile, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "started"
            time.sleep(1.5)  # let it open its streams first
            attack = {}
            end = time.monotonic() + seconds - 3
            i = 0
            while time.monotonic() < end:
                victim_round(spaced, victim, sid, attack, failures, creates=(i % 5 == 0))
                time.sleep(VICTIM_PAUSE)
                # the admin too
                try:
                    r = spaced.api("GET", "/v1/info", timeout=60)
                    if r.status != 200:
                        failures.append(f"admin info: {r!r}"[:300])
                except Exception as e:  # noqa: BLE001
                    failures.append(f"admin info: {e!r}")
                i += 1
            out, _ = proc.communicate(timeout=seconds + 60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        got = json.loads(out.strip().splitlines()[-1])
        note = (f"tenancy: idle {summary(idle)} | under attack {summary(attack)} | hostile: "
                f"{got['attempted']} stream attempts, {got['held']} held, counts {got['counts']}")
        print("\n" + note)
        spaced.s.notes.append(note)
        assert not failures, f"the other tenant's requests failed under attack: {failures[:5]} ({note})"
        counts = got["counts"]
        assert counts.get("stream_429", 0) > 0, f"the hostile tenant's streams were never refused: {got}"
        assert got["held"] <= 128, f"the hostile tenant held {got['held']} streams (tenant_streams_max=128)"
        assert counts.get("request_429", 0) > 0, f"the hostile tenant's flood was never limited: {got}"
        assert any("open streams" in m for m in got["messages"].get("stream_429", [])), got["messages"]
        assert len(attack.get("exec", [])) >= 3, attack
    finally:
        spaced.delete(sid, key=victim)


# ---- the CLI ----

def test_cli_tenant_set_show_ls(spaced):
    t = new_tenant()
    r = spaced.cli("tenant", "set", t, "--sandboxes", "3", "--cpu", "2.5", "--memory", "4096", "--rps", "50")
    assert r.rc == 0, r
    r = spaced.cli("--json", "tenant", "show", t)
    assert r.rc == 0, r
    v = json.loads(r.out)
    assert v["overrides"] == {"sandboxes": 3, "cpu_millis": 2500, "memory_mb": 4096, "rps": 50}, v
    r = spaced.cli("tenant", "set", t, "--rps", "default", "--disk", "0")
    assert r.rc == 0, r
    v = json.loads(spaced.cli("--json", "tenant", "show", t).out)
    assert "rps" not in v["overrides"] and v["overrides"]["disk_mb"] == 0, v
    r = spaced.cli("tenant", "ls")
    assert r.rc == 0 and t in r.out and "0/3" in r.out and "0/2.5" in r.out, r
    # bad input: clear one-line errors, non-zero exit
    for args, words in [(["--sandboxes", "-1"], "--sandboxes"), (["--cpu", "x"], "--cpu"),
                        (["--volumes", "2"], "volumes"), ([], "at least one")]:
        r = spaced.cli("tenant", "set", t, *args)
        assert r.rc != 0 and words in r.err, (args, r)
    # a non-admin key cannot set quotas
    key = make_key(spaced, t)
    r = spaced.cli("tenant", "set", t, "--sandboxes", "100", key=key)
    assert r.rc != 0 and "admin" in r.err, r
    r = spaced.cli("tenant", "show", t, key=key)
    assert r.rc == 0 and "sandboxes" in r.out, r


def test_e2b_create_over_the_quota_and_rate(spaced):
    t = new_tenant()
    key = make_key(spaced, t)
    set_quotas(spaced, t, sandboxes=1)

    def rest(method, path, body=None):
        headers = {"X-API-KEY": key}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        return e2e_http.request(spaced.url, method, path, data=data, key=None, headers=headers, timeout=120)

    r = rest("POST", "/v2/sandboxes", {"templateID": "base", "timeout": 600})
    assert r.status == 201, r
    sid = r.json()["sandboxID"]
    try:
        r = rest("POST", "/v2/sandboxes", {"templateID": "base", "timeout": 600})
        assert r.status == 429 and r.headers.get("retry-after"), r
        assert "sandboxes=1" in r.json()["message"], r
        # its keys' rate counts on this surface too
        set_quotas(spaced, t, rps=1)
        statuses = [rest("GET", "/sandboxes").status for _ in range(8)]
        assert 429 in statuses and statuses[0] == 200, statuses
    finally:
        set_quotas(spaced, t, rps=None)
        spaced.delete(sid, key=key)


@pytest.mark.timeout(300)
def test_admin_keys_keep_their_reserved_connections(e2e_session, request):
    """Non-admin keys' requests in flight stop short of the server's 1024
    connections by admin_reserved_connections: with that at 512 and every
    per-key and per-tenant cap raised out of the way, two tenants holding 512
    streams leave the 513th refused (503 naming the reserve) and the admin
    served."""
    big = "1000"
    d = e2e_session.new_daemon(extra_args=["--admin-reserved-connections=512", f"--key-streams-max={big}",
                                           f"--key-requests-max={big}", f"--tenant-streams-max={big}",
                                           f"--tenant-requests-max={big}"])
    held = []
    try:
        d.start()
        keys = [make_key(d, new_tenant()) for _ in range(2)]
        for i in range(512):
            s = follow(d, keys[i % 2])
            assert s.status == 200, f"stream {i + 1}: {s.status}"
            held.append(s)
        s = follow(d, keys[0])
        assert s.status == 503, s.status
        r = stream_error(s)
        assert_error_shape(r, 503, "unavailable")
        assert "admin_reserved_connections=512" in r.json()["error"]["message"], r
        assert r.headers.get("retry-after"), r
        # the admin gets in, a stream and a plain request
        s = follow(d, d.admin_key)
        assert s.status == 200, s.status
        s.close()
        assert d.api("GET", "/v1/info").status == 200
    finally:
        for s in held:
            s.close()
        problems = residue.teardown_daemon(d) if d.running else []
        if not problems:
            residue.remove_daemon_dir(d)
        else:
            residue.teardown_failed(request, "tenancy daemon teardown:\n  " + "\n  ".join(problems))


@pytest.mark.timeout(300)
def test_requests_in_flight_per_key_and_per_tenant(e2e_session, request):
    d = e2e_session.new_daemon(extra_args=["--key-requests-max=3", "--tenant-requests-max=5"])
    held = []
    try:
        d.start()
        t = new_tenant()
        a, b = make_key(d, t), make_key(d, t)
        for _ in range(3):
            s = follow(d, a)
            assert s.status == 200, s.status
            held.append(s)
        r = d.api("GET", "/v1/sandboxes", key=a)
        assert_limited(r, "3 requests in flight", "key_requests_max=3")
        for _ in range(2):
            s = follow(d, b)
            assert s.status == 200, s.status
            held.append(s)
        r = d.api("GET", "/v1/sandboxes", key=b)
        assert_limited(r, f"tenant '{t}' has 5 requests in flight", "tenant_requests_max=5")
        # another tenant's key and the admin are not counted with them
        assert d.api("GET", "/v1/sandboxes", key=make_key(d, new_tenant())).status == 200
        assert d.api("GET", "/v1/sandboxes").status == 200
    finally:
        for s in held:
            s.close()
        problems = residue.teardown_daemon(d) if d.running else []
        if not problems:
            residue.remove_daemon_dir(d)
        else:
            residue.teardown_failed(request, "tenancy daemon teardown:\n  " + "\n  ".join(problems))


def _warm_rows(d):
    db = sqlite3.connect(os.path.join(d.state_dir, "space.db"), timeout=10)
    try:
        return db.execute("SELECT id FROM sandboxes WHERE warm_pool <> '' AND state <> 'deleted'").fetchall()
    finally:
        db.close()


def _warm_ready(d):
    r = d.api("GET", "/metrics", key=None)
    m = re.search(r'^space_warm_pool_size\{template="base"\} (\d+)$', r.text(), re.M)
    return int(m.group(1)) if m else 0


@pytest.mark.timeout(300)
def test_a_warm_sandbox_is_admitted_like_a_cold_one(e2e_session, request):
    """With a warm pool, a create claims a warm sandbox instead of making
    one: over the quota the claim is refused too (not a cold create instead)."""
    d = e2e_session.new_daemon(extra_args=["--warm-pool=base:2"])
    made = []
    try:
        d.start()
        assert host.wait_until(lambda: _warm_ready(d) == 2, 120), d.log_tail(40)
        t = new_tenant()
        key = make_key(d, t)
        set_quotas(d, t, sandboxes=1)
        made.append(d.create(key=key)["id"])
        r = d.api("POST", "/v1/sandboxes", json={}, key=key, timeout=180)
        assert_limited(r, "sandboxes=1", "1 in use")
        assert [s["id"] for s in d.api("GET", "/v1/sandboxes", key=key).json()["sandboxes"]] == made
        ev = d.api("GET", "/v1/events", params={"sandbox": made[0], "type": "sandbox.created"}, key=key).json()
        assert ev["events"] and ev["events"][0]["data"].get("warm_pool") is True, ev
    finally:
        for sid in made:
            d.delete(sid, key=key)
        # warm sandboxes outlive a stop: a start without the pool removes them (as test_lifecycle does)
        if d.running:
            host.wait_until(lambda: _warm_ready(d) == 2, 120)
            d.stop()
            d.extra_args = []
            d.start()
            host.wait_until(lambda: not _warm_rows(d), 120)
        problems = residue.teardown_daemon(d) if d.running else []
        if not problems:
            residue.remove_daemon_dir(d)
        else:
            residue.teardown_failed(request, "tenancy daemon teardown:\n  " + "\n  ".join(problems))
