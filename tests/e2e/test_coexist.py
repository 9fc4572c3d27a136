# SPDX-License-Identifier: MIT
"""Two daemons on one host, each with the default host settings (only
--state-dir and --listen differ): each has an instance identity derived from
its state directory (cgroup root, nft table, link prefix, uid range, net
pool; src/shared/instance.h), and whatever one does (first start, stop,
kill -9, restart) leaves the other's sandboxes alone. Overlapping explicit
settings are refused at start, naming the other daemon.

The daemons here run without the harness's explicit cgroup_root / net_*
values, on state directories below this session's temp dirs, so their
derived names (space-<hash>) are their own; nothing runs on /var/lib/space."""

import json
import os
import signal
import socket
import subprocess
import time

import pytest

import e2e_host as host
import e2e_residue as residue
from e2e_daemon import Daemon, clean_env, net_pool_cidr, take_net_pool

REGISTRY = "/run/space/instances"
GATEWAY_PROXY_PORT = 10080      # the default: both daemons keep it (bound on each host end)


def fnv1a(s):
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


class DefaultDaemon(Daemon):
    """A spaced with only the test's paths: no cgroup root, uid range or net settings."""

    def __init__(self, session, n, extra=()):
        super().__init__(session, n, extra_args=extra)
        # what it should derive from its state directory (src/shared/instance.c)
        hexid = f"{fnv1a(os.path.realpath(self.state_dir)) & 0xFFFFFF:06x}"
        self.instance = f"space-{hexid}"
        self.cgroup_root = self.net_table = self.instance
        self.net_prefix = f"sp{hexid}-"
        self.sleepers = {}        # sandbox id -> (host pid, start time) of its long-running process

    def start(self, timeout=None):
        super().start()
        # the names it took, as it says (what the checks below look at)
        i = self.info()
        self.cgroup_root = i.get("instance", {}).get("cgroup_root", "space")
        self.net_table = i["network"]["nft_table"]
        self.net_prefix = i["network"]["link_prefix"]

    def args(self):
        return [self.s.spaced_bin, "--state-dir", self.state_dir, "--listen", f"{self.host}:{self.port}",
                "--template-dir", self.template_dir, "--agent-path", self.s.agent_bin,
                "--pool-size-mb", "4096", "--default-disk-mb", "256", "--log-level", "debug"] + self.extra_args

    def _not_sandbox(self, pids):
        tag = f"/{self.cgroup_root}/"
        return [p for p in pids if host.proc_exists(p) and not any(tag in c for c in host.proc_cgroups(p))]

    def info(self):
        r = self.api("GET", "/v1/info")
        assert r.status == 200, r
        return r.json()

    def down(self):
        """space down for this state directory (SIGTERM by spaced.pid, wait)."""
        pid = self.pid
        c = self.cli("down", "--state-dir", self.state_dir, timeout=120)
        assert c.rc == 0 and "space is down" in c.out, c
        assert self.proc.wait(30) == 0, f"spaced exited with {self.proc.returncode}"
        assert not host.proc_exists(pid)
        self.pid = self.proc = None
        reports = self.sanitizer_reports()
        assert not reports, reports

    def crash(self):
        """kill -9 of this spaced and its worker (by pid); the sandboxes keep running."""
        self.kill9()

    def add_sandbox(self):
        sid = self.create()["id"]
        self.sh(sid, "setsid sleep 100000 </dev/null >/dev/null 2>&1 &")
        pid = None
        end = time.monotonic() + 10
        while pid is None and time.monotonic() < end:
            pid = next((p for p in self.sandbox_pids(sid) if host.proc_cmdline(p)[:1] == ["sleep"]), None)
            time.sleep(0.1)
        assert pid, f"no sleep process in sandbox {sid}"
        self.sleepers[sid] = (pid, host.proc_starttime(pid))
        return sid


def new_default_daemon(session, extra=()):
    session.check_binaries()
    n = session.counter
    session.counter += 1
    d = DefaultDaemon(session, n, extra)
    session.daemons.append(d)
    return d


def host_end(link):
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", link], capture_output=True, text=True).stdout
    for word in out.split():
        if "/" in word and word[0].isdigit():
            return word.split("/")[0]
    return None


def cgroup_root_dirs(name):
    return [os.path.join(h, name) for h in host.cgroup_hierarchies() if os.path.isdir(os.path.join(h, name))]


def assert_untouched(d, why):
    """d's sandboxes are as they were: their process alive, exec works, their
    cgroups, links and nft table there, its gateway answering on each host end,
    and a new sandbox can still be made (its cgroup root is there)."""
    assert d.running, f"{why}: spaced of {d.instance} died"
    for sid, (pid, st) in d.sleepers.items():
        assert host.proc_exists(pid) and host.proc_starttime(pid) == st, \
            f"{why}: the process {pid} of sandbox {sid} of {d.instance} is gone"
        assert d.cgroup_dirs(sid), f"{why}: the cgroups of sandbox {sid} of {d.instance} are gone"
        assert d.show(sid).json()["state"] == "running", f"{why}: sandbox {sid}: {d.show(sid).json()}"
        assert d.sh(sid, "echo alive") == "alive\n", why
    # a deleted sandbox's link goes with its teardown, just after the delete answered
    host.wait_until(lambda: len(d.net_links()) == len(d.sleepers), 10)
    links = d.net_links()
    assert len(links) == len(d.sleepers), f"{why}: links of {d.instance}: {sorted(links)}, {len(d.sleepers)} sandboxes"
    assert d.net_table_exists(), f"{why}: the nft table {d.net_table} is gone"
    for link in links:
        addr = host_end(link)
        assert addr, f"{why}: link {link} has no address"
        with socket.create_connection((addr, GATEWAY_PROXY_PORT), timeout=5):
            pass
    sid = d.create()["id"]
    d.delete(sid)


def all_gone(d):
    """Nothing of d left on the host once it stopped with no sandbox."""
    problems = residue.released_problems(d)
    problems += [f"cgroup root {p} left" for p in cgroup_root_dirs(d.cgroup_root)]
    problems += [f"process {p} of sandbox {sid} left" for sid, (p, st) in d.sleepers.items()
                 if host.proc_exists(p) and host.proc_starttime(p) == st]
    return problems


def registry_entry(d):
    try:
        with open(os.path.join(REGISTRY, d.instance + ".json")) as f:
            return json.load(f)
    except OSError:
        return None


def forget(d):
    """Removes d's registry entry (its state directory goes with the test)."""
    try:
        os.unlink(os.path.join(REGISTRY, d.instance + ".json"))
    except OSError:
        pass


@pytest.fixture
def pair(e2e_session):
    a, b = new_default_daemon(e2e_session), new_default_daemon(e2e_session)
    yield a, b
    problems = []
    for d in (a, b):
        problems += residue.teardown_daemon(d)
    for d in (a, b):
        problems += [f"{d.instance}: {p}" for p in all_gone(d)]
        forget(d)
    assert not problems, problems


@pytest.mark.timeout(900)
def test_two_default_daemons_leave_each_other_alone(pair):
    a, b = pair
    a.start()
    a.add_sandbox()
    a.add_sandbox()
    # the second daemon's first start (and its orphan scan) next to a running one;
    # a link under its prefix that is not <prefix><slot> is not its own either
    foreign = b.net_prefix + "x"
    host.run(["ip", "link", "add", foreign, "type", "veth", "peer", "name", foreign + "p"], check=True)
    try:
        b.start()
        assert foreign in host.links(), f"{b.instance}'s orphan scan removed the link {foreign}"
    finally:
        host.run(["ip", "link", "del", foreign])
    assert_untouched(a, f"after the first start of {b.instance}")
    b.add_sandbox()
    for x, y in ((b, a), (a, b)):
        x.add_sandbox()
        x.down()
        assert_untouched(y, f"after space down of {x.instance}")
        x.start()
        assert_untouched(y, f"after the restart of {x.instance}")
        assert_untouched(x, f"{x.instance} restarted")
        x.crash()
        assert_untouched(y, f"after kill -9 of {x.instance}")
        x.start()
        assert_untouched(y, f"after {x.instance} started again after kill -9")
        assert_untouched(x, f"{x.instance} restarted after kill -9")

    # the same gateway ports, each on its own host ends: a sandbox reaches its
    # own daemon's gateway, never the other's
    for x, y in ((a, b), (b, a)):
        sid = next(iter(x.sleepers))
        own = host_end(sorted(x.net_links())[0])
        other = host_end(sorted(y.net_links())[0])
        probe = "timeout 3 bash -c 'exec 3<>/dev/tcp/{}/{}'; echo $?"
        assert x.sh(sid, probe.format(own, GATEWAY_PROXY_PORT)).strip() == "0"
        assert x.sh(sid, probe.format(other, GATEWAY_PROXY_PORT)).strip() != "0", \
            f"a sandbox of {x.instance} reached the gateway of {y.instance} at {other}"

    # each on its own names and ranges, derived from its state directory
    ia, ib = a.info(), b.info()
    for d, i in ((a, ia), (b, ib)):
        assert i["instance"]["name"] == d.instance, i["instance"]
        assert i["instance"]["cgroup_root"] == d.instance
        assert i["network"]["nft_table"] == d.instance and i["network"]["link_prefix"] == d.net_prefix
        assert i["network"]["gateway_ports"]["proxy"] == GATEWAY_PROXY_PORT
        e = registry_entry(d)
        assert e and e["state_dir"] == os.path.realpath(d.state_dir) and e["pid"] == d.pid, e
        with open(os.path.join(d.state_dir, "instance.json")) as f:
            kept = json.load(f)
        assert kept == {"instance": d.instance, "uid_base": i["instance"]["uid_base"],
                        "net_pool": i["network"]["pool"]}, kept
        c = d.cli("info")
        assert c.rc == 0 and d.instance in c.out and str(i["instance"]["uid_base"]) in c.out, c
    ua, ub = ia["instance"], ib["instance"]
    assert ua["uid_base"] + ua["uid_count"] <= ub["uid_base"] or ub["uid_base"] + ub["uid_count"] <= ua["uid_base"], \
        (ua, ub)
    assert ia["network"]["pool"] != ib["network"]["pool"]

    # the first start kept its ranges: the restarts above took the same ones
    for d in (a, b):
        d.down()
        d.start()
    assert a.info()["instance"] == ua and b.info()["instance"] == ub
    assert a.info()["network"]["pool"] == ia["network"]["pool"]

    # both stop with nothing running: nothing of either is left
    for d in (a, b):
        for sid in list(d.sleepers):
            d.delete(sid)
        d.sleepers.clear()
    a.down()
    assert_untouched(b, f"after the last space down of {a.instance}")
    b.down()
    for d in (a, b):
        problems = all_gone(d)
        assert not problems, problems
        e = registry_entry(d)
        assert e is not None, f"{d.instance}: its registry entry (a reservation of its ranges) is gone"


def start_refused(d, *extra):
    """Starts spaced with extra flags, expecting it to refuse at once; one
    that starts anyway is stopped (SIGTERM, by its pid) and fails the test."""
    p = subprocess.Popen(d.args() + list(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=clean_env(), start_new_session=True)
    try:
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=60)
        raise AssertionError(f"spaced {' '.join(extra)} started next to the other daemon:\n{out[-2000:]}") from None
    assert p.returncode != 0, f"spaced {' '.join(extra)} exited 0:\n{out[-2000:]}"
    return out


@pytest.mark.timeout(600)
def test_overlapping_settings_are_refused(pair):
    a, b = pair
    a.start()
    sid = a.add_sandbox()
    ia = a.info()
    uid, pool = ia.get("instance", {}).get("uid_base", 1000000000), ia["network"]["pool"]
    naming = [f"instance '{a.instance}'", f"state dir {os.path.realpath(a.state_dir)}", f"pid {a.pid}"]
    cases = [
        (["--uid-base", str(uid + 65536 * 5)], "uid range"),
        (["--net-pool", pool], "net_pool"),
        (["--cgroup-root", a.instance], "cgroup_root"),
        (["--net-table", a.instance], "net_table"),
        (["--net-link-prefix", a.net_prefix], "net_link_prefix"),
        (["--instance", a.instance], "already runs"),
    ]
    for extra, what in cases:
        out = start_refused(b, *extra)
        assert what in out and all(n in out for n in naming), f"{extra}: {out[-2000:]}"
    # the same state directory: the other daemon named by its pid
    out = start_refused(a, "--listen", f"127.0.0.1:{b.port}")
    assert f"instance '{a.instance}', pid {a.pid}" in out and "runs on" in out, out[-2000:]
    # the same listener
    out = start_refused(b, "--listen", f"{a.host}:{a.port}")
    assert "listener" in out and f"pid {a.pid}" in out, out[-2000:]

    # none of it touched a; b made nothing (no identity kept, no live entry)
    assert_untouched(a, "after the refused starts")
    assert not os.path.exists(os.path.join(b.state_dir, "instance.json"))
    assert not cgroup_root_dirs(b.cgroup_root) and not b.net_table_exists() and not b.net_links()
    # a bad name is bad input
    out = start_refused(b, "--instance", "Bad/Name")
    assert "is not a name" in out, out
    out = start_refused(b, "--uid-base", "1000")
    assert "uid_base" in out, out

    # a crashed daemon's sandboxes run on: still its, so its names are still refused
    a.crash()
    for extra in (["--cgroup-root", a.cgroup_root], ["--uid-base", str(uid)]):
        out = start_refused(b, *extra)
        assert "sandboxes still run" in out and f"instance '{a.instance}'" in out, f"{extra}: {out[-2000:]}"
    pid, st = a.sleepers[sid]
    assert host.proc_exists(pid) and host.proc_starttime(pid) == st, "the refused start killed a's sandbox"
    a.start()
    assert_untouched(a, "restarted after kill -9 and the refused starts")

    # and with its own ranges b starts beside a
    b.start()
    assert_untouched(a, f"after {b.instance} started")
    a.delete(sid)
    a.sleepers.clear()
    assert b.info()["instance"]["uid_base"] != uid


def test_harness_skips_a_net_pool_another_instance_registered(tmp_path):
    """The session's daemons take a /19 by its lock file; an instance whose
    registry entry holds an overlapping pool (a session that died with its
    sandboxes running) makes spaced refuse that pool, so the harness skips it
    — and ignores registry files that are not entries."""
    reg = tmp_path / "instances"
    reg.mkdir()
    idx, lock = take_net_pool(str(reg))
    lock.close()
    first = net_pool_cidr(idx)
    a, b, c, _ = (int(x) for x in first.split("/")[0].split("."))
    # a /21 inside the pool the harness would take first, a garbage file and a non-entry
    (reg / "space-dead01.json").write_text(json.dumps(
        {"instance": "space-dead01", "net_pool": f"{a}.{b}.{c + 8}.0/21"}))
    (reg / "space-bad.json").write_text("{not json")
    (reg / "space-list.json").write_text("[1, 2]")
    (reg / ".lock").write_text("")
    idx2, lock2 = take_net_pool(str(reg))
    try:
        assert idx2 != idx, f"pool {first} overlaps a registered instance's and was taken"
    finally:
        lock2.close()
