# SPDX-License-Identifier: MIT
"""The base template's HTTP clients fetch through the gateway, from an upstream
in a network namespace this module creates (the upstreams fixture of
test_warm_network): busybox wget over plain HTTP, through the explicit proxy
and directly (redirected); curl over HTTPS through the proxy (CONNECT) and
directly. busybox wget's own TLS fails the handshake with the upstream (it
offers no signature algorithm the server takes), which is why the base
template ships curl."""

import secrets

import pytest

import e2e_residue as residue
from test_warm_network import ALLOWED, upstream, upstreams  # noqa: F401 (a fixture)


@pytest.mark.timeout(600)
def test_base_wget_through_the_gateway(e2e_session, upstreams):  # noqa: F811
    d = e2e_session.new_daemon(extra_args=[f"--gateway-dns-upstream={upstreams['dns']}"])
    d.start()
    problems = []
    try:
        sb = d.create(network={"allow": [ALLOWED]})
        try:
            tok = secrets.token_hex(6)
            for how, cmd in (("proxy", f"wget -q -O - http://{ALLOWED}/{tok}-proxy"),
                             ("direct", f"wget -q -Y off -O - http://{ALLOWED}/{tok}-direct"),
                             ("tls-proxy", f"curl -sS -k https://{ALLOWED}/{tok}-tls-proxy"),
                             ("tls-direct", f"curl -sS -k --noproxy '*' https://{ALLOWED}/{tok}-tls-direct")):
                r = d.exec(sb["id"], shell=cmd)
                assert r.code == 0 and f"hello host={ALLOWED}" in r.out, (how, r.code, r.out, r.err)
            got = sorted(e["path"] for e in upstream(upstreams["log"], tok))
            assert got == sorted(f"/{tok}-{h}" for h in ("proxy", "direct", "tls-proxy", "tls-direct")), got
        finally:
            d.delete(sb["id"])
    finally:
        problems = residue.teardown_daemon(d)
        if not problems:
            residue.remove_daemon_dir(d)
    assert not problems, problems
