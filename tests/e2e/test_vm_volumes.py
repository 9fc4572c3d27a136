# SPDX-License-Identifier: MIT
"""Volumes on the vm runtime: each one served to the guest over virtiofs by a
virtiofsd of its own (in a user namespace mapped like an ns sandbox of the
slot, on the volume's directory idmapped into it, confined to it by its own
sandbox), mounted by the guest's init at its path. One VM boot (TCG: slow)
for all of it, with a read-write and a read-only volume; the attacks next to
the defence: symlinks planted by an ns sandbox towards the host's root,
`..`, a setuid-root file, a read-only volume remounted read-write by the
guest's root, and no virtiofsd or socket left after the delete."""

import os
import stat
import uuid

import pytest

from e2e_daemon import assert_error_shape
from test_vm import QEMU, kernel_dir

pytestmark = pytest.mark.vm


@pytest.fixture(scope="module")
def vmd(e2e_session, request):
    if not os.access(QEMU, os.X_OK):
        pytest.skip(f"QEMU is not installed ({QEMU})")
    import e2e_residue as residue
    d = e2e_session.new_daemon(extra_args=[f"--vm-kernel-dir={kernel_dir()}"])
    d.start()
    yield d
    residue.finish_daemon(d, request)


def virtiofsds(d, sid):
    return [p for p in d.sandbox_pids(sid) if "virtiofsd" in open(f"/proc/{p}/cmdline", "rb").read().decode()]


def _alive(pid):
    """Running (a zombie waits for its parent, the worker or init, to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_vm_volumes_over_virtiofs(vmd):
    rw, ro = f"vmrw-{uuid.uuid4().hex[:8]}", f"vmro-{uuid.uuid4().hex[:8]}"
    for n in (rw, ro):
        r = vmd.api("POST", "/v1/volumes", json={"name": n, "size_mb": 64})
        assert r.status == 201, r
    marker = f"/tmp/space-vmvol-host-{uuid.uuid4().hex}"
    with open(marker, "w") as f:
        f.write("host secret\n")
    try:
        # an ns sandbox plants symlinks towards the host's root, and writes the read-only one
        ns = vmd.create(volumes=[{"name": rw, "path": "/data"}])
        try:
            vmd.sh(ns["id"], f"ln -s / /data/root && ln -s ../../../../../../.. /data/up && ln -s {marker} /data/m")
        finally:
            vmd.delete(ns["id"])
        ns = vmd.create(volumes=[{"name": ro, "path": "/ro"}])
        try:
            vmd.sh(ns["id"], "echo from-ns > /ro/f && chown 1000:1000 /ro/f")
        finally:
            vmd.delete(ns["id"])

        sb = vmd.create(runtime="vm", memory_mb=256,
                        volumes=[{"name": rw, "path": "/data"}, {"name": ro, "path": "/mnt/ro", "read_only": True}])
        sid = sb["id"]
        try:
            fsd = virtiofsds(vmd, sid)
            assert len(fsd) >= 2, fsd  # one (with its sandboxed child) per volume, in the sandbox's cgroup
            # never host root: root of a user namespace mapped to the slot's range
            for p in fsd:
                uids = [int(x) for x in open(f"/proc/{p}/status").read().split("Uid:")[1].split()[:4]]
                assert 0 not in uids, (p, uids)
                with open(f"/proc/{p}/uid_map") as f:
                    m = f.read().split()
                assert m[0] == "0" and m[1] != "0" and m[2] == "65536", m
            mounts = vmd.sh(sid, "grep virtiofs /proc/mounts")
            assert " /data virtiofs " in mounts and " /mnt/ro virtiofs " in mounts, mounts
            ro_opts = [ln.split()[3] for ln in mounts.splitlines() if ln.split()[1] == "/mnt/ro"][0]
            assert ro_opts.startswith("ro,") and "nosuid" in ro_opts, mounts
            # root in the VM writes; owners as in an ns sandbox
            vmd.sh(sid, "echo from-vm > /data/a && mkdir /data/d && echo x > /data/d/b && chown 1000:1000 /data/d/b")
            assert vmd.sh(sid, "cat /mnt/ro/f; stat -c %u:%g /mnt/ro/f") == "from-ns\n1000:1000\n"
            # the daemons that serve the guest see nothing but their volume as / (pivot_root into it)
            roots = []
            for p in fsd:
                try:
                    roots.append(sorted(os.listdir(f"/proc/{p}/root")))
                except OSError:
                    pass
            assert ["a", "d", "m", "root", "up"] in roots and ["f"] in roots, roots
            # the symlinks resolve in the guest (its own root), never on the host
            r = vmd.exec(sid, shell="cat /data/m")
            assert r.code != 0 and b"host secret" not in r.stdout, r
            r = vmd.exec(sid, shell=f"cat /data/root{marker} /data/up{marker}")
            assert b"host secret" not in r.stdout, r
            assert vmd.sh(sid, "readlink /data/root") == "/\n"
            r = vmd.exec(sid, shell=f"ls /data/../data/.. >/dev/null; cat /data/../../..{marker}")
            assert b"host secret" not in r.stdout, r
            # ids outside the slot's 65536 do not exist for its virtiofsd: no file gets one
            r = vmd.exec(sid, shell="touch /data/big && chown 70000:70000 /data/big")
            assert r.code != 0, r
            r = vmd.exec(sid, shell="setpriv --reuid 70000 --regid 70000 --clear-groups touch /data/big70000")
            assert r.code != 0 or vmd.sh(sid, "stat -c %u /data/big70000") != "70000\n", r
            # a setuid-root file: the mode is kept on the volume, but nothing mounts it with suid
            vmd.sh(sid, "cp /bin/true /data/su && chmod 4755 /data/su")
            # read-only: refused in the guest, and still after its root remounts it read-write
            r = vmd.exec(sid, shell="echo no > /mnt/ro/x")
            assert r.code != 0 and b"Read-only" in r.stderr, r
            vmd.exec(sid, shell="mount -o remount,rw /mnt/ro")
            r = vmd.exec(sid, shell="echo no > /mnt/ro/x")
            assert r.code != 0, r
            r = vmd.exec(sid, shell="rm -f /mnt/ro/f")
            assert r.code != 0, r
            # a vm with volumes cannot be saved (QEMU keeps no virtiofs state): a clear refusal
            assert_error_shape(vmd.api("POST", f"/v1/sandboxes/{sid}/checkpoints", json={"with_memory": True}),
                               400, "unsupported")
            r = vmd.api("POST", f"/v1/sandboxes/{sid}/branch", json={"count": 1, "with_memory": True, "volumes": "none"})
            assert_error_shape(r, 400, "unsupported")
            assert vmd.show(sid).json()["state"] == "running"
            # suspend: its processes end as on the ns runtime; resume boots its disk, volumes mounted again
            vmd.sh(sid, "echo on-disk > /root/mark")
            r = vmd.api("POST", f"/v1/sandboxes/{sid}/suspend")
            assert r.status == 200 and r.json()["processes_preserved"] is False, r
            assert not virtiofsds(vmd, sid)
            r = vmd.api("POST", f"/v1/sandboxes/{sid}/resume")
            assert r.status == 200, r
            assert vmd.sh(sid, "cat /data/a /root/mark; grep -c virtiofs /proc/mounts") == "from-vm\non-disk\n2\n"
            fsd = virtiofsds(vmd, sid)
            # a branch (disk) whose child gets a writable snapshot of each volume: it boots with them
            r = vmd.api("POST", f"/v1/sandboxes/{sid}/branch", json={"volumes": "snapshot"}, timeout=180)
            assert r.status == 201, r
            kid = r.json()["sandboxes"][0]["id"]
            try:
                assert vmd.sh(kid, "cat /data/a; echo kid > /data/k; grep -c virtiofs /proc/mounts") == "from-vm\n2\n"
                kid_vols = [v["name"] for v in vmd.api("GET", f"/v1/sandboxes/{kid}/volumes").json()["volumes"]]
            finally:
                vmd.delete(kid)
            for v in kid_vols:
                vmd.api("DELETE", f"/v1/volumes/{v}")
            r = vmd.exec(sid, shell="cat /data/k")
            assert r.code != 0, r
        finally:
            vmd.delete(sid)
        left = [p for p in fsd if _alive(p)]
        assert not left, [(p, open(f"/proc/{p}/status").read()[:400]) for p in left]
        rundir = os.path.join(vmd.state_dir, "run", "sandboxes", sid)
        left = os.listdir(rundir) if os.path.isdir(rundir) else []
        assert not [x for x in left if x.endswith(".sock")], left

        # on the host: stored as an ns sandbox stores it (0 = root inside), setuid kept only on an
        # idmapped, nosuid tree
        vid = vmd.api("GET", f"/v1/volumes/{rw}").json()["id"]
        top = vmd.host_view(vmd.pool_path("volumes", vid))
        st = os.lstat(os.path.join(top, "a"))
        assert (st.st_uid, st.st_gid) == (0, 0), st
        assert all(os.lstat(os.path.join(dp, f)).st_uid < 65536 for dp, _, fs in os.walk(top) for f in fs)
        st = os.lstat(os.path.join(top, "d", "b"))
        assert (st.st_uid, st.st_gid) == (1000, 1000), st
        # the setuid-root file keeps its mode on disk (as one made in an ns sandbox does), where no
        # one but host root reaches it and every mount of a volume is nosuid
        st = os.lstat(os.path.join(top, "su"))
        assert st.st_mode & stat.S_ISUID and st.st_uid == 0, st
        assert os.stat(vmd.host_view(vmd.pool_path("volumes"))).st_mode & 0o077 == 0
        with open(os.path.join(top, "a")) as f:
            assert f.read() == "from-vm\n"
        ro_id = vmd.api("GET", f"/v1/volumes/{ro}").json()["id"]
        assert not os.path.exists(os.path.join(vmd.host_view(vmd.pool_path("volumes", ro_id)), "x"))
        # an ns sandbox reads what the VM wrote, with the same owners
        ns = vmd.create(volumes=[{"name": rw, "path": "/data", "read_only": True}])
        try:
            assert vmd.sh(ns["id"], "cat /data/a; stat -c %u:%g /data/a /data/d/b") == "from-vm\n0:0\n1000:1000\n"
        finally:
            vmd.delete(ns["id"])
    finally:
        os.unlink(marker)
        for n in (rw, ro):
            vmd.api("DELETE", f"/v1/volumes/{n}")


def test_vm_volume_after_a_worker_crash(vmd):
    """kill -9 of spaced and its worker: the VM and its virtiofsd run on (adopted), the volume
    still serves, and the delete afterwards ends the virtiofsd (in the sandbox's cgroup)."""
    name = f"vmcr-{uuid.uuid4().hex[:8]}"
    assert vmd.api("POST", "/v1/volumes", json={"name": name, "size_mb": 32}).status == 201
    try:
        sid = vmd.create(runtime="vm", memory_mb=192, volumes=[{"name": name, "path": "/v"}])["id"]
        try:
            vmd.sh(sid, "echo before > /v/f")
            fsd = virtiofsds(vmd, sid)
            assert fsd
            vmd.kill9()
            vmd.start()
            assert vmd.show(sid).json()["state"] == "running"
            assert vmd.sh(sid, "cat /v/f; echo after >> /v/f; cat /v/f") == "before\nbefore\nafter\n"
        finally:
            vmd.delete(sid)
        assert not [p for p in fsd if _alive(p)], fsd
    finally:
        vmd.api("DELETE", f"/v1/volumes/{name}")
