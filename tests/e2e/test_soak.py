# SPDX-License-Identifier: MIT
"""200 create/exec/delete cycles: no residue, no growth of fds or memory."""

import time

import pytest

import e2e_host as host

CYCLES = 200
MEASURE_AT = 20
FD_GROWTH_MAX = 8               # per process, between cycle 20 and cycle 200
RSS_GROWTH_MAX_KB = 24 * 1024   # per process (ASan runs with a 16 MiB quarantine here)


def measure(d):
    res = {}
    for p in d.daemon_pids():
        res[p] = (host.proc_fd_count(p), host.proc_rss_kb(p), " ".join(host.proc_cmdline(p)[:1]))
    return res


@pytest.mark.soak
@pytest.mark.timeout(1500)
def test_create_exec_delete_cycles(spaced):
    before_alive = {i for i, sb in spaced.list_all().items() if sb["state"] != "deleted"}
    subvols0 = set(spaced.subvolumes())
    at = {}
    t0 = time.monotonic()
    for i in range(1, CYCLES + 1):
        sid = spaced.create()["id"]
        r = spaced.exec(sid, cmd=["sh", "-c", 'echo "cycle $0"; echo e >&2', str(i)])
        assert r.code == 0 and r.stdout == f"cycle {i}\n".encode() and r.stderr == b"e\n", f"cycle {i}: {r!r}"
        spaced.delete(sid)
        if i in (MEASURE_AT, CYCLES):
            time.sleep(0.5)
            at[i] = measure(spaced)
    took = time.monotonic() - t0
    spaced.s.notes.append(f"soak: {CYCLES} cycles in {took:.1f}s ({took / CYCLES * 1000:.0f} ms each)")
    a, b = at[MEASURE_AT], at[CYCLES]
    report = []
    for p in a:
        if p not in b:
            report.append(f"process {p} ({a[p][2]}) went away during the soak")
            continue
        dfd = b[p][0] - a[p][0]
        drss = b[p][1] - a[p][1]
        spaced.s.notes.append(f"soak: pid {p} {a[p][2]}: fds {a[p][0]} → {b[p][0]}, "
                              f"RSS {a[p][1]} → {b[p][1]} kB (cycle {MEASURE_AT} → {CYCLES})")
        if dfd > FD_GROWTH_MAX:
            report.append(f"{a[p][2]} (pid {p}): fds grew from {a[p][0]} to {b[p][0]}")
        if drss > RSS_GROWTH_MAX_KB:
            report.append(f"{a[p][2]} (pid {p}): RSS grew from {a[p][1]} to {b[p][1]} kB")
    assert not report, "; ".join(report)
    # none of the soak's sandboxes is left (one of an earlier test may have expired meanwhile)
    after_alive = {i for i, sb in spaced.list_all().items() if sb["state"] != "deleted"}
    assert not after_alive - before_alive, after_alive - before_alive
    assert not set(spaced.subvolumes()) - subvols0, set(spaced.subvolumes()) - subvols0
