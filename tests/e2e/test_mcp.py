# SPDX-License-Identifier: MIT
"""`space mcp` against a real spaced: the official MCP client from npm
(@modelcontextprotocol/sdk, tests/e2e/mcp, pinned by package-lock.json) runs
an agent-like script over stdio and over streamable HTTP; the HTTP
transport's refusals (auth, origin, sessions) and JSON-RPC errors over raw
stdio and HTTP."""

import json
import os
import shutil
import socket
import subprocess
import time
import uuid

import pytest

import e2e_http
from e2e_daemon import clean_env

HERE = os.path.dirname(os.path.abspath(__file__))
MCP_DIR = os.path.join(HERE, "mcp")
TOOLS = ["branch", "checkpoint", "create_sandbox", "delete_sandbox", "expose_port", "list_files", "list_sandboxes",
         "read_file", "restore", "run_command", "write_file"]


@pytest.fixture(scope="module")
def node():
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed (scripts/install-deps.sh installs them)")
    if not os.path.isdir(os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol")):
        r = subprocess.run(["npm", "ci", "--prefix", MCP_DIR, "--no-audit", "--no-fund"], capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return shutil.which("node")


@pytest.fixture(scope="module")
def key(spaced):
    r = spaced.api("POST", "/v1/keys", json={"name": "mcp", "tenant": "mcp" + uuid.uuid4().hex[:10]})
    assert r.status == 201, r
    spaced.keys[r.json()["key"]] = r.json()["id"]
    return r.json()["key"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_mcp(spaced):
    port = free_port()
    p = subprocess.Popen([spaced.s.space_bin, "mcp", "--listen", f"127.0.0.1:{port}"],
                         env=clean_env({"SPACE_URL": spaced.url}), stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    yield url
    p.terminate()
    p.wait(timeout=30)


def run_agent(node, env, *args):
    r = subprocess.run([node, os.path.join(MCP_DIR, "agent.mjs"), *args], cwd=MCP_DIR, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"agent failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_seen(seen):
    assert seen["tools"] == TOOLS
    assert seen["server"]["name"] == "space"
    # the command's output came as progress while it ran, line by line
    assert [m for m in seen["progress"] if m.startswith("line")] == ["line1\n", "line2\n", "line3\n"], seen
    assert seen["deleted"] == 3


def test_agent_over_stdio(node, spaced, key):
    env = clean_env({"SPACE_URL": spaced.url, "SPACE_API_KEY": key})
    check_seen(run_agent(node, env, "stdio", spaced.s.space_bin))


def test_agent_over_streamable_http(node, spaced, key, http_mcp):
    check_seen(run_agent(node, clean_env(), "http", http_mcp + "/mcp", key))


def test_tenants_see_their_own(node, spaced, key, http_mcp):
    """A sandbox made through one key's MCP session is invisible to another tenant's."""
    other = spaced.api("POST", "/v1/keys", json={"name": "mcp2", "tenant": "mcp" + uuid.uuid4().hex[:10]}).json()
    spaced.keys[other["key"]] = other["id"]
    sb = spaced.create(key=key)
    try:
        sid, h = init_session(http_mcp, other["key"])
        r = rpc(http_mcp, other["key"], sid, "tools/call",
                {"name": "run_command", "arguments": {"sandbox_id": sb["id"], "command": "id"}})
        res = messages(r)[-1]["result"]
        assert res["isError"] is True and "404" in res["content"][0]["text"], res
    finally:
        spaced.delete(sb["id"], key=key)


# ---- raw stdio ----

def stdio_exchange(spaced, key, lines):
    p = subprocess.run([spaced.s.space_bin, "mcp"], input="".join(lines), capture_output=True, text=True, timeout=120,
                       env=clean_env({"SPACE_URL": spaced.url, "SPACE_API_KEY": key}))
    assert p.returncode == 0, p.stderr
    return [json.loads(x) for x in p.stdout.splitlines()]


def test_stdio_jsonrpc_errors(spaced, key):
    out = stdio_exchange(spaced, key, [
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},'
        '"clientInfo":{"name":"t","version":"0"}}}\n',
        '{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
        'not json\n',
        '[{"jsonrpc":"2.0","id":2,"method":"ping"}]\n',
        '{"jsonrpc":"2.0","id":3,"method":"no/such"}\n',
        '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_command","arguments":{}}}\n',
        '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"create_sandbox","arguments":{"cpu":"x"}}}\n',
        '{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}\n',
        '{"jsonrpc":"1.0","id":6,"method":"ping"}\n',
        '{"jsonrpc":"2.0","id":"seven","method":"ping"}\n',
    ])
    assert out[0]["id"] == 1 and out[0]["result"]["protocolVersion"] == "2025-03-26"
    codes = [(m.get("id"), m.get("error", {}).get("code")) for m in out[1:]]
    assert codes == [(None, -32700), (None, -32600), (3, -32601), (4, -32602), (5, -32602), (None, -32600),
                     (6, -32600), ("seven", None)], out
    assert "sandbox_id" in out[4]["error"]["message"] and "cpu" in out[5]["error"]["message"]
    assert out[-1]["result"] == {}


# ---- raw HTTP ----

def post(url, key, body, sid=None, extra=None):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(extra or {})}
    if key:
        h["Authorization"] = f"Bearer {key}"
    if sid:
        h["Mcp-Session-Id"] = sid
    return e2e_http.request(url, "POST", "/mcp", data=json.dumps(body).encode() if not isinstance(body, bytes)
                            else body, key=None, headers=h, timeout=120)


def messages(r):
    """The JSON-RPC messages of an answer: its JSON body, or the data lines of its SSE stream."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(line[6:]) for line in r.body.decode().splitlines() if line.startswith("data: ")]
    return [r.json()]


def init_session(url, key):
    r = post(url, key, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "raw", "version": "0"}}})
    assert r.status == 200, r
    sid = r.headers.get("mcp-session-id")
    assert sid and len(sid) == 32
    return sid, r


def rpc(url, key, sid, method, params=None, id=2):
    return post(url, key, {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}, sid)


def test_http_refusals(http_mcp, key, spaced):
    sid, r = init_session(http_mcp, key)
    assert r.json()["result"]["serverInfo"]["name"] == "space"
    assert rpc(http_mcp, key, sid, "ping").json()["result"] == {}
    # a notification is accepted with nothing to say
    assert post(http_mcp, key, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid).status == 202
    assert post(http_mcp, None, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid).status == 401
    assert post(http_mcp, key, {"jsonrpc": "2.0", "id": 1, "method": "ping"}).status == 400          # no session
    assert post(http_mcp, key, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, "x" * 32).status == 404  # unknown
    other = spaced.api("POST", "/v1/keys", json={"name": "mcp3"}).json()
    spaced.keys[other["key"]] = other["id"]
    assert post(http_mcp, other["key"], {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid).status == 404
    assert post(http_mcp, key, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid,
                {"Origin": "http://evil.example"}).status == 403
    assert e2e_http.request(http_mcp, "GET", "/mcp", key=None, headers={"Authorization": f"Bearer {key}"},
                            timeout=30).status == 405
    assert e2e_http.request(http_mcp, "POST", "/other", data=b"{}", key=None, timeout=30).status == 404
    r = post(http_mcp, key, b"{oops", sid)
    assert r.status == 200 and r.json()["error"]["code"] == -32700
    # a tool call streamed as SSE: progress notifications, then the result
    sb = spaced.create(key=key)
    try:
        r = post(http_mcp, key, {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                 "params": {"name": "run_command", "_meta": {"progressToken": "p1"},
                                            "arguments": {"sandbox_id": sb["id"], "command": "echo a; echo b"}}},
                 sid)
        assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream"), r
        msgs = messages(r)
        assert [m.get("method") for m in msgs[:-1]] == ["notifications/progress"] * len(msgs[:-1]) and msgs[:-1]
        assert msgs[-1]["id"] == 9 and msgs[-1]["result"]["structuredContent"]["stdout"] == "a\nb\n"
    finally:
        spaced.delete(sb["id"], key=key)
    r = e2e_http.request(http_mcp, "DELETE", "/mcp", key=None, timeout=30,
                         headers={"Authorization": f"Bearer {key}", "Mcp-Session-Id": sid})
    assert r.status == 204
    assert rpc(http_mcp, key, sid, "ping").status == 404
