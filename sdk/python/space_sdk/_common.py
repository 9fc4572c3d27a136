# SPDX-License-Identifier: MIT
"""What the sync and asyncio transports share: configuration, URLs, request
bodies, error replies, retry decisions."""

import json
import os
import random
from urllib.parse import quote, urlencode, urlsplit

from .errors import SpaceError, error_class

DEFAULT_URL = "http://127.0.0.1:7070"
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 3
BACKOFF_BASE = 0.2
BACKOFF_MAX = 10.0
IDEMPOTENT = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"}
USER_AGENT = "space-sdk-python/0.1"


def resolve_config(url=None, api_key=None):
    """(url, key): arguments, else SPACE_URL / SPACE_API_KEY, else the key file
    that `space up` leaves in the state directory (SPACE_STATE_DIR)."""
    url = url or os.environ.get("SPACE_URL") or DEFAULT_URL
    key = api_key or os.environ.get("SPACE_API_KEY")
    if not key:
        path = os.path.join(os.environ.get("SPACE_STATE_DIR") or "/var/lib/space", "admin.key")
        try:
            with open(path, encoding="ascii") as f:
                key = f.read().strip()
        except OSError:
            key = None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"SPACE_URL must be http(s)://host[:port], not {url!r}")
    return url.rstrip("/"), key


def endpoint(url):
    """(scheme, host, port, base path) of a SPACE_URL."""
    p = urlsplit(url)
    port = p.port or (443 if p.scheme == "https" else 80)
    return p.scheme, p.hostname, port, p.path.rstrip("/")


def target(base, path, params=None):
    """The request target: base + path (its segments already quoted) + query."""
    q = {k: v for k, v in (params or {}).items() if v is not None}
    q = {k: ("1" if v is True else "0" if v is False else v) for k, v in q.items()}
    return base + path + ("?" + urlencode(q) if q else "")


def seg(s):
    """One path segment (an id or a name), quoted."""
    return quote(str(s), safe="")


def encode_json(obj):
    return json.dumps({k: v for k, v in obj.items() if v is not None} if isinstance(obj, dict) else obj).encode()


def headers_for(key, extra=None, content_type=None, length=None):
    h = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if key:
        h["Authorization"] = f"Bearer {key}"
    if content_type:
        h["Content-Type"] = content_type
    if length is not None:
        h["Content-Length"] = str(length)
    h.update(extra or {})
    return h


def retry_after(headers):
    v = headers.get("retry-after")
    try:
        return max(0.0, float(v)) if v is not None else None
    except ValueError:
        return None


def backoff(attempt, hint=None):
    """Seconds to wait before try attempt+1: the server's Retry-After if it
    gave one, else exponential with jitter."""
    if hint is not None:
        return min(hint, BACKOFF_MAX)
    return min(BACKOFF_MAX, BACKOFF_BASE * (2 ** attempt)) * (0.5 + random.random() / 2)


def should_retry(status):
    """429 and 503 say the request was not carried out: safe to send again."""
    return status in (429, 503)


def error_from(status, headers, body):
    code, message = None, None
    try:
        e = json.loads(body.decode() if isinstance(body, (bytes, bytearray)) else body).get("error") or {}
        code, message = e.get("code"), e.get("message")
    except (ValueError, AttributeError):
        pass
    if not message:
        message = (body[:200].decode(errors="replace") if isinstance(body, (bytes, bytearray)) else str(body)) or \
            f"HTTP {status}"
    cls = error_class(code, status)
    return cls(message, status=status, code=code or cls.code, retry_after=retry_after(headers), body=body)


def decode_json(status, body):
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError as e:
        raise SpaceError(f"the server answered {status} with malformed JSON: {e}", status=status) from None


class NdjsonSplitter:
    """Bytes in as they come, JSON values out, one per non-empty line (the
    stream's last line may lack its newline: end() gives it)."""

    def __init__(self):
        self._buf = b""

    def feed(self, chunk):
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def end(self):
        rest, self._buf = self._buf, b""
        return [json.loads(rest)] if rest.strip() else []
