# SPDX-License-Identifier: MIT
"""The Python SDK (sdk/python), installed with pip as a user would
(`pip install ./sdk/python`, no package index), driving a real spaced: its
sync and asyncio clients over the /v1 API, its exceptions, its quickstart."""

import asyncio
import http.server
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from e2e_daemon import clean_env

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SDK = os.path.join(REPO, "sdk", "python")


@pytest.fixture(scope="module")
def sdk(tmp_path_factory):
    """space_sdk as pip installs it, imported from the install (not the tree)."""
    target = str(tmp_path_factory.mktemp("sdk-install"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--target", target, SDK],
                       capture_output=True, text=True, timeout=300, env=clean_env({"PIP_NO_CACHE_DIR": "1"}))
    assert r.returncode == 0, r.stderr
    sys.path.insert(0, target)
    try:
        import space_sdk
        assert space_sdk.__file__.startswith(target), space_sdk.__file__
        yield space_sdk
    finally:
        sys.path.remove(target)
        for m in [m for m in sys.modules if m == "space_sdk" or m.startswith("space_sdk.")]:
            del sys.modules[m]


@pytest.fixture(scope="module")
def tenant_key(spaced):
    r = spaced.api("POST", "/v1/keys", json={"name": "sdk", "tenant": "sdk" + uuid.uuid4().hex[:10]})
    assert r.status == 201, r
    spaced.keys[r.json()["key"]] = r.json()["id"]
    return r.json()["key"]


@pytest.fixture(scope="module")
def client(sdk, spaced, tenant_key):
    with sdk.Client(spaced.url, tenant_key, timeout=120) as c:
        yield c
        for sb in c.list():
            c.delete(sb.id)


@pytest.fixture(scope="module")
def sb(client):
    s = client.create(memory_mb=256, env={"FROM_CREATE": "yes"}, metadata={"suite": "sdk"})
    yield s
    s.delete()


def test_create_get_list(client, sb, sdk):
    assert sb.state == "running" and sb.template == "base" and sb.memory_mb == 256
    assert sb.metadata == {"suite": "sdk"} and sb.env == {"FROM_CREATE": "yes"}
    assert client.get(sb.id).id == sb.id
    assert sb.id in [s.id for s in client.list()]
    assert sb.id in [s.id for s in client.list(state="running", page_size=1)]
    assert client.info()["runtimes"]


def test_exec(sb):
    r = sb.exec("echo out; echo err >&2; echo $FROM_CREATE; exit 3")
    assert (r.exit_code, r.stdout, r.stderr) == (3, b"out\nyes\n", b"err\n")
    assert not r.ok and r.exec_id and r.pid
    r = sb.exec(["printf", "%s|", "a b", "c"], env={"X": "1"}, cwd="/tmp")
    assert r.stdout == b"a b|c|" and r.ok
    assert sb.exec(["cat"], stdin="fed then closed").stdout == b"fed then closed"
    assert sb.exec("pwd", cwd="/tmp").stdout == b"/tmp\n"
    assert sb.exec("id -u", user="user").stdout == b"1000\n"
    binary = sb.exec(["sh", "-c", "printf '\\377\\000\\001'"])
    assert binary.stdout == b"\xff\x00\x01"


def test_exec_callbacks_and_stream(sb):
    seen = []
    r = sb.exec("for i in 1 2 3; do echo $i; done; echo e >&2", on_stdout=seen.append,
                on_stderr=lambda d: seen.append(b"E" + d))
    assert b"".join(x for x in seen if not x.startswith(b"E")) == b"1\n2\n3\n" and r.ok
    assert b"Ee\n" in seen
    events = list(sb.exec_stream(["sh", "-c", "echo a; exit 7"]))
    assert [e.type for e in events][0] == "start" and events[-1].type == "exit" and events[-1].code == 7
    assert b"".join(e.data for e in events if e.type == "stdout") == b"a\n"


def test_exec_errors_and_timeouts(sb, sdk):
    r = sb.exec(["/no/such/program"])
    assert r.exit_code == 127 and r.error
    with pytest.raises(sdk.ExecFailed):
        sb.exec("exit 2", check=True)
    r = sb.exec("sleep 30", timeout_s=1)
    assert r.signal == "SIGKILL" and r.reason == "timeout"
    with pytest.raises(ValueError):
        sb.exec(["ok", 3])


def test_background_process(client, sb):
    p = client.start(sb.id, ["sh", "-c", "cat > /tmp/bg.out"], stdin=True)
    assert p.exec_id and p.pid
    assert p.exec_id in [x["exec_id"] for x in client.processes(sb.id)]
    p.send_stdin("first ")
    p.send_stdin(b"second", eof=True)
    for _ in range(100):
        if p.exec_id not in [x["exec_id"] for x in client.processes(sb.id)]:
            break
        time.sleep(0.1)
    assert sb.read_file("/tmp/bg.out") == b"first second"
    q = client.start(sb.id, "sleep 1000")
    q.kill()


def test_files(client, sb, sdk, tmp_path):
    big = os.urandom(5 << 20)
    sb.write_file("/data/big.bin", iter([big[:1 << 20], big[1 << 20:]]))  # chunked, streamed
    assert sb.read_file("/data/big.bin") == big
    assert b"".join(client.read_file_stream(sb.id, "/data/big.bin")) == big
    sb.write_file("/data/t.txt", "text", mode=0o600)
    st = client.stat(sb.id, "/data/t.txt")
    assert (st.type, st.size, st.mode & 0o777) == ("file", 4, 0o600)
    client.mkdir(sb.id, "/data/sub/deeper")
    names = sorted(e.name for e in sb.list_files("/data"))
    assert names == ["big.bin", "sub", "t.txt"]
    client.move(sb.id, "/data/t.txt", "/data/sub/t2.txt")
    assert sb.read_file("/data/sub/t2.txt") == b"text"
    client.remove(sb.id, "/data/sub", recursive=True)
    with pytest.raises(sdk.NotFound):
        sb.read_file("/data/sub/t2.txt")
    with pytest.raises(sdk.InvalidPath):
        sb.read_file("/data/../etc/passwd")
    # a directory tree up and down
    src = tmp_path / "tree"
    (src / "a" / "b").mkdir(parents=True)
    (src / "top.txt").write_bytes(b"top")
    (src / "a" / "b" / "leaf.bin").write_bytes(os.urandom(1000))
    client.upload_dir(sb.id, str(src), "/work/tree")
    assert sb.exec("cat /work/tree/top.txt").stdout == b"top"
    back = tmp_path / "back"
    client.download_dir(sb.id, "/work/tree", str(back))
    assert (back / "top.txt").read_bytes() == b"top"
    assert (back / "a" / "b" / "leaf.bin").read_bytes() == (src / "a" / "b" / "leaf.bin").read_bytes()


def test_lifecycle_checkpoint_branch_restore(client, sdk):
    s = client.create()
    try:
        s.write_file("/state", "before")
        ck = s.checkpoint("one")
        assert ck.name == "one" and ck.sandbox == s.id
        assert [c.id for c in client.checkpoints(s.id)] == [ck.id]
        s.write_file("/state", "after")
        kids = s.branch(2)
        assert len(kids) == 2 and all(k.parent == s.id for k in kids)
        assert kids[0].read_file("/state") == b"after"
        from_ck = client.branch(s.id, 1, from_checkpoint="one")[0]
        assert from_ck.read_file("/state") == b"before"
        for k in kids + [from_ck]:
            k.delete()
        assert client.restore(s.id, "one").state == "running"
        assert s.read_file("/state") == b"before"
        client.delete_checkpoint(s.id, ck.id)
        assert client.checkpoints(s.id) == []
        assert s.pause().state == "paused"
        with pytest.raises(sdk.SandboxPaused):
            s.exec("true")
        assert s.resume().state == "running"
        assert s.suspend().state == "suspended"
        with pytest.raises(sdk.SandboxNotRunning):
            s.exec("true")
        assert s.resume().state == "running"
        assert client.update(s.id, timeout_s=3600).timeout_s == 3600
        pol = client.set_policy(s.id, {"allow": ["example.com"]})
        assert pol.network["allow"][0]["host"] == "example.com"
    finally:
        assert s.delete().state == "deleted"
    with pytest.raises(sdk.NotFound):
        client.get(s.id)


def test_errors(client, sdk, spaced):
    with pytest.raises(sdk.NotFound) as e:
        client.get("nosuchsandbox000")
    assert e.value.status == 404 and e.value.code == "not_found" and e.value.message
    with pytest.raises(sdk.InvalidArgument):
        client.create(memory_mb=1)
    with pytest.raises(sdk.UnknownField):
        client.create(no_such_field=1)
    with pytest.raises(sdk.NotFound):
        client.create(template="no-such-template")
    with sdk.Client(spaced.url, "sk_wrong") as bad:
        with pytest.raises(sdk.Unauthorized):
            bad.list()
    with sdk.Client("http://127.0.0.1:1", "sk_x", retries=1) as nowhere:
        with pytest.raises(sdk.ConnectionFailed):
            nowhere.info()
    with pytest.raises(ValueError):
        sdk.Client("ftp://x", "k")
    assert issubclass(sdk.SandboxPaused, sdk.Conflict) and issubclass(sdk.Conflict, sdk.SpaceError)


def test_events_keys_credentials_templates(client, sb, spaced, sdk):
    events, _ = client.events(sandbox=sb.id)
    assert "sandbox.created" in [e.type for e in events]
    follow = client.follow_events(type="sandbox.")
    other = client.create()
    try:
        for ev in follow:
            if ev.sandbox == other.id and ev.type == "sandbox.created":
                break
    finally:
        follow.close()
        other.delete()
    key = client.create_key("sdk-extra")
    assert key.key.startswith("sk_") and key.id in [k.id for k in client.keys()]
    client.delete_key(key.id)
    assert key.id not in [k.id for k in client.keys()]
    cred = client.create_credential("sdk-cred", "s3cr3t", ["api.example.com"], env="EXAMPLE_TOKEN")
    assert cred.placeholder == "space-cred-sdk-cred" and "s3cr3t" not in str(cred.raw)
    client.grant(sb.id, "sdk-cred")
    assert [c.name for c in client.grants(sb.id)] == ["sdk-cred"]
    assert client.update_credential("sdk-cred", value="n3w").version == 2
    assert client.revoke_credential("sdk-cred").state == "revoked"
    client.delete_credential("sdk-cred")
    with pytest.raises(sdk.NotFound):
        client.credential("sdk-cred")
    assert "base" in [t.name for t in client.templates()]


def test_async_client(sdk, spaced, tenant_key):
    async def main():
        async with sdk.AsyncClient(spaced.url, tenant_key) as sp:
            s = await sp.create()
            try:
                r = await s.exec("echo async; exit 4")
                assert (r.exit_code, r.stdout) == (4, b"async\n")
                kinds = [ev.type async for ev in await sp.exec_stream(s.id, ["echo", "x"])]
                assert kinds[0] == "start" and kinds[-1] == "exit"
                await s.write_file("/a.bin", b"\x00\x01" * 100_000)
                assert await s.read_file("/a.bin") == b"\x00\x01" * 100_000
                # many calls at once on one client
                outs = await asyncio.gather(*(s.exec(["echo", str(i)]) for i in range(8)))
                assert [o.stdout for o in outs] == [f"{i}\n".encode() for i in range(8)]
                p = await sp.start(s.id, ["sh", "-c", "cat > /tmp/o"], stdin=True)
                await p.send_stdin("via async", eof=True)
                with pytest.raises(sdk.NotFound):
                    await sp.get("nosuchsandbox000")
                assert (await sp.checkpoint(s.id, "ac")).name == "ac"
            finally:
                await s.delete()
    asyncio.run(main())


class _Flaky(http.server.BaseHTTPRequestHandler):
    """A local stand-in for a server under load: 503 / 429 with Retry-After
    until the third try. (spaced itself answers these only under conditions
    other tests make; this checks the client's side of the contract.)"""
    hits = {}

    def do_GET(self):
        n = _Flaky.hits[self.path] = _Flaky.hits.get(self.path, 0) + 1
        if n < 3:
            code = 503 if "503" in self.path else 429
            body = b'{"error":{"code":"%s","message":"busy"}}' % (b"unavailable" if code == 503 else
                                                                   b"too_many_requests")
            self.send_response(code)
            self.send_header("Retry-After", "0")
        else:
            code, body = 200, b'{"runtimes":["ns"]}'
            self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.mark.parametrize("status", [429, 503])
def test_retries_honour_retry_after(sdk, status):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/{status}"
        with sdk.Client(url, "k", retries=3) as c:
            assert c.info() == {"runtimes": ["ns"]}
        with sdk.Client(url + "x", "k", retries=1) as c:
            with pytest.raises(sdk.TooManyRequests if status == 429 else sdk.Unavailable) as e:
                c.info()
            assert e.value.retry_after == 0.0

        async def a():
            async with sdk.AsyncClient(url + "a", "k", retries=3) as ac:
                return await ac.info()
        assert asyncio.run(a()) == {"runtimes": ["ns"]}
    finally:
        srv.shutdown()
        srv.server_close()


def test_quickstart(sdk, spaced, tenant_key):
    env = clean_env({"SPACE_URL": spaced.url, "SPACE_API_KEY": tenant_key,
                     "PYTHONPATH": os.path.dirname(os.path.dirname(sdk.__file__))})
    r = subprocess.run([sys.executable, os.path.join(SDK, "examples", "quickstart.py")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello from space\n"


def test_tenants_ports_metrics_ready(client, sb, sdk, spaced):
    assert client.ready()["status"]
    me = client.tenant(client.get(sb.id).tenant)
    assert me["quotas"] is not None and "usage" in me
    with sdk.Client(spaced.url, spaced.admin_key) as admin:
        name = me["name"] if "name" in me else client.get(sb.id).tenant
        got = admin.set_tenant(name, sandboxes=50)
        assert got["quotas"]["sandboxes"] == 50 and got["overrides"].get("sandboxes") == 50, got
        got = admin.set_tenant(name, sandboxes=None)  # back to the host's default
        assert got["overrides"].get("sandboxes") is None, got
        assert name in [t["name"] for t in admin.tenants()]
    with pytest.raises(sdk.Forbidden):
        client.set_tenant("someone-else", sandboxes=1)
    p = client.port(sb.id, 8000)
    assert p["port"] == 8000 and f"8000-{sb.id}" in p["url"] and p["token"]
    with pytest.raises(sdk.BadRequest):
        client.port(sb.id, 70000)
    for _ in range(100):
        samples = client.metrics(sb.id)
        if samples:
            break
        time.sleep(0.2)
    assert samples and "memory_bytes" in samples[-1]


def test_volumes(client, sdk):
    """Volumes through the SDK: made, their files without a sandbox, mounted at create, kept after the
    sandbox, in use refused, cloned, deleted."""
    name = "sdkvol" + uuid.uuid4().hex[:6]
    v = client.create_volume(name, size_mb=64)
    assert v["name"] == name and v["size_mb"] == 64
    client.write_volume_file(name, "/hello.txt", "from the sdk\n")
    assert client.read_volume_file(name, "/hello.txt") == b"from the sdk\n"
    assert [e["name"] for e in client.list_volume_files(name)] == ["hello.txt"]
    s = client.create(volumes=[{"name": name, "path": "/data"}])
    try:
        assert s.exec("cat /data/hello.txt; echo more > /data/more.txt").stdout == b"from the sdk\n"
        assert [m["name"] for m in client.sandbox_volumes(s.id)] == [name]
        with pytest.raises(sdk.VolumeInUse):
            client.delete_volume(name)
    finally:
        s.delete()
    assert client.read_volume_file(name, "/more.txt") == b"more\n"
    clone = client.clone_volume(name, name + "c")
    assert clone["name"] == name + "c"
    assert client.read_volume_file(name + "c", "/hello.txt") == b"from the sdk\n"
    snap = client.snapshot_volume(name, name + "s")
    assert snap["read_only"] is True and snap["source"] == name
    with pytest.raises(sdk.Conflict):
        client.write_volume_file(name + "s", "/hello.txt", "changed")
    client.delete_volume(name + "s")
    client.remove_volume_file(name, "/hello.txt")
    with pytest.raises(sdk.NotFound):
        client.read_volume_file(name, "/hello.txt")
    assert name in [x["name"] for x in client.volumes()]
    client.delete_volume(name + "c")
    client.delete_volume(name)
    with pytest.raises(sdk.NotFound):
        client.volume(name)


def test_webhooks(client, sdk):
    """Webhooks through the SDK on a server with the default guard: one at a loopback address is refused
    (the SSRF guard), the tenant has none, and an unknown one is NotFound."""
    with pytest.raises(sdk.BadRequest):
        client.create_webhook("http://127.0.0.1:9/hook", events=["sandbox.*"])
    assert client.webhooks() == []
    with pytest.raises(sdk.NotFound):
        client.webhook("wh_0000000000000000")
