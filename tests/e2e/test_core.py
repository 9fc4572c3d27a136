# SPDX-License-Identifier: MIT
"""Health, info, the sandbox lifecycle and exec through the API and the CLI."""

import hashlib

from e2e_daemon import ID_RE, TIME_RE, assert_error_shape
import e2e_host as host
import e2e_residue as residue

SCRIPT = "echo hi; echo err >&2; exit 3"


def test_healthz(spaced):
    r = spaced.api("GET", "/healthz", key=None)
    assert r.status == 200, r
    v = r.json()
    assert v["status"] == "ok", v
    for part in ("store", "worker", "pool", "gateway", "spawner"):
        assert v["components"][part]["status"] == "ok", v
    assert spaced.api("GET", "/readyz", key=None).status == 200


def test_metrics_without_key(spaced):
    r = spaced.api("GET", "/metrics", key=None)
    assert r.status == 200, r
    assert "space_sandboxes" in r.text(), r.text()[:500]


def test_info(spaced):
    r = spaced.api("GET", "/v1/info")
    assert r.status == 200, r
    v = r.json()
    assert isinstance(v["version"], str) and v["version"]
    assert "ns" in v["runtimes"]
    assert v["default_template"] == "base"
    assert v["cgroup"] in ("v1", "v2", "hybrid")
    assert isinstance(v["storage"], dict)
    assert isinstance(v["limits"]["default"], dict) and isinstance(v["limits"]["max"], dict)


def test_lifecycle(spaced):
    r = spaced.api("POST", "/v1/sandboxes", json={}, timeout=180)
    assert r.status == 201, r
    sb = r.json()
    sid = sb["id"]
    assert ID_RE.match(sid), sb
    assert sb["state"] == "running", sb
    assert sb["tenant"] == "default"
    assert sb["template"] == "base"
    assert sb["runtime"] == "ns"
    assert TIME_RE.match(sb["created_at"]), sb["created_at"]
    spaced.known_alive.add(sid)

    r = spaced.show(sid)
    assert r.status == 200, r
    assert r.json()["id"] == sid and r.json()["state"] == "running"

    r = spaced.api("GET", "/v1/sandboxes")
    assert r.status == 200, r
    assert sid in [s["id"] for s in r.json()["sandboxes"]]

    r = spaced.api("GET", "/v1/sandboxes", params={"state": "running"})
    assert r.status == 200, r
    assert sid in [s["id"] for s in r.json()["sandboxes"]]
    assert all(s["state"] == "running" for s in r.json()["sandboxes"])

    # the sandbox exists on the host while it runs
    assert spaced.agent_pid(sid), f"no PID 1 found in the cgroup of {sid}"
    assert residue.items_of_sandbox(spaced.s, sid), "nothing of the sandbox visible on the host"

    r = spaced.api("DELETE", f"/v1/sandboxes/{sid}", timeout=180)
    assert r.status == 200, r
    assert r.json()["id"] == sid and r.json()["state"] == "deleted", r.json()
    spaced.known_alive.discard(sid)

    r = spaced.show(sid)
    assert_error_shape(r, 404, "not_found")
    r = spaced.exec(sid, cmd=["true"])
    assert r.response is not None, r
    assert_error_shape(r.response, 404, "not_found")
    r = spaced.api("DELETE", f"/v1/sandboxes/{sid}")
    assert_error_shape(r, 404, "not_found")
    r = spaced.api("GET", "/v1/sandboxes")
    assert sid not in [s["id"] for s in r.json()["sandboxes"]]
    # the teardown runs on in the background (space_worker_teardowns_pending)
    host.wait_until(lambda: not residue.items_of_sandbox(spaced.s, sid), 5)
    left = residue.items_of_sandbox(spaced.s, sid)
    assert not left, f"left behind by delete: {left}"


def test_create_with_options(spaced):
    sb = spaced.create(cpu=0.5, memory_mb=256, disk_mb=512, pids_max=100, timeout_s=3600,
                       env={"GREETING": "hello world"}, metadata={"owner": "e2e"})
    try:
        assert sb["cpu"] == 0.5 and sb["memory_mb"] == 256 and sb["disk_mb"] == 512
        assert sb["pids_max"] == 100 and sb["timeout_s"] == 3600
        assert sb["env"] == {"GREETING": "hello world"} and sb["metadata"] == {"owner": "e2e"}
        assert sb["expires_at"] is None or TIME_RE.match(sb["expires_at"])
        assert spaced.sh(sb["id"], 'echo "$GREETING"') == "hello world\n"
    finally:
        spaced.delete(sb["id"])


def test_list_pagination(spaced):
    ids = [spaced.create()["id"] for _ in range(3)]
    try:
        seen, after = [], None
        for _ in range(20):
            params = {"limit": 1}
            if after:
                params["after"] = after
            r = spaced.api("GET", "/v1/sandboxes", params=params)
            assert r.status == 200, r
            v = r.json()
            assert len(v["sandboxes"]) <= 1
            seen += [s["id"] for s in v["sandboxes"]]
            after = v["next"]
            if not after:
                break
        assert set(ids) <= set(seen), (ids, seen)
        assert len(seen) == len(set(seen)), f"a sandbox listed twice: {seen}"
    finally:
        for i in ids:
            spaced.delete(i)


# ---- exec ----

def _types(r):
    return [e["type"] for e in r.events]


def test_exec_api_streams_events(spaced, sandbox):
    r = spaced.exec(sandbox, shell=SCRIPT)
    assert r.response is None, r
    assert r.content_type == "application/x-ndjson"
    assert r.events[0]["type"] == "start", r.events
    assert isinstance(r.events[0]["exec_id"], str) and r.events[0]["exec_id"]
    assert isinstance(r.events[0]["pid"], int)
    assert r.events[-1]["type"] == "exit", r.events
    assert r.stdout == b"hi\n" and r.stderr == b"err\n", r
    assert r.code == 3, r
    assert "signal" not in r.exit or r.exit["signal"] in (None, ""), r.exit
    assert _types(r).count("exit") == 1


def test_exec_api_argv(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["sh", "-c", SCRIPT])
    assert (r.stdout, r.stderr, r.code) == (b"hi\n", b"err\n", 3), r
    r = spaced.exec(sandbox, cmd=["echo", "a  b", "$HOME", "*"])
    assert r.stdout == b"a  b $HOME *\n", r


def test_exec_cli(spaced, sandbox):
    c = spaced.cli("exec", sandbox, "--", "sh", "-c", SCRIPT)
    assert c.rc == 3, c
    assert c.out == "hi\n" and c.err == "err\n", c


def test_exec_missing_binary_api(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["/no/such/binary"])
    assert r.response is None, r
    assert r.errors, f"no error event: {r!r}"
    e = r.errors[0]
    assert e["code"] == "exec_failed" and e["message"], e
    assert r.code == 127, r
    assert _types(r)[-1] == "exit"


def test_exec_missing_binary_cli(spaced, sandbox):
    c = spaced.cli("exec", sandbox, "--", "/no/such/binary")
    assert c.rc == 127, c
    assert c.err.strip(), c


def test_exec_env(spaced, sandbox):
    r = spaced.exec(sandbox, shell='printf "%s|%s" "$FOO" "$EMPTY"', env={"FOO": "bar baz", "EMPTY": ""})
    assert r.code == 0 and r.stdout == b"bar baz|", r


def test_exec_env_cli(spaced, sandbox):
    c = spaced.cli("exec", sandbox, "--env", "FOO=x=y", "--", "sh", "-c", 'echo "$FOO"')
    assert c.rc == 0 and c.out == "x=y\n", c


def test_exec_cwd(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["pwd"], cwd="/tmp")
    assert r.code == 0 and r.stdout == b"/tmp\n", r


def test_exec_cwd_missing(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["pwd"], cwd="/no/such/dir")
    if r.response is not None:
        assert_error_shape(r.response, 400)
    else:
        assert r.errors and r.errors[0]["code"] == "exec_failed", r
        assert r.code == 127, r


def test_exec_user(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["id", "-u"], user="user")
    assert r.code == 0 and r.stdout == b"1000\n", r
    r = spaced.exec(sandbox, cmd=["id", "-u"], user=1000)
    assert r.code == 0 and r.stdout == b"1000\n", r
    r = spaced.exec(sandbox, cmd=["id", "-u"])
    assert r.code == 0 and r.stdout == b"0\n", r
    # the user's home is the default cwd and $HOME
    r = spaced.exec(sandbox, shell='echo "$HOME"; id -un', user="user")
    assert r.code == 0 and r.stdout.split(b"\n")[1] == b"user", r


def test_exec_unknown_user(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["id", "-u"], user="nosuchuser")
    if r.response is not None:
        assert_error_shape(r.response, 400)
    else:
        assert r.errors, f"exec as an unknown user ran: {r!r}"
        assert r.code != 0 and r.stdout == b"", r


def test_exec_stdin_string(spaced, sandbox):
    data = "hello\nworld\n" + "é" * 1000
    r = spaced.exec(sandbox, cmd=["cat"], stdin=data)
    assert r.code == 0 and r.stdout == data.encode(), r
    r = spaced.exec(sandbox, cmd=["wc", "-l"], stdin="a\nb\nc\n")
    assert r.code == 0 and r.stdout.strip() == b"3", r


def test_exec_without_stdin_sees_eof(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["cat"], timeout=60)
    assert r.code == 0 and r.stdout == b"", r


def test_exec_timeout(spaced, sandbox):
    # a command that would outlive the test: only the timeout ends it (and the stream's own
    # timeout bounds the wait, so a timeout_s that is not applied fails instead of hanging)
    r = spaced.exec(sandbox, cmd=["sleep", "100000"], timeout_s=1, timeout=120)
    assert r.exit is not None, r
    assert r.exit.get("signal") == "SIGKILL" and r.exit.get("reason") == "timeout", r.exit
    assert r.exit.get("code") in (None, 137), r.exit


def test_exec_background(spaced, sandbox):
    # the process goes on only once the test has had the answer: an exec that waited for its
    # process would never answer (the request's timeout fails it), whatever the host's speed
    assert spaced.exec(sandbox, cmd=["rm", "-f", "/tmp/bg-go", "/tmp/bg-done"]).code == 0
    r = spaced.exec(sandbox, shell="while [ ! -e /tmp/bg-go ]; do sleep 0.1; done; echo done > /tmp/bg-done",
                    background=True, timeout=60)
    assert r.response is None, r
    assert _types(r) == ["start"], f"a background exec answers with the start line only: {r.events}"
    assert spaced.exec(sandbox, shell="cat /tmp/bg-done 2>/dev/null; touch /tmp/bg-go").stdout == b"", \
        "the background process ran before it was let go"
    exec_id = r.start["exec_id"]
    done = host.wait_until(lambda: spaced.exec(sandbox, shell="cat /tmp/bg-done 2>/dev/null").stdout == b"done\n",
                           20, 0.3)
    assert done, "the background process did not run"
    assert exec_id


def test_exec_background_list_and_signal(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["sleep", "300"], background=True)
    assert r.start, r
    exec_id = r.start["exec_id"]
    lst = spaced.api("GET", f"/v1/sandboxes/{sandbox}/exec")
    assert lst.status == 200, lst
    procs = {p["exec_id"]: p for p in lst.json()["processes"]}
    assert exec_id in procs, procs
    assert procs[exec_id]["argv"] == ["sleep", "300"]
    s = spaced.api("POST", f"/v1/sandboxes/{sandbox}/exec/{exec_id}/signal", json={"signal": "SIGTERM"})
    assert s.status == 204, s

    def gone():
        v = spaced.api("GET", f"/v1/sandboxes/{sandbox}/exec").json()["processes"]
        return exec_id not in [p["exec_id"] for p in v]
    assert host.wait_until(gone, 15), "the signalled process is still listed"
    s = spaced.api("POST", f"/v1/sandboxes/{sandbox}/exec/{exec_id}/signal", json={"signal": "SIGTERM"})
    assert_error_shape(s, 404, "not_found")


def test_exec_signal_bad_name(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["sleep", "300"], background=True)
    exec_id = r.start["exec_id"]
    try:
        s = spaced.api("POST", f"/v1/sandboxes/{sandbox}/exec/{exec_id}/signal", json={"signal": "SIGBOGUS"})
        assert_error_shape(s, 400, "invalid_argument")
    finally:
        spaced.api("POST", f"/v1/sandboxes/{sandbox}/exec/{exec_id}/signal", json={"signal": "SIGKILL"})


def test_exec_stdin_kept_open(spaced, sandbox):
    r = spaced.exec(sandbox, shell="cat > /tmp/stdin-out", stdin=True, background=True)
    assert r.start, r
    exec_id = r.start["exec_id"]
    s = spaced.api("POST", f"/v1/sandboxes/{sandbox}/exec/{exec_id}/stdin", data=b"one\n")
    assert s.status == 204, s
    s = spaced.api("POST", f"/v1/sandboxes/{sandbox}/exec/{exec_id}/stdin", data=b"two\n", params={"eof": 1})
    assert s.status == 204, s
    ok = host.wait_until(lambda: spaced.exec(sandbox, cmd=["cat", "/tmp/stdin-out"]).stdout == b"one\ntwo\n", 15)
    assert ok, spaced.exec(sandbox, cmd=["cat", "/tmp/stdin-out"])


def test_exec_non_utf8_output(spaced, sandbox):
    r = spaced.exec(sandbox, shell=r"printf '\377\376ok'; printf '\300' >&2")
    assert r.code == 0, r
    assert r.stdout == b"\xff\xfeok" and r.stderr == b"\xc0", r
    b64 = [e for e in r.events if e["type"] in ("stdout", "stderr") and "data_b64" in e]
    assert b64, f"non-UTF-8 bytes did not arrive as data_b64: {r.events}"
    for e in r.events:
        if e["type"] in ("stdout", "stderr"):
            assert ("data" in e) != ("data_b64" in e), e


def test_exec_utf8_output_is_text(spaced, sandbox):
    r = spaced.exec(sandbox, cmd=["printf", "h\u00e9llo \u2603\n"])
    assert r.stdout == "h\u00e9llo \u2603\n".encode(), r
    assert all("data" in e for e in r.events if e["type"] == "stdout"), r.events


def test_exec_large_output(spaced, sandbox):
    n = 20 * 1024 * 1024
    r = spaced.exec(sandbox, shell=f"yes abcdefghijklmnopqrstuvwxyz | head -c {n}", timeout=600)
    assert r.code == 0, r
    assert len(r.stdout) == n, f"got {len(r.stdout)} of {n} bytes"
    line = b"abcdefghijklmnopqrstuvwxyz\n"
    assert r.stdout == (line * (n // len(line) + 1))[:n], "20 MiB of output arrived corrupted"


def test_exec_large_binary_output(spaced, sandbox):
    n = 20 * 1024 * 1024
    r = spaced.exec(sandbox, shell=f"head -c {n} /dev/urandom > /tmp/rnd && sha256sum /tmp/rnd >&2 && "
                                   "cat /tmp/rnd && rm /tmp/rnd", timeout=600)
    assert r.code == 0, r
    assert len(r.stdout) == n, f"got {len(r.stdout)} of {n} bytes"
    assert r.stderr.split()[0].decode() == hashlib.sha256(r.stdout).hexdigest(), "binary output corrupted"


def test_exec_exit_codes(spaced, sandbox):
    for code in (0, 1, 42, 255):
        r = spaced.exec(sandbox, shell=f"exit {code}")
        assert r.code == code, r
    r = spaced.exec(sandbox, shell="kill -TERM $$")
    assert r.exit.get("signal") == "SIGTERM", r.exit
