# SPDX-License-Identifier: MIT
"""The TypeScript SDK (sdk/typescript) against a real spaced: `npm ci` (typescript
and yaml, pinned by its package-lock.json), `npm run build` (tsc to dist/), `npm
pack` and an install of the tarball into a fresh project as a user would; then
`node --test` runs sdk/typescript/test/sdk.test.mjs once with SPACE_URL and
SPACE_API_KEY (a fresh tenant's key) set, and every node test is reported here
as a pytest test (the types check against openapi.yaml, retries and timeouts
against a local stub, exec, files, checkpoints, errors, the quickstart)."""

import glob
import json
import os
import re
import shutil
import subprocess
import uuid

import pytest

from e2e_daemon import clean_env

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PKG = os.path.join(REPO, "sdk", "typescript")
TEST_FILE = os.path.join(PKG, "test", "sdk.test.mjs")
NODE_TIMEOUT = 300
NPM_TIMEOUT = 600

TAP_RESULT = re.compile(r"^(?P<indent> *)(?P<ok>not ok|ok) \d+ - (?P<name>.*?)(?P<directive> # (SKIP|TODO).*)?$")


def node_test_names():
    with open(TEST_FILE, encoding="utf-8") as f:
        src = f.read()
    names = [m.group(2) for m in re.finditer(r"\btest\(\s*(['\"])(.+?)\1", src)]
    assert len(names) == len(set(names)), "node test names must be unique"
    return names


def parse_tap(text):
    """name -> (passed, skipped, details) for the top-level tests."""
    results = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = TAP_RESULT.match(line)
        if not m or m.group("indent"):
            continue
        details = []
        if m.group("ok") != "ok":
            for more in lines[i + 1:i + 80]:
                if more.strip() == "...":
                    break
                details.append(more)
        results[m.group("name")] = (m.group("ok") == "ok", bool(m.group("directive")), "\n".join(details))
    return results


def run(argv, cwd, timeout=NPM_TIMEOUT):
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env=clean_env({"npm_config_audit": "false", "npm_config_fund": "false",
                                      "npm_config_update_notifier": "false"}))
    if r.returncode != 0:
        pytest.fail(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}",
                    pytrace=False)
    return r


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The package built, packed and installed into a fresh project (its dir)."""
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed (scripts/install-deps.sh installs them)")
    out = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    m = re.match(r"^v(\d+)\.", out)
    if not m or int(m.group(1)) < 20:
        pytest.skip(f"the SDK needs node >= 20 (its engines field), not {out!r}")
    if not all(os.path.isfile(os.path.join(PKG, "node_modules", d, "package.json"))
               for d in ("typescript", "yaml", "@types/node")):
        run(["npm", "ci"], PKG)
    run(["npm", "run", "build"], PKG)
    tmp = tmp_path_factory.mktemp("sdk-ts")
    out = run(["npm", "pack", "--ignore-scripts", "--json", "--pack-destination", str(tmp)], PKG)
    packed = json.loads(out.stdout)[0]
    files = {f["path"] for f in packed["files"]}
    assert {"package.json", "dist/index.js", "dist/index.d.ts", "README.md"} <= files, files
    assert not any(f.startswith(("node_modules/", "test/")) for f in files), files
    proj = tmp / "app"
    proj.mkdir()
    (proj / "package.json").write_text(json.dumps({"name": "app", "private": True, "type": "module"}))
    run(["npm", "install", "--offline", "--no-package-lock", str(tmp / packed["filename"])], str(proj))
    shutil.copy(os.path.join(PKG, "examples", "quickstart.mjs"), proj / "quickstart.mjs")
    # the installed package's types resolve for a TypeScript user
    (proj / "check.ts").write_text('import { Client, NotFound, type Sandbox } from "space-sdk";\n'
                                   'const c: Client = new Client({ url: "http://x" });\n'
                                   'export const f = async (): Promise<Sandbox> => c.get("x");\n'
                                   'export const g = NotFound;\n')
    run([os.path.join(PKG, "node_modules", ".bin", "tsc"), "--noEmit", "--strict", "--module", "nodenext",
         "--moduleResolution", "nodenext", "--target", "es2022", "--lib", "es2022,dom", "check.ts"], str(proj))
    # and as the README says: `npm install ./sdk/typescript` (a directory) after the build
    plain = tmp / "plain"
    plain.mkdir()
    (plain / "package.json").write_text(json.dumps({"name": "plain", "private": True, "type": "module"}))
    run(["npm", "install", "--offline", "--no-package-lock", "--ignore-scripts", PKG], str(plain))
    r = run(["node", "--input-type=module", "-e",
             'import { Client, NotFound, ERROR_CLASSES } from "space-sdk";'
             'console.log(typeof Client, NotFound.code, ERROR_CLASSES.not_found === NotFound)'], str(plain))
    assert r.stdout.strip() == "function not_found true", r.stdout
    return str(proj)


@pytest.fixture(scope="module")
def node_results(spaced, project):
    r = spaced.api("POST", "/v1/keys", json={"name": "sdk-ts", "tenant": "sdkts" + uuid.uuid4().hex[:10]})
    assert r.status == 201, r
    key = r.json()["key"]
    spaced.keys[key] = r.json()["id"]
    env = clean_env({"SPACE_URL": spaced.url, "SPACE_API_KEY": key, "SPACE_SDK_PROJECT": project,
                     "NODE_NO_WARNINGS": "1"})
    try:
        p = subprocess.run(["node", "--test", "--test-reporter=tap", TEST_FILE], cwd=PKG, env=env,
                           capture_output=True, text=True, timeout=NODE_TIMEOUT)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, rc = f"node --test did not finish within {NODE_TIMEOUT}s", None
    for line in out.splitlines():
        if line.lstrip().startswith("# overhead:"):
            print(line.strip())  # the figure (pytest -s shows it)
    yield {"results": parse_tap(out), "stdout": out, "stderr": err, "rc": rc}
    r = spaced.api("GET", "/v1/sandboxes", key=key)
    if r.status == 200:
        for sb in r.json()["sandboxes"]:
            spaced.api("DELETE", f"/v1/sandboxes/{sb['id']}", key=key, timeout=180)


@pytest.mark.timeout(NODE_TIMEOUT + NPM_TIMEOUT + 60)
@pytest.mark.parametrize("name", node_test_names())
def test_sdk_typescript(node_results, name):
    res = node_results["results"].get(name)
    if res is None:
        pytest.fail(f"node test {name!r} did not report (exit status {node_results['rc']}):\n"
                    f"{node_results['stdout'][-4000:]}\n{node_results['stderr'][-2000:]}", pytrace=False)
    passed, skipped, details = res
    assert passed and not skipped, f"node test {name!r} failed or was skipped:\n{details}"


def test_sdk_typescript_run_clean(node_results):
    """node itself exited 0 (no failures outside the tests, e.g. in hooks)."""
    assert node_results["rc"] == 0, (f"node --test exited {node_results['rc']}:\n"
                                     f"{node_results['stdout'][-4000:]}\n{node_results['stderr'][-2000:]}")


def test_sdk_typescript_sources_committed():
    """The lock file and the generated types are in the tree; dist/ and node_modules are not."""
    assert os.path.isfile(os.path.join(PKG, "package-lock.json"))
    assert os.path.isfile(os.path.join(PKG, "src", "generated", "api-types.ts"))
    r = subprocess.run(["git", "-C", REPO, "ls-files", "sdk/typescript"], capture_output=True, text=True, timeout=30)
    if r.returncode == 0 and r.stdout:
        assert not [f for f in r.stdout.split() if f.startswith(("sdk/typescript/dist/",
                                                                  "sdk/typescript/node_modules/"))]
    assert not glob.glob(os.path.join(PKG, "*.tgz"))
