"""prbj.web.access: which Host headers and Origins name this machine, parsed the way an attacker would write
them (DNS rebinding, look-alike names, malformed headers)."""

from __future__ import annotations

import socket

import pytest

from prbj.web.access import HostPolicy, bearer, is_loopback, is_wildcard, same_token, split_host


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("127.0.0.1:8000", "127.0.0.1"),
        ("LOCALHOST.:80", "localhost"),
        ("[::1]:8000", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("viewer.example", "viewer.example"),
        ("::1", None),  # IPv6 without brackets is no Host
        ("127.0.0.1:80:80", None),
        ("127.0.0.1:abc", None),
        ("evil.example@127.0.0.1", None),
        ("127.0.0.1/x", None),
        ("[::1", None),
        ("[evil.example]:80", None),
        ("", None),
        ("a b", None),
    ],
)
def test_host_headers_are_parsed_strictly(header: str, name: str | None) -> None:
    assert split_host(header) == name


def test_each_bind_accepts_this_machine_and_nothing_else() -> None:
    hostname = socket.gethostname()
    loopback = HostPolicy.for_bind("127.0.0.2")
    everywhere = HostPolicy.for_bind("0.0.0.0", ["proxy.example."])
    lan = HostPolicy.for_bind("192.0.2.7")
    for policy in (loopback, everywhere, lan):
        assert policy.allows(f"{hostname}:1")
        for evil in ("rebind.evil.example:8765", "localhost.evil.example", "127.0.0.1.evil.example", "0"):
            assert not policy.allows(evil), evil
        assert not policy.allows(None)
        # The address a connection reached is accepted as the Host naming it, and only that one.
        assert policy.allows("10.1.2.3:8000", "10.1.2.3") and not policy.allows("10.1.2.4:8000", "10.1.2.3")
    assert loopback.allows("127.0.0.2:9") and loopback.allows("localhost:9") and loopback.allows("[::1]:9")
    assert everywhere.allows("localhost:9") and everywhere.allows("0.0.0.0:9")
    assert everywhere.allows("PROXY.example:443") and not lan.allows("proxy.example")
    assert lan.allows("192.0.2.7:9")


def test_origins_of_other_sites_are_refused() -> None:
    policy = HostPolicy.for_bind("127.0.0.1")
    assert policy.allows_origin("http://127.0.0.1:8765") and policy.allows_origin("https://localhost")
    for origin in ("null", "http://evil.example", "file://", "chrome-extension://abc", "http://[::1", ""):
        assert not policy.allows_origin(origin), origin


def test_binds_and_tokens() -> None:
    assert is_loopback("127.8.9.10") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1") and not is_loopback("example.org")
    assert is_wildcard("0.0.0.0") and is_wildcard("::") and is_wildcard("") and not is_wildcard("127.0.0.1")
    assert same_token("abc", "abc") and not same_token("abd", "abc") and not same_token("", "")
    assert not same_token(None, "abc") and not same_token("\udcff", "abc")
    assert bearer("Bearer  t0k ") == "t0k" and bearer("bearer t") == "t"
    assert bearer("Basic dDp0") is None and bearer("Bearer") is None and bearer(None) is None
