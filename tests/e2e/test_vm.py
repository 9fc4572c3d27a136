# SPDX-License-Identifier: MIT
"""The vm runtime: sandboxes as microVMs (QEMU microvm, own guest kernel).

Slow (marker `vm`: each create boots a guest, under TCG software emulation
where the host has no usable KVM, as on the development machine); deselect
with `-m 'not vm'`. Skipped, with the reason, only where QEMU is missing.
The guest kernel comes from vm/kernel/build.sh (Debian's cloud kernel via
`apt-get download`), built once into the e2e cache."""

import fcntl
import hashlib
import os
import subprocess
import time

import pytest

import e2e_host as host
import e2e_residue as residue
from e2e_daemon import CACHE_DIR, assert_error_shape

pytestmark = pytest.mark.vm

QEMU = "/usr/bin/qemu-system-x86_64"
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def kernel_dir():
    """vm/kernel/build.sh into the cache, once (again when the recipe changes)."""
    script = os.path.join(REPO, "vm", "kernel", "build.sh")
    out = os.path.join(CACHE_DIR, "vm-kernel")
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(os.path.join(CACHE_DIR, ".vm-kernel.lock"), "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        stamp = os.path.join(out, "vmlinux")
        if not os.path.exists(stamp) or os.path.getmtime(script) > os.path.getmtime(stamp):
            r = subprocess.run([script, out], capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, f"{script} failed ({r.returncode}): {r.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def vmd(e2e_session, request):
    """A spaced of this module with the vm runtime (the guest kernel configured)."""
    if not os.access(QEMU, os.X_OK):
        pytest.skip(f"QEMU is not installed ({QEMU}): scripts/install-deps.sh installs qemu-system-x86")
    kdir = kernel_dir()
    d = e2e_session.new_daemon(extra_args=[f"--vm-kernel-dir={kdir}"])
    d.start()
    yield d
    problems = residue.teardown_daemon(d)
    if not problems:
        residue.remove_daemon_dir(d)
    else:
        residue.teardown_failed(request, f"spaced #{d.n} teardown:\n  " + "\n  ".join(problems))


@pytest.fixture(scope="module")
def vsb(vmd):
    """One running vm sandbox for the module's tests."""
    sb = vmd.create(runtime="vm", memory_mb=256)
    assert sb["runtime"] == "vm", sb
    yield sb["id"]
    if vmd.running:
        vmd.delete(sb["id"])


def test_info_reports_vm_runtime(vmd):
    info = vmd.api("GET", "/v1/info").json()
    assert "vm" in info["runtimes"], info
    vm = info["vm"]
    assert vm["available"] is True, vm
    assert vm["accelerator"] in ("kvm", "tcg"), vm
    assert vm["accelerator"] in vm["accelerators"], vm
    assert vm["agent_transport"] == "virtio-serial", vm
    assert vm["vmm"].startswith("QEMU "), vm
    # the CLI shows the same
    r = vmd.cli("info", "--json")
    assert r.rc == 0, r
    assert '"accelerator"' in r.out, r


def test_exec_streams_output_and_exit_code(vmd, vsb):
    r = vmd.exec(vsb, shell="echo out; echo err >&2; exit 7")
    assert r.response is None, r
    assert r.stdout == b"out\n" and r.stderr == b"err\n", r
    assert r.code == 7, r
    # several MiB through the virtio-serial channel: every byte, in order
    n = 3 * 1024 * 1024 + 17
    r = vmd.exec(vsb, shell=f"head -c {n} /dev/zero | tr '\\0' x; echo; seq 1 5 >&2")
    assert r.code == 0, r
    assert r.stdout == b"x" * n + b"\n", (len(r.stdout), r.stdout[:100])
    assert r.stderr == b"1\n2\n3\n4\n5\n", r


def test_guest_kernel_is_not_the_hosts(vmd, vsb):
    guest = vmd.sh(vsb, "uname -r").strip()
    assert guest and guest != os.uname().release, (guest, os.uname().release)
    # PID 1 is the agent (/init), the hostname the sandbox's
    assert vmd.sh(vsb, "cat /proc/1/cmdline | tr '\\0' ' '").strip() == "/init", vmd.sh(vsb, "ps")
    assert vmd.sh(vsb, "hostname").strip() == f"space-{vsb}"
    assert vmd.sh(vsb, "echo $SPACE_SANDBOX_ID").strip() == vsb


def test_files_in_and_out(vmd, vsb):
    data = os.urandom(1024 * 1024 + 3)
    r = vmd.api("PUT", f"/v1/sandboxes/{vsb}/files", params={"path": "/root/blob.bin"}, data=data)
    assert r.status == 201, r
    assert vmd.sh(vsb, "sha256sum /root/blob.bin").split()[0] == hashlib.sha256(data).hexdigest()
    r = vmd.api("GET", f"/v1/sandboxes/{vsb}/files", params={"path": "/root/blob.bin"})
    assert r.status == 200 and r.body == data, (r.status, len(r.body))
    # and through the CLI
    src = os.path.join(vmd.work_dir, "cli.txt")
    back = os.path.join(vmd.work_dir, "cli-back.txt")
    with open(src, "w") as f:
        f.write("a,b\n1,2\n")
    assert vmd.cli("cp", src, f"{vsb}:/data/cli.txt").rc == 0
    assert vmd.cli("cp", f"{vsb}:/data/cli.txt", back).rc == 0
    assert open(back).read() == "a,b\n1,2\n"


def test_pty(vmd, vsb):
    r = vmd.exec(vsb, shell="tty; stty size", pty={"rows": 33, "cols": 101})
    assert r.code == 0, r
    out = r.stdout.decode().replace("\r", "")
    assert out.startswith("/dev/pts/"), out
    assert "33 101" in out, out


def test_pause_resume_keeps_processes(vmd, vsb):
    vmd.sh(vsb, "(i=0; while true; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.2; done) >/dev/null 2>&1 &")
    host.wait_until(lambda: vmd.sh(vsb, "cat /tmp/counter 2>/dev/null || echo 0").strip() not in ("", "0"), 60)
    r = vmd.api("POST", f"/v1/sandboxes/{vsb}/pause")
    assert r.status == 200, r
    assert vmd.show(vsb).json()["state"] == "paused"
    r = vmd.exec(vsb, shell="true")
    assert_error_shape(r.response, 409, "sandbox_paused")
    r = vmd.api("POST", f"/v1/sandboxes/{vsb}/resume")
    assert r.status == 200, r
    first = int(vmd.sh(vsb, "cat /tmp/counter").strip())
    host.wait_until(lambda: int(vmd.sh(vsb, "cat /tmp/counter").strip()) > first, 60)



def test_suspend_resume_keeps_memory(vmd, vsb):
    """Suspend saves the whole machine and stops QEMU; resume continues every
    process where it stood: a counter in a shell variable (memory only) and a
    file that keeps growing, nothing lost."""
    vmd.sh(vsb, "(n=0; while true; do n=$((n+1)); echo $n >> /root/grow; echo $n > /tmp/c.new; "
                "mv /tmp/c.new /tmp/c; sleep 0.2; done) >/dev/null 2>&1 &")
    host.wait_until(lambda: int(vmd.sh(vsb, "cat /tmp/c 2>/dev/null || echo 0").strip() or 0) >= 3, 60)
    qemu = [p for p in vmd.sandbox_pids(vsb) if open(f"/proc/{p}/comm").read().strip() == "qemu-system-x86"]
    assert qemu, vmd.sandbox_pids(vsb)
    r = vmd.api("POST", f"/v1/sandboxes/{vsb}/suspend", timeout=300)
    assert r.status == 200, r
    sb = vmd.show(vsb).json()
    assert sb["state"] == "suspended" and sb["processes_preserved"] is True, sb
    # resources released: no QEMU, no cgroup; the machine is saved beside the disk
    assert not [p for p in qemu if host.proc_exists(p)]
    assert not vmd.cgroup_dirs(vsb)
    assert os.path.getsize(vmd.pool_path("sandboxes", vsb, "memory.state")) > 0
    r = vmd.api("POST", f"/v1/sandboxes/{vsb}/resume", timeout=300)
    assert r.status == 200, r
    sb = vmd.show(vsb).json()
    assert sb["state"] == "running" and sb["processes_preserved"] is True, sb
    before = int(vmd.sh(vsb, "cat /tmp/c").strip())
    host.wait_until(lambda: int(vmd.sh(vsb, "cat /tmp/c").strip()) > before + 2, 60)
    # the same shell, counting on: the file holds 1..n with no gap and no restart
    lines = vmd.sh(vsb, "cat /root/grow").split()
    assert lines == [str(i) for i in range(1, len(lines) + 1)], lines[:50]
    assert not os.path.exists(vmd.pool_path("sandboxes", vsb, "memory.state"))
    r = vmd.api("GET", "/v1/events", params={"sandbox": vsb, "limit": 500})
    assert r.status == 200, r
    ev = [e for e in r.json()["events"] if e["type"] == "sandbox.resumed"]
    assert ev and ev[-1]["data"] == {"processes_preserved": True}, ev

def test_delete_leaves_nothing(e2e_session, vmd):
    sid = vmd.create(runtime="vm", memory_mb=192)["id"]
    assert vmd.sh(sid, "echo up").strip() == "up"
    pids = vmd.sandbox_pids(sid)
    comms = sorted(open(f"/proc/{p}/comm").read().strip() for p in pids if host.proc_exists(p))
    assert "qemu-system-x86" in comms, comms
    disk = vmd.pool_path("sandboxes", sid, "disk.img")
    assert os.path.exists(disk)
    run = os.path.join(vmd.state_dir, "run", "sandboxes", sid)
    assert os.path.exists(os.path.join(run, "agent.sock"))
    vmd.delete(sid)
    assert not [p for p in pids if host.proc_exists(p)], "a QEMU or relay process survived the delete"
    assert not os.path.exists(disk) and not os.path.exists(os.path.dirname(disk))
    assert not os.path.exists(run)
    assert not vmd.cgroup_dirs(sid)
    host.wait_until(lambda: not residue.items_of_sandbox(e2e_session, sid), 5)
    assert not residue.items_of_sandbox(e2e_session, sid)


def _no_trace(vmd, before):
    time.sleep(0.2)
    assert set(os.listdir(vmd.pool_path("sandboxes"))) == before["pool"]
    assert set(os.listdir(os.path.join(vmd.state_dir, "run", "sandboxes"))) == before["run"]


def _snapshot(vmd):
    return {"pool": set(os.listdir(vmd.pool_path("sandboxes"))),
            "run": set(os.listdir(os.path.join(vmd.state_dir, "run", "sandboxes")))}


def test_memory_below_guest_minimum(vmd):
    before = _snapshot(vmd)
    r = vmd.api("POST", "/v1/sandboxes", json={"runtime": "vm", "memory_mb": 64})
    e = assert_error_shape(r, 400, "invalid_argument")
    assert "at least 128" in e["message"], e
    _no_trace(vmd, before)


def test_memory_above_host(vmd):
    host_mb = int(open("/proc/meminfo").read().split("MemTotal:")[1].split()[0]) // 1024
    info = vmd.api("GET", "/v1/info").json()
    want = host_mb + 1024
    if want > info["limits"]["max"]["memory_mb"]:
        pytest.skip("the host has more memory than max_memory_mb allows asking for")
    before = _snapshot(vmd)
    r = vmd.api("POST", "/v1/sandboxes", json={"runtime": "vm", "memory_mb": want})
    e = assert_error_shape(r, 400, "invalid_argument")
    assert "more than this host has" in e["message"], e
    _no_trace(vmd, before)


def test_vm_unavailable_is_a_clear_error(spaced):
    """The session's spaced has no guest kernel configured: a clear 400, nothing made."""
    info = spaced.api("GET", "/v1/info").json()
    assert "vm" not in info["runtimes"], info
    assert info["vm"]["available"] is False and info["vm"]["reason"], info
    r = spaced.api("POST", "/v1/sandboxes", json={"runtime": "vm"})
    e = assert_error_shape(r, 400, "invalid_argument")
    assert "not available on this host" in e["message"], e
    r = spaced.cli("create", "--runtime", "vm")
    assert r.rc != 0 and "not available" in r.err, r

