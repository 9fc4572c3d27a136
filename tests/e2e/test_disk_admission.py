# SPDX-License-Identifier: MIT
"""Disk admission: the pool never promises more disk than it holds.

A daemon of this module alone runs on a small pool (1024 MiB) at the default
disk_overcommit 1.0, so filling it is quick. Every create, branch, restore
and checkpoint is admitted against the pool's size (the sum of the disk
quotas it holds) and against its free space (what its sandboxes may still
write), less a reserve for the daemon's own writes; what does not fit is
507 insufficient_storage naming the pool, never a 500 from whichever step
met ENOSPC first. A sandbox writing up to its quota cannot make a
neighbour's write fail.
"""

import errno
import io
import os
import tarfile

import pytest

from e2e_daemon import assert_error_shape
import e2e_host as host
import e2e_residue as residue

MiB = 1024 * 1024
POOL_MB = 1024
RESERVE_MB = POOL_MB * 5 // 100        # the automatic reserve: 5 % of the pool
SMALL_MB = 32                          # the module's default disk_mb
MODULE = {}                            # "d": the module's daemon (expect_507 cleans up after it)


@pytest.fixture(scope="module")
def d(e2e_session, request):
    dd = e2e_session.new_daemon(extra_args=["--pool-size-mb", str(POOL_MB), "--disk-overcommit", "1.0",
                                            f"--default-disk-mb={SMALL_MB}"])
    dd.start()
    MODULE["d"] = dd
    yield dd
    residue.finish_daemon(dd, request)


def pool_dir(d):
    return d.host_view(d.pool_path())


def settle(d):
    """Waits until the subvolumes of deleted sandboxes are dropped (the cleaner), so that the
    free space read next does not grow under the test."""
    host.run(["btrfs", "filesystem", "sync", pool_dir(d)], timeout=120, check=True)   # wakes the cleaner
    host.run(["btrfs", "subvolume", "sync", pool_dir(d)], timeout=120, check=True)
    host.run(["btrfs", "filesystem", "sync", pool_dir(d)], timeout=120, check=True)   # their space is free


def pool_free_mb(d):
    st = os.statvfs(pool_dir(d))
    return st.f_bavail * st.f_frsize // MiB


def promised_mb(d):
    return sum(sb["disk_mb"] for sb in d.list_all().values() if sb["state"] != "deleted")


def room_mb(d):
    """What a new sandbox may be given now: free space past the reserve, less what the
    live sandboxes may still write (they wrote ~nothing: their whole quotas)."""
    settle(d)
    return pool_free_mb(d) - RESERVE_MB - promised_mb(d)


def create_raw(d, **body):
    return d.api("POST", "/v1/sandboxes", json=body, timeout=180)


def expect_507(r, *words):
    if r.status in (200, 201) and r.path == "/v1/sandboxes" and r.method == "POST":
        # admitted where it should not have been: gone again, so the next tests see the pool as it was
        cleanup(MODULE["d"], [r.json()["id"]])
    e = assert_error_shape(r, 507, "insufficient_storage")
    assert "storage pool" in e["message"], e
    for w in words:
        assert w in e["message"], f"{w!r} not in {e['message']!r}"
    return e


def cleanup(d, ids):
    for sid in ids:
        r = d.api("DELETE", f"/v1/sandboxes/{sid}", timeout=180)
        assert r.status in (200, 404), r


def test_oversized_disk_mb_is_507_naming_the_pool(d):
    before = d.subvolumes()
    r = create_raw(d, disk_mb=262144)
    e = expect_507(r, d.pool_path(), f"size {POOL_MB} MiB", "262144 MiB", "disk_overcommit 1.0",
                   f"reserve {RESERVE_MB} MiB")
    assert "reserved" in e["message"], e
    assert d.subvolumes() == before, "a refused create left a root behind"
    # what fits is fine, and /v1/info counts it
    sb = d.create(disk_mb=SMALL_MB)
    adm = d.api("GET", "/v1/info").json()["storage"]["admission"]
    assert adm["disk_overcommit"] == "1.0" and adm["reserve_bytes"] == POOL_MB * MiB // 100 * 5, adm
    assert adm["admits_bytes"] == POOL_MB * MiB - adm["reserve_bytes"], adm
    assert adm["promised_bytes"] == SMALL_MB * MiB and adm["sandboxes"] == 1, adm
    assert 0 < adm["outstanding_bytes"] <= SMALL_MB * MiB, adm
    cleanup(d, [sb["id"]])


def test_creates_past_the_pool_are_refused_and_earlier_ones_kept(d):
    each = room_mb(d) * 2 // 5           # two fit, a third does not
    made = []
    try:
        for _ in range(2):
            made.append(d.create(disk_mb=each)["id"])
        r = create_raw(d, disk_mb=each)
        expect_507(r, d.pool_path(), f"{each} MiB")
        # the earlier ones are untouched and work
        for sid in made:
            assert d.show(sid).json()["state"] == "running"
            assert d.sh(sid, "echo ok") == "ok\n"
        # one gone: one more fits again
        cleanup(d, [made.pop()])
        made.append(d.create(disk_mb=each)["id"])
    finally:
        cleanup(d, made)


def test_branch_past_the_pool_is_507_all_or_nothing(d):
    made = []
    try:
        each = room_mb(d) // 3           # the parent and one child fit, not the parent and three
        src = d.create(disk_mb=each)["id"]
        made.append(src)
        before = d.subvolumes()
        r = d.api("POST", f"/v1/sandboxes/{src}/branch", json={"count": 3}, timeout=180)
        expect_507(r, d.pool_path(), "branch of 3 sandboxes", f"{3 * each} MiB")
        assert d.subvolumes() == before, "a refused branch left roots behind"
        r = d.api("POST", f"/v1/sandboxes/{src}/branch", json={"count": 1}, timeout=180)
        assert r.status == 201, r
        made += [c["id"] for c in r.json()["sandboxes"]]
    finally:
        cleanup(d, made)


def fill_pool(path, leave_mb):
    """Takes the pool's free space down to about leave_mb with a file the daemon knows
    nothing of (as checkpoints, templates or anything else outside admission would)."""
    pool = os.path.dirname(os.path.dirname(path))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    off, step = 0, 64 * MiB
    try:
        while step >= MiB:
            st = os.statvfs(pool)
            free = st.f_bavail * st.f_frsize
            if free <= leave_mb * MiB:
                break
            n = min(step, free - leave_mb * MiB)
            try:
                os.posix_fallocate(fd, off, n)
                off += n
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                step //= 2
        os.fsync(fd)
    finally:
        os.close(fd)
    return off


def tar_bytes():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("./hello")
        data = b"hello\n" * 100000
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_pool_filled_outside_admission_is_507_not_500(d):
    """Filled by other means (here a file in the pool's tmp/; in life checkpoints, templates,
    btrfs metadata, subvolumes the cleaner has not dropped yet), the pool refuses every new
    promise with 507, and takes creates again once the space is back."""
    made = []
    filler = os.path.join(pool_dir(d), "tmp", f"e2e-filler-{os.getpid()}")
    try:
        sid = d.create(disk_mb=SMALL_MB)["id"]
        made.append(sid)
        d.sh(sid, "echo before > /f")
        r = d.api("POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "before"})
        assert r.status == 201, r
        ck = r.json()["id"]

        fill_pool(filler, 0)
        assert pool_free_mb(d) < RESERVE_MB, pool_free_mb(d)

        expect_507(create_raw(d, disk_mb=SMALL_MB), d.pool_path(), "too full for the create")
        expect_507(d.api("POST", f"/v1/sandboxes/{sid}/branch", json={"count": 1}, timeout=180),
                   "too full for the branch")
        expect_507(d.api("POST", f"/v1/sandboxes/{sid}/restore", json={"checkpoint": ck}, timeout=180),
                   "too full for the restore")
        expect_507(d.api("POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "full"}),
                   "too full for the checkpoint")
        r = d.api("POST", "/v1/templates", params={"name": f"full{os.getpid()}"}, data=tar_bytes(),
                  headers={"Content-Type": "application/x-tar"}, timeout=180)
        expect_507(r)
        # the sandbox that was there runs on (what it writes now is its own problem)
        assert d.sh(sid, "cat /f") == "before\n"

        os.unlink(filler)
        # the space comes back (at the next commit, which a refused admission forces)
        assert host.wait_until(lambda: create_raw(d, disk_mb=SMALL_MB).status == 201 or None, 60), \
            d.log_tail(20)
        made += [i for i, sb in d.list_all().items() if sb["state"] == "running" and i not in made]
        r = d.api("POST", f"/v1/sandboxes/{sid}/restore", json={"checkpoint": ck}, timeout=180)
        assert r.status == 200, r
    finally:
        if os.path.exists(filler):
            os.unlink(filler)
        cleanup(d, made)


def test_neighbour_writes_survive_a_sandbox_filling_its_quota(d):
    """Two sandboxes whose quotas together take the pool (nearly all of it): one writes
    until its quota stops it, the other can still write all of its own."""
    made = []
    try:
        room = room_mb(d)
        # a hog asking for more than the pool holds is refused up front
        expect_507(create_raw(d, disk_mb=POOL_MB * 2), f"{POOL_MB * 2} MiB")
        hog_mb, mine_mb = room * 6 // 10, room * 3 // 10
        hog = d.create(disk_mb=hog_mb)["id"]
        mine = d.create(disk_mb=mine_mb)["id"]
        made += [hog, mine]
        # no third one of the hog's size fits beside them
        expect_507(create_raw(d, disk_mb=hog_mb // 2))

        r = d.exec(hog, shell=f"dd if=/dev/zero of=/fill bs=1M count={hog_mb + 64} 2>&1; sync; "
                              "ls -l /fill", timeout=600)
        assert r.response is None and r.code == 0, r
        assert "Disk quota exceeded" in r.out or "No space left" in r.out, r.out
        size = int(r.out.split()[-5])
        assert size >= (hog_mb - 8) * MiB, f"the hog wrote only {size >> 20} of its {hog_mb} MiB: {r.out}"

        n = mine_mb - 8
        r = d.exec(mine, shell=f"dd if=/dev/zero of=/mine bs=1M count={n} 2>&1 && sync && ls -l /mine",
                   timeout=600)
        assert r.response is None and r.code == 0, f"the neighbour could not write its {n} MiB: {r!r}"
        assert int(r.out.split()[-5]) == n * MiB, r.out
        # the pool is full for real now: a create beside them is a 507 naming it, not a 500
        expect_507(create_raw(d, disk_mb=room // 5), d.pool_path())

        # the hog goes; creates work again (once the cleaner has dropped its root)
        cleanup(d, [hog])
        made.remove(hog)
        assert host.wait_until(lambda: create_raw(d, disk_mb=hog_mb // 2).status == 201 or None, 60), \
            d.log_tail(20)
        made += [i for i, sb in d.list_all().items() if sb["state"] == "running" and i not in made]
    finally:
        cleanup(d, made)


def test_upload_past_the_sandboxs_own_quota_is_507(d):
    sid = d.create(disk_mb=SMALL_MB)["id"]
    try:
        n = SMALL_MB + 16
        chunk = os.urandom(MiB)
        r, _, err = d.early("PUT", f"/v1/sandboxes/{sid}/files", (chunk for _ in range(n)), length=n * MiB,
                            params={"path": "/big"}, timeout=300)
        assert r is not None, f"no response to an upload past disk_mb ({err})"
        e = assert_error_shape(r, 507, "insufficient_storage")
        assert "quota" in e["message"] or "space" in e["message"], e
        # nothing half-written, and the sandbox goes on
        r = d.api("GET", f"/v1/sandboxes/{sid}/files", params={"path": "/big", "stat": "1"})
        assert r.status == 404, r
        assert d.sh(sid, "echo ok") == "ok\n"
    finally:
        cleanup(d, [sid])


def test_resize_is_admitted_like_a_create(d):
    sid = d.create(disk_mb=SMALL_MB)["id"]
    try:
        r = d.api("PATCH", f"/v1/sandboxes/{sid}", json={"disk_mb": SMALL_MB * 2})
        assert r.status == 200 and r.json()["disk_mb"] == SMALL_MB * 2, r
        # in effect at once: more than the old quota fits now (in two files: one file larger than
        # the old quota needs spaced to raise the sandbox's RLIMIT_FSIZE, which a host without
        # CAP_SYS_RESOURCE does not let it do for processes already running)
        n = SMALL_MB * 3 // 4
        d.sh(sid, f"dd if=/dev/zero of=/grown1 bs=1M count={n} 2>/dev/null && "
                  f"dd if=/dev/zero of=/grown2 bs=1M count={n} 2>/dev/null && sync")
        assert d.sh(sid, "cat /grown1 /grown2 | wc -c").strip() == str(2 * n * MiB)
        ev = d.api("GET", "/v1/events", params={"sandbox": sid, "type": "sandbox.updated"}).json()["events"]
        assert ev and ev[-1]["data"]["disk_mb"] == SMALL_MB * 2, ev

        # past what the pool holds: 507 naming it, and nothing changes
        big = room_mb(d) + SMALL_MB * 2 + 64
        e = expect_507(d.api("PATCH", f"/v1/sandboxes/{sid}", json={"disk_mb": big}), d.pool_path(),
                       "for the resize")
        assert f"{big} MiB" in e["message"] or "needs" in e["message"], e
        assert d.show(sid).json()["disk_mb"] == SMALL_MB * 2

        # smaller always fits; below what it holds, it writes nothing more
        r = d.api("PATCH", f"/v1/sandboxes/{sid}", json={"disk_mb": 16})
        assert r.status == 200 and r.json()["disk_mb"] == 16, r
        r = d.exec(sid, shell="dd if=/dev/zero of=/more bs=1M count=8 2>&1; rc=$?; sync; exit $rc")
        assert r.code != 0 and ("quota" in r.out or "space" in r.out), r
        assert_error_shape(d.api("PATCH", f"/v1/sandboxes/{sid}", json={"disk_mb": 8}), 400, "invalid_argument")
        # a suspended sandbox's disk_mb does not change
        assert d.api("POST", f"/v1/sandboxes/{sid}/suspend", timeout=180).status == 200
        assert_error_shape(d.api("PATCH", f"/v1/sandboxes/{sid}", json={"disk_mb": 64}), 409, "conflict")
    finally:
        cleanup(d, [sid])


def test_checkpoint_that_would_regrant_a_quota_the_pool_lacks_is_507(d):
    """A checkpoint shares the sandbox's data: afterwards the sandbox may write its whole quota
    again, beside what the checkpoint keeps. On a pool promised to the brim that is room it
    does not have: refused, and the sandbox goes on as it was."""
    sid = d.create(disk_mb=room_mb(d) * 9 // 10)["id"]
    try:
        quota = d.show(sid).json()["disk_mb"]
        n = quota // 2
        d.sh(sid, f"dd if=/dev/zero of=/half bs=1M count={n} 2>/dev/null && sync")
        r = d.api("POST", f"/v1/sandboxes/{sid}/checkpoints", json={"name": "regrant"})
        expect_507(r, d.pool_path(), "too full for the checkpoint", f"needs {quota} MiB")
        assert d.api("GET", f"/v1/sandboxes/{sid}/checkpoints").json()["checkpoints"] == []
        # once it gives back what it wrote, the checkpoint fits
        d.sh(sid, "rm /half && sync")
        assert host.wait_until(lambda: d.api("POST", f"/v1/sandboxes/{sid}/checkpoints",
                                             json={"name": "regrant"}).status == 201 or None, 60), d.log_tail(20)
    finally:
        cleanup(d, [sid])


def test_volume_past_the_pool_is_507_and_its_quota_is_a_promise(d):
    before = d.subvolumes()
    r = d.api("POST", "/v1/volumes", json={"name": "too-big", "size_mb": 262144})
    expect_507(r, d.pool_path(), "262144 MiB")
    assert d.subvolumes() == before, "a refused volume left a subvolume behind"
    assert_error_shape(d.api("GET", "/v1/volumes/too-big"), 404, "not_found")  # nor a row
    def promised():
        return d.api("GET", "/v1/info").json()["storage"]["admission"]["promised_bytes"]
    p0 = promised()
    r = d.api("POST", "/v1/volumes", json={"name": "fits", "size_mb": 64})
    assert r.status == 201, r
    try:
        assert promised() == p0 + 64 * MiB  # sandboxes after it are admitted against it too
    finally:
        assert d.api("DELETE", "/v1/volumes/fits").status == 204


def test_churn_past_the_pools_size_is_never_refused(d):
    """Sandboxes that each write most of their quota and are deleted, one after another,
    write twice the pool in all: deleted roots give their space back as the churn goes
    (the teardowns commit them, admission awaits the cleaner), so no create is refused."""
    settle(d)
    disk_mb, write_mb = POOL_MB // 2, 64   # a new one needs half the pool free
    cycles = 2 * POOL_MB // write_mb
    for i in range(cycles):
        r = create_raw(d, disk_mb=disk_mb)
        assert r.status == 201, f"cycle {i} of {cycles}: {r!r}"
        sid = r.json()["id"]
        out = d.sh(sid, f"dd if=/dev/urandom of=/root/fill bs=1M count={write_mb} conv=fsync 2>&1 >/dev/null; echo rc=$?")
        assert "rc=0" in out, out
        cleanup(d, [sid])
