# SPDX-License-Identifier: MIT
"""autoResume over raw HTTP: a paused sandbox with autoResume (E2B create
body `autoResume: {"enabled": true}`, space's `auto_resume`) is woken by the
envd request that reaches it (plain HTTP and Connect alike), with an event;
one without it answers 502 and stays paused. Pause without memory and
connect with `memory: false` (the SDK's keepMemory / onResume 'reboot') end
the processes and keep the files. The /v1 side: `auto_resume` on create and
PATCH. Bad input on all of it: 400 and nothing changes."""

import base64
import json

import e2e_http
from test_e2b_connect import END_STREAM, envd_headers, envelope, parse_envelopes


def rest(spaced, method, path, body=None, key=None):
    headers = {"X-API-KEY": key or spaced.admin_key}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    return e2e_http.request(spaced.url, method, path, data=data, key=None, headers=headers, timeout=120)


def e2b_create(spaced, **body):
    r = rest(spaced, "POST", "/v2/sandboxes", {"templateID": "base", "timeout": 600, **body})
    assert r.status == 201, r
    return r.json()


def info(spaced, sb_id):
    r = rest(spaced, "GET", f"/sandboxes/{sb_id}")
    assert r.status == 200, r
    return r.json()


def health(spaced, sb):
    return e2e_http.request(spaced.url, "GET", "/health", key=None, timeout=60,
                            headers={"E2b-Sandbox-Id": sb["sandboxID"], "X-Access-Token": sb["envdAccessToken"]})


def run(spaced, sb, cmd):
    """process.Process/Start of bash -l -c cmd: (stdout bytes, exit code)."""
    body = envelope({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", cmd]}, "stdin": False})
    r = e2e_http.request(spaced.url, "POST", "/process.Process/Start", data=body, key=None, timeout=120,
                         headers=envd_headers(sb["sandboxID"], sb["envdAccessToken"], "application/connect+json"))
    assert r.status == 200, r
    out, code = b"", None
    msgs = parse_envelopes(r.body)
    assert msgs[-1] == (END_STREAM, {}), msgs[-1]
    for flags, m in msgs[:-1]:
        ev = m["event"]
        if "data" in ev and "stdout" in ev["data"]:
            out += base64.b64decode(ev["data"]["stdout"])
        if "end" in ev:
            code = ev["end"].get("exitCode", 0)
    return out, code


def resumed_events(spaced, sb_id):
    r = spaced.api("GET", "/v1/events", params={"sandbox": sb_id, "type": "sandbox.resumed"})
    assert r.status == 200, r
    return r.json()["events"]


def test_auto_resume_wakes_on_envd_requests(spaced):
    sb = e2b_create(spaced, autoPause=True, autoResume={"enabled": True})
    sid = sb["sandboxID"]
    try:
        got = info(spaced, sid)
        assert got["lifecycle"] == {"onTimeout": "pause", "autoResume": True}, got
        assert spaced.api("GET", f"/v1/sandboxes/{sid}").json()["auto_resume"] is True
        out, code = run(spaced, sb, "sh -c 'sleep 1000 & echo $! > /tmp/bg.pid'; echo ok")
        assert (out, code) == (b"ok\n", 0)

        # plain HTTP (/health) wakes it
        assert rest(spaced, "POST", f"/sandboxes/{sid}/pause").status == 204
        assert info(spaced, sid)["state"] == "paused"
        r = health(spaced, sb)
        assert r.status == 204, r
        assert info(spaced, sid)["state"] == "running"
        ev = resumed_events(spaced, sid)
        assert len(ev) == 1 and "autoResume" in ev[0]["reason"] and ev[0]["actor"] == f"envd:{sid}", ev

        # a Connect stream wakes it, and the process frozen with it is still there
        assert rest(spaced, "POST", f"/sandboxes/{sid}/pause").status == 204
        out, code = run(spaced, sb, "kill -0 $(cat /tmp/bg.pid) && echo alive")
        assert (out, code) == (b"alive\n", 0)
        assert info(spaced, sid)["state"] == "running"

        # a unary Connect call wakes it
        assert rest(spaced, "POST", f"/sandboxes/{sid}/pause").status == 204
        r = e2e_http.request(spaced.url, "POST", "/filesystem.Filesystem/Stat", key=None, timeout=60,
                             data=json.dumps({"path": "/tmp/bg.pid"}).encode(),
                             headers=envd_headers(sid, sb["envdAccessToken"], "application/json"))
        assert r.status == 200 and r.json()["entry"]["name"] == "bg.pid", r
        assert len(resumed_events(spaced, sid)) == 3

        # a wrong access token wakes nothing
        assert rest(spaced, "POST", f"/sandboxes/{sid}/pause").status == 204
        r = e2e_http.request(spaced.url, "GET", "/health", key=None, timeout=60,
                             headers={"E2b-Sandbox-Id": sid, "X-Access-Token": "0" * 64})
        assert r.status == 401, r
        assert info(spaced, sid)["state"] == "paused"
        # nor does a suspended sandbox wake (its processes would be gone): 502
        assert spaced.api("POST", f"/v1/sandboxes/{sid}/suspend").status == 200
        r = health(spaced, sb)
        assert r.status == 502 and r.json()["code"] == 502, r
        assert spaced.api("GET", f"/v1/sandboxes/{sid}").json()["state"] == "suspended"
    finally:
        spaced.delete(sid)


def test_without_auto_resume_a_paused_sandbox_stays_paused(spaced):
    sb = e2b_create(spaced, autoPause=True)
    sid = sb["sandboxID"]
    try:
        assert info(spaced, sid)["lifecycle"] == {"onTimeout": "pause", "autoResume": False}
        assert rest(spaced, "POST", f"/sandboxes/{sid}/pause").status == 204
        r = health(spaced, sb)
        assert r.status == 502 and r.json() == {"sandboxId": sid, "message": "The sandbox was not found",
                                                "code": 502}, r
        assert info(spaced, sid)["state"] == "paused"
        assert resumed_events(spaced, sid) == []
        r = rest(spaced, "POST", f"/v2/sandboxes/{sid}/connect", {})
        assert r.status == 201 and r.json()["sandboxID"] == sid, r
        r = rest(spaced, "POST", f"/v2/sandboxes/{sid}/connect", {})
        assert r.status == 200, r
        assert health(spaced, sb).status == 204
    finally:
        spaced.delete(sid)


def test_pause_without_memory_and_connect_reboot(spaced):
    sb = e2b_create(spaced)
    sid = sb["sandboxID"]
    try:
        out, _ = run(spaced, sb, "echo kept > /tmp/kept; sh -c 'sleep 1000 & echo $! > /tmp/bg.pid'")
        # keepMemory false: a space suspend (files kept, processes end); E2B shows it paused
        assert rest(spaced, "POST", f"/sandboxes/{sid}/pause", {"memory": False}).status == 204
        assert info(spaced, sid)["state"] == "paused"
        assert spaced.api("GET", f"/v1/sandboxes/{sid}").json()["state"] == "suspended"
        r = rest(spaced, "POST", f"/sandboxes/{sid}/pause", {})
        assert r.status == 409 and r.json()["code"] == 409, r
        r = rest(spaced, "POST", f"/v2/sandboxes/{sid}/connect", {})
        assert r.status == 201, r
        v1 = spaced.api("GET", f"/v1/sandboxes/{sid}").json()
        assert v1["state"] == "running" and v1["processes_preserved"] is False, v1
        out, code = run(spaced, sb, "cat /tmp/kept; kill -0 $(cat /tmp/bg.pid) 2>/dev/null || echo gone")
        assert (out, code) == (b"kept\ngone\n", 0)

        # connect {"memory": false} of a paused sandbox: it restarts on its files
        run(spaced, sb, "sh -c 'sleep 1000 & echo $! > /tmp/bg.pid'")
        assert rest(spaced, "POST", f"/sandboxes/{sid}/pause", {}).status == 204
        r = rest(spaced, "POST", f"/v2/sandboxes/{sid}/connect", {"memory": False})
        assert r.status == 201, r
        out, code = run(spaced, sb, "cat /tmp/kept; kill -0 $(cat /tmp/bg.pid) 2>/dev/null || echo gone")
        assert (out, code) == (b"kept\ngone\n", 0)
        # on a running sandbox it changes nothing
        run(spaced, sb, "sh -c 'sleep 1000 & echo $! > /tmp/bg.pid'")
        assert rest(spaced, "POST", f"/v2/sandboxes/{sid}/connect", {"memory": False}).status == 200
        out, _ = run(spaced, sb, "kill -0 $(cat /tmp/bg.pid) && echo alive")
        assert out == b"alive\n"
    finally:
        spaced.delete(sid)


def test_auto_pause_without_memory_is_an_idle_suspend(spaced):
    sb = e2b_create(spaced, autoPause=True, autoPauseMemory=False, timeout=600)
    sid = sb["sandboxID"]
    try:
        v1 = spaced.api("GET", f"/v1/sandboxes/{sid}").json()
        assert (v1["idle_action"], v1["idle_s"], v1["timeout_s"]) == ("suspend", 600, 0), v1
        assert info(spaced, sid)["lifecycle"]["onTimeout"] == "pause"
    finally:
        spaced.delete(sid)


def test_e2b_lifecycle_bad_input(spaced):
    before = len(spaced.api("GET", "/v1/sandboxes").json()["sandboxes"])
    for body, want in (({"autoResume": True}, "autoResume"),
                       ({"autoResume": {"enabled": "yes"}}, "autoResume"),
                       ({"autoResume": {}}, "autoResume"),
                       ({"autoPause": True, "autoPauseMemory": False, "autoResume": {"enabled": True}}, "autoResume"),
                       ({"autoPauseMemory": "no"}, "autoPauseMemory")):
        r = rest(spaced, "POST", "/v2/sandboxes", {"templateID": "base", **body})
        assert r.status == 400 and r.json()["code"] == 400 and want in r.json()["message"], (body, r)
    assert len(spaced.api("GET", "/v1/sandboxes").json()["sandboxes"]) == before, "a refused create made nothing"

    sb = e2b_create(spaced)
    sid = sb["sandboxID"]
    try:
        for path in (f"/sandboxes/{sid}/pause", f"/v2/sandboxes/{sid}/connect"):
            r = rest(spaced, "POST", path, {"memory": "no"})
            assert r.status == 400 and r.json()["code"] == 400 and "memory" in r.json()["message"], r
        assert info(spaced, sid)["state"] == "running"
        r = rest(spaced, "POST", "/v2/sandboxes/zzzzzzzzzzzzzzzz/connect", {})
        assert r.status == 404 and r.json()["code"] == 404, r
    finally:
        spaced.delete(sid)


def test_v1_auto_resume(spaced):
    sb = spaced.create(auto_resume=True)
    sid = sb["id"]
    try:
        assert sb["auto_resume"] is True
        assert spaced.api("POST", f"/v1/sandboxes/{sid}/pause").status == 200
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": ["echo", "hi"]})
        assert r.status == 200 and '"hi\\n"' in r.text(), r
        assert spaced.api("GET", f"/v1/sandboxes/{sid}").json()["state"] == "running"
        ev = resumed_events(spaced, sid)
        assert len(ev) == 1 and "(auto_resume)" in ev[0]["reason"], ev

        r = spaced.api("PATCH", f"/v1/sandboxes/{sid}", json={"auto_resume": False})
        assert r.status == 200 and r.json()["auto_resume"] is False, r
        assert spaced.api("POST", f"/v1/sandboxes/{sid}/pause").status == 200
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": ["echo", "hi"]})
        assert r.status == 409 and r.json()["error"]["code"] == "sandbox_paused", r
        r = spaced.api("PATCH", f"/v1/sandboxes/{sid}", json={"auto_resume": True})
        assert r.status == 200 and r.json()["auto_resume"] is True, r
        r = spaced.api("GET", f"/v1/sandboxes/{sid}/files", params={"path": "/etc/hostname"})
        assert r.status == 200, r

        r = spaced.api("PATCH", f"/v1/sandboxes/{sid}", json={"auto_resume": "yes"})
        assert r.status == 400 and "auto_resume" in r.json()["error"]["message"], r
        assert spaced.api("GET", f"/v1/sandboxes/{sid}").json()["auto_resume"] is True
    finally:
        spaced.delete(sid)
    r = spaced.api("POST", "/v1/sandboxes", json={"auto_resume": 1})
    assert r.status == 400 and "auto_resume" in r.json()["error"]["message"], r
