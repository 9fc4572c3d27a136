# SPDX-License-Identifier: MIT
"""Typed results. Each keeps the server's JSON in `.raw`, so fields that a
newer server adds are not lost; times stay RFC 3339 strings."""

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def _get(d, k, default=None):
    v = d.get(k, default)
    return default if v is None else v


@dataclass
class Sandbox:
    id: str
    state: str
    template: str = ""
    template_version: int = 0         # the version of the template it was made from (0: unversioned)
    tenant: str = ""
    runtime: str = "ns"
    reason: str = ""
    cpu: float = 0.0
    memory_mb: int = 0
    disk_mb: int = 0
    timeout_s: int = 0
    created_at: Optional[str] = None
    expires_at: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    metadata: Dict[str, str] = field(default_factory=dict)
    parent: Optional[str] = None
    network: Optional[dict] = None
    raw: dict = field(default_factory=dict, repr=False)
    _client: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d, client=None):
        return cls(id=d["id"], state=d.get("state", ""), template=_get(d, "template", ""),
                   template_version=_get(d, "template_version", 0), tenant=_get(d, "tenant", ""),
                   runtime=_get(d, "runtime", "ns"), reason=_get(d, "reason", ""), cpu=float(_get(d, "cpu", 0)),
                   memory_mb=_get(d, "memory_mb", 0), disk_mb=_get(d, "disk_mb", 0), timeout_s=_get(d, "timeout_s", 0),
                   created_at=d.get("created_at"), expires_at=d.get("expires_at"), env=_get(d, "env", {}),
                   metadata=_get(d, "metadata", {}), parent=d.get("parent"), network=d.get("network"), raw=d,
                   _client=client)

    # Handle methods: the client's calls for this sandbox (awaitables on an AsyncClient).
    def exec(self, cmd=None, **kw):
        return self._client.exec(self.id, cmd, **kw)

    def exec_stream(self, cmd=None, **kw):
        return self._client.exec_stream(self.id, cmd, **kw)

    def read_file(self, path, **kw):
        return self._client.read_file(self.id, path, **kw)

    def write_file(self, path, data, **kw):
        return self._client.write_file(self.id, path, data, **kw)

    def list_files(self, path, **kw):
        return self._client.list_files(self.id, path, **kw)

    def checkpoint(self, name=None):
        return self._client.checkpoint(self.id, name)

    def branch(self, count=1, **kw):
        return self._client.branch(self.id, count, **kw)

    def pause(self):
        return self._client.pause(self.id)

    def resume(self):
        return self._client.resume(self.id)

    def suspend(self):
        return self._client.suspend(self.id)

    def refresh(self):
        return self._client.get(self.id)

    def delete(self):
        return self._client.delete(self.id)


@dataclass
class Checkpoint:
    id: str
    sandbox: str
    name: Optional[str] = None
    created_at: Optional[str] = None
    size_bytes: int = 0
    auto: bool = False
    with_memory: bool = False
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d, client=None):
        return cls(id=d["id"], sandbox=d.get("sandbox", ""), name=d.get("name"), created_at=d.get("created_at"),
                   size_bytes=_get(d, "size_bytes", 0), auto=bool(d.get("auto")),
                   with_memory=bool(d.get("with_memory")), raw=d)


@dataclass
class ExecEvent:
    """One event of an exec stream: start, stdout, stderr, exit, error (and
    whatever kinds a newer server sends, with their fields in .raw)."""
    type: str
    data: bytes = b""
    code: Optional[int] = None
    signal: Optional[str] = None
    reason: Optional[str] = None
    exec_id: Optional[str] = None
    pid: Optional[int] = None
    message: Optional[str] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d):
        data = b""
        if "data_b64" in d:
            data = base64.b64decode(d["data_b64"])
        elif "data" in d and isinstance(d["data"], str):
            data = d["data"].encode()
        code = d.get("code") if isinstance(d.get("code"), int) else None
        return cls(type=d.get("type", ""), data=data, code=code, signal=d.get("signal"), reason=d.get("reason"),
                   exec_id=d.get("exec_id"), pid=d.get("pid"),
                   message=d.get("message") if d.get("type") == "error" else None, raw=d)

    @property
    def text(self):
        return self.data.decode(errors="replace")


@dataclass
class ExecResult:
    exit_code: Optional[int]
    stdout: bytes = b""
    stderr: bytes = b""
    signal: Optional[str] = None
    reason: Optional[str] = None
    exec_id: Optional[str] = None
    pid: Optional[int] = None
    error: Optional[str] = None

    @property
    def ok(self):
        return self.exit_code == 0

    @property
    def stdout_text(self):
        return self.stdout.decode(errors="replace")

    @property
    def stderr_text(self):
        return self.stderr.decode(errors="replace")


@dataclass
class FileEntry:
    name: str
    path: str
    type: str
    size: int = 0
    mode: int = 0
    mtime: Optional[str] = None
    uid: int = 0
    gid: int = 0
    target: Optional[str] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d, client=None):
        return cls(name=d["name"], path=d["path"], type=d.get("type", "other"), size=_get(d, "size", 0),
                   mode=_get(d, "mode", 0), mtime=d.get("mtime"), uid=_get(d, "uid", 0), gid=_get(d, "gid", 0),
                   target=d.get("target"), raw=d)

    @property
    def is_dir(self):
        return self.type == "dir"


@dataclass
class Template:
    name: str
    state: str = ""
    size_bytes: int = 0
    created_at: Optional[str] = None
    in_use: int = 0
    runtime: Optional[str] = None      # what its sandboxes get when a create names none
    start: Optional[dict] = None       # its start command and ready check
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d, client=None):
        return cls(name=d["name"], state=d.get("state", ""), size_bytes=_get(d, "size_bytes", 0),
                   created_at=d.get("created_at"), in_use=_get(d, "in_use", 0), runtime=d.get("runtime"),
                   start=d.get("start"), raw=d)


@dataclass
class TemplateVersion:
    version: int
    latest: bool = False
    digest: str = ""
    size_bytes: int = 0
    created_at: Optional[str] = None
    tags: List[str] = field(default_factory=list)
    shared_with: List[str] = field(default_factory=list)
    in_use: int = 0
    sandboxes: List[str] = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d, client=None):
        return cls(version=d["version"], latest=bool(d.get("latest")), digest=_get(d, "digest", ""),
                   size_bytes=_get(d, "size_bytes", 0), created_at=d.get("created_at"), tags=_get(d, "tags", []),
                   shared_with=_get(d, "shared_with", []), in_use=_get(d, "in_use", 0),
                   sandboxes=_get(d, "sandboxes", []), raw=d)


@dataclass
class Credential:
    name: str
    id: str = ""
    hosts: List[str] = field(default_factory=list)
    placeholder: str = ""
    state: str = ""
    version: int = 0
    env: Optional[str] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d, client=None):
        return cls(name=d["name"], id=d.get("id", ""), hosts=_get(d, "hosts", []), placeholder=d.get("placeholder", ""),
                   state=d.get("state", ""), version=_get(d, "version", 0), env=d.get("env"), raw=d)


@dataclass
class Event:
    seq: int
    time: str
    type: str
    sandbox: Optional[str] = None
    tenant: Optional[str] = None
    actor: Optional[str] = None
    reason: Optional[str] = None
    data: Any = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d, client=None):
        return cls(seq=d.get("seq", 0), time=d.get("time", ""), type=d.get("type", ""), sandbox=d.get("sandbox"),
                   tenant=d.get("tenant"), actor=d.get("actor"), reason=d.get("reason"), data=d.get("data"), raw=d)


@dataclass
class Key:
    id: str
    tenant: str = ""
    name: str = ""
    admin: bool = False
    created_at: Optional[str] = None
    key: Optional[str] = field(default=None, repr=False)  # the secret: only in the answer to a create
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d, client=None):
        return cls(id=d["id"], tenant=d.get("tenant", ""), name=d.get("name", ""), admin=bool(d.get("admin")),
                   created_at=d.get("created_at"), key=d.get("key"), raw=d)
