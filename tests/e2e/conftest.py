# SPDX-License-Identifier: MIT
"""Fixtures of the end-to-end suite: a real spaced on a temporary state
directory, the API and CLI helpers, and the residue checks around every
test and at the end of the session."""

import atexit
import functools
import os
import re
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
                try:
                    os.unlink(os.path.join(old_logs, f))
                except FileNotFoundError:
                    pass
    yield s
    s.host_net_ours = not _is_xdist_worker(request.config) or _ran_host_net
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

def _watchdog_seconds(item):
    m = item.get_closest_marker("timeout")
    return int(m.args[0]) if m else DEFAULT_TEST_TIMEOUT


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A watchdog over each phase of a test (its fixtures' setup, the call,
    the teardown), module and session fixtures included: a hang anywhere is
    an error with the stack where it hung, after the test's budget, not a
    run that stalls until CI gives up."""
    t = _watchdog_seconds(item)
    phase = ["setup"]

    def on_alarm(sig, frame):
        signal.alarm(t)  # the teardown that follows gets a budget of its own
        raise TimeoutError(f"{item.nodeid}: {phase[0]} still running after {t}s (watchdog)")

    def arm(what):
        phase[0] = what
        signal.alarm(t)

    item._e2e_watchdog_arm = arm
    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    item._e2e_watchdog_arm("setup")
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    item._e2e_watchdog_arm("call")
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    item._e2e_watchdog_arm("teardown")
    yield


@pytest.fixture(autouse=True)
def _residue(e2e_session, request):
    global _ran_host_net
    if _is_xdist_worker(request.config):
        e2e_session.host_net_ours = _makes_host_net(str(request.node.fspath))
        _ran_host_net = _ran_host_net or e2e_session.host_net_ours
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


# ---- several sessions at once (pytest-xdist, -n N): a worker process runs
# whole modules with a session of its own and hands its measurements and late
# problems to the controlling process, which prints them ----

_worker_notes = []
_ran_host_net = False
# what makes network namespaces or host links of its own (or uses a helper
# that does): every such module runs in one session, one after another, and
# only that session judges them as residue (their names are not the session's)
_HOST_NET = re.compile(r'netns", "add"|netns add|"link", "add"|link add|e2e_upstream|gateway_servers')
_LOCAL_IMPORT = re.compile(r"^\s*(?:from|import)\s+(\w+)", re.M)


def _is_xdist_worker(config):
    return hasattr(config, "workeroutput")


@functools.lru_cache(maxsize=None)
def _makes_host_net(path, _seen=()):
    """Also when a module it imports does (its fixtures come with it)."""
    if path in _seen:
        return False
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return True
    if _HOST_NET.search(text):
        return True
    dirs = {os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(path))}
    for name in set(_LOCAL_IMPORT.findall(text)):
        for d in dirs:
            dep = os.path.join(d, name + ".py")
            if os.path.isfile(dep) and _makes_host_net(dep, _seen + (path,)):
                return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """With --dist loadgroup: a module is one group (its module fixtures are
    made once), and the modules that make host networking are one group
    together. Before xdist's own hook, which turns the mark into the group."""
    if not _is_xdist_worker(config):
        return
    for item in items:
        path = str(item.fspath)
        group = "host-net" if _makes_host_net(path) else os.path.relpath(path, os.path.dirname(__file__))
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    out = getattr(node, "workeroutput", {}) or {}
    _worker_notes.extend(out.get("e2e_notes", []))
    residue.late_problems.extend(out.get("e2e_late_problems", []))


def pytest_terminal_summary(terminalreporter):
    notes = (list(_session.notes) if _session is not None else []) + _worker_notes
    if notes:
        terminalreporter.write_sep("-", "e2e measurements")
        for n in notes:
            terminalreporter.write_line(n)
    for msg in residue.late_problems:
        terminalreporter.write_sep("=", "e2e session teardown problems", red=True)
        terminalreporter.write_line(msg)


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish(session, exitstatus):
    if _is_xdist_worker(session.config):   # sent to the controller after every hook ran
        session.config.workeroutput["e2e_notes"] = list(_session.notes) if _session is not None else []
        session.config.workeroutput["e2e_late_problems"] = list(residue.late_problems)
    yield
    if residue.late_problems and session.exitstatus == 0:
        session.exitstatus = 1
