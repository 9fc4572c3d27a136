# SPDX-License-Identifier: MIT
"""envd behaviour the E2B SDKs' own suites check, over raw HTTP: directory
entries with their size, the events a files.write makes (CREATE, CHMOD, WRITE,
as the Python SDK's watch test counts them), includeEntry on the polling
watchers, and a stream whose sandbox is killed under it ending the way E2B's
edge ends it (the connection drops; /health then says 502)."""

import base64
import http.client
import time
from urllib.parse import urlsplit

import pytest

import e2e_http
from test_e2b_connect import EnvelopeStream, END_STREAM, envd_headers, envelope
from test_e2b_parity import envd_files, fs_call, multipart
from test_e2b_resume import e2b_create, health, rest


@pytest.fixture(scope="module")
def sb(spaced):
    s = e2b_create(spaced)
    yield s
    rest(spaced, "DELETE", f"/sandboxes/{s['sandboxID']}")


def write(spaced, sb, path, content):
    r = envd_files(spaced, sb, "POST", path, multipart(path, content), {"Content-Type": "multipart/form-data; boundary=b0undary"})
    assert r.status == 200, r


def run(spaced, sb, cmd):
    body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}})
    h = envd_headers(sb["sandboxID"], sb["envdAccessToken"], "application/connect+json")
    h["Authorization"] = "Basic " + base64.b64encode(b"root:").decode()
    r = e2e_http.request(spaced.url, "POST", "/process.Process/Start", data=body, key=None, timeout=120, headers=h)
    assert r.status == 200, r
    return r


def poll_events(spaced, sb, wid, until, limit=100):
    events = []
    for _ in range(limit):
        events += fs_call(spaced, sb, "GetWatcherEvents", {"watcherId": wid})["events"]
        if until(events):
            return events
        time.sleep(0.1)
    raise AssertionError(f"events so far: {events}")


def stdout_of(r):
    from test_e2b_connect import parse_envelopes
    return b"".join(base64.b64decode(m["event"]["data"]["stdout"]) for _, m in parse_envelopes(r.body)
                    if "data" in m.get("event", {}) and "stdout" in m["event"]["data"]).decode()


def test_directory_entries_report_their_size(spaced, sb):
    """envd's os.Stat size: what stat(2) says inside (btrfs counts a
    directory's names, so an empty one is 0 bytes where ext4 says 4096)."""
    write(spaced, sb, "/tmp/sz/f.txt", b"12345")
    inside = stdout_of(run(spaced, sb, "mkdir -p /tmp/sz/d /tmp/sz/empty && "
                                       "for i in $(seq 40); do touch /tmp/sz/d/a-long-file-name-$i; done && "
                                       "stat -c '%n %s' /tmp/sz/d /tmp/sz/empty"))
    want = dict(line.rsplit(" ", 1) for line in inside.splitlines())
    entries = {e["name"]: e for e in fs_call(spaced, sb, "ListDir", {"path": "/tmp/sz", "depth": 1})["entries"]}
    assert entries["f.txt"]["size"] == "5", entries
    assert entries["d"]["size"] == want["/tmp/sz/d"] and int(want["/tmp/sz/d"]) > 0, (entries, want)
    assert entries["empty"]["size"] == want["/tmp/sz/empty"], (entries, want)
    st = fs_call(spaced, sb, "Stat", {"path": "/tmp/sz/d"})["entry"]
    assert st["type"] == "FILE_TYPE_DIRECTORY" and st["size"] == want["/tmp/sz/d"], st


def test_a_write_is_create_chmod_write_and_entries_come_with_include_entry(spaced, sb):
    fs_call(spaced, sb, "MakeDir", {"path": "/tmp/pw2"})
    plain = fs_call(spaced, sb, "CreateWatcher", {"path": "/tmp/pw2"})["watcherId"]
    with_entry = fs_call(spaced, sb, "CreateWatcher", {"path": "/tmp/pw2", "includeEntry": True})["watcherId"]
    snake = fs_call(spaced, sb, "CreateWatcher", {"path": "/tmp/pw2", "include_entry": True})["watcherId"]
    try:
        write(spaced, sb, "/tmp/pw2/a.txt", b"hello")
        done = lambda evs: any(e["type"] == "EVENT_TYPE_WRITE" for e in evs)  # noqa: E731
        events = poll_events(spaced, sb, plain, done)
        assert [(e["name"], e["type"]) for e in events] == [
            ("a.txt", "EVENT_TYPE_CREATE"), ("a.txt", "EVENT_TYPE_CHMOD"), ("a.txt", "EVENT_TYPE_WRITE")], events
        assert not any("entry" in e for e in events), events
        for wid in (with_entry, snake):
            events = poll_events(spaced, sb, wid, done)
            assert [e["type"] for e in events] == ["EVENT_TYPE_CREATE", "EVENT_TYPE_CHMOD", "EVENT_TYPE_WRITE"]
            for e in events:
                ent = e["entry"]
                assert ent["path"] == "/tmp/pw2/a.txt" and ent["name"] == "a.txt", e
                assert ent["type"] == "FILE_TYPE_FILE" and ent["size"] == "5" and ent["owner"] == "root", e
        # an overwrite is the same three events; a remove carries no entry
        write(spaced, sb, "/tmp/pw2/a.txt", b"hello again")
        events = poll_events(spaced, sb, with_entry, done)
        assert [e["type"] for e in events] == ["EVENT_TYPE_CREATE", "EVENT_TYPE_CHMOD", "EVENT_TYPE_WRITE"], events
        assert events[-1]["entry"]["size"] == "11", events
        run(spaced, sb, "rm /tmp/pw2/a.txt")
        events = poll_events(spaced, sb, with_entry, lambda evs: any(e["type"] == "EVENT_TYPE_REMOVE" for e in evs))
        assert events == [{"name": "a.txt", "type": "EVENT_TYPE_REMOVE"}], events
    finally:
        for wid in (plain, with_entry, snake):
            fs_call(spaced, sb, "RemoveWatcher", {"watcherId": wid})


def test_include_entry_must_be_a_boolean(spaced, sb):
    r = e2e_http.request(spaced.url, "POST", "/filesystem.Filesystem/CreateWatcher", key=None, timeout=60,
                         json={"path": "/tmp", "includeEntry": "yes"},
                         headers=envd_headers(sb["sandboxID"], sb["envdAccessToken"], "application/json"))
    assert r.status == 400 and r.json()["code"] == "invalid_argument", r
    assert "includeEntry" in r.json()["message"]


def test_a_stream_whose_sandbox_is_killed_drops_like_e2b(spaced):
    """E2B's edge drops the connection of a stream whose sandbox dies; the SDKs
    then probe /health, get 502 and report the sandbox killed. No end-of-stream
    message of ours may come first (it would be read as the answer)."""
    s = e2b_create(spaced)
    u = urlsplit(spaced.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    try:
        body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", "echo up; sleep 600"]}})
        conn.request("POST", "/process.Process/Start", body=body,
                     headers=envd_headers(s["sandboxID"], s["envdAccessToken"], "application/connect+json"))
        resp = conn.getresponse()
        assert resp.status == 200
        es = EnvelopeStream(type("R", (), {"resp": resp})())
        flags, m = es.next()
        assert "start" in m["event"], m
        seen = b""
        while b"up" not in seen:
            flags, m = es.next()
            if "data" in m.get("event", {}):
                seen += base64.b64decode(m["event"]["data"]["stdout"])
        assert rest(spaced, "DELETE", f"/sandboxes/{s['sandboxID']}").status == 204
        with pytest.raises(http.client.IncompleteRead):  # a chunked body cut off: the connection dropped
            for _ in range(10_000):  # keepalives may come first; never an end of stream
                flags, m = es.next()
                assert flags != END_STREAM and "end" not in m.get("event", {}), m
        r = health(spaced, s)
        assert r.status == 502 and r.json()["message"] == "The sandbox was not found", r
    finally:
        conn.close()
