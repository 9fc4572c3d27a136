"""A template's settings (PATCH /v1/templates/{name}, `space template set`):
its start command with a ready check, run by every sandbox made from it
before the create answers (src/api/template-start.c), and the runtime a
create gets when it names none: the template's, the tenant's
(PUT /v1/tenants default_runtime), the host's default_runtime
(src/api/sandbox-defaults.c).

One template of this module (a copy of base); the session's spaced has no
guest kernel, so "vm" resolves to a clear refusal, which is how these tests
see that a default applied without booting a VM (test_vm.py boots one)."""

import os
import sys

import pytest

import e2e_host as host
from e2e_daemon import assert_error_shape

PORT = 8123


@pytest.fixture(scope="module")
def tpl(spaced):
    name = f"start-{os.getpid()}"
    c = spaced.cli("template", "import", name, spaced.s.base_template(), timeout=600)
    assert c.rc == 0, c
    yield name
    for sid, sb in spaced.list_all().items():
        if sb.get("template") == name and sb.get("state") not in ("deleted",):
            spaced.api("DELETE", f"/v1/sandboxes/{sid}", timeout=180)
    assert spaced.api("DELETE", f"/v1/templates/{name}").status == 204


def patch(d, name, body, key=None, status=200):
    r = d.api("PATCH", f"/v1/templates/{name}", json=body, **({"key": key} if key else {}))
    assert r.status == status, r
    return r


def listening(d, sid, port):
    return f":{port} " in d.sh(sid, "netstat -ltn")


def live_of(d, name):
    return [sid for sid, sb in d.list_all().items()
            if sb.get("template") == name and sb.get("state") not in ("deleted", "deleting")]


def events_of(d, sid, type_):
    r = d.api("GET", "/v1/events", params={"sandbox": sid})
    assert r.status == 200, r
    return [e for e in r.json()["events"] if e["type"] == type_]


HTTPD = f"mkdir -p /srv && echo up > /srv/index.html && sleep 1 && exec httpd -f -p {PORT} -h /srv"


def test_start_with_http_ready_check_is_ready_when_the_create_answers(spaced, tpl):
    t = patch(spaced, tpl, {"start": {"command": HTTPD, "ready": {"port": PORT, "path": "/index.html"},
                                      "timeout_s": 30}}).json()
    assert t["start"]["command"] == HTTPD and t["start"]["ready"] == {"port": PORT, "path": "/index.html"}
    assert t["start"]["timeout_s"] == 30
    listed = {x["name"]: x for x in spaced.api("GET", "/v1/templates").json()["templates"]}
    assert listed[tpl]["start"] == t["start"] and listed[tpl]["runtime"] is None
    sid = spaced.create(template=tpl)["id"]
    try:
        # no wait: the server listens as the create answers (the command sleeps 1 s before it starts)
        assert listening(spaced, sid, PORT)
        ev = events_of(spaced, sid, "sandbox.start_ready")
        assert len(ev) == 1 and ev[0]["data"]["ready_ms"] >= 900, ev
        # the start command is one of the sandbox's execs: its output can be read like any other's
        ps = spaced.api("GET", f"/v1/sandboxes/{sid}/exec").json()["processes"]
        assert ev[0]["data"]["exec_id"] in [p["exec_id"] for p in ps], ps
    finally:
        spaced.delete(sid)


def test_e2b_create_waits_for_the_start_command_too(spaced, tpl):
    patch(spaced, tpl, {"start": {"command": "sleep 1; touch /tmp/ready; exec sleep 100000",
                                  "ready": {"command": "test -f /tmp/ready"}}})
    r = spaced.api("POST", "/sandboxes", json={"templateID": tpl, "timeout": 120},
                   headers={"X-API-Key": spaced.admin_key}, key=None, validate=False)
    assert r.status == 201, r
    sid = r.json()["sandboxID"]
    try:
        assert spaced.exec(sid, shell="test -f /tmp/ready").code == 0
    finally:
        spaced.delete(sid)


def test_cli_template_set_and_the_ready_command(spaced, tpl):
    c = spaced.cli("template", "set", tpl, "--start", "sleep 1; touch /tmp/ready; exec sleep 100000",
                   "--ready-cmd", "test -f /tmp/ready", "--ready-timeout", "20")
    assert c.rc == 0, c
    t = {x["name"]: x for x in spaced.api("GET", "/v1/templates").json()["templates"]}[tpl]
    assert t["start"]["ready"] == {"command": "test -f /tmp/ready"} and t["start"]["timeout_s"] == 20
    c = spaced.cli("create", "--template", tpl)
    assert c.rc == 0, c
    sid = c.out.strip()
    try:
        assert spaced.exec(sid, shell="test -f /tmp/ready").code == 0
    finally:
        spaced.delete(sid)


def test_a_start_command_that_exits_fails_the_create_and_leaves_nothing(spaced, tpl):
    patch(spaced, tpl, {"start": {"command": "echo boom-start >&2; exit 3", "ready": {"port": PORT}}})
    before = set(live_of(spaced, tpl))
    r = spaced.api("POST", "/v1/sandboxes", json={"template": tpl}, timeout=120)
    assert_error_shape(r, 502, "bad_gateway")
    msg = r.json()["error"]["message"]
    assert "exited with code 3" in msg and "boom-start" in msg, msg
    assert set(live_of(spaced, tpl)) == before


def test_a_start_command_not_ready_in_time_fails_the_create(spaced, tpl):
    patch(spaced, tpl, {"start": {"command": "echo waiting; exec sleep 100000", "ready": {"port": PORT},
                                  "timeout_s": 1}})
    before = set(live_of(spaced, tpl))
    r = spaced.api("POST", "/v1/sandboxes", json={"template": tpl}, timeout=120)
    assert_error_shape(r, 504, "timeout")
    assert "not ready within 1 s" in r.json()["error"]["message"] and "waiting" in r.json()["error"]["message"]
    assert set(live_of(spaced, tpl)) == before


def test_the_start_command_runs_again_after_a_suspend(spaced, tpl):
    patch(spaced, tpl, {"start": {"command": HTTPD, "ready": {"port": PORT}}})
    sid = spaced.create(template=tpl)["id"]
    try:
        assert listening(spaced, sid, PORT)
        assert spaced.api("POST", f"/v1/sandboxes/{sid}/suspend").status == 200
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/resume", timeout=120)
        assert r.status == 200, r
        assert listening(spaced, sid, PORT)
        assert len(events_of(spaced, sid, "sandbox.start_ready")) == 2
        # a start command that fails on a restart is an event: the sandbox (someone's work) stays
        patch(spaced, tpl, {"start": {"command": "exit 7", "ready": {"port": PORT}}})
        assert spaced.api("POST", f"/v1/sandboxes/{sid}/suspend").status == 200
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/resume", timeout=120)
        assert r.status == 200, r
        assert spaced.show(sid).json()["state"] == "running"
        assert host.wait_until(lambda: events_of(spaced, sid, "sandbox.start_failed"), 10)
    finally:
        spaced.delete(sid)


def test_no_start_removes_it(spaced, tpl):
    patch(spaced, tpl, {"start": {"command": "exit 1"}})
    t = patch(spaced, tpl, {"start": None}).json()
    assert t["start"] is None
    sid = spaced.create(template=tpl)["id"]
    spaced.delete(sid)
    c = spaced.cli("template", "set", tpl, "--no-start")
    assert c.rc == 0, c


@pytest.mark.parametrize("body,what", [
    ({}, None),
    ({"colour": "red"}, "unknown field 'colour'"),
    ({"start": "sleep 1"}, "start must be an object"),
    ({"start": {}}, "start.command is required"),
    ({"start": {"command": ""}}, "start.command must be a non-empty string"),
    ({"start": {"command": "x", "shell": "y"}}, "unknown field 'start.shell'"),
    ({"start": {"command": "x", "ready": {"command": "y", "port": 80}}}, "either a command or a port"),
    ({"start": {"command": "x", "ready": {}}}, "either a command or a port"),
    ({"start": {"command": "x", "ready": {"port": 0}}}, "start.ready.port must be a port"),
    ({"start": {"command": "x", "ready": {"port": 70000}}}, "start.ready.port must be a port"),
    ({"start": {"command": "x", "ready": {"port": 80, "path": "nope"}}}, "must start with '/'"),
    ({"start": {"command": "x", "ready": {"port": 80, "path": "/a b"}}}, "must start with '/'"),
    ({"start": {"command": "x", "timeout_s": 0}}, "between 1 and 600"),
    ({"start": {"command": "x", "timeout_s": 601}}, "between 1 and 600"),
    ({"start": {"command": "x", "env": {"A": 1}}}, "start.env must be an object of strings"),
    ({"start": {"command": "x" * 5000}}, "longer than 4096"),
    ({"runtime": "kvm"}, "runtime must be 'ns', 'vm', 'auto' or null"),
    ({"runtime": 1}, "runtime must be 'ns', 'vm', 'auto' or null"),
])
def test_bad_settings_are_refused_and_change_nothing(spaced, tpl, body, what):
    patch(spaced, tpl, {"start": None, "runtime": None})
    r = spaced.api("PATCH", f"/v1/templates/{tpl}", json=body)
    if what is None:  # an empty patch changes nothing and says so
        assert r.status == 200 and r.json()["start"] is None and r.json()["runtime"] is None, r
        return
    assert r.status == 400, r
    assert what in r.json()["error"]["message"], r.json()
    t = {x["name"]: x for x in spaced.api("GET", "/v1/templates").json()["templates"]}[tpl]
    assert t["start"] is None and t["runtime"] is None


def test_settings_need_an_admin_and_a_template(spaced, tpl):
    r = spaced.api("POST", "/v1/keys", json={"name": "tsk", "tenant": f"ts-{os.getpid()}"})
    assert r.status == 201, r
    r = spaced.api("PATCH", f"/v1/templates/{tpl}", json={"runtime": "ns"}, key=r.json()["key"])
    assert_error_shape(r, 403, "forbidden")
    r = spaced.api("PATCH", "/v1/templates/no-such-template", json={"runtime": "ns"})
    assert_error_shape(r, 404, "not_found")
    r = spaced.api("PATCH", f"/v1/templates/{tpl}", data=b"[1]", headers={"Content-Type": "application/json"})
    assert r.status == 400, r
    c = spaced.cli("template", "set", tpl)
    assert c.rc != 0 and "--runtime" in c.err, c
    c = spaced.cli("template", "set", tpl, "--ready-port", "80")
    assert c.rc != 0 and "go with --start" in c.err, c
    c = spaced.cli("template", "set", tpl, "--runtime", "kvm")
    assert c.rc != 0 and "ns, vm, auto or default" in c.err, c


def test_runtime_defaults_template_then_tenant_then_host(spaced, tpl):
    tenant = f"rt-{os.getpid()}"
    r = spaced.api("POST", "/v1/keys", json={"name": "rtk", "tenant": tenant})
    assert r.status == 201, r
    key = r.json()["key"]
    patch(spaced, tpl, {"start": None, "runtime": None})
    info = spaced.api("GET", "/v1/info", key=key).json()["default_runtime"]
    assert info == {"host": "ns", "tenant": None, "setting": "ns", "applies": "ns"}, info

    # the tenant's default: vm, which this host cannot run: the create is refused, saying why
    r = spaced.api("PUT", f"/v1/tenants/{tenant}", json={"default_runtime": "vm"})
    assert r.status == 200 and r.json()["default_runtime"] == "vm", r
    assert spaced.api("GET", "/v1/info", key=key).json()["default_runtime"]["setting"] == "vm"
    c = spaced.cli("info", key=key)
    assert c.rc == 0 and "vm" in c.out, c
    r = spaced.api("POST", "/v1/sandboxes", json={"template": tpl}, key=key, timeout=120)
    assert r.status == 400 and "runtime 'vm' is not available" in r.json()["error"]["message"], r
    # ... and E2B clients, which never name a runtime, get it as well
    r = spaced.api("POST", "/sandboxes", json={"templateID": tpl}, headers={"X-API-Key": key}, key=None,
                   validate=False, timeout=120)
    assert r.status == 400 and b"runtime 'vm' is not available" in r.body, r
    # a runtime the request names wins
    sid = spaced.create(template=tpl, runtime="ns", key=key)["id"]
    spaced.delete(sid, key=key)
    # the template's own runtime wins over the tenant's
    patch(spaced, tpl, {"runtime": "ns"})
    sb = spaced.create(template=tpl, key=key)
    assert sb["runtime"] == "ns"
    spaced.delete(sb["id"], key=key)
    # auto: vm only where KVM is there (not on this daemon: no guest kernel)
    patch(spaced, tpl, {"runtime": "auto"})
    sb = spaced.create(template=tpl, key=key)
    assert sb["runtime"] == "ns"
    spaced.delete(sb["id"], key=key)
    # back to the host's, from the CLI
    c = spaced.cli("tenant", "set", tenant, "--default-runtime", "default")
    assert c.rc == 0, c
    assert spaced.api("GET", f"/v1/tenants/{tenant}").json()["default_runtime"] is None
    r = spaced.api("PUT", f"/v1/tenants/{tenant}", json={"default_runtime": "fast"})
    assert r.status == 400 and "default_runtime must be" in r.json()["error"]["message"], r
    c = spaced.cli("tenant", "set", tenant, "--default-runtime", "fast")
    assert c.rc != 0 and "--default-runtime" in c.err, c
    patch(spaced, tpl, {"runtime": None})


def test_a_removed_template_takes_its_settings_with_it(spaced):
    name = f"gone-{os.getpid()}"
    tar = spaced.s.base_template()
    assert spaced.cli("template", "import", name, tar, timeout=600).rc == 0
    patch(spaced, name, {"runtime": "vm", "start": {"command": "exit 1"}})
    assert spaced.api("DELETE", f"/v1/templates/{name}").status == 204
    assert spaced.cli("template", "import", name, tar, timeout=600).rc == 0
    t = {x["name"]: x for x in spaced.api("GET", "/v1/templates").json()["templates"]}[name]
    assert t["runtime"] is None and t["start"] is None
    sid = spaced.create(template=name)["id"]
    spaced.delete(sid)
    assert spaced.api("DELETE", f"/v1/templates/{name}").status == 204


def test_python_sdk_sets_and_reads_the_settings(spaced, tpl):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python"))
    try:
        import space_sdk
        with space_sdk.Client(spaced.url, spaced.admin_key, timeout=120) as c:
            t = c.update_template(tpl, runtime="ns", start={"command": "exec sleep 100000"})
            assert t.runtime == "ns" and t.start["command"] == "exec sleep 100000" and t.start["timeout_s"] == 60
            t = c.update_template(tpl, start=None)
            assert t.runtime == "ns" and t.start is None
            t = c.update_template(tpl, runtime=None)
            assert t.runtime is None
            with pytest.raises(space_sdk.SpaceError):
                c.update_template(tpl, runtime="kvm")
    finally:
        sys.path.pop(0)
        for m in [m for m in sys.modules if m == "space_sdk" or m.startswith("space_sdk.")]:
            del sys.modules[m]
