# SPDX-License-Identifier: MIT
"""Deletes answer once the sandbox is killed; its cgroups, link, firewall
element and root go on a worker thread after (src/worker/worker-teardown.c),
its slot held in the store until then. Through a real spaced with one slot:
a create right after a delete waits for the held slot instead of calling the
host full; a host whose one slot is live refuses a second create; the backlog
is the gauge space_worker_teardowns_pending, back at 0 once the teardowns
ran, with nothing left on the host."""

import pytest

import e2e_host as host
import e2e_residue as residue
from e2e_daemon import assert_error_shape
from test_metrics import host_gauge


@pytest.fixture(scope="module")
def one_slot(e2e_session, request):
    d = e2e_session.new_daemon(extra_args=["--slots-max=1"])
    d.start()
    yield d
    residue.finish_daemon(d, request)


def pending(d):
    return host_gauge(d, "space_worker_teardowns_pending")


def test_a_create_after_a_delete_waits_for_the_held_slot(one_slot):
    d = one_slot
    sid = d.create()["id"]
    gone = [sid]
    for _ in range(8):
        # the delete answers before its teardown ends; the next create, on the
        # same single slot, must not be told the host is full
        d.delete(sid)
        sid = d.create()["id"]
        assert d.sh(sid, "echo up") == "up\n"
        gone.append(sid)
    d.delete(sid)
    host.wait_until(lambda: pending(d) == 0, 10)
    for g in gone:
        assert not residue.items_of_sandbox(d.s, g), g


def test_a_host_whose_slots_are_live_is_full(one_slot):
    d = one_slot
    sid = d.create()["id"]
    try:
        r = d.api("POST", "/v1/sandboxes", json={}, timeout=60)
        assert_error_shape(r, 503)
        msg = r.json()["error"]["message"]
        assert "no free sandbox slot" in msg and "teardowns" not in msg, msg
    finally:
        d.delete(sid)


def test_the_teardown_backlog_is_a_gauge_that_drains(one_slot):
    d = one_slot
    assert pending(d) == 0
    sid = d.create()["id"]
    d.sh(sid, "sleep 1000 & sleep 1000 & echo started")
    d.delete(sid)
    seen = pending(d)
    assert seen in (0, 1), seen
    host.wait_until(lambda: pending(d) == 0, 10)
    host.wait_until(lambda: not residue.items_of_sandbox(d.s, sid), 5)
    assert not residue.items_of_sandbox(d.s, sid)
