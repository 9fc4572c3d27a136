# SPDX-License-Identifier: MIT
"""The sandbox's own cgroups at /sys/fs/cgroup (src/runtime/ns/cgroup-view.h):
its limits readable where language runtimes look for them, nothing of them
writable, no other sandbox's cgroup and no path of the host's in sight."""

import os
import re

import pytest

from attack_util import run

MiB = 1024 * 1024
V2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")


def read_in(spaced, sid, *files):
    script = "; ".join(f"echo \"{f}=$(cat /sys/fs/cgroup/{f} 2>&1)\"" for f in files)
    out = run(spaced, sid, shell=script).out
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def host_cgroup_super_options():
    """The super options of every cgroup file system mounted on the host."""
    res = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            fstype, _, opts = post.split()[:3]
            if fstype in ("cgroup", "cgroup2"):
                res[pre.split()[4]] = opts.split(",")
    return res


@pytest.fixture
def limited(sandboxes):
    return sandboxes.new(memory_mb=256, cpu=0.5, pids_max=300)


def test_cgroup_files_show_the_sandboxes_own_limits(spaced, limited):
    if V2:
        v = read_in(spaced, limited, "memory.max", "cpu.max", "pids.max")
        assert v == {"memory.max": str(256 * MiB), "cpu.max": "50000 100000", "pids.max": "300"}, v
        quota, period = (int(x) for x in v["cpu.max"].split())
    else:
        v = read_in(spaced, limited, "memory/memory.limit_in_bytes", "cpu/cpu.cfs_quota_us",
                    "cpu/cpu.cfs_period_us", "pids/pids.max")
        assert v == {"memory/memory.limit_in_bytes": str(256 * MiB), "cpu/cpu.cfs_quota_us": "50000",
                     "cpu/cpu.cfs_period_us": "100000", "pids/pids.max": "300"}, v
        quota, period = int(v["cpu/cpu.cfs_quota_us"]), int(v["cpu/cpu.cfs_period_us"])
    # what a runtime computes from it: half a CPU, so one worker thread
    assert (quota + period - 1) // period == 1
    # the sandbox's processes are at the root of what it sees, and its usage counts
    r = run(spaced, limited, shell="cat /proc/self/cgroup; echo ---; cat /sys/fs/cgroup/" +
                                   ("cgroup.procs" if V2 else "memory/cgroup.procs") + "; echo ---; cat /sys/fs/cgroup/" +
                                   ("memory.current" if V2 else "memory/memory.usage_in_bytes"))
    own, procs, usage = r.out.split("---\n")
    for line in own.splitlines():
        hid, ctrls, path = line.split(":", 2)
        if ctrls in ("", "memory", "pids") or "cpu" in ctrls.split(","):
            assert path == "/", f"/proc/self/cgroup inside: {line!r} is not the namespace's root\n{own}"
    assert "1" in procs.split(), f"PID 1 is not in the cgroup seen at /sys/fs/cgroup: {procs!r}"
    assert 0 < int(usage) <= 256 * MiB, usage
    print(f"cgroup view: {v}; nproc inside says {run(spaced, limited, cmd=['nproc']).out.strip()} "
          f"(sched_getaffinity: the host's CPUs, not the quota)")


def test_cgroup_view_is_read_only(spaced, limited):
    limit = "memory.max" if V2 else "memory/memory.limit_in_bytes"
    cpu = "cpu.max" if V2 else "cpu/cpu.cfs_quota_us"
    procs = "cgroup.procs" if V2 else "memory/cgroup.procs"
    new_dir = "escape" if V2 else "memory/escape"
    before = read_in(spaced, limited, limit, cpu)
    assert before[limit] == str(256 * MiB), before
    r = run(spaced, limited, shell=f"""
        cd /sys/fs/cgroup
        echo max > {limit} 2>/dev/null && echo WROTE {limit}
        echo 9223372036854771712 > {limit} 2>/dev/null && echo WROTE {limit}
        echo max > {cpu} 2>/dev/null && echo WROTE {cpu}
        echo -1 > {cpu} 2>/dev/null && echo WROTE {cpu}
        echo $$ > {procs} 2>/dev/null && echo WROTE {procs}
        mkdir {new_dir} 2>/dev/null && echo MADE {new_dir}
        touch /sys/fs/cgroup/x 2>/dev/null && echo MADE x
        ln -s / /sys/fs/cgroup/y 2>/dev/null && echo MADE y
        rm -f /sys/fs/cgroup/cpu 2>/dev/null; [ -e /sys/fs/cgroup/cpu ] || [ -e /sys/fs/cgroup/cpu.max ] || echo REMOVED cpu
        mount -o remount,rw /sys/fs/cgroup 2>/dev/null && echo REMOUNTED
        umount /sys/fs/cgroup/memory 2>/dev/null && echo UNMOUNTED
        umount -l /sys/fs/cgroup 2>/dev/null && echo UNMOUNTED
        true""")
    assert r.out == "", f"the sandbox changed its cgroups:\n{r.out}"
    # as the kernel sees them: every cgroup mount inside read-only, and what was read before is unchanged
    mounts = run(spaced, limited, cmd=["cat", "/proc/self/mountinfo"]).out
    cg = [l for l in mounts.splitlines() if " /sys/fs/cgroup" in l]
    assert cg, mounts
    for line in cg:
        assert "ro" in line.split()[5].split(","), f"not read-only inside: {line}"
    assert read_in(spaced, limited, limit, cpu) == before
    cg_host = spaced.cgroup_dirs(limited)
    assert cg_host, "the sandbox has no cgroup on the host"
    # the host's own cgroup file systems stay writable (a read-only mount inside shares their superblock)
    for mnt, opts in host_cgroup_super_options().items():
        assert "ro" not in opts, f"the host's cgroup file system at {mnt} became read-only: {opts}"


def test_other_sandboxes_cgroups_are_not_in_sight(spaced, sandboxes, limited):
    other = sandboxes.new()
    run(spaced, other, cmd=["true"])
    r = run(spaced, limited, cmd=["sh", "-c", "find /sys/fs/cgroup -maxdepth 3 -type d; echo ---; "
                                              "cat /proc/self/cgroup; echo ---; "
                                              "grep -rls -e \"$1\" -e \"$2\" /sys/fs/cgroup | head -5; "
                                              "echo ---; ls /sys/fs/cgroup",
                                  "sh", other, spaced.cgroup_root])
    dirs, own, grep, top = r.out.split("---\n")
    assert top.split(), f"nothing at /sys/fs/cgroup inside: {r.out}"
    for d in dirs.splitlines():
        assert other not in d and limited not in d, f"a sandbox's cgroup in sight inside: {d}"
    # below each hierarchy's root: nothing (the sandbox makes no cgroups of its own)
    deeper = [d for d in dirs.splitlines() if d.count("/") > (3 if V2 else 4)]
    assert not deeper, f"cgroups below the sandbox's own in sight: {deeper}"
    for word in (other, limited, spaced.cgroup_root):
        assert not re.search(rf"[/:]{re.escape(word)}(/|$)", own, re.M), \
            f"/proc/self/cgroup inside names {word!r}:\n{own}"
    assert grep.strip() == "", f"files inside name the other sandbox or the cgroup root: {grep}"
    # the processes listed in its cgroup are its own (one of another pid namespace would show as 0)
    procs = "cgroup.procs" if V2 else "pids/cgroup.procs"
    pids = run(spaced, limited, cmd=["cat", f"/sys/fs/cgroup/{procs}"]).out.split()
    assert "1" in pids and "0" not in pids, f"{procs} inside: {pids}"
