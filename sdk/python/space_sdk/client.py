# SPDX-License-Identifier: MIT
"""The synchronous client."""

import os
import posixpath

from . import _common as c
from ._http import Transport
from ._ops import Ops
from .errors import ExecFailed, SpaceError
from .models import Event, ExecEvent, ExecResult


class Process:
    """A command started in the background (start()): its exec id and pid,
    and the calls that reach it."""

    def __init__(self, client, sandbox_id, exec_id, pid):
        self._client, self.sandbox_id, self.exec_id, self.pid = client, sandbox_id, exec_id, pid

    def send_stdin(self, data, *, eof=False):
        return self._client.send_stdin(self.sandbox_id, self.exec_id, data, eof=eof)

    def signal(self, signal="SIGTERM"):
        return self._client.signal(self.sandbox_id, self.exec_id, signal)

    def kill(self):
        return self.signal("SIGKILL")

    def resize(self, rows, cols):
        return self._client.resize(self.sandbox_id, self.exec_id, rows, cols)

    def __repr__(self):
        return f"Process(sandbox_id={self.sandbox_id!r}, exec_id={self.exec_id!r}, pid={self.pid})"


def _collect(events, on_stdout, on_stderr):
    res = ExecResult(exit_code=None)
    out, err = [], []
    for ev in events:
        if ev.type == "start":
            res.exec_id, res.pid = ev.exec_id, ev.pid
        elif ev.type == "stdout":
            out.append(ev.data)
            if on_stdout:
                on_stdout(ev.data)
        elif ev.type == "stderr":
            err.append(ev.data)
            if on_stderr:
                on_stderr(ev.data)
        elif ev.type == "error":
            res.error = ev.message
        elif ev.type == "exit":
            res.exit_code, res.signal, res.reason = ev.code, ev.signal, ev.reason
    res.stdout, res.stderr = b"".join(out), b"".join(err)
    return res


class Client(Ops):
    """A space client: `Client()` reads SPACE_URL and SPACE_API_KEY (else the
    key file of `space up`). Every call has a timeout (seconds, `timeout=`);
    429 and 503 answers are retried with backoff (`retries=`), honouring
    Retry-After."""

    def __init__(self, url=None, api_key=None, *, timeout=c.DEFAULT_TIMEOUT, retries=c.DEFAULT_RETRIES):
        url, key = c.resolve_config(url, api_key)
        self._t = Transport(url, key, timeout, retries)

    def close(self):
        self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- multi-step calls ----
    def list(self, *, state=None, page_size=None):
        """Every sandbox of the tenant (all pages)."""
        out, after = [], None
        while True:
            page, after = self.list_page(state=state, limit=page_size, after=after)
            out += page
            if not after:
                return out

    def exec_stream(self, sandbox_id, cmd=None, *, shell=None, env=None, cwd=None, user=None, stdin=None,
                    timeout_s=None, pty=None, stream_timeout=None, **extra):
        """The command's events as they happen: an iterator of ExecEvent
        (start, stdout, stderr, ..., exit). cmd may be a list, or a string
        run by /bin/sh -c."""
        req = self._exec_request(sandbox_id, cmd, shell, env, cwd, user, stdin, timeout_s, pty, False, extra,
                                 stream_timeout)
        stream = self._t.request(req.pop("method"), req.pop("path"), **req)
        return (ExecEvent.from_dict(d) for d in stream.lines())

    def exec(self, sandbox_id, cmd=None, *, shell=None, env=None, cwd=None, user=None, stdin=None, timeout_s=None,
             on_stdout=None, on_stderr=None, check=False, stream_timeout=None, **extra):
        """Runs a command to its end: ExecResult (exit_code, stdout, stderr,
        signal, reason). on_stdout/on_stderr get each chunk as it comes;
        check=True raises ExecFailed unless it exited 0."""
        res = _collect(self.exec_stream(sandbox_id, cmd, shell=shell, env=env, cwd=cwd, user=user, stdin=stdin,
                                        timeout_s=timeout_s, stream_timeout=stream_timeout, **extra),
                       on_stdout, on_stderr)
        if check and res.exit_code != 0:
            raise ExecFailed(res.error or f"exit code {res.exit_code}" + (f" ({res.signal})" if res.signal else ""))
        return res

    def start(self, sandbox_id, cmd=None, *, shell=None, env=None, cwd=None, user=None, stdin=None, pty=None,
              **extra):
        """Starts a command in the background: a Process (stdin with stdin=True,
        signal, resize). It outlives this call."""
        req = self._exec_request(sandbox_id, cmd, shell, env, cwd, user, stdin, None, pty, True, extra)
        req["timeout"] = self._t.timeout
        with self._t.request(req.pop("method"), req.pop("path"), **req) as stream:
            for d in stream.lines():
                ev = ExecEvent.from_dict(d)
                if ev.type == "start":
                    return Process(self, sandbox_id, ev.exec_id, ev.pid)
                if ev.type == "error":
                    raise ExecFailed(ev.message or "the command could not be started")
        raise ExecFailed("the server sent no start event")

    def read_file(self, sandbox_id, path):
        """The file's bytes."""
        return b"".join(self.read_file_stream(sandbox_id, path))

    def read_volume_file(self, name, path):
        """A file of a volume, without a sandbox (at most 512 KiB)."""
        return b"".join(iter(self._t.request("GET", f"/v1/volumes/{c.seg(name)}/files", params={"path": path},
                                             stream=True)))

    def read_file_stream(self, sandbox_id, path, *, chunk_timeout=None):
        """The file's bytes in chunks, as they come (any size)."""
        return iter(self._t.request("GET", f"/v1/sandboxes/{c.seg(sandbox_id)}/files", params={"path": path},
                                    stream=True, timeout=chunk_timeout))

    def write_file(self, sandbox_id, path, data, *, mode=None, parents=True):
        """Writes bytes, a str, a file object or an iterable of chunks (streamed);
        the file appears whole or not at all."""
        req = self._write_request(sandbox_id, path, data, mode, parents)
        return self._t.json(req.pop("method"), req.pop("path"), **req)

    def download(self, sandbox_id, path, local_path):
        with open(local_path, "wb") as f:
            for chunk in self.read_file_stream(sandbox_id, path):
                f.write(chunk)

    def upload(self, sandbox_id, local_path, path, *, mode=None):
        with open(local_path, "rb") as f:
            return self.write_file(sandbox_id, path, f, mode=mode)

    def upload_dir(self, sandbox_id, local_dir, path):
        """A local directory tree into the sandbox at path (files and directories)."""
        self.mkdir(sandbox_id, path)
        for root, dirs, files in os.walk(local_dir):
            rel = os.path.relpath(root, local_dir)
            dest = path if rel == "." else posixpath.join(path, *rel.split(os.sep))
            for d in dirs:
                self.mkdir(sandbox_id, posixpath.join(dest, d))
            for f in files:
                src = os.path.join(root, f)
                if os.path.isfile(src) and not os.path.islink(src):
                    self.upload(sandbox_id, src, posixpath.join(dest, f), mode=os.stat(src).st_mode & 0o777)

    def build_template(self, name, context, *, dockerfile=None, build_args=None, allow=None, on_event=None):
        """Builds template name from a Dockerfile (admin key). context: a directory, or a tar of it (bytes, a
        file object, chunks); dockerfile: its path in the context (default Dockerfile); build_args: ARG values;
        allow: hosts the RUN steps may reach (default none). on_event(d) sees every progress line (step,
        output, result, error) as it comes. Returns the result line ({"template": ..., "cached_steps": N,
        "run": N, ...}); a failed step raises SpaceError, the previous version of the template kept."""
        req = self._build_request(name, context, dockerfile, build_args, allow)
        stream = self._t.request(req.pop("method"), req.pop("path"), **req)
        result = None
        with stream:
            for d in stream.lines():
                result = self._build_event(d, on_event) or result
        if result is None:
            raise SpaceError("the build's stream ended without a result")
        return result

    def download_dir(self, sandbox_id, path, local_dir):
        """A directory tree of the sandbox into local_dir (files and directories;
        symlinks and special files are skipped)."""
        os.makedirs(local_dir, exist_ok=True)
        for e in self.list_files(sandbox_id, path):
            if e.type == "dir":
                self.download_dir(sandbox_id, e.path, os.path.join(local_dir, e.name))
            elif e.type == "file":
                self.download(sandbox_id, e.path, os.path.join(local_dir, e.name))

    def follow_events(self, *, sandbox=None, type=None, after=None, since=None):
        """Events as they happen (an iterator of Event; close it to stop)."""
        stream = self._t.request("GET", "/v1/events", params={"sandbox": sandbox, "type": type, "after": after,
                                                             "since": since, "follow": True},
                                 stream=True, timeout=24 * 3600.0)
        return (Event.from_dict(d) for d in stream.lines())
