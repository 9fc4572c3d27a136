# SPDX-License-Identifier: MIT
"""What a process inside holds: capabilities (the allow-list of
src/runtime/ns/ns-harden.h), no_new_privs, seccomp, setuid and file
capabilities that gain nothing, file descriptors (none of the host's), the
masked /proc, the minimal /dev and the read-only /sys."""

import os
import re

import pytest

import e2e_host as host
from attack_util import probe_lines, run

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CAP_HEADER = "/usr/include/linux/capability.h"


def cap_numbers():
    """CAP_NAME -> bit, from the kernel headers."""
    with open(CAP_HEADER) as f:
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"#define\s+CAP_(\w+)\s+(\d+)\s*$", f.read(), re.M)}


def documented_caps():
    """The allow-list as ns-harden.h documents it."""
    with open(os.path.join(REPO, "src", "runtime", "ns", "ns-harden.h")) as f:
        text = f.read()
    m = re.search(r"ambient sets\):\s*(.*?)\.\s*Not kept", text, re.S)
    assert m, "ns-harden.h no longer documents the capability allow-list in the expected form"
    names = [w for w in re.sub(r"[*\n]", " ", m.group(1)).split()]
    assert names and all(re.fullmatch(r"[A-Z_]+", n) for n in names), names
    return names


def allowed_mask():
    nums = cap_numbers()
    mask = 0
    for n in documented_caps():
        assert n in nums, f"CAP_{n} of ns-harden.h is unknown to {CAP_HEADER}"
        mask |= 1 << nums[n]
    return mask


def status_fields(text):
    res = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            res[k.strip()] = v.strip()
    return res


def cap_names(mask):
    nums = {v: k for k, v in cap_numbers().items()}
    return sorted(nums.get(b, str(b)) for b in range(64) if mask >> b & 1)


@pytest.mark.parametrize("who", ["exec", "pid1"])
def test_capabilities_match_allow_list(spaced, box, who):
    want = allowed_mask()
    # PID 1 is out of sight inside (not dumpable: test_pid1.py), so its status is read on the host
    if who == "exec":
        st = status_fields(run(spaced, box, cmd=["cat", "/proc/self/status"]).out)
    else:
        with open(f"/proc/{spaced.agent_pid(box)}/status") as f:
            st = status_fields(f.read())
    for k in ("CapEff", "CapPrm", "CapBnd"):
        have = int(st[k], 16)
        assert have == want, (f"{who} {k} = {st[k]}: has {cap_names(have & ~want)} beyond the allow-list, "
                              f"lacks {cap_names(want & ~have)}")
    assert int(st["CapAmb"], 16) == 0, f"ambient capabilities: {cap_names(int(st['CapAmb'], 16))}"
    assert int(st["CapInh"], 16) & ~want == 0, f"inheritable beyond the allow-list: {st['CapInh']}"
    assert st["NoNewPrivs"] == "1", f"{who}: NoNewPrivs {st['NoNewPrivs']}"
    assert st["Seccomp"] == "2", f"{who}: Seccomp {st['Seccomp']} (2 = filter)"
    # the host's view: sandbox root is not host root
    agent = spaced.agent_pid(box)
    uids = host.proc_status(agent, "Uid").split()
    assert all(int(u) >= 65536 for u in uids), f"the agent runs as host uid {uids}"


def test_setuid_and_file_caps_gain_nothing(spaced, box):
    """As an ordinary user inside: a setuid-root binary and one with file
    capabilities (CAP_SETFCAP is kept inside, so root can make one) must
    give neither uid 0 nor capabilities."""
    lines, r = probe_lines(spaced, box, ["sh", "-c",
                                         "cp /usr/local/bin/privs /tmp/suid && chown 0:0 /tmp/suid && chmod 4755 /tmp/suid"
                                         " && cp /usr/local/bin/privs /tmp/fcap && chmod 755 /tmp/fcap"
                                         " && /usr/local/bin/privs setfcap /tmp/fcap"])
    r = run(spaced, box, shell="/tmp/suid show; echo ---; /tmp/fcap show; echo ---; su -c id root </dev/null",
            user="user")
    parts = r.out.split("---\n")
    suid = status_fields(parts[0])
    assert parts[0].startswith("uid 1000 1000 1000"), f"a setuid-root binary changed the uid:\n{parts[0]}"
    assert int(suid.get("CapEff", "0"), 16) == 0 and int(suid.get("CapPrm", "0"), 16) == 0, parts[0]
    if len(parts) > 1 and parts[1].strip():
        fcap = status_fields(parts[1])
        assert int(fcap.get("CapEff", "0"), 16) == 0 and int(fcap.get("CapPrm", "0"), 16) == 0, \
            f"file capabilities were granted:\n{parts[1]}"
    # (the kernel may refuse to exec it at all: "Operation not permitted")
    assert "uid=0" not in r.out, f"su gave root:\n{r.out}"
    run(spaced, box, cmd=["rm", "-f", "/tmp/suid", "/tmp/fcap"])


# ---- file descriptors ----

ALLOWED_FD_TARGET = re.compile(r"^(/dev/null|/dev/pts/\d+|/dev/ptmx|socket:\[\d+\]|pipe:\[\d+\]|"
                               r"anon_inode:\[?(eventpoll|signalfd|pidfd|timerfd|inotify|eventfd|seccomp notify)\]?)$")


def fd_table(text):
    res = {}
    for line in text.splitlines():
        fd, sep, target = line.partition(" -> ")
        if sep:
            res[int(fd)] = target
    return res


@pytest.mark.parametrize("stdin", [None, "data"])
def test_exec_child_has_only_stdio(spaced, box, stdin):
    kw = {} if stdin is None else {"stdin": stdin}
    r = run(spaced, box, cmd=["fds", "list"], **kw)
    fds = fd_table(r.out)
    assert sorted(fds) == [0, 1, 2], f"an exec'd process holds fds {fds}"
    for fd, target in fds.items():
        assert ALLOWED_FD_TARGET.match(target), f"fd {fd} of an exec'd process is {target!r}"


def test_agent_fds_accounted_for(spaced, box):
    """PID 1 holds 0-2 (/dev/null), 3 (its listening socket), its epoll,
    signalfd, connections and the pipes of running execs; nothing of the host.
    Inside, its fd table is out of reach (PID 1 is not dumpable: test_pid1.py);
    the host reads it."""
    bg = spaced.exec(box, cmd=["sleep", "30"], background=True)
    assert bg.response is None, bg
    try:
        r = run(spaced, box, cmd=["fds", "list", "1"])
        assert r.code != 0 and not fd_table(r.out), f"PID 1's fds are listed inside: {r!r}"
        agent = spaced.agent_pid(box)
        fds = {}
        for fd in os.listdir(f"/proc/{agent}/fd"):
            try:
                fds[int(fd)] = os.readlink(f"/proc/{agent}/fd/{fd}")
            except OSError:
                continue  # closed between the listing and the readlink
        for fd in (0, 1, 2):
            assert fds.get(fd) == "/dev/null", f"PID 1's fd {fd} is {fds.get(fd)!r}: {fds}"
        assert fds.get(3, "").startswith("socket:"), f"PID 1's fd 3 is {fds.get(3)!r}: {fds}"
        # no path outside the sandbox
        bad = {fd: t for fd, t in fds.items() if not (ALLOWED_FD_TARGET.match(t) or t.startswith("/dev/pts/"))}
        assert not bad, f"the agent (host pid {agent}) holds fds that are not accounted for: {bad}\n(all: {fds})"
    finally:
        spaced.api("POST", f"/v1/sandboxes/{box}/exec/{bg.start['exec_id']}/signal", json={"signal": "SIGKILL"})


# ---- /proc, /dev, /sys ----

PROC_MASKED = ["kcore", "kallsyms", "cmdline", "sched_debug", "timer_list", "keys", "key-users", "kmsg", "modules",
               "vmallocinfo", "iomem", "ioports", "slabinfo", "sysrq-trigger", "config.gz", "kpagecount",
               "kpageflags", "kpagecgroup", "latency_stats", "buddyinfo", "pagetypeinfo", "zoneinfo", "partitions",
               "diskstats", "devices", "misc", "consoles", "bootconfig", "softirqs", "mtrr", "timer_stats"]
PROC_EMPTY_DIRS = ["acpi", "asound", "scsi", "driver", "tty", "dynamic_debug"]
PROC_READ_ONLY = ["sys", "irq", "bus", "fs", "sysvipc"]
# the host's firmware (ACPI tables, memmap, EFI variables, DMI) and RAPL energy counters
SYS_EMPTY_DIRS = ["firmware", "devices/virtual/powercap"]


def test_proc_masked(spaced, box):
    script = "cd /proc; for f in " + " ".join(PROC_MASKED) + \
             "; do if [ -e $f ]; then echo \"$f $(head -c 65536 $f 2>/dev/null | wc -c)\"; fi; done; echo ---; " \
             "for d in " + " ".join(PROC_EMPTY_DIRS) + "; do if [ -e $d ]; then echo \"$d $(ls -A $d | wc -l)\"; fi; done"
    r = run(spaced, box, shell=script)
    files, dirs = r.out.split("---\n")
    leaks = [l for l in files.splitlines() if not l.endswith(" 0")]
    assert not leaks, f"/proc files with content inside (name, bytes):\n" + "\n".join(leaks)
    nonempty = [l for l in dirs.splitlines() if not l.endswith(" 0")]
    assert not nonempty, f"/proc directories with entries inside (name, entries):\n" + "\n".join(nonempty)
    with open("/proc/cmdline") as f:
        host_cmdline = f.read().strip()
    assert host_cmdline not in r.out or not host_cmdline


def test_proc_read_only_parts(spaced, box):
    """/proc/sys, irq, bus, fs, sysvipc stay readable and are read-only mounts;
    a write to /proc/sys fails (sysrq-trigger is /dev/null: test_proc_masked)."""
    r = run(spaced, box, cmd=["cat", "/proc/self/mountinfo"])
    mounts = {l.split()[4]: l.split()[5].split(",") for l in r.out.splitlines()}
    for d in PROC_READ_ONLY:
        if os.path.exists(f"/proc/{d}"):
            assert f"/proc/{d}" in mounts and "ro" in mounts[f"/proc/{d}"], f"/proc/{d}: {mounts.get(f'/proc/{d}')}"
    r = run(spaced, box, shell="echo 0 > /proc/sys/kernel/sysrq 2>/dev/null && echo WROTE; true")
    assert "WROTE" not in r.out, r


def test_sys_firmware_and_powercap_masked(spaced, box):
    """/sys/firmware and /sys/devices/virtual/powercap: empty and read-only
    inside wherever the host has them (a kernel without one: nothing to mask)."""
    r = run(spaced, box, shell="cd /sys; for d in " + " ".join(SYS_EMPTY_DIRS) + "; do if [ -e $d ]; then "
                               "echo \"$d $(ls -A $d | wc -l) $(find $d 2>/dev/null | wc -l)\"; fi; done; "
                               "cat /sys/firmware/memmap/*/start /sys/firmware/acpi/tables/DSDT 2>/dev/null | wc -c; "
                               "mkdir /sys/firmware/x 2>/dev/null && echo WRITABLE; true")
    lines = r.out.splitlines()
    assert lines and lines[-1] == "0", f"firmware data readable inside: {r.out}"
    for line in lines[:-1]:
        name, entries, found = line.split()
        assert entries == "0" and found == "1", f"/sys/{name} inside has {entries} entries:\n{r.out}"
    assert "WRITABLE" not in r.out
    for d in SYS_EMPTY_DIRS:
        if os.path.isdir(f"/sys/{d}") and os.listdir(f"/sys/{d}"):
            assert f"{d} 0 1" in lines, f"/sys/{d} (not empty on the host) is not masked inside: {r.out}"
    mounts = run(spaced, box, cmd=["cat", "/proc/self/mountinfo"]).out
    for d in SYS_EMPTY_DIRS:
        if os.path.isdir(f"/sys/{d}"):
            line = [l for l in mounts.splitlines() if l.split()[4] == f"/sys/{d}"]
            assert line and "ro" in line[0].split()[5].split(","), f"/sys/{d} is no read-only mount: {line}"


def test_dev_is_minimal(spaced, box):
    want = {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "fd", "stdin", "stdout", "stderr"}
    r = run(spaced, box, shell="ls -A /dev; echo ---; for f in null zero full random urandom tty; do "
                               "stat -c '%n %F %t:%T' /dev/$f; done; echo ---; ls -A /dev/pts; echo ---; "
                               "touch /dev/x 2>/dev/null && echo WRITABLE; true")
    listing, kinds, pts, tail = r.out.split("---\n")
    have = set(listing.split())
    assert have == want, f"/dev has {sorted(have - want)} beyond the minimal set, lacks {sorted(want - have)}"
    devs = {}
    for line in kinds.splitlines():
        name, rest = line.split(" ", 1)
        devs[name] = rest
    expected = {"/dev/null": "1:3", "/dev/zero": "1:5", "/dev/full": "1:7", "/dev/random": "1:8",
                "/dev/urandom": "1:9", "/dev/tty": "5:0"}
    for name, mm in expected.items():
        assert devs.get(name, "").startswith("character special"), f"{name}: {devs.get(name)}"
        maj, mn = devs[name].split()[-1].split(":")
        assert f"{int(maj, 16)}:{int(mn, 16)}" == mm, f"{name} is device {maj}:{mn} (hex), expected {mm}"
    assert set(pts.split()) <= {"ptmx"} | {str(i) for i in range(64)}, pts
    assert "WRITABLE" not in tail, "/dev is writable"


def test_sys_read_only_and_own_netns(spaced, box):
    r = run(spaced, box, shell="grep -E ' /sys | /proc/sys ' /proc/self/mountinfo")
    for line in r.out.splitlines():
        opts = line.split()[5].split(",")
        assert "ro" in opts, f"not read-only: {line}"
    assert len(r.out.splitlines()) >= 2, r.out
    nets = run(spaced, box, cmd=["ls", "/sys/class/net"]).out.split()
    # its own namespace: loopback and its own veth end, never the host's links
    assert nets == ["eth0", "lo"], f"/sys shows network devices {nets} (the host's?)"
    host_only = set(os.listdir("/sys/class/net")) - {"lo", "eth0"}
    assert not host_only & set(nets), nets
