# SPDX-License-Identifier: MIT
"""What the host holds: mounts, loop devices, cgroups, processes, network
namespaces, links, subvolumes. Read-only helpers plus cleanup of things the
tests created (always by path or PID)."""

import glob
import os
import signal
import struct
import subprocess
import time

CGROUP_FS = "/sys/fs/cgroup"


def unescape_mountinfo(s):
    # \040 etc.
    out = ""
    i = 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out += chr(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            out += s[i]
            i += 1
    return out


def mounts(pid="self"):
    """[(mount_id, mount_point, fstype, source)] of a process's mount namespace."""
    res = []
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            for line in f:
                parts = line.split()
                sep = parts.index("-")
                res.append((int(parts[0]), unescape_mountinfo(parts[4]), parts[sep + 1],
                            unescape_mountinfo(parts[sep + 2])))
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
        pass
    return res


def mount_ns(pid="self"):
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def loop_devices():
    """{'/dev/loopN': backing_file}"""
    res = {}
    for p in glob.glob("/sys/block/loop*/loop/backing_file"):
        dev = "/dev/" + p.split("/")[3]
        try:
            with open(p) as f:
                res[dev] = f.read().strip()
        except OSError:
            pass
    return res


def cgroup_hierarchies():
    """Directories under which a cgroup root of ours may live."""
    res = []
    if os.path.exists(os.path.join(CGROUP_FS, "cgroup.controllers")):
        return [CGROUP_FS]
    for d in sorted(os.listdir(CGROUP_FS)):
        p = os.path.join(CGROUP_FS, d)
        if os.path.isdir(p) and not os.path.islink(p):
            res.append(p)
    return res


def cgroup_roots(prefix):
    """Existing cgroup root dirs whose name starts with prefix, on every hierarchy."""
    res = []
    for h in cgroup_hierarchies():
        res.extend(sorted(glob.glob(os.path.join(h, glob.escape(prefix) + "*"))))
    return [r for r in res if os.path.isdir(r)]


def cgroup_tree(root):
    """All cgroup dirs below root (not root itself), deepest first."""
    res = []
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            res.append(os.path.join(dirpath, d))
    res.sort(key=lambda p: -p.count("/"))
    return res


def cgroup_procs(path):
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def proc_cgroups(pid):
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return [line.rstrip("\n").split(":", 2)[2] for line in f if line.count(":") >= 2]
    except OSError:
        return []


def proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def proc_starttime(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        return int(s[s.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def proc_ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        return int(s[s.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def proc_status(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def proc_rss_kb(pid):
    v = proc_status(pid, "VmRSS")
    return int(v.split()[0]) if v else None


PAGEMAP_PRESENT, PAGEMAP_SWAPPED = 1 << 63, 1 << 62


def memory_hits(pid, needle, mapping_max=1 << 30):
    """How many readable mappings (each at most mapping_max bytes) of pid hold needle, read from
    the host through /proc/PID/mem. Only pages the process has (resident or swapped, from
    /proc/PID/pagemap) are read: reading the rest would fault them in, and a sanitizer build's
    reserved regions would add hundreds of MiB to the process for the rest of its life."""
    page = os.sysconf("SC_PAGE_SIZE")
    hits = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem, \
            open(f"/proc/{pid}/pagemap", "rb", 0) as pagemap:
        for line in maps:
            a, perms = line.split()[:2]
            if "r" not in perms:
                continue
            lo, hi = (int(x, 16) for x in a.split("-"))
            if hi - lo > mapping_max:
                continue
            try:
                pagemap.seek(lo // page * 8)
                have = [bool(e & (PAGEMAP_PRESENT | PAGEMAP_SWAPPED))
                        for (e,) in struct.iter_unpack("<Q", pagemap.read((hi - lo) // page * 8))]
            except (OSError, ValueError, OverflowError):
                continue
            i = 0
            while i < len(have):
                if not have[i]:
                    i += 1
                    continue
                j = i
                while j < len(have) and have[j]:
                    j += 1
                try:
                    mem.seek(lo + i * page)
                    if needle in mem.read((j - i) * page):
                        hits += 1
                        break
                except (OSError, ValueError, OverflowError):
                    pass
                i = j
    return hits


def proc_fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def proc_nspid_last(pid):
    v = proc_status(pid, "NSpid")
    return int(v.split()[-1]) if v else None


def proc_exists(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        state = s[s.rindex(")") + 2:].split()[0]
        return state != "Z"
    except (OSError, ValueError):
        return False


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def children(pid):
    return [p for p in all_pids() if proc_ppid(p) == pid]


def descendants(pid):
    res, todo = [], [pid]
    pids = all_pids()
    parent = {p: proc_ppid(p) for p in pids}
    while todo:
        cur = todo.pop()
        for p, pp in parent.items():
            if pp == cur and p not in res:
                res.append(p)
                todo.append(p)
    return res


def netns_list():
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {line.split()[0] for line in out.splitlines() if line.strip()}


# A namespace that `ip netns exec` makes copies every mount of the host's, the
# pools of the e2e daemons among them. On a host whose mounts are private (no
# systemd) a copy is not unmounted with the pool, and holds its loop device
# until the command ends, long after its spaced released it. The command drops
# those copies (in its namespace only) before it runs.
_DROP_POOL_COPIES = ("for m in $(awk '$5 ~ \"^/tmp/space-e2e-\" {print $5}' /proc/self/mountinfo | sort -r); "
                     "do umount -l \"$m\" 2>/dev/null; done; exec \"$@\"")


def netns_exec(netns):
    """The argv prefix that runs a command in netns (like `ip netns exec`)."""
    return ["ip", "netns", "exec", netns, "/bin/sh", "-c", _DROP_POOL_COPIES, "sh"]


def _in_netns(netns, cmd):
    return netns_exec(netns) + cmd if netns else cmd


def nft_table_exists(table, netns=None):
    try:
        r = subprocess.run(_in_netns(netns, ["nft", "list", "table", "inet", table]), capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def links(netns=None):
    try:
        out = subprocess.run(_in_netns(netns, ["ip", "-o", "link", "show"]), capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    res = set()
    for line in out.splitlines():
        parts = line.split(":")
        if len(parts) > 2:
            res.add(parts[1].strip().split("@")[0])
    return res


def kill_pid(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def wait_gone(pids, timeout=10.0):
    end = time.monotonic() + timeout
    pids = list(pids)
    while time.monotonic() < end:
        pids = [p for p in pids if proc_exists(p)]
        if not pids:
            return []
        time.sleep(0.05)
    return pids


def wait_until(pred, timeout=10.0, interval=0.1):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= end:
            return v
        time.sleep(interval)


def run(cmd, timeout=60, check=False, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check, **kw)
