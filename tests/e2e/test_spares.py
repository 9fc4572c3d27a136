# SPDX-License-Identifier: MIT
"""Spare roots (src/storage/spare.c): snapshots of the templates creates used
lately, made ahead on the worker's low-priority thread, renamed into place by
a create instead of a snapshot. Through a real spaced: a create takes one
(the gauge space_worker_root_spares counts them, topped up again after);
what a deleted sandbox wrote is in no later sandbox's root; a crash leaves
none behind (the pool's open removes them); root_spares = 0 makes none; a
bad value is refused."""

import os
import re
import subprocess

import pytest

import e2e_host as host
import e2e_residue as residue
from test_metrics import host_gauge


@pytest.fixture(scope="module")
def spares(e2e_session, request):
    d = e2e_session.new_daemon(extra_args=["--root-spares=2"])
    d.start()
    yield d
    residue.finish_daemon(d, request)


def gauge(d):
    return host_gauge(d, "space_worker_root_spares")


def on_disk(d):
    try:
        return sorted(n for n in os.listdir(d.host_view(d.pool_path("tmp"))) if n.startswith("spare."))
    except OSError:
        return []


def test_a_create_takes_a_spare_of_its_template(spares):
    d = spares
    first = d.create()["id"]  # the template is wanted from now on
    host.wait_until(lambda: gauge(d) == 2, 20)
    made = on_disk(d)
    assert len(made) == 2, made
    # what one sandbox leaves in its root
    d.sh(first, "echo mine > /etc/left-behind && sync")
    d.delete(first)
    second = d.create()["id"]
    try:
        taken = set(made) - set(on_disk(d))
        assert taken, f"the create made its own snapshot: spares {made} all still there"
        assert d.sh(second, "cat /etc/left-behind 2>/dev/null; echo up") == "up\n"
        # topped up again, never more than asked for
        host.wait_until(lambda: gauge(d) == 2, 20)
        assert len(on_disk(d)) == 2, on_disk(d)
    finally:
        d.delete(second)


def test_a_crash_leaves_no_spare_and_zero_makes_none(spares):
    d = spares
    sid = d.create()["id"]
    d.delete(sid)
    host.wait_until(lambda: gauge(d) == 2, 20)
    d.kill9()
    d.extra_args = [a for a in d.extra_args if not a.startswith("--root-spares")] + ["--root-spares=0"]
    d.start()
    assert on_disk(d) == [], "spares of the crashed worker are still in the pool"
    sid = d.create()["id"]
    try:
        assert d.sh(sid, "echo up") == "up\n"
        assert gauge(d) == 0
        assert on_disk(d) == []
    finally:
        d.delete(sid)


def test_a_bad_root_spares_is_refused(e2e_session, tmp_path):
    r = subprocess.run([e2e_session.spaced_bin, "--root-spares", "9", "--state-dir", str(tmp_path / "s")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "root_spares: 9 is out of range [0, 8]" in r.stderr, r.stderr


def test_pid1_and_what_it_runs_are_in_every_cgroup_of_the_sandbox(spaced):
    # PID 1's cgroup v1 moves run after the spawner answered (worker-spawner.c):
    # PID 1 runs nothing before they are done, so neither it nor the first
    # thing it runs is left outside a hierarchy (and its limits)
    d = spaced
    sid = d.create()["id"]
    try:
        # its cgroup namespace is rooted at its own cgroups, on every hierarchy (it was made
        # after the moves): nothing above them shows
        inside = d.sh(sid, "cat /proc/self/cgroup")
        assert sid not in inside and d.cgroup_root not in inside, inside
        out = d.sh(sid, "cat /proc/self/status | grep ^NSpid; sleep 30 & echo $!")
        pid1 = d.agent_pid(sid)
        assert pid1, "no PID 1 found in the sandbox's cgroups"
        kids = [p for p in d.sandbox_pids(sid) if "sleep" in " ".join(host.proc_cmdline(p))]
        assert kids, f"the sleep it started is in none of its cgroups: {out!r}"
        for p in [pid1] + kids:
            groups = host.proc_cgroups(p)
            assert groups, p
            outside = [g for g in groups if g not in ("/", "") and sid not in g]
            assert not outside, f"pid {p} of {sid} is outside its cgroups: {groups}"
            assert all(sid in g for g in groups if g not in ("/",)), groups
    finally:
        d.delete(sid)


def spawner_writes_before_answer(d, spawner, tmp_path):
    """How many write()s a spawn makes before its answer (the sendmsg): a
    create traced, the count read from strace's log."""
    log = str(tmp_path / "spawner.strace")
    st = subprocess.Popen(["strace", "-qq", "-o", log, "-p", str(spawner), "-e", "trace=write,sendmsg"],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert host.wait_until(lambda: host.proc_status(spawner, "TracerPid") == str(st.pid), timeout=30)
        sid = d.create()["id"]
        d.delete(sid)
    finally:
        st.terminate()
        st.wait()
    n = 0
    with open(log) as f:
        for line in f:
            if line.startswith("sendmsg("):
                return n
            if line.startswith("write("):
                n += 1
    raise AssertionError("no answer in the spawner's trace")


def test_spawner_killed_while_it_moves_pid1_fails_only_that_create(fresh_spaced, tmp_path):
    """The spawner answers before PID 1's cgroup v1 moves; it dies during them
    (strace kills it at its first write after the answer, a cgroup.procs
    write or the go to PID 1): PID 1 runs nothing (outside its cgroups or
    in), that create fails with its reason, nothing of it is left, and the
    next create works (the worker clones itself)."""
    d = fresh_spaced
    procs = host.descendants(d.pid)
    spawner = next(p for p in procs if host.proc_status(p, "Name") == "space-spawner")
    worker = host.proc_ppid(spawner)
    k = spawner_writes_before_answer(d, spawner, tmp_path)
    st = subprocess.Popen(["strace", "-qq", "-o", "/dev/null", "-p", str(spawner), "-e", "trace=write",
                           "-e", f"inject=write:signal=SIGKILL:when={k + 1}"], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    made = []
    try:
        assert host.wait_until(lambda: host.proc_status(spawner, "TracerPid") == str(st.pid), timeout=30)
        before = set(host.children(worker))
        r = d.api("POST", "/v1/sandboxes", json={}, timeout=60)
        assert r.status == 500, r.body
        # PID 1 reports the step it failed at, or dies with the spawner first
        assert re.search(r"sandbox setup (failed at step|died)", r.json()["error"]["message"]), r.body
        assert st.wait(timeout=30) is not None
        # no PID 1 of the failed create left, running or a zombie
        new = set(host.children(worker)) - before
        assert host.wait_until(lambda: not [p for p in new if host.proc_exists(p)
                                            and host.proc_status(p, "State")[0] != "Z"], 5), new
        made.append(d.create()["id"])
        assert d.sh(made[-1], "echo up") == "up\n"
    finally:
        if st.poll() is None:
            st.kill()
            st.wait()
        for sid in made:
            d.delete(sid)
        d.restart()  # a spawner again
