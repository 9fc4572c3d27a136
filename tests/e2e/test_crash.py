# SPDX-License-Identifier: MIT
"""Crashes and restarts: nothing the store knows is lost, nothing nobody
owns survives a start."""

import os
import signal
import subprocess
import time

import pytest

from e2e_daemon import clean_env
import e2e_host as host
import e2e_residue as residue

ORPHAN = "zzzz"


@pytest.fixture
def d(fresh_spaced):
    if not fresh_spaced.running:
        fresh_spaced.start()
    return fresh_spaced


def test_kill9_and_restart_finds_sandboxes(d):
    a = d.create()["id"]
    b = d.create()["id"]
    try:
        d.sh(a, "echo kept > /root/kept")
        agents = {s: d.agent_pid(s) for s in (a, b)}
        assert all(agents.values()), agents
        d.kill9()
        assert not d.running
        for s, p in agents.items():
            assert host.proc_exists(p), f"sandbox {s} died with spaced"
        d.start()
        lst = d.list_all()
        for s in (a, b):
            assert lst[s]["state"] == "running", lst[s]
            assert d.agent_pid(s) == agents[s], "the sandbox was restarted rather than found again"
            assert d.sh(s, "echo after") == "after\n"
        assert d.sh(a, "cat /root/kept") == "kept\n"
        ev = d.api("GET", "/v1/events", params={"type": "worker.reconciled"}).json()["events"]
        assert ev, "no worker.reconciled event"
        # the re-found sandboxes delete cleanly
    finally:
        if d.running:
            for s in (a, b):
                d.delete(s)
    for s in (a, b):
        assert host.wait_until(lambda: not residue.items_of_sandbox(d.s, s), 5), residue.items_of_sandbox(d.s, s)


def test_sandbox_gone_while_down_is_marked_error(d):
    c = d.create()["id"]
    keep = d.create()["id"]
    try:
        pids = d.sandbox_pids(c)
        assert pids
        d.kill9()
        for p in pids:
            host.kill_pid(p, signal.SIGKILL)
        assert not host.wait_gone(pids, 10)
        d.start()
        v = d.show(c).json()
        assert v["state"] == "error", v
        assert v["reason"], v
        ev = d.api("GET", "/v1/events", params={"sandbox": c}).json()["events"]
        assert any(e["type"] == "sandbox.error" and e["reason"] for e in ev) or \
            any(e["type"] == "sandbox.state" and e["data"].get("to") == "error" and e["reason"] for e in ev), ev
        r = d.exec(c, cmd=["true"])
        assert r.response is not None and r.status == 409, r
        # the other one is untouched
        assert d.sh(keep, "echo ok") == "ok\n"
    finally:
        d.delete(c)
        d.delete(keep)
    assert host.wait_until(lambda: not residue.items_of_sandbox(d.s, c), 5), residue.items_of_sandbox(d.s, c)


def _ensure_pool_mounted(d):
    """The pool as the host sees it; mounted by the test if no one holds it."""
    pool = d.pool_path()
    if os.path.ismount(pool):
        return None
    img = os.path.join(d.state_dir, "pool.img")
    subprocess.run(["mount", "-o", "loop", img, pool], check=True, capture_output=True)
    return pool


def test_orphans_removed_at_start(d):
    e = d.create()["id"]       # keeps the pool busy across the crash
    sleeper = None
    mounted = None
    try:
        d.kill9()
        # an orphan cgroup with a process in it, on every hierarchy
        roots = [r for r in host.cgroup_roots(d.cgroup_root) if os.path.basename(r) == d.cgroup_root]
        assert roots, "no cgroup root of this spaced"
        sleeper = subprocess.Popen(["sleep", "1000"])
        made = []
        for r in roots:
            p = os.path.join(r, ORPHAN)
            os.mkdir(p)
            made.append(p)
            try:
                with open(os.path.join(p, "cgroup.procs"), "w") as f:
                    f.write(str(sleeper.pid))
            except OSError:
                pass   # a v2 parent with controllers in subtree_control takes no process; fine
        # an orphan subvolume
        mounted = _ensure_pool_mounted(d)
        sub = d.pool_path("sandboxes", ORPHAN)
        r = subprocess.run(["btrfs", "subvolume", "create", sub], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        if mounted:
            subprocess.run(["umount", mounted], check=True)
            mounted = None

        d.start()
        left = [p for p in made if os.path.exists(p)]
        assert not left, f"orphan cgroups survived a start: {left}"
        assert host.wait_until(lambda: sleeper.poll() is not None, 10), \
            "the process in the orphan cgroup survived a start"
        assert ORPHAN not in d.subvolumes(), "the orphan subvolume survived a start"
        # the real sandbox was found again
        assert d.sh(e, "echo fine") == "fine\n"
        ev = d.api("GET", "/v1/events", params={"type": "worker.reconciled"}).json()["events"]
        assert ev and ev[-1]["data"].get("orphans_removed", 0) >= 1, ev[-1:]
    finally:
        if mounted:
            subprocess.run(["umount", mounted])
        if sleeper and sleeper.poll() is None:
            sleeper.kill()
        if sleeper:
            sleeper.wait()
        if not d.running:
            d.start()
        d.delete(e)
        # if the daemon did not remove them, do it (they are ours) after failing
        for r in host.cgroup_roots(d.cgroup_root):
            p = os.path.join(r, ORPHAN)
            if os.path.isdir(p):
                try:
                    os.rmdir(p)
                except OSError:
                    pass
        sub = d.host_view(d.pool_path("sandboxes", ORPHAN))
        if os.path.exists(sub):
            subprocess.run(["btrfs", "subvolume", "delete", sub], capture_output=True)


def test_sigterm_restart_keeps_sandboxes(d):
    s = d.create()["id"]
    try:
        d.sh(s, "echo 1 > /root/f")
        pid = d.agent_pid(s)
        d.restart()
        assert d.show(s).json()["state"] == "running"
        assert d.agent_pid(s) == pid
        assert d.sh(s, "cat /root/f") == "1\n"
    finally:
        d.delete(s)


def test_stop_without_sandboxes_releases_pool(d):
    assert not [x for x in d.list_all().values() if x["state"] != "deleted"], d.list_all()
    problems = d.stop()
    assert not problems, problems
    problems = residue.released_problems(d)
    assert not problems, problems
    d.start()
    sid = d.create()["id"]
    assert d.sh(sid, "echo back") == "back\n"
    d.delete(sid)


def test_double_start_refused(d):
    """A second spaced on the same state directory refuses to start."""
    p = subprocess.run(d.args()[:1] + ["--state-dir", d.state_dir, "--listen", "127.0.0.1:1",
                                       "--cgroup-root", d.cgroup_root + "x"] + d.net_args(),
                       capture_output=True, text=True, timeout=60, env=clean_env())
    assert p.returncode != 0, p
    assert d.api("GET", "/healthz", key=None).status == 200
    time.sleep(0.2)


def test_spawner_killed_after_clone_leaves_no_pid1(d):
    """The spawner dies after it cloned a PID 1 and before it answered (strace
    kills it at the answer's sendmsg): the create is made by the worker
    itself, and the orphan PID 1 (the worker's child, waiting for a root that
    will never come) is killed and reaped: no zombie, nothing left in its
    cgroup but the new sandbox."""
    procs = host.descendants(d.pid)
    spawner = next(p for p in procs if host.proc_status(p, "Name") == "space-spawner")
    worker = host.proc_ppid(spawner)
    st = subprocess.Popen(["strace", "-qq", "-o", "/dev/null", "-p", str(spawner), "-e", "trace=sendmsg",
                           "-e", "inject=sendmsg:signal=SIGKILL:when=1"], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert host.wait_until(lambda: host.proc_status(spawner, "TracerPid") == str(st.pid), timeout=30)
        start = d.log_size()
        sid = d.create()["id"]
        try:
            assert st.wait(timeout=30) is not None
            assert not host.proc_exists(spawner) or host.proc_status(spawner, "State")[0] != "Z"
            assert "the lost spawner's PID 1" in d.log_text(start), d.log_tail(40, start)
            assert d.sh(sid, "echo up") == "up\n"
            zombies = [p for p in host.children(worker) if host.proc_status(p, "State")[0] == "Z"]
            assert not zombies, zombies
            pid1s = [p for p in host.children(worker) if any(sid in c for c in host.proc_cgroups(p))]
            assert len(pid1s) == 1, pid1s
        finally:
            d.delete(sid)
        assert host.wait_until(lambda: not residue.items_of_sandbox(d.s, sid), 5), residue.items_of_sandbox(d.s, sid)
    finally:
        if st.poll() is None:
            st.kill()
            st.wait()
        d.restart()  # a spawner again for the next tests


def test_spawner_killed_sandboxes_still_created(d):
    """The spawner (the worker's process that clones ns sandboxes) dies: the
    worker notices at the next create and clones them itself."""
    spawners = [p for p in host.descendants(d.pid) if host.proc_status(p, "Name") == "space-spawner"]
    assert len(spawners) == 1, spawners
    host.kill_pid(spawners[0], signal.SIGKILL)
    made = []
    try:
        for _ in range(2):
            made.append(d.create()["id"])
            assert d.sh(made[-1], "echo up") == "up\n"
        # the dead spawner was reaped, not left a zombie
        assert not host.proc_exists(spawners[0]) or host.proc_status(spawners[0], "State")[0] != "Z"
        r = d.api("POST", f"/v1/sandboxes/{made[0]}/branch", json={"count": 2})
        assert r.status == 201, r.body
        made += [k["id"] for k in r.json()["sandboxes"]]
        assert d.sh(made[-1], "echo branched") == "branched\n"
    finally:
        for s in made:
            d.delete(s)
    for s in made:
        assert host.wait_until(lambda: not residue.items_of_sandbox(d.s, s), 5), residue.items_of_sandbox(d.s, s)
