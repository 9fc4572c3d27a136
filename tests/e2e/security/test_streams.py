# SPDX-License-Identifier: MIT
"""Hostile output: an exec that floods 100 MiB to a client that does not read
or reads slowly must not grow spaced's memory beyond a bound (the output
waits in the exec's bounded buffer inside the sandbox, or is dropped there
and counted), and odd output (one 2 MiB line without a newline, binary
bytes) arrives intact."""

import base64
import hashlib
import json
import time

import pytest

import e2e_host as host
import e2e_http
from attack_util import assert_spaced_healthy, run

MiB = 1024 * 1024
FLOOD_BYTES = 100 * MiB
RSS_GROWTH_MAX = 64 * MiB      # spaced + its worker, over the baseline, while 100 MiB stream through


def daemon_rss(spaced):
    return sum((host.proc_rss_kb(p) or 0) * 1024 for p in spaced.daemon_pids())


def decode_events(buf):
    """Complete NDJSON lines of buf -> (stdout bytes, other events, rest)."""
    out = bytearray()
    events = []
    *lines, rest = buf.split(b"\n")
    for line in lines:
        if not line.strip():
            continue
        ev = json.loads(line)
        if ev.get("type") == "stdout":
            out += base64.b64decode(ev["data_b64"]) if "data_b64" in ev else ev["data"].encode()
        else:
            events.append(ev)
    return bytes(out), events, rest


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_output_flood_to_slow_client(spaced, sandboxes):
    sid = sandboxes.new()
    run(spaced, sid, cmd=["true"])          # warm up the paths an exec uses
    base = daemon_rss(spaced)
    s = e2e_http.request(spaced.url, "POST", f"/v1/sandboxes/{sid}/exec", key=spaced.admin_key, stream=True,
                         json={"shell": f"head -c {FLOOD_BYTES} /dev/zero | tr '\\0' y"}, timeout=120)
    assert s.status == 200, s.status
    peak = base
    got = bytearray()
    events = []
    pending = b""
    try:
        # 1. do not read at all for a while: spaced must not buffer it (the sandbox's exec
        #    buffer holds it back, then drops what does not fit and says how much)
        end = time.monotonic() + 8
        while time.monotonic() < end:
            peak = max(peak, daemon_rss(spaced))
            time.sleep(0.25)
        # 2. read slowly (64 KiB every 50 ms)
        end = time.monotonic() + 8
        while time.monotonic() < end:
            pending += s.resp.read1(64 * 1024)
            peak = max(peak, daemon_rss(spaced))
            time.sleep(0.05)
        # 3. read the rest as fast as we can
        n = 0
        while True:
            b = s.resp.read1(1 << 20)
            if not b:
                break
            pending += b
            out, evs, pending = decode_events(pending)
            got += out
            events += evs
            n += 1
            if n % 16 == 0:
                peak = max(peak, daemon_rss(spaced))
        out, evs, pending = decode_events(pending + b"\n")
        got += out
        events += evs
    finally:
        s.close()
    growth = peak - base
    assert growth < RSS_GROWTH_MAX, \
        f"spaced's RSS grew by {growth // MiB} MiB (from {base // MiB} MiB) while streaming to a slow client"
    exits = [e for e in events if e.get("type") == "exit"]
    assert exits and exits[-1].get("code") == 0, f"events: {events[:10]}"
    dropped = sum(e.get("bytes", 0) for e in events if e.get("type") == "dropped")
    # every byte either arrived, unaltered, or is counted as dropped: none is lost silently
    assert len(got) + dropped == FLOOD_BYTES, f"{len(got)} bytes arrived and {dropped} dropped of {FLOOD_BYTES}"
    assert got.count(b"y") == len(got), "the output arrived altered"
    assert_spaced_healthy(spaced)
    print(f"flood: RSS {base // MiB} MiB, peak +{growth / MiB:.1f} MiB, {dropped} bytes dropped for the stalled reader")


@pytest.mark.timeout(200)
@pytest.mark.parametrize("on_disconnect", ["kill", "keep"])
def test_client_that_never_reads_then_leaves(spaced, sandboxes, on_disconnect):
    """A client that never reads and then disconnects: spaced does not keep
    the output; the process is killed if the exec asked for that, else it
    runs on (its output bounded in the sandbox's exec buffer) for a reattach."""
    sid = sandboxes.new()
    base = daemon_rss(spaced)
    s = e2e_http.request(spaced.url, "POST", f"/v1/sandboxes/{sid}/exec", key=spaced.admin_key, stream=True,
                         json={"cmd": ["yes", "flood"], "on_disconnect": on_disconnect}, timeout=60)
    assert s.status == 200
    peak = base
    end = time.monotonic() + 8
    while time.monotonic() < end:
        peak = max(peak, daemon_rss(spaced))
        time.sleep(0.25)
    s.close()
    assert peak - base < RSS_GROWTH_MAX, f"spaced grew by {(peak - base) // MiB} MiB for an unread stream"

    def flooders():
        ps = spaced.api("GET", f"/v1/sandboxes/{sid}/exec").json()["processes"]
        return [p for p in ps if "yes" in p.get("argv", [])[:1]]
    if on_disconnect == "kill":
        assert host.wait_until(lambda: not flooders(), 30, 0.5), "the process kept running after its client went away"
        assert "yes" not in run(spaced, sid, shell="ps -o comm | grep -x yes; true").out
    else:
        time.sleep(2)
        left = flooders()
        assert left, "the process was killed although the exec asked to keep it"
        peak = max(peak, daemon_rss(spaced))
        assert peak - base < RSS_GROWTH_MAX, f"spaced grew by {(peak - base) // MiB} MiB for a kept exec"
        r = spaced.api("POST", f"/v1/sandboxes/{sid}/exec/{left[0]['exec_id']}/signal", json={"signal": "SIGKILL"})
        assert r.status == 204, r
        assert host.wait_until(lambda: not flooders(), 30, 0.5)
    assert_spaced_healthy(spaced)


def test_two_mib_line_without_newline(spaced, box):
    n = 2 * MiB
    r = run(spaced, box, shell=f"head -c {n} /dev/zero | tr '\\0' a", timeout=120)
    assert r.code == 0, r
    assert len(r.stdout) == n, f"{len(r.stdout)} bytes of a {n}-byte line arrived"
    assert r.stdout == b"a" * n, "the line arrived altered"


def test_binary_output_intact(spaced, box):
    n = 2 * MiB + 17
    run(spaced, box, shell=f"head -c {n} /dev/urandom > /tmp/rand.bin")
    want = run(spaced, box, shell="sha256sum /tmp/rand.bin").out.split()[0]
    r = run(spaced, box, cmd=["cat", "/tmp/rand.bin"], timeout=120)
    assert len(r.stdout) == n and hashlib.sha256(r.stdout).hexdigest() == want, \
        f"{len(r.stdout)} bytes arrived of {n}, sha256 {hashlib.sha256(r.stdout).hexdigest()} != {want}"
    r = run(spaced, box, shell="cat /tmp/rand.bin >&2; rm /tmp/rand.bin", timeout=120)
    assert hashlib.sha256(r.stderr).hexdigest() == want, "stderr arrived altered"
