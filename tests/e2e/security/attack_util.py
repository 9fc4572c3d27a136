# SPDX-License-Identifier: MIT
"""Helpers of the attack suite (the fixtures are in conftest.py)."""

import os

import e2e_host as host
import e2e_residue as residue

PROBE_BIN_DIR = "/usr/local/bin"       # inside the sandbox


def upload(spaced, sid, path_on_host, path_inside, mode="0755"):
    with open(path_on_host, "rb") as f:
        data = f.read()
    r = spaced.api("PUT", f"/v1/sandboxes/{sid}/files", params={"path": path_inside, "mode": mode, "parents": "1"},
                   data=data)
    assert r.status == 201, f"upload of {path_inside} into {sid}: {r!r}"


def install_probes(spaced, sid, probes, names=None):
    """Uploads probes (all by default) to /usr/local/bin inside the sandbox."""
    for name in names or list(probes):
        upload(spaced, sid, probes[name], f"{PROBE_BIN_DIR}/{name}")


def delete_and_check(spaced, sid, timeout=180):
    """Deletes a sandbox and insists that nothing of it is left on the host."""
    r = spaced.api("DELETE", f"/v1/sandboxes/{sid}", timeout=timeout)
    assert r.status in (200, 404), f"delete {sid}: {r!r}"
    spaced.known_alive.discard(sid)
    if not host.wait_until(lambda: not residue.items_of_sandbox(spaced.s, sid), 10):
        items = residue.items_of_sandbox(spaced.s, sid)
        assert not items, f"sandbox {sid} left behind after delete: {items}"


class Sandboxes:
    """Creates sandboxes for one test and deletes every one of them afterwards."""

    def __init__(self, spaced, probes):
        self.spaced = spaced
        self.probes = probes
        self.ids = []

    def new(self, with_probes=(), key=None, **body):
        kw = {} if key is None else {"key": key}
        sid = self.spaced.create(**kw, **body)["id"]
        self.ids.append((sid, key))
        if with_probes:
            install_probes(self.spaced, sid, self.probes, None if with_probes is True else list(with_probes))
        return sid

    def delete(self, sid):
        """Deletes now (a failed delete is retried by cleanup())."""
        delete_and_check(self.spaced, sid)
        self.ids = [(s, k) for s, k in self.ids if s != sid]

    def cleanup(self):
        problems = []
        while self.ids:
            sid, _ = self.ids.pop()
            if not self.spaced.running:
                continue
            try:
                delete_and_check(self.spaced, sid)
            except AssertionError as e:
                problems.append(str(e))
        return problems


class Marker:
    def __init__(self, path, content):
        self.path = path
        self.content = content
        self.name = os.path.basename(path)


def assert_spaced_healthy(spaced, within=30.0):
    """spaced still runs and answers /healthz (the request times out after within seconds; how
    long the answer took is not asserted: that measures the host's load as much as spaced)."""
    assert spaced.running, "spaced is no longer running"
    r = spaced.api("GET", "/healthz", key=None, timeout=within)
    assert r.status == 200, f"/healthz: {r!r}"


def run(spaced, sid, cmd=None, shell=None, **kw):
    """Runs a command; the exec itself must work (the attack may fail inside)."""
    r = spaced.exec(sid, cmd=cmd, shell=shell, **kw)
    assert r.response is None, f"exec {cmd or shell!r} refused: {r!r}"
    assert r.exit is not None, f"exec {cmd or shell!r}: no exit event: {r!r}"
    return r


def probe_lines(spaced, sid, cmd, **kw):
    """Runs a probe that prints 'NAME ok' / 'NAME errno=N (text)' lines: {NAME: rest}."""
    r = run(spaced, sid, cmd=cmd, **kw)
    assert r.code == 0, f"probe {cmd} failed: {r!r}"
    res = {}
    for line in r.out.splitlines():
        name, _, rest = line.partition(" ")
        res[name] = rest
    return res, r
