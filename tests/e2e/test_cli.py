# SPDX-License-Identifier: MIT
"""The space CLI against a spaced it starts itself (space up / space down)."""

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time

import pytest

from e2e_daemon import ID_RE, clean_env
import e2e_host as host
import e2e_residue as residue


@pytest.fixture(scope="module")
def up(e2e_session, request):
    d = e2e_session.new_daemon()
    d.install_templates()
    d.log_path = os.path.join(d.state_dir, "spaced.log")
    env = dict(d.config_env())
    env["PATH"] = os.path.dirname(e2e_session.spaced_bin) + ":" + os.environ.get("PATH", "/usr/bin:/bin")
    t0 = time.monotonic()
    p = subprocess.run([e2e_session.space_bin, "up", "--state-dir", d.state_dir, "--listen", f"127.0.0.1:{d.port}"],
                       capture_output=True, text=True, timeout=400, env=clean_env(env), stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    pid = None
    try:
        with open(os.path.join(d.state_dir, "spaced.pid")) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    if pid:
        d.adopt(pid)
    d.up_result = (p, took)
    yield d
    problems = residue.teardown_daemon(d)
    if problems:
        residue.teardown_failed(request, "space up daemon teardown:\n  " + "\n  ".join(problems))
    residue.remove_daemon_dir(d)


def cli(d, *args, **kw):
    """The CLI as a user runs it after 'space up': URL given, the key from the state dir."""
    env = {"SPACE_STATE_DIR": d.state_dir}
    env.update(kw.pop("env", {}))
    return d.cli(*args, key=None, env=env, **kw)


def one_line_error(c, rc=1):
    """A failure: exit rc (space help: 2 usage, 3 not found, 6 unavailable, 125 exec), one line on stderr."""
    assert c.rc == rc, c
    assert c.out == "", c
    assert c.err.count("\n") == 1 and c.err.endswith("\n") and c.err.strip(), f"not a one-line error: {c!r}"


def test_up(up):
    p, took = up.up_result
    assert p.returncode == 0, f"space up failed: {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert up.running, "space up returned but no spaced runs"
    r = up.api("GET", "/healthz", key=None)
    assert r.status == 200, "space up returned before spaced was healthy"
    assert os.path.exists(os.path.join(up.state_dir, "admin.key"))


def test_create_ls_show_rm(up):
    c = cli(up, "create")
    assert c.rc == 0, c
    sid = c.out.strip()
    assert ID_RE.match(sid) and c.out == sid + "\n", f"create should print the id alone: {c!r}"
    up.known_alive.add(sid)
    try:
        c = cli(up, "ls")
        assert c.rc == 0 and sid in c.out, c
        c = cli(up, "show", sid)
        assert c.rc == 0 and sid in c.out and "running" in c.out, c
        c = cli(up, "--json", "show", sid)
        assert c.rc == 0, c
        v = json.loads(c.out)
        assert v["id"] == sid and v["state"] == "running", v
        c = cli(up, "ls", "--json")
        assert c.rc == 0, c
        v = json.loads(c.out)
        items = v["sandboxes"] if isinstance(v, dict) else v
        assert sid in [x["id"] for x in items], v
        c = cli(up, "exec", sid, "--", "sh", "-c", "echo from-cli")
        assert c.rc == 0 and c.out == "from-cli\n", c
    finally:
        c = cli(up, "rm", sid)
        assert c.rc == 0, c
        up.known_alive.discard(sid)
    one_line_error(cli(up, "show", sid), 3)


def test_create_options(up):
    c = cli(up, "--json", "create", "--cpu", "0.5", "--memory", "256", "--env", "A=b", "--meta", "k=v",
            "--timeout", "600")
    assert c.rc == 0, c
    v = json.loads(c.out)
    up.known_alive.add(v["id"])
    try:
        assert v["cpu"] == 0.5 and v["memory_mb"] == 256 and v["env"] == {"A": "b"} and v["metadata"] == {"k": "v"}
        assert v["timeout_s"] == 600
    finally:
        assert cli(up, "rm", v["id"]).rc == 0
        up.known_alive.discard(v["id"])


@pytest.mark.parametrize("rc,args", [
    (3, ("show", "zzzzzzzzzzzzzzzz")),
    (3, ("rm", "zzzzzzzzzzzzzzzz")),
    (125, ("exec", "zzzzzzzzzzzzzzzz", "--", "true")),
    (3, ("cp", "zzzzzzzzzzzzzzzz:/etc/hostname", "-")),
    (125, ("shell", "zzzzzzzzzzzzzzzz")),
    (2, ("events", "zzzzzzzzzzzzzzzz", "--follow", "--limit", "x")),
    (3, ("create", "--template", "nosuchtemplate")),
    (2, ("create", "--cpu", "lots")),
    (2, ("create", "--memory", "-1")),
    (2, ("nosuchcommand",)),
    (2, ("ls", "--nosuchoption")),
    (2, ("--nosuchglobal", "ls")),
    (125, ("exec",)),
    (2, ("template", "frobnicate")),
], ids=lambda a: " ".join(a)[:40] if isinstance(a, tuple) else str(a))
def test_one_line_errors(up, rc, args):
    one_line_error(cli(up, *args, timeout=60), rc)


def test_json_errors_are_one_line_too(up):
    c = cli(up, "--json", "show", "zzzzzzzzzzzzzzzz")
    one_line_error(c, 3)
    assert json.loads(c.err)["error"]["code"] == "not_found", c


def test_unreachable_server(up):
    c = up.cli("ls", key="sk_x", env={"SPACE_URL": "http://127.0.0.1:1"})
    one_line_error(c, 6)


def test_info(up):
    c = cli(up, "info")
    assert c.rc == 0 and "ns" in c.out, c
    c = cli(up, "--json", "info")
    assert c.rc == 0 and "ns" in json.loads(c.out)["runtimes"], c


def _read_until(fd, needle, timeout):
    buf = b""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if not r:
            continue
        try:
            b = os.read(fd, 4096)
        except OSError:
            break
        if not b:
            break
        buf += b
        if needle is not None and re.search(needle, buf):
            return buf, True
    return buf, False


def test_shell_through_a_pty(up):
    sid = cli(up, "create").out.strip()
    up.known_alive.add(sid)
    try:
        env = clean_env({"SPACE_URL": up.url, "SPACE_STATE_DIR": up.state_dir, "TERM": "xterm"})
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve(up.s.space_bin, [up.s.space_bin, "shell", sid], env)
            finally:
                os._exit(127)
        try:
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            _read_until(fd, rb"[#$] ?$", 10)            # the prompt, if any
            os.write(fd, b"echo $((6*7))\n")
            out, ok = _read_until(fd, rb"(?<![0-9*])42\r?\n", 20)
            assert ok, f"no 42 from the shell: {out[-1000:]!r}"
            os.write(fd, b"stty size\n")
            out, ok = _read_until(fd, rb"40 120", 10)
            assert ok, f"the terminal size did not reach the sandbox: {out[-500:]!r}"
            os.write(fd, b"exit 5\n")
            _read_until(fd, None, 20)
            end = time.monotonic() + 20
            status = None
            while time.monotonic() < end:
                wpid, st = os.waitpid(pid, os.WNOHANG)
                if wpid == pid:
                    status = st
                    break
                time.sleep(0.1)
            assert status is not None, "space shell did not exit after 'exit 5'"
            pid = None
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 5, f"wait status {status:#x}"
        finally:
            if pid:
                host.kill_pid(pid)
                os.waitpid(pid, 0)
            os.close(fd)
    finally:
        assert cli(up, "rm", sid).rc == 0
        up.known_alive.discard(sid)


def test_exec_options(up):
    sid = cli(up, "create").out.strip()
    up.known_alive.add(sid)
    try:
        c = cli(up, "exec", sid, "--timeout", "1", "--", "sleep", "30", timeout=60)
        assert c.rc == 137, c
        c = cli(up, "exec", sid, "--user", "user", "--cwd", "/tmp", "--", "sh", "-c", "id -u; pwd")
        assert c.rc == 0 and c.out == "1000\n/tmp\n", c
        c = cli(up, "exec", sid, "-i", "--", "cat", input=b"in\x00put")
        assert c.rc == 0 and c.outb == b"in\x00put", c
    finally:
        assert cli(up, "rm", sid).rc == 0
        up.known_alive.discard(sid)


def test_down(up):
    pid = up.pid
    assert pid and host.proc_exists(pid)
    c = cli(up, "down", "--state-dir", up.state_dir, timeout=120)
    assert c.rc == 0, c
    assert not host.wait_gone([pid], 10), "space down returned but spaced still runs"
    up.pid = None
    problems = residue.released_problems(up) + up.sanitizer_reports()
    assert not problems, problems
    c = cli(up, "ls")
    one_line_error(c, 6)
