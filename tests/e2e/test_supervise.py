# SPDX-License-Identifier: MIT
"""The supervised worker (role all): a worker, gateway or spawner that dies
is started again while sandboxes keep running and the API answers 503
worker_unavailable with Retry-After; /healthz and /readyz tell the parts
apart; a delete or template import cut short by a dying worker is finished
or rolled back; the log file is reopened on SIGHUP and rotated at
log_max_mb. Every process signalled here is one of the spaced this module
started (found by its parent pid and name)."""

import http.client
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import threading
import time

import pytest

from e2e_daemon import clean_env, net_pool_cidr, take_net_pool
import e2e_host as host
import e2e_residue as residue

RESTART_TIMEOUT = 60


@pytest.fixture(scope="module")
def d(e2e_session, request):
    """A spaced of this module, logging to its log file itself (log_file),
    rotated past 1 MiB (the last test fills it)."""
    dm = e2e_session.new_daemon()
    dm.extra_args += ["--log-file", dm.log_path, "--log-max-mb", "1"]
    dm.start()
    yield dm
    residue.finish_daemon(dm, request)


def named_children(pid, name):
    return [p for p in host.children(pid) if host.proc_status(p, "Name") == name]


def worker_of(d):
    """The worker process: spaced's child called space-worker."""
    ws = named_children(d.pid, "space-worker")
    assert len(ws) == 1, (ws, host.children(d.pid))
    return ws[0]


def helper_of(d, name):
    hs = named_children(worker_of(d), name)
    assert len(hs) == 1, (name, hs)
    return hs[0]


def ready(d):
    return d.api("GET", "/readyz", key=None, timeout=10).status == 200


def wait_ready(d, timeout=RESTART_TIMEOUT):
    assert host.wait_until(lambda: ready(d), timeout=timeout, interval=0.05), \
        f"not ready again within {timeout}s:\n{d.log_tail(40)}"


def new_worker(d, old):
    """The worker that replaced old, once it serves."""
    wait_ready(d)
    w = worker_of(d)
    assert w != old, "the worker was not replaced"
    return w


def health(d):
    r = d.api("GET", "/healthz", key=None, timeout=10)
    assert r.status == 200, r
    return r.json()


def assert_worker_unavailable(r):
    assert r.status == 503, r
    assert r.json()["error"]["code"] == "worker_unavailable", r.body
    assert int(r.headers.get("retry-after", "0")) >= 1, r.headers


def test_worker_kill9_is_restarted_sandboxes_live_on(d):
    sid = d.create()["id"]
    try:
        agent = d.agent_pid(sid)
        old = worker_of(d)
        before = health(d)["components"]["worker"]["restarts"]
        host.kill_pid(old, signal.SIGKILL)
        # during the gap what needs the worker is a 503 worker_unavailable, never a 500 or a hang
        seen = []
        end = time.monotonic() + RESTART_TIMEOUT
        while time.monotonic() < end:
            r = d.api("GET", "/v1/info", timeout=10)
            seen.append(r.status)
            if r.status == 200:
                break
            assert_worker_unavailable(r)
            time.sleep(0.02)
        assert seen and seen[-1] == 200, seen
        new = new_worker(d, old)
        assert host.proc_ppid(new) == d.pid
        # the new worker has the instance settings spaced derived (uid range, names)
        m = re.search(r"Instance (\S+): cgroup root (\S+), uids (\d+)-", d.log_text())
        assert m, d.log_tail(40)
        argv = host.proc_cmdline(new)
        assert argv[1:3] == ["worker-process", "restart"], argv
        for a in (f"--instance={m.group(1)}", f"--cgroup-root={m.group(2)}", f"--uid-base={m.group(3)}"):
            assert a in argv, (a, argv)
        h = health(d)["components"]["worker"]
        assert h["status"] == "ok" and h["restarts"] == before + 1, h
        assert "SIGKILL" in h["last_exit"], h
        m = d.api("GET", "/metrics", key=None).text()
        assert f"space_worker_restarts_total {before + 1}" in m, m
        assert "space_worker_up 1" in m, m
        assert "was killed by signal SIGKILL; starting it again" in d.log_text(), d.log_tail(30)
        # the sandbox was adopted, not started again
        assert d.show(sid).json()["state"] == "running"
        assert d.agent_pid(sid) == agent
        assert d.sh(sid, "echo still") == "still\n"
    finally:
        d.delete(sid)
    assert host.wait_until(lambda: not residue.items_of_sandbox(d.s, sid), 5), residue.items_of_sandbox(d.s, sid)


def test_worker_down_is_503_with_retry_after(d):
    """A worker that keeps dying is started again later each time (backoff):
    in the gap a create is 503 worker_unavailable with Retry-After."""
    caught = None
    for _ in range(6):
        old = worker_of(d)
        host.kill_pid(old, signal.SIGKILL)
        assert host.wait_until(lambda: not host.proc_exists(old) or
                               host.proc_status(old, "State")[0] == "Z", timeout=10)
        r = d.api("POST", "/v1/sandboxes", json={}, timeout=60)
        if r.status == 201:
            d.delete(r.json()["id"])
        else:
            assert_worker_unavailable(r)
            caught = r
            # still down (unless the restart came in between): /healthz says so, /readyz fails
            h = health(d)
            if h["components"]["worker"]["status"] != "ok":
                assert h["status"] == "degraded", h
                assert h["components"]["worker"]["status"] in ("down", "starting"), h
            rz = d.api("GET", "/readyz", key=None)
            if rz.status != 200:
                assert_worker_unavailable(rz)
                assert "worker" in rz.json()["error"]["message"], rz.body
        new_worker(d, old)
        if caught:
            break
    assert caught is not None, "never caught the worker down"
    sid = d.create()["id"]
    assert d.sh(sid, "echo up") == "up\n"
    d.delete(sid)


def test_gateway_kill9_is_restarted(d):
    gw = helper_of(d, "space-gateway")
    host.kill_pid(gw, signal.SIGKILL)
    # at once, before or after the worker noticed: a create works (or is a 503), never 500 Broken pipe
    made = []
    try:
        r = d.api("POST", "/v1/sandboxes", json={}, timeout=60)
        assert r.status in (201, 503), r
        if r.status == 503:
            assert_worker_unavailable(r)
        else:
            made.append(r.json()["id"])
        assert host.wait_until(lambda: named_children(worker_of(d), "space-gateway") not in ([], [gw]),
                               timeout=RESTART_TIMEOUT)
        made.append(d.create()["id"])
        assert d.sh(made[-1], "echo up") == "up\n"
        g = health(d)["components"]["gateway"]
        assert g["status"] == "ok" and g["restarts"] >= 1 and g["pid"] != gw, g
    finally:
        for s in made:
            d.delete(s)


def test_create_meets_dead_gateway(d):
    """A create reaches the worker before it noticed its gateway died: the
    create goes over an API connection whose thread is connected to the
    worker already (HTTP keep-alive), the worker is stopped meanwhile so the
    create waits in its socket ahead of the gateway's hangup. A new gateway
    takes the registration and the create succeeds (today: 500 cannot
    register sandbox with the gateway: Broken pipe)."""
    w = worker_of(d)
    gw = helper_of(d, "space-gateway")
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=120)
    auth = {"Authorization": f"Bearer {d.admin_key}", "Content-Type": "application/json"}
    conn.request("GET", "/v1/info", headers=auth)  # this connection's thread now holds a worker connection
    first = conn.getresponse()
    assert first.status == 200 and first.read()
    os.kill(w, signal.SIGSTOP)
    res = {}

    def create():
        conn.request("POST", "/v1/sandboxes", body=b"{}", headers=auth)
        r = conn.getresponse()
        res["r"] = (r.status, r.read())
    t = threading.Thread(target=create)
    try:
        t.start()
        time.sleep(0.5)  # the create is in the worker's socket
        host.kill_pid(gw, signal.SIGKILL)
        time.sleep(0.2)
    finally:
        os.kill(w, signal.SIGCONT)
    t.join(120)
    conn.close()
    status, body = res["r"]
    assert status == 201, (status, body)
    sid = json.loads(body)["id"]
    d.known_alive.add(sid)
    try:
        assert d.sh(sid, "echo up") == "up\n"
        g = health(d)["components"]["gateway"]
        assert g["status"] == "ok" and g["pid"] != gw, g
        assert "The gateway (pid %d) is gone (Broken pipe)" % gw in d.log_text(), d.log_tail(30)
    finally:
        d.delete(sid)


def test_spawner_kill9_is_restarted(d):
    sp = helper_of(d, "space-spawner")
    host.kill_pid(sp, signal.SIGKILL)
    assert host.wait_until(lambda: named_children(worker_of(d), "space-spawner") not in ([], [sp]),
                           timeout=RESTART_TIMEOUT), d.log_tail(20)
    s = health(d)["components"]["spawner"]
    assert s["status"] == "ok" and s["restarts"] >= 1, s
    assert "Spawner restarted" in d.log_text()
    sid = d.create()["id"]
    try:
        assert d.sh(sid, "echo up") == "up\n"
    finally:
        d.delete(sid)


def test_sigstop_worker_fails_readyz_not_healthz(d):
    sid = d.create()["id"]
    w = worker_of(d)
    os.kill(w, signal.SIGSTOP)
    try:
        # exec reaches the sandbox's agent without the worker
        assert d.sh(sid, "echo direct", timeout=30) == "direct\n"
        def not_ready():
            r = d.api("GET", "/readyz", key=None, timeout=10)
            return r if r.status == 503 else None
        assert host.wait_until(lambda: not_ready() is not None, timeout=20)
        r = not_ready()
        assert_worker_unavailable(r)
        assert "worker is not responding" in r.json()["error"]["message"], r.body
        h = health(d)
        assert h["status"] == "degraded", h
        assert h["components"]["worker"]["status"] == "not_responding", h
        assert h["components"]["store"]["status"] == "ok", h
    finally:
        os.kill(w, signal.SIGCONT)
    wait_ready(d, 30)
    assert worker_of(d) == w, "a stopped worker is waited for, not replaced"
    d.delete(sid)


def test_delete_cut_short_by_worker_death_finishes(d):
    """The worker dies with a delete in flight (it is stopped first, so the
    request waits in its socket; then killed): the sandbox stays deleting,
    the restarted worker deletes it completely, it never ends in error."""
    sid = d.create()["id"]
    old = worker_of(d)
    os.kill(old, signal.SIGSTOP)
    res = {}
    t = threading.Thread(target=lambda: res.update(r=d.api("DELETE", f"/v1/sandboxes/{sid}", timeout=120)))
    t.start()
    try:
        assert host.wait_until(lambda: d.api("GET", f"/v1/sandboxes/{sid}").json().get("state") == "deleting",
                               timeout=20)
        time.sleep(0.3)  # the request is in the worker's socket
    finally:
        host.kill_pid(old, signal.SIGKILL)
    t.join(120)
    assert_worker_unavailable(res["r"])
    assert "finishes when the worker is back" in res["r"].json()["error"]["message"]
    new_worker(d, old)

    def gone():
        r = d.api("GET", f"/v1/sandboxes/{sid}")
        return r.status == 404 or r.json().get("state") == "deleted"
    assert host.wait_until(gone, timeout=30), d.show(sid).body
    d.known_alive.discard(sid)
    lst = d.api("GET", "/v1/sandboxes", params={"state": "error"}).json()["sandboxes"]
    assert sid not in [x["id"] for x in lst]
    assert host.wait_until(lambda: not residue.items_of_sandbox(d.s, sid), timeout=10), \
        residue.items_of_sandbox(d.s, sid)
    assert sid not in d.subvolumes()


def test_suspend_cut_short_by_worker_death_keeps_the_sandbox(d):
    """The worker dies with a suspend in its socket: 503, the sandbox is back
    to running (not error) and the restarted worker adopts it."""
    sid = d.create()["id"]
    try:
        agent = d.agent_pid(sid)
        old = worker_of(d)
        os.kill(old, signal.SIGSTOP)
        res = {}
        t = threading.Thread(target=lambda: res.update(r=d.api("POST", f"/v1/sandboxes/{sid}/suspend", timeout=120)))
        t.start()
        try:
            time.sleep(0.5)
        finally:
            host.kill_pid(old, signal.SIGKILL)
        t.join(120)
        assert_worker_unavailable(res["r"])
        new_worker(d, old)
        v = d.show(sid).json()
        assert v["state"] == "running", v
        assert d.agent_pid(sid) == agent
        assert d.sh(sid, "echo kept") == "kept\n"
    finally:
        d.delete(sid)


def many_files_tar(n):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for i in range(n):
            ti = tarfile.TarInfo(f"d{i // 1000}/f{i}")
            ti.size = 0
            tf.addfile(ti)
    return buf.getvalue()


def templates(d):
    return {t["name"]: t for t in d.api("GET", "/v1/templates").json()["templates"]}


def test_worker_killed_during_template_import(d):
    """The worker dies while tar extracts an import: the import is a 503,
    the template is not left importing, tar died with the worker and the
    half-written import is gone from the pool at the restart."""
    body = many_files_tar(60000)
    old = worker_of(d)
    res = {}
    t = threading.Thread(target=lambda: res.update(r=d.api(
        "POST", "/v1/templates", params={"name": "cutshort"}, data=body,
        headers={"Content-Type": "application/x-tar"}, timeout=300)))
    t.start()
    tars = []
    try:
        assert host.wait_until(lambda: tars.extend(named_children(old, "tar")) or tars, timeout=60, interval=0.005), \
            "tar never ran"
    finally:
        host.kill_pid(old, signal.SIGKILL)
    t.join(300)
    assert res["r"].status == 503, res["r"]
    assert "cutshort" not in templates(d)
    assert not host.wait_gone(tars, 10), "tar outlived the worker"
    new_worker(d, old)
    assert not [x for x in os.listdir(d.host_view(d.pool_path("tmp"))) if x.startswith("cutshort")]
    assert "cutshort" not in templates(d)


def test_spaced_killed_during_template_import_rolls_back(d):
    """spaced itself dies with an import in flight (the worker is stopped so
    that the import waits in it; then both are killed): the next start rolls
    the template back instead of leaving it importing forever."""
    w = worker_of(d)
    os.kill(w, signal.SIGSTOP)
    res = {}
    tar = d.s.base_template()
    with open(tar, "rb") as f:
        body = f.read()
    t = threading.Thread(target=lambda: res.update(r=_try(lambda: d.api(
        "POST", "/v1/templates", params={"name": "killedimport"}, data=body,
        headers={"Content-Type": "application/x-tar"}, timeout=120, validate=False))))
    t.start()
    try:
        assert host.wait_until(lambda: templates(d).get("killedimport", {}).get("state") == "importing",
                               timeout=30)
    finally:
        d.kill9()  # spaced and its (stopped) worker
    t.join(60)
    d.start()
    assert "killedimport" not in templates(d), templates(d)
    ev = d.api("GET", "/v1/events", params={"type": "template.removed"}).json()["events"]
    assert any("interrupted" in e["reason"] for e in ev), ev
    # the name can be used again
    r = d.api("POST", "/v1/templates", params={"name": "killedimport"}, data=body,
              headers={"Content-Type": "application/x-tar"}, timeout=300)
    assert r.status == 201, r
    assert d.api("DELETE", "/v1/templates/killedimport").status == 204


def _try(f):
    try:
        return f()
    except OSError as e:
        return e


def test_ls_says_what_it_hides(d):
    """A sandbox found dead at a worker restart is error; space ls hides it
    and says so, --all shows it."""
    sid = d.create()["id"]
    try:
        w = worker_of(d)
        pids = d.sandbox_pids(sid)
        os.kill(w, signal.SIGSTOP)
        try:
            for p in pids:
                host.kill_pid(p, signal.SIGKILL)
            assert not host.wait_gone(pids, 10)
        finally:
            host.kill_pid(w, signal.SIGKILL)
        new_worker(d, w)
        assert host.wait_until(lambda: d.show(sid).json()["state"] == "error", timeout=20), d.show(sid).body
        r = d.cli("ls")
        assert r.rc == 0, r
        assert sid not in r.out
        assert "1 sandbox in state error hidden; space ls --all shows them" in r.err, r
        r = d.cli("ls", "--all")
        assert r.rc == 0 and sid in r.out and "hidden" not in r.err, r
    finally:
        d.delete(sid)


def test_sighup_reopens_log(d):
    moved = d.log_path + ".moved"
    os.rename(d.log_path, moved)
    try:
        os.kill(d.pid, signal.SIGHUP)
        assert host.wait_until(lambda: "Log reopened (SIGHUP)" in d.log_text(), timeout=10)
        sid = d.create()["id"]  # lines of spaced and of its worker
        d.delete(sid)
        text = d.log_text()
        assert "path=/v1/sandboxes" in text, text[-2000:]
        assert "component=worker" in text, text[-2000:]
        assert d.running and ready(d)
    finally:
        # the earlier lines stay part of the daemon's log (sanitizer checks read it)
        with open(moved, "rb") as f:
            old = f.read()
        with open(d.log_path + ".before-hup", "wb") as f:
            f.write(old)
        os.unlink(moved)


def test_log_rotated_past_log_max_mb(d):
    start = os.path.getsize(d.log_path)
    long_path = "/v1/" + "x" * 3000  # a log line of ~2 KiB (its message is cut there)
    for _ in range(2000):
        if os.path.exists(d.log_path + ".1"):
            break
        d.api("GET", long_path, key=None, validate=False)
    assert host.wait_until(lambda: os.path.exists(d.log_path + ".1"), timeout=10), start
    assert host.wait_until(lambda: "Log rotated" in d.log_text(), timeout=10)
    assert os.path.getsize(d.log_path) < 1024 * 1024
    assert os.path.getsize(d.log_path + ".1") >= 1024 * 1024
    assert d.running and ready(d)


def test_no_second_daemon_while_the_old_worker_lives(d):
    """spaced dies but its worker lives on a moment (here: it is stopped, so
    its parent-death SIGTERM waits): a new spaced on the same state dir is
    refused until that worker is gone (it holds spaced's lock too), so two
    workers never share a pool."""
    w = worker_of(d)
    os.kill(w, signal.SIGSTOP)
    try:
        host.kill_pid(d.pid, signal.SIGKILL)
        d.proc.wait(30)
        start = d.log_size()
        p = subprocess.run(d.args(), capture_output=True, text=True, timeout=60, env=clean_env())
        assert p.returncode != 0, p
        assert "Another spaced" in d.log_text(start) + p.stderr, d.log_tail(10, start)
    finally:
        os.kill(w, signal.SIGCONT)
    assert not host.wait_gone([w], 60), "the old worker did not stop"
    d.pid = d.proc = None
    d.start()
    assert ready(d)


def test_first_start_failure_is_not_retried(d, tmp_path):
    """The daemon's own first start of the worker fails (a setting only the
    worker uses: its agent binary): spaced exits with the reason instead of
    restarting it."""
    idx, lock = take_net_pool()
    try:
        state = tmp_path / "state"
        args = [d.s.spaced_bin, "--state-dir", str(state), "--listen", "127.0.0.1:1",
                "--agent-path", str(tmp_path / "no-agent"), "--template-dir", str(tmp_path),
                "--pool-size-mb", "1024", "--cgroup-root", d.cgroup_root + "f", "--net-pool", net_pool_cidr(idx),
                "--net-table", d.net_table + "f", "--net-link-prefix", "f" + d.net_prefix, "--slots-max=16"]
        p = subprocess.run(args, capture_output=True, text=True, timeout=120, env=clean_env())
    finally:
        # what it registered on the host goes with it (its entry names its state dir)
        reg = "/run/space/instances"
        for f in os.listdir(reg) if os.path.isdir(reg) else []:
            try:
                with open(os.path.join(reg, f)) as fh:
                    mine = f'"state_dir":"{os.path.realpath(tmp_path / "state")}"' in fh.read()
            except OSError:
                continue
            if mine:
                os.unlink(os.path.join(reg, f))
        shutil.rmtree(tmp_path / "state", ignore_errors=True)
        lock.close()
    assert p.returncode == 1, p
    assert "Cannot open space-agent" in p.stderr, p.stderr
    assert "The worker failed to start" in p.stderr, p.stderr
    assert "starting it again" not in p.stderr, p.stderr
    assert ready(d)


def test_log_file_refused_for_cluster_roles(d, tmp_path):
    log = tmp_path / "x.log"
    p = subprocess.run([d.s.spaced_bin, "--role", "api", "--cluster-token-file", str(tmp_path / "t"),
                        "--store-url", "postgres://127.0.0.1:1/none", "--state-dir", str(tmp_path / "s"),
                        "--log-file", str(log)], capture_output=True, text=True, timeout=60, env=clean_env())
    assert p.returncode == 2, p
    assert "log_file is for role all" in p.stderr, p.stderr
    assert not log.exists()
