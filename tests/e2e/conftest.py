# SPDX-License-Identifier: MIT
"""Fixtures of the end-to-end suite: a real spaced on a temporary state
directory, the API and CLI helpers, and the residue checks around every
test and at the end of the session."""

import atexit
import os
import shutil
import signal
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import e2e_host as host  # noqa: E402
import e2e_residue as residue  # noqa: E402
from e2e_daemon import Session  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_TEST_TIMEOUT = 600

_session = None


def _log(msg):
    sys.stderr.write(f"[e2e] {msg}\n")


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: long create/exec/delete cycles (run by default)")
    config.addinivalue_line("markers", "vm: boots microVMs (slow under TCG; run by default, -m 'not vm' to skip)")
    config.addinivalue_line("markers", "timeout(seconds): per-test watchdog (default 600)")


# ---- the session ----

@pytest.fixture(scope="session", autouse=True)
def e2e_session(request):
    global _session
    if os.geteuid() != 0:
        pytest.exit("the e2e suite needs root (spaced creates namespaces, cgroups and mounts)", returncode=4)
    s = Session(REPO)
    _session = s
    # killed by timeout(1) & co.: tear down like after ^C; and if even that
    # does not happen, clean up at exit
    signal.signal(signal.SIGTERM, _on_sigterm)
    atexit.register(_cleanup_at_exit, s)
    old_logs = residue.log_dir(s)
    if os.path.isdir(old_logs):
        for f in os.listdir(old_logs):
            if f.startswith("spaced-") and f.endswith(".log"):
                os.unlink(os.path.join(old_logs, f))
    yield s
    problems = []
    for d in s.daemons:
        if d.running:
            problems += residue.teardown_daemon(d)
    keep_logs(s)
    left = residue.leftovers(s)
    if left:
        problems.append("left behind after every spaced stopped:\n    " + "\n    ".join(map(repr, left)))
    residue.cleanup(s, _log)
    s.cleaned = True
    still = residue.leftovers(s)
    if still:
        problems.append("could not clean up:\n    " + "\n    ".join(map(repr, still)))
    if problems:
        residue.teardown_failed(request, "session teardown:\n  " + "\n  ".join(problems))


def _on_sigterm(sig, frame):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt("SIGTERM")


def _cleanup_at_exit(s):
    if getattr(s, "cleaned", False):
        return
    for d in s.daemons:
        if d.running:
            d.stop(timeout=20)
    residue.cleanup(s, _log)


def keep_logs(s):
    """Copies every spaced log to <build>/e2e-logs/ (the temp dirs go away)."""
    for d in s.daemons:
        residue.keep_log(d)
    _log(f"spaced logs kept in {residue.log_dir(s)}")


# ---- daemons ----

@pytest.fixture(scope="session")
def spaced(e2e_session, request):
    """The session's spaced (a fresh one per module: fresh_spaced)."""
    d = e2e_session.new_daemon()
    d.start()
    yield d
    problems = residue.teardown_daemon(d)
    if problems:
        residue.teardown_failed(request, "spaced teardown:\n  " + "\n  ".join(problems))


@pytest.fixture(scope="module")
def fresh_spaced(e2e_session, request):
    """A spaced of this module alone (for restarts and kill -9)."""
    d = e2e_session.new_daemon()
    d.start()
    yield d
    residue.finish_daemon(d, request)


@pytest.fixture(scope="module")
def sandbox(spaced):
    """One running sandbox of the default template for a module's tests."""
    sb = spaced.create()
    yield sb["id"]
    if spaced.running:
        r = spaced.api("DELETE", f"/v1/sandboxes/{sb['id']}", timeout=180)
        assert r.status == 200, r
        left = residue.items_of_sandbox(_session, sb["id"])
        if left:
            host.wait_until(lambda: not residue.items_of_sandbox(_session, sb["id"]), 3)
            left = residue.items_of_sandbox(_session, sb["id"])
        assert not left, f"sandbox {sb['id']} left behind after delete: {left}"


@pytest.fixture
def workdir(tmp_path):
    return str(tmp_path)


# ---- around every test ----

@pytest.fixture(autouse=True)
def _watchdog(request):
    m = request.node.get_closest_marker("timeout")
    t = int(m.args[0]) if m else DEFAULT_TEST_TIMEOUT

    def on_alarm(sig, frame):
        raise TimeoutError(f"test still running after {t}s (watchdog)")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(t)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture(autouse=True)
def _residue(e2e_session, request):
    request.node._e2e_log_offsets = {d.n: d.log_size() for d in e2e_session.daemons}
    before = residue.snapshot(e2e_session)
    yield
    bad = residue.check_after_test(e2e_session, before)
    if bad:
        pytest.fail("residue after the test (not owned by any live sandbox):\n    "
                    + "\n    ".join(map(repr, bad)), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed or _session is None:
        return
    offsets = getattr(item, "_e2e_log_offsets", {})
    for d in _session.daemons:
        text = d.log_text(offsets.get(d.n, 0))
        if not text.strip():
            continue
        lines = text.splitlines()
        important = [l for l in lines if " level=error" in l or " level=warning" in l
                     or "Sanitizer" in l or "runtime error:" in l][-40:]
        tail = lines[-60:]
        body = ""
        if important:
            body += "-- errors and warnings --\n" + "\n".join(important) + "\n"
        body += f"-- last {len(tail)} lines --\n" + "\n".join(tail)
        rep.sections.append((f"spaced #{d.n} log ({d.log_path})", body))


def pytest_terminal_summary(terminalreporter):
    if _session is not None and _session.notes:
        terminalreporter.write_sep("-", "e2e measurements")
        for n in _session.notes:
            terminalreporter.write_line(n)
    for msg in residue.late_problems:
        terminalreporter.write_sep("=", "e2e session teardown problems", red=True)
        terminalreporter.write_line(msg)


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session, exitstatus):
    yield
    if residue.late_problems and session.exitstatus == 0:
        session.exitstatus = 1
