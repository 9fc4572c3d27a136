# SPDX-License-Identifier: MIT
"""Reaching host files from a sandbox: /proc magic links, symlinks, '..',
a chroot breakout, the agent binary, the files API (path traversal, symlinks
through the sandbox's root, a symlink swapped during reads and writes)."""

import hashlib
import os
import socket
import subprocess
import time

import pytest

from e2e_daemon import assert_error_shape
import e2e_host as host
from attack_util import assert_spaced_healthy, probe_lines, run


def files_get(spaced, sid, path, **params):
    return spaced.api("GET", f"/v1/sandboxes/{sid}/files", params={"path": path, **params}, validate=False)


def inside_read(spaced, sid, path):
    r = run(spaced, sid, cmd=["cat", path])
    assert r.code == 0, r
    return r.stdout


def host_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


# ---- from a shell inside ----

def test_host_files_unreachable(spaced, box, host_marker):
    """/proc/1/root, /proc/*/root and cwd, /proc/self/root/.., symlinks,
    '..' past the root: none leads to the marker file on the host."""
    m = host_marker.path
    # the same routes to a file that exists inside must work (the probe is not blind); through the
    # shell's own /proc entry, as PID 1's is out of sight inside (test_pid1.py)
    r = run(spaced, box, shell="echo inside-control > /tmp/control; cd /; "
                               "cat /proc/$$/root/tmp/control /proc/self/root/../tmp/control /proc/$$/cwd/../tmp/control")
    assert r.out.count("inside-control") == 3, f"the routes do not work even inside: {r!r}"
    script = f"""
        cd /
        for p in /proc/1/root{m} /proc/1/root/../../..{m} /proc/$$/root/..{m} /proc/self/root/..{m} /proc/self/root/../../..{m} \\
                 /proc/thread-self/root{m} /..{m} /../../../..{m} {m}; do
            cat "$p" 2>/dev/null && echo "READ $p"
        done
        for d in /proc/[0-9]*; do
            cat $d/root{m} $d/cwd/../../../..{m} $d/root/../..{m} 2>/dev/null && echo "READ via $d"
        done
        ln -sfn {m} /tmp/l-abs; cat /tmp/l-abs 2>/dev/null && echo "READ /tmp/l-abs"
        mkdir -p /tmp/a/b; ln -sfn ../../../../../../..{m} /tmp/a/b/l-rel
        cat /tmp/a/b/l-rel 2>/dev/null && echo "READ /tmp/a/b/l-rel"
        ln -sfn /proc/1/root/../../.. /tmp/l-up; cat /tmp/l-up{m} 2>/dev/null && echo "READ /tmp/l-up"
        (cd /tmp; cd ..; cd ..; cd ..; cat .{m} 2>/dev/null && echo "READ after cd ..")
        find / -xdev -name '{host_marker.name}' 2>/dev/null | sed 's/^/FOUND /'
        grep -rlD skip '{host_marker.content}' /tmp /proc/1/root/tmp /proc/1/cwd/tmp /root /home 2>/dev/null | sed 's/^/GREP /'
        echo done
    """
    r = run(spaced, box, shell=script, timeout_s=120)
    out = r.out + r.err
    assert host_marker.content not in out, f"the host's marker file was read from inside:\n{out}"
    assert "READ" not in r.out and "FOUND" not in r.out and "GREP" not in r.out, \
        f"a route to the host file {m} exists inside:\n{r.out}"
    assert r.out.rstrip().endswith("done"), r
    with open(m) as f:
        assert f.read().strip() == host_marker.content, "the marker changed on the host"


def test_proc_shows_only_the_sandbox(spaced, box):
    """/proc lists only the sandbox's processes: spaced, its worker and every
    other host process are invisible and cannot be signalled or traced."""
    host_pids = spaced.daemon_pids() + [os.getpid()]
    mine = set(spaced.sandbox_pids(box))
    lines, r = probe_lines(spaced, box, ["syscalls"] + [f"kill0={p}" for p in host_pids]
                           + [f"ptrace-seize={p}" for p in host_pids])
    for p in host_pids:
        if p in mine:
            continue
        for what in ("kill0", "ptrace-seize"):
            res = lines.get(f"{what}={p}")
            assert res is not None and res.startswith("errno=3 "), \
                f"{what} of host pid {p} ({' '.join(host.proc_cmdline(p))}) from inside: {res!r}\n{r.out}"
    r = run(spaced, box, shell="for d in /proc/[0-9]*; do echo ${d#/proc/} $(cat $d/comm); done")
    seen = dict(line.split(" ", 1) for line in r.out.splitlines() if " " in line)
    ns_pids = {host.proc_nspid_last(p) for p in spaced.sandbox_pids(box)} | {int(p) for p in seen}
    assert len(seen) <= len(spaced.sandbox_pids(box)) + 4, f"/proc inside lists {len(seen)} processes: {seen}"
    for p, comm in seen.items():
        assert comm not in ("spaced", "systemd", "init", "python3", "pytest", "sshd"), \
            f"a host process is visible inside: {p} {comm} (all: {seen})"
    assert ns_pids, seen


def test_hostname_and_etc_differ_from_host(spaced, box):
    inside_etc = inside_read(spaced, box, "/etc/hostname").strip()
    inside_uts = run(spaced, box, cmd=["hostname"]).out.strip()
    host_etc = (host_file("/etc/hostname") or b"").decode().strip()
    host_uts = socket.gethostname()
    assert inside_uts != host_uts, f"the sandbox has the host's hostname {host_uts!r}"
    if host_etc:
        assert inside_etc != host_etc, f"/etc/hostname inside is the host's ({host_etc!r})"
    assert inside_uts, "no hostname inside"


def test_chroot_breakout_stays_in_sandbox(spaced, box):
    """CAP_SYS_CHROOT is kept inside: the classic breakout (chroot into a
    subdirectory, climb '..' from a directory fd outside it) must end at the
    sandbox's own root, never the host's."""
    lines, r = probe_lines(spaced, box, ["syscalls", "chroot-escape"])
    listing = [l for l in r.out.splitlines() if l.startswith("chroot-escape root:")]
    assert listing, r
    entries = set(listing[0].split(":", 1)[1].split()) - {".", ".."}
    inside = set(run(spaced, box, cmd=["ls", "-A", "/"]).out.split())
    assert entries == inside, f"after a chroot breakout '/' is {sorted(entries)}, the sandbox root is {sorted(inside)}"
    host_only = set(os.listdir("/")) - inside
    assert not (entries & host_only), f"host directories visible after a chroot breakout: {entries & host_only}"


def test_root_over_the_staging_tmpfs(spaced, box):
    """PID 1 unmounts the host's tree before its root comes, then moves the
    root over its staging tmpfs and chroots into it: even entering the mount
    namespace from the host (setns follows the mounts stacked on the
    namespace's root) lands in the sandbox's root, the host's tree is not in
    the namespace at all, and inside, '/' is the sandbox's root file system."""
    pid = spaced.agent_pid(box)
    inside = set(run(spaced, box, cmd=["ls", "-A", "/"]).out.split())
    entered = subprocess.run(["nsenter", f"--mount=/proc/{pid}/ns/mnt", "--", "/bin/ls", "-A", "/"],
                             capture_output=True, text=True, timeout=30)
    assert entered.returncode == 0 and set(entered.stdout.split()) == inside, \
        f"entering the sandbox's mount namespace shows {entered!r}, inside '/' is {sorted(inside)}"
    with open(f"/proc/{pid}/mountinfo") as f:
        points = [line.split()[4] for line in f]
    assert points.count("/") == 1, f"not one mount on '/': {points}"
    assert not any(p.startswith(spaced.base_dir) for p in points), f"a host path is mounted inside: {points}"
    r = run(spaced, box, shell="awk '$5 == \"/\" { for (i = 7; i <= NF; i++) if ($i == \"-\") { print $(i + 1); "
                               "break } }' /proc/self/mountinfo")
    assert r.out.split() == ["btrfs"], f"'/' inside is not the sandbox's root file system: {r!r}"


def test_agent_binary_is_sealed(spaced, box):
    """CVE-2019-5736 class: /proc/1/exe inside must not lead to the host's
    space-agent binary; writing through it fails and the host file is unchanged."""
    agent = spaced.s.agent_bin
    before = hashlib.sha256(host_file(agent)).hexdigest()
    r = run(spaced, box, shell="readlink /proc/1/exe; "
                               "(echo pwned > /proc/1/exe) 2>&1 && echo WROTE-EXE; "
                               "(echo pwned >> /proc/1/exe) 2>&1 && echo APPENDED-EXE; "
                               "(dd if=/dev/zero of=/proc/1/exe bs=1 count=1 conv=notrunc) 2>&1 && echo DD-EXE; true")
    # PID 1 is not dumpable (test_pid1.py): inside, /proc/1/exe does not resolve at all; on the
    # host it is a sealed memfd
    assert "memfd" not in r.out and "space-agent" not in r.out, f"/proc/1/exe resolves inside: {r.out}"
    target = os.readlink(f"/proc/{spaced.agent_pid(box)}/exe")
    assert target.startswith("/memfd:"), f"the agent's executable is {target!r}, not a sealed memfd"
    assert "WROTE-EXE" not in r.out and "APPENDED-EXE" not in r.out and "DD-EXE" not in r.out, \
        f"the agent's executable was writable from inside:\n{r.out}"
    assert hashlib.sha256(host_file(agent)).hexdigest() == before, "the host's space-agent binary changed"
    assert run(spaced, box, cmd=["true"]).code == 0, "the agent stopped serving"


# ---- the files API ----

TRAVERSALS = ["/tmp/../etc/passwd", "..", "/..", "/etc/..", "../../etc/passwd", "/a/b/../../../etc/shadow",
              "/tmp/..", "tmp/../../x"]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_files_api_refuses_dotdot(spaced, box, path):
    for method, params in [("GET", {}), ("GET", {"list": "1"}), ("GET", {"stat": "1"}), ("DELETE", {}),
                           ("PUT", {})]:
        r = spaced.api(method, f"/v1/sandboxes/{box}/files", params={"path": path, **params},
                       data=b"x" if method == "PUT" else None)
        assert_error_shape(r, 400, "invalid_path")
    for body in ({"from": path, "to": "/tmp/moved"}, {"from": "/etc/hostname", "to": path}):
        r = spaced.api("POST", f"/v1/sandboxes/{box}/files/move", json=body)
        assert_error_shape(r, 400, "invalid_path")


@pytest.mark.parametrize("raw", ["/tmp/%2e%2e/etc/passwd", "/tmp/%2E%2E/etc/passwd", "%2e%2e", "/tmp/.%2e/x",
                                 "/tmp/%00/x", "/etc/passwd%00", "/tmp/a%2f..%2f..%2fetc"])
def test_files_api_refuses_encoded_tricks(spaced, box, raw):
    r = spaced.api("GET", f"/v1/sandboxes/{box}/files?path={raw}")
    assert_error_shape(r, 400, "invalid_path")


def test_files_api_refuses_long_paths(spaced, box):
    r = spaced.api("GET", f"/v1/sandboxes/{box}/files", params={"path": "/" + "a" * 5000})
    assert_error_shape(r, 400, "invalid_path")


def test_files_api_symlinks_resolve_inside(spaced, box, host_marker):
    """A symlink to / inside the sandbox, then a path through it: the
    sandbox's file, never the host's. Writes through symlinks stay inside."""
    m = host_marker.path
    run(spaced, box, shell=f"ln -sfn / /tmp/rootlink; ln -sfn /proc/1/root /tmp/p1link; ln -sfn {m} /tmp/hostlink; "
                           f"ln -sfn /proc/1/cwd /tmp/cwdlink; ln -sfn {m} /tmp/wlink; rm -f {m}")
    own = inside_read(spaced, box, "/etc/hostname")
    for p in ("/tmp/rootlink/etc/hostname", "/tmp/p1link/etc/hostname", "/proc/1/root/etc/hostname",
              "/proc/self/root/etc/hostname", "/tmp/rootlink/tmp/rootlink/etc/hostname"):
        r = files_get(spaced, box, p)
        assert r.status == 200, (p, r)
        assert r.body == own, f"GET {p} gave {r.body[:200]!r}, the sandbox's /etc/hostname is {own!r}"
    for p in ("/tmp/hostlink", f"/tmp/rootlink{m}", f"/proc/1/root{m}", f"/tmp/p1link{m}", f"/tmp/cwdlink{m}", m):
        r = files_get(spaced, box, p)
        assert host_marker.content.encode() not in r.body, f"GET {p} returned the host's marker: {r!r}"
        assert r.status in (404, 400, 403), f"GET {p} (a file that exists only on the host): {r!r}"
    r = files_get(spaced, box, "/tmp/rootlink", list="1")
    assert r.status == 200, r
    names = {e["name"] for e in r.json()["entries"]}
    inside = set(run(spaced, box, cmd=["ls", "-A", "/"]).out.split())
    assert names == inside, f"listing through a symlink to /: {sorted(names)}; the sandbox root: {sorted(inside)}"
    # writes through a symlink whose target is a host path land inside (or are refused)
    r = spaced.api("PUT", f"/v1/sandboxes/{box}/files", params={"path": "/tmp/wlink"}, data=b"written-through-link\n")
    assert r.status in (201, 400, 403, 404), r
    with open(m) as f:
        assert f.read().strip() == host_marker.content, "a write through a symlink changed the host's file"
    run(spaced, box, shell=f"rm -f {m} /tmp/rootlink /tmp/p1link /tmp/hostlink /tmp/cwdlink /tmp/wlink")


@pytest.mark.timeout(180)
def test_toctou_symlink_swap(spaced, box, host_marker):
    """A loop inside swaps /tmp/x between a file and symlinks to /etc/shadow
    and to a host path while the API reads (and then writes) /tmp/x over and
    over: no read ever returns host content, no write reaches the host."""
    host_shadow = host_file("/etc/shadow") or b""
    own_shadow = inside_read(spaced, box, "/etc/shadow")
    host_only = [l for l in host_shadow.splitlines() if l.strip() and l not in own_shadow.splitlines()]
    m = host_marker.path
    marker_before = host_file(m)

    def race(targets, seconds, op):
        r = spaced.exec(box, cmd=["swap", str(seconds), "/tmp/x"] + targets, background=True)
        assert r.response is None and r.start, r
        results = []
        end = time.monotonic() + seconds - 1
        while time.monotonic() < end:
            results.append(op())
        # the swapper stops by itself; wait for it
        time_left = time.monotonic() + 15
        while time.monotonic() < time_left:
            ps = spaced.api("GET", f"/v1/sandboxes/{box}/exec").json()["processes"]
            if not any(p["exec_id"] == r.start["exec_id"] for p in ps):
                break
            time.sleep(0.2)
        return results

    def read():
        r = files_get(spaced, box, "/tmp/x")
        return r.status, r.body

    reads = race(["/etc/shadow", m, "/proc/1/root/etc/shadow", f"/proc/1/root{m}"], 10, read)
    statuses = {}
    for status, body in reads:
        statuses[status] = statuses.get(status, 0) + 1
        assert host_marker.content.encode() not in body, f"a racing read returned the host's marker file: {body!r}"
        for l in host_only:
            assert l not in body, f"a racing read returned the host's /etc/shadow: {body[:300]!r}"
        if status == 200:
            assert body in (b"decoy\n", own_shadow), f"a racing read returned unexpected content: {body[:300]!r}"
        else:
            assert status in (400, 403, 404, 409), f"a racing read: {status} {body[:300]!r}"
    print("toctou read statuses", statuses, "decoys", sum(1 for s, b in reads if b == b"decoy\n"))
    assert statuses.get(200, 0) > 0, f"no read succeeded during the race (statuses {statuses}): the race did not run"

    def write():
        r = spaced.api("PUT", f"/v1/sandboxes/{box}/files", params={"path": "/tmp/x"}, data=b"written-by-api\n",
                       validate=False)
        return r.status, r.body

    writes = race([m, f"/proc/1/root{m}"], 8, write)
    assert writes, "no write was attempted"
    print("toctou write statuses", sorted(set(s for s, _ in writes)), len(writes))
    assert host_file(m) == marker_before, f"a racing write changed the host file {m}: {host_file(m)!r}"
    assert_spaced_healthy(spaced)
    run(spaced, box, shell=f"rm -rf /tmp/x /tmp/x.f /tmp/x.l {m}")
