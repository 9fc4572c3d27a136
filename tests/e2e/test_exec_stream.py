# SPDX-License-Identifier: MIT
"""Exec streams that survive their client: output kept in a bounded buffer per
exec inside the sandbox, reattach from an offset (GET .../exec/{id}/output),
dropped events with the count, base64 output, and an end event for every way
an exec ends (exit code, signal, timeout, OOM kill, sandbox gone).

The module's daemon cuts a stalled client after 2 s (http_stall_s, 30 s by
default) and lets a reader that takes nothing hold a command up for 0.5 s
(exec_stall_ms); its exec buffer is 16 MiB."""

import base64
import json
import socket
import threading
import time
import uuid

import pytest

from e2e_daemon import assert_error_shape
import e2e_host as host
import e2e_residue as residue

BUFFER = 16 * 1024 * 1024


@pytest.fixture(scope="module")
def d(e2e_session, request):
    dd = e2e_session.new_daemon(extra_args=["--http-stall-s=2", "--exec-stall-ms=500",
                                            f"--exec-buffer-kb={BUFFER // 1024}"])
    dd.start()
    yield dd
    residue.finish_daemon(dd, request)


@pytest.fixture(scope="module")
def sid(d):
    sb = d.create()
    yield sb["id"]
    if d.running:
        d.delete(sb["id"])


def seq_text(n):
    return "".join(f"{i}\n" for i in range(1, n + 1)).encode()


class RawStream:
    """POST .../exec over a socket with a tiny receive window: a client that
    can stop reading for real (the kernel buffers little for it)."""

    def __init__(self, d, sid, body):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
        self.sock.settimeout(60)
        self.sock.connect(("127.0.0.1", d.port))
        payload = json.dumps(body).encode()
        self.sock.sendall(f"POST /v1/sandboxes/{sid}/exec HTTP/1.1\r\nHost: x\r\n"
                          f"Authorization: Bearer {d.admin_key}\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
        self.buf = b""
        head = self._until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b"chunked" in head.lower(), head
        self.body = b""

    def _fill(self):
        b = self.sock.recv(4096)
        if not b:
            raise EOFError
        self.buf += b

    def _until(self, sep):
        while sep not in self.buf:
            self._fill()
        out, self.buf = self.buf.split(sep, 1)
        return out

    def event(self):
        """The next NDJSON event (decoding the chunked body as it comes)."""
        while b"\n" not in self.body:
            size = int(self._until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                raise EOFError
            while len(self.buf) < size + 2:
                self._fill()
            self.body += self.buf[:size]
            self.buf = self.buf[size + 2:]
        line, self.body = self.body.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        self.sock.close()


def chunk_of(ev):
    return base64.b64decode(ev["data_b64"]) if "data_b64" in ev else ev["data"].encode()


def collect(d, sid, exec_id, key=None, raw=False, **params):
    """GET .../output: (events, stdout+stderr bytes in offset order, wire bytes)."""
    kw = {} if key is None else {"key": key}
    s = d.api("GET", f"/v1/sandboxes/{sid}/exec/{exec_id}/output", params=params or None, stream=True,
              timeout=120, **kw)
    assert s.status == 200, s.read()
    events, data, wire, at = [], bytearray(), 0, None
    try:
        for line in s.lines():
            wire += len(line)
            if not line.strip():
                continue
            ev = json.loads(line)
            d.s.validate(s, ev)
            events.append(ev)
            if ev["type"] == "start":
                at = ev["offset"]
            elif ev["type"] in ("stdout", "stderr", "dropped", "exit"):
                assert ev["offset"] == at, (ev, at)    # contiguous, in offset order
                if ev["type"] == "dropped":
                    at += ev["bytes"]
                elif ev["type"] != "exit":
                    data += chunk_of(ev)
                    at += len(chunk_of(ev))
    finally:
        s.close()
    return events, bytes(data), wire


def marker_exists(d, sid, path):
    r = d.exec(sid, shell=f"test -e {path}")
    return r.response is None and r.code == 0


def test_stalled_reader_keeps_the_command_and_reattach_reads_the_rest(d, sid):
    """A client that stops reading past the cut: the command runs to its end;
    reattaching where it stopped reads exactly what it missed, and the exit."""
    marker = f"/tmp/stall-{uuid.uuid4().hex[:8]}"
    n = 1500000                                  # ~11 MB of output: far more than the sockets hold
    expect = seq_text(n)
    raw = RawStream(d, sid, {"shell": f"seq 1 {n}; touch {marker}"})
    start = raw.event()
    assert start["type"] == "start", start
    got = bytearray()
    while len(got) < 10000:
        ev = raw.event()
        assert ev["type"] == "stdout", ev
        got += chunk_of(ev)
    last = ev
    # stop reading: longer than the cut (http_stall_s=2); the command must not wait for us, or die
    assert host.wait_until(lambda: marker_exists(d, sid, marker), 60), \
        "the command did not finish while its client stalled"
    assert start["offset"] == 0 and last["offset"] == len(got) - len(chunk_of(last)), (start, last)
    time.sleep(3)
    raw.close()
    events, rest, _ = collect(d, sid, start["exec_id"], **{"from": len(got)})
    assert events[0] == {"type": "start", "exec_id": start["exec_id"], "pid": start["pid"], "offset": len(got)}
    assert not [e for e in events if e["type"] == "dropped"], events[:3]
    assert bytes(got) + rest == expect
    assert events[-1] == {"type": "exit", "code": 0, "offset": len(expect)}, events[-1]
    d.exec(sid, shell=f"rm -f {marker}")


def test_disconnect_mid_stream_then_reattach(d, sid):
    marker = f"/tmp/disc-{uuid.uuid4().hex[:8]}"
    s = d.api("POST", f"/v1/sandboxes/{sid}/exec", stream=True,
              json={"shell": f"for i in $(seq 1 40); do echo line$i; echo e$i >&2; sleep 0.05; done; touch {marker}"})
    assert s.status == 200
    start = json.loads(s.readline())
    got, n, offsets = bytearray(), 0, []
    for line in s.lines():
        ev = json.loads(line)
        d.s.validate(s, ev)
        offsets.append(ev.get("offset"))
        got += chunk_of(ev)
        n += 1
        if n == 3:
            break
    s.close()                                   # the client goes away mid-stream
    assert host.wait_until(lambda: marker_exists(d, sid, marker), 30), "the command died with its client"
    assert offsets == [0, 6, 9], offsets         # line1\n e1\n line2\n
    events, rest, _ = collect(d, sid, start["exec_id"], **{"from": len(got)})
    whole = bytes(got) + rest
    out = b"".join(chunk_of(e) for e in events if e.get("type") == "stdout")
    err = b"".join(chunk_of(e) for e in events if e.get("type") == "stderr")
    assert len(whole) == sum(len(f"line{i}\ne{i}\n") for i in range(1, 41))
    assert out.endswith(b"line40\n") and err.endswith(b"e40\n"), (out[-20:], err[-20:])
    assert events[-1]["type"] == "exit" and events[-1]["code"] == 0
    # the whole output again from 0, stdout and stderr apart
    events, whole2, _ = collect(d, sid, start["exec_id"])
    assert whole2 == whole
    out = b"".join(chunk_of(e) for e in events if e.get("type") == "stdout")
    assert out == b"".join(f"line{i}\n".encode() for i in range(1, 41))
    d.exec(sid, shell=f"rm -f {marker}")


def test_overflow_gives_dropped_with_the_count_and_the_tail(d, sid):
    n = 4000000                                  # ~32 MB into a 16 MiB buffer nobody reads
    expect = seq_text(n)
    r = d.exec(sid, shell=f"seq 1 {n}", background=True)
    assert r.response is None and r.start, r
    exec_id = r.start["exec_id"]

    def finished():
        ps = d.api("GET", f"/v1/sandboxes/{sid}/exec").json()["processes"]
        return exec_id not in [p["exec_id"] for p in ps]
    assert host.wait_until(finished, 60)
    events, tail, _ = collect(d, sid, exec_id)
    assert events[0]["type"] == "start" and events[0]["offset"] == 0
    dropped = events[1]
    assert dropped["type"] == "dropped" and dropped["offset"] == 0, dropped
    assert dropped["bytes"] + len(tail) == len(expect)
    assert expect.endswith(tail)
    assert BUFFER // 2 <= len(tail) <= BUFFER + 65536, len(tail)
    assert events[-1] == {"type": "exit", "code": 0, "offset": len(expect)}
    # from inside what is still kept: no dropped event, exactly the rest
    events, rest, _ = collect(d, sid, exec_id, **{"from": len(expect) - 1000})
    assert rest == expect[-1000:] and not [e for e in events if e["type"] == "dropped"]


def test_background_exec_output_can_be_read(d, sid):
    r = d.exec(sid, shell="echo hello; echo err >&2; exit 4", background=True)
    assert r.start and r.exit is None, r
    events, data, _ = collect(d, sid, r.start["exec_id"])   # streams until the exit
    assert sorted(chunk_of(e) for e in events if e["type"] in ("stdout", "stderr")) == [b"err\n", b"hello\n"]
    assert events[-1]["code"] == 4


def test_binary_output_base64_is_exact_and_compact(d, sid):
    blob = bytes(range(256)) * 1024                 # 256 KiB of every byte value
    r = d.api("PUT", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/all-bytes"}, data=blob)
    assert r.status in (200, 201), r
    res = d.exec(sid, cmd=["cat", "/tmp/all-bytes"], output="base64")
    assert res.response is None and res.code == 0, res
    assert res.stdout == blob
    assert all("data_b64" in e for e in res.events if e["type"] == "stdout")
    # wire size: zeros in text form cost 6 bytes each (\u0000), base64 4/3
    zeros = 256 * 1024
    sizes = {}
    for form in ("text", "base64"):
        s = d.api("POST", f"/v1/sandboxes/{sid}/exec", stream=True,
                  json={"cmd": ["head", "-c", str(zeros), "/dev/zero"], "output": form})
        assert s.status == 200
        body = s.read()
        s.close()
        evs = [json.loads(l) for l in body.splitlines() if l.strip()]
        assert b"".join(chunk_of(e) for e in evs if e["type"] == "stdout") == bytes(zeros)
        sizes[form] = len(body)
    assert sizes["text"] > 5 * zeros, sizes
    assert sizes["base64"] < 1.45 * zeros, sizes
    # reattach in base64 too
    events, data, wire = collect(d, sid, res.start["exec_id"], output="base64")
    assert data == blob and wire < 1.45 * len(blob)


def test_timeout_is_an_exit_with_reason(d, sid):
    r = d.exec(sid, cmd=["sleep", "30"], timeout_s=1)
    assert r.exit == {"type": "exit", "code": 137, "signal": "SIGKILL", "reason": "timeout", "offset": 0}, r.exit
    events, _, _ = collect(d, sid, r.start["exec_id"])
    assert events[-1]["reason"] == "timeout"


def test_plain_kill_is_killed_not_oom(d, sid):
    r = d.exec(sid, shell="kill -KILL $$")
    assert r.exit["signal"] == "SIGKILL" and r.exit["reason"] == "killed", r.exit


def test_on_disconnect_kill(d, sid):
    s = d.api("POST", f"/v1/sandboxes/{sid}/exec", stream=True,
              json={"cmd": ["sleep", "300"], "on_disconnect": "kill"})
    start = json.loads(s.readline())
    s.close()

    def gone():
        ps = d.api("GET", f"/v1/sandboxes/{sid}/exec").json()["processes"]
        return start["exec_id"] not in [p["exec_id"] for p in ps]
    assert host.wait_until(gone, 20)
    events, _, _ = collect(d, sid, start["exec_id"])
    assert events[-1]["type"] == "exit" and events[-1]["signal"] == "SIGKILL"


def test_oom_kill_is_reported_as_oom(d):
    sb = d.create(memory_mb=32)
    try:
        r = d.exec(sb["id"], shell="dd if=/dev/zero of=/dev/null bs=200M count=1", timeout=120)
        assert r.exit and r.exit.get("signal") == "SIGKILL" and r.exit.get("reason") == "oom", r
        events, _, _ = collect(d, sb["id"], r.start["exec_id"])
        assert events[-1]["reason"] == "oom", events[-1]

        def oom_event():
            v = d.api("GET", "/v1/events", params={"sandbox": sb["id"], "type": "sandbox.oom"}).json()
            return v["events"]
        assert host.wait_until(oom_event, 20), "no sandbox.oom event"
        assert "out of memory" in oom_event()[0]["reason"]
    finally:
        d.delete(sb["id"])


def test_delete_while_streaming_ends_with_sandbox_gone(d):
    sb = d.create()
    result = {}

    def run():
        result["r"] = d.exec(sb["id"], shell="echo started; sleep 120", timeout=120)
    t = threading.Thread(target=run)
    t.start()
    try:
        def started():
            ps = d.api("GET", f"/v1/sandboxes/{sb['id']}/exec").json()["processes"]
            return bool(ps)
        assert host.wait_until(started, 20)
        d.delete(sb["id"])
    finally:
        t.join(150)
    r = result["r"]
    assert r.exit is None, r
    assert r.errors and r.errors[-1]["code"] == "sandbox_gone", r.events
    assert r.stream_error is None, r.stream_error


# ---- bad input ----

def test_reattach_unknown_exec_is_404(d, sid):
    for eid in ("e999999", "nosuch"):
        r = d.api("GET", f"/v1/sandboxes/{sid}/exec/{eid}/output")
        assert r.status == 404, r
        assert_error_shape(r)


def test_reattach_other_tenants_exec_is_404(d, sid):
    r = d.exec(sid, cmd=["true"])
    k = d.api("POST", "/v1/keys", json={"name": "other", "tenant": "t" + uuid.uuid4().hex[:12]})
    assert k.status == 201, k
    r2 = d.api("GET", f"/v1/sandboxes/{sid}/exec/{r.start['exec_id']}/output", key=k.json()["key"])
    assert r2.status == 404, r2
    assert r2.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", ""])
def test_reattach_bad_offset_is_400(d, sid, value):
    r = d.exec(sid, cmd=["true"])
    r2 = d.api("GET", f"/v1/sandboxes/{sid}/exec/{r.start['exec_id']}/output", params={"from": value})
    assert r2.status == 400, r2
    assert r2.json()["error"]["code"] == "invalid_argument"


def test_reattach_offset_past_the_end_is_400(d, sid):
    r = d.exec(sid, shell="printf 12345")
    r2 = d.api("GET", f"/v1/sandboxes/{sid}/exec/{r.start['exec_id']}/output", params={"from": 6})
    assert r2.status == 400, r2
    assert "past" in r2.json()["error"]["message"]
    events, data, _ = collect(d, sid, r.start["exec_id"], **{"from": 5})
    assert data == b"" and events[-1]["type"] == "exit"


@pytest.mark.parametrize("body", [{"output": "hex"}, {"output": 1}, {"on_disconnect": "maybe"}])
def test_exec_bad_output_form_is_400(d, sid, body):
    r = d.api("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": ["true"], **body})
    assert r.status == 400, r
    assert r.json()["error"]["code"] == "invalid_argument"


def test_reattach_bad_output_form_is_400(d, sid):
    r = d.exec(sid, cmd=["true"])
    r2 = d.api("GET", f"/v1/sandboxes/{sid}/exec/{r.start['exec_id']}/output", params={"output": "raw"})
    assert r2.status == 400, r2


# ---- CLI ----

def test_cli_exec_is_byte_exact(d, sid):
    blob = bytes(range(256)) * 64 + b"\x00" * 1000
    r = d.api("PUT", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/cli-bytes"}, data=blob)
    assert r.status in (200, 201), r
    c = d.cli("exec", sid, "--", "cat", "/tmp/cli-bytes")
    assert c.rc == 0 and c.outb == blob, c


def test_cli_attach(d, sid):
    r = d.exec(sid, shell="echo one; echo two >&2; exit 5", background=True)
    eid = r.start["exec_id"]
    c = d.cli("attach", sid, eid)
    assert c.rc == 5 and c.out == "one\n" and c.err == "two\n", c
    c = d.cli("attach", sid, eid, "--from", "4")
    assert c.rc == 5 and c.out == "" and c.err == "two\n", c
    c = d.cli("attach", sid, "e999999")
    assert c.rc == 125 and "no exec" in c.err, c  # the CLI failed, not the exec: 125
    c = d.cli("attach", sid, eid, "--from", "99")
    assert c.rc == 125 and "past" in c.err, c


def read_frames(body):
    """application/vnd.space.exec-frames → [(kind, offset, payload)]."""
    out, i = [], 0
    while i < len(body):
        assert len(body) - i >= 16, "a cut frame header"
        kind, z, length, offset = body[i], body[i + 1:i + 4], int.from_bytes(body[i + 4:i + 8], "big"), \
            int.from_bytes(body[i + 8:i + 16], "big")
        assert z == b"\0\0\0" and kind in (1, 2, 3), body[i:i + 16]
        payload = body[i + 16:i + 16 + length]
        assert len(payload) == length
        out.append((kind, offset, json.loads(payload) if kind == 3 else payload))
        i += 16 + length
    return out


def test_raw_frames_output(d, sid):
    blob = bytes(range(256)) * 2048                  # 512 KiB
    r = d.api("PUT", f"/v1/sandboxes/{sid}/files", params={"path": "/tmp/frames-bytes"}, data=blob)
    assert r.status in (200, 201), r
    s = d.api("POST", f"/v1/sandboxes/{sid}/exec", stream=True,
              json={"shell": "cat /tmp/frames-bytes; printf err >&2; exit 2", "output": "frames"})
    assert s.status == 200 and s.content_type == "application/vnd.space.exec-frames", s.headers
    body = s.read()
    s.close()
    frames = read_frames(body)
    start, end = frames[0][2], frames[-1][2]
    assert frames[0][0] == 3 and start["type"] == "start", frames[0]
    if d.s.spec is not None:   # the events inside frames are ExecEvents
        schema = d.s.spec.response_schema(s.method, s.path, 200, "application/x-ndjson")
        for k, _, ev in frames:
            if k == 3:
                d.s.spec.validate(ev, schema)
    assert frames[-1][0] == 3 and end == {"type": "exit", "code": 2, "offset": len(blob) + 3}, end
    out = b"".join(p for k, _, p in frames if k == 1)
    assert out == blob and [p for k, _, p in frames if k == 2] == [b"err"]
    at = 0
    for k, off, p in frames[1:-1]:
        assert off == at, (off, at)
        at += len(p)
    assert len(body) < len(blob) * 1.01, len(body)     # ~16 bytes a 64 KiB chunk
    # reattach in frames from the middle
    s = d.api("GET", f"/v1/sandboxes/{sid}/exec/{start['exec_id']}/output", params={"from": 1000, "output": "frames"},
              stream=True)
    frames = read_frames(s.read())
    s.close()
    assert frames[0][2]["offset"] == 1000
    assert b"".join(p for k, _, p in frames if k == 1) == blob[1000:]
    # or asked for by Accept
    for method, path, body in (("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": ["printf", "ab"]}),
                               ("GET", f"/v1/sandboxes/{sid}/exec/{start['exec_id']}/output", None)):
        s = d.api(method, path, json=body, stream=True, headers={"Accept": "application/vnd.space.exec-frames"},
                  params={"from": len(blob)} if method == "GET" else None)
        assert s.content_type == "application/vnd.space.exec-frames", s.headers
        frames = read_frames(s.read())
        s.close()
        assert frames[-1][0] == 3 and frames[-1][2]["type"] == "exit", frames
