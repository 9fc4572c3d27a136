# SPDX-License-Identifier: MIT
"""The egress policy through the API and the CLI: the create request's
`network`, GET, PUT /v1/sandboxes/{id}/policy, `space create --allow`,
`space policy`; bad input is a clear 4xx and changes nothing. (What the
gateway does with a policy: tests/e2e/test_gateway.py.)"""

import json

import pytest

from e2e_daemon import assert_error_shape

EMPTY = {"allow": [], "deny": []}


def sandbox_count(spaced):
    return len(spaced.api("GET", "/v1/sandboxes", params={"limit": "1000"}).json()["sandboxes"])


def test_default_is_no_egress(spaced, sandbox):
    assert spaced.show(sandbox).json()["network"] == EMPTY


def test_create_with_policy_shows_canonical_form(spaced):
    sb = spaced.create(network={"allow": ["PyPI.org", "*.github.com", "192.168.7.0/24",
                                          {"host": "db.example.com", "ports": [5432, "8000-8100"]}],
                                "deny": ["gist.github.com"]})
    try:
        want = {"allow": [{"host": "pypi.org", "ports": [80, 443]}, {"host": "*.github.com", "ports": [80, 443]},
                          {"cidr": "192.168.7.0/24", "ports": [80, 443]},
                          {"host": "db.example.com", "ports": [5432, "8000-8100"]}],
                "deny": [{"host": "gist.github.com"}]}
        assert sb["network"] == want
        assert spaced.show(sb["id"]).json()["network"] == want
    finally:
        spaced.delete(sb["id"])


BAD = [
    ({"allow": ["*"]}, 400, "allow[0]: invalid host"),
    ({"allow": ["*.com"]}, 400, "top-level domain"),
    # an allow wildcard over an ICANN-section public suffix: anyone registers names there
    ({"allow": ["*.co.uk"]}, 400,
     "allow[0]: \"*.co.uk\" covers the public suffix \"co.uk\" (ICANN section of the Public Suffix List)"),
    ({"allow": ["a.example", {"host": "*.COM.AU.", "ports": [443]}]}, 400, "allow[1]: \"*.com.au\" covers"),
    ({"allow": ["*.xn--ciqpn.hk"]}, 400, "public suffix \"xn--ciqpn.hk\""),
    ({"allow": ["ok.example", "bad..example"]}, 400, "allow[1]: invalid host \"bad..example\""),
    ({"allow": ["10.0.0.1/8"]}, 400, "invalid CIDR"),
    ({"allow": ["10.0.0.0/33"]}, 400, "invalid CIDR"),
    ({"deny": ["2001:db8::1/32"]}, 400, "invalid CIDR"),
    ({"allow": [{"host": "a.example", "ports": [0]}]}, 400, "1-65535"),
    ({"allow": [{"host": "a.example", "ports": [65536]}]}, 400, "1-65535"),
    ({"allow": [{"host": "a.example", "ports": ["9-1"]}]}, 400, "LO-HI"),
    ({"allow": [{"host": "a.example", "cidr": "10.0.0.0/8"}]}, 400, "exactly one"),
    ({"allow": [{"host": "a.example", "port": 80}]}, 400, "unknown field \"port\""),
    ({"allow": "a.example"}, 400, "must be an array"),
    ({"alow": []}, 400, "unknown field \"alow\""),
    (["a.example"], 400, "must be an object"),
    ({"allow": [f"h{i}.example.org" for i in range(257)]}, 413, "more than 256"),
    ({"allow": [{"host": "a.example", "ports": list(range(1, 34))}]}, 413, "more than 32"),
    ({"allow": [{"cidr": "10.0.0.0/8", "proto": "udp"}]}, 400, "allow[0]: a udp entry must name its \"ports\""),
    ({"allow": [{"cidr": "10.0.0.0/8", "proto": "udp", "ports": [443]}]}, 400, "udp port 443 (QUIC) is never relayed"),
    ({"allow": [{"host": "a.example", "proto": "sctp", "ports": [1]}]}, 400, "allow[0].proto: \"tcp\" or \"udp\""),
    ({"deny": [{"host": "a.example", "proto": "UDP"}]}, 400, "deny[0].proto: \"tcp\" or \"udp\""),
    ({"allow": [{"host": "a.example", "proto": 17, "ports": [1]}]}, 400, "allow[0].proto"),
    ({"allow": ["x" * 60 + f".h{i}.example.org" for i in range(1000)]}, 413, "larger than 65536 bytes"),
    # allow entries the gateway's fixed refusals make void: they would read as permissions they are not
    ({"allow": ["169.254.169.254"]}, 400, "allow[0]: 169.254.169.254/32 is never reachable: every address in it is "
     "a link-local address (metadata), which the gateway refuses whatever the policy says"),
    ({"allow": ["a.example", {"cidr": "127.0.0.0/8", "ports": [80]}]}, 400, "allow[1]: 127.0.0.0/8 is never reachable"),
    ({"allow": ["fe80::/10"]}, 400, "fe80::/10 is never reachable: every address in it is a link-local address"),
    ({"allow": ["localhost"]}, 400, "allow[0]: \"localhost\" is never reachable: localhost names the loopback"),
    # an entry listed twice (the same target, transport and ports, however spelled), as for credentials
    ({"allow": ["a.example", "b.example", "A.Example."]}, 400,
     "allow[2]: the same entry as allow[0] (allow a.example:80,443); list each entry once"),
    ({"allow": ["10.9.0.0/16", {"cidr": "10.9.0.0/16", "ports": [443, 80]}]}, 400, "allow[1]: the same entry as allow[0]"),
    ({"deny": [{"host": "c.example", "proto": "udp"}, {"host": "c.example", "proto": "udp"}]}, 400,
     "deny[1]: the same entry as deny[0] (deny c.example/udp)"),
]


@pytest.mark.parametrize("policy,status,msg", BAD, ids=[b[2] for b in BAD])
def test_create_bad_policy_refused_nothing_created(spaced, policy, status, msg):
    before = sandbox_count(spaced)
    r = spaced.api("POST", "/v1/sandboxes", json={"network": policy})
    assert_error_shape(r, status, "invalid_argument" if status == 400 else "payload_too_large")
    assert msg in r.json()["error"]["message"], r.json()
    assert sandbox_count(spaced) == before


@pytest.mark.parametrize("policy,status,msg", BAD, ids=[b[2] for b in BAD])
def test_put_bad_policy_refused_nothing_changed(spaced, sandbox, policy, status, msg):
    good = {"allow": ["pypi.org"]}
    assert spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json=good).status == 200
    shown = spaced.show(sandbox).json()["network"]
    r = spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json=policy)
    if isinstance(policy, list):   # not an object: the body reader's own error
        assert_error_shape(r, 400)
    else:
        assert_error_shape(r, status, "invalid_argument" if status == 400 else "payload_too_large")
        assert msg in r.json()["error"]["message"], r.json()
    assert spaced.show(sandbox).json()["network"] == shown


def test_private_suffix_wildcards_exact_hosts_and_denials_are_accepted(spaced, sandbox):
    # "*.github.io" is one company's service (a legitimate egress choice);
    # names under an ICANN suffix and exact hosts are one owner's; a deny entry
    # may be as broad as it likes
    policy = {"allow": ["*.github.io", "*.s3.amazonaws.com", "*.example.co.uk", "co.uk"],
              "deny": ["*.co.uk", "*.foo.ck"]}
    r = spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json=policy)
    assert r.status == 200, r
    net = r.json()["network"]
    assert [a["host"] for a in net["allow"]] == policy["allow"], net
    assert [d["host"] for d in net["deny"]] == policy["deny"], net
    assert spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json={}).status == 200


def test_broad_ranges_and_denials_of_always_refused_addresses_are_accepted(spaced, sandbox):
    # a range that merely holds such addresses is an ordinary permission (the
    # gateway still refuses those inside it); a deny entry may name them
    policy = {"allow": ["0.0.0.0/0", "168.0.0.0/6", "::/0"],
              "deny": ["169.254.169.254", "127.0.0.0/8", "localhost"]}
    r = spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json=policy)
    assert r.status == 200, r
    net = r.json()["network"]
    assert [a["cidr"] for a in net["allow"]] == policy["allow"], net
    assert spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json={}).status == 200


def test_cli_allow_over_a_public_suffix_refused(spaced):
    before = sandbox_count(spaced)
    r = spaced.cli("create", "--allow", "*.co.uk")
    assert r.rc != 0 and "public suffix \"co.uk\"" in r.err, r
    assert sandbox_count(spaced) == before


def test_put_policy_replaces_and_is_an_event(spaced, sandbox):
    r = spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy",
                   json={"allow": ["deb.debian.org", {"cidr": "192.168.9.0/24", "ports": [22]}]})
    assert r.status == 200, r
    want = {"allow": [{"host": "deb.debian.org", "ports": [80, 443]}, {"cidr": "192.168.9.0/24", "ports": [22]}],
            "deny": []}
    assert r.json()["network"] == want
    assert spaced.show(sandbox).json()["network"] == want
    ev = spaced.api("GET", "/v1/events", params={"sandbox": sandbox, "type": "sandbox.network_policy"}).json()
    evs = ev["events"] if isinstance(ev, dict) else ev
    assert evs and json.loads(json.dumps(evs[-1]["data"])) == want
    # back to nothing
    r = spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json={})
    assert r.status == 200 and r.json()["network"] == EMPTY


def test_udp_rules_canonical_form(spaced, sandbox):
    r = spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy",
                   json={"allow": [{"cidr": "10.0.0.0/8", "proto": "udp", "ports": [5000, "6000-6010"]},
                                   {"host": "stun.example.org", "proto": "udp", "ports": [3478]},
                                   {"host": "db.example.org", "proto": "tcp", "ports": [5432]}],
                         "deny": [{"cidr": "10.9.0.0/16", "proto": "udp"}, "10.8.0.0/16"]})
    assert r.status == 200, r
    want = {"allow": [{"cidr": "10.0.0.0/8", "proto": "udp", "ports": [5000, "6000-6010"]},
                      {"host": "stun.example.org", "proto": "udp", "ports": [3478]},
                      {"host": "db.example.org", "ports": [5432]}],
            "deny": [{"cidr": "10.9.0.0/16", "proto": "udp"}, {"cidr": "10.8.0.0/16"}]}
    assert r.json()["network"] == want
    assert spaced.show(sandbox).json()["network"] == want
    assert spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json={}).status == 200


def test_put_policy_unknown_sandbox_and_other_tenant(spaced, sandbox):
    assert_error_shape(spaced.api("PUT", "/v1/sandboxes/nosuchsandbox000/policy", json={}), 404, "not_found")
    other = spaced.api("POST", "/v1/keys", json={"tenant": "netpol-other", "name": "k"}).json()["key"]
    r = spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json={"allow": ["evil.example"]}, key=other)
    assert_error_shape(r, 404, "not_found")
    assert spaced.show(sandbox).json()["network"] != {"allow": [{"host": "evil.example", "ports": [80, 443]}], "deny": []}


def test_cli_create_allow_and_policy(spaced):
    r = spaced.cli("create", "--allow", "pypi.org", "--allow", "files.example.org:443,8443",
                   "--allow-cidr", "192.168.7.0/24:5432", "--deny", "bad.pypi.org")
    assert r.rc == 0, r
    sid = r.out.strip()
    try:
        assert spaced.show(sid).json()["network"] == {
            "allow": [{"host": "pypi.org", "ports": [80, 443]}, {"host": "files.example.org", "ports": [443, 8443]},
                      {"cidr": "192.168.7.0/24", "ports": [5432]}],
            "deny": [{"host": "bad.pypi.org"}]}
        r = spaced.cli("policy", sid)
        assert r.rc == 0 and "pypi.org" in r.out and "192.168.7.0/24" in r.out and "deny" in r.out, r
        r = spaced.cli("policy", sid, "--remove", "pypi.org", "--allow", "*.debian.org")
        assert r.rc == 0, r
        net = spaced.show(sid).json()["network"]
        assert {"host": "pypi.org", "ports": [80, 443]} not in net["allow"]
        assert {"host": "*.debian.org", "ports": [80, 443]} in net["allow"]
        # bad input: the server's message, exit non-zero, nothing changed
        r = spaced.cli("policy", sid, "--allow", "*.com")
        assert r.rc != 0 and "top-level" in r.err, r
        assert spaced.show(sid).json()["network"] == net
        # UDP rules: "/udp" at the end; the table shows the protocol with the ports
        r = spaced.cli("policy", sid, "--allow-cidr", "10.0.0.0/8:5000-5010/udp", "--allow", "stun.example.org:3478/udp",
                       "--deny-cidr", "10.9.0.0/16/udp", "--deny", "db.example.org:5432/tcp")
        assert r.rc == 0, r
        assert "5000-5010/udp" in r.out and "3478/udp" in r.out, r
        net = spaced.show(sid).json()["network"]
        assert {"cidr": "10.0.0.0/8", "proto": "udp", "ports": ["5000-5010"]} in net["allow"], net
        assert {"host": "stun.example.org", "proto": "udp", "ports": [3478]} in net["allow"], net
        assert {"cidr": "10.9.0.0/16", "proto": "udp"} in net["deny"], net
        assert {"host": "db.example.org", "proto": "tcp", "ports": [5432]} in net["deny"], net
        r = spaced.cli("policy", sid, "--allow-cidr", "10.0.0.0/8/udp")
        assert r.rc != 0 and "must name its" in r.err, r
        r = spaced.cli("policy", sid, "--allow-cidr", "10.0.0.0/8:443/udp")
        assert r.rc != 0 and "QUIC" in r.err, r
        assert spaced.show(sid).json()["network"] == net
        r = spaced.cli("policy", sid, "--clear")
        assert r.rc == 0 and "no egress" in r.out, r
        assert spaced.show(sid).json()["network"] == EMPTY
        r = spaced.cli("--json", "policy", sid, "--show")
        assert r.rc == 0 and json.loads(r.out) == EMPTY, r
    finally:
        spaced.delete(sid)


def test_entries_that_differ_are_not_duplicates(spaced, sandbox):
    # the same host with other ports, another transport, or in the other list: each is an entry of its own
    policy = {"allow": ["a.example", {"host": "a.example", "ports": [5432]},
                       {"host": "a.example", "proto": "udp", "ports": [5000]}, "*.a.example"],
              "deny": ["a.example"]}
    r = spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json=policy)
    assert r.status == 200, r
    assert len(r.json()["network"]["allow"]) == 4 and len(r.json()["network"]["deny"]) == 1, r.json()
    assert spaced.api("PUT", f"/v1/sandboxes/{sandbox}/policy", json={}).status == 200


def test_cli_create_bad_allow_refused(spaced):
    before = sandbox_count(spaced)
    r = spaced.cli("create", "--allow", "exa mple.com")
    assert r.rc != 0 and "invalid" in r.err, r
    assert sandbox_count(spaced) == before


@pytest.mark.parametrize("flag,value,msg", [
    ("--default-network", '{"allow":["*.com"]}', "default_network: allow[0]: invalid host"),
    ("--default-network", "not json", "default_network: policy is not valid JSON"),
    ("--default-network", '{"allow":["*.co.uk"]}', "default_network: allow[0]: \"*.co.uk\" covers the public suffix"),
    ("--default-network", '{"allow":["169.254.169.254"]}', "default_network: allow[0]: 169.254.169.254/32 is never reachable"),
    ("--default-network", '{"allow":["a.example","a.example"]}', "default_network: allow[1]: the same entry as allow[0]"),
    ("--gateway-dns-upstream", "resolver.example:53", "gateway_dns_upstream: 'resolver.example:53' is not"),
    ("--gateway-dns-upstream", "10.0.0.1:0", "gateway_dns_upstream"),
    ("--gateway-udp-port", "10077", "gateway ports must differ"),      # 10077-10084 holds 10080 and 10081
    ("--gateway-udp-port", "65530", "gateway_udp_port"),

])
def test_spaced_refuses_bad_network_config(e2e_session, tmp_path, flag, value, msg):
    import subprocess
    r = subprocess.run([e2e_session.spaced_bin, "--state-dir", str(tmp_path / "state"), flag, value],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and msg in r.stderr, r
    assert not (tmp_path / "state").exists()


PSL_DIR = "/usr/share/publicsuffix"


def test_without_the_public_suffix_list_wildcard_credentials_are_refused(e2e_session, request):
    """A spaced in a mount namespace of its own where Debian's publicsuffix
    files are hidden (an empty tmpfs over their directory; the host's stay):
    it says so at start; a wildcard credential host is refused with 400
    naming the missing list (fail closed), on create and on PATCH; exact
    hosts work; policy wildcards are still checked with libpsl's built-in
    list (no file needed): *.co.uk refused."""
    import os
    import e2e_residue as residue
    if not os.path.exists(f"{PSL_DIR}/public_suffix_list.dat"):
        pytest.skip("Debian's publicsuffix package is not installed")
    d = e2e_session.new_daemon()
    real_args = d.args
    d.args = lambda: (["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                       f'mount -t tmpfs -o size=1m,mode=0755 tmpfs {PSL_DIR} && exec "$@"', "sh"] + real_args())
    d.start()
    try:
        assert "The Public Suffix List is incomplete" in d.log_text(), d.log_tail(40)
        r = d.api("POST", "/v1/credentials", json={"name": "pslgone", "value": "sk-psl-0123456789",
                                                   "hosts": ["*.example.com"]})
        assert_error_shape(r, 400, "invalid_argument")
        msg = r.json()["error"]["message"]
        assert "Public Suffix List" in msg and f"{PSL_DIR}/public_suffix_list.dat" in msg and "*.example.com" in msg, msg
        assert d.api("GET", "/v1/credentials/pslgone").status == 404
        r = d.api("POST", "/v1/credentials", json={"name": "pslexact", "value": "sk-psl-0123456789",
                                                   "hosts": ["api.example.com", "s3.amazonaws.com"]})
        assert r.status == 201, r
        r = d.api("PATCH", "/v1/credentials/pslexact", json={"hosts": ["*.example.org"]})
        assert_error_shape(r, 400, "invalid_argument")
        assert "Public Suffix List" in r.json()["error"]["message"], r
        assert d.api("GET", "/v1/credentials/pslexact").json()["hosts"] == ["api.example.com", "s3.amazonaws.com"]
        r = d.api("POST", "/v1/sandboxes", json={"network": {"allow": ["*.co.uk"]}})
        assert_error_shape(r, 400, "invalid_argument")
        assert "public suffix \"co.uk\"" in r.json()["error"]["message"], r
    finally:
        problems = residue.teardown_daemon(d)
        if not problems:
            residue.remove_daemon_dir(d)
    assert not problems, problems
    assert os.path.exists(f"{PSL_DIR}/public_suffix_list.dat")     # the host's list untouched
