# SPDX-License-Identifier: MIT
"""The E2B JS SDK (tests/e2e/e2b, npm e2b 2.51.0 pinned by package-lock.json)
against a real spaced: `node --test` runs tests/e2e/e2b/e2b.test.mjs once per
module with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (a fresh tenant's
space key) set, and every node test is reported here as a pytest test."""

import os
import re
import shutil
import subprocess
import uuid

import pytest

from e2e_daemon import clean_env

HERE = os.path.dirname(os.path.abspath(__file__))
E2B_DIR = os.path.join(HERE, "e2b")
TEST_FILE = os.path.join(E2B_DIR, "e2b.test.mjs")
NODE_TIMEOUT = 900
NPM_TIMEOUT = 600

TAP_RESULT = re.compile(r"^(?P<indent> *)(?P<ok>not ok|ok) \d+ - (?P<name>.*?)(?P<directive> # (SKIP|TODO).*)?$")


def node_test_names():
    """The test names of the node file, read at collection time."""
    with open(TEST_FILE, encoding="utf-8") as f:
        src = f.read()
    names = [m.group(2) for m in re.finditer(r"\btest\(\s*(['\"`])(.+?)\1", src)]
    assert len(names) == len(set(names)), "node test names must be unique"
    return names


def parse_tap(text):
    """name -> (passed, details) for the tests inside the top-level suites."""
    results = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = TAP_RESULT.match(line)
        if not m or len(m.group("indent")) != 4:
            continue
        passed = m.group("ok") == "ok"
        details = []
        if not passed:
            for more in lines[i + 1:i + 80]:
                if more.strip() == "...":
                    break
                details.append(more)
        results[m.group("name")] = (passed, "\n".join(details))
    return results


def node_too_old():
    """e2b 2.51 needs node >= 20.18.1 (its engines field); Debian 12's nodejs is 18."""
    out = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    m = re.match(r"^v(\d+)\.(\d+)\.(\d+)", out)
    if not m:
        return f"cannot tell the node version ({out!r})"
    v = tuple(int(x) for x in m.groups())
    if v < (20, 18, 1) or (21, 0, 0) <= v < (22, 0, 0):
        return f"node {out} is too old for e2b 2.51 (needs >= 20.18.1 < 21, or >= 22)"
    return None


def npm_ci():
    if os.path.isdir(os.path.join(E2B_DIR, "node_modules", "e2b")):
        return
    r = subprocess.run(["npm", "ci", "--prefix", E2B_DIR, "--no-audit", "--no-fund"], capture_output=True,
                       text=True, timeout=NPM_TIMEOUT)
    if r.returncode != 0:
        pytest.fail(f"npm ci failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}", pytrace=False)


@pytest.fixture(scope="module")
def node_results(spaced):
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed (scripts/install-deps.sh installs them)")
    old = node_too_old()
    if old:
        pytest.skip(old)
    npm_ci()
    r = spaced.api("POST", "/v1/keys", json={"name": "e2b-sdk", "tenant": "e2b" + uuid.uuid4().hex[:10]})
    assert r.status == 201, r
    key = r.json()["key"]
    spaced.keys[key] = r.json()["id"]
    env = clean_env({"E2B_API_URL": spaced.url, "E2B_SANDBOX_URL": spaced.url, "E2B_VOLUME_API_URL": spaced.url,
                     "E2B_API_KEY": key,
                     "NODE_NO_WARNINGS": "1"})
    env.pop("E2B_DEBUG", None)
    env.pop("E2B_DOMAIN", None)
    try:
        # E2B_TEST_PATTERN (development): only the node tests whose names match; the others then fail as unreported
        pattern = os.environ.get("E2B_TEST_PATTERN")
        argv = ["node", "--test", "--test-reporter=tap"] + ([f"--test-name-pattern={pattern}"] if pattern else [])
        p = subprocess.run(argv + [TEST_FILE], cwd=E2B_DIR, env=env,
                           capture_output=True, text=True, timeout=NODE_TIMEOUT)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, rc = f"node --test did not finish within {NODE_TIMEOUT}s", None
    yield {"results": parse_tap(out), "stdout": out, "stderr": err, "rc": rc}
    # whatever the node tests left (they kill their own), removed through the space API
    r = spaced.api("GET", "/v1/sandboxes", key=key)
    if r.status == 200:
        for sb in r.json()["sandboxes"]:
            spaced.api("DELETE", f"/v1/sandboxes/{sb['id']}", key=key, timeout=180)


@pytest.mark.timeout(NODE_TIMEOUT + NPM_TIMEOUT + 60)
@pytest.mark.parametrize("name", node_test_names())
def test_e2b_sdk(node_results, name):
    res = node_results["results"].get(name)
    if res is None:
        pytest.fail(f"node test {name!r} did not report (exit status {node_results['rc']}):\n"
                    f"{node_results['stdout'][-4000:]}\n{node_results['stderr'][-2000:]}", pytrace=False)
    passed, details = res
    assert passed, f"node test {name!r} failed:\n{details}"


def test_e2b_sdk_run_clean(node_results):
    """node itself exited 0 (no failures outside the tests, e.g. in hooks)."""
    assert node_results["rc"] == 0, (f"node --test exited {node_results['rc']}:\n"
                                     f"{node_results['stdout'][-4000:]}\n{node_results['stderr'][-2000:]}")


def test_e2b_oversized_upload_and_bad_framing(spaced):
    """What the SDK cannot send: an upload over upload_max_mb (refused from
    Content-Length, before any byte is read) and a Connect body that is not
    one envelope."""
    import json

    import e2e_http

    sb = spaced.create()
    try:
        r = e2e_http.request(spaced.url, "GET", f"/sandboxes/{sb['id']}", key=None,
                             headers={"X-API-KEY": spaced.admin_key})
        assert r.status == 200, r
        token = r.json()["envdAccessToken"]
        head = (f"POST /files?path=/tmp/huge HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: {sb['id']}\r\n"
                f"X-Access-Token: {token}\r\nContent-Type: application/octet-stream\r\n"
                f"Content-Length: {10 ** 13}\r\n\r\n").encode()
        out = e2e_http.raw_exchange(spaced.url, head + b"x" * 1000, timeout=30)
        assert out.startswith(b"HTTP/1.1 413 "), out[:300]
        body = json.loads(out.split(b"\r\n\r\n", 1)[1])
        assert body["code"] == 413 and "limited" in body["message"], body

        for raw in (b"\x01\x00\x00\x00\x02{}", b"\x00\x00\x00\x00\x02{}\x00\x00\x00\x00\x02{}", b"{}"):
            msg = (f"POST /process.Process/Start HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: {sb['id']}\r\n"
                   f"X-Access-Token: {token}\r\nContent-Type: application/connect+json\r\n"
                   f"Content-Length: {len(raw)}\r\nConnection: close\r\n\r\n").encode() + raw
            out = e2e_http.raw_exchange(spaced.url, msg, timeout=30)
            assert out.startswith(b"HTTP/1.1 200 "), out[:300]
            assert b"application/connect+json" in out.split(b"\r\n\r\n", 1)[0]
            assert b'"invalid_argument"' in out, out[-300:]
    finally:
        spaced.delete(sb["id"])
