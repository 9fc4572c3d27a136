# SPDX-License-Identifier: MIT
"""The asyncio transport: HTTP/1.1 over asyncio streams (standard library
only), idle keep-alive connections reused, a connection of their own for
streams."""

import asyncio
import ssl

from . import _common as c
from .errors import ConnectionFailed, SpaceError, Timeout

HEAD_MAX = 64 * 1024


class _Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    def close(self):
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 (a closed transport)
            pass


async def _read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > HEAD_MAX:
        raise ConnectionFailed("the response head is too large")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ConnectionFailed(f"not an HTTP response: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return int(parts[1]), headers, parts[0] == "HTTP/1.0"


async def _body_chunks(reader, headers, timeout):
    """The body's chunks by Content-Length, chunked coding, or until close."""
    async def read(n=None, exactly=None):
        if exactly is not None:
            return await asyncio.wait_for(reader.readexactly(exactly), timeout)
        return await asyncio.wait_for(reader.read(n), timeout)

    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            line = await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout)
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while (await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout)) != b"\r\n":
                    pass
                return
            yield await read(exactly=size)
            await read(exactly=2)
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            chunk = await read(min(left, 65536))
            if not chunk:
                raise ConnectionFailed("the answer broke off")
            left -= len(chunk)
            yield chunk
    else:
        while True:
            chunk = await read(65536)
            if not chunk:
                return
            yield chunk


class AsyncStream:
    """A streamed response body: `async for chunk in stream`, or `.lines()`."""

    def __init__(self, conn, status, headers, timeout):
        self._conn, self.status, self.headers, self._timeout = conn, status, headers, timeout

    async def __aiter__(self):
        try:
            async for chunk in _body_chunks(self._conn.reader, self.headers, self._timeout):
                yield chunk
        except asyncio.TimeoutError:
            raise Timeout(f"no data for {self._timeout} s on the stream") from None
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            raise ConnectionFailed(f"the stream broke: {e}") from None
        finally:
            self.close()

    async def lines(self):
        split = c.NdjsonSplitter()
        async for chunk in self:
            for value in split.feed(chunk):
                yield value
        for value in split.end():
            yield value

    def close(self):
        if self._conn:
            self._conn.close()
            self._conn = None

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()


class AsyncTransport:
    def __init__(self, url, key, timeout=c.DEFAULT_TIMEOUT, retries=c.DEFAULT_RETRIES, pool_max=8):
        self.url, self.key, self.timeout, self.retries = url, key, timeout, retries
        self._scheme, self._host, self._port, self._base = c.endpoint(url)
        self._idle, self._pool_max = [], pool_max

    async def _connect(self, timeout):
        ctx = ssl.create_default_context() if self._scheme == "https" else None
        r, w = await asyncio.wait_for(asyncio.open_connection(self._host, self._port, ssl=ctx), timeout)
        return _Conn(r, w)

    async def close(self):
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    async def request(self, method, path, *, params=None, json_body=None, body=None, headers=None,
                      content_type=None, stream=False, timeout=None, ok=(200, 201, 204)):
        if json_body is not None:
            body, content_type = c.encode_json(json_body), "application/json"
        timeout = timeout or self.timeout
        t = c.target(self._base, path, params)
        replayable = body is None or isinstance(body, (bytes, bytearray))
        for attempt in range(self.retries + 1):
            last = attempt == self.retries or not replayable
            conn = None if stream or not self._idle else self._idle.pop()
            reused, sent = conn is not None, False
            try:
                if conn is None:
                    conn = await self._connect(timeout)
                length = len(body) if isinstance(body, (bytes, bytearray)) else None
                h = c.headers_for(self.key, headers, content_type, length)
                h["Host"] = f"{self._host}:{self._port}"
                if body is not None and length is None:
                    h["Transfer-Encoding"] = "chunked"
                head = f"{method} {t} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
                conn.writer.write(head.encode("latin-1"))
                sent = True
                if isinstance(body, (bytes, bytearray)):
                    conn.writer.write(body)
                elif body is not None:
                    async for chunk in _aiter(body):
                        if chunk:
                            conn.writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            await conn.writer.drain()
                    conn.writer.write(b"0\r\n\r\n")
                await asyncio.wait_for(conn.writer.drain(), timeout)
                status, hdrs, http10 = await asyncio.wait_for(_read_head(conn.reader), timeout)
            except asyncio.TimeoutError:
                if conn:
                    conn.close()
                raise Timeout(f"{method} {path}: no answer within {timeout} s") from None
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionFailed) as e:
                if conn:
                    conn.close()
                stale = reused and isinstance(e, (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError))
                if not last and (not sent or method in c.IDEMPOTENT or stale):
                    await asyncio.sleep(c.backoff(attempt))
                    continue
                raise ConnectionFailed(f"{method} {path}: {e}") from None
            if stream and status in ok:
                return AsyncStream(conn, status, hdrs, timeout)
            try:
                if status in (204, 304) or 100 <= status < 200 or method == "HEAD":
                    data = b""  # no body, whatever the headers say (RFC 9112 6.3)
                else:
                    data = b"".join([chunk async for chunk in _body_chunks(conn.reader, hdrs, timeout)])
            except asyncio.TimeoutError:
                conn.close()
                raise Timeout(f"{method} {path}: the answer did not come within {timeout} s") from None
            except (OSError, asyncio.IncompleteReadError, ValueError) as e:
                conn.close()
                raise ConnectionFailed(f"{method} {path}: the answer broke off: {e}") from None
            if http10 or hdrs.get("connection", "").lower() == "close" or stream or len(self._idle) >= self._pool_max:
                conn.close()
            else:
                self._idle.append(conn)
            if status not in ok:
                err = c.error_from(status, hdrs, data)
                if not last and c.should_retry(status):
                    await asyncio.sleep(c.backoff(attempt, err.retry_after))
                    continue
                raise err
            return status, hdrs, data
        raise SpaceError("unreachable")

    async def json(self, method, path, parse=None, **kw):
        status, _, data = await self.request(method, path, **kw)
        v = c.decode_json(status, data)
        return parse(v) if parse else v


async def _aiter(body):
    if hasattr(body, "__aiter__"):
        async for chunk in body:
            yield chunk
    else:
        for chunk in body:
            yield chunk
