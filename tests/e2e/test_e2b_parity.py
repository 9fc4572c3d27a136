# SPDX-License-Identifier: MIT
"""E2B behaviour that the official SDKs' own suites check, over raw HTTP (so
that it holds whatever SDK version or language calls it): the order of
`GET /v2/sandboxes`, health probes that are not activity, template aliases,
creates from a snapshot with their own metadata and envs, gzip on /files,
file metadata."""

import gzip
import os
import time
import uuid
from urllib.parse import urlencode

import pytest

import e2e_http
import e2e_residue as residue
from test_e2b_connect import END_STREAM, envd_headers, envelope, parse_envelopes
from test_e2b_resume import e2b_create, health, info, rest


def kill(spaced, sid):
    rest(spaced, "DELETE", f"/sandboxes/{sid}")


def listing(spaced, tag, **params):
    """(ids in the order of the whole list, pages seen) for the sandboxes with metadata tag=tag."""
    from urllib.parse import quote
    ids, pages, token = [], 0, None
    while True:
        q = {"metadata": quote(f"tag={tag}"), **params}
        if token:
            q["nextToken"] = token
        path = "/v2/sandboxes?" + "&".join(f"{k}={quote(str(v), safe='%')}" for k, v in q.items())
        r = rest(spaced, "GET", path)
        assert r.status == 200, r
        ids += [s["sandboxID"] for s in r.json()]
        pages += 1
        token = r.headers.get("x-next-token")
        if not token:
            return ids, pages
        assert pages < 20, "the cursor does not advance"


@pytest.fixture
def three(spaced):
    tag = uuid.uuid4().hex[:12]
    made = []
    try:
        for i in range(3):
            made.append(e2b_create(spaced, metadata={"tag": tag, "n": str(i)})["sandboxID"])
            time.sleep(0.01)  # distinct startedAt even on a coarse clock
        yield tag, made
    finally:
        for sid in made:
            kill(spaced, sid)


def test_list_is_newest_first_and_order_asc_reverses_it(spaced, three):
    tag, made = three
    ids, _ = listing(spaced, tag)
    assert ids == made[::-1]
    assert listing(spaced, tag, order="desc")[0] == made[::-1]
    assert listing(spaced, tag, order="asc")[0] == made
    started = [info(spaced, sid)["startedAt"] for sid in ids]
    assert started == sorted(started, reverse=True)
    assert listing(spaced, "matches-nothing-" + tag) == ([], 1)


def test_list_pages_follow_the_order(spaced, three):
    tag, made = three
    ids, pages = listing(spaced, tag, limit=1)
    assert (ids, pages) == (made[::-1], 3)
    ids, pages = listing(spaced, tag, limit=2, order="asc")
    assert (ids, pages) == (made, 2)


def test_list_cursor_survives_the_deletion_of_its_sandbox(spaced, three):
    tag, made = three
    r = rest(spaced, "GET", f"/v2/sandboxes?metadata=tag%3D{tag}&limit=1")
    token = r.headers.get("x-next-token")
    assert [s["sandboxID"] for s in r.json()] == [made[2]] and token
    kill(spaced, made[2])  # the cursor's own sandbox is gone: the next page still follows it
    r = rest(spaced, "GET", f"/v2/sandboxes?metadata=tag%3D{tag}&limit=5&nextToken={token}")
    assert r.status == 200, r
    assert [s["sandboxID"] for s in r.json()] == [made[1], made[0]]


@pytest.mark.parametrize("query", ["order=newest", "order=", "nextToken=abc", "nextToken=12_",
                                   "nextToken=_abcdefabcdefabcd", "nextToken=1x_abcdefabcdefabcd",
                                   "nextToken=" + "9" * 30 + "_abcdefabcdefabcd"])
def test_list_bad_order_or_cursor(spaced, query):
    r = rest(spaced, "GET", f"/v2/sandboxes?{query}")
    assert r.status == 400, r
    assert isinstance(r.json().get("code"), int) and r.json().get("message"), r.json()


def test_health_probes_are_not_activity(spaced):
    """The SDKs' isRunning() is GET /health: probing a sandbox must not keep
    it from its autoPause (before, every probe reset the idle window)."""
    sb = e2b_create(spaced, autoPause=True, timeout=2)
    sid = sb["sandboxID"]
    try:
        deadline = time.monotonic() + 60
        while True:
            r = health(spaced, sb)
            if r.status != 204:
                break
            assert time.monotonic() < deadline, "probed every 0.3 s, the sandbox was never paused"
            time.sleep(0.3)
        assert r.status == 502, r
        assert info(spaced, sid)["state"] == "paused"
    finally:
        kill(spaced, sid)


def test_template_alias(spaced):
    """Template.exists() in the SDKs: GET /templates/aliases/{alias}."""
    r = rest(spaced, "GET", "/templates/aliases/base")
    assert r.status == 200, r
    assert r.json() == {"templateID": "base", "public": True}
    r = rest(spaced, "GET", "/templates/aliases/no-such-template")
    assert r.status == 404, r
    assert r.json()["code"] == 404
    assert rest(spaced, "POST", "/templates/aliases/base").status == 405
    r = rest(spaced, "GET", "/templates/aliases/base", key="sk_not_a_key")
    assert r.status == 401, r


def test_create_from_snapshot_takes_metadata_and_envs(spaced):
    src = e2b_create(spaced, metadata={"who": "source"}, envVars={"FROM": "parent", "KEEP": "k"})
    made = [src["sandboxID"]]
    try:
        r = rest(spaced, "POST", f"/sandboxes/{src['sandboxID']}/snapshots", {})
        assert r.status in (200, 201), r
        snap = r.json()["snapshotID"]
        r = rest(spaced, "POST", "/v2/sandboxes", {"templateID": snap, "timeout": 600,
                                                   "metadata": {"who": "child"}, "envVars": {"FROM": "child"}})
        assert r.status == 201, r
        child = r.json()
        made.append(child["sandboxID"])
        assert child["templateID"] == snap
        got = info(spaced, child["sandboxID"])
        assert got["metadata"] == {"who": "child"} and got["templateID"] == snap, got
        v1 = spaced.api("GET", f"/v1/sandboxes/{child['sandboxID']}").json()
        assert v1["env"] == {"FROM": "child", "KEEP": "k"}, v1
        # without either, the source's are kept
        r = rest(spaced, "POST", "/v2/sandboxes", {"templateID": snap, "timeout": 600})
        assert r.status == 201, r
        made.append(r.json()["sandboxID"])
        assert info(spaced, made[-1])["metadata"] == {"who": "source"}
        for bad in ({"metadata": "x"}, {"metadata": {"k": 1}}, {"envVars": {"1BAD": "v"}}, {"envVars": []}):
            r = rest(spaced, "POST", "/v2/sandboxes", {"templateID": snap, "timeout": 600, **bad})
            assert r.status == 400, (bad, r)
    finally:
        for sid in made:
            kill(spaced, sid)


# ---- gzip on envd's /files ----

def envd_files(d, sb, method, path, data=None, headers=None, timeout=120):
    h = {"E2b-Sandbox-Id": sb["sandboxID"], "X-Access-Token": sb["envdAccessToken"], **(headers or {})}
    return e2e_http.request(d.url, method, "/files?" + urlencode({"path": path, "username": "root"}), data=data,
                            key=None, headers=h, timeout=timeout)


def multipart(name, content, boundary="b0undary"):
    return (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()


@pytest.fixture(scope="module")
def small_uploads(e2e_session, request):
    """A spaced of this module whose uploads are limited to 2 MiB, branches to 2
    children at a time and the host to 6 sandboxes."""
    d = e2e_session.new_daemon(extra_args=["--upload-max-mb", "2", "--max-branch", "2", "--max-sandboxes", "6"])
    d.start()
    yield d
    residue.finish_daemon(d, request)


@pytest.fixture(scope="module")
def gz_sandbox(small_uploads):
    sb = e2b_create(small_uploads)
    yield sb
    kill(small_uploads, sb["sandboxID"])


def test_gzip_uploads(small_uploads, gz_sandbox):
    d, sb = small_uploads, gz_sandbox
    data = os.urandom(300_000) + b"text " * 20_000
    r = envd_files(d, sb, "POST", "/tmp/raw.bin", gzip.compress(data),
                   {"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"})
    assert r.status == 200, r
    assert envd_files(d, sb, "GET", "/tmp/raw.bin").body == data
    # a multipart body, gzipped whole; two members concatenated are one gzip file
    body = multipart("/tmp/part.bin", data)
    r = envd_files(d, sb, "POST", "", gzip.compress(body[:1000]) + gzip.compress(body[1000:]),
                   {"Content-Type": "multipart/form-data; boundary=b0undary", "Content-Encoding": "x-gzip"})
    assert r.status == 200, r
    assert [f["path"] for f in r.json()] == ["/tmp/part.bin"]
    assert envd_files(d, sb, "GET", "/tmp/part.bin").body == data


@pytest.mark.parametrize("case", ["corrupt", "truncated", "trailing", "bomb", "br"])
def test_gzip_bad_uploads(small_uploads, gz_sandbox, case):
    d, sb = small_uploads, gz_sandbox
    good = gzip.compress(b"x" * 10_000)
    body, enc, want = {
        "corrupt": (good[:20] + bytes(b ^ 0xff for b in good[20:40]) + good[40:], "gzip", 400),
        "truncated": (good[:-9], "gzip", 400),
        "trailing": (good + b"not gzip at all", "gzip", 400),
        "bomb": (gzip.compress(bytes(16 << 20)), "gzip", 413),  # 16 MiB of zeros in ~16 KiB
        "br": (good, "br", 400),
    }[case]
    path = f"/tmp/bad-{case}"
    r = envd_files(d, sb, "POST", path, body, {"Content-Type": "application/octet-stream", "Content-Encoding": enc})
    assert r.status == want, r
    assert r.json().get("message"), r.json()
    assert envd_files(d, sb, "GET", path).status == 404, "nothing of a refused upload is kept"


def test_gzip_downloads(small_uploads, gz_sandbox):
    d, sb = small_uploads, gz_sandbox
    data = b"line of text\n" * 50_000 + os.urandom(1000)
    assert envd_files(d, sb, "POST", "/tmp/dl.txt", data, {"Content-Type": "application/octet-stream"}).status == 200
    r = envd_files(d, sb, "GET", "/tmp/dl.txt", headers={"Accept-Encoding": "br, gzip;q=0.8"})
    assert r.status == 200, r
    assert r.headers.get("content-encoding") == "gzip"
    assert len(r.body) < len(data) // 4
    assert gzip.decompress(r.body) == data
    for plain in ({}, {"Accept-Encoding": "identity"}, {"Accept-Encoding": "gzip;q=0"}, {"Accept-Encoding": "br"},
                  {"Accept-Encoding": "gzip; q=0.000"}):
        r = envd_files(d, sb, "GET", "/tmp/dl.txt", headers=plain)
        assert r.status == 200 and r.headers.get("content-encoding") is None and r.body == data, plain
    r = envd_files(d, sb, "GET", "/tmp/missing", headers={"Accept-Encoding": "gzip"})
    assert r.status == 404, r


# ---- file metadata (X-Metadata-*, user.e2b.* xattrs) ----

def fs_call(d, sb, method, body):
    r = e2e_http.request(d.url, "POST", f"/filesystem.Filesystem/{method}", key=None, timeout=60, json=body,
                         headers=envd_headers(sb["sandboxID"], sb["envdAccessToken"], "application/json"))
    assert r.status == 200, r
    return r.json()


def test_file_metadata(small_uploads, gz_sandbox):
    d, sb = small_uploads, gz_sandbox
    meta = {"X-Metadata-Owner": "alice", "X-Metadata-purpose": "a test, with spaces", "X-Metadata-v.1_x-y": "k=v; x"}
    want = {"owner": "alice", "purpose": "a test, with spaces", "v.1_x-y": "k=v; x"}
    r = envd_files(d, sb, "POST", "/tmp/meta/f.txt", b"content",
                   {"Content-Type": "application/octet-stream", **meta})
    assert r.status == 200, r
    assert r.json()[0]["metadata"] == want
    assert fs_call(d, sb, "Stat", {"path": "/tmp/meta/f.txt"})["entry"]["metadata"] == want
    entries = fs_call(d, sb, "ListDir", {"path": "/tmp/meta", "depth": 1})["entries"]
    assert [(e["name"], e.get("metadata")) for e in entries] == [("f.txt", want)]
    # a rewrite without metadata is a new file without any
    assert envd_files(d, sb, "POST", "/tmp/meta/f.txt", b"new",
                      {"Content-Type": "application/octet-stream"}).status == 200
    assert "metadata" not in fs_call(d, sb, "Stat", {"path": "/tmp/meta/f.txt"})["entry"]


@pytest.mark.parametrize("headers", [
    {"X-Metadata-": "empty key"},
    {"X-Metadata-" + "k" * 129: "key too long"},
    {"X-Metadata-k": "v" * 1025},
    {f"X-Metadata-k{i}": "v" for i in range(33)},
])
def test_file_metadata_bad(small_uploads, gz_sandbox, headers):
    d, sb = small_uploads, gz_sandbox
    r = envd_files(d, sb, "POST", "/tmp/meta-bad", b"x", {"Content-Type": "application/octet-stream", **headers})
    assert r.status == 400, r
    assert envd_files(d, sb, "GET", "/tmp/meta-bad").status == 404


# ---- fork ----

def fork(d, sid, count, **body):
    return rest(d, "POST", f"/sandboxes/{sid}/fork", {"count": count, **body})


def test_fork_past_max_branch_and_per_child_errors(small_uploads, gz_sandbox):
    d = small_uploads  # max_branch 2, max_sandboxes 6; gz_sandbox is one
    src = e2b_create(d)
    made = [src["sandboxID"]]
    try:
        envd_files(d, src, "POST", "/tmp/f.txt", b"forked", {"Content-Type": "application/octet-stream"})
        r = fork(d, src["sandboxID"], 4, timeout=120)  # two batches of max_branch
        assert r.status == 201, r
        kids = [x["sandbox"] for x in r.json()]
        assert len({k["sandboxID"] for k in kids}) == 4
        made += [k["sandboxID"] for k in kids]
        for k in kids:
            assert envd_files(d, k, "GET", "/tmp/f.txt").body == b"forked"
        # the host is full (6): nothing can be forked, the call fails whole
        r = fork(d, src["sandboxID"], 3)
        assert r.status in (429, 503), r
        # room for two: the first batch is made, the second reported on its child
        for sid in made[-2:]:
            kill(d, sid)
        made = made[:-2]
        r = fork(d, src["sandboxID"], 3)
        assert r.status == 201, r
        got = r.json()
        made += [x["sandbox"]["sandboxID"] for x in got if "sandbox" in x]
        assert ["sandbox" in x for x in got] == [True, True, False], got
        assert got[2]["error"]["code"] in (429, 503) and got[2]["error"]["message"], got
    finally:
        for sid in made:
            kill(d, sid)


@pytest.mark.parametrize("count", [0, 101, -1, "2", 1.5])
def test_fork_bad_count(spaced, count):
    sb = e2b_create(spaced)
    try:
        r = fork(spaced, sb["sandboxID"], count)
        assert r.status == 400, r
    finally:
        kill(spaced, sb["sandboxID"])


# ---- Connect-Timeout-Ms ----

def start(d, sb, cmd, timeout_ms):
    h = envd_headers(sb["sandboxID"], sb["envdAccessToken"], "application/connect+json")
    h["Connect-Timeout-Ms"] = str(timeout_ms)
    body = envelope({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}})
    r = e2e_http.request(d.url, "POST", "/process.Process/Start", data=body, key=None, timeout=120, headers=h)
    assert r.status == 200, r
    return parse_envelopes(r.body)


def test_start_past_its_deadline_is_deadline_exceeded(spaced):
    """The SDKs turn deadline_exceeded into TimeoutException; an end event
    (exit -1, killed) read as an ordinary failed command."""
    sb = e2b_create(spaced)
    try:
        msgs = start(spaced, sb, "echo started; sleep 30", 1500)
        flags, last = msgs[-1]
        assert flags == END_STREAM and last["error"]["code"] == "deadline_exceeded", msgs
        assert not any("end" in m.get("event", {}) for _, m in msgs[:-1]), msgs
        # a command that ends before its deadline ends as usual
        msgs = start(spaced, sb, "exit 3", 60_000)
        assert msgs[-1] == (END_STREAM, {}), msgs
        ends = [m["event"]["end"] for _, m in msgs[:-1] if "end" in m.get("event", {})]
        assert ends and ends[0]["exitCode"] == 3, msgs
    finally:
        kill(spaced, sb["sandboxID"])


def test_sandbox_logs_are_its_events(spaced):
    """GET /v2/sandboxes/{id}/logs over raw HTTP: the sandbox's events as
    E2B log entries, with cursor, limit, direction, level and search; the
    older /sandboxes/{id}/logs shape; bad input an E2B-shaped 400; another
    tenant's sandbox a 404."""
    sid = e2b_create(spaced)["sandboxID"]
    try:
        assert rest(spaced, "POST", f"/sandboxes/{sid}/pause").status == 204
        assert rest(spaced, "POST", f"/sandboxes/{sid}/connect", {"timeout": 60}).status in (200, 201)
        r = rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs")
        assert r.status == 200, r
        logs = r.json()["logs"]
        types = [x["fields"]["type"] for x in logs]
        assert types[0] == "sandbox.created" and "sandbox.paused" in types and "sandbox.resumed" in types, types
        for x in logs:
            assert set(x) == {"timestamp", "level", "message", "fields"} and x["level"] in ("info", "error"), x
            assert x["message"].startswith(x["fields"]["type"]), x
        stamps = [x["timestamp"] for x in logs]
        assert stamps == sorted(stamps)
        back = rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs?direction=backward&limit=2").json()["logs"]
        assert [x["fields"]["seq"] for x in back] == [x["fields"]["seq"] for x in logs[::-1][:2]], back
        r = rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs?search=sandbox.paused").json()["logs"]
        assert [x["fields"]["type"] for x in r] == ["sandbox.paused"], r
        assert rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs?search=Sandbox.Paused").json()["logs"] == []
        assert rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs?level=error").json()["logs"] == []
        future = int(time.time() * 1000) + 3_600_000
        assert rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs?cursor={future}").json()["logs"] == []
        assert len(rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs?cursor={future}&direction=backward")
                   .json()["logs"]) == len(logs)
        old = rest(spaced, "GET", f"/sandboxes/{sid}/logs?limit=1").json()
        assert len(old["logs"]) == 1 and set(old["logs"][0]) == {"timestamp", "line"}, old
        assert old["logEntries"][0]["fields"]["type"] == "sandbox.created", old
        for q in ("level=fatal", "direction=up", "cursor=abc", "limit=5000"):
            r = rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs?{q}")
            assert r.status == 400 and r.json()["code"] == 400, (q, r)
        assert rest(spaced, "GET", "/v2/sandboxes/sbxnotthere00000/logs").status == 404
        r = spaced.api("POST", "/v1/keys", json={"name": "e2blogs", "tenant": "logs" + uuid.uuid4().hex[:8]})
        assert r.status == 201, r
        r = rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs", key=r.json()["key"])
        assert r.status == 404 and r.json()["code"] == 404, r
    finally:
        kill(spaced, sid)
    # a killed sandbox's log is still there, ending with its delete
    r = rest(spaced, "GET", f"/v2/sandboxes/{sid}/logs?direction=backward&limit=1")
    assert r.status == 200 and r.json()["logs"][0]["fields"]["type"] == "sandbox.deleted", r


# ---- envd /files/compose ----

def compose(d, sb, body):
    h = {"E2b-Sandbox-Id": sb["sandboxID"], "X-Access-Token": sb["envdAccessToken"]}
    return e2e_http.request(d.url, "POST", "/files/compose", json=body, key=None, headers=h, timeout=60)


def test_files_compose(small_uploads, gz_sandbox):
    """POST /files/compose: the sources concatenated in order into the
    destination (parents made), the sources removed, EntryInfo back; bad
    input and a missing source an E2B-shaped error, the destination then
    untouched and the sources kept."""
    d, sb = small_uploads, gz_sandbox
    parts = [os.urandom(70_000), b"middle\n", os.urandom(200_000)]
    for i, p in enumerate(parts):
        assert envd_files(d, sb, "POST", f"/tmp/cmp/part{i}", p, {"Content-Type": "application/octet-stream"}).status == 200
    r = compose(d, sb, {"destination": "/tmp/cmp/out/all.bin", "username": "root",
                        "source_paths": [f"/tmp/cmp/part{i}" for i in range(3)]})
    assert r.status == 200, r
    assert r.json() == {"path": "/tmp/cmp/out/all.bin", "name": "all.bin", "type": "file"}, r
    assert envd_files(d, sb, "GET", "/tmp/cmp/out/all.bin").body == b"".join(parts)
    assert envd_files(d, sb, "GET", "/tmp/cmp/part0").status == 404
    # relative paths are the user's home
    assert envd_files(d, sb, "POST", "/root/rel-a", b"A", {"Content-Type": "application/octet-stream"}).status == 200
    r = compose(d, sb, {"destination": "rel-out", "username": "root", "source_paths": ["rel-a"]})
    assert r.status == 200 and r.json()["path"] == "/root/rel-out", r
    # a missing source: 404, nothing written, the others kept
    assert envd_files(d, sb, "POST", "/tmp/cmp/keep", b"keep", {"Content-Type": "application/octet-stream"}).status == 200
    r = compose(d, sb, {"destination": "/tmp/cmp/never", "username": "root",
                        "source_paths": ["/tmp/cmp/keep", "/tmp/cmp/missing"]})
    assert r.status == 404 and r.json()["code"] == 404 and "/tmp/cmp/missing" in r.json()["message"], r
    assert envd_files(d, sb, "GET", "/tmp/cmp/never").status == 404
    assert envd_files(d, sb, "GET", "/tmp/cmp/keep").body == b"keep"
    for body, code, msg in [
            ({"source_paths": ["/tmp/cmp/keep"]}, 400, "destination"),
            ({"destination": "/tmp/x", "source_paths": []}, 400, "non-empty array"),
            ({"destination": "/tmp/x", "source_paths": "/tmp/cmp/keep"}, 400, "non-empty array"),
            ({"destination": "/tmp/x", "source_paths": [7]}, 400, "must be a path"),
            ({"destination": "/tmp/cmp/keep", "source_paths": ["/tmp/cmp/keep"]}, 400, "is the destination"),
            ({"destination": "/tmp/x", "source_paths": ["/tmp/cmp/keep", "/tmp/cmp/keep"]}, 400, "listed twice"),
            ({"destination": "/tmp/x", "source_paths": ["/tmp/cmp"]}, 400, "is a directory"),
            ({"destination": "/tmp/x", "source_paths": ["/tmp/cmp/keep"], "mode": 1}, 400, "unknown field"),
            ({"destination": "/tmp/x", "source_paths": ["/tmp/cmp/keep"], "username": "no such"}, 401, "user name")]:
        r = compose(d, sb, body)
        assert r.status == code and r.json()["code"] == code and msg in r.json()["message"], (body, r)
    assert envd_files(d, sb, "GET", "/tmp/cmp/keep").body == b"keep"
    h = {"E2b-Sandbox-Id": sb["sandboxID"], "X-Access-Token": "wrong"}
    r = e2e_http.request(d.url, "POST", "/files/compose", json={"destination": "/tmp/x", "source_paths": ["/tmp/cmp/keep"]},
                         key=None, headers=h, timeout=60)
    assert r.status == 401, r
    r = e2e_http.request(d.url, "GET", "/files/compose", key=None, headers={**h, "X-Access-Token": sb["envdAccessToken"]})
    assert r.status == 405 and r.json()["code"] == 405, r
