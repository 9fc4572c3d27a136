# SPDX-License-Identifier: MIT
"""Templates: list, import (tarball, directory, API), use, remove."""

import io
import os
import subprocess
import tarfile
import uuid

import pytest

from e2e_daemon import TIME_RE, assert_error_shape


def tname(prefix="e2e"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def tree(spaced, tmp_path_factory):
    """The base template unpacked, plus a marker file."""
    d = str(tmp_path_factory.mktemp("tpl") / "root")
    os.makedirs(d)
    subprocess.run(["tar", "-xf", spaced.s.base_template(), "-C", d, "--numeric-owner"], check=True)
    with open(os.path.join(d, "etc", "space-e2e-marker"), "w") as f:
        f.write("from-e2e\n")
    return d


@pytest.fixture(scope="module")
def tarball(tree, tmp_path_factory):
    t = str(tmp_path_factory.mktemp("tar") / "tpl.tar")
    subprocess.run(["tar", "-cf", t, "-C", tree, "--numeric-owner", "."], check=True)
    return t


def templates(spaced, key=None):
    kw = {} if key is None else {"key": key}
    r = spaced.api("GET", "/v1/templates", **kw)
    assert r.status == 200, r
    return {t["name"]: t for t in r.json()["templates"]}


def remove(spaced, name):
    r = spaced.api("DELETE", f"/v1/templates/{name}")
    assert r.status == 204, r


def test_ls_shows_base(spaced):
    t = templates(spaced)["base"]
    assert t["state"] == "ready" and t["size_bytes"] > 0 and isinstance(t["in_use"], int), t
    assert TIME_RE.match(t["created_at"]), t
    c = spaced.cli("template", "ls")
    assert c.rc == 0 and "base" in c.out, c


def use_and_remove(spaced, name):
    assert templates(spaced)[name]["state"] == "ready"
    sb = spaced.create(template=name)
    try:
        assert sb["template"] == name
        assert spaced.sh(sb["id"], "cat /etc/space-e2e-marker") == "from-e2e\n"
        assert templates(spaced)[name]["in_use"] == 1
        r = spaced.api("DELETE", f"/v1/templates/{name}")
        assert_error_shape(r, 409, "template_in_use")
        c = spaced.cli("template", "rm", name)
        assert c.rc == 4 and c.err.count("\n") == 1, c  # 409: exit 4
        assert spaced.sh(sb["id"], "echo still") == "still\n"
    finally:
        spaced.delete(sb["id"])
    assert templates(spaced)[name]["in_use"] == 0
    c = spaced.cli("template", "rm", name)
    assert c.rc == 0, c
    assert name not in templates(spaced)
    r = spaced.api("POST", "/v1/sandboxes", json={"template": name})
    assert_error_shape(r, 404, "not_found")


def test_import_tarball_cli(spaced, tarball):
    name = tname()
    c = spaced.cli("template", "import", name, tarball, timeout=600)
    assert c.rc == 0, c
    use_and_remove(spaced, name)


def test_import_directory_cli(spaced, tree):
    name = tname()
    c = spaced.cli("template", "import", name, tree, timeout=600)
    assert c.rc == 0, c
    use_and_remove(spaced, name)


def test_import_stdin_cli(spaced, tarball):
    name = tname()
    with open(tarball, "rb") as f:
        c = spaced.cli("template", "import", name, "-", input=f.read(), timeout=600)
    assert c.rc == 0, c
    remove(spaced, name)


def test_import_api(spaced, tarball):
    name = tname()
    with open(tarball, "rb") as f:
        r = spaced.api("POST", "/v1/templates", params={"name": name}, data=f,
                       headers={"Content-Type": "application/x-tar",
                                "Content-Length": str(os.path.getsize(tarball))}, timeout=600)
    assert r.status == 201, r
    v = r.json()
    assert v["name"] == name and v["state"] == "ready" and v["size_bytes"] > 0, v
    # the same name again: a new version, which the name now means
    with open(tarball, "rb") as f:
        r = spaced.api("POST", "/v1/templates", params={"name": name}, data=f,
                       headers={"Content-Type": "application/x-tar",
                                "Content-Length": str(os.path.getsize(tarball))}, timeout=600)
    assert r.status == 201, r
    vs = spaced.api("GET", f"/v1/templates/{name}/versions").json()["versions"]
    assert [v["version"] for v in vs] == [2], vs  # v1, unused, went
    ev = spaced.api("GET", "/v1/events", params={"type": "template."}).json()["events"]
    remove(spaced, name)
    assert any(e["type"] == "template.imported" for e in ev), ev
    ev = spaced.api("GET", "/v1/events", params={"type": "template.removed"}).json()["events"]
    assert ev, "no template.removed event"


BAD_NAMES = ["", "UPPER", "-x", ".x", "_x", "a/b", "a" * 65, "a b", "..", "x\n", "caf\u00e9", "a%2Fb"]


@pytest.mark.parametrize("name", BAD_NAMES, ids=["empty", "upper", "dash", "dot", "underscore", "slash", "long",
                                                  "space", "dotdot", "newline", "non-ascii", "pct"])
def test_import_bad_name(spaced, tarball, name):
    r = spaced.api("POST", "/v1/templates", params={"name": name}, data=b"",
                   headers={"Content-Type": "application/x-tar"})
    assert_error_shape(r, 400, "invalid_argument")
    assert name not in templates(spaced)


@pytest.mark.parametrize("name", ["UPPER", "a/b", "a" * 65])
def test_import_bad_name_cli(spaced, tarball, name):
    c = spaced.cli("template", "import", name, tarball)
    assert c.rc == 1 and c.err.count("\n") == 1, c


def test_import_without_name(spaced):
    r = spaced.api("POST", "/v1/templates", data=b"", headers={"Content-Type": "application/x-tar"})
    e = assert_error_shape(r, 400)
    assert e["code"] in ("invalid_argument", "bad_request"), e


def test_import_garbage(spaced):
    name = tname()
    r = spaced.api("POST", "/v1/templates", params={"name": name}, data=os.urandom(100000),
                   headers={"Content-Type": "application/x-tar"})
    assert_error_shape(r, 400)
    assert name not in templates(spaced), "a failed import left a template"


def test_import_hostile_tar(spaced):
    """Entries that climb out, absolute paths and device nodes do not reach the host."""
    name = tname()
    probe = f"/tmp/space-e2e-escape-{uuid.uuid4().hex[:8]}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for n in ("../../../../../.." + probe, probe):
            ti = tarfile.TarInfo(n)
            ti.size = 4
            tf.addfile(ti, io.BytesIO(b"evil"))
        ti = tarfile.TarInfo("escape-link")
        ti.type = tarfile.SYMTYPE
        ti.linkname = "/tmp"
        tf.addfile(ti)
        ti = tarfile.TarInfo("escape-link/" + os.path.basename(probe) + "-2")
        ti.size = 4
        tf.addfile(ti, io.BytesIO(b"evil"))
    r = spaced.api("POST", "/v1/templates", params={"name": name}, data=buf.getvalue(),
                   headers={"Content-Type": "application/x-tar"})
    try:
        for p in (probe, probe + "-2"):
            assert not os.path.exists(p), f"a template import wrote {p} on the host"
    finally:
        for p in (probe, probe + "-2"):
            if os.path.exists(p):
                os.unlink(p)
        if r.status == 201:
            remove(spaced, name)
    assert r.status in (201, 400), r


def test_remove_missing(spaced):
    assert_error_shape(spaced.api("DELETE", "/v1/templates/nosuchtemplate"), 404, "not_found")
    c = spaced.cli("template", "rm", "nosuchtemplate")
    assert c.rc == 3 and c.err.count("\n") == 1, c  # 404: exit 3
