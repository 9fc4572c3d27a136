# SPDX-License-Identifier: MIT
"""Lifecycle and audit events: content, filters, tenants, follow."""

import json
import os
import select
import signal
import subprocess
import time
import uuid

import pytest

from e2e_daemon import TIME_RE, assert_error_shape, clean_env
import e2e_host as host
import e2e_http


def events(spaced, key=None, **params):
    kw = {} if key is None else {"key": key}
    r = spaced.api("GET", "/v1/events", params=params, **kw)
    assert r.status == 200, r
    return r.json()


def all_events(spaced, key=None, **params):
    res, after = [], params.pop("after", None)
    for _ in range(1000):
        p = dict(params, limit=500)
        if after is not None:
            p["after"] = after
        v = events(spaced, key=key, **p)
        res += v["events"]
        if not v["events"] or v.get("next") in (None, after):
            break
        after = v["next"]
    return res


def check_event(e):
    assert isinstance(e["seq"], int) and e["seq"] > 0, e
    assert TIME_RE.match(e["time"]), e
    assert isinstance(e["type"], str) and e["type"], e
    assert isinstance(e["actor"], str) and e["actor"], e
    assert isinstance(e["reason"], str), e
    assert isinstance(e["data"], dict), e


@pytest.fixture(scope="module")
def lifecycle(spaced):
    """A sandbox created and deleted, and one whose agent was killed."""
    a = spaced.create()["id"]
    spaced.delete(a)
    b = spaced.create()["id"]
    pid = spaced.agent_pid(b)
    assert pid
    host.kill_pid(pid, signal.SIGKILL)
    assert host.wait_until(lambda: spaced.show(b).json()["state"] == "error", 20, 0.2), spaced.show(b).json()
    yield a, b
    spaced.delete(b)


def test_create_delete_error_events(spaced, lifecycle):
    a, b = lifecycle
    ev = all_events(spaced, sandbox=a)
    for e in ev:
        check_event(e)
        assert e["sandbox"] == a and e["tenant"] == "default", e
    types = [e["type"] for e in ev]
    assert "sandbox.created" in types and "sandbox.deleted" in types, types
    assert types.index("sandbox.created") < types.index("sandbox.deleted"), types
    created = ev[types.index("sandbox.created")]
    assert created["actor"].startswith("key:key_"), created
    seqs = [e["seq"] for e in ev]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs

    ev = all_events(spaced, sandbox=b)
    for e in ev:
        check_event(e)
    err = [e for e in ev if e["type"] == "sandbox.error"
           or (e["type"] == "sandbox.state" and e["data"].get("to") == "error")]
    assert err, [e["type"] for e in ev]
    assert err[0]["reason"], err[0]


def test_filter_by_sandbox(spaced, lifecycle):
    a, b = lifecycle
    ev = all_events(spaced, sandbox=b)
    assert ev and all(e["sandbox"] == b for e in ev), ev
    assert all_events(spaced, sandbox="zzzzzzzzzzzzzzzz") == []


def test_filter_by_type(spaced, lifecycle):
    ev = all_events(spaced, type="sandbox.created")
    assert ev and all(e["type"] == "sandbox.created" for e in ev)
    ev = all_events(spaced, type="sandbox.")
    assert ev and all(e["type"].startswith("sandbox.") for e in ev)
    assert {"sandbox.created", "sandbox.deleted"} <= {e["type"] for e in ev}
    assert all_events(spaced, type="nosuchtype.") == []


def test_after_limit_since(spaced, lifecycle):
    ev = all_events(spaced)
    assert len(ev) >= 3
    mid = ev[len(ev) // 2]
    later = all_events(spaced, after=mid["seq"])
    assert later and all(e["seq"] > mid["seq"] for e in later)
    v = events(spaced, limit=1)
    assert len(v["events"]) == 1 and v["next"] is not None, v
    since = all_events(spaced, since=mid["time"])
    assert since and all(e["time"] >= mid["time"] for e in since)
    assert all_events(spaced, since="2999-01-01T00:00:00.000Z") == []


@pytest.mark.parametrize("params", [{"limit": "x"}, {"limit": "-1"}, {"after": "abc"}, {"after": "-5"},
                                    {"since": "yesterday"}, {"since": "2026-13-45T99:00:00Z"}],
                         ids=["limit", "limit-neg", "after", "after-neg", "since", "since-range"])
def test_bad_filters(spaced, params):
    assert_error_shape(spaced.api("GET", "/v1/events", params=params), 400, "invalid_argument")


def test_other_tenant_sees_none(spaced, lifecycle):
    a, b = lifecycle
    r = spaced.api("POST", "/v1/keys", json={"name": "ev", "tenant": "t" + uuid.uuid4().hex[:12]})
    key = r.json()["key"]
    ev = all_events(spaced, key=key)
    assert all(e["tenant"] != "default" for e in ev), ev
    assert all(e["sandbox"] not in (a, b) for e in ev), ev
    for sid in (a, b):
        r = spaced.api("GET", "/v1/events", params={"sandbox": sid}, key=key)
        if r.status == 200:
            assert r.json()["events"] == [], r.json()
        else:
            assert_error_shape(r, 404, "not_found")
    # and its own events are its own
    mine = spaced.create(key=key)["id"]
    spaced.delete(mine, key=key)
    ev = all_events(spaced, key=key, sandbox=mine)
    assert {"sandbox.created", "sandbox.deleted"} <= {e["type"] for e in ev}, ev


def test_follow_api(spaced):
    with e2e_http.request(spaced.url, "GET", "/v1/events", key=spaced.admin_key, stream=True,
                          params={"follow": 1, "type": "sandbox.created"}, timeout=30) as s:
        assert s.status == 200, s.read()
        assert s.content_type == "application/x-ndjson"
        time.sleep(0.5)
        sid = spaced.create()["id"]
        try:
            end = time.monotonic() + 20
            found = None
            while time.monotonic() < end and not found:
                line = s.readline()
                if not line:
                    break
                if not line.strip():
                    continue
                e = json.loads(line)
                spaced.s.validate(s, e)
                check_event(e)
                if e.get("sandbox") == sid:
                    found = e
            assert found and found["type"] == "sandbox.created", "the followed stream did not show the new sandbox"
        finally:
            spaced.delete(sid)


def test_cli_events_follow(spaced):
    env = clean_env({"SPACE_URL": spaced.url, "SPACE_API_KEY": spaced.admin_key})
    p = subprocess.Popen([spaced.s.space_bin, "events", "--follow"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, stdin=subprocess.DEVNULL)
    out = b""
    sid = None
    try:
        time.sleep(1.5)
        assert p.poll() is None, f"space events --follow exited: {p.returncode} {p.stderr.read()!r}"
        sid = spaced.create()["id"]
        end = time.monotonic() + 20
        while time.monotonic() < end and sid.encode() not in out:
            r, _, _ = select.select([p.stdout], [], [], 0.5)
            if r:
                b = os.read(p.stdout.fileno(), 65536)
                if not b:
                    break
                out += b
        assert sid.encode() in out, f"'space events --follow' did not print the new sandbox {sid}: {out[-2000:]!r}"
        line = [l for l in out.decode().splitlines() if sid in l][0]
        assert "sandbox.created" in line, line
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        p.stdout.close()
        p.stderr.close()
        if sid:
            spaced.delete(sid)


def test_cli_events(spaced, lifecycle):
    a, b = lifecycle
    c = spaced.cli("events", a)
    assert c.rc == 0 and "sandbox.created" in c.out and "sandbox.deleted" in c.out, c
    c = spaced.cli("--json", "events", a)
    assert c.rc == 0, c
    v = json.loads(c.out)
    evs = v["events"] if isinstance(v, dict) else v
    assert {e["type"] for e in evs} >= {"sandbox.created", "sandbox.deleted"}
