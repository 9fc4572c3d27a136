# SPDX-License-Identifier: MIT
"""What the E2B JS SDK never sends, spoken with a raw Connect client:
process.Process/StreamInput (client streaming: connect-web cannot send client
streams, the Python SDK's connectrpc can)."""

import base64
import json
import struct
import time

import e2e_http

END_STREAM = 0x02


def envelope(obj, flags=0):
    b = json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(b)) + b


def parse_envelopes(data):
    out = []
    while data:
        assert len(data) >= 5, data
        flags, n = struct.unpack(">BI", data[:5])
        assert len(data) >= 5 + n, data
        out.append((flags, json.loads(data[5:5 + n])))
        data = data[5 + n:]
    return out


class EnvelopeStream:
    """The envelopes of an open server-streaming response, as they arrive."""

    def __init__(self, resp):
        self.resp = resp
        self.buf = b""

    def next(self):
        while True:
            if len(self.buf) >= 5:
                flags, n = struct.unpack(">BI", self.buf[:5])
                if len(self.buf) >= 5 + n:
                    msg = json.loads(self.buf[5:5 + n])
                    self.buf = self.buf[5 + n:]
                    return flags, msg
            b = self.resp.resp.read1(65536)
            if not b:
                raise AssertionError(f"the stream ended inside an envelope: {self.buf!r}")
            self.buf += b

    def stdout_until(self, want, limit=200):
        """stdout bytes of data events until want was seen (keepalives skipped)."""
        got = b""
        for _ in range(limit):
            flags, m = self.next()
            assert flags == 0, (flags, m)
            data = m.get("event", {}).get("data")
            if data and "stdout" in data:
                got += base64.b64decode(data["stdout"])
                if want in got:
                    return got
        raise AssertionError(f"{want!r} not seen in stdout {got!r}")


def envd_headers(sb_id, token, ct):
    return {"E2b-Sandbox-Id": sb_id, "X-Access-Token": token, "Content-Type": ct, "Connect-Protocol-Version": "1"}


def token_of(spaced, sb_id):
    r = e2e_http.request(spaced.url, "GET", f"/sandboxes/{sb_id}", key=None, headers={"X-API-KEY": spaced.admin_key})
    assert r.status == 200, r
    return r.json()["envdAccessToken"]


def start_cat(spaced, sb_id, token, tag):
    body = envelope({"process": {"cmd": "/bin/cat", "args": []}, "stdin": True, "tag": tag})
    resp = e2e_http.request(spaced.url, "POST", "/process.Process/Start", data=body, stream=True, timeout=120,
                            headers=envd_headers(sb_id, token, "application/connect+json"))
    assert resp.status == 200, resp.status
    es = EnvelopeStream(resp)
    flags, m = es.next()
    assert flags == 0 and "start" in m["event"], m
    return resp, es, m["event"]["start"]["pid"]


def stream_input(spaced, sb_id, token, body_iter):
    """StreamInput with a chunked body from body_iter; (status, envelopes)."""
    r = e2e_http.request(spaced.url, "POST", "/process.Process/StreamInput", data=body_iter, timeout=120,
                         headers=envd_headers(sb_id, token, "application/connect+json"))
    assert r.headers.get("content-type", "").startswith("application/connect+json"), r
    return r.status, parse_envelopes(r.body)


def data_event(b):
    return envelope({"data": {"input": {"stdin": base64.b64encode(b).decode()}}})


def test_stream_input_relays_as_it_arrives(spaced):
    sb = spaced.create()
    resp = None
    try:
        token = token_of(spaced, sb["id"])
        resp, out, pid = start_cat(spaced, sb["id"], token, "si-cat")
        seen = {}

        def body():
            yield envelope({"start": {"process": {"pid": pid}}})
            yield data_event(b"hello ")
            # relayed before the request ends: cat echoes it while the body is still open
            seen["first"] = out.stdout_until(b"hello ")
            yield envelope({"keepalive": {}})
            yield data_event(b"world\n")

        status, envs = stream_input(spaced, sb["id"], token, body())
        assert status == 200
        assert seen["first"] == b"hello "
        assert envs == [(0, {}), (END_STREAM, {})], envs
        assert out.stdout_until(b"world\n") == b"world\n"

        # by tag, a second call; the request's end did not close stdin
        status, envs = stream_input(spaced, sb["id"], token,
                                    iter([envelope({"start": {"process": {"tag": "si-cat"}}}), data_event(b"again\n")]))
        assert envs == [(0, {}), (END_STREAM, {})], envs
        assert out.stdout_until(b"again\n") == b"again\n"

        r = e2e_http.request(spaced.url, "POST", "/process.Process/CloseStdin",
                             raw_json=json.dumps({"process": {"pid": pid}}).encode(),
                             headers=envd_headers(sb["id"], token, "application/json"))
        assert r.status == 200, r
        for _ in range(100):
            flags, m = out.next()
            end = m.get("event", {}).get("end") if flags == 0 else None
            if end is not None:
                assert end.get("exitCode", 0) == 0 and end["exited"] is True, end
                break
        else:
            raise AssertionError("cat did not end after CloseStdin")
    finally:
        if resp:
            resp.close()
        spaced.delete(sb["id"])


def test_stream_input_bad_streams(spaced):
    """Each bad stream ends with a Connect error in the end-stream envelope."""
    sb = spaced.create()
    resp = None
    try:
        token = token_of(spaced, sb["id"])
        resp, out, pid = start_cat(spaced, sb["id"], token, "si-bad")
        cases = [
            ([data_event(b"x")], "invalid_argument", "begin with a start event"),
            ([], "invalid_argument", "begin with a start event"),
            ([envelope({"start": {"process": {"pid": 999999}}})], "not_found", "not found"),
            ([envelope({"start": {"process": {"tag": "nope"}}})], "not_found", "not found"),
            ([envelope({"start": {"process": {"pid": pid}}}), envelope({"start": {"process": {"pid": pid}}})],
             "invalid_argument", "only the first event"),
            ([envelope({"start": {"process": {"pid": pid}}}), envelope({"bogus": 1})],
             "invalid_argument", "start, data or keepalive"),
            ([envelope({"start": {"process": {"pid": pid}}}),
              envelope({"data": {"input": {"stdin": "!!!"}}})], "invalid_argument", "base64"),
            ([envelope({"start": {"process": {"pid": pid}}}),
              envelope({"data": {"input": {"pty": "eA=="}}})], "invalid_argument", "has no pty"),
            ([envelope({"start": {"process": {"pid": pid}}}), b"\x01\x00\x00\x00\x02{}"],
             "invalid_argument", "uncompressed"),
            ([envelope({"start": {"process": {"pid": pid}}}), envelope({}, flags=END_STREAM)],
             "invalid_argument", "uncompressed"),
            ([envelope({"start": {"process": {"pid": pid}}}), b"\x00\x00\x00\x00\x09{}"],
             "invalid_argument", "ends inside"),
            ([envelope({"start": {"process": {"pid": pid}}}), b"\x00\x7f\x00\x00\x00"],
             "resource_exhausted", "limited"),
            ([b"\x00\x00\x00\x00\x03[1]"], "invalid_argument", "JSON object"),
        ]
        for chunks, code, text in cases:
            status, envs = stream_input(spaced, sb["id"], token, iter(chunks))
            assert status == 200, (chunks, status)
            assert len(envs) == 1 and envs[0][0] == END_STREAM, (chunks, envs)
            err = envs[0][1]["error"]
            assert err["code"] == code and text in err["message"], (chunks, err)

        r = e2e_http.request(spaced.url, "POST", "/process.Process/StreamInput", data=envelope({}), timeout=60,
                             headers=envd_headers(sb["id"], token, "application/json"))
        envs = parse_envelopes(r.body)
        assert envs[-1][1]["error"]["code"] == "invalid_argument", envs
        r = e2e_http.request(spaced.url, "POST", "/process.Process/StreamInput", data=envelope({}), timeout=60,
                             headers=envd_headers(sb["id"], "0" * 64, "application/connect+json"))
        assert r.status == 401, r

        # the process still takes input after all that
        status, envs = stream_input(spaced, sb["id"], token,
                                    iter([envelope({"start": {"process": {"pid": pid}}}), data_event(b"alive\n")]))
        assert envs == [(0, {}), (END_STREAM, {})], envs
        assert b"alive\n" in out.stdout_until(b"alive\n")
    finally:
        if resp:
            resp.close()
        spaced.delete(sb["id"])


def test_stream_input_after_exit(spaced):
    """Input for a process that is gone: not_found, not a hang."""
    sb = spaced.create()
    resp = None
    try:
        token = token_of(spaced, sb["id"])
        resp, out, pid = start_cat(spaced, sb["id"], token, "si-exit")
        r = e2e_http.request(spaced.url, "POST", "/process.Process/SendSignal",
                             raw_json=json.dumps({"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}).encode(),
                             headers=envd_headers(sb["id"], token, "application/json"))
        assert r.status == 200, r
        deadline = time.monotonic() + 60
        while True:
            status, envs = stream_input(spaced, sb["id"], token,
                                        iter([envelope({"start": {"process": {"pid": pid}}}), data_event(b"x")]))
            if envs[-1][1].get("error", {}).get("code") == "not_found":
                break
            assert time.monotonic() < deadline, envs
            time.sleep(0.2)
    finally:
        if resp:
            resp.close()
        spaced.delete(sb["id"])


def envd_list(d, sb_id, token):
    return e2e_http.request(d.url, "POST", "/process.Process/List", raw_json=b"{}", timeout=60,
                            headers=envd_headers(sb_id, token, "application/json"))


def test_access_token_secret(fresh_spaced):
    """envdAccessToken = HMAC-SHA256(<state>/e2b.secret, id): the secret is
    32 random bytes made 0600 at first use, a looser one is refused, and
    deleting it (spaced stopped) rotates every token."""
    import hashlib
    import hmac
    import os
    import stat

    d = fresh_spaced
    path = os.path.join(d.state_dir, "e2b.secret")
    sb = d.create()
    other = d.create()
    try:
        tok = token_of(d, sb["id"])
        st = os.lstat(path)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        assert st.st_size == 32 and st.st_uid == 0
        with open(path, "rb") as f:
            secret = f.read()
        assert tok == hmac.new(secret, sb["id"].encode(), hashlib.sha256).hexdigest()
        assert token_of(d, other["id"]) != tok
        assert [f for f in os.listdir(d.state_dir) if "e2b.secret" in f] == ["e2b.secret"], "no temporary file left"
        assert envd_list(d, sb["id"], tok).status == 200

        # a secret others could read is not used: no token is handed out or accepted
        os.chmod(path, 0o640)
        d.restart()
        r = e2e_http.request(d.url, "GET", f"/sandboxes/{sb['id']}", key=None, headers={"X-API-KEY": d.admin_key})
        assert r.status == 500 and r.json()["code"] == 500, r
        r = envd_list(d, sb["id"], tok)
        assert r.status == 500 and r.json()["code"] == "internal", r
        assert "e2b.secret" in d.log_text()
        os.chmod(path, 0o600)

        # rotation: a new secret, new tokens; the old ones open nothing
        os.unlink(path)
        d.restart()
        new = token_of(d, sb["id"])
        assert new != tok
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        r = envd_list(d, sb["id"], tok)
        assert r.status == 401 and r.json()["code"] == "unauthenticated", r
        assert envd_list(d, sb["id"], new).status == 200
    finally:
        if os.path.exists(path):
            os.chmod(path, 0o600)
        d.delete(sb["id"])
        d.delete(other["id"])


def unary(spaced, sb_id, token, method, body):
    r = e2e_http.request(spaced.url, "POST", f"/process.Process/{method}", raw_json=json.dumps(body).encode(),
                         headers=envd_headers(sb_id, token, "application/json"))
    return r.status, (json.loads(r.body) if r.body else {})


def test_tag_selectors_of_connect_send_input_update_and_signal(spaced):
    """A process started with a tag is found by it in Connect, SendInput,
    Update (its pty) and SendSignal; an unknown tag is not_found in each."""
    sb = spaced.create()
    resp = conn = None
    try:
        token = token_of(spaced, sb["id"])
        resp, out, pid = start_cat(spaced, sb["id"], token, "tg-cat")
        # Connect by tag: the running process's stream, starting with its pid
        conn = e2e_http.request(spaced.url, "POST", "/process.Process/Connect", stream=True, timeout=120,
                                data=envelope({"process": {"tag": "tg-cat"}}),
                                headers=envd_headers(sb["id"], token, "application/connect+json"))
        assert conn.status == 200, conn.status
        attached = EnvelopeStream(conn)
        flags, m = attached.next()
        assert flags == 0 and m["event"]["start"]["pid"] == pid, m
        status, body = unary(spaced, sb["id"], token, "SendInput",
                             {"process": {"tag": "tg-cat"}, "input": {"stdin": base64.b64encode(b"by-tag\n").decode()}})
        assert status == 200, body
        assert out.stdout_until(b"by-tag\n") == b"by-tag\n"
        assert b"by-tag\n" in attached.stdout_until(b"by-tag\n")
        # Update: cat has no pty (refused, found by its tag); a pty process started with a tag is resized
        status, body = unary(spaced, sb["id"], token, "Update",
                             {"process": {"tag": "tg-cat"}, "pty": {"size": {"cols": 90, "rows": 20}}})
        assert status == 400 and "has no pty" in body["message"], body
        pty_body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", "sleep 0.5; stty size; sleep 30"]},
                             "pty": {"size": {"cols": 80, "rows": 24}}, "tag": "tg-pty"})
        pty = e2e_http.request(spaced.url, "POST", "/process.Process/Start", data=pty_body, stream=True, timeout=120,
                               headers=envd_headers(sb["id"], token, "application/connect+json"))
        try:
            assert pty.status == 200
            ps = EnvelopeStream(pty)
            assert "start" in ps.next()[1]["event"]
            status, body = unary(spaced, sb["id"], token, "Update",
                                 {"process": {"tag": "tg-pty"}, "pty": {"size": {"cols": 123, "rows": 45}}})
            assert status == 200, body
            got = b""
            for _ in range(200):
                flags, m = ps.next()
                d = m.get("event", {}).get("data", {})
                if "pty" in d:
                    got += base64.b64decode(d["pty"])
                    if b"45 123" in got:
                        break
            assert b"45 123" in got, got
            status, body = unary(spaced, sb["id"], token, "SendSignal",
                                 {"process": {"tag": "tg-pty"}, "signal": "SIGNAL_SIGKILL"})
            assert status == 200, body
        finally:
            pty.close()
        for method, extra in [("Connect", None), ("SendInput", {"input": {"stdin": "eA=="}}),
                              ("Update", {"pty": {"size": {"cols": 10, "rows": 10}}}),
                              ("SendSignal", {"signal": "SIGNAL_SIGTERM"}), ("CloseStdin", {})]:
            if extra is None:  # server streaming: the error is the end-stream envelope
                r = e2e_http.request(spaced.url, "POST", "/process.Process/Connect",
                                     data=envelope({"process": {"tag": "tg-none"}}), timeout=60,
                                     headers=envd_headers(sb["id"], token, "application/connect+json"))
                envs = parse_envelopes(r.body)
                assert envs[-1][0] == END_STREAM and envs[-1][1]["error"]["code"] == "not_found", envs
                continue
            status, body = unary(spaced, sb["id"], token, method, {"process": {"tag": "tg-none"}, **extra})
            assert status == 404 and body["code"] == "not_found" and "tag 'tg-none'" in body["message"], (method, body)
        # SendSignal by tag ends cat: its Start stream sees the end
        status, body = unary(spaced, sb["id"], token, "SendSignal", {"process": {"tag": "tg-cat"},
                                                                      "signal": "SIGNAL_SIGKILL"})
        assert status == 200, body
        for _ in range(100):
            flags, m = out.next()
            end = m.get("event", {}).get("end") if flags == 0 else None
            if end is not None:
                break
        else:
            raise AssertionError("cat did not end after SendSignal by tag")
    finally:
        for x in (conn, resp):
            if x:
                x.close()
        spaced.delete(sb["id"])
