# SPDX-License-Identifier: MIT
"""deploy/: the Kubernetes manifests and the systemd units, checked offline
against each other and against the spaced they run. No API server or
systemd is needed (none runs here): the YAML is parsed and checked for
structure and cross-references (selectors, ports, volumes, Secrets, the
ConfigMap), every SPACE_* variable and --flag must be a key of this spaced's
config table, the kustomization is built with kubectl where it is installed,
and the units pass `systemd-analyze verify`. The worker unit must not carry
an option that would put it in a mount namespace of its own or pass a
seccomp filter, capability bound or device policy on to the sandboxes."""

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(REPO, "deploy", "kubernetes")
SYSTEMD = os.path.join(REPO, "deploy", "systemd")
UNITS = ("spaced-all.service", "spaced-api.service", "spaced-controller.service", "spaced-worker.service")
# what the worker must not set on itself: each is inherited by the sandboxes
# or gives the unit a private mount namespace (the pool mount would vanish)
WORKER_FORBIDDEN = ("ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateMounts",
                    "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "TemporaryFileSystem",
                    "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
                    "ProtectClock", "ProtectHostname", "ProtectProc", "SystemCallFilter", "RestrictNamespaces",
                    "LockPersonality", "MemoryDenyWriteExecute", "RestrictSUIDSGID", "SystemCallArchitectures",
                    "CapabilityBoundingSet", "NoNewPrivileges", "DeviceAllow", "DevicePolicy", "PrivateNetwork",
                    "PrivateUsers", "RestrictAddressFamilies", "DynamicUser", "User")


# ---- helpers ----

def _config_keys(spaced_bin):
    """The keys of spaced's config table, from its --help."""
    out = subprocess.run([spaced_bin, "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
    keys = set(re.findall(r"^\s+--([a-z0-9_-]+)\s+SPACE_", out, re.M))
    keys = {k.replace("-", "_") for k in keys}
    assert {"role", "store_url", "cluster_token_file", "worker_listen"} <= keys, out[:2000]
    return keys


def _docs(name):
    with open(os.path.join(K8S, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def _manifests():
    with open(os.path.join(K8S, "kustomization.yaml")) as f:
        kust = yaml.safe_load(f)
    out = []
    for name in kust["resources"]:
        out += [(name, d) for d in _docs(name)]
    return kust, out


def _by_kind(docs, kind):
    return {d["metadata"]["name"]: d for _, d in docs if d["kind"] == kind}


def _pod_specs(docs):
    for _, d in docs:
        if d["kind"] in ("Deployment", "DaemonSet", "StatefulSet"):
            yield d, d["spec"]["template"]["spec"]


def _labels_match(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.fixture(scope="module")
def keys(e2e_session):
    e2e_session.check_binaries()
    return _config_keys(e2e_session.spaced_bin)


# ---- Kubernetes ----

def test_kubernetes_manifests_parse_and_reference_each_other(keys):
    kust, docs = _manifests()
    listed = set(kust["resources"])
    on_disk = {f for f in os.listdir(K8S) if f.endswith(".yaml") and f != "kustomization.yaml"}
    assert on_disk - listed == {"secrets.example.yaml"}, on_disk - listed   # nothing forgotten
    for name, d in docs:
        assert d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"), (name, d)
        assert "namespace" not in d["metadata"] or d["metadata"]["namespace"] == kust["namespace"], name
    assert kust["namespace"] in _by_kind(docs, "Namespace")

    secrets = {}
    for d in _docs("secrets.example.yaml"):
        assert d["kind"] == "Secret"
        secrets[d["metadata"]["name"]] = set(d.get("stringData", {})) | set(d.get("data", {}))
    configmaps = {n: d["data"] for n, d in _by_kind(docs, "ConfigMap").items()}
    for cm in configmaps.values():
        for k in cm:
            assert k.startswith("SPACE_") and k[6:].lower() in keys, f"ConfigMap: {k} is not a spaced key"
    image_names = {i["name"] for i in kust.get("images", [])}

    roles = {}
    for obj, spec in _pod_specs(docs):
        name = obj["metadata"]["name"]
        sel = obj["spec"]["selector"]["matchLabels"]
        assert _labels_match(sel, obj["spec"]["template"]["metadata"]["labels"]), name
        assert spec.get("automountServiceAccountToken") is False, f"{name}: space never talks to Kubernetes"
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            assert c["image"] in image_names, f"{name}: image {c['image']} is not set by the kustomization"
            args = c["args"]
            role = args[args.index("--role") + 1]
            roles[role] = (obj, spec, c)
            env_names = set()
            for e in c.get("env", []):
                env_names.add(e["name"])
                if e["name"].startswith("SPACE_"):
                    assert e["name"][6:].lower() in keys, f"{name}: {e['name']} is not a spaced key"
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets.get(ref["name"], ()), f"{name}: Secret {ref} is not described"
            for src in c.get("envFrom", []):
                assert src["configMapRef"]["name"] in configmaps, name
            for a in args:
                if a.startswith("--"):
                    assert a[2:].replace("-", "_") in keys, f"{name}: {a} is not a spaced flag"
                for var in re.findall(r"\$\(([A-Z_]+)\)", a):
                    assert var in env_names, f"{name}: $({var}) is not in the container's env"
            # every role reads the store URL from the Secret and the token from a file
            assert "SPACE_STORE_URL" in env_names, name
            mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
            for m in mounts.values():
                assert m["name"] in volumes, f"{name}: volume {m['name']} is not declared"
            tok = [m for m in mounts.values() if m["mountPath"] == "/etc/space/cluster.token"]
            assert len(tok) == 1, name
            # a plain file (spaced opens it O_NOFOLLOW), no access for group or others
            assert tok[0].get("subPath") == "cluster.token", name
            sv = volumes[tok[0]["name"]]["secret"]
            assert "cluster.token" in secrets[sv["secretName"]], name
            assert sv.get("defaultMode", 0o644) & 0o077 == 0, f"{name}: the token would be readable by others"
            cm = configmaps[c["envFrom"][0]["configMapRef"]["name"]]
            assert cm["SPACE_CLUSTER_TOKEN_FILE"] == tok[0]["mountPath"]
            # every role: its own certificate, key and the CA of the cluster's mutual TLS, from a Secret
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            tls = [m for m in mounts.values() if m["mountPath"] == "/etc/space/tls"]
            assert len(tls) == 1, f"{name}: the cluster TLS Secret is not mounted"
            sv = volumes[tls[0]["name"]]["secret"]
            assert sv.get("defaultMode", 0o644) & 0o077 == 0, f"{name}: the TLS key would be readable by others"
            assert {"ca.crt"} <= secrets[sv["secretName"]], name
            assert cm["SPACE_CLUSTER_TLS_CA"] == "/etc/space/tls/ca.crt"
            for k in ("SPACE_CLUSTER_TLS_CERT", "SPACE_CLUSTER_TLS_KEY"):
                assert env.get(k, "").startswith("/etc/space/tls/"), f"{name}: {k}"
            if role == "worker":   # a worker's certificate names it: one per node
                assert "$(NODE_NAME)" in env["SPACE_CLUSTER_TLS_CERT"], env
            # API servers and workers: the credentials' master key, a plain file only root reads
            if role in ("api", "worker"):
                mk = [m for m in mounts.values() if m["mountPath"] == cm["SPACE_MASTER_KEY_FILE"]]
                assert len(mk) == 1 and mk[0].get("subPath") == "master.key", name
                sv = volumes[mk[0]["name"]]["secret"]
                assert "master.key" in secrets[sv["secretName"]], name
                assert sv.get("defaultMode", 0o644) & 0o077 == 0, f"{name}: the master key would be readable by others"
    assert set(roles) == {"api", "controller", "worker"}, roles.keys()

    # the API: a Deployment of several behind a Service on its port
    api, api_spec, api_c = roles["api"]
    assert api["kind"] == "Deployment" and api["spec"]["replicas"] >= 2
    listen = api_c["args"][api_c["args"].index("--listen") + 1]
    port = int(listen.rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in api_c["ports"]}
    assert port in ports.values()
    services = _by_kind(docs, "Service")
    assert len(services) == 1
    svc = next(iter(services.values()))
    assert _labels_match(svc["spec"]["selector"], api["spec"]["template"]["metadata"]["labels"])
    for p in svc["spec"]["ports"]:
        assert p["targetPort"] in ports or p["targetPort"] in ports.values(), p
    # ready = store and workers reachable; live = the process answers (a database outage must not
    # become a restart loop of every API pod)
    assert api_c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api_c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert api_c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert api_c["securityContext"].get("privileged") is not True

    # controllers: more than one (the lease is a PostgreSQL advisory lock)
    ctl, _, ctl_c = roles["controller"]
    assert ctl["kind"] == "Deployment" and ctl["spec"]["replicas"] >= 2
    assert ctl_c["securityContext"].get("privileged") is not True
    # its liveness is tied to its loop: controller_listen's /healthz, on a declared port
    ctl_listen = ctl_c["args"][ctl_c["args"].index("--controller-listen") + 1]
    ctl_ports = {p["name"]: p["containerPort"] for p in ctl_c["ports"]}
    probe = ctl_c["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz"
    assert ctl_ports.get(probe["port"], probe["port"]) == int(ctl_listen.rsplit(":", 1)[1])

    # workers: one per node, privileged, with the node's devices, cgroups and state
    wk, wk_spec, wk_c = roles["worker"]
    assert wk["kind"] == "DaemonSet"
    assert wk_c["securityContext"]["privileged"] is True
    assert wk_spec["hostNetwork"] is True and wk_spec["hostPID"] is True
    host_paths = {v["hostPath"]["path"]: n for n, v in {v["name"]: v for v in wk_spec["volumes"]}.items()
                  if "hostPath" in v}
    mounts = {m["name"]: m for m in wk_c["volumeMounts"]}
    for path in ("/dev", "/sys/fs/cgroup", "/var/lib/space"):
        assert path in host_paths, f"worker: hostPath {path} missing"
        assert mounts[host_paths[path]]["mountPath"] == path
    assert mounts[host_paths["/var/lib/space"]].get("mountPropagation") == "Bidirectional"
    args = wk_c["args"]
    assert args[args.index("--state-dir") + 1] == "/var/lib/space"
    assert args[args.index("--worker-listen") + 1].endswith(":7071")
    assert wk_c["ports"][0]["containerPort"] == 7071
    assert wk["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1   # one node at a time
    # evicted and preempted last: a PriorityClass of the manifests, above the default
    pcs = _by_kind(docs, "PriorityClass")
    assert wk_spec["priorityClassName"] in pcs, wk_spec.get("priorityClassName")
    pc = pcs[wk_spec["priorityClassName"]]
    assert pc["value"] > 0 and pc.get("globalDefault") is not True

    # disruption budgets select real pods
    for pdb in _by_kind(docs, "PodDisruptionBudget").values():
        assert any(_labels_match(pdb["spec"]["selector"]["matchLabels"], o["spec"]["template"]["metadata"]["labels"])
                   for o, _ in _pod_specs(docs)), pdb["metadata"]["name"]


def test_kubernetes_kustomize_build():
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl is not installed (the structural checks above still ran)")
    r = subprocess.run([kubectl, "kustomize", K8S], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["Namespace", "ConfigMap", "Deployment", "Deployment", "DaemonSet", "Service",
                            "PodDisruptionBudget", "PodDisruptionBudget", "PriorityClass"]), kinds
    for d in docs:
        if d["kind"] not in ("Namespace", "PriorityClass"):   # cluster-scoped
            assert d["metadata"]["namespace"] == "space", d["metadata"]
        assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "space"
        if d["kind"] in ("Deployment", "DaemonSet"):
            image = d["spec"]["template"]["spec"]["containers"][0]["image"]
            assert image.endswith("/space:0.1.0"), image


def test_kubernetes_rotation_overlay(keys):
    """deploy/kubernetes-rotation: the base with the new master key mounted
    beside the current one, as master_key_file and master_key_previous_file,
    in the API servers and the workers (docs/operations.md, a cluster)."""
    with open(os.path.join(REPO, "deploy", "kubernetes-rotation", "previous-key.yaml")) as f:
        for d in yaml.safe_load_all(f):
            for k in d.get("data", {}):
                assert k.startswith("SPACE_") and k[6:].lower() in keys, f"{k} is not a spaced key"
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl is not installed (the keys above were still checked)")
    built = {}
    for where in ("kubernetes", "kubernetes-rotation"):
        r = subprocess.run([kubectl, "kustomize", os.path.join(REPO, "deploy", where)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        built[where] = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(r.stdout) if d}
    base, rot = built["kubernetes"], built["kubernetes-rotation"]
    assert set(base) == set(rot)
    cm = rot[("ConfigMap", "space-config")]["data"]
    cur, prev = cm["SPACE_MASTER_KEY_FILE"], cm["SPACE_MASTER_KEY_PREVIOUS_FILE"]
    assert cur != prev and prev == base[("ConfigMap", "space-config")]["data"]["SPACE_MASTER_KEY_FILE"]
    assert "SPACE_MASTER_KEY_PREVIOUS_FILE" not in base[("ConfigMap", "space-config")]["data"]
    for kind, name in (("Deployment", "space-api"), ("DaemonSet", "space-worker")):
        spec = rot[(kind, name)]["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        c = spec["containers"][0]
        for path, entry in ((cur, "master.key.new"), (prev, "master.key")):
            mk = [m for m in c["volumeMounts"] if m["mountPath"] == path]
            # a plain file of the Secret (spaced opens key files O_NOFOLLOW), read-only, root's only
            assert len(mk) == 1 and mk[0].get("subPath") == entry and mk[0].get("readOnly"), (name, path, mk)
            sv = volumes[mk[0]["name"]]["secret"]
            assert sv["secretName"] == "space-master-key", (name, sv)
            assert sv.get("defaultMode", 0o644) & 0o077 == 0, f"{name}: a master key would be readable by others"
        # the pod template changed (the rollout that gives each process both keys); nothing else did
        b = base[(kind, name)]["spec"]["template"]["spec"]
        assert b != spec
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["mountPath"] != cur]
        assert b == spec, name
    # the controllers hold no key: untouched
    assert rot[("Deployment", "space-controller")] == base[("Deployment", "space-controller")]


# ---- systemd ----

def _unit(name):
    """{section: [(key, value)]} of a unit file (comments and blank lines dropped)."""
    out, section = {}, None
    with open(os.path.join(SYSTEMD, name)) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                out[section] = []
                continue
            k, v = line.split("=", 1)
            out[section].append((k.strip(), v.strip()))
    return out


def test_systemd_units_verify(e2e_session, keys, tmp_path):
    sa = shutil.which("systemd-analyze")
    if not sa:
        pytest.skip("systemd-analyze is not installed")
    for name in UNITS:
        # the installed path of spaced becomes this build's, which verify checks
        with open(os.path.join(SYSTEMD, name)) as f:
            text = f.read()
        assert "/usr/local/sbin/spaced " in text
        (tmp_path / name).write_text(text.replace("/usr/local/sbin/spaced ", e2e_session.spaced_bin + " "))
    r = subprocess.run([sa, "verify", "--man=no"] + [str(tmp_path / n) for n in UNITS],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and not r.stderr.strip(), r.stdout + r.stderr


def test_systemd_units_roles_flags_and_hardening(e2e_session, keys, tmp_path):
    for name in UNITS:
        u = _unit(name)
        svc = dict(u["Service"])
        argv = svc["ExecStart"].split()
        assert argv[0] == "/usr/local/sbin/spaced"
        role = argv[argv.index("--role") + 1]
        assert name == f"spaced-{role}.service"
        for a in argv[1:]:
            if a.startswith("--") and a != "--config":
                assert a[2:].replace("-", "_") in keys, f"{name}: {a}"
        state = argv[argv.index("--state-dir") + 1]
        # restarted whatever it died of, however often (a database down for long is not a failed unit)
        assert svc["Restart"] == "always", name
        assert dict(u["Unit"]).get("StartLimitIntervalSec") == "0", name
        assert dict(u["Install"])["WantedBy"] == "multi-user.target"
        opts = {k for k, _ in u["Service"]}
        if role in ("worker", "all"):
            bad = opts & set(WORKER_FORBIDDEN)
            assert not bad, f"the {role} unit sets {bad}: inherited by sandboxes or a private mount namespace"
            assert svc["KillMode"] in ("mixed", "process"), "stopping the worker leaves its sandboxes running"
            assert state == "/var/lib/space"
            if role == "all":
                # restarted whatever it died of, however often
                assert svc["Restart"] == "always"
                assert dict(u["Unit"])["StartLimitIntervalSec"] == "0"
        else:
            # no namespaces, no capabilities: the strict set
            for k in ("ProtectSystem", "NoNewPrivileges", "PrivateDevices", "RestrictNamespaces",
                      "SystemCallFilter", "CapabilityBoundingSet", "ProtectKernelModules"):
                assert k in opts, f"{name}: {k} missing"
            assert svc["CapabilityBoundingSet"] == ""
            assert svc["ReadWritePaths"] == state, f"{name}: its state dir must stay writable"
            assert state != "/var/lib/space", f"{name}: /var/lib/space is the worker's"

    # the example configuration holds only keys spaced knows (spaced loads it)
    conf = os.path.join(SYSTEMD, "spaced.conf.example")
    r = subprocess.run([e2e_session.spaced_bin, "--config", conf, "--help"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    # an unknown key in it would have been refused: the check above can fail
    bad = tmp_path / "bad.conf"
    bad.write_text(open(conf).read() + "no_such_key = 1\n")
    r = subprocess.run([e2e_session.spaced_bin, "--config", str(bad), "--help"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0 and "no_such_key" in r.stderr, r.stderr


# ---- the container image ----

CONTAINERFILE = os.path.join(REPO, "deploy", "container", "Containerfile")
# sanitizer runtimes (a -Dsanitize=true build only) and libc6 (in every Debian image)
IMAGE_IMPLIED = {"libasan8", "libubsan1", "libc6"}


def _image_packages(text):
    """The packages the Containerfile's last stage installs with apt-get."""
    last = text[text.rindex("\nFROM "):]
    pkgs = set()
    for cmd in re.findall(r"apt-get install ([^&]*)", last.replace("\\\n", " ")):
        pkgs |= {w for w in cmd.split() if not w.startswith("-")}
    return pkgs


def _needed_packages(binary):
    """{library: Debian package} for each NEEDED entry of binary, found where the loader finds it."""
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                        subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True,
                                       timeout=60).stdout)
    where = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(["ldd", binary], capture_output=True, text=True,
                                                                   timeout=60).stdout, re.M))
    out = {}
    for lib in needed:
        path = where.get(lib)
        assert path, f"{binary}: the loader does not find {lib}"
        pkg = None
        for p in dict.fromkeys([path, os.path.realpath(path), "/usr" + path if path.startswith("/lib") else path]):
            r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True, timeout=60)
            if r.returncode == 0:
                pkg = r.stdout.split(":", 1)[0].strip()
                break
        assert pkg, f"{binary}: {lib} ({path}) belongs to no Debian package"
        out[lib] = pkg
    return out


def _missing_from_image(packages, needed):
    return {lib: pkg for lib, pkg in needed.items() if pkg not in packages and pkg not in IMAGE_IMPLIED}


def test_container_image_installs_every_linked_library(e2e_session):
    if not shutil.which("dpkg") or not shutil.which("readelf"):
        pytest.skip("needs dpkg and readelf (a Debian host)")
    with open(CONTAINERFILE) as f:
        packages = _image_packages(f.read())
    assert {"libpq5", "nftables"} <= packages, packages
    installed = subprocess.run(["meson", "introspect", "--installed", e2e_session.build_dir],
                                                capture_output=True, text=True, check=True, timeout=60).stdout
    binaries = [b for b in json.loads(installed) if os.path.isfile(b) and open(b, "rb").read(4) == b"\x7fELF"]
    assert any(b.endswith("/spaced") for b in binaries), installed
    for b in binaries:
        needed = _needed_packages(b)
        assert not _missing_from_image(packages, needed), \
            f"{os.path.basename(b)} links {_missing_from_image(packages, needed)}, which the image does not install"
    # the check can fail: an image without libnghttp2-14 is caught (spaced links it)
    spaced = _needed_packages(e2e_session.spaced_bin)
    assert spaced.get("libnghttp2.so.14") == "libnghttp2-14", spaced
    assert "libnghttp2.so.14" in _missing_from_image(packages - {"libnghttp2-14"}, spaced)
