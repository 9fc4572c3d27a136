# SPDX-License-Identifier: MIT
"""Residue: what the tests' daemons leave on the host, and the cleanup.

An item is one mount, loop device, subvolume, cgroup, network namespace or
process. A daemon's own infrastructure (its pool mount and loop device, its
cgroup root, its own processes) is allowed; anything else must belong to a
sandbox that still exists."""

import os
import re
import shutil
import signal
import subprocess
import time

import pytest

import e2e_host as host


late_problems = []     # teardown failures, printed at the end of the run


class Item:
    def __init__(self, kind, key, desc, path_parts, daemon=None, infra=False):
        self.kind = kind
        self.key = (kind,) + tuple(key)
        self.desc = desc
        self.parts = set(path_parts)
        self.daemon = daemon
        self.infra = infra

    def __repr__(self):
        return self.desc


def _ours(session, path):
    """Below a directory this session created (other sessions may run at the same time)."""
    return any(path == b or path.startswith(b + "/") for b in session.base_dirs)


def _daemon_of_path(session, path):
    for d in session.daemons:
        if path == d.base_dir or path.startswith(d.base_dir + "/"):
            return d
    return None


def snapshot(session):
    items = {}

    def add(it):
        items[it.key] = it

    # mounts, in our namespace and the daemons' (a worker may have its own)
    nss = {}
    for pid in ["self"] + [p for d in session.daemons for p in d.daemon_pids()]:
        ns = host.mount_ns(pid)
        if ns and ns not in nss:
            nss[ns] = pid
    for ns, pid in nss.items():
        for mid, mp, fstype, src in host.mounts(pid):
            if not _ours(session, mp):
                continue
            d = _daemon_of_path(session, mp)
            infra = (d is not None and mp == os.path.join(d.state_dir, "pool")) or mp in session.infra_paths
            add(Item("mount", (ns, mid), f"mount {mp} ({fstype} from {src}; {ns}, seen by pid {pid})",
                     mp.split("/"), d, infra))
    for dev, backing in host.loop_devices().items():
        b = backing.replace(" (deleted)", "")
        if not _ours(session, b):
            continue
        d = _daemon_of_path(session, b)
        infra = (d is not None and b == os.path.join(d.state_dir, "pool.img")) or b in session.infra_paths
        add(Item("loop", (dev, b), f"loop device {dev} backed by {backing}", b.split("/"), d, infra))
    for d in session.daemons:
        for name in d.subvolumes():
            add(Item("subvolume", (d.n, name), f"subvolume {d.pool_path('sandboxes', name)}", [name], d))
    for root in host.cgroup_roots(session.cgroup_prefix()):
        name = os.path.basename(root)
        d = next((x for x in session.daemons if x.cgroup_root == name), None)
        add(Item("cgroup", (root,), f"cgroup {root}", [], d, infra=True))
        for sub in host.cgroup_tree(root):
            rel = os.path.relpath(sub, root)
            add(Item("cgroup", (sub,), f"cgroup {sub}", rel.split("/"), d))
    for ns in host.netns_list() if session.host_net_ours else ():
        add(Item("netns", (ns,), f"network namespace {ns}", [ns]))
    daemon_pids = {p: d for d in session.daemons for p in d.daemon_pids()}
    # a space-agent outside our cgroups is ours only if one of our daemons started it
    # (other deployments may run on this host)
    spawned = {p for d in session.daemons if d.running for p in host.descendants(d.pid)}
    for pid in host.all_pids():
        cgs = host.proc_cgroups(pid)
        argv = host.proc_cmdline(pid)
        mine = [c for c in cgs if f"/{session.cgroup_prefix()}" in c]
        agent = bool(argv) and "space-agent" in os.path.basename(argv[0])
        if not mine and not agent:
            continue
        st = host.proc_starttime(pid)
        if st is None:
            continue
        if agent and not mine and pid not in spawned:
            continue      # someone else's
        parts = []
        for c in mine:
            parts += c.split("/")
        d = daemon_pids.get(pid)
        add(Item("process", (pid, st), f"process {pid} {' '.join(argv)[:120]!r} in cgroup "
                 f"{mine[0] if mine else (cgs[0] if cgs else '?')}", parts, d, infra=d is not None))
    return items


def alive_ids(session):
    ids = set()
    for d in session.daemons:
        ids |= d.alive_ids()
    return ids


def net_problems(session):
    """A daemon's links (its prefix) beyond its live sandboxes: one link per
    running sandbox at most (suspended ones have none)."""
    bad = []
    for d in session.daemons:
        if not d.running:
            continue
        links = d.net_links()
        if len(links) > len(d.known_alive):
            bad.append(Item("link", tuple(sorted(links)), f"network links {sorted(links)} of daemon {d.n}: more than "
                            f"its {len(d.known_alive)} live sandboxes", [], d))
    return bad


def offending(session, before, after, alive):
    bad = net_problems(session)
    for key, it in after.items():
        if key in before or it.infra:
            continue
        if it.parts & alive:
            continue
        bad.append(it)
    return bad


def check_after_test(session, before, grace=3.0):
    """New items that belong to no live sandbox. Polls for a short grace
    period (a process may take a moment to be reaped)."""
    end = time.monotonic() + grace
    while True:
        alive = alive_ids(session)
        bad = offending(session, before, snapshot(session), alive)
        if not bad or time.monotonic() >= end:
            return bad
        time.sleep(0.25)


def items_of_sandbox(session, sid):
    return [it for it in snapshot(session).values() if sid in it.parts]


# ---- final verification and cleanup (only what this session created) ----

def _other_sessions_daemon_link(session, name):
    """A host link of a daemon that another test session (another pytest
    process running at the same time) started: its prefix, 'e<pid><n>-' in
    base 36 or a derived 'sp<hex>-', is not one of ours. Our own daemons'
    links are always checked."""
    if any(name.startswith(d.net_prefix) for d in session.daemons):
        return False
    # a daemon with derived names (test_coexist.py): sp<6 hex>-<slot>
    if re.fullmatch(r"sp[0-9a-f]{6}-[0-9]+", name):
        return True
    return re.fullmatch(r"e[0-9a-z]{2,}-.*", name) is not None and not name.startswith(session_link_stem())


def session_link_stem():
    """The start every daemon prefix of this pytest process has (e2e_daemon)."""
    import e2e_daemon
    return "e" + e2e_daemon._b36(os.getpid())


def leftovers(session):
    """What is left once every daemon is stopped: everything of ours is residue."""
    res = []
    for it in snapshot(session).values():
        if it.kind == "cgroup" and it.infra:
            continue        # the empty cgroup root a daemon keeps (like /sys/fs/cgroup/space)
        if it.kind == "netns" and it.key[1] in session.start_netns:
            continue
        res.append(it)
    new_links = {l for l in host.links() - session.start_links if not _other_sessions_daemon_link(session, l)
                 and (session.host_net_ours or any(l.startswith(d.net_prefix) for d in session.daemons))}
    for l in sorted(new_links):
        res.append(Item("link", (l,), f"network link {l}", [l]))
    for d in session.daemons:
        if d.net_table_exists():
            res.append(Item("nft", (d.net_table,), f"nftables table inet {d.net_table}", []))
    for pid, st in session.extra_pids:
        if host.proc_exists(pid) and host.proc_starttime(pid) == st:
            res.append(Item("process", (pid, st), f"process {pid} {' '.join(host.proc_cmdline(pid))[:120]!r} "
                            "(started by a test)", []))
    return res


def cleanup(session, log):
    """Removes everything of ours: processes (by PID), cgroups, mounts, loop
    devices, base directories. Logs what it had to do."""
    # processes in our cgroups, our daemons, and those 'space up' started
    for _ in range(3):
        pids = set()
        for root in host.cgroup_roots(session.cgroup_prefix()):
            for sub in [root] + host.cgroup_tree(root):
                pids.update(host.cgroup_procs(sub))
        for d in session.daemons:
            pids.update(d.daemon_pids())
        for pid, st in session.extra_pids:
            if host.proc_exists(pid) and host.proc_starttime(pid) == st:
                pids.add(pid)
        pids = {p for p in pids if host.proc_exists(p)}
        if not pids:
            break
        for p in pids:
            log(f"cleanup: kill -9 {p} {' '.join(host.proc_cmdline(p))[:100]!r}")
            host.kill_pid(p, signal.SIGKILL)
        host.wait_gone(pids, 10)
    for d in session.daemons:
        if d.proc is not None:
            try:
                d.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        d.pid = None
        d.proc = None
    # cgroups, deepest first, then the roots
    for root in host.cgroup_roots(session.cgroup_prefix()):
        for sub in host.cgroup_tree(root) + [root]:
            for _ in range(50):
                try:
                    os.rmdir(sub)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                log(f"cleanup: cannot remove cgroup {sub}")
    # mounts below our base dirs, deepest first
    for _ in range(3):
        mps = sorted({mp for _, mp, _, _ in host.mounts() if _ours(session, mp)}, key=lambda m: -len(m))
        if not mps:
            break
        for mp in mps:
            log(f"cleanup: umount {mp}")
            r = subprocess.run(["umount", mp], capture_output=True, text=True)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", mp], capture_output=True, text=True)
    for dev, backing in host.loop_devices().items():
        b = backing.replace(" (deleted)", "")
        if any(b.startswith(x + "/") for x in session.base_dirs):
            log(f"cleanup: losetup -d {dev} ({backing})")
            subprocess.run(["losetup", "-d", dev], capture_output=True, text=True)
    # network: this session's links (by the daemons' prefixes) and nft tables
    for d in session.daemons:
        for l in sorted(d.net_links()):
            log(f"cleanup: ip link del {l}")
            subprocess.run(["ip", "link", "del", l], capture_output=True, text=True)
        if d.net_table_exists():
            log(f"cleanup: nft delete table inet {d.net_table}")
            subprocess.run(["nft", "delete", "table", "inet", d.net_table], capture_output=True, text=True)
    for b in session.base_dirs:
        if os.path.exists(b):
            if any(mp == b or mp.startswith(b + "/") for _, mp, _, _ in host.mounts()):
                log(f"cleanup: {b} still has mounts; not removed")
                continue
            shutil.rmtree(b, ignore_errors=True)
            if os.path.exists(b):
                subprocess.run(["rm", "-rf", "--one-file-system", b], capture_output=True)


# ---- one daemon ----

def teardown_daemon(d):
    """Deletes every sandbox, stops spaced with SIGTERM and checks that it
    released everything. Returns a list of problems."""
    problems = []
    if d.running:
        try:
            for sid, sb in d.list_all().items():
                if sb.get("state") == "deleted":
                    continue
                key = next((k for k in d.keys if d.api("GET", f"/v1/sandboxes/{sid}", key=k,
                                                          validate=False).status == 200), d.admin_key)
                r = d.api("DELETE", f"/v1/sandboxes/{sid}", key=key, timeout=180, validate=False)
                if r.status != 200:
                    problems.append(f"teardown: delete {sid}: {r!r}")
        except Exception as e:  # noqa: BLE001 - teardown goes on
            problems.append(f"teardown: deleting sandboxes failed: {e!r}")
        problems += d.stop()
    problems += released_problems(d)
    return problems


def released_problems(d):
    """After spaced stopped: no mount, loop device, sandbox cgroup or process of it."""
    problems = []
    pool = os.path.join(d.state_dir, "pool")
    for _, mp, fstype, src in host.mounts():
        if mp == d.base_dir or mp.startswith(d.base_dir + "/"):
            problems.append(f"{mp} ({fstype} from {src}) still mounted after spaced stopped"
                            + (" (the pool was not released)" if mp == pool else ""))
    # the kernel detaches an autoclear loop device from a work queue once the
    # last reference to its file system goes (a VMM killed by the delete may
    # hold an open file a moment longer): a few seconds to go by itself
    def our_loops():
        return {dev: b for dev, b in host.loop_devices().items() if b.startswith(d.base_dir + "/")}
    host.wait_until(lambda: not our_loops(), 10)
    for dev, backing in our_loops().items():
        problems.append(f"loop device {dev} ({backing}) still attached after spaced stopped")
    for l in sorted(d.net_links()):
        problems.append(f"network link {l} left after spaced stopped")
    if d.net_table_exists():
        problems.append(f"nftables table inet {d.net_table} left after spaced stopped with no sandbox")
    for root in host.cgroup_roots(d.cgroup_root):
        if os.path.basename(root) != d.cgroup_root:
            continue
        for sub in host.cgroup_tree(root):
            problems.append(f"cgroup {sub} left after spaced stopped")
        for sub in [root] + host.cgroup_tree(root):
            for p in host.cgroup_procs(sub):
                problems.append(f"process {p} {' '.join(host.proc_cmdline(p))[:100]!r} left in {sub}")
    return problems


def log_dir(session):
    """<build>/e2e-logs, or a directory in it per parallel session (gw0, gw1, ...)."""
    return os.path.join(session.build_dir, "e2e-logs", os.environ.get("PYTEST_XDIST_WORKER", ""))


def keep_log(d):
    """A copy of a daemon's log in <build>/e2e-logs/ (its temp dir goes away)."""
    out = log_dir(d.s)
    try:
        os.makedirs(out, exist_ok=True)
        if os.path.exists(d.log_path):
            shutil.copyfile(d.log_path, os.path.join(out, f"spaced-{d.n}.log"))
    except OSError:
        pass


def remove_daemon_dir(d):
    keep_log(d)
    if any(mp == d.base_dir or mp.startswith(d.base_dir + "/") for _, mp, _, _ in host.mounts()):
        return
    shutil.rmtree(d.base_dir, ignore_errors=True)


def finish_daemon(d, request):
    """The end of a fixture's own daemon: torn down and checked
    (teardown_daemon); its directory removed if it left nothing, else the
    problems reported against the fixture's test."""
    problems = teardown_daemon(d)
    if not problems:
        remove_daemon_dir(d)
    else:
        teardown_failed(request, f"spaced #{d.n} teardown:\n  " + "\n  ".join(problems))


def teardown_failed(request, msg):
    """A failure found while tearing down a fixture. pytest reports only the
    first exception of a teardown, and a raise from pytest_sessionfinish (-x,
    ^C) is an internal error: so it is also printed at the end of the run
    and makes the exit status non-zero."""
    late_problems.append(msg)
    if not (request.session.shouldstop or request.session.shouldfail):
        pytest.fail(msg, pytrace=False)
