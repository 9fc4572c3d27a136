#!/usr/bin/env python3
"""Runs bench/e2b-bench.mjs (the E2B JS SDK: Sandbox.create -> first output
of commands.run('echo hi'), beside the same path through /v1) against a
private spaced of --build-dir (default build-release) on a temporary state
directory, with a warm pool of the base template of --warm sandboxes (0: no
warm pool, every create is cold), and cleans up. Not a test: it reports.

  python3 bench/e2b.py --warm 0 --runs 100     # cold creates
  python3 bench/e2b.py --warm 2 --runs 100     # creates from the warm pool
  python3 bench/e2b.py --warm 2 --full         # ... each once the pool is full again

Extra arguments after -- go to spaced (e.g. -- --debug-timing=1)."""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lifecycle import Api, Daemon  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=None)
    ap.add_argument("--warm", type=int, default=0, help="warm pool size of base (0: none)")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--full", action="store_true",
                    help="with a warm pool: each create waits until the pool is full (no refill in flight)")
    ap.add_argument("spaced_args", nargs="*")
    a = ap.parse_args()
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.path.abspath(a.build_dir or os.path.join(top, "build-release"))
    daemon = Daemon(build, warm=a.warm, extra=a.spaced_args)
    try:
        env = dict(os.environ, E2B_API_URL=daemon.url, E2B_SANDBOX_URL=daemon.url, E2B_API_KEY=daemon.key)
        print(f"spaced {build} (warm_pool = base:{a.warm})", flush=True)
        wait = ["--wait-ready", str(a.warm)] if a.full and a.warm else []
        r = subprocess.run(["node", os.path.join(top, "bench", "e2b-bench.mjs"), "--runs", str(a.runs), *wait],
                           env=env)
        if r.returncode != 0:
            sys.exit(r.returncode)
    finally:
        daemon.stop(Api(daemon.url, daemon.key))


if __name__ == "__main__":
    main()
