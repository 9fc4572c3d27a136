# SPDX-License-Identifier: MIT
"""Bad requests get a clear error; a broken sandbox is reported, not hidden."""

import json
import signal
import time

import pytest

from e2e_daemon import assert_error_shape
import e2e_host as host
import e2e_http

MiB = 1024 * 1024


# ---- JSON bodies ----

MALFORMED = {
    "truncated": b'{"cpu":',
    "trailing-garbage": b"{} x",
    "single-quotes": b"{'cpu': 1}",
    "bare-word": b"running",
    "trailing-comma": b'{"cpu": 1,}',
    "bad-utf8": b'{"template": "\xff\xfe"}',
    "bad-escape": b'{"template": "\\q"}',
    "lone-surrogate": b'{"template": "\\ud800"}',
    "nul-in-body": b'{"template": "a\x00"}',
    "deep-nesting": b"[" * 100000 + b"]" * 100000,
    "deep-object": b'{"metadata":' * 50000 + b"1" + b"}" * 50000,
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("path", ["/v1/sandboxes", "/v1/keys", "exec"])
def test_malformed_json(spaced, sandbox, name, path):
    if path == "exec":
        path = f"/v1/sandboxes/{sandbox}/exec"
    r = spaced.api("POST", path, raw_json=MALFORMED[name])
    if name == "empty" and r.status != 400 or (r.status == 400 and r.json()["error"]["code"] != "invalid_json"
                                               and name == "empty"):
        # an empty body may mean {} (all defaults); then it gets exactly the answer {} gets
        same = spaced.api("POST", path, json={})
        for x in (r, same):
            if x.status == 201 and "/v1/sandboxes" == path:
                spaced.delete(x.json()["id"])
            elif x.status == 201 and path == "/v1/keys":
                assert spaced.api("DELETE", f"/v1/keys/{x.json()['id']}").status == 204
        assert r.status == same.status, f"empty body → {r!r}, but {{}} → {same!r}"
        if r.status >= 400:
            assert r.json()["error"]["code"] == same.json()["error"]["code"], (r, same)
        return
    assert_error_shape(r, 400, "invalid_json")


@pytest.mark.parametrize("body", [b"[]", b'"x"', b"1", b"null", b"true"], ids=["array", "string", "number",
                                                                                "null", "bool"])
def test_json_not_an_object(spaced, body):
    r = spaced.api("POST", "/v1/sandboxes", raw_json=body)
    e = assert_error_shape(r, 400)
    assert e["code"] in ("invalid_json", "invalid_argument"), e


@pytest.mark.parametrize("path", ["/v1/sandboxes", "/v1/keys", "exec"])
def test_oversized_json(spaced, sandbox, path):
    if path == "exec":
        path = f"/v1/sandboxes/{sandbox}/exec"
    body = b'{"metadata":{"k":"' + b"x" * (2 * MiB) + b'"}}'
    r, sent, err = spaced.early("POST", path, iter([body[i:i + 65536] for i in range(0, len(body), 65536)]),
                                length=len(body), content_type="application/json")
    assert r is not None, f"no response to a 2 MiB JSON body ({err})"
    assert_error_shape(r, 413, "payload_too_large")
    # the server is fine afterwards
    assert spaced.api("GET", "/healthz", key=None).status == 200


def test_oversized_json_chunked(spaced):
    body = b'{"metadata":{"k":"' + b"x" * (2 * MiB) + b'"}}'
    r, sent, err = spaced.early("POST", "/v1/sandboxes", iter([body[i:i + 65536] for i in range(0, len(body), 65536)]),
                                length=None, content_type="application/json")
    assert r is not None, f"no response to a 2 MiB chunked JSON body ({err})"
    assert_error_shape(r, 413, "payload_too_large")


def test_wrong_content_type(spaced):
    r = spaced.api("POST", "/v1/sandboxes", data=b"{}", headers={"Content-Type": "text/plain"})
    assert_error_shape(r, 415, "unsupported_media_type")


# ---- fields ----

@pytest.mark.parametrize("path,body,field", [
    ("/v1/sandboxes", {"bogus": 1}, "bogus"),
    ("/v1/sandboxes", {"template": "base", "Template": "base"}, "Template"),
    ("/v1/keys", {"name": "x", "extra": True}, "extra"),
    ("exec", {"cmd": ["true"], "cmdline": "x"}, "cmdline"),
    ("exec", {"cmd": ["true"], "pty": {"rows": 24, "cols": 80, "depth": 1}}, "depth"),
    ("move", {"from": "/a", "to": "/b", "force": True}, "force"),
    ("signal", {"signal": "SIGTERM", "pid": 1}, "pid"),
], ids=["create", "create-case", "keys", "exec", "exec-pty", "move", "signal"])
def test_unknown_field(spaced, sandbox, path, body, field):
    if path == "exec":
        path = f"/v1/sandboxes/{sandbox}/exec"
    elif path == "move":
        path = f"/v1/sandboxes/{sandbox}/files/move"
    elif path == "signal":
        r = spaced.exec(sandbox, cmd=["sleep", "60"], background=True)
        path = f"/v1/sandboxes/{sandbox}/exec/{r.start['exec_id']}/signal"
    r = spaced.api("POST", path, json=body)
    e = assert_error_shape(r, 400, "unknown_field")
    assert field in e["message"], f"the message does not name the field '{field}': {e}"


OUT_OF_RANGE = [
    ("cpu", 0), ("cpu", -1), ("cpu", 1e9), ("cpu", 65), ("cpu", 0.0001),
    ("memory_mb", 0), ("memory_mb", -5), ("memory_mb", 1 << 40), ("memory_mb", 65537),
    ("disk_mb", 0), ("disk_mb", -1), ("disk_mb", 1 << 40), ("disk_mb", 262145),
    ("pids_max", 0), ("pids_max", -1), ("pids_max", 1 << 31), ("pids_max", 32769),
    ("timeout_s", -1), ("timeout_s", 2592001), ("timeout_s", 1 << 62),
]


@pytest.mark.parametrize("field,value", OUT_OF_RANGE, ids=[f"{f}={v}" for f, v in OUT_OF_RANGE])
def test_create_out_of_range(spaced, field, value):
    r = spaced.api("POST", "/v1/sandboxes", json={field: value})
    if r.status == 201:
        spaced.delete(r.json()["id"])
    e = assert_error_shape(r, 400, "invalid_argument")
    assert field in e["message"], f"the message does not name {field}: {e}"


WRONG_TYPES = [
    ("cpu", "1"), ("cpu", True), ("cpu", [1]),
    ("memory_mb", "512"), ("memory_mb", 1.5), ("memory_mb", {}),
    ("disk_mb", "1"), ("pids_max", 10.5), ("timeout_s", "60"),
    ("template", 5), ("template", ["base"]), ("runtime", 1),
    ("env", []), ("env", "A=B"), ("env", {"K": 1}), ("env", {"K": None}), ("env", {"": "v"}),
    ("env", {"A=B": "v"}), ("metadata", "x"), ("metadata", {"k": {"n": 1}}),
]


@pytest.mark.parametrize("field,value", WRONG_TYPES, ids=[f"{f}={json.dumps(v)}" for f, v in WRONG_TYPES])
def test_create_wrong_type(spaced, field, value):
    r = spaced.api("POST", "/v1/sandboxes", json={field: value})
    if r.status == 201:
        spaced.delete(r.json()["id"])
    assert_error_shape(r, 400, "invalid_argument")


@pytest.mark.parametrize("runtime", ["vm", "xyz", ""])
def test_create_bad_runtime(spaced, runtime):
    r = spaced.api("POST", "/v1/sandboxes", json={"runtime": runtime})
    if r.status == 201:
        spaced.delete(r.json()["id"])
    assert_error_shape(r, 400, "invalid_argument")


@pytest.mark.parametrize("template", ["nosuchtemplate", "no-such.template"])
def test_create_unknown_template(spaced, template):
    r = spaced.api("POST", "/v1/sandboxes", json={"template": template})
    if r.status == 201:
        spaced.delete(r.json()["id"])
    e = assert_error_shape(r, 404, "not_found")
    assert template in e["message"], e


@pytest.mark.parametrize("template", ["../base", "Base", "", "a" * 200, "base/../base"])
def test_create_bad_template_name(spaced, template):
    r = spaced.api("POST", "/v1/sandboxes", json={"template": template})
    if r.status == 201:
        spaced.delete(r.json()["id"])
    e = assert_error_shape(r)
    assert (r.status, e["code"]) in ((400, "invalid_argument"), (404, "not_found")), r


EXEC_BAD = [
    ({}, "neither cmd nor shell"),
    ({"cmd": []}, "empty cmd"),
    ({"cmd": "ls"}, "cmd a string"),
    ({"cmd": [1, 2]}, "cmd of numbers"),
    ({"cmd": ["ls", None]}, "cmd with null"),
    ({"cmd": ["true"], "shell": "true"}, "both cmd and shell"),
    ({"shell": ""}, "empty shell"),
    ({"shell": ["true"]}, "shell an array"),
    ({"cmd": ["true"], "env": ["A=B"]}, "env an array"),
    ({"cmd": ["true"], "env": {"A": 1}}, "env of numbers"),
    ({"cmd": ["true"], "cwd": 5}, "cwd a number"),
    ({"cmd": ["true"], "cwd": "/tmp/../etc"}, "cwd with .."),
    ({"cmd": ["true"], "user": []}, "user an array"),
    ({"cmd": ["true"], "user": -1}, "negative uid"),
    ({"cmd": ["true"], "stdin": 5}, "stdin a number"),
    ({"cmd": ["true"], "timeout_s": -1}, "negative timeout"),
    ({"cmd": ["true"], "timeout_s": "5"}, "timeout a string"),
    ({"cmd": ["true"], "timeout_s": 1 << 62}, "huge timeout"),
    ({"cmd": ["true"], "background": "yes"}, "background a string"),
    ({"cmd": ["true"], "pty": "yes"}, "pty a string"),
    ({"cmd": ["true"], "pty": {"rows": 0, "cols": 80}}, "pty zero rows"),
    ({"cmd": ["true"], "pty": {"rows": 100000, "cols": 80}}, "pty huge rows"),
    ({"cmd": ["a\u0000b"]}, "NUL in argv"),
    ({"cmd": ["x" * (2 * MiB // 4)] * 2}, "argv too long"),
]


@pytest.mark.parametrize("body,what", EXEC_BAD, ids=[w for _, w in EXEC_BAD])
def test_exec_bad_request(spaced, sandbox, body, what):
    r = spaced.exec(sandbox, **body)
    assert r.response is not None, f"{what}: exec ran: {r!r}"
    e = assert_error_shape(r.response)
    if what == "argv too long":
        assert (r.status, e["code"]) in ((400, "invalid_argument"), (413, "payload_too_large")), r.response
    elif what == "cwd with ..":
        assert (r.status, e["code"]) in ((400, "invalid_argument"), (400, "invalid_path")), r.response
    else:
        assert (r.status, e["code"]) == (400, "invalid_argument"), f"{what}: {r.response!r}"


@pytest.mark.parametrize("params", [{"limit": "abc"}, {"limit": "-1"}, {"limit": "0"}, {"limit": "1000000000"},
                                    {"state": "bogus"}, {"after": "../x"}],
                         ids=["limit-abc", "limit-neg", "limit-0", "limit-huge", "state", "after"])
def test_list_bad_query(spaced, params):
    r = spaced.api("GET", "/v1/sandboxes", params=params)
    assert_error_shape(r, 400, "invalid_argument")


@pytest.mark.parametrize("sid", ["zzzzzzzzzzzzzzzz", "a", "x" * 300, "..", "s%2F..%2Fetc", "%00", "A-B"])
def test_unknown_sandbox_ids(spaced, sid):
    for method, suffix in [("GET", ""), ("DELETE", ""), ("GET", "/exec"), ("GET", "/files?path=/")]:
        r = spaced.api(method, f"/v1/sandboxes/{sid}{suffix}")
        e = assert_error_shape(r)
        ok = [(404, "not_found"), (400, "invalid_argument")]
        if sid == "%00":
            ok.append((400, "bad_request"))     # a NUL in the request target is a malformed request
        assert (r.status, e["code"]) in ok, r


def test_unknown_route_and_method(spaced):
    assert_error_shape(spaced.api("GET", "/v1/nothing"), 404, "not_found")
    assert_error_shape(spaced.api("GET", "/v9/sandboxes"), 404, "not_found")
    assert_error_shape(spaced.api("GET", "/v1/sandboxes/x/y/z/w"), 404, "not_found")
    assert_error_shape(spaced.api("PATCH", "/v1/sandboxes", json={}), 405, "method_not_allowed")
    assert_error_shape(spaced.api("PUT", "/v1/sandboxes", json={}), 405, "method_not_allowed")


@pytest.mark.parametrize("raw", [
    b"GARBAGE\r\n\r\n",
    b"GET /healthz HTTP/9.9\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\n" + b"X-A: b\r\n" * 10000 + b"\r\n",
    b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
], ids=["garbage", "version", "neg-length", "length-and-chunked", "long-target", "many-headers", "bad-chunk"])
def test_malformed_http(spaced, raw):
    out = e2e_http.raw_exchange(spaced.url, raw, timeout=20)
    status = out.split(b" ", 2)[1] if out.startswith(b"HTTP/1.") and out.count(b" ") >= 2 else b""
    assert out == b"" or status.startswith(b"4") or status == b"505", f"answer to malformed HTTP: {out[:200]!r}"
    assert spaced.api("GET", "/healthz", key=None).status == 200, "spaced stopped answering"
    assert spaced.running


# ---- a broken sandbox ----

def test_agent_killed_from_host(spaced):
    sid = spaced.create()["id"]
    try:
        pid = spaced.agent_pid(sid)
        assert pid, f"no PID 1 in the cgroup of {sid}"
        seq0 = last_seq(spaced)
        host.kill_pid(pid, signal.SIGKILL)

        def errored():
            v = spaced.show(sid).json()
            return v if v["state"] == "error" else None
        v = host.wait_until(errored, 20, 0.2)
        assert v, f"state after the agent died: {spaced.show(sid).json()}"
        assert v["reason"], f"no reason: {v}"
        r = spaced.exec(sid, cmd=["true"])
        assert r.response is not None, r
        assert_error_shape(r.response, 409, "sandbox_not_running")
        ev = spaced.api("GET", "/v1/events", params={"sandbox": sid, "after": seq0}).json()["events"]
        errs = [e for e in ev if e["type"] == "sandbox.error"
                or (e["type"] == "sandbox.state" and e.get("data", {}).get("to") == "error")]
        assert errs, f"no error event: {ev}"
        assert errs[0]["reason"], errs[0]
        # files are refused too, cleanly
        r = spaced.api("GET", f"/v1/sandboxes/{sid}/files", params={"path": "/etc/hostname"})
        assert_error_shape(r, 409, "sandbox_not_running")
        # no process of it is left
        assert host.wait_until(lambda: not spaced.sandbox_pids(sid), 10), spaced.sandbox_pids(sid)
    finally:
        r = spaced.api("DELETE", f"/v1/sandboxes/{sid}", timeout=180)
        assert r.status == 200, r


def test_kill_pid1_from_inside(spaced, sandbox):
    for sig in ("KILL", "STOP"):
        r = spaced.exec(sandbox, shell=f"kill -{sig} 1; echo sent")
        assert r.response is None, r
        time.sleep(0.2)
        assert spaced.show(sandbox).json()["state"] == "running", f"SIGKILL from inside after kill -{sig} 1"
        assert spaced.sh(sandbox, "echo alive") == "alive\n", f"sandbox broken after kill -{sig} 1"


def test_fork_bomb_is_contained(spaced):
    sid = spaced.create(pids_max=64)["id"]
    try:
        r = spaced.exec(sid, shell="i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; "
                                   "echo started", timeout_s=20)
        assert r.response is None, r
        n = len(spaced.sandbox_pids(sid))
        assert n <= 64 + 2, f"{n} processes in a sandbox with pids_max 64"
        assert spaced.api("GET", "/healthz", key=None).status == 200
    finally:
        spaced.delete(sid)


def last_seq(spaced):
    v = spaced.api("GET", "/v1/events", params={"limit": 1000}).json()
    seqs = [e["seq"] for e in v["events"]]
    nxt = v.get("next")
    while nxt and v["events"]:
        v = spaced.api("GET", "/v1/events", params={"limit": 1000, "after": nxt}).json()
        seqs += [e["seq"] for e in v["events"]]
        if v.get("next") == nxt:
            break
        nxt = v.get("next")
    return max(seqs) if seqs else 0
