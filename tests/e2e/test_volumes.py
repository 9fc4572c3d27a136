# SPDX-License-Identifier: MIT
"""Volumes: a tenant's named persistent subvolumes with a quota, created,
listed, shown and deleted through /v1/volumes and `space volume`, mounted at
create (`volumes` / `--volume NAME:/path[:ro]`), kept after the sandbox is
deleted, one writer or many readers, and the attacks: another tenant's
volume, two writers, a path over the sandbox's own mounts, a symlink out of
the root, a full quota, a delete while in use."""

import json
import uuid

import pytest

from e2e_daemon import TIME_RE, assert_error_shape


def vname(prefix="vol"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_volume(spaced, name=None, size_mb=64, key=None):
    kw = {} if key is None else {"key": key}
    name = name or vname()
    r = spaced.api("POST", "/v1/volumes", json={"name": name, "size_mb": size_mb}, **kw)
    assert r.status == 201, r
    return r.json()


def delete_volume(spaced, name, key=None):
    kw = {} if key is None else {"key": key}
    r = spaced.api("DELETE", f"/v1/volumes/{name}", **kw)
    assert r.status == 204, r


def other_tenant_key(spaced):
    tenant = "t" + uuid.uuid4().hex[:12]
    r = spaced.api("POST", "/v1/keys", json={"name": "volumes", "tenant": tenant})
    assert r.status == 201, r
    return r.json()["key"]


@pytest.fixture
def volume(spaced):
    v = make_volume(spaced)
    yield v
    r = spaced.api("DELETE", f"/v1/volumes/{v['name']}")
    assert r.status in (204, 404), r


def test_crud(spaced):
    name = vname()
    v = make_volume(spaced, name, size_mb=32)
    try:
        assert v["name"] == name and v["size_mb"] == 32 and v["readers"] == 0 and v["writers"] == 0, v
        assert TIME_RE.match(v["created_at"]), v
        r = spaced.api("GET", "/v1/volumes")
        assert r.status == 200 and name in [x["name"] for x in r.json()["volumes"]], r
        r = spaced.api("GET", f"/v1/volumes/{name}")
        assert r.status == 200 and r.json()["id"] == v["id"] and r.json()["used_bytes"] >= 0, r
        r = spaced.api("POST", "/v1/volumes", json={"name": name})
        assert_error_shape(r, 409, "already_exists")
    finally:
        delete_volume(spaced, name)
    assert_error_shape(spaced.api("GET", f"/v1/volumes/{name}"), 404, "not_found")
    assert_error_shape(spaced.api("DELETE", f"/v1/volumes/{name}"), 404, "not_found")


@pytest.mark.parametrize("body,code", [
    ({}, "invalid_argument"),
    ({"name": ""}, "invalid_argument"),
    ({"name": "-x"}, "invalid_argument"),
    ({"name": "a/b"}, "invalid_argument"),
    ({"name": "a" * 65}, "invalid_argument"),
    ({"name": "ok", "size_mb": 0}, "invalid_argument"),
    ({"name": "ok", "size_mb": -1}, "invalid_argument"),
    ({"name": "ok", "size_mb": 1 << 40}, "invalid_argument"),
    ({"name": "ok", "size_mb": "big"}, "invalid_argument"),
    ({"name": "ok", "color": "red"}, "unknown_field"),
])
def test_create_bad_input(spaced, body, code):
    assert_error_shape(spaced.api("POST", "/v1/volumes", json=body), 400, code)


def test_another_tenants_volume_is_404(spaced, volume):
    key = other_tenant_key(spaced)
    name = volume["name"]
    assert_error_shape(spaced.api("GET", f"/v1/volumes/{name}", key=key), 404, "not_found")
    assert_error_shape(spaced.api("DELETE", f"/v1/volumes/{name}", key=key), 404, "not_found")
    r = spaced.api("GET", "/v1/volumes", key=key)
    assert r.status == 200 and name not in [x["name"] for x in r.json()["volumes"]], r
    # nor mounted by it
    r = spaced.api("POST", "/v1/sandboxes", key=key, json={"volumes": [{"name": name, "path": "/data"}]})
    assert_error_shape(r, 404, "not_found")
    # the same name is free for it, and is another volume
    other = make_volume(spaced, name, key=key)
    assert other["id"] != volume["id"]
    delete_volume(spaced, name, key=key)
    assert spaced.api("GET", f"/v1/volumes/{name}").status == 200


def test_mount_write_and_keep(spaced, volume):
    name = volume["name"]
    sb = spaced.create(volumes=[{"name": name, "path": "/data"}])
    try:
        # root inside owns it and writes
        assert spaced.sh(sb["id"], "stat -c '%u:%g' /data") == "0:0\n"
        spaced.sh(sb["id"], "echo kept > /data/a && mkdir -p /data/d && echo x > /data/d/b && chown 1000:1000 /data/d/b")
        assert spaced.sh(sb["id"], "grep -c ' /data ' /proc/mounts") == "1\n"
        r = spaced.api("GET", f"/v1/sandboxes/{sb['id']}/volumes")
        assert r.status == 200 and r.json()["volumes"] == [{"name": name, "path": "/data", "read_only": False}], r
        v = spaced.api("GET", f"/v1/volumes/{name}").json()
        assert v["writers"] == 1 and v["readers"] == 0, v
    finally:
        spaced.delete(sb["id"])
    # kept after the sandbox is deleted; another sandbox (another uid range) sees the same owners
    v = spaced.api("GET", f"/v1/volumes/{name}").json()
    assert v["writers"] == 0 and v["used_bytes"] > 0, v
    sb2 = spaced.create(volumes=[{"name": name, "path": "/mnt/x/data", "read_only": True}])
    try:
        assert spaced.sh(sb2["id"], "cat /mnt/x/data/a; stat -c '%u:%g' /mnt/x/data/d/b") == "kept\n1000:1000\n"
        r = spaced.exec(sb2["id"], shell="echo no > /mnt/x/data/c")
        assert r.code != 0 and b"Read-only" in r.stderr, r
        # root inside cannot make it writable again (no CAP_SYS_ADMIN; mount refused)
        r = spaced.exec(sb2["id"], shell="mount -o remount,rw /mnt/x/data")
        assert r.code != 0, r
        r = spaced.exec(sb2["id"], shell="umount /mnt/x/data || umount -l /mnt/x/data")
        assert r.code != 0, r
        assert spaced.sh(sb2["id"], "grep ' /mnt/x/data ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1") == "ro\n"
        r = spaced.exec(sb2["id"], shell="echo no > /mnt/x/data/c")
        assert r.code != 0, r
    finally:
        spaced.delete(sb2["id"])


def test_one_writer_or_many_readers(spaced, volume):
    name = volume["name"]
    w = spaced.create(volumes=[{"name": name, "path": "/data"}])
    try:
        for ro in (False, True):
            r = spaced.api("POST", "/v1/sandboxes", json={"volumes": [{"name": name, "path": "/data", "read_only": ro}]})
            assert_error_shape(r, 409, "volume_in_use")
        # a refused create leaves no sandbox behind
        listed = spaced.api("GET", "/v1/sandboxes").json()["sandboxes"]
        assert [s["id"] for s in listed if s["state"] != "deleted"] == [w["id"]] or w["id"] in [s["id"] for s in listed]
    finally:
        spaced.delete(w["id"])
    readers = [spaced.create(volumes=[{"name": name, "path": "/data", "read_only": True}]) for _ in range(2)]
    try:
        v = spaced.api("GET", f"/v1/volumes/{name}").json()
        assert v["readers"] == 2 and v["writers"] == 0, v
        r = spaced.api("POST", "/v1/sandboxes", json={"volumes": [{"name": name, "path": "/data"}]})
        assert_error_shape(r, 409, "volume_in_use")
    finally:
        for s in readers:
            spaced.delete(s["id"])


def test_delete_in_use_refused(spaced, volume):
    name = volume["name"]
    sb = spaced.create(volumes=[{"name": name, "path": "/data"}])
    try:
        assert_error_shape(spaced.api("DELETE", f"/v1/volumes/{name}"), 409, "volume_in_use")
        assert spaced.sh(sb["id"], "echo still > /data/s && cat /data/s") == "still\n"
    finally:
        spaced.delete(sb["id"])
    delete_volume(spaced, name)


@pytest.mark.parametrize("path", ["/", "/proc", "/proc/x", "/sys", "/sys/fs", "/dev", "/dev/shm", "/run",
                                  "/etc", "/etc/ssl", "data", "/a/../proc", "/a/./b", "/a//b", "/a/",
                                  "/a\nb", "/" + "a" * 300])
def test_bad_mount_paths(spaced, volume, path):
    r = spaced.api("POST", "/v1/sandboxes", json={"volumes": [{"name": volume["name"], "path": path}]})
    assert_error_shape(r, 400, "invalid_path")


@pytest.mark.parametrize("vols,code", [
    ("x", "invalid_argument"),
    ([1], "invalid_argument"),
    ([{"name": "x"}], "invalid_argument"),
    ([{"name": "x", "path": "/d", "mode": "rw"}], "unknown_field"),
    ([{"name": "x", "path": "/d", "read_only": "yes"}], "invalid_argument"),
])
def test_bad_volume_lists(spaced, vols, code):
    assert_error_shape(spaced.api("POST", "/v1/sandboxes", json={"volumes": vols}), 400, code)


def test_same_volume_twice_and_unknown(spaced, volume):
    name = volume["name"]
    r = spaced.api("POST", "/v1/sandboxes", json={"volumes": [{"name": name, "path": "/a"}, {"name": name, "path": "/b"}]})
    assert_error_shape(r, 400, "invalid_argument")
    r = spaced.api("POST", "/v1/sandboxes", json={"volumes": [{"name": "nosuch-" + uuid.uuid4().hex[:6], "path": "/a"}]})
    assert_error_shape(r, 404, "not_found")


def test_quota_holds(spaced):
    v = make_volume(spaced, size_mb=16)
    try:
        sb = spaced.create(volumes=[{"name": v["name"], "path": "/data"}])
        try:
            r = spaced.exec(sb["id"], shell="dd if=/dev/urandom of=/data/big bs=1M count=64 conv=fsync 2>&1; sync")
            assert r.code != 0 or b"Disk quota exceeded" in r.stdout, r
            assert b"quota" in r.stdout.lower() or b"space" in r.stdout.lower(), r
            used = int(spaced.sh(sb["id"], "du -sm /data | cut -f1"))
            assert used <= 17, used
        finally:
            spaced.delete(sb["id"])
    finally:
        delete_volume(spaced, v["name"])


def test_a_tenants_volumes_count_in_its_disk_quota(spaced):
    """A tenant cannot fill the pool with volumes: their size_mb counts in its disk_mb quota, with its
    live sandboxes' disks, decided in the insert's transaction."""
    tenant = "vq" + uuid.uuid4().hex[:10]
    r = spaced.api("POST", "/v1/keys", json={"name": "vq", "tenant": tenant})
    assert r.status == 201, r
    key = r.json()["key"]
    assert spaced.api("PUT", f"/v1/tenants/{tenant}", json={"disk_mb": 1200}).status == 200
    a = make_volume(spaced, size_mb=700, key=key)
    try:
        r = spaced.api("POST", "/v1/volumes", json={"name": vname(), "size_mb": 600}, key=key)
        assert_error_shape(r, 429, "too_many_requests")
        assert "disk_mb" in r.json()["error"]["message"], r.json()
        r = spaced.api("POST", f"/v1/volumes/{a['name']}/clone", json={"name": vname()}, key=key)
        assert_error_shape(r, 429, "too_many_requests")
        assert len(spaced.api("GET", "/v1/volumes", key=key).json()["volumes"]) == 1
        t = spaced.api("GET", f"/v1/tenants/{tenant}").json()
        assert t["usage"]["disk_mb"] == 700, t
        # a sandbox's disk meets the same quota
        r = spaced.api("POST", "/v1/sandboxes", json={"disk_mb": 600}, key=key)
        assert_error_shape(r, 429, "too_many_requests")
    finally:
        delete_volume(spaced, a["name"], key=key)
    b = make_volume(spaced, size_mb=1200, key=key)  # room again once it is gone
    delete_volume(spaced, b["name"], key=key)


def test_symlink_planted_on_the_path_is_refused(spaced, volume):
    """Root inside moves the volume's parent away and plants a symlink to
    /proc in its place; the next start (resume after suspend) resolves the
    target one component at a time with no symlink followed: it refuses to
    start rather than mount the volume anywhere else."""
    name = volume["name"]
    sb = spaced.create(volumes=[{"name": name, "path": "/x/data"}])
    try:
        spaced.sh(sb["id"], "echo mine > /x/data/f && mv /x /y && ln -s /proc /x && test -L /x")
        r = spaced.api("POST", f"/v1/sandboxes/{sb['id']}/suspend", timeout=120)
        assert r.status == 200, r
        r = spaced.api("POST", f"/v1/sandboxes/{sb['id']}/resume", timeout=120)
        assert_error_shape(r, 409, "conflict")
        assert "volumes" in r.json()["error"]["message"], r
    finally:
        spaced.delete(sb["id"])
    # the volume is intact
    sb = spaced.create(volumes=[{"name": name, "path": "/data", "read_only": True}])
    try:
        assert spaced.sh(sb["id"], "cat /data/f") == "mine\n"
    finally:
        spaced.delete(sb["id"])


def test_cli(spaced):
    name = vname("cli")
    c = spaced.cli("volume", "create", name, "--size", "32")
    assert c.rc == 0 and c.out == name + "\n", c
    try:
        c = spaced.cli("volume", "create", name)
        assert c.rc == 4 and c.err.count("\n") == 1, c  # 409: exit 4
        c = spaced.cli("--json", "volume", "ls")
        assert c.rc == 0 and name in [v["name"] for v in json.loads(c.out)["volumes"]], c
        c = spaced.cli("volume", "ls")
        assert c.rc == 0 and name in c.out and "SIZE_MB" in c.out, c
        c = spaced.cli("--json", "volume", "show", name)
        assert c.rc == 0 and json.loads(c.out)["size_mb"] == 32, c
        c = spaced.cli("create", "--volume", f"{name}:/work")
        assert c.rc == 0, c
        sid = c.out.strip()
        spaced.known_alive.add(sid)
        try:
            assert spaced.sh(sid, "echo hi > /work/f && cat /work/f") == "hi\n"
            c = spaced.cli("create", "--volume", f"{name}:/work:ro")
            assert c.rc == 4 and "another sandbox" in c.err, c
            c = spaced.cli("volume", "rm", name)
            assert c.rc == 4, c
        finally:
            spaced.delete(sid)
        for bad in ("nocolon", ":/x", f"{name}:rel", f"{name}:/x:rx"):
            c = spaced.cli("create", "--volume", bad)
            assert c.rc == 2 and c.err.count("\n") == 1, (bad, c)
        c = spaced.cli("volume", "show", "nosuch-" + uuid.uuid4().hex[:6])
        assert c.rc != 0 and c.err.count("\n") == 1, c
    finally:
        c = spaced.cli("volume", "rm", name)
        assert c.rc == 0, c


def test_restore_and_resume_mount_the_same_volume(spaced, volume):
    name = volume["name"]
    sb = spaced.create(volumes=[{"name": name, "path": "/data"}])
    sid = sb["id"]
    try:
        spaced.sh(sid, "echo one > /data/f && echo root-before > /root-file")
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/checkpoints", json={})
        assert r.status == 201, r
        ck = r.json()["id"]
        spaced.sh(sid, "echo two > /data/f && echo root-after > /root-file")
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/restore", json={"checkpoint": ck}, timeout=120)
        assert r.status == 200, r
        # the root goes back; the volume is a reference: the same one, as it is now
        assert spaced.sh(sid, "cat /root-file /data/f") == "root-before\ntwo\n"
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/suspend", timeout=120)
        assert r.status == 200, r
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/resume", timeout=120)
        assert r.status == 200, r
        assert spaced.sh(sid, "cat /data/f") == "two\n"
        v = spaced.api("GET", f"/v1/volumes/{name}").json()
        assert v["writers"] == 1, v
    finally:
        spaced.delete(sid)


def test_branch_share_ro_snapshot_none(spaced, volume):
    name = volume["name"]
    sb = spaced.create(volumes=[{"name": name, "path": "/data", "read_only": True}])
    made = []
    try:
        # a reader's children share it read-only (the default)
        r = spaced.api("POST", f"/v1/sandboxes/{sb['id']}/branch", json={"count": 2}, timeout=180)
        assert r.status == 201, r
        kids = [k["id"] for k in r.json()["sandboxes"]]
        made += kids
        for k in kids:
            assert spaced.api("GET", f"/v1/sandboxes/{k}/volumes").json()["volumes"] == [
                {"name": name, "path": "/data", "read_only": True}]
            assert spaced.exec(k, shell="echo x > /data/no").code != 0
        assert spaced.api("GET", f"/v1/volumes/{name}").json()["readers"] == 3
        r = spaced.api("POST", f"/v1/sandboxes/{sb['id']}/branch", json={"volumes": "none"}, timeout=180)
        assert r.status == 201, r
        k = r.json()["sandboxes"][0]["id"]
        made.append(k)
        assert spaced.api("GET", f"/v1/sandboxes/{k}/volumes").json()["volumes"] == []
        assert_error_shape(spaced.api("POST", f"/v1/sandboxes/{sb['id']}/branch", json={"volumes": "copy"}), 400,
                           "invalid_argument")
    finally:
        for k in made:
            spaced.delete(k)
        spaced.delete(sb["id"])
    # a writer's children: share_ro is refused (one writer or many readers); snapshot gives each its own
    w = spaced.create(volumes=[{"name": name, "path": "/data"}])
    snaps = []
    try:
        spaced.sh(w["id"], "echo parent > /data/p")
        r = spaced.api("POST", f"/v1/sandboxes/{w['id']}/branch", json={})
        assert_error_shape(r, 409, "volume_in_use")
        r = spaced.api("POST", f"/v1/sandboxes/{w['id']}/branch", json={"count": 2, "volumes": "snapshot"},
                       timeout=180)
        assert r.status == 201, r
        kids = [k["id"] for k in r.json()["sandboxes"]]
        made = kids
        for k in kids:
            vols = spaced.api("GET", f"/v1/sandboxes/{k}/volumes").json()["volumes"]
            assert len(vols) == 1 and vols[0]["path"] == "/data" and not vols[0]["read_only"], vols
            assert vols[0]["name"] == f"{name}-{k}", vols
            snaps.append(vols[0]["name"])
            assert spaced.sh(k, f"cat /data/p && echo {k} > /data/own && ls /data | wc -l") == "parent\n2\n"
        assert spaced.sh(w["id"], "ls /data") == "p\n"  # the children wrote their own copies
    finally:
        for k in made:
            spaced.delete(k)
        spaced.delete(w["id"])
    for s in snaps:
        delete_volume(spaced, s)


def test_clone(spaced, volume):
    name = volume["name"]
    sb = spaced.create(volumes=[{"name": name, "path": "/data"}])
    try:
        spaced.sh(sb["id"], "echo orig > /data/f")
        clone = vname("clone")
        r = spaced.api("POST", f"/v1/volumes/{name}/clone", json={"name": clone})
        assert r.status == 201 and r.json()["size_mb"] == volume["size_mb"], r
    finally:
        spaced.delete(sb["id"])
    try:
        c = spaced.create(volumes=[{"name": clone, "path": "/c"}])
        try:
            assert spaced.sh(c["id"], "cat /c/f && echo changed > /c/f") == "orig\n"
        finally:
            spaced.delete(c["id"])
        o = spaced.create(volumes=[{"name": name, "path": "/o", "read_only": True}])
        try:
            assert spaced.sh(o["id"], "cat /o/f") == "orig\n"
        finally:
            spaced.delete(o["id"])
        assert_error_shape(spaced.api("POST", f"/v1/volumes/{name}/clone", json={"name": clone}), 409,
                           "already_exists")
        key = other_tenant_key(spaced)
        assert_error_shape(spaced.api("POST", f"/v1/volumes/{name}/clone", json={"name": "mine"}, key=key), 404,
                           "not_found")
    finally:
        delete_volume(spaced, clone)


def test_snapshot_is_read_only_and_point_in_time(spaced, volume):
    name = volume["name"]
    sb = spaced.create(volumes=[{"name": name, "path": "/data"}])
    snap, restored = vname("snap"), vname("restored")
    try:
        spaced.sh(sb["id"], "echo before > /data/f")
        r = spaced.api("POST", f"/v1/volumes/{name}/snapshot", json={"name": snap})
        assert r.status == 201, r
        s = r.json()
        assert s["read_only"] is True and s["source"] == name and s["size_mb"] == volume["size_mb"], s
        # taken while the writer runs; what it writes after is not in the snapshot
        spaced.sh(sb["id"], "echo after > /data/f")
    finally:
        spaced.delete(sb["id"])
    try:
        v = spaced.api("GET", f"/v1/volumes/{name}").json()
        assert v["read_only"] is False and v["source"] is None, v
        # mounted read-write: refused, naming the rule; read-only: the old content
        r = spaced.api("POST", "/v1/sandboxes", json={"volumes": [{"name": snap, "path": "/s"}]}, timeout=60)
        assert_error_shape(r, 409, "conflict")
        assert "read-only snapshot" in r.json()["error"]["message"], r.json()
        ro = spaced.create(volumes=[{"name": snap, "path": "/s", "read_only": True}])
        try:
            out = spaced.sh(ro["id"], "cat /s/f; echo x > /s/f 2>/dev/null && echo wrote || echo refused")
            assert out == "before\nrefused\n", out
        finally:
            spaced.delete(ro["id"])
        # its files do not change through the API either, and it may be read
        assert vfile(spaced, "GET", snap, "/f").body == b"before\n"
        for m, kw in (("PUT", {"data": b"x"}), ("DELETE", {})):
            r = vfile(spaced, m, snap, "/f", **kw)
            assert_error_shape(r, 409, "conflict")
            assert "read-only snapshot" in r.json()["error"]["message"], r.json()
        # the source goes; the snapshot stays, and a clone of it restores it, writable
        delete_volume(spaced, name)
        r = spaced.api("POST", f"/v1/volumes/{snap}/clone", json={"name": restored})
        assert r.status == 201 and r.json()["read_only"] is False and r.json()["source"] == snap, r
        c = spaced.create(volumes=[{"name": restored, "path": "/r"}])
        try:
            assert spaced.sh(c["id"], "cat /r/f && echo new > /r/f && cat /r/f") == "before\nnew\n"
        finally:
            spaced.delete(c["id"])
        listed = {v["name"]: v for v in spaced.api("GET", "/v1/volumes").json()["volumes"]}
        assert listed[snap]["read_only"] and not listed[restored]["read_only"], listed
        # another tenant's snapshot of it: 404; a taken name: 409
        key = other_tenant_key(spaced)
        assert_error_shape(spaced.api("POST", f"/v1/volumes/{snap}/snapshot", json={"name": "x"}, key=key), 404,
                           "not_found")
        assert_error_shape(spaced.api("POST", f"/v1/volumes/{restored}/snapshot", json={"name": snap}), 409,
                           "already_exists")
        assert_error_shape(spaced.api("POST", f"/v1/volumes/{restored}/snapshot", json={}), 400)
        assert_error_shape(spaced.api("POST", f"/v1/volumes/{restored}/snapshot", json={"name": "a", "x": 1}), 400)
    finally:
        for n in (snap, restored):
            r = spaced.api("DELETE", f"/v1/volumes/{n}")
            assert r.status in (204, 404), r


def test_cli_clone_and_snapshot(spaced, volume):
    name, clone, snap = volume["name"], vname("cc"), vname("cs")
    try:
        c = spaced.cli("volume", "snapshot", name, snap)
        assert c.rc == 0 and c.out == snap + "\n", c
        c = spaced.cli("volume", "clone", snap, clone)
        assert c.rc == 0 and c.out == clone + "\n", c
        c = spaced.cli("volume", "ls")
        assert c.rc == 0 and "KIND" in c.out and "SOURCE" in c.out, c
        rows = {l.split()[0]: l.split() for l in c.out.splitlines()[1:]}
        assert rows[snap][2] == "snapshot" and rows[snap][3] == name, rows
        assert rows[clone][2] == "clone" and rows[clone][3] == snap, rows
        assert rows[name][2] == "volume" and rows[name][3] == "-", rows
        c = spaced.cli("volume", "snapshot", name)
        assert c.rc == 2 and c.err.count("\n") == 1, c
        c = spaced.cli("volume", "clone", "nosuch-" + uuid.uuid4().hex[:6], "x")
        assert c.rc != 0 and c.err.count("\n") == 1, c
    finally:
        for n in (clone, snap):
            spaced.cli("volume", "rm", n)


def vfile(spaced, method, name, path, key=None, **kw):
    k = {} if key is None else {"key": key}
    return spaced.api(method, f"/v1/volumes/{name}/files", params={"path": path}, **k, **kw)


def test_files_without_a_sandbox(spaced, volume):
    name = volume["name"]
    r = vfile(spaced, "PUT", name, "/dir/sub/a.txt", data=b"hello\x00bytes",
              headers={"Content-Type": "application/octet-stream"})
    assert r.status == 204, r
    r = vfile(spaced, "GET", name, "/dir/sub/a.txt")
    assert r.status == 200 and r.body == b"hello\x00bytes", r
    r = vfile(spaced, "GET", name, "/")
    assert r.status == 200 and r.json()["entries"] == [{"name": "dir", "type": "dir", "size": r.json()["entries"][0]["size"]}], r
    r = vfile(spaced, "GET", name, "/dir/sub", params=None) if False else vfile(spaced, "GET", name, "/dir/sub")
    assert [e["name"] for e in r.json()["entries"]] == ["a.txt"], r
    # a sandbox sees it, owned by its root, and writes back
    sb = spaced.create(volumes=[{"name": name, "path": "/data"}])
    try:
        assert spaced.sh(sb["id"], "stat -c '%u' /data/dir/sub/a.txt; printf 'from-sb' > /data/b") == "0\n"
    finally:
        spaced.delete(sb["id"])
    assert vfile(spaced, "GET", name, "/b").body == b"from-sb"
    assert vfile(spaced, "DELETE", name, "/dir/sub/a.txt").status == 204
    assert_error_shape(vfile(spaced, "GET", name, "/dir/sub/a.txt"), 404, "not_found")
    assert_error_shape(vfile(spaced, "DELETE", name, "/dir"), 409, "conflict")  # not empty
    assert vfile(spaced, "DELETE", name, "/dir/sub").status == 204
    # another tenant: 404 for all of it
    key = other_tenant_key(spaced)
    for m in ("GET", "DELETE"):
        assert_error_shape(vfile(spaced, m, name, "/b", key=key), 404, "not_found")
    assert_error_shape(vfile(spaced, "PUT", name, "/c", key=key, data=b"x"), 404, "not_found")


@pytest.mark.parametrize("path", ["", "b", "/../b", "/a/../../b", "/./b", "//b", "/a//b", "/a/", "/a\x00b"])
def test_files_bad_paths(spaced, volume, path):
    r = vfile(spaced, "GET", volume["name"], path)
    assert_error_shape(r, 400, "invalid_argument" if "\x00" in path else "invalid_path")


def test_files_symlinks_do_not_lead_out(spaced, volume):
    """A sandbox plants symlinks in the volume: to the host's files by an
    absolute name, up past the volume's root, and to /proc's magic links.
    The files API resolves beneath the volume's root: each is refused, and
    a write never follows a link."""
    name = volume["name"]
    sb = spaced.create(volumes=[{"name": name, "path": "/data"}])
    try:
        spaced.sh(sb["id"], "cd /data && echo inside > real && ln -s real rel && ln -s /etc/shadow abs && "
                            "ln -s ../../../../../../etc up && ln -s /proc/self/root magic && mkdir d && "
                            "ln -s ../../.. d/out")
    finally:
        spaced.delete(sb["id"])
    assert vfile(spaced, "GET", name, "/rel").body == b"inside\n"  # stays inside: fine
    for p in ("/abs", "/up/passwd", "/magic/etc/passwd", "/d/out/etc/passwd", "/up"):
        r = vfile(spaced, "GET", name, p)
        assert r.status in (400, 404), (p, r)
        assert b"root:" not in r.body, (p, r)
    for p in ("/abs", "/up/x", "/rel", "/d/out/tmp/x"):
        r = vfile(spaced, "PUT", name, p, data=b"pwned")
        assert r.status in (400, 404), (p, r)
    assert vfile(spaced, "GET", name, "/real").body == b"inside\n"  # not written through /rel
    # removing a link removes the link, not its target
    assert vfile(spaced, "DELETE", name, "/abs").status == 204
    assert vfile(spaced, "DELETE", name, "/rel").status == 204
    assert vfile(spaced, "GET", name, "/real").body == b"inside\n"


def test_files_quota_and_size(spaced):
    v = make_volume(spaced, size_mb=16)
    try:
        chunk = b"z" * (500 * 1024)
        codes = set()
        for i in range(48):
            r = vfile(spaced, "PUT", v["name"], f"/f{i}", data=chunk)
            codes.add(r.status)
            if r.status != 204:
                assert_error_shape(r, 507, "insufficient_storage")
                break
        assert 507 in codes, codes
        r = vfile(spaced, "PUT", v["name"], "/big", data=b"x" * (600 * 1024))
        assert_error_shape(r, 413, "payload_too_large")
    finally:
        delete_volume(spaced, v["name"])


def test_files_fifo_does_not_stall_the_worker(spaced, volume):
    """A FIFO a sandbox leaves in the volume: reading or writing it through
    the files API is refused at once (the worker never blocks on it)."""
    name = volume["name"]
    sb = spaced.create(volumes=[{"name": name, "path": "/data"}])
    try:
        spaced.sh(sb["id"], "mkfifo /data/pipe")
    finally:
        spaced.delete(sb["id"])
    assert_error_shape(vfile(spaced, "GET", name, "/pipe"), 400, "invalid_path")
    assert_error_shape(vfile(spaced, "PUT", name, "/pipe", data=b"x"), 400, "invalid_path")
    assert vfile(spaced, "GET", name, "/").status == 200  # the worker answers


def test_racing_writers_one_wins(spaced, volume):
    """Writers created at once: the store decides the rule in the mount's
    transaction, so exactly one gets the volume and the others a 409."""
    import threading
    name = volume["name"]
    results = []

    def one():
        r = spaced.api("POST", "/v1/sandboxes", json={"volumes": [{"name": name, "path": "/data"}]}, timeout=180)
        results.append(r)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [r for r in results if r.status == 201]
    try:
        assert len(ok) == 1, results
        for r in results:
            if r.status != 201:
                assert_error_shape(r, 409, "volume_in_use")
    finally:
        for r in ok:
            spaced.delete(r.json()["id"])


def test_e2b_volumecontent_needs_the_volumes_token(spaced, volume):
    """/volumecontent takes the volume's token (E2B's POST /volumes answer),
    not an API key; without it, with another volume's, or forged: 401."""
    import e2e_http
    vid = volume["id"]
    path = f"/volumecontent/{vid}/file"
    for headers in ({}, {"X-API-KEY": spaced.admin_key}, {"Authorization": "Bearer " + spaced.admin_key},
                    {"Authorization": "Bearer tn_x." + "0" * 64}, {"Authorization": "Basic Zm9vOg=="}):
        r = e2e_http.request(spaced.url, "GET", path, params={"path": "/x"}, headers=headers, key=None)
        assert r.status == 401, (headers, r)
    r = e2e_http.request(spaced.url, "GET", f"/volumes/{vid}", headers={"X-API-KEY": spaced.admin_key}, key=None)
    assert r.status == 200 and r.json()["volumeID"] == vid, r
    token = r.json()["token"]
    assert "." in token and spaced.admin_key not in token, r
    r = e2e_http.request(spaced.url, "PUT", path, params={"path": "/x"}, data=b"via-e2b",
                         headers={"Authorization": "Bearer " + token}, key=None)
    assert r.status == 200 and r.json()["size"] == 7, r
    assert vfile(spaced, "GET", volume["name"], "/x").body == b"via-e2b"
    r = e2e_http.request(spaced.url, "GET", f"/volumecontent/{vid}/file", params={"path": "/../../etc/passwd"},
                         headers={"Authorization": "Bearer " + token}, key=None)
    assert r.status == 400, r
