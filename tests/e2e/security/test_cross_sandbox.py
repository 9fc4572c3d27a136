# SPDX-License-Identifier: MIT
"""One sandbox against another (and against the host): files, processes,
/dev/shm, abstract unix sockets, SysV IPC, and identity (machine-id,
hostname, uid ranges, users)."""

import os
import re
import secrets
import socket
import time

import pytest

import e2e_host as host
from attack_util import probe_lines, run


@pytest.fixture
def pair(spaced, sandboxes):
    a = sandboxes.new(with_probes=["abstract-unix", "sysv-ipc", "syscalls"])
    b = sandboxes.new(with_probes=["abstract-unix", "sysv-ipc", "syscalls"])
    return a, b


def test_other_sandbox_files_and_processes(spaced, pair):
    a, b = pair
    secret = "sandbox-a-secret-" + secrets.token_hex(12)
    run(spaced, a, shell=f"echo {secret} > /tmp/secret-a; echo {secret} > /root/secret-a")
    bg = spaced.exec(a, cmd=["sleep", "61"], background=True)
    assert bg.response is None, bg
    a_host_pids = spaced.sandbox_pids(a)
    a_root_on_host = spaced.host_view(spaced.pool_path("sandboxes", a))
    r = run(spaced, b, shell=f"""
        for p in /tmp/secret-a /root/secret-a /proc/*/root/tmp/secret-a /proc/*/cwd/secret-a \\
                 {a_root_on_host}/root/tmp/secret-a {spaced.pool_path('sandboxes', a, 'root', 'tmp', 'secret-a')}; do
            cat $p 2>/dev/null
        done
        find / -xdev -name 'secret-a' 2>/dev/null | sed 's/^/FOUND /'
        for d in /proc/[0-9]*; do cat $d/cmdline 2>/dev/null | tr '\\0' ' '; echo; done | grep -c 'sleep 6[1]'
        true""")
    assert secret not in r.out, f"sandbox B read sandbox A's file:\n{r.out}"
    assert "FOUND" not in r.out, r.out
    assert r.out.strip().splitlines()[-1] == "0", f"sandbox B sees A's processes:\n{r.out}"
    lines, pr = probe_lines(spaced, b, ["syscalls"] + [f"kill0={p}" for p in a_host_pids]
                            + [f"ptrace-seize={p}" for p in a_host_pids])
    b_pids = {host.proc_nspid_last(p) for p in spaced.sandbox_pids(b)}
    for p in a_host_pids:
        if p in b_pids:
            continue          # the same number names one of B's own processes
        for what in ("kill0", "ptrace-seize"):
            assert lines[f"{what}={p}"].startswith("errno=3 "), \
                f"{what} from B of A's host pid {p}: {lines[f'{what}={p}']}"
    assert spaced.api("GET", f"/v1/sandboxes/{b}/files", params={"path": "/tmp/secret-a"}).status == 404
    # A is unharmed
    assert run(spaced, a, cmd=["cat", "/tmp/secret-a"]).out.strip() == secret


def test_dev_shm_private(spaced, pair):
    a, b = pair
    name = "shm-" + secrets.token_hex(6)
    run(spaced, a, shell=f"echo from-a > /dev/shm/{name}")
    assert run(spaced, a, cmd=["cat", f"/dev/shm/{name}"]).out == "from-a\n"
    r = run(spaced, b, shell=f"ls -A /dev/shm; cat /dev/shm/{name} 2>/dev/null; true")
    assert name not in r.out and "from-a" not in r.out, f"B sees A's /dev/shm:\n{r.out}"
    assert not os.path.exists(f"/dev/shm/{name}"), "A's /dev/shm file is on the host's /dev/shm"


def test_abstract_unix_sockets_private(spaced, pair):
    a, b = pair
    name = "space-attack-" + secrets.token_hex(6)
    bg = spaced.exec(a, cmd=["abstract-unix", "listen", name, "30"], background=True)
    assert bg.response is None, bg
    try:
        def listening():
            return "connected: hello" in run(spaced, a, cmd=["abstract-unix", "connect", name]).out
        assert host.wait_until(listening, 10, 0.2), "the listener in A does not answer A itself (probe broken?)"
        r = run(spaced, b, cmd=["abstract-unix", "connect", name])
        assert "connected" not in r.out, f"B connected to A's abstract socket @{name}: {r.out}"
        assert "errno=111" in r.out, r.out          # ECONNREFUSED: nobody listens under that name in B
        r = run(spaced, b, shell=f"grep -c '@{name}' /proc/net/unix; true")
        assert r.out.strip() == "0", f"B's /proc/net/unix lists A's socket: {r.out}"
        # nor can the host reach it (another network namespace)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            with pytest.raises(OSError):
                s.connect("\0" + name)
    finally:
        spaced.api("POST", f"/v1/sandboxes/{a}/exec/{bg.start['exec_id']}/signal", json={"signal": "SIGKILL"})


def test_sysv_ipc_private(spaced, pair):
    a, b = pair
    key = "0x5ec%05x" % secrets.randbelow(1 << 20)
    lines, r = probe_lines(spaced, a, ["sysv-ipc", "create", key])
    assert lines["shm"].startswith("id=") and lines["msg"].startswith("id="), f"A could not create them: {r.out}"
    try:
        lines, r = probe_lines(spaced, a, ["sysv-ipc", "lookup", key])
        assert lines["shm"].startswith("id=") and lines["msg"].startswith("id="), r.out
        lines, r = probe_lines(spaced, b, ["sysv-ipc", "lookup", key])
        assert lines["shm"].startswith("errno=2 ") and lines["msg"].startswith("errno=2 "), \
            f"B sees A's SysV objects (key {key}): {r.out}"
        ipcs_b = run(spaced, b, shell="cat /proc/sysvipc/shm /proc/sysvipc/msg").out
        assert str(int(key, 16)) not in ipcs_b.split(), f"B's /proc/sysvipc lists A's key:\n{ipcs_b}"
        for f in ("/proc/sysvipc/shm", "/proc/sysvipc/msg"):
            with open(f) as fh:
                assert str(int(key, 16)) not in [l.split()[0] for l in fh.read().splitlines()[1:] if l.split()], \
                    f"A's SysV object is in the host's {f}"
    finally:
        run(spaced, a, cmd=["sysv-ipc", "remove", key])


# ---- identity ----

def host_passwd():
    with open("/etc/passwd") as f:
        return [l.split(":") for l in f.read().splitlines() if l.count(":") >= 6]


def test_identity_differs(spaced, pair):
    a, b = pair
    ids, names, maps = {}, {}, {}
    for s in (a, b):
        out = run(spaced, s, shell="cat /etc/machine-id; hostname; cat /proc/self/uid_map /proc/self/gid_map").out
        lines = out.splitlines()
        ids[s], names[s] = lines[0].strip(), lines[1].strip()
        maps[s] = [tuple(int(x) for x in l.split()) for l in lines[2:4]]
        assert re.fullmatch(r"[0-9a-f]{32}", ids[s]), f"machine-id of {s}: {ids[s]!r}"
    with open("/etc/machine-id") as f:
        host_id = f.read().strip()
    assert ids[a] != ids[b], f"two sandboxes share the machine-id {ids[a]}"
    assert host_id not in (ids[a], ids[b]), "a sandbox has the host's machine-id"
    assert names[a] != names[b], f"two sandboxes share the hostname {names[a]}"
    assert socket.gethostname() not in (names[a], names[b])
    # uid/gid ranges: one line each, root inside -> a distinct unprivileged host range
    ranges = {}
    for s in (a, b):
        for inside, outside, count in maps[s]:
            assert inside == 0 and outside >= 65536 and count >= 1, f"{s} maps {inside} {outside} {count}"
        (u0, uo, uc), (g0, go, gc) = maps[s]
        assert (uo, uc) == (go, gc), f"{s}: uid map {maps[s][0]} and gid map {maps[s][1]} differ"
        ranges[s] = range(uo, uo + uc)
    ra, rb = ranges[a], ranges[b]
    assert ra.stop <= rb.start or rb.stop <= ra.start, f"uid ranges overlap: {ra} and {rb}"
    # and no host user lives in either range
    for fields in host_passwd():
        uid = int(fields[2])
        assert uid not in ra and uid not in rb, f"host user {fields[0]} (uid {uid}) is inside a sandbox's range"
    # the host sees the agents as the range's first uid
    for s in (a, b):
        agent = spaced.agent_pid(s)
        assert int(host.proc_status(agent, "Uid").split()[0]) == ranges[s].start


def test_host_users_not_visible(spaced, pair):
    a, _ = pair
    inside_pw = run(spaced, a, cmd=["cat", "/etc/passwd"]).out
    inside = run(spaced, a, shell="cat /etc/passwd /etc/group; cat /etc/shadow 2>/dev/null; ls -A /home").out
    with open("/etc/passwd") as f:
        host_pw = f.read()
    assert inside_pw != host_pw, "the sandbox's /etc/passwd is the host's"
    inside_names = {l.split(":")[0] for l in inside.splitlines() if l.count(":") >= 6}
    template_like = {"root", "nobody", "user", "daemon", "bin", "sys"}
    leaked = {f[0] for f in host_passwd()} & inside_names - template_like
    assert not leaked, f"host users visible inside: {sorted(leaked)}"
    host_homes = {e for e in os.listdir("/home")} if os.path.isdir("/home") else set()
    inside_homes = set(inside.split()) & host_homes - {"user"}
    assert not inside_homes, f"host home directories visible inside: {inside_homes}"
