"""The validators every config table shares: URLs, credentials and tokens, loopback hosts,
registry mirrors and booleans, each refused in one line at its boundary."""

from __future__ import annotations

import pytest

from envman.config.values import (
    Invalid, check_bool, check_registry_mirror, check_url, is_loopback_host, looks_like_token, redact, shown_url,
    split_credentials, token_in_path,
)

TOKEN = "ghp_" + "a" * 36


def test_credentials_are_split_from_a_url_and_never_shown():
    assert split_credentials("https://u:p@host.example/x") == ("https://host.example/x", "u", "p")
    assert split_credentials("https://host.example/x") == ("https://host.example/x", None, None)
    assert redact("https://u:secret@host.example/x") == "https://***@host.example/x"
    assert "secret" not in shown_url("https://u:secret@host.example/x")


@pytest.mark.parametrize("segment, token", [(TOKEN, True), ("glpat-" + "b" * 20, True), ("simple", False),
                                            ("0123abcd-0000-1111-2222-333344445555", True), ("cu121", False)])
def test_token_like_path_segments(segment, token):
    assert looks_like_token(segment) is token
    assert (token_in_path(f"https://host.example/{segment}/simple") == segment) is token


@pytest.mark.parametrize("url", ["https://pypi.example/simple", "https://pypi.example:65535/simple",
                                 "http://127.0.0.1:3141/simple", "http://[::1]:3141/simple", "http://localhost/simple"])
def test_accepted_urls_come_back_unchanged(url):
    assert check_url(url) == url


@pytest.mark.parametrize("url, word", [
    ("https://pypi.example:65536/simple", "65536"),  # one past the last port
    ("http://pypi.example/simple", "plain http"),  # unencrypted to another machine
    ("https://u:p@pypi.example/simple", "credentials"),
    ("https://pypi.example/sim\nple", "not an accepted URL"),
    ("https://pypi.example/\x1b[31m", "not an accepted URL"),
    ("", "non-empty"),
    (5, "non-empty"),
])
def test_refused_urls_say_why_in_one_line(url, word):
    with pytest.raises(Invalid) as exc:
        check_url(url)
    assert word in str(exc.value) and "\n" not in str(exc.value).replace("\\n", "")


def test_credentials_are_accepted_only_where_asked_for():
    assert check_url("https://u:p@pypi.example/simple", credentials=True) == "https://u:p@pypi.example/simple"


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.255.0.1", True), ("[::1]", True),
                                            ("localhost", True), ("10.0.0.1", False), ("pypi.example", False)])
def test_loopback_hosts(host, loopback):
    assert is_loopback_host(host) is loopback


def test_registry_mirror_is_a_host_with_an_optional_port_and_path_never_a_url():
    assert check_registry_mirror("mirror.example:5000") == "mirror.example:5000"
    assert check_registry_mirror("mirror.example:5000/path") == "mirror.example:5000/path"
    with pytest.raises(Invalid, match="scheme"):
        check_registry_mirror("https://mirror.example")


@pytest.mark.parametrize("value", ["true", 1, 0, None, "yes"])
def test_a_boolean_is_only_true_or_false(value):
    assert check_bool(True) is True and check_bool(False) is False
    with pytest.raises(Invalid, match="must be true or false"):
        check_bool(value)
