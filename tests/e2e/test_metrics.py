# SPDX-License-Identifier: MIT
"""Per-sandbox metrics: the worker's samples (CPU, memory, OOM kills, disk,
network) as GET /v1/sandboxes/{id}/metrics, E2B's /sandboxes/{id}/metrics and
/sandboxes/metrics, the per-sandbox families and the latency histograms of
/metrics (parsed as Prometheus text here), and log_format=json access lines.

The worker samples every 5 s: the tests wait for new samples with bounded
polls, never for a time."""

import json
import math
import os
import re
import threading
import uuid

import pytest

from e2e_daemon import ADMIN
import e2e_host as host
import e2e_residue as residue
from test_auth import make_key, new_tenant
from test_e2b_resume import e2b_create, rest

MiB = 1024 * 1024
SAMPLE_WAIT = 40  # seconds: several sampling intervals on a loaded host


@pytest.fixture(scope="module")
def d(e2e_session, request):
    dd = e2e_session.new_daemon(extra_args=["--log-format=json"])
    dd.start()
    yield dd
    residue.finish_daemon(dd, request)


@pytest.fixture(scope="module")
def sid(d):
    sb = d.create()
    yield sb["id"]
    if d.running:
        d.delete(sb["id"])


def series(d, sid, since=None, key=None):
    kw = {} if key is None else {"key": key}
    r = d.api("GET", f"/v1/sandboxes/{sid}/metrics", params={"since": since} if since else None, **kw)
    assert r.status == 200, r
    m = r.json()["metrics"]
    assert m, "a running sandbox has at least one sample"
    return m


def latest_after(d, sid, pred, timeout=SAMPLE_WAIT):
    """The first latest sample (taken after the call) for which pred holds."""
    seen = []

    def check():
        s = series(d, sid)[-1]
        seen.append(s)
        return s if pred(s) else None
    v = host.wait_until(check, timeout, interval=1.0)
    assert v, f"no sample satisfied the condition; the last: {seen[-1] if seen else None}"
    return v


# ---- a small Prometheus text parser ----

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (-?[0-9.eE+-]+|\+Inf|-Inf|NaN)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_prometheus(text):
    """{family: {"type":..., "samples": [(name, labels dict, value)]}}; raises on a bad line."""
    fams, types = {}, {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# TYPE "):
            _, _, name, t = line.split(" ", 3)
            assert t in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in types, f"TYPE twice for {name}"
            types[name] = t
            fams.setdefault(name, {"type": t, "samples": []})
            continue
        if line.startswith("#"):
            assert line.startswith("# HELP "), line
            continue
        m = SAMPLE_RE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        name, labels_text, value = m.group(1), m.group(3) or "", m.group(4)
        labels, pos = {}, 0
        while pos < len(labels_text):
            lm = LABEL_RE.match(labels_text, pos)
            assert lm, f"bad labels in {line!r}"
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        base = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and types.get(name[:-len(suffix)]) == "histogram":
                base = name[:-len(suffix)]
        assert base in types, f"sample {name} before its TYPE"
        fams[base]["samples"].append((name, labels, float(value)))
    return fams


def scrape(d, key=ADMIN):
    r = d.api("GET", "/metrics", key=key)
    assert r.status == 200, r
    assert r.content_type.startswith("text/plain"), r.content_type
    return parse_prometheus(r.body.decode())


def host_gauge(d, family):
    """The value of a gauge of one sample (no labels) from /metrics."""
    fam = scrape(d).get(family)
    assert fam is not None, f"no {family} in /metrics"
    assert fam["type"] == "gauge", fam
    (value,) = [v for _, _, v in fam["samples"]]
    return value


def of_sandbox(fams, family, sid, **labels):
    return [v for n, lab, v in fams.get(family, {"samples": []})["samples"]
            if lab.get("sandbox") == sid and all(lab.get(k) == x for k, x in labels.items())]


# ---- the series ----

def test_series_shape_and_since(d, sid):
    m = series(d, sid)
    s = m[-1]
    assert set(s) == {"time", "cpu_usage_s", "cpu_percent", "memory_bytes", "memory_limit_bytes", "oom_kills",
                      "disk_bytes", "disk_limit_bytes", "net_rx_bytes", "net_tx_bytes"}, s
    assert s["memory_bytes"] > 0 and s["cpu_usage_s"] is not None, s
    assert s["memory_limit_bytes"] == 512 * MiB, s  # the default limit
    times = [x["time"] for x in m]
    assert times == sorted(times)
    # since: only samples at or after it (a time in the future: none)
    r = d.api("GET", f"/v1/sandboxes/{sid}/metrics", params={"since": "2999-01-01T00:00:00Z"})
    assert r.status == 200 and r.json()["metrics"] == [], r
    assert series(d, sid, since=times[-1])[0]["time"] == times[-1]


def test_cpu_usage_rises_while_burning(d, sid):
    before = series(d, sid)[-1]["cpu_usage_s"]
    # a busy loop until it used 1.5 s of CPU (its own and its children's, in ticks of 10 ms): by CPU time, not
    # by the wall clock, which a loaded machine stretches
    d.sh(sid, "while :; do set -- $(cat /proc/$$/stat); [ $(( ${14} + ${15} + ${16} + ${17} )) -ge 150 ] && break; "
              "i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done; done", timeout=600)
    s = latest_after(d, sid, lambda s: s["cpu_usage_s"] >= before + 1.0)
    assert s["cpu_usage_s"] >= before + 1.0
    # and some sample saw the sandbox busy
    assert any((x["cpu_percent"] or 0) > 10 for x in series(d, sid)), series(d, sid)


def test_memory_shows_an_allocation(d, sid):
    # dd fills a 110 MiB buffer, then blocks writing it to a pipe nobody reads: held while the exec runs
    t = threading.Thread(target=lambda: d.exec(sid, shell="dd if=/dev/zero bs=110M count=1 2>/dev/null | sleep 20",
                                                timeout=120))
    t.start()
    try:
        s = latest_after(d, sid, lambda s: s["memory_bytes"] >= 100 * MiB)
        assert s["memory_bytes"] >= 100 * MiB
    finally:
        t.join(120)


def test_disk_after_writing(d, sid):
    base = series(d, sid)[-1]["disk_bytes"]
    if base is None:
        pytest.skip("this pool has no quotas: disk usage is not known")
    d.sh(sid, "dd if=/dev/urandom of=/root/fill bs=1M count=50 2>/dev/null && sync")
    s = latest_after(d, sid, lambda s: s["disk_bytes"] >= base + 50 * MiB - MiB)
    assert s["disk_limit_bytes"] == 2048 * MiB, s
    d.sh(sid, "rm -f /root/fill")


def test_network_bytes_after_dns(d, sid):
    s0 = series(d, sid)[-1]
    if s0["net_tx_bytes"] is None:
        pytest.skip("this sandbox has no network link")
    # DNS to the gateway (the answer may be a refusal: bytes flow either way)
    d.exec(sid, shell="for i in 1 2 3 4 5; do nslookup e2e-metrics.invalid >/dev/null 2>&1; done", timeout=120)
    s = latest_after(d, sid, lambda s: s["net_tx_bytes"] > s0["net_tx_bytes"] + 100
                     and s["net_rx_bytes"] > s0["net_rx_bytes"])
    assert s["net_tx_bytes"] > s0["net_tx_bytes"]
    # the gateway refused the lookups (no egress by default): its deny decisions are counted
    deny = lambda: of_sandbox(scrape(d), "space_sandbox_network_decisions_total", sid, verdict="deny")
    assert host.wait_until(lambda: deny() and deny()[0] >= 1, SAMPLE_WAIT, interval=1.0), deny()
    assert of_sandbox(scrape(d), "space_sandbox_network_decisions_total", sid, verdict="allow") == [0]


def test_oom_kill_counted(d):
    sb = d.create(memory_mb=32)
    try:
        assert series(d, sb["id"])[-1]["oom_kills"] == 0
        r = d.exec(sb["id"], shell="dd if=/dev/zero of=/dev/null bs=200M count=1", timeout=120)
        assert r.exit and r.exit.get("reason") == "oom", r
        s = latest_after(d, sb["id"], lambda s: s["oom_kills"] >= 1)
        assert s["memory_limit_bytes"] == 32 * MiB, s
        fams = scrape(d)
        assert of_sandbox(fams, "space_sandbox_oom_kills_total", sb["id"]) == [s["oom_kills"]]
    finally:
        d.delete(sb["id"])


# ---- bad input ----

def test_bad_since_is_400(d, sid):
    r = d.api("GET", f"/v1/sandboxes/{sid}/metrics", params={"since": "yesterday"})
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_argument", r
    assert "RFC 3339" in r.json()["error"]["message"]


def test_unknown_and_foreign_sandbox_404(d, sid):
    r = d.api("GET", "/v1/sandboxes/sbnosuchthing0/metrics")
    assert r.status == 404 and r.json()["error"]["code"] == "not_found", r
    k = make_key(d, tenant=new_tenant())
    r2 = d.api("GET", f"/v1/sandboxes/{sid}/metrics", key=k["key"])
    assert r2.status == 404 and r2.json()["error"]["code"] == "not_found", r2
    # the other tenant's /sandboxes/metrics leaves it out too
    r3 = rest(d, "GET", f"/sandboxes/metrics?sandbox_ids={sid}", key=k["key"])
    assert r3.status == 200 and r3.json() == {"sandboxes": {}}, r3


# ---- E2B ----

E2B_METRIC_KEYS = {"timestamp", "timestampUnix", "cpuCount", "cpuUsedPct", "memUsed", "memTotal", "memCache",
                   "diskUsed", "diskTotal"}


def check_e2b_metric(m):
    assert set(m) == E2B_METRIC_KEYS, m
    assert isinstance(m["cpuCount"], int) and m["cpuCount"] >= 1, m
    assert isinstance(m["cpuUsedPct"], (int, float)) and m["cpuUsedPct"] >= 0, m
    assert m["memUsed"] > 0 and m["memTotal"] >= m["memUsed"], m
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", m["timestamp"]), m


def test_e2b_metrics_endpoints(d):
    sb = e2b_create(d)
    sbid = sb["sandboxID"]
    try:
        r = rest(d, "GET", f"/sandboxes/{sbid}/metrics")
        assert r.status == 200, r
        ms = r.json()
        assert isinstance(ms, list) and ms, ms
        for m in ms:
            check_e2b_metric(m)
        # start/end (unix seconds) bound the series
        r = rest(d, "GET", f"/sandboxes/{sbid}/metrics?start=32503680000")
        assert r.status == 200 and r.json() == [], r
        r = rest(d, "GET", f"/sandboxes/{sbid}/metrics?start=soon")
        assert r.status == 400, r
        r = rest(d, "GET", f"/sandboxes/metrics?sandbox_ids={sbid},sbnosuchthing0")
        assert r.status == 200, r
        v = r.json()
        assert list(v["sandboxes"]) == [sbid], v
        check_e2b_metric(v["sandboxes"][sbid])
        r = rest(d, "GET", "/sandboxes/metrics")
        assert r.status == 400, r
        r = rest(d, "GET", "/sandboxes/nosuchsandbox0/metrics")
        assert r.status == 404, r
    finally:
        rest(d, "DELETE", f"/sandboxes/{sbid}")


# ---- /metrics ----

FAMILIES = ["space_sandbox_cpu_seconds_total", "space_sandbox_memory_bytes", "space_sandbox_oom_kills_total",
            "space_sandbox_disk_bytes", "space_sandbox_network_bytes_total"]


def test_prometheus_families_and_labels(d, sid):
    gone = d.create()["id"]
    series(d, gone)  # sampled
    d.delete(gone)
    fams = scrape(d)
    tenant = d.show(sid).json()["tenant"]
    for fam in FAMILIES[:3]:
        v = of_sandbox(fams, fam, sid)
        assert len(v) == 1, (fam, fams.get(fam))
        lab = [lab for _, lab, _ in fams[fam]["samples"] if lab.get("sandbox") == sid][0]
        assert lab["tenant"] == tenant, lab
    assert fams["space_sandbox_cpu_seconds_total"]["type"] == "counter"
    assert fams["space_sandbox_memory_bytes"]["type"] == "gauge"
    assert of_sandbox(fams, "space_sandbox_memory_bytes", sid)[0] > 0
    if series(d, sid)[-1]["net_tx_bytes"] is not None:
        assert len(of_sandbox(fams, "space_sandbox_network_bytes_total", sid, direction="tx")) == 1
        assert len(of_sandbox(fams, "space_sandbox_network_bytes_total", sid, direction="rx")) == 1
    # the pool and the worker's slots
    size = [v for _, lab, v in fams["space_pool_size_bytes"]["samples"] if lab.get("worker") == "local"]
    free = [v for _, lab, v in fams["space_pool_free_bytes"]["samples"] if lab.get("worker") == "local"]
    assert size and free and 0 < free[0] <= size[0], (size, free)
    assert fams["space_worker_sandboxes"]["samples"][0][2] >= 1
    assert fams["space_worker_slots"]["samples"][0][2] >= fams["space_worker_sandboxes"]["samples"][0][2]
    # a deleted sandbox has no series any more
    for fam in FAMILIES:
        assert not of_sandbox(fams, fam, gone), (fam, gone)
    assert gone not in json.dumps(fams)


def test_per_sandbox_series_need_a_key(d, sid):
    """ids and tenant names only for a scrape with a key: none without, a tenant's own with its key."""
    assert of_sandbox(scrape(d), "space_sandbox_memory_bytes", sid)
    anon = scrape(d, key=None)
    for fam in FAMILIES:
        assert not [lab for _, lab, _ in anon.get(fam, {"samples": []})["samples"] if "sandbox" in lab], fam
    assert "space_http_request_duration_seconds" in anon and "space_pool_size_bytes" in anon
    k = make_key(d, tenant=new_tenant())
    theirs = d.create(key=k["key"])["id"]
    try:
        other = scrape(d, key=k["key"])
        assert not of_sandbox(other, "space_sandbox_memory_bytes", sid)
        assert host.wait_until(lambda: of_sandbox(scrape(d, key=k["key"]), "space_sandbox_memory_bytes", theirs),
                               SAMPLE_WAIT, interval=1.0)
    finally:
        d.delete(theirs, key=k["key"])
    r = d.api("GET", "/metrics", key="sk_notakeynotakeynotakeynotakey")
    assert r.status == 401 and r.json()["error"]["code"] == "unauthorized", r


def test_histograms_have_buckets_and_counts(d, sid):
    d.sh(sid, "true")
    fams = scrape(d)
    h = fams["space_http_request_duration_seconds"]
    assert h["type"] == "histogram"
    routes = {lab["route"] for _, lab, _ in h["samples"]}
    assert "/v1/sandboxes/{id}/exec" in routes and "/v1/sandboxes" in routes, routes
    assert not any(sid in r for r in routes), routes  # ids never in a label
    for fam, label, want in (("space_http_request_duration_seconds", "route", "/v1/sandboxes/{id}/exec"),
                             ("space_operation_duration_seconds", "op", "create"),
                             ("space_operation_duration_seconds", "op", "exec_start")):
        samples = [(n, lab, v) for n, lab, v in fams[fam]["samples"] if lab.get(label) == want]
        buckets = [(lab["le"], v) for n, lab, v in samples if n.endswith("_bucket")]
        count = [v for n, _, v in samples if n.endswith("_count")]
        assert len(buckets) >= 5 and buckets[-1][0] == "+Inf", buckets
        vals = [v for _, v in buckets]
        assert vals == sorted(vals), buckets  # cumulative
        assert count and count[0] >= 1 and vals[-1] == count[0], (want, buckets, count)
        les = [float(le) for le, _ in buckets[:-1]]
        assert les == sorted(les) and not any(math.isnan(x) for x in les)
    assert fams["space_operation_duration_seconds"]["type"] == "histogram"


# ---- logs ----

def test_json_log_lines_have_fields(d, sid):
    tag = uuid.uuid4().hex[:8]
    start = d.log_size()
    d.api("GET", f"/v1/sandboxes/{sid}", headers={"X-E2E": tag})
    d.api("GET", "/healthz", key=None)
    d.api("GET", "/metrics", key=None)

    def lines():
        out = []
        for line in d.log_text(start).splitlines():
            if not line.strip() or line.startswith("===="):
                continue
            out.append(json.loads(line))  # every line is a JSON object
        return out
    got = host.wait_until(lambda: [v for v in lines() if v.get("msg") == "request"
                                   and v.get("path") == f"/v1/sandboxes/{sid}"], 10)
    assert got, lines()[-10:]
    v = got[-1]
    assert v["method"] == "GET" and v["status"] == 200 and isinstance(v["duration_ms"], (int, float)), v
    assert v["route"] == "/v1/sandboxes/{id}" and v["sandbox"] == sid and v["req"].startswith("r-"), v
    assert v["level"] == "info" and v["ts"].endswith("Z"), v
    # probes and scrapes are not logged by default
    assert not [x for x in lines() if x.get("path") in ("/healthz", "/metrics")], "probe requests were logged"


def test_grafana_dashboard_names_served_metrics(d, sid):
    """deploy/grafana/space.json is valid JSON and every metric it queries is one /metrics serves."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "grafana", "space.json")
    with open(path) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    titles = " ".join(p["title"] for p in dash["panels"]).lower()
    for want in ("sandboxes", "cpu", "memory", "latency", "create"):
        assert want in titles, (want, titles)
    names = set()
    for e in exprs:
        names |= set(re.findall(r"\bspace_[a-z_]+", e))
    fams = scrape(d)
    served = set(fams) | {"space_warm_pool_size"}  # that one only where a warm pool is configured
    for n in names:
        base = re.sub(r"_bucket$", "", n)
        assert base in served, f"the dashboard queries {n}, which /metrics does not serve"


def test_sampling_cost(d, e2e_session, sid):
    """The workers count what sampling costs them; with 6 sandboxes live, the CPU time per sample
    (one sandbox, one round) is reported among the e2e measurements. Nothing is asserted of it."""
    made = [d.create()["id"] for _ in range(5)]
    try:
        def totals():
            fams = scrape(d)
            return (fams["space_sandbox_sampling_cpu_seconds_total"]["samples"][0][2],
                    fams["space_sandbox_samples_total"]["samples"][0][2])
        cpu0, n0 = totals()
        assert host.wait_until(lambda: totals()[1] >= n0 + 6 * 3, 60, interval=1.0), "sampling stopped"
        cpu1, n1 = totals()
        assert cpu1 >= cpu0 and n1 > n0
        per = (cpu1 - cpu0) / (n1 - n0)
        e2e_session.notes.append(f"metrics sampling: {per * 1e6:.0f} µs CPU per sample per sandbox "
                                 f"({n1 - n0:.0f} samples, 6 live sandboxes, worker thread CPU time)")
    finally:
        for x in made:
            d.delete(x)
