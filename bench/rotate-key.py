#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What `spaced rotate-master-key` costs: a store (SQLite in a temporary
state directory, or a private PostgreSQL from tests/pg-test-server.sh) with
N credentials sealed under a master key (tests/cred-seal, the API's
sealing), then the rotation to a new key, timed (wall and the tool's CPU
from wait4's rusage), R times alternating between two keys.

    bench/rotate-key.py [--build build-release] [--n 1000] [--runs 3] [--backend sqlite|postgres|both]

Root (the tool runs as root). Prints one line per run."""

import argparse
import hashlib
import hmac
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABEL = b"space credentials master key fingerprint v1"


def fingerprint(key):
    return hmac.new(key, LABEL, hashlib.sha256).hexdigest()[:32]


def sealed_rows(build, state, n):
    seal = os.path.join(build, "tests", "cred-seal")
    rows = []
    for i in range(n):
        cid, name = f"cr_bench{i:08d}", f"bench{i}"
        out = subprocess.run([seal, state, cid, "tn_bench", name], input=f"sk-bench-{i:08d}", capture_output=True,
                             text=True, check=True).stdout
        s = json.loads(out)
        rows.append((cid, "tn_bench", name, '["api.example.com"]', "header", "Authorization", "Bearer {value}", "",
                     "", s["ciphertext"], s["nonce"], s["key_id"], 1, 1, 0, 0, 1))
    return rows


INSERT = ("INSERT INTO credentials (id, tenant_id, name, hosts_json, apply, header_name, header_format, basic_user, "
          "env_name, ciphertext, nonce, key_id, created_usec, updated_usec, expires_usec, revoked_usec, version) "
          "VALUES ")


def run_tool(build, state, url, cur, new):
    args = [os.path.join(build, "src", "spaced", "spaced"), "rotate-master-key", "--state-dir", state,
            "--master-key-file", cur, "--new-key", new] + (["--store-url", url] if url else [])
    t0 = time.monotonic()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, _, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read()
    return wall, ru.ru_utime + ru.ru_stime, err


def bench(backend, build, n, runs):
    state = tempfile.mkdtemp(prefix="space-bench-rotate.")
    url = None
    try:
        os.chmod(state, 0o700)
        rows = sealed_rows(build, state, n)   # makes <state>/master.key
        k1 = os.path.join(state, "master.key")
        k2 = os.path.join(state, "master.key.2")
        with open(os.open(k2, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(os.urandom(32))
        with open(k1, "rb") as f:
            fp = fingerprint(f.read())
        if backend == "postgres":
            url = subprocess.run(["sh", os.path.join(REPO, "tests", "pg-test-server.sh"), "start"], check=True,
                                 capture_output=True, text=True).stdout.strip()
        else:
            open(os.path.join(state, "space.db"), "w").close()
        run_tool(build, state, url, k1, k2)   # migrates the empty store, then refuses (no key on record)
        values = ",".join("(" + ",".join("'" + str(v).replace("'", "''") + "'" if isinstance(v, str) else str(v)
                                         for v in r) + ")" for r in rows)
        setting = f"INSERT INTO cluster_settings (name, value) VALUES ('master_key_fingerprint', '{fp}')"
        if url:
            subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", url], input=f"{INSERT}{values};\n{setting};\n",
                           check=True, capture_output=True, text=True)
        else:
            with sqlite3.connect(os.path.join(state, "space.db")) as c:
                c.execute(INSERT + values)
                c.execute(setting)
        keys = [k1, k2]
        for i in range(runs):
            cur, new = keys[i % 2], keys[(i + 1) % 2]
            wall, cpu, err = run_tool(build, state, url, cur, new)
            ok = "re-sealed" in err
            la = os.getloadavg()[0]
            print(f"{backend:8s} n={n} run {i + 1}: wall {wall * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms "
                  f"({cpu / n * 1e6:.0f} us/credential), load {la:.1f}{'' if ok else ' FAILED: ' + err[-300:]}")
    finally:
        if url:
            subprocess.run(["sh", os.path.join(REPO, "tests", "pg-test-server.sh"), "stop", url], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build-release"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backend", default="both", choices=["sqlite", "postgres", "both"])
    a = ap.parse_args()
    for b in (["sqlite", "postgres"] if a.backend == "both" else [a.backend]):
        bench(b, os.path.abspath(a.build), a.n, a.runs)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()
