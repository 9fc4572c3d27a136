# SPDX-License-Identifier: MIT
"""Privileged kernel interfaces from inside a sandbox (as root inside):
mounts, device nodes, modules, keyrings, bpf, perf, userfaultfd, nested
namespaces, clocks, hostname, raw sockets, ptrace. Each attempt must fail,
and the host (mounts, clock, hostname, network) must be unchanged."""

import os
import re
import socket
import time

import pytest

import e2e_host as host
from attack_util import assert_spaced_healthy, probe_lines, run

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# name of a syscalls.c attempt -> what it stands for
GROUPS = {
    "mount": ["mount-tmpfs", "mount-proc", "mount-bind", "mount-sysfs-rw", "remount-proc-sys-rw",
              "umount-proc-kcore", "umount-proc-kallsyms", "fsopen", "open_tree", "pivot_root"],
    "mknod": ["mknod-block", "mknod-char-mem"],
    "modules": ["init_module", "finit_module", "delete_module"],
    "keyctl": ["keyctl", "add_key", "request_key"],
    "bpf": ["bpf"],
    "perf_event_open": ["perf_event_open"],
    "userfaultfd": ["userfaultfd"],
    "namespaces": ["unshare-user", "unshare-net", "unshare-mount", "clone-newuser", "clone3-newuser", "setns-user",
                   "setns-net"],
    "time": ["settimeofday", "clock_settime", "adjtimex"],
    "raw-sockets": ["socket-packet-raw", "socket-packet-dgram", "socket-inet-raw", "socket-inet6-raw",
                    "socket-inet-packet"],
    "host-kernel": ["open_by_handle_at", "iopl", "ioperm", "reboot-cad-off", "syslog-read", "swapon", "kexec_load",
                    "acct", "personality-addr-no-randomize"],
    "rlimits": ["raise-nofile", "raise-nproc"],
}


def mountinfo(spaced, sid):
    return run(spaced, sid, cmd=["cat", "/proc/self/mountinfo"]).out


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_privileged_syscalls_fail(spaced, box, group):
    names = GROUPS[group]
    mounts_before = mountinfo(spaced, box) if group == "mount" else None
    host_mounts_before = {(mp, fs) for _, mp, fs, _ in host.mounts()}
    wall0, mono0 = time.time(), time.monotonic()
    lines, r = probe_lines(spaced, box, ["syscalls"] + names)
    not_denied = {n: lines.get(n) for n in names if denied_errno(lines.get(n)) is None}
    assert not not_denied, f"attacks that were not refused ({group}): {not_denied}\nprobe output:\n{r.out}{r.err}"
    if group == "mount":
        after = mountinfo(spaced, box)
        assert after == mounts_before, f"the sandbox's mount table changed:\n{before_after(mounts_before, after)}"
        assert not run(spaced, box, cmd=["cat", "/proc/kcore"]).stdout, "/proc/kcore became readable"
    if group == "time":
        drift = time.time() - (wall0 + time.monotonic() - mono0)
        assert abs(drift) < 5, f"the host's realtime clock moved by {drift:.1f}s"
    if group == "mknod":
        ls = run(spaced, box, shell="for f in /tmp/.blk-probe /tmp/.mem-probe; do test -e $f && echo $f; done; true")
        assert not ls.out.strip(), f"device nodes were created: {ls.out}"
    new_host_mounts = {(mp, fs) for _, mp, fs, _ in host.mounts()} - host_mounts_before
    assert not [m for m in new_host_mounts if m[1] in ("tmpfs", "proc", "sysfs")], \
        f"new host mounts after the {group} probe: {new_host_mounts}"
    assert_spaced_healthy(spaced)


# a refusal: EPERM, EACCES, EROFS, ENOSYS (clone3 is ENOSYS so that libc falls back to clone)
DENIED_ERRNOS = {1, 13, 30, 38}


def denied_errno(result):
    """The errno of a refused attempt, None if it succeeded or failed otherwise
    (another errno could mean the probe never reached the permission check)."""
    m = re.match(r"errno=(\d+) ", result or "")
    return int(m.group(1)) if m and int(m.group(1)) in DENIED_ERRNOS else None


def before_after(a, b):
    sa, sb = set(a.splitlines()), set(b.splitlines())
    return "removed:\n  " + "\n  ".join(sorted(sa - sb)) + "\nadded:\n  " + "\n  ".join(sorted(sb - sa))


def test_busybox_tools_fail(spaced, box):
    """The same attacks as a user would type them."""
    script = """
        mkdir -p /tmp/mnt
        mount -t tmpfs none /tmp/mnt && echo "SUCCEEDED mount tmpfs"
        mount -t proc proc /tmp/mnt && echo "SUCCEEDED mount proc"
        mount --bind / /tmp/mnt && echo "SUCCEEDED mount bind"
        mount -o remount,rw /sys && echo "SUCCEEDED remount /sys rw"
        umount /proc/kcore && echo "SUCCEEDED umount /proc/kcore"
        mknod /tmp/sda b 8 0 && echo "SUCCEEDED mknod block"
        mknod /tmp/kmem c 1 2 && echo "SUCCEEDED mknod kmem"
        unshare -U -r true && echo "SUCCEEDED unshare -U"
        unshare -m true && echo "SUCCEEDED unshare -m"
        nsenter -t 1 -U true && echo "SUCCEEDED nsenter"
        modprobe space_probe_no_such_module 2>/dev/null && echo "SUCCEEDED modprobe"
        out=$(date -s "@$(date +%s)" 2>&1)    # busybox date exits 0 even when it cannot set the clock
        case "$out" in *"can't set"*) ;; *) echo "SUCCEEDED date -s: $out";; esac
        hwclock -r >/dev/null 2>&1 && echo "SUCCEEDED hwclock"
        (exec 3>>/proc/sys/kernel/sysrq) 2>/dev/null && echo "SUCCEEDED open /proc/sys for writing"
        (exec 3>>/proc/sysrq-trigger) 2>/dev/null && echo "SUCCEEDED open sysrq-trigger for writing"
        dmesg >/dev/null && echo "SUCCEEDED dmesg"
        echo done
    """
    r = run(spaced, box, shell=script, timeout_s=60)
    assert "SUCCEEDED" not in r.out, f"attacks that worked:\n{r.out}\nstderr:\n{r.err}"
    assert r.out.rstrip().endswith("done"), r
    # the host did not reboot or panic, and keeps its clock
    assert abs(time.time() - float(run(spaced, box, cmd=["date", "+%s"]).out)) < 30
    assert_spaced_healthy(spaced)


def test_clock_unchanged(spaced, box):
    before = time.time()
    lines, r = probe_lines(spaced, box, ["syscalls", "settimeofday", "clock_settime"])
    assert lines["settimeofday"].startswith("errno=") and lines["clock_settime"].startswith("errno="), r.out
    run(spaced, box, shell="date -s '1999-12-31 23:59:59' >/dev/null 2>&1; true")
    inside = float(run(spaced, box, cmd=["date", "+%s"]).out)
    now = time.time()
    assert before - 5 < now < before + 120, "the host clock moved"
    assert abs(inside - now) < 30, f"the sandbox's clock is {inside}, the host's {now}"


def test_hostname_change_stays_inside(spaced, sandboxes):
    a = sandboxes.new(with_probes=["syscalls"])
    b = sandboxes.new()
    host_name = socket.gethostname()
    b_name = run(spaced, b, cmd=["hostname"]).out.strip()
    lines, r = probe_lines(spaced, a, ["syscalls", "sethostname=pwned-by-sandbox"])
    run(spaced, a, shell="hostname pwned-by-shell 2>/dev/null; true")
    a_name = run(spaced, a, cmd=["hostname"]).out.strip()
    assert socket.gethostname() == host_name, f"the host's hostname changed to {socket.gethostname()!r}"
    with open("/proc/sys/kernel/hostname") as f:
        assert f.read().strip() == host_name
    assert run(spaced, b, cmd=["hostname"]).out.strip() == b_name, "another sandbox's hostname changed"
    # allowed or not, a change is the sandbox's own (its UTS namespace)
    assert a_name in ("pwned-by-sandbox", "pwned-by-shell") or lines["sethostname=pwned-by-sandbox"].startswith(
        "errno="), f"sethostname said {lines} but the name is {a_name!r}"


def test_no_network_devices_to_sniff(spaced, box):
    """Raw and packet sockets are refused (no CAP_NET_RAW), and there is no
    interface but loopback in the sandbox's network namespace anyway."""
    lines, r = probe_lines(spaced, box, ["syscalls"] + GROUPS["raw-sockets"])
    assert all(lines[n].startswith("errno=") for n in GROUPS["raw-sockets"]), r.out
    devs = run(spaced, box, shell="ls /sys/class/net; tail -n +3 /proc/net/dev | cut -d: -f1").out.split()
    # loopback and the sandbox's own end of its veth link (tests/e2e/security/
    # test_network.py checks where that link leads); none of the host's
    host_devs = set(os.listdir("/sys/class/net")) - {"lo", "eth0"}
    assert set(devs) == {"lo", "eth0"}, f"network interfaces inside: {devs}"
    assert not host_devs & set(devs), devs
    r = run(spaced, box, shell="ping -c 1 -W 1 127.0.0.1 >/dev/null 2>&1 && echo PING; "
                               "arping -c 1 -w 1 -I lo 127.0.0.1 >/dev/null 2>&1 && echo ARPING; true")
    assert "ARPING" not in r.out, "arping (a packet socket) worked"


def policy_verdict(syscall):
    with open(os.path.join(REPO, "src", "runtime", "ns", "seccomp-policy.c")) as f:
        text = f.read()
    m = re.search(r'\{\s*"' + re.escape(syscall) + r'",\s*(\w+)', text)
    return m.group(1) if m else None


def test_ptrace(spaced, box):
    """The policy allows ptrace inside (debuggers; the agent is in the hostile
    zone anyway); what matters is that no host process can be reached: they
    are not in the sandbox's pid namespace at all."""
    verdict = policy_verdict("ptrace")
    assert verdict is not None, "ptrace has no row in seccomp-policy.c"
    lines, r = probe_lines(spaced, box, ["syscalls", "ptrace-seize=1"])
    if verdict != "ALLOWED":
        assert lines["ptrace-seize=1"].startswith("errno="), f"policy {verdict} but ptrace of PID 1 worked: {r.out}"
    # whatever happened, PID 1 still serves
    assert run(spaced, box, cmd=["echo", "ok"]).out == "ok\n"
    targets = [p for p in spaced.daemon_pids() + [1, os.getpid()] if p not in spaced.sandbox_pids(box)]
    # the agent is PID 1 inside: host pid 1 is not reachable under that number; use the others
    host_targets = [p for p in targets if p != 1]
    lines, r = probe_lines(spaced, box, ["syscalls"] + [f"ptrace-seize={p}" for p in host_targets])
    for p in host_targets:
        res = lines[f"ptrace-seize={p}"]
        assert res.startswith("errno=3 "), f"ptrace of host pid {p} ({host.proc_cmdline(p)[:2]}): {res}"
    # PID 1 inside is the agent, not the host's init
    agent = spaced.agent_pid(box)
    assert agent and agent != 1 and host.proc_nspid_last(agent) == 1
    assert_spaced_healthy(spaced)


def test_proc_sys_and_sys_read_only(spaced, box):
    # opened for appending and closed without a write: harmless even where it works
    r = run(spaced, box, shell="""
        for f in /proc/sys/kernel/hostname /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches \
                 /proc/sys/kernel/modprobe /proc/sys/fs/file-max /proc/sysrq-trigger /proc/sys/net/ipv4/ip_forward \
                 /sys/kernel/uevent_helper /sys/power/state /sys/class/net/lo/mtu /sys/fs/cgroup; do
            if [ -e $f ]; then (exec 3>>$f) 2>/dev/null && echo "WRITABLE $f"; fi
        done
        touch /sys/x 2>/dev/null && echo "WRITABLE /sys"
        mkdir /sys/fs/cgroup/x 2>/dev/null && echo "WRITABLE /sys/fs/cgroup"
        echo done""")
    assert "WRITABLE" not in r.out, f"writable kernel files inside:\n{r.out}"
    assert r.out.rstrip().endswith("done"), r
