# SPDX-License-Identifier: MIT
"""A real spaced on a temporary state directory, and the session that owns
every daemon, directory, cgroup root and process the tests create."""

import base64
import fcntl
import http.client
import ipaddress
import json as jsonlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import e2e_host as host
import e2e_http
import e2e_openapi

TMP_PREFIX = "space-e2e-"
CACHE_DIR = "/tmp/space-e2e-cache"
# Tests make many sandboxes of the default disk_mb (2048) on an 8 GiB pool: their quotas are
# overcommitted (the default 1.0 admits three). test_disk_admission.py runs its own at 1.0.
E2E_DISK_OVERCOMMIT = "100"
START_TIMEOUT = 300          # a first start formats the pool and imports the base template
STOP_TIMEOUT = 60
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "SUMMARY: AddressSanitizer", "SUMMARY: UndefinedBehaviorSanitizer",
                     "ERROR: ThreadSanitizer", "WARNING: ThreadSanitizer")
ID_RE = re.compile(r"^[a-z0-9]{4,63}$")
TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

ADMIN = object()   # the default: the daemon's bootstrap admin key

# Every daemon's network is its own: an nft table, a link-name prefix (letters
# and digits and one final '-', so no daemon's catch-all rule matches another's
# links) and a /19 of 10.64.0.0/10 (4,096 /31s = the default slots_max), taken
# by holding a lock file in the cache directory, so concurrent sessions never
# share a pool.
NET_POOL_BASE = (10 << 24) | (64 << 16)
NET_POOL_SIZE = 1 << 13
NET_POOLS = 512


def _b36(n):
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


INSTANCE_REGISTRY_DIR = "/run/space/instances"


def _cidr_range(cidr):
    """[first, last] address of an IPv4 CIDR as integers; None when it is not one."""
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return None
    if net.version != 4:
        return None
    return int(net.network_address), int(net.broadcast_address)


def registered_net_pools(registry_dir=INSTANCE_REGISTRY_DIR):
    """The net pools the host's spaced instance registry holds, as [first, last]
    ranges. An entry outlives its daemon while that daemon's sandboxes still
    run (a session that died), and spaced refuses a pool that overlaps one, so
    a pool in here is taken whoever holds its lock file. Unreadable or foreign
    files are skipped: they hold no pool spaced would honour either."""
    out = []
    try:
        names = os.listdir(registry_dir)
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(registry_dir, name), encoding="utf-8") as f:
                entry = jsonlib.load(f)
        except (OSError, ValueError):
            continue
        pool = entry.get("net_pool") if isinstance(entry, dict) else None
        r = _cidr_range(pool) if isinstance(pool, str) else None
        if r is not None:
            out.append(r)
    return out


def take_net_pool(registry_dir=INSTANCE_REGISTRY_DIR):
    """(index, open lock file) of a free pool; the lock lasts while the file is
    open. A pool another instance registered (see registered_net_pools) is
    skipped even when its lock file is free."""
    os.makedirs(CACHE_DIR, exist_ok=True)
    taken = registered_net_pools(registry_dir)
    for i in range(NET_POOLS):
        first, last = _cidr_range(net_pool_cidr(i))
        if any(first <= t_last and t_first <= last for t_first, t_last in taken):
            continue
        f = open(os.path.join(CACHE_DIR, f"net-pool-{i}.lock"), "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        return i, f
    raise RuntimeError(f"all {NET_POOLS} e2e network pools are taken")


def net_pool_cidr(i):
    b = NET_POOL_BASE + i * NET_POOL_SIZE
    return f"{b >> 24}.{(b >> 16) & 255}.{(b >> 8) & 255}.{b & 255}/19"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(extra=None):
    """The environment of a spaced or CLI child: no SPACE_* leaks in from the
    caller (spaced refuses unknown SPACE_* keys and would pick up others)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPACE_")}
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    # a small quarantine, so that RSS measurements mean something under ASan
    if "quarantine_size_mb" not in env["ASAN_OPTIONS"]:
        env["ASAN_OPTIONS"] += ":quarantine_size_mb=16"
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    if extra:
        env.update(extra)
    return env


class CliResult:
    def __init__(self, args, rc, out, err):
        self.args = args
        self.rc = rc
        self.outb = out
        self.errb = err
        self.out = out.decode("utf-8", "replace")
        self.err = err.decode("utf-8", "replace")

    def __repr__(self):
        return (f"<space {' '.join(self.args)} → rc {self.rc}\n stdout: {self.out[-2000:]!r}\n"
                f" stderr: {self.err[-2000:]!r}>")


class ExecResult:
    def __init__(self, response=None):
        self.response = response      # set when the request failed before the stream
        self.status = response.status if response is not None else 200
        self.events = []
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.start = None
        self.exit = None
        self.errors = []
        self.content_type = None
        self.stream_error = None

    @property
    def code(self):
        return None if self.exit is None else self.exit.get("code")

    @property
    def out(self):
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self):
        return self.stderr.decode("utf-8", "replace")

    def __repr__(self):
        if self.response is not None:
            return f"<exec failed: {self.response!r}>"
        ev = [e for e in self.events if e.get("type") not in ("stdout", "stderr")]
        return (f"<exec exit={self.exit} stream_error={self.stream_error} events={len(self.events)} "
                f"stdout_bytes={len(self.stdout)} stderr_bytes={len(self.stderr)} errors={self.errors}\n"
                f" other events={ev[:10]}\n"
                f" stdout tail={self.stdout[-300:]!r}\n stderr tail={self.stderr[-300:]!r}>")


class Session:
    """Everything the test session creates, for the residue checks and the
    final cleanup."""

    def __init__(self, repo):
        self.repo = repo
        self.build_dir = os.path.abspath(os.environ.get("SPACE_BUILD_DIR") or os.path.join(repo, "build"))
        self.spaced_bin = os.path.join(self.build_dir, "src", "spaced", "spaced")
        self.space_bin = os.path.join(self.build_dir, "src", "cli", "space")
        self.agent_bin = os.path.join(self.build_dir, "src", "agent", "space-agent")
        self.tag = f"{TMP_PREFIX}{os.getpid()}"
        self.daemons = []
        self.base_dirs = []
        self.extra_pids = []          # processes started outside Daemon (e.g. by 'space up'), by PID
        self.infra_paths = set()      # pool mounts and images of spaced started outside Daemon (a cluster)
        self.counter = 0
        self.notes = []               # measurements printed at the end of the run
        self.spec = e2e_openapi.load(repo)
        self._template = None
        self.start_netns = host.netns_list()
        self.start_links = host.links()
        # False while another session may make network namespaces and host
        # links at the same time (parallel sessions: conftest.py): they are
        # then judged only in the session that runs every module making them
        self.host_net_ours = True

    # ---- binaries and the base template ----
    def check_binaries(self):
        missing = [p for p in (self.spaced_bin, self.space_bin, self.agent_bin) if not os.access(p, os.X_OK)]
        if missing:
            raise RuntimeError("not built: " + ", ".join(missing) +
                               f" (meson setup {self.build_dir} -Dsanitize=true && ninja -C {self.build_dir};"
                               " or set SPACE_BUILD_DIR)")

    def base_template(self):
        """templates/base/build.sh OUT.tar, built once into the cache (again
        when the script is newer than the tarball)."""
        if self._template:
            return self._template
        script = os.path.join(self.repo, "templates", "base", "build.sh")
        if not os.path.exists(script):
            raise RuntimeError(f"{script} does not exist yet: cannot build the base template")
        os.makedirs(CACHE_DIR, exist_ok=True)
        out = os.path.join(CACHE_DIR, "base.tar")
        with open(os.path.join(CACHE_DIR, ".lock"), "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            if not os.path.exists(out) or os.path.getmtime(script) > os.path.getmtime(out):
                tmp = out + f".tmp{os.getpid()}"
                cmd = [script, tmp] if os.access(script, os.X_OK) else ["bash", script, tmp]
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                if r.returncode != 0 or not os.path.exists(tmp):
                    if os.path.exists(tmp):
                        os.unlink(tmp)
                    raise RuntimeError(f"{script} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
                os.rename(tmp, out)
        self._template = out
        return out

    def new_base_dir(self):
        d = tempfile.mkdtemp(prefix=TMP_PREFIX, dir="/tmp")
        os.chmod(d, 0o755)
        self.base_dirs.append(d)
        return d

    def new_daemon(self, **kw):
        self.check_binaries()
        n = self.counter
        self.counter += 1
        d = Daemon(self, n, **kw)
        self.daemons.append(d)
        return d

    def cgroup_prefix(self):
        return self.tag + "-"

    def validate(self, resp_or_stream, value=None):
        """Checks one JSON response (or one NDJSON line of a stream) against the spec."""
        if self.spec is None:
            return
        r = resp_or_stream
        schema = self.spec.response_schema(r.method, r.path, r.status, r.content_type)
        if schema is None:
            return
        if value is None:
            value = r.json()
        try:
            self.spec.validate(value, schema)
        except e2e_openapi.SpecError as e:
            raise e2e_openapi.SpecError(f"{r.method} {r.path} → {r.status}: {e}") from None


class Daemon:
    def __init__(self, session, n, *, uid_base=None, extra_args=(), netns=None, listen_host=None):
        self.s = session
        self.netns = netns            # run inside this network namespace (its API on listen_host)
        self.n = n
        self.base_dir = session.new_base_dir()
        self.state_dir = os.path.join(self.base_dir, "state")
        self.template_dir = os.path.join(self.base_dir, "templates")
        self.work_dir = os.path.join(self.base_dir, "work")
        self.log_path = os.path.join(self.base_dir, "spaced.log")
        for p in (self.state_dir, self.template_dir, self.work_dir):
            os.makedirs(p, exist_ok=True)
        os.chmod(self.state_dir, 0o700)
        self.cgroup_root = f"{session.tag}-{n}"
        self.port = free_port()
        self.host = listen_host or "127.0.0.1"
        self.url = f"http://{self.host}:{self.port}"
        self.ingress_port = free_port()   # the ingress (src/ingress): its own port, never the default 7072
        self.proc = None
        self.pid = None
        self.external = False
        self.admin_key = None
        self.keys = {}                # secret -> key id (every key we know, to list every tenant's sandboxes)
        self.known_alive = set()      # sandbox ids alive at the last successful listing
        self.extra_args = list(extra_args)
        # None: spaced chooses a uid range no other daemon on the host holds (its
        # instance, src/shared/instance.h); a given one overlapping a live
        # daemon's is refused at start
        self.uid_base = uid_base
        self.log_offset = 0
        self.starts = 0
        self.net_index, self._net_lock = take_net_pool()
        self.net_pool = net_pool_cidr(self.net_index)
        self.net_table = f"{session.tag}-{n}"
        self.net_prefix = f"e{_b36(os.getpid())}{_b36(n)}-"

    # ---- process ----
    def args(self):
        a = [self.s.spaced_bin, "--state-dir", self.state_dir, "--listen", f"{self.host}:{self.port}",
             "--template-dir", self.template_dir, "--agent-path", self.s.agent_bin,
             "--pool-size-mb", "8192", "--disk-overcommit", E2E_DISK_OVERCOMMIT, "--cgroup-root", self.cgroup_root,
             "--log-level", "debug"] + self.net_args()
        # 1024 slots: a uid range of 2^26 ids, so that many daemons of concurrent sessions find one
        a += ["--slots-max=1024", f"--ingress-listen={self.host}:{self.ingress_port}"]
        if self.uid_base is not None:
            a += [f"--uid-base={self.uid_base}"]
        if self.netns:   # setns and exec: the pid stays spaced's
            a = ["nsenter", f"--net=/run/netns/{self.netns}", "--"] + a
        return a + self.extra_args

    def net_args(self):
        return ["--net-pool", self.net_pool, "--net-table", self.net_table, "--net-link-prefix", self.net_prefix]

    def net_links(self):
        """This daemon's host-side links (its prefix)."""
        return {l for l in host.links(self.netns) if l.startswith(self.net_prefix)}

    def net_table_exists(self):
        return host.nft_table_exists(self.net_table, self.netns)

    def config_env(self):
        """The same configuration as SPACE_* variables (for 'space up')."""
        env = {"SPACE_TEMPLATE_DIR": self.template_dir, "SPACE_AGENT_PATH": self.s.agent_bin,
               "SPACE_POOL_SIZE_MB": "8192", "SPACE_DISK_OVERCOMMIT": E2E_DISK_OVERCOMMIT, "SPACE_CGROUP_ROOT": self.cgroup_root, "SPACE_LOG_LEVEL": "debug",
               "SPACE_NET_POOL": self.net_pool, "SPACE_NET_TABLE": self.net_table,
               "SPACE_NET_LINK_PREFIX": self.net_prefix}
        env["SPACE_SLOTS_MAX"] = "1024"
        if self.uid_base is not None:
            env["SPACE_UID_BASE"] = str(self.uid_base)
        return env

    def install_templates(self):
        tar = self.s.base_template()
        dst = os.path.join(self.template_dir, "base.tar")
        if not os.path.exists(dst):
            try:
                os.link(tar, dst)
            except OSError:
                shutil.copyfile(tar, dst)

    @property
    def running(self):
        if self.pid is None:
            return False
        if self.proc is not None:
            return self.proc.poll() is None
        return host.proc_exists(self.pid)

    def start(self, timeout=START_TIMEOUT):
        assert not self.running, "spaced already runs"
        self.install_templates()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== e2e: start #{self.starts} of spaced: {' '.join(self.args())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=clean_env(), start_new_session=True, close_fds=True)
        self.pid = self.proc.pid
        self.wait_healthy(timeout)
        self.load_admin_key()

    def wait_healthy(self, timeout=START_TIMEOUT):
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            if not self.running:
                rc = self.proc.returncode if self.proc else "?"
                raise RuntimeError(f"spaced exited during start (status {rc}):\n{self.log_tail(60)}")
            try:
                r = e2e_http.request(self.url, "GET", "/healthz", timeout=5)
                if r.status == 200:
                    return
                last = r
            except OSError as e:
                last = e
            time.sleep(0.2)
        raise RuntimeError(f"spaced not healthy after {timeout}s (last: {last!r}):\n{self.log_tail(60)}")

    def load_admin_key(self):
        path = os.path.join(self.state_dir, "admin.key")
        with open(path) as f:
            key = f.read().strip()
        assert key, f"{path} is empty"
        self.admin_key = key
        self.keys.setdefault(key, "bootstrap")

    def adopt(self, pid):
        """Takes over a spaced started by someone else (space up)."""
        self.proc = None
        self.pid = pid
        self.external = True
        self.s.extra_pids.append((pid, host.proc_starttime(pid)))
        self.starts += 1
        self.load_admin_key()

    def _not_sandbox(self, pids):
        tag = "/" + self.s.cgroup_prefix()
        return [p for p in pids if host.proc_exists(p) and not any(tag in c for c in host.proc_cgroups(p))]

    def worker_pids(self):
        """spaced's children outside every sandbox cgroup (the worker)."""
        if not self.pid:
            return []
        return self._not_sandbox(host.children(self.pid))

    def daemon_pids(self):
        """spaced and its helpers, not the sandboxes' processes."""
        if not self.running:
            return []
        return [self.pid] + self._not_sandbox(host.descendants(self.pid))

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM and wait. Returns a list of problems (exit status,
        sanitizer reports) rather than raising, so teardown can go on."""
        problems = []
        if not self.running:
            return problems
        os.kill(self.pid, signal.SIGTERM)
        rc = self._wait(timeout)
        if rc is None:
            problems.append(f"spaced (pid {self.pid}) did not stop within {timeout}s of SIGTERM; killed")
            self.kill9()
        elif rc != 0:
            problems.append(f"spaced exited with status {rc} after SIGTERM")
        problems += self.sanitizer_reports()
        self.pid = None
        self.proc = None
        return problems

    def _wait(self, timeout):
        if self.proc is not None:
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        left = host.wait_gone([self.pid], timeout)
        return None if left else 0

    def kill9(self):
        """kill -9 of spaced and its worker (the sandboxes keep running)."""
        if not self.pid:
            return
        pids = [self.pid] + self.worker_pids()
        for p in pids:
            host.kill_pid(p, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)
        host.wait_gone(pids, 30)
        # a worker forked just before the kill (not in pids) gets its parent-death signal and stops
        # on its own, holding the state directory's lock until it is gone
        host.wait_until(self._state_unlocked, 30)
        self.pid = None
        self.proc = None

    def _state_unlocked(self):
        try:
            fd = os.open(os.path.join(self.state_dir, "spaced.pid"), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    def restart(self, timeout=START_TIMEOUT):
        problems = self.stop()
        assert not problems, "stopping spaced for a restart: " + "; ".join(problems)
        self.start(timeout)

    # ---- log ----
    def log_text(self, start=0):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_size(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def log_tail(self, n=40, start=0):
        return "\n".join(self.log_text(start).splitlines()[-n:])

    def sanitizer_reports(self, start=0):
        text = self.log_text(start)
        lines = text.splitlines()
        hits = [i for i, l in enumerate(lines) if any(m in l for m in SANITIZER_MARKERS)]
        if not hits:
            return []
        i = hits[0]
        return [f"sanitizer report in {self.log_path}:\n" + "\n".join(lines[max(0, i - 2):i + 40])]

    # ---- API ----
    def api(self, method, path, json=None, data=None, headers=None, stream=False, key=ADMIN, params=None,
            raw_json=None, timeout=e2e_http.DEFAULT_TIMEOUT, validate=True):
        if key is ADMIN:
            key = self.admin_key
        r = e2e_http.request(self.url, method, path, json=json, data=data, headers=headers, key=key,
                             stream=stream, params=params, raw_json=raw_json, timeout=timeout)
        if not stream and validate:
            self.check_response(r)
        if not stream and method == "POST" and path.startswith("/v1/keys") and r.status == 201:
            try:
                self.keys[r.json()["key"]] = r.json().get("id")
            except (KeyError, TypeError):
                pass
        return r

    def check_response(self, r):
        """Every JSON response: valid JSON, errors shaped {"error":{"code","message"}},
        and the OpenAPI schema."""
        if r.content_type == "application/json":
            v = r.json()
            if r.status >= 400:
                assert_error_shape(r)
            self.s.validate(r, v)
        elif r.status >= 400 and r.method != "HEAD":
            raise AssertionError(f"{r.method} {r.path} → {r.status} with Content-Type '{r.content_type}', "
                                 f"not application/json: {r.body[:200]!r}")
        elif self.s.spec is not None:
            # not JSON: the status and media type must still be documented
            self.s.spec.response_schema(r.method, r.path, r.status,
                                        r.content_type if r.body else None)

    def early(self, method, path, body_iter, length=None, key=ADMIN, params=None,
              content_type="application/octet-stream", timeout=e2e_http.DEFAULT_TIMEOUT):
        if key is ADMIN:
            key = self.admin_key
        r, sent, err = e2e_http.request_early(self.url, method, path, body_iter=body_iter, length=length, key=key,
                                              params=params, content_type=content_type, timeout=timeout)
        if r is not None:
            self.check_response(r)
        return r, sent, err

    def create(self, key=ADMIN, **body):
        r = self.api("POST", "/v1/sandboxes", json=body, key=key, timeout=180)
        assert r.status == 201, f"create {body}: {r!r}"
        sb = r.json()
        assert ID_RE.match(sb.get("id", "")), sb
        self.known_alive.add(sb["id"])
        return sb

    def delete(self, sid, key=ADMIN):
        r = self.api("DELETE", f"/v1/sandboxes/{sid}", key=key, timeout=180)
        assert r.status == 200, f"delete {sid}: {r!r}"
        self.known_alive.discard(sid)
        return r.json()

    def show(self, sid, key=ADMIN):
        return self.api("GET", f"/v1/sandboxes/{sid}", key=key)

    def exec(self, sid, cmd=None, shell=None, key=ADMIN, timeout=300, **fields):
        body = dict(fields)
        if cmd is not None:
            body["cmd"] = cmd
        if shell is not None:
            body["shell"] = shell
        if key is ADMIN:
            key = self.admin_key
        s = e2e_http.request(self.url, "POST", f"/v1/sandboxes/{sid}/exec", json=body, key=key, stream=True,
                             timeout=timeout)
        if s.status != 200:
            body_bytes = s.read()
            s.close()
            r = e2e_http.Response(s.method, s.path, s.status, s.resp.reason, s.resp.getheaders(), body_bytes)
            self.check_response(r)
            return ExecResult(r)
        res = ExecResult()
        res.content_type = s.content_type
        try:
            for line in self._lines(s, res):
                line = line.strip()
                if not line:
                    continue
                try:
                    ev = jsonlib.loads(line)
                except ValueError:
                    raise AssertionError(f"exec stream: not a JSON line: {line[:300]!r}") from None
                self.s.validate(s, ev)
                res.events.append(ev)
                t = ev.get("type")
                if t in ("stdout", "stderr"):
                    if "data_b64" in ev:
                        chunk = base64.b64decode(ev["data_b64"], validate=True)
                    else:
                        chunk = ev["data"].encode("utf-8")
                    (res.stdout if t == "stdout" else res.stderr).extend(chunk)
                elif t == "start":
                    res.start = ev
                elif t == "exit":
                    res.exit = ev
                elif t == "error":
                    res.errors.append(ev)
        finally:
            s.close()
        res.stdout = bytes(res.stdout)
        res.stderr = bytes(res.stderr)
        return res

    @staticmethod
    def _lines(s, res):
        """The stream's lines; a broken stream ends them and is recorded."""
        try:
            yield from s.lines()
        except (http.client.HTTPException, OSError) as e:
            res.stream_error = f"the stream broke after {len(res.events)} events: {e!r}"

    def sh(self, sid, script, key=ADMIN, **kw):
        """Runs a shell script and insists on exit 0; returns stdout as text."""
        r = self.exec(sid, shell=script, key=key, **kw)
        assert r.response is None and r.code == 0, f"{script!r}: {r!r}"
        return r.out

    # ---- CLI ----
    def cli(self, *args, input=None, env=None, key=ADMIN, timeout=300, cwd=None):
        if key is ADMIN:
            key = self.admin_key
        e = {"SPACE_URL": self.url}
        if key is not None:
            e["SPACE_API_KEY"] = key
        e.update(env or {})
        if isinstance(input, str):
            input = input.encode()
        p = subprocess.run([self.s.space_bin, *args], input=input, capture_output=True, env=clean_env(e),
                           timeout=timeout, cwd=cwd, stdin=None if input is not None else subprocess.DEVNULL)
        return CliResult(list(args), p.returncode, p.stdout, p.stderr)

    # ---- sandboxes on the host ----
    def list_all(self):
        """Every sandbox of every tenant we hold a key for: {id: object}."""
        res = {}
        for key in list(self.keys):
            after = None
            for _ in range(1000):
                params = {"limit": 100}
                if after:
                    params["after"] = after
                r = e2e_http.request(self.url, "GET", "/v1/sandboxes", key=key, params=params, timeout=30)
                if r.status == 401:
                    del self.keys[key]
                    break
                if r.status != 200:
                    raise RuntimeError(f"listing sandboxes: {r!r}")
                v = r.json()
                for sb in v.get("sandboxes", []):
                    res[sb["id"]] = sb
                after = v.get("next")
                if not after:
                    break
        return res

    def alive_ids(self):
        if not self.running:
            return set(self.known_alive)
        try:
            ids = {i for i, sb in self.list_all().items() if sb.get("state") != "deleted"}
        except (OSError, RuntimeError, AssertionError):
            return set(self.known_alive)
        self.known_alive = ids
        return ids

    def cgroup_dirs(self, sid):
        res = []
        for root in host.cgroup_roots(self.cgroup_root):
            if os.path.basename(root) != self.cgroup_root:
                continue
            p = os.path.join(root, sid)
            if os.path.isdir(p):
                res.append(p)
        return res

    def sandbox_pids(self, sid):
        pids = set()
        for d in self.cgroup_dirs(sid):
            for sub in [d] + host.cgroup_tree(d):
                pids.update(host.cgroup_procs(sub))
        return sorted(p for p in pids if host.proc_exists(p))

    def agent_pid(self, sid):
        """The sandbox's PID 1 (space-agent), found through its cgroup."""
        pids = self.sandbox_pids(sid)
        for p in pids:
            if host.proc_nspid_last(p) == 1:
                return p
        for p in pids:
            if any("space-agent" in a for a in host.proc_cmdline(p)[:1]):
                return p
        return None

    def pool_path(self, *parts):
        return os.path.join(self.state_dir, "pool", *parts)

    def host_view(self, path):
        """A path as the worker sees it (its mount namespace may be private)."""
        for p in self.worker_pids():
            alt = f"/proc/{p}/root{path}"
            if os.path.exists(alt):
                return alt
        return path

    def subvolumes(self):
        d = self.host_view(self.pool_path("sandboxes"))
        try:
            return sorted(os.listdir(d))
        except OSError:
            return []


def assert_error_shape(r, status=None, code=None):
    """{"error":{"code":"...","message":"..."}} with a non-empty message."""
    assert r.content_type == "application/json", f"error without JSON: {r!r}"
    v = r.json()
    assert isinstance(v, dict) and set(v) == {"error"}, f"error body is not {{'error':{{...}}}}: {v}"
    e = v["error"]
    assert isinstance(e, dict) and isinstance(e.get("code"), str) and isinstance(e.get("message"), str), v
    assert set(e) <= {"code", "message", "details"}, f"unexpected keys in error: {v}"
    assert e["code"] and e["message"].strip(), f"empty error code or message: {v}"
    if status is not None:
        assert r.status == status, f"expected {status} {code or ''}, got {r!r}"
    if code is not None:
        assert e["code"] == code, f"expected error code {code}, got {e['code']}: {e['message']}"
    return e
