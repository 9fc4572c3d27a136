# SPDX-License-Identifier: MIT
"""Files in and out of a sandbox: the CLI's cp and the files API."""

import hashlib
import os
import threading
import time

import pytest

from e2e_daemon import assert_error_shape
import e2e_host as host

MiB = 1024 * 1024


def files(spaced, sid, method, path=None, key=None, **params):
    kw = {}
    if key is not None:
        kw["key"] = key
    if path is not None:
        params["path"] = path
    data = params.pop("data", None)
    json_body = params.pop("json", None)
    return spaced.api(method, f"/v1/sandboxes/{sid}/files", params=params, data=data, json=json_body, **kw)


def mode_bits(entry):
    m = entry["mode"]
    if isinstance(m, str):
        m = int(m, 8)
    return m & 0o7777


def put(spaced, sid, path, data, **params):
    r = files(spaced, sid, "PUT", path, data=data, **params)
    assert r.status == 201, r
    assert r.json() == {"path": path, "size": len(data)} or r.json()["size"] == len(data), r.json()
    return r


# ---- the CLI ----

def test_cp_up_and_down(spaced, sandbox, workdir):
    data = b"id,name,value\n" + b"".join(b"%d,row%d,%d\n" % (i, i, i * i) for i in range(50000)) + bytes(range(256))
    with open(os.path.join(workdir, "data.csv"), "wb") as f:
        f.write(data)
    c = spaced.cli("cp", "./data.csv", f"{sandbox}:/data/data.csv", cwd=workdir)
    assert c.rc == 0, c
    assert spaced.sh(sandbox, "wc -c < /data/data.csv").strip() == str(len(data))
    c = spaced.cli("cp", f"{sandbox}:/data/data.csv", "./back.csv", cwd=workdir)
    assert c.rc == 0, c
    with open(os.path.join(workdir, "back.csv"), "rb") as f:
        assert f.read() == data, "the file came back different"


def test_cp_keeps_mode_and_stdio(spaced, sandbox, workdir):
    p = os.path.join(workdir, "run.sh")
    with open(p, "w") as f:
        f.write("#!/bin/sh\necho ran\n")
    os.chmod(p, 0o750)
    c = spaced.cli("cp", p, f"{sandbox}:/tmp/run.sh")
    assert c.rc == 0, c
    assert spaced.sh(sandbox, "stat -c %a /tmp/run.sh; /tmp/run.sh") == "750\nran\n"
    c = spaced.cli("cp", "-", f"{sandbox}:/tmp/from-stdin", input=b"piped\x00bytes")
    assert c.rc == 0, c
    c = spaced.cli("cp", f"{sandbox}:/tmp/from-stdin", "-")
    assert c.rc == 0 and c.outb == b"piped\x00bytes", c


def test_cp_errors(spaced, sandbox, workdir):
    c = spaced.cli("cp", f"{sandbox}:/no/such/file", os.path.join(workdir, "x"))
    assert c.rc == 3 and c.err.count("\n") == 1, c  # not found: exit 3
    c = spaced.cli("cp", os.path.join(workdir, "missing-local"), f"{sandbox}:/tmp/x")
    assert c.rc == 3 and c.err.count("\n") == 1, c
    c = spaced.cli("cp", "nosuchsandbox:/a", os.path.join(workdir, "x"))
    assert c.rc == 3 and c.err.count("\n") == 1, c


# ---- the API ----

def test_put_get_stat_list_delete(spaced, sandbox):
    put(spaced, sandbox, "/tmp/api/a.txt", b"hello\n", parents=1)
    r = files(spaced, sandbox, "GET", "/tmp/api/a.txt")
    assert r.status == 200 and r.body == b"hello\n", r
    assert r.content_type == "application/octet-stream", r.headers
    assert r.headers.get("content-length") == "6", r.headers

    r = files(spaced, sandbox, "GET", "/tmp/api/a.txt", stat=1)
    assert r.status == 200, r
    e = r.json()
    assert e["name"] == "a.txt" and e["path"] == "/tmp/api/a.txt" and e["type"] == "file" and e["size"] == 6, e
    assert e["uid"] == 0 and e["gid"] == 0, e

    put(spaced, sandbox, "/tmp/api/b.bin", bytes(range(256)) * 4, mode="0600")
    r = files(spaced, sandbox, "GET", "/tmp/api/b.bin", stat=1)
    assert mode_bits(r.json()) == 0o600, r.json()

    r = files(spaced, sandbox, "GET", "/tmp/api", list=1)
    assert r.status == 200, r
    ents = {x["name"]: x for x in r.json()["entries"]}
    assert set(ents) == {"a.txt", "b.bin"}, ents
    assert ents["b.bin"]["size"] == 1024 and ents["b.bin"]["path"] == "/tmp/api/b.bin"

    r = files(spaced, sandbox, "DELETE", "/tmp/api/a.txt")
    assert r.status == 204, r
    r = files(spaced, sandbox, "GET", "/tmp/api/a.txt")
    assert_error_shape(r, 404, "not_found")
    r = files(spaced, sandbox, "DELETE", "/tmp/api", recursive=1)
    assert r.status == 204, r
    assert spaced.exec(sandbox, shell="test -e /tmp/api").code == 1


def test_put_overwrites_and_empty(spaced, sandbox):
    put(spaced, sandbox, "/tmp/ow", b"long content here")
    put(spaced, sandbox, "/tmp/ow", b"short")
    assert files(spaced, sandbox, "GET", "/tmp/ow").body == b"short"
    put(spaced, sandbox, "/tmp/empty", b"")
    r = files(spaced, sandbox, "GET", "/tmp/empty")
    assert r.status == 200 and r.body == b"", r


def test_put_chunked(spaced, sandbox):
    chunks = [b"x" * 1000, b"y" * 70000, b"z"]
    r = spaced.api("PUT", f"/v1/sandboxes/{sandbox}/files", params={"path": "/tmp/chunked"}, data=iter(chunks))
    assert r.status == 201 and r.json()["size"] == 71001, r
    assert files(spaced, sandbox, "GET", "/tmp/chunked").body == b"".join(chunks)


def test_written_file_is_owned_and_visible(spaced, sandbox):
    put(spaced, sandbox, "/tmp/visible", b"42\n")
    assert spaced.sh(sandbox, "cat /tmp/visible; stat -c %u /tmp/visible") == "42\n0\n"


def test_relative_path_is_in_home(spaced, sandbox):
    put(spaced, sandbox, "rel.txt", b"home")
    assert spaced.sh(sandbox, 'cat "$HOME/rel.txt"') == "home"


def test_mkdir_and_move(spaced, sandbox):
    r = files(spaced, sandbox, "PUT", "/tmp/mk/sub", type="dir", parents=1)
    assert r.status == 201, r
    r = files(spaced, sandbox, "GET", "/tmp/mk/sub", stat=1)
    assert r.json()["type"] == "dir", r.json()
    r = files(spaced, sandbox, "PUT", "/tmp/mk/sub", type="dir")
    assert_error_shape(r, 409)
    put(spaced, sandbox, "/tmp/mk/sub/f", b"move me")
    r = spaced.api("POST", f"/v1/sandboxes/{sandbox}/files/move", json={"from": "/tmp/mk/sub/f", "to": "/tmp/mk/g"})
    assert r.status == 204, r
    assert_error_shape(files(spaced, sandbox, "GET", "/tmp/mk/sub/f"), 404, "not_found")
    assert files(spaced, sandbox, "GET", "/tmp/mk/g").body == b"move me"
    r = files(spaced, sandbox, "DELETE", "/tmp/mk")
    assert_error_shape(r, 409)        # not empty, not recursive
    r = files(spaced, sandbox, "DELETE", "/tmp/mk", recursive=1)
    assert r.status == 204, r


def test_list_shows_symlink_target(spaced, sandbox):
    spaced.sh(sandbox, "mkdir -p /tmp/ls && ln -sf /etc/hostname /tmp/ls/link && : > /tmp/ls/file")
    r = files(spaced, sandbox, "GET", "/tmp/ls", list=1)
    ents = {x["name"]: x for x in r.json()["entries"]}
    assert ents["link"]["type"] == "symlink" and ents["link"]["target"] == "/etc/hostname", ents
    assert ents["file"]["type"] == "file"


@pytest.mark.timeout(900)
def test_upload_1gib_streamed(spaced, workdir):
    sb = spaced.create(disk_mb=2048)
    sid = sb["id"]
    try:
        size = 1024 * MiB
        block = os.urandom(MiB)
        digest = hashlib.sha256()

        def body():
            for i in range(size // MiB):
                chunk = i.to_bytes(8, "little") + block[8:]
                digest.update(chunk)
                yield chunk

        pids = spaced.daemon_pids()
        base = {p: host.proc_rss_kb(p) or 0 for p in pids}
        peak = dict(base)
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                for p in pids:
                    v = host.proc_rss_kb(p)
                    if v is not None:
                        peak[p] = max(peak[p], v)
                time.sleep(0.1)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        try:
            r = spaced.api("PUT", f"/v1/sandboxes/{sid}/files", params={"path": "/big"}, data=body(),
                           headers={"Content-Length": str(size)}, timeout=600)
        finally:
            stop.set()
            t.join()
        assert r.status == 201 and r.json()["size"] == size, r
        growth = {p: (peak[p] - base[p]) // 1024 for p in pids}
        spaced.s.notes.append(f"1 GiB upload: peak RSS growth of spaced/worker {growth} MiB")
        assert all(g < 256 for g in growth.values()), \
            f"RSS of spaced/worker grew by {growth} MiB during a 1 GiB upload (it must stream)"
        out = spaced.sh(sid, "sha256sum /big", timeout=600)
        assert out.split()[0] == digest.hexdigest(), "the uploaded file differs"
    finally:
        spaced.delete(sid)


# ---- bad paths ----

BAD_PATHS = ["/tmp/../etc/passwd", "../etc/passwd", "/tmp/..", "..", "/tmp/a/../../b",
             "/tmp/a\x00b", "/" + "a" * 5000, ""]


@pytest.mark.parametrize("path", BAD_PATHS, ids=["dotdot", "rel-dotdot", "trailing-dotdot", "bare-dotdot",
                                                 "deep-dotdot", "nul", "too-long", "empty"])
@pytest.mark.parametrize("op", ["get", "stat", "list", "put", "delete", "move-from", "move-to"])
def test_bad_path(spaced, sandbox, path, op):
    if op == "get":
        r = files(spaced, sandbox, "GET", path)
    elif op == "stat":
        r = files(spaced, sandbox, "GET", path, stat=1)
    elif op == "list":
        r = files(spaced, sandbox, "GET", path, list=1)
    elif op == "put":
        r = files(spaced, sandbox, "PUT", path, data=b"x")
    elif op == "delete":
        r = files(spaced, sandbox, "DELETE", path)
    elif op == "move-from":
        r = spaced.api("POST", f"/v1/sandboxes/{sandbox}/files/move", json={"from": path, "to": "/tmp/mv-dst"})
    else:
        spaced.sh(sandbox, ": > /tmp/mv-src")
        r = spaced.api("POST", f"/v1/sandboxes/{sandbox}/files/move", json={"from": "/tmp/mv-src", "to": path})
    assert_error_shape(r, 400, "invalid_path")


def test_missing_path_parameter(spaced, sandbox):
    r = spaced.api("GET", f"/v1/sandboxes/{sandbox}/files")
    e = assert_error_shape(r, 400)
    assert e["code"] in ("invalid_path", "invalid_argument", "bad_request"), e


def test_bad_file_mode(spaced, sandbox):
    r = files(spaced, sandbox, "PUT", "/tmp/badmode", data=b"x", mode="999")
    assert_error_shape(r, 400, "invalid_argument")


def test_move_bad_body(spaced, sandbox):
    r = spaced.api("POST", f"/v1/sandboxes/{sandbox}/files/move", json={"from": "/tmp/a"})
    assert_error_shape(r, 400, "invalid_argument")
    r = spaced.api("POST", f"/v1/sandboxes/{sandbox}/files/move", json={"from": "/a", "to": "/b", "x": 1})
    assert_error_shape(r, 400, "unknown_field")


# ---- symlinks resolve inside the sandbox ----

def test_absolute_symlink_stays_inside(spaced, sandbox):
    marker = f"space-e2e-marker-{os.getpid()}"
    spaced.sh(sandbox, f"echo {marker} >> /etc/passwd && ln -sf /etc/passwd /tmp/l")
    r = files(spaced, sandbox, "GET", "/tmp/l")
    assert r.status == 200, r
    with open("/etc/passwd", "rb") as f:
        hostpw = f.read()
    assert marker.encode() in r.body, "the symlink did not resolve to the sandbox's /etc/passwd"
    assert marker.encode() not in hostpw
    assert r.body == spaced.exec(sandbox, cmd=["cat", "/etc/passwd"]).stdout


def test_relative_symlink_cannot_climb_out(spaced, sandbox):
    spaced.sh(sandbox, "mkdir -p /tmp/deep/er && ln -sf ../../../../../../../../etc/hostname /tmp/deep/er/up")
    r = files(spaced, sandbox, "GET", "/tmp/deep/er/up")
    inside = spaced.exec(sandbox, cmd=["cat", "/etc/hostname"])
    if inside.code == 0:
        assert r.status == 200 and r.body == inside.stdout, r
    else:
        assert_error_shape(r, 404, "not_found")


def test_write_through_symlink_stays_inside(spaced, sandbox):
    target = f"/root/space-e2e-probe-{os.getpid()}"
    assert not os.path.exists(target)
    spaced.sh(sandbox, f"ln -sf {target} /tmp/wl")
    r = files(spaced, sandbox, "PUT", "/tmp/wl", data=b"inside")
    try:
        assert not os.path.exists(target), "a write through a symlink reached the host"
    finally:
        if os.path.exists(target):
            os.unlink(target)
    if r.status == 201:
        # either written through the link (inside the sandbox) or the link replaced by the file
        through = spaced.exec(sandbox, cmd=["cat", target]).stdout
        replaced = spaced.exec(sandbox, shell="test ! -L /tmp/wl && cat /tmp/wl").stdout
        assert b"inside" in (through, replaced), (through, replaced)
    else:
        assert_error_shape(r)


def test_symlink_loop(spaced, sandbox):
    spaced.sh(sandbox, "ln -sf /tmp/loopb /tmp/loopa && ln -sf /tmp/loopa /tmp/loopb")
    # reading the link follows it; stat and list of a path below it must too
    for path, params in (("/tmp/loopa", {}), ("/tmp/loopa/x", {"stat": 1}), ("/tmp/loopa", {"list": 1}),
                         ("/tmp/loopa/x", {})):
        r = files(spaced, sandbox, "GET", path, **params)
        assert_error_shape(r, 400, "invalid_path")
    r = files(spaced, sandbox, "PUT", "/tmp/loopa/x", data=b"x")
    assert_error_shape(r, 400, "invalid_path")
    r = files(spaced, sandbox, "DELETE", "/tmp/loopa/x")
    assert_error_shape(r, 400, "invalid_path")


# ---- errors from the filesystem ----

def test_missing_file(spaced, sandbox):
    for params in ({}, {"stat": 1}, {"list": 1}):
        r = files(spaced, sandbox, "GET", "/no/such/file", **params)
        assert_error_shape(r, 404, "not_found")
    assert_error_shape(files(spaced, sandbox, "DELETE", "/no/such/file"), 404, "not_found")
    r = spaced.api("POST", f"/v1/sandboxes/{sandbox}/files/move", json={"from": "/no/such", "to": "/tmp/x"})
    assert_error_shape(r, 404, "not_found")
    r = files(spaced, sandbox, "PUT", "/no/such/dir/file", data=b"x")
    assert_error_shape(r, 404, "not_found")


def test_directory_as_file(spaced, sandbox):
    assert_error_shape(files(spaced, sandbox, "GET", "/tmp"), 400, "invalid_path")
    assert_error_shape(files(spaced, sandbox, "PUT", "/tmp", data=b"x"), 400, "invalid_path")
    spaced.sh(sandbox, ": > /tmp/plainfile")
    assert_error_shape(files(spaced, sandbox, "GET", "/tmp/plainfile", list=1), 400, "invalid_path")
    assert_error_shape(files(spaced, sandbox, "GET", "/tmp/plainfile/x"), 400, "invalid_path")


@pytest.mark.timeout(600)
def test_disk_quota(spaced):
    sid = spaced.create(disk_mb=64)["id"]
    try:
        size = 100 * MiB
        chunk = os.urandom(MiB)
        r, sent, err = spaced.early("PUT", f"/v1/sandboxes/{sid}/files", (chunk for _ in range(100)),
                                    length=size, params={"path": "/tmp/too-big"}, timeout=300)
        assert r is not None, f"no response to an upload past disk_mb ({err})"
        assert_error_shape(r, 507, "insufficient_storage")
        # nothing half-written is left
        assert_error_shape(files(spaced, sid, "GET", "/tmp/too-big", stat=1), 404, "not_found")
        # and the sandbox still works, with room again
        assert spaced.sh(sid, "echo ok") == "ok\n"
        put(spaced, sid, "/tmp/small", b"still fine")
        assert spaced.sh(sid, "cat /tmp/small") == "still fine"
        # a write from inside hits the same quota
        x = spaced.exec(sid, shell="head -c 104857600 /dev/zero > /tmp/fill; echo $?; rm -f /tmp/fill")
        assert x.stdout.strip() != b"0", f"100 MiB written inside a 64 MiB sandbox: {x!r}"
        assert spaced.sh(sid, "echo ok") == "ok\n"
    finally:
        spaced.delete(sid)
