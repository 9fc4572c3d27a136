"""A test host for the credential tests: a network namespace of its own with
a veth /30 to the host, running gateway_servers.py (DNS and HTTPS with a CA
made here, every request logged as a JSON line). Its addresses are
172.<16-bit prefix>.x.1 (host end) and .2 (the server), x chosen at random.

    up = HttpsUpstream("spcw", "172.29", tmp, ["api.test"], "space e2e upstream CA")
    ...  # --gateway-dns-upstream={up.srv_ip}:53 --gateway-ca-file={up.ca_pem}
    up.close()

close() before the daemon's teardown: that checks the host for anything left."""
import json
import os
import random
import secrets
import subprocess

SERVERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gateway_servers.py")
PY = "/usr/bin/python3"


def sh(*args):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, timeout=60)


class HttpsUpstream:
    def __init__(self, prefix, net16, tmp, zone_names, ca_cn, cert_names=None):
        """zone_names: the names its DNS answers with its address; cert_names:
        those its certificate names (default: zone_names; the first is its CN)."""
        tag = secrets.token_hex(3)
        self.ns, self.link = f"{prefix}-{tag}", f"{prefix}{tag}"
        octet = random.randrange(16, 250)
        self.host_ip, self.srv_ip = f"{net16}.{octet}.1", f"{net16}.{octet}.2"
        self.tmp = str(tmp)
        self.ca_pem = f"{tmp}/ca.pem"
        self.log = f"{tmp}/upstream.log"
        self.proc = None
        cert_names = list(cert_names or zone_names)
        try:
            self._start(ca_cn, cert_names, {"_listen": [self.srv_ip], **{n: [self.srv_ip] for n in zone_names}})
        except BaseException:
            self.close()
            raise

    def _start(self, ca_cn, cert_names, zone):
        ns, link, tmp = self.ns, self.link, self.tmp
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "addr", "add", f"{self.host_ip}/30", "dev", link)
        sh("ip", "link", "set", link, "up")
        sh("ip", "-n", ns, "addr", "add", f"{self.srv_ip}/30", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
           f"/CN={ca_cn}", "-keyout", f"{tmp}/ca.key", "-out", self.ca_pem)
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cert_names[0]}",
           "-keyout", f"{tmp}/srv.key", "-out", f"{tmp}/srv.csr")
        with open(f"{tmp}/ext", "w") as f:
            f.write("subjectAltName=" + ",".join(f"DNS:{n}" for n in cert_names) + "\n")
        sh("openssl", "x509", "-req", "-in", f"{tmp}/srv.csr", "-CA", self.ca_pem, "-CAkey", f"{tmp}/ca.key",
           "-CAcreateserial", "-days", "2", "-extfile", f"{tmp}/ext", "-out", f"{tmp}/srv.pem")
        open(self.log, "w").close()
        # nsenter, not `ip netns exec` (its mount namespace would hold a copy of the pool's mount)
        self.proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "--", PY, SERVERS, self.log,
                                      f"{tmp}/srv.pem", f"{tmp}/srv.key", json.dumps(zone)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        os.chmod(tmp, 0o755)

    def requests(self, token):
        """The HTTP requests that reached it with token in their path."""
        with open(self.log) as f:
            return [e for e in (json.loads(ln) for ln in f if ln.strip())
                    if e.get("kind") == "http" and token in e["path"]]

    def close(self):
        if self.proc:
            self.proc.stdin.close()
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        subprocess.run(["ip", "link", "del", self.link], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
