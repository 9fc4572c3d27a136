# SPDX-License-Identifier: MIT
"""Templates from OCI images: an OCI layout (a directory, a tar), a docker/podman
save archive and a stream, with the layers applied in order (whiteouts, opaque
directories, hard links, symlinks, owners, modes, xattrs), the image config's
exec defaults, the layer cache, and hostile images refused with a clear 400.
Every image is made here by hand: no network, no docker."""

import gzip
import hashlib
import io
import json
import os
import tarfile
import time
import uuid

import pytest

from e2e_daemon import assert_error_shape

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZ = OCI_LAYER + "+gzip"


def tname(prefix="oci"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def sha(b):
    return hashlib.sha256(b).hexdigest()


def member(name, data=b"", **kw):
    """(TarInfo, data) for a layer; kw sets TarInfo fields (type, linkname, mode, uid, pax_headers...)."""
    ti = tarfile.TarInfo(name)
    ti.size = len(data) if kw.get("type", tarfile.REGTYPE) == tarfile.REGTYPE else 0
    ti.mode = 0o644
    ti.mtime = 1700000000
    for k, v in kw.items():
        setattr(ti, k, v)
    if ti.type == tarfile.DIRTYPE and "mode" not in kw:
        ti.mode = 0o755
    return ti, data


def layer_tar(members, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for ti, data in members:
            tf.addfile(ti, io.BytesIO(data) if ti.type == tarfile.REGTYPE else None)
    return buf.getvalue()


def pack(files):
    """A tar of {path: bytes}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for p, data in files.items():
            ti = tarfile.TarInfo(p)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def config_doc(diff_ids, arch="amd64", cfg=None):
    return json.dumps({"architecture": arch, "os": "linux", "config": cfg or {},
                       "rootfs": {"type": "layers", "diff_ids": ["sha256:" + d for d in diff_ids]}}).encode()


def oci_layout(images, blobs_override=None, drop=()):
    """{path: bytes} of an OCI layout. images: [(tag, [layer bytes], cfg dict, arch, gzip?)]."""
    files = {"oci-layout": b'{"imageLayoutVersion":"1.0.0"}'}
    blobs = {}
    manifests = []
    for tag, layers, cfg, arch, gz, mtypes in images:
        descs, diff_ids = [], []
        for i, raw in enumerate(layers):
            diff_ids.append(sha(raw))
            body = gzip.compress(raw, mtime=0) if gz else raw
            blobs[sha(body)] = body
            mt = (mtypes or {}).get(i, OCI_LAYER_GZ if gz else OCI_LAYER)
            descs.append({"mediaType": mt, "digest": "sha256:" + sha(body), "size": len(body)})
        c = config_doc(diff_ids, arch, cfg)
        blobs[sha(c)] = c
        m = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                        "config": {"mediaType": OCI_CONFIG, "digest": "sha256:" + sha(c), "size": len(c)},
                        "layers": descs}).encode()
        blobs[sha(m)] = m
        d = {"mediaType": OCI_MANIFEST, "digest": "sha256:" + sha(m), "size": len(m),
             "platform": {"os": "linux", "architecture": arch}}
        if tag:
            d["annotations"] = {"org.opencontainers.image.ref.name": tag}
        manifests.append(d)
    files["index.json"] = json.dumps({"schemaVersion": 2, "manifests": manifests}).encode()
    for h, b in blobs.items():
        files[f"blobs/sha256/{h}"] = b
    for h, b in (blobs_override or {}).items():
        files[f"blobs/sha256/{h}"] = b
    for p in drop:
        files.pop(p, None)
    return files


def oci_archive(layers, cfg=None, arch="amd64", gz=True, tag=None, mtypes=None, **kw):
    return pack(oci_layout([(tag, layers, cfg, arch, gz, mtypes)], **kw))


def docker_archive(layers, cfg=None, tag="e2e/img:latest"):
    files, paths, diff_ids = {}, [], []
    for raw in layers:
        h = sha(raw)
        files[f"{h}/layer.tar"] = raw
        paths.append(f"{h}/layer.tar")
        diff_ids.append(h)
    c = config_doc(diff_ids, "amd64", cfg)
    files[f"{sha(c)}.json"] = c
    files["manifest.json"] = json.dumps([{"Config": f"{sha(c)}.json", "RepoTags": [tag], "Layers": paths}]).encode()
    return pack(files)


@pytest.fixture(scope="module")
def base_layer(spaced):
    with open(spaced.s.base_template(), "rb") as f:
        return f.read()


def import_api(spaced, name, data, params=None):
    p = {"name": name}
    p.update(params or {})
    return spaced.api("POST", "/v1/templates", params=p, data=data,
                      headers={"Content-Type": "application/x-tar"}, timeout=600)


def templates(spaced):
    r = spaced.api("GET", "/v1/templates")
    assert r.status == 200, r
    return {t["name"]: t for t in r.json()["templates"]}


def remove(spaced, name):
    r = spaced.api("DELETE", f"/v1/templates/{name}")
    assert r.status == 204, r


def rich_layers():
    """Layer 2: files, xattr, hard link, symlink, setuid, a dir; layer 3: whiteouts and an opaque dir."""
    l2 = layer_tar([
        member("etc/", type=tarfile.DIRTYPE),
        member("etc/oci-a", b"alpha\n", pax_headers={"SCHILY.xattr.user.e2e": "yes"}),
        member("etc/oci-hl", type=tarfile.LNKTYPE, linkname="etc/oci-a"),
        member("etc/oci-sym", type=tarfile.SYMTYPE, linkname="oci-a"),
        member("etc/oci-gone", b"gone\n"),
        member("opt/", type=tarfile.DIRTYPE),
        member("opt/d/", type=tarfile.DIRTYPE),
        member("opt/d/x", b"x"),
        member("opt/d/y", b"y"),
        member("opt/suid", b"#!/bin/sh\n", mode=0o4755, uid=1000, gid=1000),
    ])
    l3 = layer_tar([
        member("etc/.wh.oci-gone"),
        member("opt/d/", type=tarfile.DIRTYPE),
        member("opt/d/.wh..wh..opq"),
        member("opt/d/z", b"z"),
    ])
    return [l2, l3]


CFG = {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "OCI_E2E=from-config"],
       "WorkingDir": "/opt", "User": "1000", "Cmd": ["/bin/sh"]}


def check_rich(spaced, name):
    root = spaced.host_view(spaced.pool_path("templates", name))
    st = os.lstat(os.path.join(root, "opt/suid"))
    assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o4755, 1000, 1000), st
    assert os.getxattr(os.path.join(root, "etc/oci-a"), "user.e2e") == b"yes"
    a, hl = os.lstat(os.path.join(root, "etc/oci-a")), os.lstat(os.path.join(root, "etc/oci-hl"))
    assert a.st_ino == hl.st_ino and a.st_nlink == 2, (a, hl)
    assert os.readlink(os.path.join(root, "etc/oci-sym")) == "oci-a"
    assert not os.path.lexists(os.path.join(root, "etc/oci-gone")), "a whiteout did not hide the lower file"
    assert sorted(os.listdir(os.path.join(root, "opt/d"))) == ["z"], "an opaque dir kept the lower entries"
    assert not any(n.startswith(".wh.") for n in os.listdir(os.path.join(root, "etc")))
    sb = spaced.create(template=name)
    try:
        # the config's defaults: user, cwd, env
        assert spaced.sh(sb["id"], 'id -u; pwd; echo "$OCI_E2E"') == "1000\n/opt\nfrom-config\n"
        # what an exec gives wins
        assert spaced.sh(sb["id"], "id -u; pwd", user="root", cwd="/etc") == "0\n/etc\n"
        assert spaced.sh(sb["id"], "cat /etc/oci-a /etc/oci-sym; ls /opt/d") == "alpha\nalpha\nz\n"
    finally:
        spaced.delete(sb["id"])


def test_oci_archive_layers_and_defaults(spaced, base_layer, tmp_path):
    name = tname()
    f = tmp_path / "img.tar"
    f.write_bytes(oci_archive([base_layer] + rich_layers(), CFG))
    c = spaced.cli("template", "import", name, f"oci-archive:{f}", timeout=600)
    assert c.rc == 0, c
    try:
        check_rich(spaced, name)
    finally:
        remove(spaced, name)


def test_docker_archive_stream(spaced, base_layer):
    """docker save's format, sent as a stream ('-'): told apart by its manifest.json."""
    name = tname("dock")
    c = spaced.cli("template", "import", name, "-", input=docker_archive([base_layer] + rich_layers(), CFG),
                   timeout=600)
    assert c.rc == 0, c
    try:
        check_rich(spaced, name)
    finally:
        remove(spaced, name)


def test_docker_archive_file_cli(spaced, base_layer, tmp_path):
    name = tname("dockf")
    f = tmp_path / "saved.tar"
    f.write_bytes(docker_archive([base_layer, layer_tar([member("etc/which", b"docker")])], tag="e2e/img:v1"))
    c = spaced.cli("template", "import", name, f"docker-archive:{f}:v1", timeout=600)
    assert c.rc == 0, c
    try:
        root = spaced.host_view(spaced.pool_path("templates", name))
        assert open(os.path.join(root, "etc/which"), "rb").read() == b"docker"
        assert not os.path.exists(os.path.join(root, ".space-image.json"))  # an empty config: no defaults
    finally:
        remove(spaced, name)
    c = spaced.cli("template", "import", tname(), f"docker-archive:{f}:v2")
    assert c.rc == 1 and "v2" in c.err, c
    # a layer that does not match its diff_id (one not in the layer cache: a
    # cached layer is neither read nor checked again, its content is the checked one)
    tok = uuid.uuid4().hex.encode()
    bad = docker_archive([layer_tar([member("x", tok)])]).replace(tok, tok[::-1], 1)
    name = tname()
    r = import_api(spaced, name, bad)
    e = assert_error_shape(r, 400)
    assert "diff_id" in e["message"] and "layer 1" in e["message"], e
    assert name not in templates(spaced)


def test_oci_layout_dir_with_tag(spaced, base_layer, tmp_path):
    mk = lambda s: layer_tar([member("etc/", type=tarfile.DIRTYPE), member("etc/which", s.encode())])
    files = oci_layout([("one", [base_layer, mk("one")], None, "amd64", False, None),
                        ("two", [base_layer, mk("two")], None, "amd64", False, None)])
    d = tmp_path / "layout"
    for p, b in files.items():
        (d / p).parent.mkdir(parents=True, exist_ok=True)
        (d / p).write_bytes(b)
    name = tname()
    c = spaced.cli("template", "import", name, f"oci-layout:{d}:two", timeout=600)
    assert c.rc == 0, c
    try:
        root = spaced.host_view(spaced.pool_path("templates", name))
        assert open(os.path.join(root, "etc/which"), "rb").read() == b"two"
    finally:
        remove(spaced, name)
    # two images and no tag: which one is meant is not guessed
    c = spaced.cli("template", "import", tname(), f"oci-layout:{d}")
    assert c.rc == 1 and "tag" in c.err, c
    c = spaced.cli("template", "import", tname(), f"oci-layout:{d}:three")
    assert c.rc == 1 and "three" in c.err, c


def test_shared_base_is_cached(spaced, base_layer):
    """Two images on one base: the second import reuses the base layer's subvolume."""
    layers_dir = spaced.host_view(spaced.pool_path("layers"))
    base_key = sha(gzip.compress(base_layer, mtime=0))
    a, b = tname("ca"), tname("cb")
    img = lambda s: oci_archive([base_layer, layer_tar([member("marker", s.encode())])])
    t0 = time.monotonic()
    r = import_api(spaced, a, img("a"))
    t1 = time.monotonic()
    assert r.status == 201, r
    try:
        assert os.path.isdir(os.path.join(layers_dir, base_key)), os.listdir(layers_dir)
        base_ino = os.stat(os.path.join(layers_dir, base_key)).st_ctime_ns
        before = set(os.listdir(layers_dir))
        t2 = time.monotonic()
        r = import_api(spaced, b, img("b"))
        t3 = time.monotonic()
        assert r.status == 201, r
        after = set(os.listdir(layers_dir))
        assert len(after - before) == 1, (before, after)  # only the new top layer
        assert os.stat(os.path.join(layers_dir, base_key)).st_ctime_ns == base_ino
        root = spaced.host_view(spaced.pool_path("templates", b))
        assert open(os.path.join(root, "marker"), "rb").read() == b"b"
        print(f"first import {t1 - t0:.2f}s, second (base cached) {t3 - t2:.2f}s")
    finally:
        for n in (a, b):
            if n in templates(spaced):
                remove(spaced, n)


def test_whiteouts_and_replacements_of_symlinks_stay_inside(spaced, base_layer, tmp_path):
    """A whiteout of a symlink, an opaque dir holding symlinks, and an entry over a
    symlink remove the symlink, never what it points to (a host directory here)."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_bytes(b"host file")
    l1 = layer_tar([member("a", type=tarfile.SYMTYPE, linkname=str(victim)),
                    member("b", type=tarfile.SYMTYPE, linkname=str(victim)),
                    member("d/", type=tarfile.DIRTYPE),
                    member("d/c", type=tarfile.SYMTYPE, linkname=str(victim)),
                    member("e", type=tarfile.SYMTYPE, linkname=str(victim))])
    l2 = layer_tar([member(".wh.a"),
                    member("b/", type=tarfile.DIRTYPE),
                    member("d/", type=tarfile.DIRTYPE),
                    member("d/.wh..wh..opq"),
                    member("e", b"now a file")])
    name = tname()
    r = import_api(spaced, name, oci_archive([l1, l2]))
    try:
        assert (victim / "keep").read_bytes() == b"host file", "an import removed a file outside the template"
        assert r.status == 201, r
        root = spaced.host_view(spaced.pool_path("templates", name))
        assert not os.path.lexists(os.path.join(root, "a"))
        assert os.path.isdir(os.path.join(root, "b")) and not os.path.islink(os.path.join(root, "b"))
        assert os.listdir(os.path.join(root, "d")) == []
        assert open(os.path.join(root, "e"), "rb").read() == b"now a file"
    finally:
        if r.status == 201:
            remove(spaced, name)


def bad_images(base_layer):
    ok = layer_tar([member("etc/ok", b"ok")])
    files = oci_layout([(None, [ok], None, "amd64", True, None)])
    idx = json.loads(files["index.json"])
    man_digest = idx["manifests"][0]["digest"][7:]
    man = json.loads(files[f"blobs/sha256/{man_digest}"])
    layer_digest = man["layers"][0]["digest"][7:]
    bad_digest = dict(files)
    flipped = bytearray(files[f"blobs/sha256/{layer_digest}"])
    flipped[-8] ^= 1  # same size, other bytes
    bad_digest[f"blobs/sha256/{layer_digest}"] = bytes(flipped)
    huge = json.loads(files[f"blobs/sha256/{man_digest}"])
    huge["layers"][0]["size"] = 1 << 50
    hb = json.dumps(huge).encode()
    huge_files = dict(files)
    huge_files[f"blobs/sha256/{sha(hb)}"] = hb
    hidx = json.loads(files["index.json"])
    hidx["manifests"][0].update(digest="sha256:" + sha(hb), size=len(hb))
    huge_files["index.json"] = json.dumps(hidx).encode()
    return {
        "digest-mismatch": (pack(bad_digest), "does not match"),
        "tar-slip": (oci_archive([layer_tar([member("../escape-e2e", b"x")], fmt=tarfile.GNU_FORMAT)]), ".."),
        "absolute": (oci_archive([layer_tar([member("/escape-e2e-abs", b"x")], fmt=tarfile.GNU_FORMAT)]), "absolute"),
        "symlink-then-file": (oci_archive([layer_tar([member("evil", type=tarfile.SYMTYPE, linkname="/tmp"),
                                                      member("evil/escape-e2e-sym", b"x")])]), "symlink"),
        "symlink-across-layers": (oci_archive([layer_tar([member("evil", type=tarfile.SYMTYPE, linkname="/tmp")]),
                                               layer_tar([member("evil/escape-e2e-sym2", b"x")])]), "symlink"),
        "hardlink-out": (oci_archive([layer_tar([member("hl", type=tarfile.LNKTYPE, linkname="../../etc/passwd")])]),
                         "hard link"),
        "device-node": (oci_archive([layer_tar([member("dev-sda", type=tarfile.BLKTYPE, devmajor=8, devminor=0)])]),
                        "device node"),
        "owner-out-of-range": (oci_archive([layer_tar([member("big-uid", b"x", uid=100000)])]), "outside"),
        "unknown-media-type": (oci_archive([ok], gz=False, mtypes={0: "application/vnd.example.blob"}), "media type"),
        "zstd": (oci_archive([ok], gz=False, mtypes={0: OCI_LAYER + "+zstd"}), "zstd"),
        "other-platform": (oci_archive([ok], arch="arm64"), "arm64"),
        "missing-blob": (pack(oci_layout([(None, [ok], None, "amd64", True, None)],
                                         drop=[f"blobs/sha256/{layer_digest}"])), "missing"),
        "huge-declared-size": (pack(huge_files), "declares"),
        "member-larger-than-layer": (oci_archive([layer_tar([member("big", b"x" * 600)])[:1024]], gz=True),
                                     "ends inside a member"),
        "bad-index-json": (pack({"oci-layout": b"{}", "index.json": b"{not json"}), "not JSON"),
        "bad-docker-manifest": (pack({"manifest.json": b'[{"Config": 5}]'}), "Config"),
    }


BAD = ["digest-mismatch", "tar-slip", "absolute", "symlink-then-file", "symlink-across-layers", "hardlink-out",
       "device-node", "owner-out-of-range", "unknown-media-type", "zstd", "other-platform", "missing-blob",
       "huge-declared-size", "member-larger-than-layer", "bad-index-json", "bad-docker-manifest"]


@pytest.mark.parametrize("case", BAD)
def test_bad_image(spaced, base_layer, case):
    data, words = bad_images(base_layer)[case]
    name = tname("bad")
    r = import_api(spaced, name, data)
    try:
        for p in ("/escape-e2e", "/escape-e2e-abs", "/tmp/escape-e2e-sym", "/tmp/escape-e2e-sym2"):
            assert not os.path.exists(p), f"an image import wrote {p} on the host"
    finally:
        if r.status == 201:
            remove(spaced, name)
    e = assert_error_shape(r, 400)
    assert words in e["message"], e
    assert name not in templates(spaced), "a failed import left a template"
    tmp = spaced.host_view(spaced.pool_path("tmp"))
    assert not [n for n in os.listdir(tmp) if "." in n and not n.startswith(("recv.", "spare."))], os.listdir(tmp)
