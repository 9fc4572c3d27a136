#!/usr/bin/env python3
"""Reaching into a sandbox: the ingress and the port forward against a direct
connection to the sandbox's own address, in the same run. p50/p90 of

  - a small GET on one keep-alive connection through the ingress, against a
    fresh marked connection per GET straight to the sandbox (what the
    ingress itself opens);
  - a 64-byte round trip on one upgraded stream: the ingress's Upgrade relay
    (what a WebSocket rides on), a WebSocket over HTTP/2 (RFC 8441, with
    python3-h2), the API's port forward (Upgrade: tcp), and a direct
    connection to the same echo server;
  - a 64 MiB download from the same HTTP server through each (MiB/s);
  - with h2load installed (nghttp2-client): the same small GET through the
    ingress by one h2load client on one connection, one request at a time,
    over HTTP/2 (h2c prior knowledge) and over HTTP/1.1 keep-alive (mean per
    request, requests/s); then 32 at a time: 32 streams on one HTTP/2
    connection (-c 1 -m 32) against 32 HTTP/1.1 connections (--h1 -c 32).

Run by bench/run.sh after bench.py (or by hand against any spaced as root:
--url, --key, --ingress HOST:PORT). Not a test: it reports."""
import argparse, http.client, json, os, shutil, socket, sys, time, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Api, pct  # noqa: E402

INGRESS_MARK = 0x73706163  # FIREWALL_INGRESS_MARK (src/net/firewall.h)
HTTP_PORT, ECHO_PORT, UPGRADE_PORT, WS_PORT = 8000, 9100, 9000, 9200
BIG = 64 << 20

UPGRADE_ECHO = r"""#!/bin/sh
while read -r l; do
  l=$(printf %s "$l" | tr -d '\r')
  [ -z "$l" ] && break
done
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n'
exec cat
"""

# a WebSocket handshake (RFC 6455 4.2.2), then an echo of raw bytes
WS_ECHO = r"""#!/bin/sh
key=
while read -r l; do
  l=$(printf %s "$l" | tr -d '\r')
  [ -z "$l" ] && break
  case "$l" in [Ss]ec-[Ww]eb[Ss]ocket-[Kk]ey:*) key=$(printf %s "${l#*:}" | tr -d ' ');; esac
done
acc=$(printf %s "${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11" | sha1sum | cut -c1-40 | xxd -r -p | base64)
printf 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
printf 'Sec-WebSocket-Accept: %s\r\n\r\n' "$acc"
exec cat
"""


def h2_ws_round_trips(ihost, iport, authority, token, n):
    """64 B round trips on a WebSocket over HTTP/2 (RFC 8441 extended CONNECT, h2c), or None
    without python3-h2."""
    try:
        import h2.config, h2.connection, h2.events
    except ImportError:
        return None
    s = socket.create_connection((ihost, int(iport)), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    s.sendall(conn.data_to_send())
    got, status = b"", None

    def pump():
        nonlocal got, status
        for ev in conn.receive_data(s.recv(65536)):
            if isinstance(ev, h2.events.ResponseReceived):
                status = dict(ev.headers)[":status"]
            elif isinstance(ev, h2.events.DataReceived):
                got += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamReset):
                raise RuntimeError("the WebSocket stream was reset")
        s.sendall(conn.data_to_send())
    while conn.remote_settings.enable_connect_protocol != 1:
        pump()
    conn.send_headers(1, [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
                          (":path", "/"), (":authority", authority), ("sec-websocket-version", "13"),
                          ("x-space-traffic-token", token)])
    s.sendall(conn.data_to_send())
    while status is None:
        pump()
    if status != "200":
        raise RuntimeError(f"WebSocket over HTTP/2 refused: {status}")
    msg, out = b"x" * 63 + b"\n", []
    for _ in range(n):
        t = time.perf_counter()
        conn.send_data(1, msg)
        s.sendall(conn.data_to_send())
        while len(got) < len(msg):
            pump()
        got = got[len(msg):]
        out.append(time.perf_counter() - t)
    s.close()
    return out


def sh(api, sid, script, background=False):
    body = {"cmd": ["/bin/sh", "-c", script]}
    if background:
        body["background"] = True
        return api.call("POST", f"/v1/sandboxes/{sid}/exec", body)
    api.conn.request("POST", f"/v1/sandboxes/{sid}/exec", body=json.dumps(body), headers=api.h)
    r = api.conn.getresponse()
    out = ""
    for line in r.read().decode().splitlines():
        ev = json.loads(line)
        if ev["type"] == "stdout":
            out += ev["data"]
    return out


def marked(addr, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, INGRESS_MARK)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(30)
    s.connect((addr, port))
    return s


def upgraded(host, port, head):
    s = socket.create_connection((host, port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(head.encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = s.recv(4096)
        if not c:
            raise RuntimeError(f"no answer to the upgrade: {buf!r}")
        buf += c
    head_, _, rest = buf.partition(b"\r\n\r\n")
    if b" 101 " not in head_.split(b"\r\n")[0]:
        raise RuntimeError(f"upgrade refused: {head_!r}")
    return s, rest


def round_trips(s, n, rest=b""):
    msg = b"x" * 63 + b"\n"
    out = []
    for _ in range(n):
        t = time.perf_counter()
        s.sendall(msg)
        got = rest
        rest = b""
        while len(got) < len(msg):
            got += s.recv(4096)
        out.append(time.perf_counter() - t)
    return out


def download(s, rest=b""):
    """GET /big on s (HTTP/1.0: the server closes at its end): MiB/s."""
    t = time.perf_counter()
    s.sendall(b"GET /big HTTP/1.0\r\nHost: x\r\n\r\n")
    n = len(rest)
    while True:
        c = s.recv(1 << 20)
        if not c:
            break
        n += len(c)
    if n < BIG:
        raise RuntimeError(f"short download: {n} bytes")
    return (BIG >> 20) / (time.perf_counter() - t)


def h2load(ihost, iport, host, token, n, h1=False, m=1, c=1):
    """(mean ms per request, max ms, requests/s) of h2load: n GETs of / on c connections, m in flight on each."""
    import re, subprocess
    args = ["h2load", "-n", str(n), "-c", str(c), "-m", str(m), "-H", f"X-Space-Traffic-Token: {token}"]
    args += ["-H", f":authority: {host}"] + (["--h1"] if h1 else [])
    r = subprocess.run(args + [f"http://{ihost}:{iport}/"], capture_output=True, text=True, timeout=300)
    if f"{n} succeeded" not in r.stdout:
        raise RuntimeError(f"h2load failed: {r.stdout}{r.stderr}")
    t = re.search(r"time for request:\s+\S+\s+(\d+\.?\d*)(us|ms|s)\s+(\d+\.?\d*)(us|ms|s)\b", r.stdout)
    rps = re.search(r"finished in .*?, (\d+\.?\d*) req/s", r.stdout)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    return float(t.group(3)) * scale[t.group(4)], float(t.group(1)) * scale[t.group(2)], float(rps.group(1))


def row(name, xs):
    return f"  {name:44s} p50 {pct(xs, 50) * 1000:7.3f} ms  p90 {pct(xs, 90) * 1000:7.3f} ms  (n={len(xs)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--ingress", required=True, help="the ingress's host:port")
    ap.add_argument("--runs", type=int, default=300)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    ihost, iport = a.ingress.rsplit(":", 1)
    api = Api(a.url, a.key)

    sb = api.call("POST", "/v1/sandboxes", {})
    sid = sb["id"]
    try:
        sh(api, sid, f"mkdir -p /srv && echo hello > /srv/index.html && httpd -p {HTTP_PORT} -h /srv && "
                     f"dd if=/dev/zero of=/srv/big bs=1M count={BIG >> 20} 2>/dev/null && "
                     f"cat > /srv/up.sh <<'EOF'\n{UPGRADE_ECHO}EOF\nchmod +x /srv/up.sh && "
                     f"cat > /srv/ws.sh <<'EOF'\n{WS_ECHO}EOF\nchmod +x /srv/ws.sh")
        sh(api, sid, f"exec nc -ll -p {WS_PORT} -e /srv/ws.sh", background=True)
        sh(api, sid, f"exec nc -ll -p {UPGRADE_PORT} -e /srv/up.sh", background=True)
        sh(api, sid, f"exec nc -ll -p {ECHO_PORT} -e cat", background=True)
        time.sleep(1)
        addr = sh(api, sid, "ip -4 addr | sed -n 's/.*inet \\([0-9.]*\\)\\/31.*/\\1/p'").strip()
        token = api.call("GET", f"/v1/sandboxes/{sid}/ports/{HTTP_PORT}")["token"]
        hosts = {p: f"{p}-{sid}.localhost" for p in (HTTP_PORT, UPGRADE_PORT, WS_PORT)}

        via, direct = [], []
        c = http.client.HTTPConnection(ihost, int(iport), timeout=30)
        h = {"Host": hosts[HTTP_PORT], "X-Space-Traffic-Token": token}
        for _ in range(a.runs):
            t = time.perf_counter()
            s = marked(addr, HTTP_PORT)
            s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
            while s.recv(65536):
                pass
            s.close()
            direct.append(time.perf_counter() - t)
            t = time.perf_counter()
            c.request("GET", "/", headers=h)
            c.getresponse().read()
            via.append(time.perf_counter() - t)
        c.close()

        auth = f"Authorization: Bearer {a.key}\r\n"
        up_head = (f"GET / HTTP/1.1\r\nHost: {hosts[UPGRADE_PORT]}\r\nX-Space-Traffic-Token: {token}\r\n"
                   "Connection: Upgrade\r\nUpgrade: echo\r\n\r\n")
        fwd_head = (f"GET /v1/sandboxes/{sid}/ports/{{port}}/connect HTTP/1.1\r\nHost: x\r\n{auth}"
                    "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
        s, rest = upgraded(ihost, int(iport), up_head)
        rt_ingress = round_trips(s, a.runs, rest)
        s.close()
        rt_h2_ws = h2_ws_round_trips(ihost, iport, hosts[WS_PORT], token, a.runs)
        s, rest = upgraded(u.hostname, u.port, fwd_head.format(port=ECHO_PORT))
        rt_forward = round_trips(s, a.runs, rest)
        s.close()
        s = marked(addr, ECHO_PORT)
        rt_direct = round_trips(s, a.runs)
        s.close()

        c = http.client.HTTPConnection(ihost, int(iport), timeout=60)
        t = time.perf_counter()
        c.request("GET", "/big", headers=h)
        r = c.getresponse()
        n = 0
        while True:
            k = r.read(1 << 20)
            if not k:
                break
            n += len(k)
        mb_ingress = (BIG >> 20) / (time.perf_counter() - t)
        c.close()
        if n < BIG:
            raise RuntimeError(f"short download through the ingress: {n} bytes")
        h2rows = []
        if shutil.which("h2load"):
            for name, h1, c, m, n in (("HTTP/2 (h2c)", False, 1, 1, a.runs), ("HTTP/1.1 keep-alive", True, 1, 1, a.runs),
                                      ("HTTP/2, -c 1 -m 32", False, 1, 32, 1000), ("HTTP/1.1, --h1 -c 32", True, 32, 1, 1000)):
                mean, worst, rps = h2load(ihost, iport, hosts[HTTP_PORT], token, n, h1=h1, m=m, c=c)
                h2rows.append(f"  {'h2load GET /: ' + name:44s} mean {mean:7.3f} ms  max {worst:8.1f} ms  {rps:8.0f} req/s")
        s, rest = upgraded(u.hostname, u.port, fwd_head.format(port=HTTP_PORT))
        mb_forward = download(s, rest)
        s.close()
        s = marked(addr, HTTP_PORT)
        mb_direct = download(s)
        s.close()
    finally:
        api.call("DELETE", f"/v1/sandboxes/{sid}")

    print(f"space ports ({a.runs} runs, {os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M:%S')})")
    print(row("GET / through the ingress (keep-alive)", via))
    print(row("GET / direct (a marked connection each)", direct))
    print(f"  {'ingress added per request':44s} p50 {(pct(via, 50) - pct(direct, 50)) * 1000:7.3f} ms")
    print(row("64 B round trip: ingress Upgrade relay", rt_ingress))
    if rt_h2_ws:
        print(row("64 B round trip: WebSocket over HTTP/2", rt_h2_ws))
    print(row("64 B round trip: port forward (API)", rt_forward))
    print(row("64 B round trip: direct", rt_direct))
    print(f"  {BIG >> 20} MiB download: ingress {mb_ingress:.0f} MiB/s, forward {mb_forward:.0f} MiB/s, "
          f"direct {mb_direct:.0f} MiB/s")
    for line in h2rows:
        print(line)


if __name__ == "__main__":
    main()
