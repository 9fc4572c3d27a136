# SPDX-License-Identifier: MIT
"""The guard's host addresses at scale: with 300 running sandboxes (each adds
a host address, the host end of its link, and an IPv6 link-local one), an
address put on the host after spaced started is refused to a sandbox whose
policy allows a CIDR holding it, with a network.deny event naming the reason,
and nothing reaches the service listening there. A neighbour address of the
same CIDR that is not the host's is allowed (the policy does allow it: the
refusal is the guard's).

spaced runs in a network namespace of its own (`D`, the "host"), reached over
a veth from the test; the address goes on a veth pair the test makes in D.
SPACE_E2E_GUARD_SANDBOXES sets the number of sandboxes (default 300)."""

import concurrent.futures
import os
import re
import secrets
import subprocess
import time

import pytest

import e2e_host as host
import e2e_residue as residue
from attack_util import install_probes

N_SANDBOXES = int(os.environ.get("SPACE_E2E_GUARD_SANDBOXES", "300"))
VICTIM, NEIGHBOUR, PORT = "198.18.77.1", "198.18.77.2", 7777
POLICY = {"allow": [{"cidr": "198.18.0.0/15", "ports": [PORT]}]}
PY = "/usr/bin/python3"

HOST_SERVICE = r"""
import socket, sys
log = open(sys.argv[1], "a")
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("0.0.0.0", int(sys.argv[2]))); t.listen(64)
print("ready", flush=True)
while True:
    c, p = t.accept()
    log.write(f"tcp {p[0]} -> {c.getsockname()}\n"); log.flush()
    c.sendall(b"HTTP/1.0 200 OK\r\n\r\nhost-only service\n"); c.close()
"""


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=60)


def free_octet():
    used = sh("ip", "-4", "-o", "addr").stdout + sh("ip", "-4", "route").stdout
    for x in range(1, 255):
        if f"10.249.{x}." not in used:
            return x
    pytest.skip("no free 10.249.x.0/24 for the test's link")


@pytest.fixture(scope="module")
def world(e2e_session, request, tmp_path_factory):
    tag = secrets.token_hex(3)
    D, link = f"spgs-{tag}", f"spgs{tag}"
    x = free_octet()
    here, api = f"10.249.{x}.1", f"10.249.{x}.2"
    tmp = tmp_path_factory.mktemp("guard")
    procs, d = [], None
    try:
        sh("ip", "netns", "add", D)
        sh("ip", "link", "add", link, "type", "veth", "peer", "name", "up0", "netns", D)
        sh("ip", "addr", "add", f"{here}/24", "dev", link)
        sh("ip", "link", "set", link, "up")
        sh("ip", "-n", D, "addr", "add", f"{api}/24", "dev", "up0")
        for dev in ("lo", "up0"):
            sh("ip", "-n", D, "link", "set", dev, "up")
        hostlog = f"{tmp}/host.log"
        open(hostlog, "w").close()
        svc = subprocess.Popen([*host.netns_exec(D), PY, "-c", HOST_SERVICE, hostlog, str(PORT)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(svc)
        assert svc.stdout.readline().strip() == "ready"
        d = e2e_session.new_daemon(netns=D, listen_host=api)
        d.start()
        yield {"d": d, "ns": D, "hostlog": hostlog}
    finally:
        problems = []
        if d and d.running:
            # 300 deletes: a few at a time (the residue teardown does the rest, one by one)
            try:
                ids = [sid for sid, sb in d.list_all().items() if sb.get("state") != "deleted"]
                with concurrent.futures.ThreadPoolExecutor(4) as ex:
                    for r in ex.map(lambda s: d.api("DELETE", f"/v1/sandboxes/{s}", timeout=180, validate=False), ids):
                        if r.status not in (200, 404):
                            problems.append(f"teardown: delete: {r!r}")
                # their teardowns run on in the background: the stop below is not timed for them
                # (the other session may load the machine meanwhile)
                if not host.wait_until(lambda: re.search(r"^space_worker_teardowns_pending\{[^}]*\} 0$",
                                                         d.api("GET", "/metrics", validate=False).text(), re.M),
                                       300, interval=0.5):
                    problems.append("teardown: the teardown backlog did not drain within 300 s")
            except Exception as e:  # noqa: BLE001 - teardown goes on
                problems.append(f"teardown: deleting sandboxes failed: {e!r}")
        problems += residue.teardown_daemon(d) if d else []
        for p in procs:
            p.stdin.close()
            p.kill()
            p.wait()
        subprocess.run(["ip", "netns", "del", D], capture_output=True)
        subprocess.run(["ip", "link", "del", link], capture_output=True)
        if d and not problems:
            residue.remove_daemon_dir(d)
        elif problems:
            residue.teardown_failed(request, "guard daemon teardown:\n  " + "\n  ".join(problems))


def net_events(d, sid):
    r = d.api("GET", "/v1/events", params={"sandbox": sid, "limit": 1000})
    assert r.status == 200, r
    return [e for e in r.json()["events"] if e["type"] in ("network.allow", "network.deny")]


def xchg(d, sid, addr):
    """What came back (bytes), or the probe's word for what happened (closed, refused, ...)."""
    req = f"GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n".encode()
    out = d.sh(sid, f"net xchg tcp {addr} {PORT} {req.hex()} 3000").strip()
    return bytes.fromhex(out[6:]) if out.startswith("reply ") else out.encode()


def gateway_pid(ns):
    for pid in sh("ip", "netns", "pids", ns).stdout.split():
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "space-gateway":
                    return int(pid)
        except OSError:
            continue
    return None


def gateway_figures(pid):
    """(resident KiB, CPU seconds) of the daemon's gateway: figures for the log."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = int(next(l for l in f if l.startswith("VmRSS:")).split()[1])
        with open(f"/proc/{pid}/schedstat") as f:
            cpu = int(f.read().split()[0]) / 1e9
        return rss, cpu
    except (OSError, StopIteration, TypeError):
        return None, 0.0


def test_host_address_added_after_start_is_refused_with_300_sandboxes(world, probes):
    d, D = world["d"], world["ns"]
    attacker = d.create(network=POLICY)["id"]
    install_probes(d, attacker, probes, ["net"])
    gw = gateway_pid(D)
    cpu0 = gateway_figures(gw)[1]
    t0 = time.monotonic()
    for _ in range(N_SANDBOXES - 1):
        d.create()
    created = time.monotonic() - t0
    # each running sandbox's host end is an address of D's: far more than the old cap of 64
    links = d.net_links()
    assert len(links) >= N_SANDBOXES, (len(links), created)
    addrs = sh("ip", "-n", D, "-o", "addr").stdout.splitlines()
    assert len(addrs) > N_SANDBOXES, len(addrs)
    rss, cpu = gateway_figures(gw)
    print(f"\n[guard] {N_SANDBOXES} sandboxes created in {created:.1f} s; {len(addrs)} addresses in the daemon's "
          f"namespace; the gateway: {rss} KiB resident, {cpu - cpu0:.3f} s of CPU during the creates")

    gd = "gd" + secrets.token_hex(2)
    try:
        # an address only this host has, added now (long after the gateway started)
        sh("ip", "-n", D, "link", "add", gd, "type", "veth", "peer", "name", gd + "p")
        sh("ip", "-n", D, "addr", "add", f"{VICTIM}/32", "dev", gd)
        sh("ip", "-n", D, "link", "set", gd, "up")
        out = xchg(d, attacker, VICTIM)
        assert b"host-only service" not in out, out
        ok = host.wait_until(lambda: any(
            e["type"] == "network.deny" and e["data"].get("ip") == VICTIM and "host address" in e["data"].get("why", "")
            for e in net_events(d, attacker)), 10)
        evs = [e["data"] for e in net_events(d, attacker)]
        assert ok, evs[-10:]
        assert not [e for e in evs if e.get("ip") == VICTIM and e.get("verdict") == "allow"], evs
        with open(world["hostlog"]) as f:
            assert f.read() == "", "a sandbox reached the host-only service"
        # the control: the same CIDR where it is not the host's is allowed (nothing answers there)
        xchg(d, attacker, NEIGHBOUR)
        assert host.wait_until(lambda: any(
            e["type"] == "network.allow" and e["data"].get("ip") == NEIGHBOUR for e in net_events(d, attacker)), 10), \
            [e["data"] for e in net_events(d, attacker)][-10:]
    finally:
        sh("ip", "-n", D, "link", "del", gd, check=False)
    # gone from the host: no longer the host's, so the policy decides (allowed, nothing answers)
    xchg(d, attacker, VICTIM)
    assert host.wait_until(lambda: any(
        e["type"] == "network.allow" and e["data"].get("ip") == VICTIM for e in net_events(d, attacker)), 10), \
        [e["data"] for e in net_events(d, attacker)][-10:]
