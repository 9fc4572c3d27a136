# SPDX-License-Identifier: MIT
"""A hostile tenant for test_tenancy.py, run as a process of its own (so
its threads do not hold the test's interpreter lock while the test times
the other tenant's requests): it opens event-follow streams as fast as it
can and holds every one it gets, and floods the API with requests on
keep-alive connections. Bounded in count and time; loopback only.

    python3 tenancy_hostile.py HOST PORT SECONDS STREAM_ATTEMPTS KEY...

Prints one JSON object: what it got for its streams and requests."""

import json
import resource
import socket
import sys
import threading
import time

STREAM_THREADS = 16
FLOOD_THREADS = 6


def read_response(sock, buf):
    """(status, headers dict, body, rest of buf) of one response; raises on EOF."""
    while b"\r\n\r\n" not in buf:
        b = sock.recv(65536)
        if not b:
            raise ConnectionError("closed")
        buf += b
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(buf) < n:
        b = sock.recv(65536)
        if not b:
            raise ConnectionError("closed in the body")
        buf += b
    return status, headers, buf[:n], buf[n:]


class Results:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.messages = {}
        self.held = []

    def add(self, what, status, body=b""):
        k = f"{what}_{status}"
        with self.lock:
            self.counts[k] = self.counts.get(k, 0) + 1
            seen = self.messages.setdefault(k, [])
            if status != 200 and len(seen) < 20:
                try:
                    m = json.loads(body)["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    m = body[:200].decode("latin-1")
                if m not in seen:
                    seen.append(m)


def stream_opener(host, port, keys, deadline, attempts, res, i):
    n = 0
    while time.monotonic() < deadline:
        with res.lock:
            if attempts[0] <= 0:
                return
            attempts[0] -= 1
        key = keys[(i + n) % len(keys)]
        n += 1
        try:
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(f"GET /v1/events?follow=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n"
                      .encode())
            buf = b""
            while b"\r\n\r\n" not in buf:
                b = s.recv(4096)
                if not b:
                    raise ConnectionError("closed")
                buf += b
            status = int(buf.split(b" ", 2)[1])
            if status == 200:
                res.add("stream", 200)
                with res.lock:
                    res.held.append(s)   # hold it open to the end
                continue
            body = b""
            try:
                _, _, body, _ = read_response(s, buf)
            except (OSError, ValueError):
                pass
            res.add("stream", status, body)
            s.close()
        except (OSError, ValueError):
            res.add("stream", "error")


def flooder(host, port, keys, deadline, res, i):
    key = keys[i % len(keys)]
    req = f"GET /v1/sandboxes?limit=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
    s = None
    buf = b""
    while time.monotonic() < deadline:
        try:
            if s is None:
                s = socket.create_connection((host, port), timeout=5)
                buf = b""
            s.sendall(req)
            status, headers, body, buf = read_response(s, buf)
            res.add("request", status, body)
            if headers.get("connection", "").lower() == "close":
                s.close()
                s = None
        except (OSError, ValueError):
            res.add("request", "error")
            if s is not None:
                s.close()
            s = None
    if s is not None:
        s.close()


def main():
    host, port, seconds, attempts = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    keys = sys.argv[5:]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = attempts + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, want), max(hard, want)), max(hard, want)))
    deadline = time.monotonic() + seconds
    res = Results()
    left = [attempts]
    threads = [threading.Thread(target=stream_opener, args=(host, port, keys, deadline, left, res, i), daemon=True)
               for i in range(STREAM_THREADS)]
    threads += [threading.Thread(target=flooder, args=(host, port, keys, deadline, res, i), daemon=True)
                for i in range(FLOOD_THREADS)]
    print("started", flush=True)
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 10)
    held = len(res.held)
    for s in res.held:
        s.close()
    print(json.dumps({"counts": res.counts, "messages": res.messages, "held": held,
                      "attempted": attempts - left[0]}), flush=True)


if __name__ == "__main__":
    main()
