# SPDX-License-Identifier: MIT
"""statfs()/fstatfs() inside a sandbox (what `df` shows) report the sandbox's
own disk quota and usage, never the pool's size and free space (other
tenants' usage): the worker answers both calls through the seccomp filter's
user-notification listener (src/runtime/ns/statfs-notify.h). Attacks: paths
and symlinks that lead out of the sandbox, fds, malformed calls (the errno
must be the kernel's own), a thread that swaps the path during the call, a
flood, and a restart of spaced."""

import os
import re
import subprocess
import threading

import e2e_host as host
import pytest

from attack_util import assert_spaced_healthy, run

BTRFS_MAGIC = "9123683e"
PROC_MAGIC = "9fa0"
MIB = 1 << 20
LINE = re.compile(r"^(\S*) (?:errno=(\d+)|type=(\w+) bsize=(\d+) blocks=(\d+) bfree=(\d+) bavail=(\d+) "
                  r"files=(\d+) ffree=(\d+) fsid=(\w+):(\w+))$")
PER_TICK_MAX = 1000  # WORKER_STATFS_PER_TICK_MAX


def parse(out):
    """{name: {"errno": N} or {"type", "bsize", "blocks", ...}} of a probe's lines."""
    res = {}
    for line in out.splitlines():
        m = LINE.match(line)
        assert m, f"unexpected probe output {line!r}"
        name = m.group(1)
        if m.group(2) is not None:
            res[name] = {"errno": int(m.group(2))}
        else:
            res[name] = {"type": m.group(3), "bsize": int(m.group(4)), "blocks": int(m.group(5)),
                         "bfree": int(m.group(6)), "bavail": int(m.group(7)), "files": int(m.group(8)),
                         "ffree": int(m.group(9)), "fsid": (m.group(10), m.group(11))}
    return res


def statfs(spaced, sid, *paths, mode="path"):
    r = run(spaced, sid, cmd=["statfs", mode, *paths])
    assert r.code == 0, r
    return parse(r.out)


def pool_figures(spaced):
    st = os.statvfs(spaced.pool_path())
    return st.f_blocks, st.f_bfree


def assert_own(res, disk_mb, pool):
    """Every btrfs answer is the quota's; nothing is the pool's."""
    for name, v in res.items():
        if "errno" in v:
            continue
        if v["type"] == BTRFS_MAGIC:
            assert v["blocks"] * v["bsize"] == disk_mb * MIB, f"{name}: {v} is not the {disk_mb} MiB quota"
            assert v["bfree"] == v["bavail"] <= v["blocks"], f"{name}: {v}"
        assert (v["blocks"], v["bfree"]) != pool, f"{name} shows the pool's figures: {v}"


@pytest.fixture
def quota_box(sandboxes):
    return sandboxes.new(with_probes=["statfs"], disk_mb=64)


def test_root_shows_the_quota(spaced, quota_box):
    res = statfs(spaced, quota_box, "/", "/tmp", "/etc/passwd", ".", "/proc")
    assert_own(res, 64, pool_figures(spaced))
    root = res["/"]
    assert root["type"] == BTRFS_MAGIC, res
    assert res["/proc"]["type"] == PROC_MAGIC, res
    # the root's own f_fsid, not one derived from the pool's UUID
    assert root["fsid"] == res["/tmp"]["fsid"], res
    # df (busybox) agrees: 64 MiB = 65536 KiB in size, and size = used + available
    r = run(spaced, quota_box, cmd=["df", "-k", "/"])
    assert r.code == 0, r
    fields = r.out.splitlines()[-1].split()
    size, used, avail = int(fields[1]), int(fields[2]), int(fields[3])
    assert size == 64 * 1024, r.out
    assert used + avail == size, r.out
    # from a thread that is not the thread group leader: the same
    th = statfs(spaced, quota_box, "/", mode="thread")["/"]
    assert (th["type"], th["blocks"], th["fsid"]) == (root["type"], root["blocks"], root["fsid"]), (th, root)
    # fstatfs of fds: the same answers
    fds = statfs(spaced, quota_box, "/", "/proc", "/dev/null", mode="fd")
    assert fds["/"]["blocks"] == root["blocks"] and fds["/"]["fsid"] == root["fsid"], fds
    assert fds["/proc"]["type"] == PROC_MAGIC, fds


def test_usage_is_its_own_not_the_others(spaced, sandboxes):
    a = sandboxes.new(with_probes=["statfs"], disk_mb=256)
    b = sandboxes.new(with_probes=["statfs"], disk_mb=256)
    before = statfs(spaced, a, "/")["/"]
    b_before = statfs(spaced, b, "/")["/"]

    # b writes 48 MiB: b's own free space drops (its quota's accounting saw the write; the
    # pool's is no measure: teardowns of earlier tests' sandboxes free space in it meanwhile),
    # a's figures do not move
    r = run(spaced, b, shell="head -c 50331648 /dev/urandom > /big && sync")
    assert r.code == 0, r

    def b_dropped():
        now = statfs(spaced, b, "/")["/"]
        return (b_before["bfree"] - now["bfree"]) * now["bsize"] >= 40 * MIB

    assert host.wait_until(b_dropped, 40), f"b's write does not show in its own figures: {statfs(spaced, b, '/')}"
    after_b = statfs(spaced, a, "/")["/"]
    assert after_b["blocks"] == before["blocks"], (before, after_b)
    assert abs(after_b["bfree"] - before["bfree"]) * after_b["bsize"] < 4 * MIB, \
        f"a's free space moved with b's write: {before} -> {after_b}"

    # a writes 48 MiB: its own free space drops by as much
    r = run(spaced, a, shell="head -c 50331648 /dev/urandom > /big && sync")
    assert r.code == 0, r

    def dropped():
        now = statfs(spaced, a, "/")["/"]
        return (before["bfree"] - now["bfree"]) * now["bsize"] >= 44 * MIB

    assert host.wait_until(dropped, 40), f"a's own write does not show: {statfs(spaced, a, '/')}"
    r = run(spaced, b, cmd=["df", "-k", "/"])
    used_b = int(r.out.splitlines()[-1].split()[2])
    assert used_b >= 44 * 1024, f"b's df does not show its own 48 MiB: {r.out}"


def test_paths_out_of_the_sandbox_stay_inside(spaced, quota_box):
    r = run(spaced, quota_box, shell="mkdir -p /tmp/d/e && ln -sfn /proc/1/root/.. /tmp/magic && "
                                     "ln -sfn ../../../../../../../.. /tmp/up && ln -sfn / /tmp/abs")
    assert r.code == 0, r
    paths = ["/", "/..", "/../../..", "../../../..", "/tmp/d/e/../../../../..", "/tmp/up", "/tmp/up/..",
             "/tmp/abs", "/proc/1/root", "/proc/1/root/..", "/tmp/magic", "/proc/self/root", "/proc/1/cwd",
             "/proc/self/fd/0", "/dev/fd/0", "/proc/1/exe"]
    res = statfs(spaced, quota_box, *paths)
    assert set(res) == set(paths), res
    assert_own(res, 64, pool_figures(spaced))
    for p in ("/..", "/../../..", "../../../..", "/tmp/d/e/../../../../..", "/tmp/up", "/tmp/up/..", "/tmp/abs"):
        assert res[p].get("blocks") == res["/"]["blocks"], f"{p}: {res[p]}"
    # magic links lead nowhere (ELOOP), /proc/self is not the caller for the worker (ENOENT)
    for p in ("/proc/1/root", "/proc/1/root/..", "/tmp/magic", "/proc/1/cwd", "/proc/1/exe"):
        assert res[p] == {"errno": 40}, f"{p}: {res[p]}"
    # the same through relative paths from deep inside
    r = run(spaced, quota_box, shell="cd /tmp/d/e && statfs path ../../../../../.. ../../../../../../proc")
    assert r.code == 0, r
    rel = parse(r.out)
    assert_own(rel, 64, pool_figures(spaced))


def test_malformed_calls_fail_as_the_kernel_fails_them(spaced, quota_box, probes):
    inside = statfs(spaced, quota_box, mode="bad")
    # the probe on the host, where the kernel answers: the same errno for every case
    out = subprocess.run([probes["statfs"], "bad"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert inside == parse(out), f"inside {inside}\non the host {parse(out)}"
    assert inside["long-path"] == {"errno": 36} and inside["null-buf"] == {"errno": 14}, inside


def test_swapping_the_path_during_the_call(spaced, quota_box):
    """A thread flips the path buffer between / and /proc (and a magic link) while
    statfs runs on it: each answer is one of the sandbox's own, never the pool's."""
    pool = pool_figures(spaced)
    for a, b in (("/", "/proc"), ("/", "/proc/1/root/.."), ("/proc", "../../../../..")):
        r = run(spaced, quota_box, cmd=["statfs", "race", "3000", a, b])
        assert r.code == 0, r
        lines = r.out.splitlines()
        assert lines[-1] == "calls=3000", r.out
        for line in lines[:-1]:
            v = parse("x " + line)["x"]
            if "errno" in v:
                assert v["errno"] in (2, 40), line
                continue
            assert v["type"] in (BTRFS_MAGIC, PROC_MAGIC), line
            assert (v["blocks"], v["bfree"]) != pool, f"the pool's figures leaked: {line}"
            if v["type"] == BTRFS_MAGIC:
                assert v["blocks"] * v["bsize"] == 64 * MIB, line


def test_flood_is_bounded_and_others_stay_responsive(spaced, sandboxes):
    flooder = sandboxes.new(with_probes=["statfs"], disk_mb=64)
    other = sandboxes.new(with_probes=["statfs"], disk_mb=128)
    seconds = 6
    result = {}

    def flood():
        result["r"] = run(spaced, flooder, cmd=["statfs", "flood", str(seconds)], timeout=120)

    t = threading.Thread(target=flood)
    t.start()
    try:
        # while it floods: another sandbox's statfs, a create and an exec all work
        for _ in range(3):
            res = statfs(spaced, other, "/")
            assert res["/"]["blocks"] * res["/"]["bsize"] == 128 * MIB, res
        extra = sandboxes.new()
        assert run(spaced, extra, cmd=["true"]).code == 0
        assert_spaced_healthy(spaced)
    finally:
        t.join(180)
    r = result["r"]
    assert r.code == 0, r
    calls, errors = (int(x.split("=")[1]) for x in r.out.split())
    assert errors == 0, r.out
    # the worker answers one sandbox at most PER_TICK_MAX times a second
    assert 0 < calls <= PER_TICK_MAX * (seconds + 2), r.out


def test_answers_survive_a_restart_of_spaced(fresh_spaced, probes):
    from attack_util import Sandboxes
    sb = Sandboxes(fresh_spaced, probes)
    try:
        sid = sb.new(with_probes=["statfs"], disk_mb=64)
        before = statfs(fresh_spaced, sid, "/")["/"]
        fresh_spaced.restart()
        after = statfs(fresh_spaced, sid, "/")["/"]
        assert after["blocks"] == before["blocks"] and after["fsid"] == before["fsid"], (before, after)
    finally:
        assert not sb.cleanup()
