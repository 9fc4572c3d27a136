# SPDX-License-Identifier: MIT
"""Dockerfile builds (POST /v1/templates/{name}/build, `space template build`):
RUN/COPY/ENV/WORKDIR seen by a sandbox of the result, the step cache (an
unchanged rebuild is all hits, a changed last step reruns only it), refusals
naming the line, a failed RUN that leaves the previous version working, a RUN
bounded by its sandbox's limits, a disconnect that cancels the build, and
COPY --chown names resolved in the image's /etc/passwd and /etc/group."""

import io
import json
import os
import tarfile
import time
import uuid

import e2e_http
import e2e_host as host
from e2e_daemon import assert_error_shape


def tname():
    return f"bld-{uuid.uuid4().hex[:10]}"


class Symlink(str):
    """A context entry that is a symlink to this target."""


def context(files):
    """A tar of {path: bytes or Symlink} (the build context)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for p, data in files.items():
            ti = tarfile.TarInfo(p)
            ti.mode = 0o644
            ti.mtime = 1700000000
            if isinstance(data, Symlink):
                ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, str(data), 0o777
                tf.addfile(ti)
                continue
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def build(spaced, name, files, params=None, timeout=120):
    """(status, [lines]) of a build; a 4xx answer as (status, error object)."""
    s = spaced.api("POST", f"/v1/templates/{name}/build", data=context(files), params=params,
                   headers={"Content-Type": "application/x-tar"}, stream=True, timeout=timeout)
    if s.status != 200:
        body = s.read()
        s.close()
        r = e2e_http.Response(s.method, s.path, s.status, s.resp.reason, s.resp.getheaders(), body)
        spaced.check_response(r)
        assert_error_shape(r)
        return s.status, r.json()["error"]
    assert s.content_type.startswith("application/x-ndjson"), s.content_type
    lines = [json.loads(line) for line in s.lines() if line.strip()]
    s.close()
    return 200, lines


def result(lines):
    assert lines and lines[-1]["type"] == "result", lines[-3:]
    return lines[-1]


def steps(lines):
    return [ln for ln in lines if ln["type"] == "step"]


def output(lines):
    return "".join(ln.get("data", "") for ln in lines if ln["type"] == "output")


DOCKERFILE = b"""# a comment
FROM base
ARG GREETING=hello
ENV APP_HOME=/srv/app \\
    MODE=test
WORKDIR $APP_HOME
COPY app.txt ./
COPY conf/ conf/
RUN echo "$GREETING from $MODE" > greeting.txt && echo built-output
CMD ["cat", "greeting.txt"]
"""

FILES = {"Dockerfile": DOCKERFILE, "app.txt": b"app-data\n", "conf/a.conf": b"a=1\n",
         "secret.key": b"nope\n", ".dockerignore": b"# keep secrets out\nsecret.key\n"}


def remove(spaced, name):
    r = spaced.api("DELETE", f"/v1/templates/{name}")
    assert r.status in (204, 404), r


def test_build_then_create_and_rebuild_cached(spaced):
    name = tname()
    st, lines = build(spaced, name, FILES, params={"build_args": json.dumps({"GREETING": "hi"})})
    assert st == 200, lines
    res = result(lines)
    assert res["steps"] == 8 and res["template"]["name"] == name, res
    assert "built-output" in output(lines)
    st_lines = steps(lines)
    assert [s["step"] for s in st_lines] == list(range(1, 9)) and all(s["steps"] == 8 for s in st_lines)

    sb = spaced.create(template=name)
    try:
        out = spaced.sh(sb["id"], "pwd; cat greeting.txt app.txt conf/a.conf; echo $APP_HOME; "
                                  "ls /srv/app/secret.key 2>&1 || true")
        assert out.splitlines()[:5] == ["/srv/app", "hi from test", "app-data", "a=1", "/srv/app"], out
        assert "No such file" in out or "can't access" in out, out
    finally:
        spaced.delete(sb["id"])

    # unchanged: every layer step a cache hit, nothing runs
    st, lines = build(spaced, name, FILES, params={"build_args": json.dumps({"GREETING": "hi"})})
    res = result(lines)
    assert res["run"] == 0 and res["cached_steps"] == 4, res
    assert output(lines) == ""

    # the last RUN changed: only it reruns
    files = dict(FILES)
    files["Dockerfile"] = DOCKERFILE.replace(b"echo built-output", b"echo built-again")
    st, lines = build(spaced, name, files, params={"build_args": json.dumps({"GREETING": "hi"})})
    res = result(lines)
    assert res["run"] == 1 and res["cached_steps"] == 3, res
    assert "built-again" in output(lines)
    c = spaced.cli("template", "ls")
    assert name in c.out and "build-" not in c.out, c
    remove(spaced, name)


def test_cli_build(spaced, tmp_path):
    name = tname()
    d = tmp_path / "ctx"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "Containerfile").write_bytes(b"FROM base\nARG X=1\nRUN echo cli-$X > /x.txt; cat /x.txt\n")
    c = spaced.cli("template", "build", name, "-f", str(d / "sub" / "Containerfile"), "--build-arg", "X=7",
                   str(d))
    assert c.rc == 0, c
    assert "step 3/3: RUN" in c.out and "cli-7" in c.out and f"built template {name}" in c.out, c.out
    c = spaced.cli("template", "build", name, "-f", str(d / "sub" / "Containerfile"), "--build-arg", "X=7",
                   str(d))
    assert c.rc == 0 and "(cached)" in c.out and "0 run" in c.out, c.out
    remove(spaced, name)


def test_refusals_name_the_line(spaced):
    name = tname()
    for df, want in [(b"FROM base\n\nEXPOSE 80\n", "line 3: EXPOSE is not supported"),
                     (b"FROM base\nRUN true\nFROBNICATE x\n", "line 3: unknown instruction 'FROBNICATE'"),
                     (b"FROM base\nCOPY ../x /x\n", "line 2: COPY source '../x' is outside the build context"),
                     (b"FROM base\nADD https://example.com/x /x\n", "line 2: ADD of a URL"),
                     (b"FROM base AS a\nFROM base\n", "line 2: a second FROM"),
                     (b"RUN true\n", "line 1: RUN before FROM")]:
        st, err = build(spaced, name, {"Dockerfile": df})
        assert st == 400 and want in err["message"], (df, st, err)
    st, err = build(spaced, name, {"Dockerfile": b"FROM base\nCOPY missing.txt /\n"})
    assert st == 200 and err[-1]["type"] == "error" and "line 2" in err[-1]["message"], err
    st, err = build(spaced, name, {"Dockerfile": b"FROM nosuch-template\n"})
    assert st == 200 and err[-1]["type"] == "error" and "no template 'nosuch-template'" in err[-1]["message"]
    st, err = build(spaced, name, {"Dockerfile": b"FROM base\n"}, params={"build_args": "[1]"})
    assert st == 400 and "build_args" in err["message"], err
    st, err = build(spaced, name, {"x": b""})
    assert st == 400 and "no 'Dockerfile'" in err["message"], err
    r = spaced.api("POST", f"/v1/templates/{name}/build", data=b"not a tar" * 100,
                   headers={"Content-Type": "application/x-tar"})
    assert r.status == 400, r
    assert name not in spaced.cli("template", "ls").out
    tmp = os.path.join(spaced.state_dir, "tmp")
    assert not [f for f in os.listdir(tmp) if f.startswith(("build-copy-", "template-"))], os.listdir(tmp)


def test_failing_run_keeps_previous_version(spaced):
    name = tname()
    st, lines = build(spaced, name, {"Dockerfile": b"FROM base\nRUN echo v1 > /version\n"})
    result(lines)
    st, lines = build(spaced, name, {"Dockerfile": b"FROM base\nRUN echo v2 > /version\nRUN echo boom; exit 3\n"})
    assert lines[-1]["type"] == "error" and "line 3: RUN exited with code 3" in lines[-1]["message"], lines[-2:]
    assert "boom" in output(lines)
    sb = spaced.create(template=name)
    try:
        assert spaced.sh(sb["id"], "cat /version").strip() == "v1"
    finally:
        spaced.delete(sb["id"])
    assert not [t for t in spaced.cli("template", "ls").out.split() if t.startswith("build-")]
    remove(spaced, name)


def test_run_bounded_by_sandbox_limits(spaced):
    name = tname()
    # fills the disk: the sandbox's disk quota stops it, the host is untouched
    st, lines = build(spaced, name, {"Dockerfile": b"FROM base\n"
                                     b"RUN dd if=/dev/zero of=/fill bs=1M count=100000 2>&1; exit 1\n"},
                      timeout=120)
    assert lines[-1]["type"] == "error" and "line 2" in lines[-1]["message"], lines[-1]
    assert "No space left" in output(lines) or "quota" in output(lines).lower(), output(lines)[-300:]
    # forks hard: pids_max bounds it
    st, lines = build(spaced, name, {"Dockerfile": b"FROM base\n"
                                     b"RUN for i in $(seq 1 3000); do sleep 5 & done 2>&1 | tail -1; "
                                     b"echo forked; exit 1\n"}, timeout=120)
    assert lines[-1]["type"] == "error", lines[-1]
    assert "can't fork" in output(lines) or "Resource temporarily" in output(lines), output(lines)[-300:]
    assert name not in spaced.cli("template", "ls").out


def test_disconnect_cancels(spaced):
    name = tname()
    before = set(spaced.alive_ids())
    s = spaced.api("POST", f"/v1/templates/{name}/build",
                   data=context({"Dockerfile": b"FROM base\nRUN echo started; sleep 60\n"}),
                   headers={"Content-Type": "application/x-tar"}, stream=True, timeout=60)
    assert s.status == 200
    for line in s.lines():
        ev = json.loads(line)
        # the RUN's own output (the step's announcement names the command too): it runs now
        if ev.get("type") == "output" and "started" in ev.get("data", ""):
            break
    s.close()  # the client goes away mid-RUN
    host.wait_until(lambda: set(spaced.alive_ids()) == before, 20)
    assert set(spaced.alive_ids()) == before
    host.wait_until(lambda: not [t for t in spaced.cli("template", "ls").out.split() if t.startswith("build-")], 10)
    assert not [t for t in spaced.cli("template", "ls").out.split() if t.startswith("build-")]
    assert name not in spaced.cli("template", "ls").out


def test_python_sdk_build_template(spaced, tmp_path):
    import sys
    import pytest
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python"))
    try:
        import space_sdk
        name = tname()
        (tmp_path / "Dockerfile").write_bytes(b"FROM base\nENV V=sdk\nRUN echo $V > /v\n")
        seen = []
        with space_sdk.Client(spaced.url, spaced.admin_key, timeout=120) as c:
            res = c.build_template(name, str(tmp_path), on_event=seen.append)
            assert res["template"]["name"] == name and res["run"] == 1, res
            assert [d["type"] for d in seen].count("step") == 3
            with pytest.raises(space_sdk.SpaceError) as ei:
                c.build_template(name, str(tmp_path), dockerfile="nope")
            assert "no 'nope'" in str(ei.value)
            (tmp_path / "Dockerfile").write_bytes(b"FROM base\nRUN exit 4\n")
            with pytest.raises(space_sdk.SpaceError) as ei:
                c.build_template(name, str(tmp_path))
            assert "code 4" in str(ei.value)
            c.delete_template(name)
    finally:
        sys.path.pop(0)
        for m in [m for m in sys.modules if m == "space_sdk" or m.startswith("space_sdk.")]:
            del sys.modules[m]


# the base has no adduser: a RUN writes the entries
CHOWN_DOCKERFILE = b"""FROM base
RUN echo 'app:x:2001:2345::/:/bin/sh' >> /etc/passwd && printf 'staff:x:2345:\\nother:x:3456:\\n' >> /etc/group
COPY --chown=app a.txt /o/user
COPY --chown=app:other a.txt /o/user-group
COPY --chown=1000:staff a.txt /o/id-group
ADD --chown=app:1000 a.txt /o/user-id
COPY --chown=user a.txt /o/base-user
COPY --chown=3000 a.txt /o/id
"""


def test_copy_chown_names_resolved_in_the_image(spaced):
    name = tname()
    files = {"Dockerfile": CHOWN_DOCKERFILE, "a.txt": b"a\n"}
    st, lines = build(spaced, name, files)
    assert st == 200 and lines[-1]["type"] == "result", lines[-3:]
    sb = spaced.create(template=name)
    try:
        out = spaced.sh(sb["id"], "cd /o && for f in user user-group id-group user-id base-user id; do "
                                  "echo $f=$(stat -c %u:%g $f); done")
        assert out.split() == ["user=2001:2345", "user-group=2001:3456", "id-group=1000:2345",
                               "user-id=2001:1000", "base-user=1000:1000", "id=3000:3000"], out
    finally:
        spaced.delete(sb["id"])
    # unchanged: cached; the ids are in the copied files' tar, so the key follows them
    st, lines = build(spaced, name, files)
    assert result(lines)["run"] == 0, lines[-1]
    remove(spaced, name)


def test_copy_chown_follows_the_image_passwd(spaced):
    """An /etc/passwd COPYed in (no RUN): another passwd, other ids; its symlinks resolve inside the
    image, never on the host."""
    name = tname()
    root = b"root:x:0:0:root:/root:/bin/sh\n"

    def owner(passwd, extra=None):
        files = {"Dockerfile": b"FROM base\nCOPY . /\nCOPY --chown=app a.txt /a\n", "a.txt": b"a\n",
                 "etc/passwd": passwd, **(extra or {})}
        st, lines = build(spaced, name, files)
        assert st == 200 and lines[-1]["type"] == "result", lines[-3:]
        sb = spaced.create(template=name)
        try:
            return spaced.sh(sb["id"], "stat -c %u:%g /a").strip()
        finally:
            spaced.delete(sb["id"])

    assert owner(root + b"app:x:500:501::/:/bin/sh\n") == "500:501"
    assert owner(root + b"app:x:700:701::/:/bin/sh\n") == "700:701"
    # "../" past the image's root stays at its root: /srv/pw of the image, not of the host
    assert owner(Symlink("../../../../../../../../../srv/pw"),
                 {"srv/pw": root + b"app:x:800:801::/:/bin/sh\n"}) == "800:801"
    remove(spaced, name)


def test_copy_chown_refusals(spaced):
    name = tname()
    a = {"a.txt": b"a\n"}
    # from scratch, numeric ids need no /etc/passwd
    st, lines = build(spaced, name, {"Dockerfile": b"FROM scratch\nCOPY --chown=7:8 a.txt /a\n", **a})
    assert lines[-1]["type"] == "result", lines[-3:]
    remove(spaced, name)
    base, scratch = b"FROM base\nCOPY --chown=", b"FROM scratch\nCOPY etc/ /etc/\nCOPY --chown="
    for df, files, want in [
            (base + b"nosuch a.txt /x\n", {}, "line 2: --chown: no user 'nosuch' in the image's /etc/passwd"),
            (base + b"user:nosuch a.txt /x\n", {}, "line 2: --chown: no group 'nosuch' in the image's /etc/group"),
            (b"FROM scratch\nCOPY --chown=app a.txt /x\n", {},
             "line 2: --chown: the image has no /etc/passwd to look up user 'app' in"),
            (b"FROM scratch\nCOPY --chown=0:staff a.txt /x\n", {},
             "line 2: --chown: the image has no /etc/group to look up group 'staff' in"),
            (base + b"bad/name a.txt /x\n", {}, "line 2: --chown: 'bad/name' is not a user name or id"),
            (base + b"a$X a.txt /x\n".replace(b"$X", b"b" * 32), {}, "is not a user name or id"),
            (base + b":user a.txt /x\n", {}, "line 2: --chown: '' is not a user name or id"),
            (base + b"user:-g a.txt /x\n", {}, "line 2: --chown: '-g' is not a group name or id"),
            (base + b"70000 a.txt /x\n", {}, "line 2: --chown: the user id 70000 is above 65535"),
            (base + b"1:99999999999999999999 a.txt /x\n", {}, "line 2: --chown: the group id 9999"),
            (scratch + b"big a.txt /x\n", {"etc/passwd": b"big:x:70000:1::/:\n"},
             "line 3: --chown: user 'big' has id 70000 in the image, above 65535"),
            (scratch + b"big a.txt /x\n", {"etc/passwd": b"big:x:1:70001::/:\n"},
             "line 3: --chown: the primary group of user 'big' has id 70001 in the image"),
            (scratch + b"app a.txt /x\n", {"etc/passwd": b"app:x:zz:1::/:\napp:x:1\n"},
             "line 3: --chown: the image's /etc/passwd has no well-formed line for user 'app'"),
            (scratch + b"app a.txt /x\n", {"etc/passwd/x": b""},
             "line 3: --chown: the image's /etc/passwd is not a regular file"),
            (scratch + b"app a.txt /x\n", {"etc/passwd": b"#" * (1024 * 1024 + 1)},
             "line 3: --chown: the image's /etc/passwd is larger than 1048576 bytes"),
            # an escape to the host's /etc/passwd resolves to the image's own: a loop
            (scratch + b"root:daemon a.txt /x\n", {"etc/group": Symlink("../../../../../../../../etc/group")},
             "line 3: --chown: cannot open the image's /etc/group: Too many levels of symbolic links"),
    ]:
        st, lines = build(spaced, name, {"Dockerfile": df, **a, **files})
        assert st == 200 and lines[-1]["type"] == "error" and want in lines[-1]["message"], (df, lines[-1])
    assert name not in spaced.cli("template", "ls").out
