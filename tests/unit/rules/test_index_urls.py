"""Security by rule: index URLs and registries.

Each table is the list the code uses (imported, not copied), so an entry dropped from the code fails here."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from envman.errors import UserError


TOKENS = st.from_regex(r"(ghp_|glpat-|hf_|pypi-)[A-Za-z0-9]{24}", fullmatch=True)


@given(TOKENS, st.sampled_from(["https://{t}@pypi.example/simple", "https://u:{t}@pypi.example/simple",
                                "https://pypi.example/simple?token={t}", "https://pypi.example/{t}/simple",
                                "https://{t}.pypi.example/simple", "https://pypi.example/simple#{t}",
                                "http://{t}@pypi.example/simple", "https://pypi.example/simple/{t}?x=1",
                                "ftp://{t}@x/", "https://pypi.example/a b/{t}"]),
       st.sampled_from(["pip_index", "pip_extra_index", "framework_index", "apt_mirror", "python_install_mirror"]))
@settings(max_examples=300, deadline=None)
def test_no_url_message_ever_echoes_a_token(token, template, key):
    from envman.config import Invalid, VALIDATORS, shown_url

    url = template.format(t=token)
    assert token not in shown_url(url)
    try:
        VALIDATORS[key](url)
    except Invalid as exc:
        assert token not in exc.what and token not in exc.fix


@given(st.ip_addresses(v=4))
@settings(max_examples=200, deadline=None)
def test_plain_http_only_to_loopback_by_rule_also_as_an_ipv4_mapped_address(addr):
    from envman.config import Invalid, check_url

    for host in (str(addr), f"[::ffff:{addr}]"):
        url = f"http://{host}:8080/simple"
        try:
            check_url(url, what="pip index")
            accepted = True
        except Invalid:
            accepted = False
        assert accepted == addr.is_loopback, url
        check_url(url.replace("http://", "https://"), what="pip index")  # https: any host


@pytest.mark.parametrize("url,ok", [("http://localhost/simple", True), ("http://[::1]:3141/simple", True),
                                    ("http://[fd00::1]/simple", False), ("http://pypi.corp.example/simple", False),
                                    ("http://apt.corp.example/ubuntu", False)])
def test_plain_http_indexes(url, ok):
    from envman.config import Invalid, VALIDATORS

    for key in ("pip_index", "pip_extra_index", "framework_index", "python_install_mirror"):
        if ok:
            VALIDATORS[key](url)
        else:
            with pytest.raises(Invalid, match="plain http"):
                VALIDATORS[key](url)
    VALIDATORS["apt_mirror"](url)  # apt checks every package's signature: plain HTTP is fine


@given(st.ip_addresses(v=4))
@settings(max_examples=200, deadline=None)
def test_a_registry_is_read_by_its_embedded_ipv4_address(addr):
    from envman.images.remote import Registry, check_transport, engine_uses_http, is_loopback

    cidrs = ("10.0.0.0/8", "127.0.0.0/8")
    plain, mapped = Registry(f"{addr}:5000"), Registry(f"[::ffff:{addr}]:5000")
    assert engine_uses_http(plain, cidrs, ()) == engine_uses_http(mapped, cidrs, ())
    assert is_loopback(f"::ffff:{addr}") == is_loopback(str(addr)) == addr.is_loopback
    if engine_uses_http(mapped, cidrs, ()) and not addr.is_loopback:
        with pytest.raises(UserError, match="plain HTTP"):
            check_transport(mapped, cidrs, (), allow_http=False)


def test_a_name_is_loopback_only_when_every_address_it_resolves_to_is(monkeypatch):
    import ipaddress

    from envman.images import remote

    answers = {"lo.example": ["127.0.0.1", "::1"], "mixed.example": ["127.0.0.1", "10.1.2.3"],
               "none.example": [], "mapped.example": ["::ffff:10.1.2.3"]}
    monkeypatch.setattr(remote, "_resolve", lambda h: [ipaddress.ip_address(a) for a in answers[h]])
    assert remote.is_loopback("lo.example")
    assert not remote.is_loopback("mixed.example") and not remote.is_loopback("none.example")
    assert not remote.is_loopback("mapped.example")
    with pytest.raises(UserError, match="plain HTTP"):
        remote.check_transport(remote.Registry("mixed.example:5000"), ("10.0.0.0/8",), (), allow_http=False)
