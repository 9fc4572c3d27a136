# SPDX-License-Identifier: MIT
"""The synchronous transport: http.client with one keep-alive connection per
thread for ordinary calls, a connection of their own for streams."""

import http.client
import socket
import threading
import time

from . import _common as c
from .errors import ConnectionFailed, SpaceError, Timeout


class Stream:
    """A streamed response body: iterate for chunks (or .lines() for NDJSON);
    close() (or leaving a with-block) ends it early."""

    def __init__(self, conn, resp, timeout):
        self._conn, self._resp = conn, resp
        self.status, self.headers = resp.status, {k.lower(): v for k, v in resp.getheaders()}
        self._timeout = timeout

    def __iter__(self):
        try:
            while True:
                chunk = self._resp.read1(65536) if hasattr(self._resp, "read1") else self._resp.read(65536)
                if not chunk:
                    return
                yield chunk
        except socket.timeout:
            raise Timeout(f"no data for {self._timeout} s on the stream") from None
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed(f"the stream broke: {e}") from None
        finally:
            self.close()

    def lines(self):
        split = c.NdjsonSplitter()
        for chunk in self:
            yield from split.feed(chunk)
        yield from split.end()

    def close(self):
        if self._conn:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Transport:
    def __init__(self, url, key, timeout=c.DEFAULT_TIMEOUT, retries=c.DEFAULT_RETRIES):
        self.url, self.key, self.timeout, self.retries = url, key, timeout, retries
        self._scheme, self._host, self._port, self._base = c.endpoint(url)
        self._local = threading.local()

    def _new_conn(self, timeout):
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=timeout)

    def _pooled(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._new_conn(self.timeout)
        return conn

    def _drop_pooled(self):
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def close(self):
        self._drop_pooled()

    def request(self, method, path, *, params=None, json_body=None, body=None, headers=None, content_type=None,
                stream=False, timeout=None, ok=(200, 201, 204)):
        """One call, with retries on 429/503 and on broken connections of
        idempotent methods. Returns (status, headers, body bytes), or a Stream."""
        if json_body is not None:
            body, content_type = c.encode_json(json_body), "application/json"
        t = c.target(self._base, path, params)
        replayable = body is None or isinstance(body, (bytes, bytearray))
        for attempt in range(self.retries + 1):
            last = attempt == self.retries or not replayable
            conn = self._new_conn(timeout or self.timeout) if stream else self._pooled()
            reused = conn.sock is not None
            if timeout and not stream:
                conn.timeout = timeout
                if conn.sock:
                    conn.sock.settimeout(timeout)
            sent = False
            try:
                length = len(body) if isinstance(body, (bytes, bytearray)) else None
                conn.putrequest(method, t, skip_accept_encoding=True)
                for k, v in c.headers_for(self.key, headers, content_type, length).items():
                    conn.putheader(k, v)
                if body is not None and length is None:
                    conn.putheader("Transfer-Encoding", "chunked")
                conn.endheaders()
                sent = True
                if isinstance(body, (bytes, bytearray)):
                    conn.send(body)
                elif body is not None:
                    for chunk in body:
                        if chunk:
                            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    conn.send(b"0\r\n\r\n")
                resp = conn.getresponse()
            except socket.timeout:
                self._drop_pooled() if not stream else conn.close()
                raise Timeout(f"{method} {path}: no answer within {timeout or self.timeout} s") from None
            except (OSError, http.client.HTTPException) as e:
                self._drop_pooled() if not stream else conn.close()
                # a refused connection never reached the server; a broken one may have, but a
                # kept-alive one that the server had closed ends before any answer (as Go's client)
                stale = reused and isinstance(e, (http.client.RemoteDisconnected, ConnectionResetError,
                                                  BrokenPipeError))
                if not last and (not sent or method in c.IDEMPOTENT or stale):
                    time.sleep(c.backoff(attempt))
                    continue
                raise ConnectionFailed(f"{method} {path}: {e}") from None
            finally:
                if not stream and timeout and conn.sock:
                    conn.sock.settimeout(self.timeout)
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            if resp.status not in ok:
                data = resp.read()
                if stream:
                    conn.close()
                err = c.error_from(resp.status, hdrs, data)
                if not last and c.should_retry(resp.status):
                    time.sleep(c.backoff(attempt, err.retry_after))
                    continue
                raise err
            if stream:
                return Stream(conn, resp, timeout or self.timeout)
            try:
                data = resp.read()
            except (OSError, http.client.HTTPException) as e:
                self._drop_pooled()
                raise ConnectionFailed(f"{method} {path}: the answer broke off: {e}") from None
            if resp.will_close:
                self._drop_pooled()
            return resp.status, hdrs, data
        raise SpaceError("unreachable")

    def json(self, method, path, parse=None, **kw):
        status, _, data = self.request(method, path, **kw)
        v = c.decode_json(status, data)
        return parse(v) if parse else v
