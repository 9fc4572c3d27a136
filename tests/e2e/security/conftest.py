# SPDX-License-Identifier: MIT
"""Fixtures of the attack suite: hostile probes (small static C programs
compiled on the host and uploaded into a sandbox), sandboxes that are always
deleted (and checked for residue) after the test, a second tenant, and a
marker file on the host that no sandbox may ever read.

The daemon, the API client and the residue checks are tests/e2e/conftest.py's."""

import os
import secrets
import shutil
import subprocess
import tempfile

import pytest

from attack_util import Marker, Sandboxes, delete_and_check, install_probes

PROBE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probes")
CC_TIMEOUT = 120


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: resource-exhaustion attacks that take a while (run by default)")


# ---- probes ----

class Probes:
    """name -> path of the static binary on the host."""

    def __init__(self, paths):
        self.paths = paths

    def __getitem__(self, name):
        return self.paths[name]

    def __iter__(self):
        return iter(sorted(self.paths))


@pytest.fixture(scope="session")
def probes():
    """Every probes/*.c built with gcc -static -O1 (once per session)."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("the attack suite needs gcc and a static libc (apt-get install gcc libc6-dev)", pytrace=False)
    out = tempfile.mkdtemp(prefix="space-e2e-probes-")
    paths = {}
    try:
        for f in sorted(os.listdir(PROBE_DIR)):
            if not f.endswith(".c"):
                continue
            name = f[:-2]
            dst = os.path.join(out, name)
            r = subprocess.run([cc, "-static", "-O1", "-Wall", "-Werror", "-o", dst, os.path.join(PROBE_DIR, f)],
                               capture_output=True, text=True, timeout=CC_TIMEOUT)
            if r.returncode != 0:
                pytest.fail(f"compiling probe {f} failed:\n{r.stdout}\n{r.stderr}", pytrace=False)
            paths[name] = dst
        yield Probes(paths)
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.fixture
def sandboxes(spaced, probes):
    sb = Sandboxes(spaced, probes)
    yield sb
    problems = sb.cleanup()
    if problems:
        pytest.fail("cleaning up the test's sandboxes:\n  " + "\n  ".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def box(spaced, probes):
    """One running sandbox per module with every probe installed."""
    sid = spaced.create()["id"]
    try:
        install_probes(spaced, sid, probes)
        yield sid
    finally:
        if spaced.running:
            delete_and_check(spaced, sid)


# ---- tenants, host markers, health ----

@pytest.fixture(scope="module")
def attacker(spaced):
    """An API key of another tenant: (secret, key id, tenant)."""
    tenant = "attacker-" + secrets.token_hex(4)
    r = spaced.api("POST", "/v1/keys", json={"name": "attacker", "tenant": tenant})
    assert r.status == 201, r
    v = r.json()
    yield v["key"], v["id"], tenant
    if spaced.running:
        r = spaced.api("DELETE", f"/v1/keys/{v['id']}")
        assert r.status in (204, 404), r


@pytest.fixture
def host_marker():
    """A file on the host (in /tmp) whose content must never be seen inside."""
    content = "space-attack-marker-" + secrets.token_hex(16)
    fd, path = tempfile.mkstemp(prefix="space-e2e-marker-", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write(content + "\n")
    os.chmod(path, 0o644)
    try:
        yield Marker(path, content)
    finally:
        os.unlink(path)
