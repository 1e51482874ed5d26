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


# --------------------------------------------------------------------------- tokens in disguise

#: A Hugging Face token (``hf_`` and 34 letters: no digit, so only its prefix marks it).
_HF_TOKEN = "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"


def _refused_everywhere(segment: str) -> None:
    """``segment`` in an index URL's path and in a ``pkg @ https://...`` requirement's path is
    refused, and no message shows it."""
    from envman.config import Invalid, check_url, shown_url
    from envman.project.requirements import requirement_problem

    url = f"https://idx.example/{segment}/simple"
    with pytest.raises(Invalid) as e:
        check_url(url, what="pip index")
    assert segment not in str(e.value)
    assert segment not in shown_url(url)
    assert requirement_problem(f"pkg @ https://idx.example/{segment}/pkg-1.0.tar.gz") is not None


@pytest.mark.parametrize("encoded", [
    "%68f_" + _HF_TOKEN[3:],      # h as %68
    "h%66_" + _HF_TOKEN[3:],      # f as %66
    "%48F_" + _HF_TOKEN[3:],      # upper case too: tokens' prefixes are matched ignoring case
    "hf%5F" + _HF_TOKEN[3:],      # the underscore
    "%68%66%5f" + _HF_TOKEN[3:],  # every letter of the prefix
    "hf_" + "".join(f"%{ord(c):02X}" for c in _HF_TOKEN[3:]),  # the whole token after its prefix
    "%2568f_" + _HF_TOKEN[3:],    # encoded twice, for a proxy that decodes once more
    "x%3D" + _HF_TOKEN,           # an encoded separator before the prefix
    "a%2F" + _HF_TOKEN,           # an encoded slash: a segment boundary to the server
])
def test_a_percent_encoded_token_in_any_url_is_refused_as_the_token_itself(encoded):
    """Attack: the token rule looked at a URL's path segments as written, but every HTTP server
    (and pip's index client) reads them percent-decoded. ``https://host/%68f_<token>/simple`` is
    ``/hf_<token>/`` to the index, yet it passed ``check_url`` (config index URLs, matrix rows'
    ``index_url``/``find_links``, recipe URLs) and a project's ``pkg @ https://...`` requirement,
    and was then written into the image (and shown unmasked in messages)."""
    import urllib.parse

    assert _HF_TOKEN.lower() in urllib.parse.unquote(urllib.parse.unquote(encoded)).lower()
    _refused_everywhere(_HF_TOKEN)
    _refused_everywhere(encoded)


@pytest.mark.parametrize("segment", [f"token={_HF_TOKEN}", f"x:{_HF_TOKEN}", f"+{_HF_TOKEN}", f"key.{_HF_TOKEN}",
                                     f"x-{_HF_TOKEN}", f"x_{_HF_TOKEN}", f"a,{_HF_TOKEN}", f"~{_HF_TOKEN}",
                                     f"k={_HF_TOKEN}.tar.gz", f"{_HF_TOKEN}.whl", "id=glpat-" + "Ab3dEf6hIj9kLm2nOp5q",
                                     "t=AKIA" + "ABCDEFGHIJKLMNOP", "key=123e4567-e89b-12d3-a456-426614174000"])
def test_a_known_token_prefix_inside_a_path_segment_is_refused(segment):
    """Attack: ``looks_like_token`` matched a known prefix (``hf_``, ``ghp_``, ...) only at the
    start of a whole path segment, and a UUID only as the whole segment, and its random-run rule
    needs a digit. A Hugging Face token (letters only) after ``token=``, ``x:``, ``+`` or ``key.``
    in a segment (``https://idx.example/token=hf_.../simple``, a common form for proxies that take
    the token in the path) passed every URL rule and was written into the image. An archive name
    is no disguise either."""
    _refused_everywhere(segment)


@pytest.mark.parametrize("segment", [
    "hf_" + "Q" * 16,                     # 19 characters from the prefix: one short of a token
    "x=hf_" + "Q" * 16,
    "shf_" + "Q" * 30,                    # the prefix inside a word is no prefix
    "mask-rcnn-hf_q",                     # after a separator, but short
    "hf_transfer-0.1.8-cp38-abi3-manylinux_2_17_x86_64.whl",  # a real wheel of a package named hf_...
    "scikit_learn-1.5.2-cp311-cp311-manylinux_2_17_x86_64.whl",
    "simple%2Ftorch",                     # decoding alone is no token
    "123e4567-e89b-12d3-a456-42661417400",  # one hex digit short of a UUID
    "ml-pypi-virtual-repository",         # a repository manager's name of words after a separator
    "api/pypi/team-pypi-remote-repository",
    "t=AKIA" + "ABCDEFGHIJKLMNO",          # 19 from the prefix: one short
])
def test_names_that_only_resemble_a_token_are_taken(segment):
    from envman.config import check_url, looks_like_token
    from envman.project.requirements import requirement_problem

    assert not looks_like_token(segment)
    assert check_url(f"https://idx.example/{segment}/simple") == f"https://idx.example/{segment}/simple"
    assert requirement_problem(f"pkg @ https://idx.example/{segment}/pkg-1.0.tar.gz") is None


def test_a_token_is_twenty_characters_from_its_prefix():
    from envman.config import looks_like_token

    assert looks_like_token("x=hf_" + "Q" * 17) and not looks_like_token("x=hf_" + "Q" * 16)
    assert looks_like_token("%68f_" + "Q" * 17) and not looks_like_token("%68f_" + "Q" * 16)
    # after a separator, a digit or a capital letter marks a token's body; at the start the prefix alone
    assert looks_like_token("x-pypi-virtual-repositorY") and looks_like_token("x-pypi-virtual-repository1")
    assert not looks_like_token("x-pypi-virtual-repository") and looks_like_token("pypi-virtual-repository")
    assert looks_like_token("x=glpat-" + "a-b_" * 5) is False and looks_like_token("x=glpat-" + "a-B_" * 5)
