# SPDX-License-Identifier: MIT
"""What a sandbox can learn about the host by reading: the boot id (its own,
not the host's) and the mount table (no host path in it)."""

import re

from attack_util import run

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def host_boot_id():
    with open(BOOT_ID) as f:
        return f.read().strip()


def inside_boot_id(spaced, sid):
    r = run(spaced, sid, cmd=["cat", BOOT_ID])
    assert r.code == 0, r
    return r.out.strip()


def test_boot_id_is_the_sandboxes_own(spaced, box, sandboxes):
    mine = inside_boot_id(spaced, box)
    assert mine != host_boot_id(), "the sandbox reads the host's boot id"
    assert UUID4.match(mine), f"boot_id {mine!r} is not a UUID as the kernel prints it"
    assert inside_boot_id(spaced, box) == mine, "the boot id changed between two reads"
    other = sandboxes.new()
    assert inside_boot_id(spaced, other) not in (mine, host_boot_id()), "two sandboxes share a boot id"

    # root inside cannot change it or uncover the host's
    r = run(spaced, box, shell=f"echo 00000000-0000-4000-8000-000000000000 > {BOOT_ID}; "
                               f"umount {BOOT_ID}; umount -l {BOOT_ID}; cat {BOOT_ID}")
    assert r.out.strip().splitlines()[-1] == mine, r
    # nor find it elsewhere in /proc
    r = run(spaced, box, cmd=["sh", "-c", "grep -rls -F -e \"$1\" /proc/sys 2>/dev/null | head -5", "sh",
                              host_boot_id()])
    assert r.out.strip() == "", f"the host's boot id is readable in {r.out!r}"


def test_mount_table_shows_no_host_path(spaced, box):
    """mountinfo and mounts inside name no directory of the host: not the state
    directory (pool image, agent sockets), not the template directory."""
    host_paths = {spaced.state_dir, spaced.template_dir, spaced.base_dir, spaced.pool_path()}
    # (PID 1's own /proc/1/mountinfo is out of sight inside: test_pid1.py; it shares this mount namespace)
    for f in ("/proc/self/mountinfo", "/proc/self/mounts", "/proc/mounts",
              "/proc/self/mountstats"):
        r = run(spaced, box, cmd=["cat", f])
        assert r.code == 0, r
        for p in host_paths:
            assert p not in r.out, f"{f} inside shows the host path {p}:\n{r.out}"
        assert host_boot_id() not in r.out


def test_mount_table_names_only_its_own_sandbox(spaced, box, sandboxes):
    """The root's mountinfo line shows the subvolume's path in the pool
    (docs/threat-model.md): it names this sandbox's id and no other's."""
    other = sandboxes.new()
    for f in ("/proc/self/mountinfo", "/proc/mounts"):
        r = run(spaced, box, cmd=["cat", f])
        assert r.code == 0, r
        assert other not in r.out, f"{f} inside names another sandbox ({other}):\n{r.out}"
        named = set(re.findall(r"/sandboxes/([a-z0-9]+)/", r.out))
        assert named <= {box}, f"{f} names sandboxes {named}:\n{r.out}"
    # the tools that read it work
    for cmd in (["df", "/"], ["mount"], ["findmnt", "/"]):
        r = run(spaced, box, cmd=cmd)
        assert r.code == 0 or "not found" in r.err or r.code == 127, r
