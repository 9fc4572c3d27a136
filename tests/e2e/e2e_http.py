# SPDX-License-Identifier: MIT
"""A small HTTP client for the tests (standard library only)."""

import http.client
import json as jsonlib
import select
import socket
import urllib.parse

DEFAULT_TIMEOUT = 120


class Response:
    def __init__(self, method, path, status, reason, headers, body):
        self.method = method
        self.path = path
        self.status = status
        self.reason = reason
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body
        self._json = None

    @property
    def content_type(self):
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def json(self):
        if self._json is None:
            try:
                self._json = jsonlib.loads(self.body)
            except ValueError as e:
                raise AssertionError(f"{self.method} {self.path} → {self.status}: body is not JSON ({e}): "
                                     f"{self.body[:300]!r}") from None
        return self._json

    def text(self):
        return self.body.decode("utf-8", "replace")

    def __repr__(self):
        return f"<{self.method} {self.path} → {self.status} {self.body[:300]!r}>"


class StreamResponse:
    """An open response whose body is read line by line (NDJSON)."""

    def __init__(self, method, path, conn, resp):
        self.method = method
        self.path = path
        self.conn = conn
        self.resp = resp
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}
        self._buf = b""

    @property
    def content_type(self):
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def readline(self):
        """One line (with its newline), b"" at the end. Reads in blocks:
        http.client's own readline() takes a chunked body byte by byte."""
        while b"\n" not in self._buf:
            b = self.resp.read1(65536)
            if not b:
                line, self._buf = self._buf, b""
                return line
            self._buf += b
        line, self._buf = self._buf.split(b"\n", 1)
        return line + b"\n"

    def lines(self):
        while True:
            line = self.readline()
            if not line:
                return
            yield line

    def read(self):
        data, self._buf = self._buf + self.resp.read(), b""
        return data

    def fileno(self):
        return self.conn.sock.fileno() if self.conn.sock else -1

    def close(self):
        try:
            self.conn.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def split_url(url):
    u = urllib.parse.urlsplit(url)
    return u.hostname, u.port or 80


def build_target(path, params=None):
    if params:
        q = urllib.parse.urlencode(params, doseq=True)
        path += ("&" if "?" in path else "?") + q
    return path


def request(url, method, path, *, json=None, data=None, headers=None, key=None, stream=False,
            timeout=DEFAULT_TIMEOUT, params=None, raw_json=None):
    """One request. json= an object to send as JSON; raw_json= bytes sent with
    Content-Type application/json as is; data= bytes, a file object or an
    iterable of bytes (sent chunked unless headers give Content-Length)."""
    host, port = split_url(url)
    target = build_target(path, params)
    hdrs = {}
    body = None
    if json is not None:
        body = jsonlib.dumps(json).encode()
        hdrs["Content-Type"] = "application/json"
    elif raw_json is not None:
        body = raw_json
        hdrs["Content-Type"] = "application/json"
    elif data is not None:
        body = data
        hdrs["Content-Type"] = "application/octet-stream"
    if key is not None:
        hdrs["Authorization"] = f"Bearer {key}"
    for k, v in (headers or {}).items():
        # later wins, case-insensitively; None removes
        for old in [h for h in hdrs if h.lower() == k.lower()]:
            del hdrs[old]
        if v is not None:
            hdrs[k] = v
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    chunked = False
    if body is not None and not isinstance(body, (bytes, bytearray)) and \
            not any(h.lower() == "content-length" for h in hdrs):
        chunked = True
    elif body is None and method in ("POST", "PUT") and \
            not any(h.lower() == "content-length" for h in hdrs):
        hdrs["Content-Length"] = "0"
    try:
        conn.request(method, target, body=body, headers=hdrs, encode_chunked=chunked)
        resp = conn.getresponse()
    except Exception:
        conn.close()
        raise
    if stream:
        return StreamResponse(method, target, conn, resp)
    try:
        payload = resp.read()
    finally:
        conn.close()
    return Response(method, target, resp.status, resp.reason, resp.getheaders(), payload)


def request_early(url, method, path, *, body_iter, length=None, headers=None, key=None,
                  timeout=DEFAULT_TIMEOUT, params=None, content_type="application/octet-stream"):
    """A request with a body the server may refuse before reading all of it
    (413, 507): sending stops as soon as a response is readable. Returns
    (Response or None, bytes_sent, error-text)."""
    host, port = split_url(url)
    target = build_target(path, params)
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}:{port}", f"Content-Type: {content_type}"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    else:
        lines.append("Transfer-Encoding: chunked")
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    sock = socket.create_connection((host, port), timeout=timeout)
    sent = 0
    err = ""
    try:
        sock.sendall(head)
        for chunk in body_iter:
            r, _, _ = select.select([sock], [], [], 0)
            if r:
                break
            try:
                if length is None:
                    sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                else:
                    sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError) as e:
                err = f"sending stopped after {sent} bytes: {e}"
                break
            sent += len(chunk)
        else:
            if length is None:
                try:
                    sock.sendall(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError) as e:
                    err = f"sending the last chunk failed: {e}"
        resp = http.client.HTTPResponse(sock, method=method)
        try:
            resp.begin()
            payload = resp.read()
        except (ConnectionResetError, http.client.RemoteDisconnected, http.client.IncompleteRead) as e:
            return None, sent, f"{err}; no complete response: {e!r}".lstrip("; ")
        return Response(method, target, resp.status, resp.reason, resp.getheaders(), payload), sent, err
    finally:
        sock.close()


def raw_exchange(url, data, timeout=30):
    """Sends raw bytes and returns everything the server answers until it
    closes (or the timeout)."""
    host, port = split_url(url)
    sock = socket.create_connection((host, port), timeout=timeout)
    out = b""
    try:
        sock.sendall(data)
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        while True:
            try:
                b = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            out += b
    finally:
        sock.close()
    return out
