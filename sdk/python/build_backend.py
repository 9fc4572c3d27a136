# SPDX-License-Identifier: MIT
"""A PEP 517 backend for this one pure-Python package, with no build
dependencies (so pip needs no package index to install it): the wheel is the
space_sdk directory plus its metadata."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME, VERSION = "space_sdk", "0.1.0"
DIST = f"space_sdk-{VERSION}"
HERE = os.path.dirname(os.path.abspath(__file__))
METADATA = f"""Metadata-Version: 2.1
Name: space-sdk
Version: {VERSION}
Summary: Python client for space: secure, disposable Linux sandboxes for AI agents
License: MIT
Requires-Python: >=3.9
"""
WHEEL = """Wheel-Version: 1.0
Generator: space-sdk build_backend
Root-Is-Purelib: true
Tag: py3-none-any
"""


def _files():
    for root, _, files in os.walk(os.path.join(HERE, NAME)):
        for f in sorted(files):
            if f.endswith(".py"):
                full = os.path.join(root, f)
                yield full, os.path.relpath(full, HERE)


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{DIST}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for full, arc in _files():
            with open(full, "rb") as f:
                data = f.read()
            z.writestr(arc, data)
            records.append(_record_line(arc, data))
        for arc, text in ((f"{DIST}.dist-info/METADATA", METADATA), (f"{DIST}.dist-info/WHEEL", WHEEL)):
            z.writestr(arc, text)
            records.append(_record_line(arc, text.encode()))
        records.append(f"{DIST}.dist-info/RECORD,,")
        z.writestr(f"{DIST}.dist-info/RECORD", "\n".join(records) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    name = f"{DIST}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "build_backend.py", "README.md"):
            t.add(os.path.join(HERE, rel), f"{DIST}/{rel}")
        for full, arc in _files():
            t.add(full, f"{DIST}/{arc}")
        info = tarfile.TarInfo(f"{DIST}/PKG-INFO")
        data = METADATA.encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
