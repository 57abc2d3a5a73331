"""The allow-list's proxy: what it lets through, decided on the request's head
(its whole path, through a Run, is tests/escapes/test_network.py)."""

from owl.sandbox import egress


def test_names_match_exactly_or_under_a_leading_dot():
    hosts = ["pypi.org", ".githubusercontent.com", "*.crates.io"]
    assert egress.allowed("pypi.org", hosts) and egress.allowed("PyPI.org.", hosts)
    assert egress.allowed("objects.githubusercontent.com", hosts)
    assert egress.allowed("static.crates.io", hosts)
    assert not egress.allowed("evilpypi.org", hosts)
    assert not egress.allowed("pypi.org.evil.com", hosts)
    assert not egress.allowed("githubusercontent.com.evil", hosts)


def test_connect_and_absolute_urls_are_read_and_anything_else_is_not():
    assert egress.target(b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n") == (
        "CONNECT",
        "pypi.org",
        443,
        b"",
    )
    assert egress.target(b"CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n")[1:3] == (
        "2001:db8::1",
        8443,
    )
    method, host, port, sent = egress.target(
        b"GET http://example.com:8080/a/b?c HTTP/1.1\r\nHost: example.com\r\n\r\n"
    )
    assert (method, host, port) == ("GET", "example.com", 8080)
    assert sent == b"GET /a/b?c HTTP/1.1\r\nHost: example.com\r\n\r\n"
    assert egress.target(b"GET /local HTTP/1.1\r\n\r\n") is None
    assert egress.target(b"garbage\r\n\r\n") is None


def test_a_name_that_resolves_to_the_machine_itself_is_refused():
    import pytest

    with pytest.raises(PermissionError, match="an address of this machine's"):
        egress._reachable("localhost", 9)
