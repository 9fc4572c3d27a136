# SPDX-License-Identifier: MIT
"""The sandbox network across crashes and failures: a start makes the links
and the firewall agree with the live sandboxes (missing ones made again,
orphans removed), a create that fails in the network set-up leaves nothing,
and a stale link of a slot is replaced."""

import ipaddress
import os
import re
import select
import socket
import subprocess

import pytest

import e2e_host as host
import e2e_residue as residue


@pytest.fixture(scope="module")
def netd(e2e_session, request):
    """A daemon of this module without the gateway (the test listens on the
    host ends in its place)."""
    d = e2e_session.new_daemon(extra_args=["--gateway=off"])
    d.start()
    yield d
    residue.finish_daemon(d, request)


@pytest.fixture
def d(netd):
    if not netd.running:
        netd.start()
    return netd


def addrs(d, sid):
    out = d.sh(sid, "ip -4 -o addr show dev eth0")
    m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/31", out)
    assert m, out
    me = ipaddress.ip_address(m.group(1))
    return str(me), str(me - 1)


def link_of(d, addr):
    pool = ipaddress.ip_network(d.net_pool)
    return f"{d.net_prefix}{(int(ipaddress.ip_address(addr)) - int(pool.network_address)) // 2}"


def elements(d):
    r = subprocess.run(["nft", "list", "set", "inet", d.net_table, "links"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def add_stranger(name):
    """A link of that name (a veth: this kernel has no dummy module); its
    peer's name is outside every daemon's prefix."""
    peer = f"zq{os.getpid() % 100000}{name[-4:]}"[:15]
    subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", peer], check=True)


def reaches_proxy(d, sid, gw):
    """The sandbox connects to a listener on its host end's proxy port."""
    port = d.api("GET", "/v1/info").json()["network"]["gateway_ports"]["proxy"]
    with socket.socket() as l:
        l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        l.bind((gw, port))
        l.listen(4)
        d.exec(sid, shell=f"timeout 3 nc {gw} {port} </dev/null; true", timeout=60)
        r, _, _ = select.select([l], [], [], 3)
        return bool(r)


def test_kill9_restart_reconciles_links_and_rules(d):
    a = d.create()["id"]
    b = d.create()["id"]
    orphan = f"{d.net_prefix}4000"
    try:
        (a_me, a_gw), (b_me, b_gw) = addrs(d, a), addrs(d, b)
        la, lb = link_of(d, a_me), link_of(d, b_me)
        assert d.net_links() == {la, lb}
        d.kill9()
        # while it is down: a's link vanishes, a stranger with our prefix
        # appears, and the table loses b's element
        subprocess.run(["ip", "link", "del", la], check=True)
        add_stranger(orphan)
        subprocess.run(["nft", "delete", "element", "inet", d.net_table, "links",
                        f'{{ "{lb}" . {b_me} . {b_gw} }}'], check=True)
        d.start()
        assert d.net_links() == {la, lb}
        el = elements(d)
        assert f'"{la}" . {a_me} . {a_gw}' in el and f'"{lb}" . {b_me} . {b_gw}' in el, el
        assert addrs(d, a) == (a_me, a_gw)
        assert reaches_proxy(d, a, a_gw) and reaches_proxy(d, b, b_gw)
    finally:
        subprocess.run(["ip", "link", "del", orphan], capture_output=True)
        d.delete(a)
        d.delete(b)
    # a delete answers once the sandbox is killed; its link goes with the teardown, just after
    assert host.wait_until(lambda: not d.net_links(), 10), d.net_links()
    assert host.wait_until(lambda: '"' not in elements(d), 10) and d.net_table_exists()


def test_stale_link_of_a_slot_is_replaced(d):
    stale = [f"{d.net_prefix}{i}" for i in range(4)]
    try:
        for name in stale:
            add_stranger(name)
        s = d.create()["id"]
        me, gw = addrs(d, s)
        link = link_of(d, me)
        assert link in stale
        assert reaches_proxy(d, s, gw)
        d.delete(s)
        assert host.wait_until(lambda: link not in d.net_links(), 10), d.net_links()
    finally:
        for name in stale:
            subprocess.run(["ip", "link", "del", name], capture_output=True)


def test_create_failing_in_network_setup_leaves_nothing(d):
    # the firewall's set vanishes under the daemon: a create cannot add its element
    subprocess.run(["nft", "delete", "table", "inet", d.net_table], check=True)
    r = d.api("POST", "/v1/sandboxes", json={}, validate=False)
    assert r.status >= 500, r
    assert "firewall" in r.text(), r
    assert not d.net_links()
    # a restart builds the table again, and creates work
    d.restart()
    assert d.net_table_exists()
    s = d.create()["id"]
    me, gw = addrs(d, s)
    assert link_of(d, me) in d.net_links()
    d.delete(s)
    assert host.wait_until(lambda: not d.net_links(), 10), d.net_links()
