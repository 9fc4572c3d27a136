# SPDX-License-Identifier: MIT
"""`space policy ID ...`, the real CLI against a real spaced, on a running
sandbox: what it shows, what each change does to the stored policy, and its
effect inside the sandbox (wget to a test host: a name that becomes allowed
reaches it, one removed or denied stops; a CIDR rule with ports lets a raw
address through on those ports only). Bad input: a one-line message, a
non-zero exit, the policy unchanged.

The test host (gateway_servers.py: DNS and HTTP on 80 and 8080) runs in a
network namespace this module creates, linked to the host by a veth; the
daemon's gateway asks its DNS server. Nothing leaves the host."""

import json
import secrets

import pytest

import e2e_residue as residue
from e2e_upstream import HttpsUpstream

A, B = "a.clipolicy.test", "b.clipolicy.test"
EMPTY = {"allow": [], "deny": []}


@pytest.fixture(scope="module")
def pnet(e2e_session, tmp_path_factory, request):
    up = HttpsUpstream("spcp", "172.25", tmp_path_factory.mktemp("clipolicy"), [A, B], "space e2e cli policy CA")
    d = None
    try:
        d = e2e_session.new_daemon(extra_args=[f"--gateway-dns-upstream={up.srv_ip}:53"])
        d.start()
        sid = d.create()["id"]
        yield {"d": d, "up": up, "sid": sid}
    finally:
        problems = residue.teardown_daemon(d) if d else []
        up.close()
        if d and not problems:
            residue.remove_daemon_dir(d)
        if problems:
            residue.teardown_failed(request, "cli policy daemon teardown:\n  " + "\n  ".join(problems))


def policy(net, *args):
    return net["d"].cli("policy", net["sid"], *args)


def stored(net):
    r = net["d"].show(net["sid"])
    assert r.status == 200, r
    return r.json()["network"]


def reaches(net, url):
    """Whether a wget in the sandbox gets url (ending in "/") from the test host, and the host saw it."""
    tok = secrets.token_hex(6)
    r = net["d"].exec(net["sid"], shell=f"wget -q -O - {url}{tok} 2>&1")
    got = bool(net["up"].requests(tok))
    assert got == (r.code == 0 and "hello" in r.out), (url, r, got)
    return got


def one_line_error(r, *needles):
    assert r.rc != 0, r
    assert r.out == "", r
    assert r.err.count("\n") == 1 and r.err.strip(), f"not a one-line error: {r!r}"
    for n in needles:
        assert n in r.err, r


def test_show_empty(pnet):
    assert policy(pnet, "--clear").rc == 0
    r = policy(pnet)
    assert r.rc == 0 and "no egress is allowed" in r.out, r
    r = pnet["d"].cli("--json", "policy", pnet["sid"])
    assert r.rc == 0 and json.loads(r.out) == EMPTY, r
    assert not reaches(pnet, f"http://{A}/")


def test_allow_remove_deny_take_effect_inside(pnet):
    r = policy(pnet, "--allow", A)
    assert r.rc == 0, r
    assert stored(pnet) == {"allow": [{"host": A, "ports": [80, 443]}], "deny": []}
    assert "allow" in r.out and A in r.out and "80,443" in r.out, r
    assert reaches(pnet, f"http://{A}/")
    assert not reaches(pnet, f"http://{B}/")

    # a second name added: both reach; the first keeps its rule
    r = policy(pnet, "--allow", f"{B}:80,8080")
    assert r.rc == 0, r
    assert stored(pnet)["allow"] == [{"host": A, "ports": [80, 443]}, {"host": B, "ports": [80, 8080]}]
    assert reaches(pnet, f"http://{B}:8080/")

    # removed: it stops at once (on the running sandbox), the other still reaches
    r = policy(pnet, "--remove", A)
    assert r.rc == 0 and A not in r.out, r
    assert stored(pnet)["allow"] == [{"host": B, "ports": [80, 8080]}]
    assert not reaches(pnet, f"http://{A}/")
    assert reaches(pnet, f"http://{B}/")

    # a wildcard allows both, a deny entry wins over it
    r = policy(pnet, "--allow", "*.clipolicy.test", "--deny", B)
    assert r.rc == 0, r
    net = stored(pnet)
    assert {"host": "*.clipolicy.test", "ports": [80, 443]} in net["allow"] and net["deny"] == [{"host": B}], net
    assert "deny" in r.out, r
    assert reaches(pnet, f"http://{A}/")
    assert not reaches(pnet, f"http://{B}/")

    # the deny entry removed: B reaches again
    r = policy(pnet, "--remove", B)
    assert r.rc == 0, r
    assert stored(pnet) == {"allow": [{"host": "*.clipolicy.test", "ports": [80, 443]}], "deny": []}
    assert reaches(pnet, f"http://{B}/")
    assert policy(pnet, "--clear").rc == 0
    assert not reaches(pnet, f"http://{A}/")


def test_cidr_with_ports_and_replace(pnet):
    ip = pnet["up"].srv_ip
    assert policy(pnet, "--clear").rc == 0
    assert not reaches(pnet, f"http://{ip}:8080/")           # a raw address needs a CIDR rule
    r = policy(pnet, "--allow-cidr", f"{ip}/32:8080")
    assert r.rc == 0 and f"{ip}/32" in r.out and "8080" in r.out, r
    assert stored(pnet) == {"allow": [{"cidr": f"{ip}/32", "ports": [8080]}], "deny": []}
    assert reaches(pnet, f"http://{ip}:8080/")
    assert not reaches(pnet, f"http://{ip}/")                 # port 80: not in the rule
    # a deny CIDR wins
    net30 = ip.rsplit(".", 1)[0] + "." + str(int(ip.rsplit(".", 1)[1]) & ~3)
    r = policy(pnet, "--deny-cidr", f"{net30}/30")
    assert r.rc == 0, r
    assert not reaches(pnet, f"http://{ip}:8080/")
    # a bare address is its /32, with a port too
    r = policy(pnet, "--clear", "--allow-cidr", f"{ip}:8080")
    assert r.rc == 0, r
    assert stored(pnet) == {"allow": [{"cidr": f"{ip}/32", "ports": [8080]}], "deny": []}
    assert reaches(pnet, f"http://{ip}:8080/")
    # replace: --clear with new entries is the whole new policy, in one change
    r = policy(pnet, "--clear", "--allow", A)
    assert r.rc == 0, r
    assert stored(pnet) == {"allow": [{"host": A, "ports": [80, 443]}], "deny": []}
    assert reaches(pnet, f"http://{A}/")
    assert not reaches(pnet, f"http://{ip}:8080/")
    # --json prints the sandbox as the server answered
    r = pnet["d"].cli("--json", "policy", pnet["sid"], "--allow", B)
    assert r.rc == 0, r
    assert json.loads(r.out)["network"] == stored(pnet) == {
        "allow": [{"host": A, "ports": [80, 443]}, {"host": B, "ports": [80, 443]}], "deny": []}
    assert policy(pnet, "--clear").rc == 0


@pytest.mark.parametrize("args,needles", [
    (["--allow", "exa mple.com"], ["invalid host"]),
    (["--allow", "-bad.example.com"], ["invalid host"]),
    (["--allow", "*.*.example.com"], ["invalid host"]),
    (["--deny", "bad_name..example"], ["invalid host"]),
    (["--allow-cidr", "10.0.0.0/33"], ["invalid CIDR"]),
    (["--allow-cidr", "300.1.2.0/24:80"], ["invalid CIDR"]),
    (["--allow-cidr", "10.0.0.0/8:0"], ["port"]),
    (["--allow-cidr", "10.0.0.0/8:70000"], ["port"]),
    (["--allow", "ok.example.com:80-"], ["port"]),
    (["--allow", "ok.example.com:443,,80"], ["ports[1]"]),
    (["--allow", "10.1.2.3"], ["an IP address is not a host: use a CIDR entry"]),   # asked for a host
    (["--deny", "10.1.2.0/24"], ["invalid host"]),
    (["--allow-cidr", "example.com"], ["invalid CIDR \"example.com\""]),          # asked for a CIDR
    (["--deny-cidr", "example.com:443"], ["invalid CIDR"]),
    (["--allow", "*.co.uk"], ["public suffix \"co.uk\""]),
    (["--allow", "*.com"], ["top-level"]),
    (["--allow", "*.github.io", "--allow", "*.co.uk"], ["allow[2]", "co.uk"]),
    (["--allow", A.upper()], ["allow[1]: the same entry as allow[0]", f"allow {A}:80,443", "list each entry once"]),
    (["--allow", f"{B}:443", "--allow", f"{B}:443"], ["allow[2]: the same entry as allow[1]"]),
])
def test_bad_input_is_refused_and_changes_nothing(pnet, args, needles):
    assert policy(pnet, "--clear", "--allow", A).rc == 0
    before = stored(pnet)
    r = policy(pnet, *args)
    one_line_error(r, *needles)
    assert stored(pnet) == before
    assert reaches(pnet, f"http://{A}/")                      # and the sandbox's policy in force too


def test_too_large_is_refused_and_changes_nothing(pnet):
    assert policy(pnet, "--clear", "--allow", A).rc == 0
    before = stored(pnet)
    many = [a for i in range(300) for a in ("--allow", f"h{i}.example.com")]
    r = policy(pnet, *many)
    one_line_error(r, "256")
    assert stored(pnet) == before
    # under the rule count, over the bytes: 250 names of 250 characters with 32 ports each
    ports = ",".join(str(60000 + p) for p in range(32))
    big = [a for i in range(250) for a in ("--deny", f"{'x' * 60}.{'y' * 60}.{'z' * 60}.{'w' * 55}.n{i:03}.example:{ports}")]
    r = policy(pnet, *big)
    one_line_error(r, "larger than")
    assert stored(pnet) == before


def test_unknown_sandbox_and_option_misuse(pnet):
    d = pnet["d"]
    r = d.cli("policy", "nosuchsandbox000")
    one_line_error(r, "no sandbox 'nosuchsandbox000'")
    r = d.cli("policy", "nosuchsandbox000", "--allow", A)
    one_line_error(r, "no sandbox 'nosuchsandbox000'")
    before = stored(pnet)
    one_line_error(d.cli("policy", pnet["sid"], "--show", "--allow", A), "--show")
    one_line_error(d.cli("policy", pnet["sid"], "--allow", ""), "non-empty")
    # a --remove that names no rule is a typo, not a success: nothing changes
    assert policy(pnet, "--clear", "--allow", A, "--deny", B).rc == 0
    before = stored(pnet)
    one_line_error(policy(pnet, "--remove", "c.clipolicy.test"), "--remove c.clipolicy.test", "no allow or deny rule")
    one_line_error(policy(pnet, "--remove", B, "--remove", f"{A}:80"), f"--remove {A}:80")
    assert stored(pnet) == before
    one_line_error(policy(pnet, "--clear", "--remove", A), "--clear")
    assert stored(pnet) == before
    # names as the user writes them: any case, a trailing dot
    r = policy(pnet, "--remove", A.upper() + ".", "--remove", B.capitalize())
    assert r.rc == 0 and "no egress is allowed" in r.out, r
    assert stored(pnet) == EMPTY
    before = stored(pnet)
    one_line_error(d.cli("policy"))
    one_line_error(d.cli("policy", pnet["sid"], "--frobnicate"))
    assert stored(pnet) == before


def test_create_deny_takes_hosts_and_cidrs(pnet):
    """space create --deny HOST|CIDR (one option for both): a name with a
    protocol, a CIDR with ports, a bare address."""
    d = pnet["d"]
    r = d.cli("create", "--allow", A, "--deny", "db.clipolicy.test/tcp", "--deny", "10.9.0.0/16:5432",
              "--deny", "10.1.2.3", "--deny", "x.clipolicy.test:22")
    assert r.rc == 0, r
    sid = r.out.strip()
    try:
        assert d.show(sid).json()["network"] == {
            "allow": [{"host": A, "ports": [80, 443]}],
            "deny": [{"host": "db.clipolicy.test", "proto": "tcp"}, {"cidr": "10.9.0.0/16", "ports": [5432]},
                     {"cidr": "10.1.2.3/32"}, {"host": "x.clipolicy.test", "ports": [22]}]}
    finally:
        d.delete(sid)
