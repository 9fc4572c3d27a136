# SPDX-License-Identifier: MIT
"""Every /v1 call that is one request and one answer, written once: on a
Client each returns its result, on an AsyncClient an awaitable of it (the
transport's json() is a coroutine there)."""

import io
import json
import os
import tarfile

from ._common import seg
from .errors import SpaceError
from .models import Checkpoint, Credential, Event, FileEntry, Key, Sandbox, Template, TemplateVersion


EXEC_QUIET_MAX = 24 * 3600.0


def _drop_none(d):
    return {k: v for k, v in d.items() if v is not None}


def _exec_body(cmd, shell, env, cwd, user, stdin, timeout_s, pty, background, extra):
    if isinstance(cmd, str) and shell is None:
        cmd, shell = None, cmd
    if (cmd is None) == (shell is None):
        raise ValueError("give cmd (a list of strings) or shell (a string)")
    if cmd is not None and (not isinstance(cmd, (list, tuple)) or not all(isinstance(a, str) for a in cmd)):
        raise ValueError("cmd must be a list of strings (or a string, run by /bin/sh -c)")
    return _drop_none({"cmd": list(cmd) if cmd is not None else None, "shell": shell, "env": env, "cwd": cwd,
                       "user": user, "stdin": stdin, "timeout_s": timeout_s, "pty": pty,
                       "background": background or None, **(extra or {})})


class Ops:
    """The single-request calls; `self._t` is the transport."""

    # ---- deployment ----
    def info(self):
        return self._t.json("GET", "/v1/info")

    def health(self):
        return self._t.json("GET", "/healthz")

    def ready(self):
        """200 when the store and the worker answer; a 503 raises, naming the part."""
        return self._t.json("GET", "/readyz")

    # ---- tenants (an admin key sets quotas; a tenant's key reads its own) ----
    def tenants(self):
        return self._t.json("GET", "/v1/tenants", parse=lambda v: v["tenants"])

    def tenant(self, name):
        return self._t.json("GET", f"/v1/tenants/{seg(name)}")

    def set_tenant(self, name, **quotas):
        """Sets the quotas given (sandboxes, cpu_millis, memory_mb, disk_mb, checkpoints, rps,
        streams; None resets one to the server's default) and default_runtime ("ns", "vm", "auto",
        None: the server's)."""
        # null values are meant (a reset), so the body is encoded here, not by encode_json
        return self._t.json("PUT", f"/v1/tenants/{seg(name)}", body=json.dumps(quotas).encode(),
                            content_type="application/json")

    # ---- ports (the ingress) and metrics ----
    def port(self, sandbox_id, port):
        """How to reach a port of the sandbox through the ingress: url, token, one-time link."""
        return self._t.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}/ports/{int(port)}")

    def metrics(self, sandbox_id, *, since=None):
        """The sandbox's usage samples (every 5 s, the last hour)."""
        return self._t.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}/metrics", params={"since": since},
                            parse=lambda v: v["metrics"])

    # ---- sandboxes ----
    def create(self, template=None, *, runtime=None, cpu=None, memory_mb=None, disk_mb=None, pids_max=None,
               timeout_s=None, env=None, metadata=None, network=None, credentials=None, idle_s=None,
               idle_action=None, auto_resume=None, **more):
        """A new running sandbox (POST /v1/sandboxes); fields as in docs/API.md."""
        body = _drop_none({"template": template, "runtime": runtime, "cpu": cpu, "memory_mb": memory_mb,
                           "disk_mb": disk_mb, "pids_max": pids_max, "timeout_s": timeout_s, "env": env,
                           "metadata": metadata, "network": network, "credentials": credentials, "idle_s": idle_s,
                           "idle_action": idle_action, "auto_resume": auto_resume, **more})
        return self._t.json("POST", "/v1/sandboxes", json_body=body, parse=self._sandbox,
                            timeout=max(self._t.timeout, 300))

    def get(self, sandbox_id):
        return self._t.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}", parse=self._sandbox)

    def list_page(self, *, state=None, limit=None, after=None):
        """One page: (sandboxes, next cursor or None)."""
        return self._t.json("GET", "/v1/sandboxes", params={"state": state, "limit": limit, "after": after},
                            parse=lambda v: ([self._sandbox(s) for s in v["sandboxes"]], v.get("next")))

    def delete(self, sandbox_id):
        return self._t.json("DELETE", f"/v1/sandboxes/{seg(sandbox_id)}", parse=self._sandbox,
                            timeout=max(self._t.timeout, 300))

    def update(self, sandbox_id, **fields):
        """PATCH: timeout_s, idle_s, idle_action, checkpoint_every_s, auto_resume, ..."""
        return self._t.json("PATCH", f"/v1/sandboxes/{seg(sandbox_id)}", json_body=fields, parse=self._sandbox)

    def set_policy(self, sandbox_id, policy):
        """Replace the egress policy: {"allow": [...], "deny": [...]}."""
        return self._t.json("PUT", f"/v1/sandboxes/{seg(sandbox_id)}/policy", json_body=policy, parse=self._sandbox)

    def pause(self, sandbox_id):
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/pause", parse=self._sandbox)

    def resume(self, sandbox_id):
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/resume", parse=self._sandbox,
                            timeout=max(self._t.timeout, 300))

    def suspend(self, sandbox_id):
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/suspend", parse=self._sandbox,
                            timeout=max(self._t.timeout, 300))

    # ---- checkpoints and branches ----
    def checkpoint(self, sandbox_id, name=None, *, with_memory=None):
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/checkpoints",
                            json_body=_drop_none({"name": name, "with_memory": with_memory}),
                            parse=Checkpoint.from_dict, timeout=max(self._t.timeout, 300))

    def checkpoints(self, sandbox_id):
        return self._t.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}/checkpoints",
                            parse=lambda v: [Checkpoint.from_dict(x) for x in v["checkpoints"]])

    def delete_checkpoint(self, sandbox_id, checkpoint):
        return self._t.json("DELETE", f"/v1/sandboxes/{seg(sandbox_id)}/checkpoints/{seg(checkpoint)}")

    def restore(self, sandbox_id, checkpoint):
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/restore", json_body={"checkpoint": checkpoint},
                            parse=self._sandbox, timeout=max(self._t.timeout, 300))

    def branch(self, sandbox_id, count=1, *, from_checkpoint=None, with_memory=None):
        """count new sandboxes from its files now (or from a checkpoint), all or nothing."""
        body = _drop_none({"count": count, "from": from_checkpoint, "with_memory": with_memory})
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/branch", json_body=body,
                            parse=lambda v: [self._sandbox(s) for s in v["sandboxes"]],
                            timeout=max(self._t.timeout, 600))

    # ---- processes ----
    def processes(self, sandbox_id):
        return self._t.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}/exec", parse=lambda v: v["processes"])

    def send_stdin(self, sandbox_id, exec_id, data, *, eof=False):
        if isinstance(data, str):
            data = data.encode()
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/exec/{seg(exec_id)}/stdin", body=bytes(data),
                            params={"eof": True if eof else None}, content_type="application/octet-stream")

    def signal(self, sandbox_id, exec_id, signal="SIGTERM"):
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/exec/{seg(exec_id)}/signal",
                            json_body={"signal": signal})

    def resize(self, sandbox_id, exec_id, rows, cols):
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/exec/{seg(exec_id)}/resize",
                            json_body={"rows": rows, "cols": cols})

    # ---- files ----
    def list_files(self, sandbox_id, path):
        return self._t.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}/files", params={"path": path, "list": True},
                            parse=lambda v: [FileEntry.from_dict(e) for e in v["entries"]])

    def stat(self, sandbox_id, path):
        return self._t.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}/files", params={"path": path, "stat": True},
                            parse=FileEntry.from_dict)

    def mkdir(self, sandbox_id, path, *, parents=True, mode=None):
        return self._t.json("PUT", f"/v1/sandboxes/{seg(sandbox_id)}/files",
                            params={"path": path, "type": "dir", "parents": parents or None,
                                    "mode": f"{mode:o}" if mode is not None else None}, body=b"")

    def remove(self, sandbox_id, path, *, recursive=False):
        return self._t.json("DELETE", f"/v1/sandboxes/{seg(sandbox_id)}/files",
                            params={"path": path, "recursive": recursive or None})

    def move(self, sandbox_id, src, dst):
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/files/move", json_body={"from": src, "to": dst})

    # ---- templates ----
    def templates(self):
        return self._t.json("GET", "/v1/templates", parse=lambda v: [Template.from_dict(t) for t in v["templates"]])

    def import_template(self, name, tar):
        """A template from a tar archive: bytes, a file object, or an iterable of chunks (admin key)."""
        body = tar
        if hasattr(tar, "read"):
            body = iter(lambda: tar.read(1 << 20), b"")
        return self._t.json("POST", "/v1/templates", params={"name": name}, body=body,
                            content_type="application/x-tar", parse=Template.from_dict,
                            timeout=max(self._t.timeout, 1800))

    def template_versions(self, name):
        """A template's versions, newest first: every import, pull or build is one; the name means the newest."""
        return self._t.json("GET", f"/v1/templates/{seg(name)}/versions",
                            parse=lambda v: [TemplateVersion.from_dict(x) for x in v["versions"]])

    def template_tags(self, name):
        """{tag: version} of a template."""
        return self._t.json("GET", f"/v1/templates/{seg(name)}/tags",
                            parse=lambda v: {t["tag"]: t["version"] for t in v["tags"]})

    def tag_template(self, name, tag, version=None):
        """Points tag at a version (default: the newest); create(template="NAME:TAG") then uses it (admin key)."""
        return self._t.json("POST", f"/v1/templates/{seg(name)}/tags",
                            json_body=_drop_none({"tag": tag, "version": version}))

    def untag_template(self, name, tag):
        return self._t.json("DELETE", f"/v1/templates/{seg(name)}/tags/{seg(tag)}")

    def delete_template(self, name):
        return self._t.json("DELETE", f"/v1/templates/{seg(name)}")

    def update_template(self, name, **settings):
        """Sets the template's runtime ("ns", "vm", "auto") and start ({"command": ..., "ready": {"port": N,
        "path": "/"} or {"command": ...}, "timeout_s": N}) for every sandbox made from it; None removes one, a
        setting not given is kept (admin key)."""
        # null values are meant (a removal), so the body is encoded here
        return self._t.json("PATCH", f"/v1/templates/{seg(name)}", body=json.dumps(settings).encode(),
                            content_type="application/json", parse=Template.from_dict)

    def pull_template(self, name, ref, *, credential=None):
        """A template from an image in a registry (registry/repo:tag or ...@sha256:; admin key), logged in with a
        stored basic credential if named."""
        return self._t.json("POST", f"/v1/templates/{seg(name)}/pull",
                            json_body=_drop_none({"ref": ref, "credential": credential}), parse=Template.from_dict,
                            timeout=max(self._t.timeout, 1800))

    def _build_request(self, name, context, dockerfile, build_args, allow):
        """POST /v1/templates/{name}/build: context is a tar (bytes, a file object, chunks) or a directory."""
        body = context
        if isinstance(context, (str, os.PathLike)) and os.path.isdir(context):
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tf:
                tf.add(context, arcname=".")
            body = buf.getvalue()
        elif hasattr(context, "read"):
            body = iter(lambda: context.read(1 << 20), b"")
        params = _drop_none({"dockerfile": dockerfile,
                             "build_args": json.dumps(build_args) if build_args else None,
                             "network": json.dumps({"allow": list(allow)}) if allow else None})
        return dict(method="POST", path=f"/v1/templates/{seg(name)}/build", params=params, body=body,
                    content_type="application/x-tar", stream=True, timeout=max(self._t.timeout, 1800))

    @staticmethod
    def _build_event(d, on_event):
        """The result of a build's line (None until the last), or its error raised."""
        if on_event:
            on_event(d)
        if d.get("type") == "error":
            raise SpaceError(d.get("message", "the build failed"), code=d.get("code"), body=d)
        return d if d.get("type") == "result" else None

    # ---- webhooks (signed, in-order deliveries of the tenant's events) ----
    def create_webhook(self, url, *, events=None, name=None, secret=None):
        """The webhook, with its signing secret (shown only here)."""
        return self._t.json("POST", "/v1/webhooks",
                            json_body=_drop_none({"url": url, "events": events, "name": name, "secret": secret}))

    def webhooks(self):
        return self._t.json("GET", "/v1/webhooks", parse=lambda v: v["webhooks"])

    def webhook(self, webhook_id):
        return self._t.json("GET", f"/v1/webhooks/{seg(webhook_id)}")

    def update_webhook(self, webhook_id, **fields):
        """url, events, name, enabled (re-enabling clears its failures)."""
        return self._t.json("PATCH", f"/v1/webhooks/{seg(webhook_id)}", json_body=fields)

    def delete_webhook(self, webhook_id):
        return self._t.json("DELETE", f"/v1/webhooks/{seg(webhook_id)}")

    def test_webhook(self, webhook_id):
        """Sends a webhook.test delivery now: {"delivered": true} or the receiver's failure."""
        return self._t.json("POST", f"/v1/webhooks/{seg(webhook_id)}/test")

    # ---- volumes (kept beyond any sandbox; mounted with create(volumes=[{"name", "path", "read_only"}])) ----
    def volumes(self):
        return self._t.json("GET", "/v1/volumes", parse=lambda v: v["volumes"])

    def create_volume(self, name, *, size_mb=None):
        return self._t.json("POST", "/v1/volumes", json_body=_drop_none({"name": name, "size_mb": size_mb}))

    def volume(self, name):
        return self._t.json("GET", f"/v1/volumes/{seg(name)}")

    def delete_volume(self, name):
        """VolumeInUse while a sandbox mounts it."""
        return self._t.json("DELETE", f"/v1/volumes/{seg(name)}")

    def clone_volume(self, name, to):
        """A new volume named to, a writable snapshot of name."""
        return self._t.json("POST", f"/v1/volumes/{seg(name)}/clone", json_body={"name": to})

    def snapshot_volume(self, name, to):
        """A new volume named to, a read-only snapshot of name as it is now (mounted read-only only;
        clone_volume of it restores it)."""
        return self._t.json("POST", f"/v1/volumes/{seg(name)}/snapshot", json_body={"name": to})

    def list_volume_files(self, name, path="/"):
        return self._t.json("GET", f"/v1/volumes/{seg(name)}/files", params={"path": path, "list": True},
                            parse=lambda v: v["entries"])

    def write_volume_file(self, name, path, data):
        """Replaces a file of a volume without a sandbox (bytes or str, at most 512 KiB)."""
        body = data.encode() if isinstance(data, str) else data
        return self._t.json("PUT", f"/v1/volumes/{seg(name)}/files", params={"path": path}, body=body,
                            content_type="application/octet-stream")

    def remove_volume_file(self, name, path):
        return self._t.json("DELETE", f"/v1/volumes/{seg(name)}/files", params={"path": path})

    def sandbox_volumes(self, sandbox_id):
        """The volumes a sandbox mounts."""
        return self._t.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}/volumes", parse=lambda v: v["volumes"])

    # ---- credentials ----
    def create_credential(self, name, value, hosts, *, header=None, basic_user=None, env=None, expires_at=None):
        body = _drop_none({"name": name, "value": value, "hosts": hosts, "header": header,
                           "basic_user": basic_user, "env": env, "expires_at": expires_at})
        return self._t.json("POST", "/v1/credentials", json_body=body, parse=Credential.from_dict)

    def credentials(self):
        return self._t.json("GET", "/v1/credentials",
                            parse=lambda v: [Credential.from_dict(x) for x in v["credentials"]])

    def credential(self, name):
        return self._t.json("GET", f"/v1/credentials/{seg(name)}", parse=Credential.from_dict)

    def update_credential(self, name, **fields):
        """PATCH: value (a rotation), hosts, header, basic_user, env, expires_at."""
        return self._t.json("PATCH", f"/v1/credentials/{seg(name)}", json_body=fields, parse=Credential.from_dict)

    def revoke_credential(self, name):
        return self._t.json("POST", f"/v1/credentials/{seg(name)}/revoke", parse=Credential.from_dict)

    def delete_credential(self, name):
        return self._t.json("DELETE", f"/v1/credentials/{seg(name)}")

    def grant(self, sandbox_id, credential):
        return self._t.json("POST", f"/v1/sandboxes/{seg(sandbox_id)}/credentials/{seg(credential)}",
                            parse=Credential.from_dict)

    def ungrant(self, sandbox_id, credential):
        return self._t.json("DELETE", f"/v1/sandboxes/{seg(sandbox_id)}/credentials/{seg(credential)}")

    def grants(self, sandbox_id):
        return self._t.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}/credentials",
                            parse=lambda v: [Credential.from_dict(x) for x in v["credentials"]])

    # ---- events and keys ----
    def events(self, *, sandbox=None, type=None, after=None, since=None, limit=None):
        """One page of events: (events, next seq)."""
        return self._t.json("GET", "/v1/events",
                            params={"sandbox": sandbox, "type": type, "after": after, "since": since, "limit": limit},
                            parse=lambda v: ([Event.from_dict(e) for e in v["events"]], v.get("next")))

    def create_key(self, name, *, tenant=None, admin=None):
        return self._t.json("POST", "/v1/keys", json_body=_drop_none({"name": name, "tenant": tenant, "admin": admin}),
                            parse=Key.from_dict)

    def keys(self):
        return self._t.json("GET", "/v1/keys", parse=lambda v: [Key.from_dict(k) for k in v["keys"]])

    def delete_key(self, key_id):
        return self._t.json("DELETE", f"/v1/keys/{seg(key_id)}")

    # ---- helpers for the clients ----
    def _sandbox(self, d):
        return Sandbox.from_dict(d, self)

    def _exec_request(self, sandbox_id, cmd, shell, env, cwd, user, stdin, timeout_s, pty, background, extra,
                      stream_timeout=None):
        body = _exec_body(cmd, shell, env, cwd, user, stdin, timeout_s, pty, background, extra)
        # how long the stream may be quiet: as long as the command may run (a day without a timeout_s)
        quiet = stream_timeout or (max(self._t.timeout, timeout_s + 30) if timeout_s else EXEC_QUIET_MAX)
        return dict(method="POST", path=f"/v1/sandboxes/{seg(sandbox_id)}/exec", json_body=body, stream=True,
                    timeout=quiet)

    def _write_request(self, sandbox_id, path, data, mode, parents):
        if isinstance(data, str):
            data = data.encode()
        elif hasattr(data, "read"):
            f = data
            data = iter(lambda: f.read(1 << 20), b"")
        return dict(method="PUT", path=f"/v1/sandboxes/{seg(sandbox_id)}/files", body=data,
                    params={"path": path, "parents": parents or None, "mode": f"{mode:o}" if mode is not None else None},
                    content_type="application/octet-stream", timeout=max(self._t.timeout, 600))
