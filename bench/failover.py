#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""space cluster failover benchmark: what a routine failure costs, in
seconds, on a cluster of two workers (each in its own network namespace,
mutual TLS), two API servers and two controllers on PostgreSQL:

- crash and restart: kill -9 of a worker holding N sandboxes (64 MiB each), started
  again at once (same name, new epoch): time until it serves again and until
  every one of the N answered an exec through the API (they never stopped);
- crash, stays down: kill -9 of a worker holding N sandboxes: time until
  the API shows every one of them `unreachable` (bounded below by
  worker_lost_timeout_s, which is printed beside it);
- recovery elsewhere: one of those unreachable sandboxes restored on the
  other worker from its shipped checkpoint: the restore call, and restore
  until its files answer an exec;
- controller hang: the leading controller stopped (SIGSTOP): time until the
  standby leads (bounded below by controller_lease_s).

Each scenario runs --rounds times; the table shows every round and the
median. Everything is private to the run and removed at the end (see
bench/cluster.py, whose set-up it shares). Not a test: it reports.

    bench/failover.py [--build-dir build-release] [--sandboxes 100] [--rounds 3]
                      [--lost-timeout-s 15] [--lease-s 10]
"""
import argparse
import http.client
import json
import os
import signal
import statistics
import time

from cluster import Api, Bench, run_bench  # noqa: E402


def exec_ok(api, sid, shell):
    """The exec's stdout when it exited 0, else None (NDJSON events)."""
    try:
        status, _, body = api.request("POST", f"/v1/sandboxes/{sid}/exec", {"shell": shell})
    except (OSError, http.client.HTTPException):
        return None
    if status != 200:
        return None
    data = body.decode()
    out, code = "", None
    for line in data.splitlines():
        ev = json.loads(line)
        if ev["type"] == "stdout":
            out += ev["data"]
        elif ev["type"] == "exit":
            code = ev["code"]
    return out if code == 0 else None


def children(pid):
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/children") as f:
            out += [int(x) for x in f.read().split()]
    return out


def wait_until(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise RuntimeError(f"timed out: {what}")


class Failover(Bench):
    def states(self, api):
        s, _, body = api.call("GET", "/v1/sandboxes?limit=1000")
        if s != 200:
            return {}
        return {sb["id"]: sb for sb in body["sandboxes"]}

    def create_on(self, api, n):
        made = []
        for _ in range(n):
            s, _, body = api.call("POST", "/v1/sandboxes", {"disk_mb": 256, "memory_mb": 64})
            if s != 201:
                raise RuntimeError(f"create: {s} {body}")
            made.append(body["id"])
        return made

    def kill9(self, name):
        """SIGKILL of the worker's spaced; its own processes follow it
        (parent-death signal) before it starts again, its sandboxes do not."""
        p = self.workers[name]
        kids = children(p.p.pid)
        os.kill(p.p.pid, signal.SIGKILL)
        p.p.wait(30)
        wait_until(lambda: not any(os.path.exists(f"/proc/{k}") for k in kids), 30, f"{name}'s processes gone")

    def restart(self, name):
        i = int(name[1:]) - 1
        self.workers[name] = self.start_worker(i, self.hosts[name])

    def all_answer(self, api, sids):
        pending = set(sids)

        def check():
            for sid in list(pending):
                if exec_ok(api, sid, "true") is not None:
                    pending.discard(sid)
            return not pending
        wait_until(check, 300, f"{len(pending)} sandboxes answering")

    def crash_restart(self, api, sids):
        """kill -9 of w1 and an immediate start: (serving s, all answered s)."""
        t0 = time.monotonic()
        self.kill9("w1")
        self.restart("w1")
        serving = time.monotonic() - t0
        self.all_answer(api, sids)
        return serving, time.monotonic() - t0

    def crash_down(self, api, sids):
        """kill -9 of w1, left down: s until all of sids are unreachable."""
        t0 = time.monotonic()
        self.kill9("w1")
        wait_until(lambda: all(self.states(api).get(s, {}).get("state") == "unreachable" for s in sids),
                   self.a.lost_timeout_s * 4 + 60, "the sandboxes unreachable")
        return time.monotonic() - t0

    def recover(self, api, sid):
        """Restore of an unreachable sandbox from its shipped checkpoint:
        (restore call s, restore until its file answered s)."""
        t0 = time.monotonic()
        s, _, body = api.call("POST", f"/v1/sandboxes/{sid}/restore", {"checkpoint": "kept"})
        call = time.monotonic() - t0
        if s != 200 or body["worker"] == "w1":
            raise RuntimeError(f"restore: {s} {body}")
        if exec_ok(api, sid, "cat /tmp/kept") != f"kept-{sid}\n":
            raise RuntimeError(f"restored {sid}: its file is not there")
        return call, time.monotonic() - t0

    def checkpoint_shipped(self, api, sid):
        if exec_ok(api, sid, f"echo kept-{sid} > /tmp/kept") is None:
            raise RuntimeError("exec before the checkpoint")
        s, _, body = api.call("POST", f"/v1/sandboxes/{sid}/checkpoints", {"name": "kept"})
        if s != 201:
            raise RuntimeError(f"checkpoint: {s} {body}")

        def shipped():
            s, _, ev = api.call("GET", f"/v1/events?sandbox={sid}&type=sandbox.checkpoint_shipped")
            return s == 200 and ev["events"]
        wait_until(shipped, 120, "the checkpoint shipped")

    def leader(self):
        """(the controller that leads now, the other), by the highest lease token in their logs."""
        def token(p):
            lines = [ln for ln in p.log().splitlines() if "now the active one (lease token" in ln]
            return int(lines[-1].rsplit("token ", 1)[1].split(")")[0]) if lines else -1
        wait_until(lambda: max(token(p) for p in self.controllers) >= 0, 60, "a leader")
        a = max(self.controllers, key=token)
        return a, next(p for p in self.controllers if p is not a)

    def takeover(self):
        """SIGSTOP of the leader: s until the standby leads; then SIGCONT (it steps down)."""
        active, standby = self.leader()
        mark = standby.log().count("now the active one")
        t0 = time.monotonic()
        os.kill(active.p.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: standby.log().count("now the active one") > mark, self.a.lease_s * 4 + 30,
                       "the standby leading")
            return time.monotonic() - t0
        finally:
            os.kill(active.p.pid, signal.SIGCONT)

    def main(self):
        a = self.a
        print(f"2 workers (mutual TLS, own network namespaces), 2 API servers, 2 controllers, PostgreSQL; "
              f"worker_lost_timeout_s {a.lost_timeout_s}, controller_lease_s {a.lease_s}, "
              f"{a.sandboxes} sandboxes on the failing worker; {os.cpu_count()} CPUs; build {self.build}",
              flush=True)
        self.start_pg()
        self.subnet = self.pick_subnet()
        self.workers = {"w1": self.start_worker(0)}
        url = self.start_api(1)
        with open(os.path.join(self.base, "api1", "admin.key")) as f:
            key = f.read().strip()
        url2 = self.start_api(2)
        self.controllers = [self.start_controller(1, a.lease_s), self.start_controller(2, a.lease_s)]
        api = Api(url, key)
        other = Api(url2, key)
        # every sandbox of the run on w1: it is the only worker while they are made
        sids = self.create_on(api, a.sandboxes)
        self.workers["w2"] = self.start_worker(1)
        time.sleep(1)   # w2's first heartbeat

        rows = {"crash_restart_serving_s": [], "crash_restart_all_answer_s": [], "unreachable_s": [],
                "restore_call_s": [], "restore_answer_s": [], "takeover_s": []}
        counts = {"crash_restart_all_answer_s": [], "unreachable_s": []}
        for r in range(a.rounds):
            counts["crash_restart_all_answer_s"].append(len(sids))
            serving, answered = self.crash_restart(other, sids)
            rows["crash_restart_serving_s"].append(serving)
            rows["crash_restart_all_answer_s"].append(answered)

            # one of w1's sandboxes with a checkpoint shipped to w2; w1 dies and stays down
            victim = sids.pop()
            self.checkpoint_shipped(api, victim)
            counts["unreachable_s"].append(len(sids) + 1)
            rows["unreachable_s"].append(self.crash_down(api, sids + [victim]))
            call, answered = self.recover(other, victim)
            rows["restore_call_s"].append(call)
            rows["restore_answer_s"].append(answered)
            api.call("DELETE", f"/v1/sandboxes/{victim}")
            # w1 back: it adopts the rest (their epoch is still its own)
            self.restart("w1")
            self.all_answer(api, sids)
            wait_until(lambda: all(self.states(api).get(s, {}).get("state") == "running" for s in sids), 60,
                       "w1's sandboxes running again")

            rows["takeover_s"].append(self.takeover())
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rows.items()), flush=True)

        print(f"\n{'what':<62} {'median':>8}  rounds", flush=True)
        def n(k):   # each round moves one sandbox off the failing worker
            return f"{max(counts[k])}" if min(counts[k]) == max(counts[k]) else f"{max(counts[k])}-{min(counts[k])}"
        labels = {
            "crash_restart_serving_s": "kill -9 + restart -> the worker serves again",
            "crash_restart_all_answer_s": f"kill -9 + restart -> all {n('crash_restart_all_answer_s')} "
                                          "sandboxes answered exec",
            "unreachable_s": f"kill -9, left down -> its {n('unreachable_s')} sandboxes unreachable",
            "restore_call_s": "restore elsewhere from the shipped checkpoint: the call",
            "restore_answer_s": "restore elsewhere -> its files answered exec",
            "takeover_s": "leader SIGSTOP -> the standby leads",
        }
        for k, v in rows.items():
            print(f"{labels[k]:<62} {statistics.median(v):>7.2f}s  " + ", ".join(f"{x:.2f}" for x in v), flush=True)
        for sid in list(self.states(api)):
            api.call("DELETE", f"/v1/sandboxes/{sid}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
        return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(os.path.dirname(__file__), "..", "build-release"))
    ap.add_argument("--template", default=None, help="base.tar (default: BUILD/templates/base.tar)")
    ap.add_argument("--sandboxes", type=int, default=100, help="sandboxes on the failing worker")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lost-timeout-s", type=int, default=15, help="worker_lost_timeout_s")
    ap.add_argument("--lease-s", type=int, default=10, help="controller_lease_s")
    ap.add_argument("--json", help="also write the rounds here")
    run_bench(Failover, ap.parse_args(), "bench/failover.py")


if __name__ == "__main__":
    main()
