# SPDX-License-Identifier: MIT
"""PID 1 (space-agent) seen from the code it serves: not dumpable, so neither
root inside nor a user can ptrace it or read its memory, environment or file
descriptors; the processes it starts for the user are ordinary (dumpable), so
a debugger inside works on them."""

import pytest

from attack_util import probe_lines, run

ATTEMPTS = ("attach", "seize", "mem", "environ", "fd", "vm-read", "getfd")


@pytest.mark.parametrize("user", [None, "user"])
def test_pid1_cannot_be_traced_or_read(spaced, box, user):
    kw = {} if user is None else {"user": user}
    # getfd: fd 3, the agent's listening socket (whoever holds it could accept the worker's connections)
    lines, r = probe_lines(spaced, box, ["ptrace", "1", "3"], **kw)
    assert set(lines) == set(ATTEMPTS), r
    reached = {k: v for k, v in lines.items() if v == "ok"}
    assert not reached, f"{'root' if user is None else user} inside reached PID 1: {reached}\n{r.out}"
    # EPERM or EACCES; /proc is mounted hidepid=invisible, so a process that may not read PID 1
    # does not see /proc/1 at all: ENOENT, ESRCH
    refused = ("errno=1 ", "errno=13 ", "errno=2 ", "errno=3 ")
    for k in ATTEMPTS:
        assert lines[k].startswith(refused), f"{k}: {lines[k]} (refused as {refused} expected)"
    # the tools see the same
    r = run(spaced, box, shell="cat /proc/1/environ >/dev/null 2>&1 && echo ENVIRON; "
                               "ls /proc/1/fd >/dev/null 2>&1 && echo FDS; "
                               "readlink /proc/1/exe >/dev/null 2>&1 && echo EXE; "
                               "cat /proc/1/maps >/dev/null 2>&1 && echo MAPS; true", **kw)
    assert r.out == "", f"PID 1's /proc files readable inside: {r.out!r}"
    r = run(spaced, box, shell="test -e /proc/1 && echo VISIBLE; ls /proc | grep -qx 1 && echo LISTED; true", **kw)
    assert r.out == "", f"/proc/1 is in sight inside: {r.out!r}"
    # and it still serves
    assert run(spaced, box, cmd=["echo", "alive"]).out == "alive\n"


@pytest.mark.parametrize("user", [None, "user"])
def test_processes_the_agent_starts_can_be_debugged(spaced, box, user):
    """A background exec (forked by the agent, then exec'd) and a shell's child
    are dumpable: the user's own debugger reaches them."""
    kw = {} if user is None else {"user": user}
    bg = spaced.exec(box, cmd=["sleep", "300"], background=True, **kw)
    assert bg.response is None, bg
    try:
        pid = bg.start.get("pid")
        assert isinstance(pid, int) and pid > 1, bg.start
        lines, r = probe_lines(spaced, box, ["ptrace", str(pid)], **kw)
        assert all(v == "ok" for v in lines.values()) and set(lines) == set(ATTEMPTS), \
            f"the user's own process started by the agent is not debuggable:\n{r.out}"
        lines, r = probe_lines(spaced, box, ["sh", "-c", "sleep 300 & p=$!; ptrace $p; kill $p"], **kw)
        assert all(v == "ok" for v in lines.values()) and set(lines) == set(ATTEMPTS), r.out
    finally:
        spaced.api("POST", f"/v1/sandboxes/{box}/exec/{bg.start['exec_id']}/signal", json={"signal": "SIGKILL"})
