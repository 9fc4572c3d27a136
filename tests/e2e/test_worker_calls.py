# SPDX-License-Identifier: MIT
"""Worker calls have deadlines (the op table, src/worker/worker-proto.c): a
worker process that is stopped (SIGSTOP) makes an API call that needs it
fail with 503 `worker_unavailable` and a message naming the op once its deadline
passes, instead of hanging; after SIGCONT everything works again. (That a
non-idempotent op is never sent twice when the connection breaks is
tests/unit/test-worker-proto.c, against a scripted worker.)"""

import os
import signal

import pytest

import e2e_host as host


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def _worker_process(d):
    """The worker process of the spaced this module started: its child named space-worker."""
    found = [p for p in host.children(d.pid) if _comm(p) == "space-worker"]
    assert len(found) == 1, (found, [(_comm(p), p) for p in host.children(d.pid)])
    return found[0]


@pytest.mark.timeout(300)
def test_stopped_worker_is_503_at_the_deadline_then_recovers(fresh_spaced):
    d = fresh_spaced
    if not d.running:
        d.start()
    sid = d.create()["id"]
    try:
        assert d.sh(sid, "echo before") == "before\n"
        worker = _worker_process(d)
        os.kill(worker, signal.SIGSTOP)
        try:
            # the info op's deadline is 20 s; the HTTP client would wait far longer
            r = d.api("GET", "/v1/info", timeout=120)
            assert r.status == 503, r
            err = r.json()["error"]
            assert err["code"] == "worker_unavailable", err
            assert "did not answer 'info'" in err["message"], err
            assert r.headers.get("retry-after"), r
            # what needs no worker still answers
            assert d.show(sid).json()["state"] == "running"
        finally:
            os.kill(worker, signal.SIGCONT)
        # the same worker process serves again: info, exec, a create and a delete
        assert host.wait_until(lambda: d.api("GET", "/v1/info").status == 200, 60)
        assert _worker_process(d) == worker
        assert d.sh(sid, "echo after") == "after\n"
        other = d.create()["id"]
        assert d.sh(other, "echo new") == "new\n"
        d.delete(other)
    finally:
        d.delete(sid)
