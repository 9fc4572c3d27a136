# SPDX-License-Identifier: MIT
"""The asyncio client: the same calls as Client, each a coroutine (streams
are async iterators)."""

import asyncio
import os
import posixpath

from . import _common as c
from ._aio_http import AsyncTransport
from ._ops import Ops
from .errors import ExecFailed, SpaceError
from .models import Event, ExecEvent, ExecResult


class AsyncProcess:
    def __init__(self, client, sandbox_id, exec_id, pid):
        self._client, self.sandbox_id, self.exec_id, self.pid = client, sandbox_id, exec_id, pid

    async def send_stdin(self, data, *, eof=False):
        return await self._client.send_stdin(self.sandbox_id, self.exec_id, data, eof=eof)

    async def signal(self, signal="SIGTERM"):
        return await self._client.signal(self.sandbox_id, self.exec_id, signal)

    async def kill(self):
        return await self.signal("SIGKILL")

    async def resize(self, rows, cols):
        return await self._client.resize(self.sandbox_id, self.exec_id, rows, cols)


async def _call(cb, data):
    if cb:
        r = cb(data)
        if asyncio.iscoroutine(r):
            await r


class AsyncClient(Ops):
    """As Client, for asyncio: `async with AsyncClient() as sp: sb = await sp.create()`."""

    def __init__(self, url=None, api_key=None, *, timeout=c.DEFAULT_TIMEOUT, retries=c.DEFAULT_RETRIES):
        url, key = c.resolve_config(url, api_key)
        self._t = AsyncTransport(url, key, timeout, retries)

    async def close(self):
        await self._t.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def list(self, *, state=None, page_size=None):
        out, after = [], None
        while True:
            page, after = await self.list_page(state=state, limit=page_size, after=after)
            out += page
            if not after:
                return out

    async def exec_stream(self, sandbox_id, cmd=None, *, shell=None, env=None, cwd=None, user=None, stdin=None,
                          timeout_s=None, pty=None, stream_timeout=None, **extra):
        """An async iterator of ExecEvent: `async for ev in await sp.exec_stream(id, "make")`."""
        req = self._exec_request(sandbox_id, cmd, shell, env, cwd, user, stdin, timeout_s, pty, False, extra,
                                 stream_timeout)
        stream = await self._t.request(req.pop("method"), req.pop("path"), **req)

        async def events():
            async for d in stream.lines():
                yield ExecEvent.from_dict(d)
        return events()

    async def exec(self, sandbox_id, cmd=None, *, shell=None, env=None, cwd=None, user=None, stdin=None,
                   timeout_s=None, on_stdout=None, on_stderr=None, check=False, stream_timeout=None, **extra):
        res = ExecResult(exit_code=None)
        out, err = [], []
        async for ev in await self.exec_stream(sandbox_id, cmd, shell=shell, env=env, cwd=cwd, user=user,
                                               stdin=stdin, timeout_s=timeout_s, stream_timeout=stream_timeout,
                                               **extra):
            if ev.type == "start":
                res.exec_id, res.pid = ev.exec_id, ev.pid
            elif ev.type == "stdout":
                out.append(ev.data)
                await _call(on_stdout, ev.data)
            elif ev.type == "stderr":
                err.append(ev.data)
                await _call(on_stderr, ev.data)
            elif ev.type == "error":
                res.error = ev.message
            elif ev.type == "exit":
                res.exit_code, res.signal, res.reason = ev.code, ev.signal, ev.reason
        res.stdout, res.stderr = b"".join(out), b"".join(err)
        if check and res.exit_code != 0:
            raise ExecFailed(res.error or f"exit code {res.exit_code}")
        return res

    async def start(self, sandbox_id, cmd=None, *, shell=None, env=None, cwd=None, user=None, stdin=None, pty=None,
                    **extra):
        req = self._exec_request(sandbox_id, cmd, shell, env, cwd, user, stdin, None, pty, True, extra)
        req["timeout"] = self._t.timeout
        async with await self._t.request(req.pop("method"), req.pop("path"), **req) as stream:
            async for d in stream.lines():
                ev = ExecEvent.from_dict(d)
                if ev.type == "start":
                    return AsyncProcess(self, sandbox_id, ev.exec_id, ev.pid)
                if ev.type == "error":
                    raise ExecFailed(ev.message or "the command could not be started")
        raise ExecFailed("the server sent no start event")

    async def read_file_stream(self, sandbox_id, path, *, chunk_timeout=None):
        stream = await self._t.request("GET", f"/v1/sandboxes/{c.seg(sandbox_id)}/files", params={"path": path},
                                       stream=True, timeout=chunk_timeout)
        return stream.__aiter__()

    async def read_volume_file(self, name, path):
        """A file of a volume, without a sandbox (at most 512 KiB)."""
        stream = await self._t.request("GET", f"/v1/volumes/{c.seg(name)}/files", params={"path": path}, stream=True)
        return b"".join([chunk async for chunk in stream])

    async def read_file(self, sandbox_id, path):
        return b"".join([chunk async for chunk in await self.read_file_stream(sandbox_id, path)])

    async def write_file(self, sandbox_id, path, data, *, mode=None, parents=True):
        req = self._write_request(sandbox_id, path, data, mode, parents)
        return await self._t.json(req.pop("method"), req.pop("path"), **req)

    async def download(self, sandbox_id, path, local_path):
        with open(local_path, "wb") as f:
            async for chunk in await self.read_file_stream(sandbox_id, path):
                f.write(chunk)

    async def upload(self, sandbox_id, local_path, path, *, mode=None):
        with open(local_path, "rb") as f:
            return await self.write_file(sandbox_id, path, f, mode=mode)

    async def upload_dir(self, sandbox_id, local_dir, path):
        await self.mkdir(sandbox_id, path)
        for root, dirs, files in os.walk(local_dir):
            rel = os.path.relpath(root, local_dir)
            dest = path if rel == "." else posixpath.join(path, *rel.split(os.sep))
            for d in dirs:
                await self.mkdir(sandbox_id, posixpath.join(dest, d))
            for f in files:
                src = os.path.join(root, f)
                if os.path.isfile(src) and not os.path.islink(src):
                    await self.upload(sandbox_id, src, posixpath.join(dest, f), mode=os.stat(src).st_mode & 0o777)

    async def download_dir(self, sandbox_id, path, local_dir):
        os.makedirs(local_dir, exist_ok=True)
        for e in await self.list_files(sandbox_id, path):
            if e.type == "dir":
                await self.download_dir(sandbox_id, e.path, os.path.join(local_dir, e.name))
            elif e.type == "file":
                await self.download(sandbox_id, e.path, os.path.join(local_dir, e.name))

    async def build_template(self, name, context, *, dockerfile=None, build_args=None, allow=None, on_event=None):
        """As Client.build_template."""
        req = self._build_request(name, context, dockerfile, build_args, allow)
        stream = await self._t.request(req.pop("method"), req.pop("path"), **req)
        result = None
        async for d in stream.lines():
            result = self._build_event(d, on_event) or result
        if result is None:
            raise SpaceError("the build's stream ended without a result")
        return result

    async def follow_events(self, *, sandbox=None, type=None, after=None, since=None):
        stream = await self._t.request("GET", "/v1/events", params={"sandbox": sandbox, "type": type, "after": after,
                                                                   "since": since, "follow": True},
                                       stream=True, timeout=24 * 3600.0)

        async def events():
            async for d in stream.lines():
                yield Event.from_dict(d)
        return events()
